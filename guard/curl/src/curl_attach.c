/* curl_attach.c - libpinhole-curl: pinning, the socket check, the protocol
 * and proxy restrictions and the redirect chain for a libcurl easy handle
 * (pinhole/curl.h). Every hop goes through the guard's own calls
 * (ph_decide_url and ph_decision_resolve, ph_redirect_check): nothing here
 * decides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "pinhole/clock.h"
#include "pinhole/curl.h"
#include "pinhole/dial.h"

#if LIBCURL_VERSION_NUM < 0x075500
#error "libpinhole-curl needs libcurl 7.85 or later (CURLOPT_PROTOCOLS_STR)"
#endif

/* At most this many request headers in ph_curl_options. */
#define HEADERS_MAX 64

struct ph_curl {
    CURL *c;         /* borrowed */
    ph_guard *g;     /* borrowed */
    char *list;      /* owned copy */
    ph_redirect_options redirect;
    char **headers;  /* owned copies, NULL-terminated */
    ph_curl_write_cb write;
    void *write_arg;
    ph_pinned_addrs pins;          /* the current hop's checked addresses */
    struct curl_slist *resolve;    /* owned; set as CURLOPT_RESOLVE */
    struct curl_slist *http_hdrs;  /* owned; set as CURLOPT_HTTPHEADER */
    struct curl_slist *jar;        /* owned; the cookie engine's cookies before the chain */
    bool saw_redirect;             /* a redirect response came during the chain */
    bool cookies_none;             /* this hop's request goes with an empty cookie engine */
    bool dropped;                  /* credentials dropped for the rest of the chain */
    bool redirected;               /* a redirect was followed: headers filtered */
    bool socket_refused;           /* the open-socket check refused an address */
    unsigned timeout_ms;           /* the chain's deadline */
    size_t discarded;              /* bytes of the current redirect body thrown away */
    bool discard_cut;              /* ... and the transfer cut at the bound */
    char refused_addr[64];
};

static ph_status fail(ph_diag *diag, ph_status st, const char *msg)
{
    if (diag != NULL) {
        diag->status = st;
        diag->offset = 0;
        snprintf(diag->message, sizeof diag->message, "%s", msg);
    }
    return st;
}

/* libcurl asks for every socket it opens: only to a checked address. */
static curl_socket_t open_checked_socket(void *arg, curlsocktype purpose,
                                         struct curl_sockaddr *a)
{
    ph_curl *pc = arg;
    if (purpose == CURLSOCKTYPE_IPCXN &&
        ph_pinned_addrs_contains(&pc->pins, &a->addr, a->addrlen))
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    pc->socket_refused = true;
    snprintf(pc->refused_addr, sizeof pc->refused_addr, "family %d", a->family);
    return CURL_SOCKET_BAD;
}

static bool is_redirect(long code)
{
    return code == 301 || code == 302 || code == 303 || code == 307 || code == 308;
}

/* The raw Location of the last response, or NULL. */
static const char *location_of(CURL *c)
{
    struct curl_header *h = NULL;
    if (curl_easy_header(c, "Location", 0, CURLH_HEADER, -1, &h) != CURLHE_OK || h == NULL)
        return NULL;
    return h->value;
}

/* The body of a redirect the chain follows (or refuses) is not the
 * caller's: only a final response reaches the caller's callback. Past
 * PH_REDIRECT_BODY_DISCARD_MAX bytes the transfer is cut (a short write
 * makes curl close the connection) and the chain goes on. */
static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
    ph_curl *pc = arg;
    long code = 0;
    curl_easy_getinfo(pc->c, CURLINFO_RESPONSE_CODE, &code);
    if (is_redirect(code) && location_of(pc->c) != NULL) {
        pc->discarded += size * n;
        if (pc->discarded > PH_REDIRECT_BODY_DISCARD_MAX) {
            pc->discard_cut = true;
            return 0;
        }
        return size * n;
    }
    if (pc->write == NULL)
        return size * n;
    return pc->write(data, size, n, pc->write_arg);
}

