/* guard_check.c - the decision (ph_decide_connect, ph_decide_url,
 * ph_decide_url_memo, ph_decide_again): parse, grant, look up, on one
 * pinned policy version;
 * and the step after an allowed one for a caller that dials itself
 * (ph_decision_resolve). The proxy, the workers and policyc all come
 * through here. */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "pinhole/diag.h"
#include "guard-int.h"
#include "resolve-int.h"
#include "wildcard_dns-int.h"

/* Resets what a reader may look at (the verdict is ~1.5 KiB: clearing only
 * the fields that matter keeps the hot path short). */
static void verdict_reset(ph_verdict *v)
{
    v->allowed = false;
    v->reason = PH_REASON_PARSE_ERROR;
    v->scheme = PH_SCHEME_NONE;
    v->host[0] = '\0';
    v->port = 0;
    v->has_rule = false;
    v->rule_index = 0;
    v->rule_list[0] = v->rule_host[0] = v->rule_file[0] = v->rule_reason[0] = '\0';
    v->rule_line = 0;
    v->rule_protocol = PH_PROTOCOL_DEFAULT;
    v->policy_id[0] = '\0';
    v->detail[0] = '\0';
}

/* Copies src into dst[0..cap), truncating; always NUL-terminates. */
static void copy_text(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src != NULL ? src : "", n);
    dst[n] = '\0';
}

/* d->message = the NULL-terminated parts, concatenated and truncated. */
static void join_detail(ph_diag *d, const char *const *parts)
{
    size_t n = 0;
    for (; *parts != NULL; parts++) {
        size_t k = strnlen(*parts, sizeof d->message - 1 - n);
        memcpy(d->message + n, *parts, k);
        n += k;
    }
    d->message[n] = '\0';
}

/* v refused for r, d's message its detail. */
static ph_status refuse(ph_verdict *v, ph_reason r, const ph_diag *d)
{
    v->allowed = false;
    v->reason = r;
    copy_text(v->detail, sizeof v->detail, d->message);
    return PH_E_DENIED;
}

/* Looks v->host (host_len bytes) :port up in list on the pinned version s
 * and fills the verdict. */
static ph_status lookup_on(const ph_guard_snapshot *s, const char *list, size_t host_len,
                           ph_verdict *v)
{
    memcpy(v->policy_id, s->policy_id, sizeof v->policy_id);
    ph_table_result res;
    ph_diag d; /* filled by ph_diag_set before any use */
    ph_status st = ph_table_lookup(s->table, list, v->host, host_len, v->port, &res);
    if (st != PH_OK) {
        ph_diag_set(&d, PH_E_DENIED, 0, "host %s is not canonical", v->host);
        return refuse(v, PH_REASON_PARSE_ERROR, &d);
    }
    if (res.has_rule) {
        v->has_rule = true;
        v->rule_index = res.rule.index;
        copy_text(v->rule_list, sizeof v->rule_list, res.rule.list);
        copy_text(v->rule_host, sizeof v->rule_host, res.rule.host);
        copy_text(v->rule_file, sizeof v->rule_file, res.rule.file);
        v->rule_line = res.rule.line;
        v->rule_protocol = res.rule.protocol;
        copy_text(v->rule_reason, sizeof v->rule_reason, res.rule.reason);
    }
    if (res.allowed) {
        v->allowed = true;
        v->reason = PH_REASON_ALLOWED;
        return PH_OK;
    }
    /* Refusals are a hot path too (a scanner's traffic is mostly refused):
     * the detail is joined by hand rather than through vsnprintf. */
    char port[8];
    size_t pn = sizeof port - 1;
    port[pn] = '\0';
    unsigned p = v->port;
    do {
        port[--pn] = (char)('0' + p % 10);
        p /= 10;
    } while (p != 0 && pn > 0);
    d.status = PH_E_DENIED;
    d.offset = 0;
    switch (res.reason) {
    case PH_REASON_UNKNOWN_LIST:
        join_detail(&d, (const char *const[]){"no allowlist named ", list, NULL});
        break;
    case PH_REASON_PORT_NOT_ALLOWED:
        join_detail(&d, (const char *const[]){"list ", list, " allows ", v->host,
                                              " but not port ", port + pn, NULL});
        break;
    case PH_REASON_WILDCARD_DNS: {
        const ph_wildcard_dns_service *w = ph_wildcard_dns_find(v->host, host_len);
        join_detail(&d, (const char *const[]){v->host, " is under ", w != NULL ? w->domain : "?",
                                              ", a wildcard-DNS service (",
                                              w != NULL ? ph_wildcard_dns_describe(w) : "?",
                                              "): never allowed", NULL});
        break;
    }
    default:
        join_detail(&d, (const char *const[]){"list ", list, " does not allow ", v->host, NULL});
        break;
    }
    return refuse(v, res.reason == PH_REASON_ALLOWED ? PH_REASON_NOT_ALLOWLISTED : res.reason, &d);
}

