/* forward_decide.c - a forwarded request's head to the guard's decision.
 *
 * The parser (http1.h) says the target's form; the guard says everything
 * about what an absolute-form target holds, its scheme included:
 *   - a CONNECT after forwarded requests, or a target not in absolute form
 *     (origin form "/path", "*"): origin_form, before the guard;
 *   - any other target is a URL for ph_decide_url_memo (one parse: the
 *     decision's host, port and path span are the request's from then on);
 *     the guard's refusals (a scheme other than http and https, an IP
 *     literal, a malformed URL, no grant, not on the list) are the request's;
 *     the connection's grant memo spares re-verifying (HMAC) the grant it
 *     presented before under the same policy version, nothing else;
 *   - an https URL the guard parsed: https_use_connect (a client reaches one
 *     through a CONNECT tunnel), whatever the rest of the decision said.
 * In a tunnel (forward.h px_fwd_tunnel) the request must name the tunnel's
 * host and port, in its Host field and, in absolute form, its URL
 * (host_mismatch); it is decided on the CONNECT's grant.
 */
#include "forward_decide.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pinhole/host.h"
#include "pinhole/url.h"
#include "reload.h"

/* Whether host[0..len) (a Host field's value) holds only what a host and
 * port are spelt with: no userinfo, path, query or fragment can hide in
 * the URL it is made into (tunnel_url). */
static bool host_value_plain(const uint8_t *v, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!(ph_is_lower(v[i]) || ph_is_upper(v[i]) || ph_is_digit(v[i]) || v[i] == '.' ||
              v[i] == '-' || v[i] == ':' || v[i] == '[' || v[i] == ']'))
            return false;
    return len > 0;
}

/* The URL a request inside a tunnel is decided on, into url[cap]: an
 * absolute-form target as it is; an origin-form one as http://HOST + the
 * target, HOST its Host field. Either way the Host field must name the
 * tunnel's host and port: it is parsed here on its own (a Host without a
 * port names port 80), since in absolute form it is not the URL the guard
 * decides, and the decision's authority is checked by the caller. NULL:
 * refused (the request is answered). */
static const char *tunnel_url(px_fwd *f, const uint8_t *buf, const ph_h1_head *h, char *url,
                              size_t cap, size_t *len)
{
    const char *t = (const char *)buf + h->target.off;
    size_t tlen = h->target.len;
    if (h->host_field < 0) {
        px_fwd_refuse(f, PH_REASON_HOST_MISMATCH, "a request in a tunnel without a Host field",
                      NULL);
        return NULL;
    }
    const ph_h1_field *hf = &h->fields[h->host_field];
    const uint8_t *hv = buf + hf->value.off;
    size_t hl = hf->value.len;
    ph_url u;
    ph_diag diag;
    char hurl[PH_H1_REQUEST_HEAD_MAX + 16];
    int n = snprintf(hurl, sizeof hurl, "http://%.*s/", (int)hl, (const char *)hv);
    if (!host_value_plain(hv, hl) || n < 0 || (size_t)n >= sizeof hurl ||
        ph_url_parse(hurl, (size_t)n, &u, &diag) != PH_OK || strcmp(u.host, f->tun_host) != 0 ||
        u.port != f->tun_port) {
        char d[PH_HOST_MAX + 300];
        snprintf(d, sizeof d, "Host %.*s in a tunnel to %s:%u", (int)(hl < 200 ? hl : 200),
                 (const char *)hv, f->tun_host, (unsigned)f->tun_port);
        px_fwd_refuse(f, PH_REASON_HOST_MISMATCH, d, NULL);
        return NULL;
    }
    if (h->form == PH_H1_FORM_ABSOLUTE) {
        *len = tlen;
        return t;
    }
    if (h->form != PH_H1_FORM_ORIGIN) {
        px_fwd_refuse(f, PH_REASON_HTTP_BAD_REQUEST_LINE,
                      "a request in a tunnel needs an origin-form or absolute-form target", NULL);
        return NULL;
    }
    n = snprintf(url, cap, "http://%.*s%.*s", (int)hl, (const char *)hv, (int)tlen, t);
    if (n < 0 || (size_t)n >= cap) {
        px_fwd_refuse(f, PH_REASON_HTTP_BAD_REQUEST_LINE, "request target too long", NULL);
        return NULL;
    }
    *len = (size_t)n;
    return url;
}