/* CURLOPT_HTTPHEADER from the caller's headers: all of them on the first
 * hop; after a redirect those ph_redirect_header_follows keeps (once the
 * origin changed, only the short list; a body's headers only with the
 * body). NULL list: none (curl's own headers only). A line is
 * "Name: value" or curl's "Name;" (empty). */
static ph_status build_headers(ph_curl *pc)
{
    curl_slist_free_all(pc->http_hdrs);
    pc->http_hdrs = NULL;
    for (char **h = pc->headers; h != NULL && *h != NULL; h++) {
        if (pc->redirected && !ph_redirect_header_follows(*h, strcspn(*h, ":;"), !pc->dropped,
                                                          pc->redirect.resend_body))
            continue;
        struct curl_slist *n = curl_slist_append(pc->http_hdrs, *h);
        if (n == NULL)
            return PH_E_NOMEM;
        pc->http_hdrs = n;
    }
    return PH_OK;
}

static int before_request(void *arg, char *ip, char *local_ip, int port, int local_port);

/* The options every hop runs with, set again before each transfer. */
static ph_status apply(ph_curl *pc)
{
    CURL *c = pc->c;
    CURLcode rc = CURLE_OK;
#define SET(opt, val)                                                                             \
    do {                                                                                          \
        if (rc == CURLE_OK)                                                                       \
            rc = curl_easy_setopt(c, opt, val);                                                   \
    } while (0)
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_PROXY, "");
    SET(CURLOPT_PRE_PROXY, "");
    SET(CURLOPT_NOPROXY, "*");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_UNRESTRICTED_AUTH, 0L);
    SET(CURLOPT_CONNECT_TO, (struct curl_slist *)NULL);
    SET(CURLOPT_OPENSOCKETFUNCTION, open_checked_socket);
    SET(CURLOPT_OPENSOCKETDATA, pc);
    SET(CURLOPT_WRITEFUNCTION, on_write);
    SET(CURLOPT_WRITEDATA, pc);
    SET(CURLOPT_PREREQFUNCTION, before_request);
    SET(CURLOPT_PREREQDATA, pc);
    SET(CURLOPT_HTTPHEADER, pc->http_hdrs);
    SET(CURLOPT_RESOLVE, pc->resolve);
#if LIBCURL_VERSION_NUM >= 0x074000
    if (rc == CURLE_OK && curl_easy_setopt(c, CURLOPT_ALTSVC_CTRL, 0L) == CURLE_UNKNOWN_OPTION)
        rc = CURLE_OK; /* a build without Alt-Svc follows none */
#endif
#if LIBCURL_VERSION_NUM >= 0x074a00
    if (rc == CURLE_OK && curl_easy_setopt(c, CURLOPT_HSTS_CTRL, 0L) == CURLE_UNKNOWN_OPTION)
        rc = CURLE_OK;
#endif
    if (pc->dropped) {
        SET(CURLOPT_USERPWD, (char *)NULL);
        SET(CURLOPT_USERNAME, (char *)NULL);
        SET(CURLOPT_PASSWORD, (char *)NULL);
        SET(CURLOPT_XOAUTH2_BEARER, (char *)NULL);
        SET(CURLOPT_COOKIE, (char *)NULL);
        /* A client certificate proves the caller's identity to the origin
         * it was configured for: never to the next one. */
        SET(CURLOPT_SSLCERT, (char *)NULL);
        SET(CURLOPT_SSLKEY, (char *)NULL);
        SET(CURLOPT_KEYPASSWD, (char *)NULL);
        SET(CURLOPT_SSLCERT_BLOB, (struct curl_blob *)NULL);
        SET(CURLOPT_SSLKEY_BLOB, (struct curl_blob *)NULL);
    }
