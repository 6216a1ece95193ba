/* redirect.c - resolving a Location against the URL that answered (RFC 3986
 * section 5.2) and the redirect rules a worker follows (pinhole/redirect.h):
 * hop limit, the guard's decision on the target, no https -> http. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "pinhole/diag.h"
#include "guard-int.h"
#include "pinhole/redirect.h"

/* A bounded string being built. */
typedef struct sbuf {
    char *p;
    size_t cap, len;
    bool over;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->over || n >= b->cap - b->len) {
        b->over = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static bool is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* RFC 3986 section 5.2.4 on in[0..n) (modified in place), appended to out. */
static void remove_dot_segments(char *in, size_t n, sbuf *out)
{
    size_t base = out->len, i = 0;
    while (i < n && !out->over) {
        size_t left = n - i;
        const char *s = in + i;
        if (left >= 3 && memcmp(s, "../", 3) == 0) {
            i += 3;
        } else if (left >= 2 && memcmp(s, "./", 2) == 0) {
            i += 2;
        } else if (left >= 3 && memcmp(s, "/./", 3) == 0) {
            i += 2;
        } else if (left == 2 && memcmp(s, "/.", 2) == 0) {
            i += 1;
            in[i] = '/';
        } else if ((left >= 4 && memcmp(s, "/../", 4) == 0) ||
                   (left == 3 && memcmp(s, "/..", 3) == 0)) {
            i += left == 3 ? 2 : 3;
            in[i] = '/';
            while (out->len > base && out->p[out->len - 1] != '/')
                out->len--;
            if (out->len > base)
                out->len--; /* the '/' before the removed segment */
            out->p[out->len] = '\0';
        } else if ((left == 1 && s[0] == '.') || (left == 2 && memcmp(s, "..", 2) == 0)) {
            i = n;
        } else {
            size_t k = s[0] == '/' ? 1 : 0; /* the segment with its leading '/' */
            while (k < left && s[k] != '/')
                k++;
            put(out, s, k);
            i += k;
        }
    }
}

ph_status ph_url_resolve_reference(const char *base, const char *location, char *out,
                                   size_t cap, ph_diag *diag)
{
    if (out != NULL && cap > 0)
        out[0] = '\0';
    if (base == NULL || location == NULL || out == NULL || cap == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolve reference: missing argument");
    ph_url bu;
    if (ph_url_parse(base, strlen(base), &bu, NULL) != PH_OK)
        return ph_diag_set(diag, PH_E_INVAL, 0, "the base URL is not an accepted URL");
    size_t n = strnlen(location, PH_URL_MAX_LEN + 1);
    if (n == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "empty Location");
    if (n > PH_URL_MAX_LEN)
        return ph_diag_set(diag, PH_E_LIMIT, PH_URL_MAX_LEN, "Location longer than %u bytes",
                           (unsigned)PH_URL_MAX_LEN);
    /* Bytes another parser strips or reads as '/' could move the host. */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)location[i];
        if (c <= 0x20 || c >= 0x7f || c == '\\')
            return ph_diag_set(diag, PH_E_INVAL, i,
                               "Location byte %zu (0x%02x) is whitespace, a control byte, "
                               "non-ASCII or a backslash",
                               i, c);
    }
    sbuf b = {.p = out, .cap = cap};
    /* An absolute reference: only http(s), and only with "//". */
    size_t k = 0;
    if (is_alpha((unsigned char)location[0])) {
        k = 1;
        while (k < n && (is_alpha((unsigned char)location[k]) ||
                         is_digit((unsigned char)location[k]) || location[k] == '+' ||
                         location[k] == '-' || location[k] == '.'))
            k++;
        if (k < n && location[k] == ':') {
            bool http = (k == 4 && strncasecmp(location, "http", 4) == 0) ||
                        (k == 5 && strncasecmp(location, "https", 5) == 0);
            if (!http)
                return ph_diag_set(diag, PH_E_INVAL, 0,
                                   "Location has a scheme other than http or https");
            if (n < k + 3 || memcmp(location + k + 1, "//", 2) != 0)
                return ph_diag_set(diag, PH_E_INVAL, k + 1,
                                   "Location \"%.*s:\" is not followed by \"//\"", (int)k,
                                   location);
            put(&b, location, n);
            return b.over ? ph_diag_set(diag, PH_E_LIMIT, 0, "resolved Location too long")
                          : PH_OK;
        }
    }
    const char *scheme = ph_scheme_name(bu.scheme);
    if (n >= 2 && location[0] == '/' && location[1] == '/') { /* network-path */
        put(&b, scheme, strlen(scheme));
        put(&b, ":", 1);
        put(&b, location, n);
        return b.over ? ph_diag_set(diag, PH_E_LIMIT, 0, "resolved Location too long") : PH_OK;
    }
    /* The base's parts: origin, path, query (up to any fragment). */
    char origin[PH_URL_ORIGIN_MAX];
    if (ph_url_format_origin(&bu, origin, sizeof origin, NULL) != PH_OK)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "origin does not format");
    const char *bp = base + bu.path_offset;
    size_t bplen = bu.path_len;
    const char *bq = memchr(bp, '?', bplen);
    size_t bpath_len = bq != NULL ? (size_t)(bq - bp) : bplen;
    /* The reference's parts. */
    size_t rpath_len = strcspn(location, "?#");
    const char *rq = location[rpath_len] == '?' ? location + rpath_len : NULL;
    const char *rf = strchr(location, '#');
    size_t rq_len = rq != NULL ? (size_t)((rf != NULL ? rf : location + n) - rq) : 0;

    char path[2 * PH_URL_MAX_LEN + 2];
    size_t plen = 0;
    put(&b, origin, strlen(origin));
    if (rpath_len == 0) {
        /* An empty path is "/" for http(s) (RFC 9110 4.2.3); spelled out,
         * so a query never ends the authority. */
        if (bpath_len == 0)
            put(&b, "/", 1);
        put(&b, bp, bpath_len);
        if (rq != NULL)
            put(&b, rq, rq_len);
        else if (bq != NULL)
            put(&b, bq, bplen - bpath_len);
    } else {
        if (location[0] == '/') {
            memcpy(path, location, rpath_len);
            plen = rpath_len;
        } else {
            /* merge: the base path up to its last '/', or "/" when empty. */
            size_t keep = bpath_len;
            while (keep > 0 && bp[keep - 1] != '/')
                keep--;
            if (bpath_len == 0) {
                path[0] = '/';
                plen = 1;
            } else {
                memcpy(path, bp, keep);
                plen = keep;
            }
            memcpy(path + plen, location, rpath_len);
            plen += rpath_len;
        }
        remove_dot_segments(path, plen, &b);
        if (rq != NULL)
            put(&b, rq, rq_len);
    }
    if (rf != NULL)
        put(&b, rf, (size_t)(location + n - rf));
    if (b.over) {
        out[0] = '\0';
        return ph_diag_set(diag, PH_E_LIMIT, 0, "resolved Location too long");
    }
    return PH_OK;
}