const char *px_fwd_decide(px_fwd *f, const uint8_t *buf, const ph_h1_head *h,
                          char url[static PX_FWD_URL_MAX], ph_decision *d)
{
    if (h->form == PH_H1_FORM_AUTHORITY) {
        /* A tunnel is a connection's first request, never one after
         * forwarded requests (tunnel.c answers those). */
        px_fwd_refuse(f, PH_REASON_ORIGIN_FORM,
                      "CONNECT opens a connection of its own, not one that forwarded requests",
                      NULL);
        return NULL;
    }
    const char *t = (const char *)buf + h->target.off;
    size_t tlen = h->target.len;
    const uint8_t *auth = NULL;
    size_t alen = 0;
    if (f->tun_token != NULL) {
        if ((t = tunnel_url(f, buf, h, url, PX_FWD_URL_MAX, &tlen)) == NULL)
            return NULL;
        /* The grant is the CONNECT's (a Proxy-Authorization field here is
         * the origin's business, and is not forwarded either). */
        auth = (const uint8_t *)f->tun_token;
        alen = f->tun_token_len;
    } else if (h->form != PH_H1_FORM_ABSOLUTE) {
        px_fwd_refuse(f, PH_REASON_ORIGIN_FORM,
                      "a proxy request names its http:// URL (absolute form)", NULL);
        return NULL;
    } else if (h->proxy_auth_field >= 0) {
        const ph_h1_field *a = &h->fields[h->proxy_auth_field];
        auth = buf + a->value.off;
        alen = a->value.len;
    }
    ph_url_request r = {
        .url = t,
        .url_len = tlen,
        .proxy_authorization = (const char *)auth,
        .proxy_authorization_len = alen,
        .now = (int64_t)time(NULL),
    };
    ph_decide_url_memo(px_policy(), &r, &f->grant_memo, d);
    if (f->tun_token != NULL && d->has_authority &&
        (strcmp(d->verdict.host, f->tun_host) != 0 || d->verdict.port != f->tun_port)) {
        char why[2 * PH_HOST_MAX + 64];
        snprintf(why, sizeof why, "request for %s:%u in a tunnel to %s:%u", d->verdict.host,
                 (unsigned)d->verdict.port, f->tun_host, (unsigned)f->tun_port);
        px_fwd_refuse(f, PH_REASON_HOST_MISMATCH, why, NULL);
        return NULL;
    }
    if (d->verdict.scheme == PH_SCHEME_HTTPS) {
        px_fwd_refuse(f, PH_REASON_HTTPS_USE_CONNECT,
                      "https:// URLs go through a CONNECT tunnel (HTTPS_PROXY), not forwarding",
                      NULL);
        return NULL;
    }
    if (d->has_authority) {
        f->has_host = true;
        f->port = d->verdict.port;
        snprintf(f->host, sizeof f->host, "%s", d->verdict.host);
    }
    if (d->has_grant) {
        f->has_grant = true;
        f->grant = d->grant;
    }
    snprintf(f->policy_id, sizeof f->policy_id, "%s", d->verdict.policy_id);
    if (!d->allowed) {
        px_fwd_refuse(f, d->reason, d->client_detail, d->log_detail);
        return NULL;
    }
    if (f->tun_token != NULL && d->verdict.rule_protocol == PH_PROTOCOL_TLS) {
        /* The inspection admitted HTTP in clear under the rule of the
         * tunnel's first bytes; each request is decided on the rule in
         * force now, which a reload may have made tls. */
        px_fwd_refuse(f, PH_REASON_PROTOCOL_NOT_ALLOWED,
                      "HTTP in clear in a tunnel, and the rule now says protocol tls", NULL);
        return NULL;
    }
    /* What a reload decides the connection again on (a tunnel's is the
     * CONNECT's, kept already). */
    if (f->tun_token == NULL && !px_fwd_keep_token(f, auth, alen)) {
        px_fwd_refuse(f, PH_REASON_PROXY_OVERLOADED, "out of memory", NULL);
        return NULL;
    }
    f->has_rule = d->verdict.has_rule;
    f->rule_line = d->verdict.rule_line;
    snprintf(f->rule_file, sizeof f->rule_file, "%s", d->verdict.rule_file);
    return t;
}