#undef SET
    return rc == CURLE_OK ? PH_OK : PH_E_UNSUPPORTED;
}

/* The cookie engine (CURLOPT_COOKIEFILE, CURLOPT_COOKIELIST), if the caller
 * turned it on, keeps what the chain's first request would keep and nothing
 * else: the rule of ph_redirect_header_follows for Cookie, applied to the
 * engine. Every hop after the first starts from the cookies the engine held
 * before the chain (a redirect's Set-Cookie is never kept, never sent on),
 * and with none at all once the chain left its first origin; the final
 * response's cookies are kept only when the chain never left it. Nothing
 * here turns the engine on: "RELOAD" and "ALL" do nothing to a handle
 * without one, and cookies are added back only when some were there. */
static void cookies_save(ph_curl *pc)
{
    curl_slist_free_all(pc->jar);
    pc->jar = NULL;
    /* Files named by CURLOPT_COOKIEFILE are read now rather than at the
     * first transfer, so the snapshot holds them. */
    curl_easy_setopt(pc->c, CURLOPT_COOKIELIST, "RELOAD");
    curl_easy_getinfo(pc->c, CURLINFO_COOKIELIST, &pc->jar);
}

/* The engine emptied, then given back the chain's snapshot when with_jar. */
static void cookies_reset(ph_curl *pc, bool with_jar)
{
    struct curl_slist *now = NULL;
    curl_easy_getinfo(pc->c, CURLINFO_COOKIELIST, &now);
    if (now != NULL)
        curl_easy_setopt(pc->c, CURLOPT_COOKIELIST, "ALL");
    curl_slist_free_all(now);
    for (const struct curl_slist *l = with_jar ? pc->jar : NULL; l != NULL; l = l->next)
        curl_easy_setopt(pc->c, CURLOPT_COOKIELIST, l->data);
}

/* curl's CURLOPT_PREREQFUNCTION: the hop's connection is up and its request
 * not yet written. curl reads the caller's cookie files (CURLOPT_COOKIEFILE)
 * again at the start of every transfer, after cookies_reset ran: a hop that
 * must send no cookie empties the engine again here, where nothing is read
 * any more before the request's Cookie header is made. */
static int before_request(void *arg, char *ip, char *local_ip, int port, int local_port)
{
    (void)ip;
    (void)local_ip;
    (void)port;
    (void)local_port;
    ph_curl *pc = arg;
    if (pc->cookies_none)
        cookies_reset(pc, false);
    return CURL_PREREQFUNC_OK;
}

static void free_headers(char **h)
{
    for (char **p = h; p != NULL && *p != NULL; p++)
        free(*p);
    free(h);
}

ph_status ph_curl_attach(CURL *c, ph_guard *g, const char *list, const ph_curl_options *opts,
                         ph_curl **out, ph_diag *diag)
{
    if (out != NULL)
        *out = NULL;
    if (c == NULL || g == NULL || list == NULL || out == NULL)
        return fail(diag, PH_E_INVAL, "curl attach: missing argument");
    size_t nh = 0;
    if (opts != NULL && opts->headers != NULL)
        while (opts->headers[nh] != NULL)
            if (++nh > HEADERS_MAX)
                return fail(diag, PH_E_LIMIT, "curl attach: more than 64 headers");
    ph_curl *pc = calloc(1, sizeof *pc);
    if (pc == NULL)
        return fail(diag, PH_E_NOMEM, "out of memory");
    pc->c = c;
    pc->g = g;
    pc->list = strdup(list);
    pc->headers = calloc(nh + 1, sizeof *pc->headers);
    bool ok = pc->list != NULL && pc->headers != NULL;
    for (size_t i = 0; ok && i < nh; i++)
        ok = (pc->headers[i] = strdup(opts->headers[i])) != NULL;
    if (opts != NULL) {
        pc->redirect = opts->redirect;
        pc->write = opts->write;
        pc->write_arg = opts->write_arg;
        pc->timeout_ms = opts->timeout_ms;
    }
    if (pc->timeout_ms == 0)
        pc->timeout_ms = PH_CURL_TIMEOUT_MS_DEFAULT;
    if (!ok || build_headers(pc) != PH_OK) {
        ph_curl_detach(&pc);
        return fail(diag, PH_E_NOMEM, "out of memory");
    }
    ph_status st = apply(pc);
    if (st != PH_OK) {
        ph_curl_detach(&pc);
        return fail(diag, st, "curl attach: this libcurl refuses an option the guard needs");
    }
    *out = pc;
    return PH_OK;
}