static ph_status refuse(ph_redirect *out, ph_reason reason, const char *detail, ph_diag *diag)
{
    out->drop_credentials = true;
    return ph_verdict_refuse(&out->verdict, reason, PH_E_DENIED, detail, diag);
}

ph_status ph_redirect_check(ph_guard *g, const char *list, const char *from_url,
                            const char *location, unsigned hop, const ph_redirect_options *opts,
                            ph_redirect *out, ph_diag *diag)
{
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "redirect check: missing result");
    out->url[0] = '\0';
    out->same_origin = false;
    out->drop_credentials = true;
    memset(&out->verdict, 0, sizeof out->verdict);
    out->verdict.reason = PH_REASON_PARSE_ERROR;
    ph_url from;
    if (g == NULL || list == NULL || from_url == NULL || location == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "redirect check: missing argument");
    if (ph_url_parse(from_url, strlen(from_url), &from, NULL) != PH_OK)
        return ph_diag_set(diag, PH_E_INVAL, 0, "redirect check: from_url is not an accepted URL");
    unsigned max = opts != NULL && opts->max_hops != 0 ? opts->max_hops
                                                       : PH_REDIRECT_MAX_HOPS_DEFAULT;
    char line[PH_DIAG_MESSAGE_MAX];
    if (hop >= max) {
        snprintf(line, sizeof line, "more than %u redirects", max);
        return refuse(out, PH_REASON_REDIRECT_LIMIT, line, diag);
    }
    ph_diag rd;
    rd.message[0] = '\0';
    if (ph_url_resolve_reference(from_url, location, out->url, sizeof out->url, &rd) != PH_OK) {
        snprintf(line, sizeof line, "Location refused: %s", rd.message);
        return refuse(out, PH_REASON_REDIRECT_BAD_LOCATION, line, diag);
    }
    ph_url_request req = {
        .url = out->url, .url_len = strlen(out->url), .list = list, .now = time(NULL)};
    ph_decision d;
    ph_status st = ph_decide_url(g, &req, &d);
    out->verdict = d.verdict;
    if (st != PH_OK)
        return refuse(out, d.reason, d.log_detail, diag);
    out->same_origin = from.scheme == d.verdict.scheme && from.port == d.verdict.port &&
                       strcmp(from.host, d.verdict.host) == 0;
    out->drop_credentials = !out->same_origin;
    bool downgrade = from.scheme == PH_SCHEME_HTTPS && d.verdict.scheme == PH_SCHEME_HTTP;
    if (downgrade && (opts == NULL || !opts->allow_downgrade)) {
        snprintf(line, sizeof line, "redirect from https to http (%.200s) refused",
                 d.verdict.host);
        return refuse(out, PH_REASON_REDIRECT_DOWNGRADE, line, diag);
    }
    /* A body is a secret as much as a header (client_secret=...): it goes
     * to another origin only when the caller said so for this request. */
    if (!out->same_origin && opts != NULL && opts->resend_body &&
        !opts->allow_body_cross_origin) {
        snprintf(line, sizeof line,
                 "request body not re-sent to another origin (%.160s) unasked",
                 d.verdict.host);
        return refuse(out, PH_REASON_REDIRECT_BODY_CROSS_ORIGIN, line, diag);
    }
    return PH_OK;
}