/* The two kinds of request differ only in the parser: a URL or a CONNECT
 * authority. Both fill the same parts of a ph_url. */
typedef enum target_kind { TARGET_URL, TARGET_AUTHORITY } target_kind;

/* Parses the target into v->scheme/host/port (*host_len: the host's
 * length; path gets a URL's path span: path[0] offset, path[1] length), or
 * refuses it in *v (v->detail: the parser's message). */
static ph_status parse_target(const char *text, size_t len, target_kind kind, ph_verdict *v,
                              size_t *host_len, size_t path[static 2])
{
    ph_url u;
    u.path_offset = u.path_len = 0;
    ph_diag d;
    d.message[0] = '\0'; /* the parsers fill it on refusal; never read otherwise */
    ph_status st;
    if (kind == TARGET_URL) {
        st = ph_url_parse(text, len, &u, &d);
    } else {
        ph_authority a;
        st = ph_authority_parse(text, len, &a, &d);
        u.reason = a.reason;
        u.scheme = PH_SCHEME_NONE;
        u.port = a.port;
        u.host_len = a.host_len;
        memcpy(u.host, a.host, a.host_len + 1);
    }
    if (st != PH_OK)
        return refuse(v, u.reason == PH_REASON_ALLOWED ? PH_REASON_PARSE_ERROR : u.reason, &d);
    path[0] = u.path_offset;
    path[1] = u.path_len;
    v->scheme = u.scheme;
    v->port = u.port;
    memcpy(v->host, u.host, u.host_len + 1);
    *host_len = u.host_len;
    return PH_OK;
}

/* ---- ph_decide_connect ---------------------------------------------------- */

static ph_status decision_end(ph_decision *d, ph_reason r)
{
    d->allowed = r == PH_REASON_ALLOWED;
    d->reason = r;
    d->verdict.allowed = d->allowed;
    d->verdict.reason = r;
    d->http_status = ph_reason_http_status(r);
    d->next = d->allowed ? PH_NEXT_RESOLVE : PH_NEXT_NONE;
    return d->allowed ? PH_OK : PH_E_DENIED;
}

/* Clears *d and checks the arguments every decision takes (target: the
 * authority, URL or host). PH_OK to go on; else *d is the refusal. */
static ph_status decision_begin(ph_guard *g, const void *req, const char *target,
                                const char *list, const char *proxy_authorization, ph_decision *d)
{
    if (d == NULL)
        return PH_E_INVAL;
    d->has_grant = d->has_authority = false;
    d->client_detail[0] = d->log_detail[0] = d->keyring_id[0] = '\0';
    d->generation = 0;
    d->path_offset = d->path_len = 0;
    verdict_reset(&d->verdict);
    if (g == NULL || req == NULL || target == NULL || (list != NULL && proxy_authorization != NULL)) {
        copy_text(d->log_detail, sizeof d->log_detail, "decide: missing or conflicting argument");
        decision_end(d, PH_REASON_PARSE_ERROR);
        return PH_E_INVAL;
    }
    return PH_OK;
}

/* Steps 2 and 3 of every decision, for the destination in d->verdict
 * (host of host_len bytes, port): the grant (or the trusted caller's
 * list), then the list, on one pinned version. */
/* The memo holds the grant value[0..len) verifies to under version s at
 * now: the same bytes, verified by the same keyring (s's generation, and
 * its keyring id: the generation alone does not name the guard), and now
 * inside the grant's own validity (the skew the verifier allows beyond it
 * is left to the verifier). */
static bool memo_holds(const ph_grant_memo *m, const ph_guard_snapshot *s, const char *value,
                       size_t len, int64_t now)
{
    return m != NULL && m->generation != 0 && m->generation == s->generation &&
           strcmp(m->keyring_id, s->keyring_id) == 0 && m->auth_len == len &&
           len <= sizeof m->auth && CRYPTO_memcmp(m->auth, value, len) == 0 &&
           now >= m->grant.not_before && now < m->grant.expires;
}

/* A keyring without an id (it could not be computed) is not remembered. */
static void memo_keep(ph_grant_memo *m, const ph_guard_snapshot *s, const char *value, size_t len,
                      const ph_grant *grant)
{
    if (m == NULL)
        return;
    ph_grant_memo_clear(m);
    if (len > sizeof m->auth || s->keyring_id[0] == '\0')
        return;
    memcpy(m->auth, value, len);
    m->auth_len = len;
    m->grant = *grant;
    memcpy(m->keyring_id, s->keyring_id, sizeof m->keyring_id);
    m->generation = s->generation;
}

void ph_grant_memo_clear(ph_grant_memo *m)
{
    if (m != NULL)
        OPENSSL_cleanse(m, sizeof *m);
}