/* CURLOPT_RESOLVE for the hop: the old entry removed, then host:port to
 * exactly the checked addresses. */
static ph_status pin(ph_curl *pc, const ph_verdict *v)
{
    curl_slist_free_all(pc->resolve);
    pc->resolve = NULL;
    char entry[PH_HOST_MAX + 16 + PH_PINNED_MAX * (46 + 3)];
    int n = snprintf(entry, sizeof entry, "-%s:%u", v->host, (unsigned)v->port);
    struct curl_slist *l = curl_slist_append(NULL, entry);
    if (l == NULL)
        return PH_E_NOMEM;
    pc->resolve = l;
    n = snprintf(entry, sizeof entry, "%s:%u:", v->host, (unsigned)v->port);
    size_t len = (size_t)n;
    for (size_t i = 0; i < pc->pins.count; i++) {
        char a[46];
        if (ph_pinned_addr_string(&pc->pins, i, a, sizeof a) != PH_OK)
            return PH_E_INTERNAL;
        bool v6 = pc->pins.addr[i].ss_family == AF_INET6;
        n = snprintf(entry + len, sizeof entry - len, "%s%s%s%s", i > 0 ? "," : "",
                     v6 ? "[" : "", a, v6 ? "]" : "");
        if (n < 0 || (size_t)n >= sizeof entry - len)
            return PH_E_LIMIT;
        len += (size_t)n;
    }
    l = curl_slist_append(pc->resolve, entry);
    if (l == NULL)
        return PH_E_NOMEM;
    pc->resolve = l;
    return PH_OK;
}

static ph_status refused(ph_curl_result *res, ph_reason r, ph_status st, const char *detail)
{
    res->reason = r;
    res->verdict.allowed = false;
    snprintf(res->detail, sizeof res->detail, "%s", detail);
    return st;
}