/* Request headers that follow a redirect to another origin: they say how
 * the client wants the answer and carry nothing the first origin was
 * trusted with. The list is short on purpose: a header the caller added
 * (X-Api-Key, Private-Token, a tenant's own) is presumed to be a secret. */
static const char *const cross_origin_headers[] = {
    "Accept", "Accept-Encoding", "Accept-Language", "User-Agent", NULL};
/* The headers that describe a request body: they go wherever it goes. */
static const char *const body_headers[] = {
    "Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding", NULL};

static bool listed(const char *const *names, const char *name, size_t len)
{
    for (; *names != NULL; names++)
        if (strlen(*names) == len && strncasecmp(*names, name, len) == 0)
            return true;
    return false;
}

bool ph_redirect_header_follows(const char *name, size_t len, bool same_origin,
                                bool body_follows)
{
    if (name == NULL)
        return false;
    if (listed(body_headers, name, len))
        return body_follows;
    return same_origin || listed(cross_origin_headers, name, len);
}

const char *ph_redirect_cross_origin_header(size_t i)
{
    return i < sizeof cross_origin_headers / sizeof *cross_origin_headers
               ? cross_origin_headers[i]
               : NULL;
}

const char *ph_redirect_body_header(size_t i)
{
    return i < sizeof body_headers / sizeof *body_headers ? body_headers[i] : NULL;
}

const char *ph_redirect_next_method(int status, const char *method)
{
    if (method == NULL)
        return NULL;
    bool head = strcmp(method, "HEAD") == 0;
    if ((status == 302 || status == 303) && !head)
        return "GET";
    if (status == 301 && strcmp(method, "POST") == 0)
        return "GET";
    return method;
}