static ph_status decide_destination(ph_guard *g, const ph_connect_request *req, size_t host_len,
                                    ph_grant_memo *memo, ph_decision *d)
{
    d->has_authority = true;
    ph_guard_reload_if_due(g);
    ph_guard_snapshot *s = ph_guard_snapshot_acquire(g);
    d->generation = s->generation;
    memcpy(d->keyring_id, s->keyring_id, sizeof d->keyring_id);
    memcpy(d->verdict.policy_id, s->policy_id, sizeof d->verdict.policy_id);
    /* 2. The first yes: the grant, verified with this version's keyring
     * (the client learns the code only; the diagnostic is for the log). */
    const char *list = req->list;
    if (list == NULL) {
        if (s->keyring == NULL) {
            ph_guard_snapshot_release(&s);
            copy_text(d->log_detail, sizeof d->log_detail,
                      "decide: this guard has no grant keyring; name the list");
            decision_end(d, PH_REASON_PARSE_ERROR);
            return PH_E_INVAL;
        }
        ph_reason gr = PH_REASON_GRANT_INVALID;
        ph_diag gd;
        gd.message[0] = '\0';
        const char *value = req->proxy_authorization != NULL ? req->proxy_authorization : "";
        size_t vlen = req->proxy_authorization != NULL ? req->proxy_authorization_len : 0;
        if (memo_holds(memo, s, value, vlen, req->now)) {
            d->grant = memo->grant;
        } else if (ph_grant_verify_proxy_authorization(s->keyring, value, vlen, req->now, NULL,
                                                       &d->grant, &gr, &gd) != PH_OK) {
            ph_guard_snapshot_release(&s);
            copy_text(d->log_detail, sizeof d->log_detail, gd.message);
            return decision_end(d, gr == PH_REASON_ALLOWED ? PH_REASON_GRANT_INVALID : gr);
        } else {
            memo_keep(memo, s, value, vlen, &d->grant);
        }
        d->has_grant = true;
        list = d->grant.list;
        /* A verified grant of a revoked lease: refused like a grant, the
         * lease named in the log only. */
        if (ph_revocations_revoked(s->revocations, d->grant.tenant, d->grant.lease, req->now)) {
            ph_guard_snapshot_release(&s);
            snprintf(d->log_detail, sizeof d->log_detail,
                     "lease %s of tenant %s is on the revocation list", d->grant.lease,
                     d->grant.tenant);
            return decision_end(d, PH_REASON_LEASE_REVOKED);
        }
    }
    /* 3. The second yes: the list, on the same version. */
    ph_status st = lookup_on(s, list, host_len, &d->verdict);
    ph_guard_snapshot_release(&s);
    if (st != PH_OK) {
        copy_text(d->log_detail, sizeof d->log_detail, d->verdict.detail);
        return decision_end(d, d->verdict.reason == PH_REASON_ALLOWED ? PH_REASON_NOT_ALLOWLISTED
                                                                      : d->verdict.reason);
    }
    return decision_end(d, PH_REASON_ALLOWED);
}

/* The decision for either kind of target: the request's fields with the
 * target text and its parser. */
static ph_status decide_request(ph_guard *g, const ph_connect_request *req, target_kind kind,
                                ph_grant_memo *memo, ph_decision *d)
{
    ph_status st = decision_begin(g, req, req != NULL ? req->authority : NULL,
                                  req != NULL ? req->list : NULL,
                                  req != NULL ? req->proxy_authorization : NULL, d);
    if (st != PH_OK)
        return st;
    /* 1. The authority, parsed once (IP literals refused before anything
     * else sees them). The parser's message is safe to show: it describes
     * only the client's own bytes. */
    size_t host_len = 0, path[2] = { 0, 0 };
    ph_status pst = parse_target(req->authority, req->authority_len, kind, &d->verdict, &host_len,
                                 path);
    d->path_offset = path[0];
    d->path_len = path[1];
    if (pst != PH_OK) {
        ph_reason r = d->verdict.reason;
        copy_text(d->client_detail, sizeof d->client_detail,
                  r == PH_REASON_IP_LITERAL ? "IP literal destinations are never allowed"
                                            : d->verdict.detail);
        copy_text(d->log_detail, sizeof d->log_detail, d->client_detail);
        return decision_end(d, r);
    }
    return decide_destination(g, req, host_len, memo, d);
}

ph_status ph_decide_connect(ph_guard *g, const ph_connect_request *req, ph_decision *d)
{
    return decide_request(g, req, TARGET_AUTHORITY, NULL, d);
}