static ph_status perform_chain(ph_curl *pc, const char *url, ph_curl_result *res)
{
    size_t ulen = strnlen(url, PH_URL_MAX_LEN + 1);
    if (ulen > PH_URL_MAX_LEN)
        return refused(res, PH_REASON_PARSE_ERROR, PH_E_DENIED, "URL too long");
    memcpy(res->url, url, ulen + 1);
    pc->dropped = false;
    pc->redirected = false;
    int64_t deadline = ph_monotonic_ms() + pc->timeout_ms;
    if (build_headers(pc) != PH_OK)
        return refused(res, PH_REASON_PARSE_ERROR, PH_E_NOMEM, "out of memory");
    char cur[PH_URL_MAX_LEN + 1];
    memcpy(cur, url, ulen + 1);
    for (unsigned hop = 0;; hop++) {
        res->hops = hop;
        /* The guard's decision on the hop, then exactly its name resolved
         * and every address checked. */
        ph_url_request req = {.url = cur, .url_len = strlen(cur), .list = pc->list,
                              .now = time(NULL)};
        ph_decision dec;
        ph_status st = ph_decide_url(pc->g, &req, &dec);
        if (st == PH_OK)
            st = ph_decision_resolve(pc->g, &dec, &pc->pins);
        else
            pc->pins.count = 0;
        res->verdict = dec.verdict;
        memcpy(res->url, cur, strlen(cur) + 1);
        if (st != PH_OK)
            return refused(res, dec.reason, st == PH_E_DENIED ? PH_E_DENIED : st,
                           dec.verdict.detail[0] != '\0' ? dec.verdict.detail : dec.log_detail);
        st = pin(pc, &res->verdict);
        if (st == PH_OK)
            st = apply(pc);
        if (st != PH_OK)
            return refused(res, PH_REASON_PARSE_ERROR, st, "curl perform: cannot set options");
        if (curl_easy_setopt(pc->c, CURLOPT_URL, cur) != CURLE_OK)
            return refused(res, PH_REASON_PARSE_ERROR, PH_E_NOMEM, "curl perform: CURLOPT_URL");
        int64_t left = deadline - ph_monotonic_ms();
        if (left <= 0) {
            res->curl_code = CURLE_OPERATION_TIMEDOUT;
            return refused(res, PH_REASON_UPSTREAM_TIMEOUT, PH_E_IO,
                           "the chain's deadline passed before this hop");
        }
        curl_easy_setopt(pc->c, CURLOPT_TIMEOUT_MS, (long)left);
        if (hop > 0)
            cookies_reset(pc, !pc->dropped);
        pc->cookies_none = hop > 0 && pc->dropped;
        pc->socket_refused = false;
        pc->discarded = 0;
        pc->discard_cut = false;
        CURLcode rc = curl_easy_perform(pc->c);
        if (rc == CURLE_WRITE_ERROR && pc->discard_cut)
            rc = CURLE_OK; /* a redirect body cut at the bound: the head is all we need */
        char *ip = NULL;
        if (curl_easy_getinfo(pc->c, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip != NULL)
            snprintf(res->addr_text, sizeof res->addr_text, "%s", ip);
        if (rc != CURLE_OK) {
            res->curl_code = rc;
            char line[PH_DIAG_MESSAGE_MAX];
            if (pc->socket_refused) {
                snprintf(line, sizeof line, "libcurl tried an address that was not checked (%s)",
                         pc->refused_addr);
                return refused(res, PH_REASON_DENIED_ADDRESS, PH_E_DENIED, line);
            }
            snprintf(line, sizeof line, "%.200s: %s", res->verdict.host, curl_easy_strerror(rc));
            return refused(res,
                           rc == CURLE_OPERATION_TIMEDOUT ? PH_REASON_UPSTREAM_TIMEOUT
                                                          : PH_REASON_UPSTREAM_UNREACHABLE,
                           PH_E_IO, line);
        }
        long code = 0;
        curl_easy_getinfo(pc->c, CURLINFO_RESPONSE_CODE, &code);
        res->http_status = code;
        const char *location = is_redirect(code) ? location_of(pc->c) : NULL;
        if (location == NULL) {
            res->reason = PH_REASON_ALLOWED;
            return PH_OK;
        }
        pc->saw_redirect = true;
        /* The method of the next hop, and whether it re-sends a body. */
        char *method = NULL;
        curl_easy_getinfo(pc->c, CURLINFO_EFFECTIVE_METHOD, &method);
        const char *next = ph_redirect_next_method((int)code, method != NULL ? method : "GET");
        bool to_get = method != NULL && strcmp(next, method) != 0;
        /* Whether a body is configured (POSTFIELDS, UPLOAD, MIMEPOST),
         * whatever the method is called: curl knows its length (0 for
         * none, -1 for a body of unknown length) from the request's start.
         * A server answering "Expect: 100-continue" or the head alone
         * with a 307 has been sent little or none of it yet, and curl
         * would send all of it to the next hop. */
        curl_off_t sent = 0;
        curl_off_t length = -1;
        curl_easy_getinfo(pc->c, CURLINFO_SIZE_UPLOAD_T, &sent);
        curl_easy_getinfo(pc->c, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &length);
        pc->redirect.resend_body = !to_get && (sent > 0 || length != 0);
        ph_diag d;
        d.message[0] = '\0';
        ph_redirect *rd = malloc(sizeof *rd);
        if (rd == NULL)
            return refused(res, PH_REASON_PARSE_ERROR, PH_E_NOMEM, "out of memory");
        st = ph_redirect_check(pc->g, pc->list, cur, location, hop, &pc->redirect, rd, &d);
        res->verdict = rd->verdict;
        if (rd->url[0] != '\0') {
            memcpy(res->url, rd->url, strlen(rd->url) + 1);
        } else { /* the refused Location, printable for a log line */
            size_t k = 0;
            for (; location[k] != '\0' && k < PH_URL_MAX_LEN; k++) {
                unsigned char ch = (unsigned char)location[k];
                res->url[k] = ch > 0x20 && ch < 0x7f ? (char)ch : '?';
            }
            res->url[k] = '\0';
        }
        bool drop = rd->drop_credentials;
        if (st == PH_OK)
            memcpy(cur, rd->url, strlen(rd->url) + 1);
        free(rd);
        if (st != PH_OK)
            return refused(res, res->verdict.reason, PH_E_DENIED, res->verdict.detail);
        res->credentials_dropped |= drop;
        pc->dropped |= drop;
        pc->redirected = true;
        if (build_headers(pc) != PH_OK)
            return refused(res, PH_REASON_PARSE_ERROR, PH_E_NOMEM, "out of memory");
        if (to_get) { /* HTTPGET leaves a CUSTOMREQUEST method in place */
            curl_easy_setopt(pc->c, CURLOPT_HTTPGET, 1L);
            curl_easy_setopt(pc->c, CURLOPT_CUSTOMREQUEST, (char *)NULL);
        }
    }
}

ph_status ph_curl_perform(ph_curl *pc, const char *url, ph_curl_result *res)
{
    if (res == NULL)
        return PH_E_INVAL;
    memset(res, 0, sizeof *res);
    res->reason = PH_REASON_PARSE_ERROR;
    res->curl_code = CURLE_OK;
    if (pc == NULL || url == NULL)
        return refused(res, PH_REASON_PARSE_ERROR, PH_E_INVAL, "curl perform: missing argument");
    pc->saw_redirect = false;
    cookies_save(pc);
    ph_status st = perform_chain(pc, url, res);
    pc->cookies_none = false;
    /* A chain that met a redirect keeps the final response's cookies only
     * when it completed without leaving its first origin. */
    if (pc->saw_redirect && !(st == PH_OK && !pc->dropped))
        cookies_reset(pc, true);
    curl_slist_free_all(pc->jar);
    pc->jar = NULL;
    return st;
}

void ph_curl_detach(ph_curl **pp)
{
    if (pp == NULL || *pp == NULL)
        return;
    ph_curl *pc = *pp;
    curl_easy_setopt(pc->c, CURLOPT_RESOLVE, (struct curl_slist *)NULL);
    curl_easy_setopt(pc->c, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
    curl_easy_setopt(pc->c, CURLOPT_OPENSOCKETFUNCTION, (curl_opensocket_callback)NULL);
    curl_easy_setopt(pc->c, CURLOPT_OPENSOCKETDATA, (void *)NULL);
    curl_easy_setopt(pc->c, CURLOPT_WRITEFUNCTION, (curl_write_callback)NULL);
    curl_easy_setopt(pc->c, CURLOPT_WRITEDATA, (void *)NULL);
    curl_easy_setopt(pc->c, CURLOPT_PREREQFUNCTION, (curl_prereq_callback)NULL);
    curl_easy_setopt(pc->c, CURLOPT_PREREQDATA, (void *)NULL);
    curl_slist_free_all(pc->resolve);
    curl_slist_free_all(pc->http_hdrs);
    free_headers(pc->headers);
    free(pc->list);
    free(pc);
    *pp = NULL;
}