ph_status ph_decide_again(ph_guard *g, const ph_recheck_request *req, ph_decision *d,
                          ph_ending *ending)
{
    if (ending != NULL)
        *ending = PH_ENDING_POLICY_REVOKED;
    ph_status st = decision_begin(g, req, req != NULL ? req->host : NULL,
                                  req != NULL ? req->list : NULL,
                                  req != NULL ? req->proxy_authorization : NULL, d);
    if (st != PH_OK)
        return st;
    /* The destination an earlier decision parsed: canonical already, so it
     * is checked, never parsed again (a name that is not canonical was not
     * made by a decision and is refused). */
    size_t host_len = strnlen(req->host, PH_HOST_MAX + 1);
    if (host_len > PH_HOST_MAX || ph_host_check(req->host, host_len, NULL) != PH_HOST_OK ||
        req->port == 0) {
        copy_text(d->log_detail, sizeof d->log_detail,
                  "decide again: not a destination a decision made");
        decision_end(d, PH_REASON_PARSE_ERROR);
        return PH_E_INVAL;
    }
    memcpy(d->verdict.host, req->host, host_len + 1);
    d->verdict.port = req->port;
    ph_connect_request r = {
        .authority = req->host,
        .proxy_authorization = req->proxy_authorization,
        .proxy_authorization_len = req->proxy_authorization_len,
        .list = req->list,
        .now = req->now,
    };
    st = decide_destination(g, &r, host_len, NULL, d);
    if (ending != NULL)
        *ending = st == PH_OK                             ? PH_ENDING_NONE
                  : d->reason == PH_REASON_LEASE_REVOKED  ? PH_ENDING_LEASE_REVOKED
                  : req->list != NULL || d->has_grant     ? PH_ENDING_POLICY_REVOKED
                  : d->reason == PH_REASON_GRANT_EXPIRED ? PH_ENDING_GRANT_EXPIRED
                                                          : PH_ENDING_KEY_REVOKED;
    return st;
}

const char *ph_ending_code(ph_ending e)
{
    switch (e) {
    case PH_ENDING_NONE: return "none";
    case PH_ENDING_KEY_REVOKED: return "key_revoked";
    case PH_ENDING_GRANT_EXPIRED: return "grant_expired";
    case PH_ENDING_POLICY_REVOKED: return "policy_revoked";
    case PH_ENDING_LEASE_REVOKED: return "lease_revoked";
    }
    return "policy_revoked";
}

ph_status ph_decide_url(ph_guard *g, const ph_url_request *req, ph_decision *d)
{
    return ph_decide_url_memo(g, req, NULL, d);
}

ph_status ph_decide_url_memo(ph_guard *g, const ph_url_request *req, ph_grant_memo *m,
                             ph_decision *d)
{
    ph_connect_request r;
    if (req != NULL)
        r = (ph_connect_request){
            .authority = req->url,
            .authority_len = req->url_len,
            .proxy_authorization = req->proxy_authorization,
            .proxy_authorization_len = req->proxy_authorization_len,
            .list = req->list,
            .now = req->now,
        };
    return decide_request(g, req != NULL ? &r : NULL, TARGET_URL, m, d);
}

/* ---- the step after an allowed decision ----------------------------------- */

ph_status ph_decision_resolve_within(ph_guard *g, ph_decision *d, unsigned timeout_ms,
                                     ph_pinned_addrs *addrs)
{
    if (addrs != NULL)
        addrs->count = 0;
    if (g == NULL || d == NULL || addrs == NULL || !d->allowed || d->next != PH_NEXT_RESOLVE ||
        strnlen(d->verdict.host, sizeof d->verdict.host) == sizeof d->verdict.host)
        return PH_E_INVAL;
    ph_resolver_config cfg = *ph_guard_resolver_config(g);
    if (timeout_ms != 0) {
        unsigned dns_ms = cfg.timeout_ms != 0 ? cfg.timeout_ms : PH_RESOLVE_TIMEOUT_MS_DEFAULT;
        cfg.timeout_ms = dns_ms < timeout_ms ? dns_ms : timeout_ms;
    }
    ph_reason r = PH_REASON_DNS_FAILURE;
    ph_diag rd;
    rd.message[0] = '\0';
    ph_status st = ph_resolve_blocking_shared(&cfg, ph_guard_dns_cache(g), d->verdict.host,
                                              d->verdict.port, addrs, &r, NULL, &rd);
    if (st == PH_OK)
        return PH_OK;
    addrs->count = 0;
    /* A refused answer says why; a resolution that could not even ask (bad
     * servers, no memory, the DNS library) fails closed as dns_failure. */
    decision_end(d, st == PH_E_DENIED ? r : PH_REASON_DNS_FAILURE);
    copy_text(d->log_detail, sizeof d->log_detail, rd.message);
    copy_text(d->verdict.detail, sizeof d->verdict.detail, rd.message);
    return st;
}

ph_status ph_decision_resolve(ph_guard *g, ph_decision *d, ph_pinned_addrs *addrs)
{
    return ph_decision_resolve_within(g, d, 0, addrs);
}
