/* proxy_parity.c - the guard/proxy parity check (DESIGN section 2: one
 * decision implementation). Run by tests/proxy/e2e_parity.sh against a
 * running pinhole-proxy; both sides resolve through the same dnsmasq.
 *
 * Inputs: every row of the URL corpora, each row's input column
 *   - tests/data/urls/differential.tsv: column 0 (a URL);
 *   - tests/data/urls/hostile.tsv: column 2 (column 0 says "url" or
 *     "authority");
 * and tests/proxy/data/parity-extra.tsv (column 0, a CONNECT authority,
 * for the reasons the corpora cannot reach; column 1 its expected reason,
 * column 2 which grant's list decides it).
 *
 * Each input is decided as a CONNECT target by both enforcement points:
 *   guard: ph_decide_connect naming the list, then (when allowed)
 *          ph_resolve_blocking of the canonical name with every address
 *          checked: "allowed" or the reason code;
 *   proxy: CONNECT <input> with a valid grant: "allowed" on 200, else its
 *          Pinhole-Reason.
 * A URL is also sent the way a client reaches it through a proxy: CONNECT
 * with its authority, cut from the text (after "http[s]://", up to the first
 * '/', '?' or '#', the scheme's default port added when none is written; no
 * parser of ours decides what is sent). Both points decide those bytes too.
 * And the worker's calls on the URL itself (ph_decide_url naming the list,
 * then ph_decision_resolve) must say "allowed" exactly when its authority
 * form is allowed.
 *
 * Fails when the two points give different reasons for any input, when a
 * corpus row the corpus expects to parse ("ok") is not allowed (or, for a
 * name under a wildcard-DNS service of guard/data/wildcard_dns_services.txt,
 * which no rule may name, is not refused as not_allowlisted), when an
 * extra row's reason is not the expected one, or when any reason the guard
 * can give for a destination (allowed, parse_error, ip_literal,
 * unknown_list, not_allowlisted, port_not_allowed, dns_failure, dns_timeout,
 * denied_address) never occurred. In a production build (not
 * PINHOLE_TEST_LOOPBACK_UPSTREAM) the upstream's loopback address is denied,
 * so every "allowed" is expected as denied_address instead.
 *
 *   proxy_parity TABLE PROXY_PORT DNS_SERVERS DNS_TIMEOUT_MS LIST TOKEN ABSENT_LIST ABSENT_TOKEN
 * LIST/TOKEN: the allowlist's list and a grant for it; ABSENT_LIST/TOKEN: a
 * list the table lacks and a grant naming it. DNS_TIMEOUT_MS must equal the
 * proxy's --dns-timeout-ms.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "pinhole/addr.h"
#include "pinhole/guard.h"
#include "url_tsv.h"

#define INPUT_MAX 20000

/* Sends one CONNECT and returns the Pinhole-Reason ("allowed" on 200). */
static void ask_proxy(int port, const char *auth, const char *target, size_t tlen, char *reason,
                      size_t cap)
{
    snprintf(reason, cap, "no-answer");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return;
    }
    size_t rcap = tlen + strlen(auth) + 128;
    char *req = malloc(rcap);
    if (req == NULL) {
        close(fd);
        return;
    }
    size_t n = (size_t)snprintf(req, rcap, "CONNECT ");
    memcpy(req + n, target, tlen);
    n += tlen;
    n += (size_t)snprintf(req + n, rcap - n, " HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n",
                          auth);
    /* A refusal may come before the whole request is written (a head over
     * 8 KiB): stop writing then and read the answer. */
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(req);
    char resp[4096];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof resp - 1 && (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0) {
        got += (size_t)r;
        resp[got] = '\0';
        if (strstr(resp, "\r\n\r\n"))
            break;
    }
    resp[got] = '\0';
    close(fd);
    if (strncmp(resp, "HTTP/1.1 200", 12) == 0) {
        snprintf(reason, cap, "allowed");
        return;
    }
    const char *h = strstr(resp, "\r\nPinhole-Reason: ");
    if (h) {
        h += strlen("\r\nPinhole-Reason: ");
        size_t k = strcspn(h, "\r\n");
        snprintf(reason, cap, "%.*s", (int)k, h);
    }
}

/* The destination reasons the guard can give (pinhole/guard.h). */
static const ph_reason DEST_REASONS[] = {
    PH_REASON_ALLOWED,          PH_REASON_PARSE_ERROR,      PH_REASON_IP_LITERAL,
    PH_REASON_UNKNOWN_LIST,     PH_REASON_NOT_ALLOWLISTED,  PH_REASON_PORT_NOT_ALLOWED,
    PH_REASON_DNS_FAILURE,      PH_REASON_DNS_TIMEOUT,      PH_REASON_DENIED_ADDRESS,
};
#define N_DEST (sizeof DEST_REASONS / sizeof DEST_REASONS[0])

typedef struct parity {
    ph_guard *guard;
    ph_resolver_config dns;
    const char *list, *token, *absent_list, *absent_token, *file;
    int port;
    bool test_build;
    unsigned sent, urls, mismatches, wrong;
    unsigned seen[N_DEST];
} parity;

/* The wildcard-DNS services (first column of the guard's data file). */
static char g_services[128][256];
static size_t g_nservices;

static void load_services(void)
{
    FILE *f = fopen(PH_SOURCE_DIR "/guard/data/wildcard_dns_services.txt", "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f) && g_nservices < 128)
        if (line[0] != '#' && sscanf(line, "%255s", g_services[g_nservices]) == 1)
            g_nservices++;
    if (f)
        fclose(f);
}

/* Whether the canonical host is a listed service or a name under one. */
static bool under_service(const char *host)
{
    size_t hl = strlen(host);
    for (size_t i = 0; i < g_nservices; i++) {
        size_t sl = strlen(g_services[i]);
        if (hl == sl ? strcmp(host, g_services[i]) == 0
                     : hl > sl && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, g_services[i]) == 0)
            return true;
    }
    return false;
}

/* The guard's decision on a CONNECT authority, the list named. */
static ph_verdict decide_authority(parity *p, const char *list, const char *t, size_t len)
{
    ph_connect_request req = { .authority = t, .authority_len = len, .list = list };
    ph_decision d;
    ph_decide_connect(p->guard, &req, &d);
    return d.verdict;
}

/* What an "ok" row must get: allowed, unless no rule can name its host. */
static const char *ok_verdict(parity *p, const char *t, size_t len)
{
    ph_verdict v = decide_authority(p, p->list, t, len);
    return under_service(v.host) ? "not_allowlisted" : "allowed";
}

/* The guard's whole decision on a CONNECT authority, as the proxy makes it. */
static const char *guard_authority(parity *p, const char *list, const char *t, size_t len)
{
    ph_verdict v = decide_authority(p, list, t, len);
    if (!v.allowed)
        return ph_reason_code(v.reason);
    ph_pinned_addrs addrs;
    ph_reason reason = PH_REASON_ALLOWED;
    if (ph_resolve_blocking(&p->dns, v.host, v.port, &addrs, &reason, NULL) != PH_OK)
        return ph_reason_code(reason);
    return "allowed";
}

/* Decides t[0..len) at both points; returns the (guard's) reason. */
static const char *both(parity *p, const char *list, const char *token, const char *t, size_t len,
                        unsigned line, const char *what)
{
    const char *want = guard_authority(p, list, t, len);
    char got[64];
    ask_proxy(p->port, token, t, len, got, sizeof got);
    p->sent++;
    for (size_t i = 0; i < N_DEST; i++)
        if (strcmp(want, ph_reason_code(DEST_REASONS[i])) == 0)
            p->seen[i]++;
    if (strcmp(want, got) != 0) {
        p->mismatches++;
        printf("MISMATCH %s:%u %s \"%.*s\": guard %s, proxy %s\n", p->file, line, what,
               len > 120 ? 120 : (int)len, t, want, got);
    }
    return want;
}

/* "allowed" as a production build sees it: the upstream is on loopback. */
static const char *as_built(const parity *p, const char *reason)
{
    if (!p->test_build && strcmp(reason, "allowed") == 0)
        return "denied_address";
    return reason;
}

static void expect(parity *p, unsigned line, const char *what, const char *want, const char *got)
{
    if (strcmp(as_built(p, want), got) != 0) {
        p->wrong++;
        printf("WRONG %s:%u %s: expected %s, got %s\n", p->file, line, what, as_built(p, want),
               got);
    }
}

static void corpus_input(parity *p, const char *in, bool is_url, bool expect_ok, unsigned line)
{
    static char t[INPUT_MAX], a[INPUT_MAX];
    size_t len = url_tsv_unescape(in, t, sizeof t, p->file, line);
    const char *verbatim = both(p, p->list, p->token, t, len, line, "input");
    if (!is_url) {
        if (expect_ok)
            expect(p, line, "\"ok\" authority", ok_verdict(p, t, len), verbatim);
        return;
    }
    p->urls++;
    ph_url_request req = { .url = t, .url_len = len, .list = p->list };
    ph_decision d;
    ph_pinned_addrs addrs;
    if (ph_decide_url(p->guard, &req, &d) == PH_OK)
        ph_decision_resolve(p->guard, &d, &addrs);
    const char *worker = d.allowed ? "allowed" : ph_reason_code(d.reason);
    size_t alen = url_tsv_connect_authority(t, len, a, sizeof a);
    const char *proxied = alen ? both(p, p->list, p->token, a, alen, line, "authority of") : "-";
    if (expect_ok) {
        const char *want = ok_verdict(p, a, alen);
        expect(p, line, "\"ok\" URL (worker's check)", want, worker);
        expect(p, line, "\"ok\" URL (its authority through the proxy)", want, proxied);
    } else if (strcmp(worker, "allowed") == 0 && strcmp(proxied, "allowed") != 0) {
        p->wrong++;
        printf("WRONG %s:%u the worker may dial it, the proxy refuses its authority (%s)\n",
               p->file, line, proxied);
    }
}

static void hostile_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    if (ncol >= 3)
        corpus_input(ctx, cols[2], strcmp(cols[0], "url") == 0, strcmp(cols[1], "ok") == 0, line);
}

static void differential_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    if (ncol >= 2)
        corpus_input(ctx, cols[0], true, strcmp(cols[1], "ok") == 0, line);
}

static void extra_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    parity *p = ctx;
    static char t[INPUT_MAX];
    if (ncol < 3) {
        p->wrong++;
        printf("WRONG %s:%u: expected input, expect, list\n", p->file, line);
        return;
    }
    bool absent = strcmp(cols[2], "absent") == 0;
    size_t len = url_tsv_unescape(cols[0], t, sizeof t, p->file, line);
    const char *got = both(p, absent ? p->absent_list : p->list,
                           absent ? p->absent_token : p->token, t, len, line, "input");
    expect(p, line, cols[3 < ncol ? 3 : 0], cols[1], got);
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: proxy_parity TABLE PROXY_PORT DNS_SERVERS DNS_TIMEOUT_MS LIST "
                        "TOKEN ABSENT_LIST ABSENT_TOKEN\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    parity p = { .port = atoi(argv[2]),
                 .dns = { .servers = argv[3], .timeout_ms = (unsigned)atoi(argv[4]) },
                 .list = argv[5], .token = argv[6], .absent_list = argv[7],
                 .absent_token = argv[8], .test_build = ph_build_is_test_loopback() };
    ph_guard_options opts = { .dns_servers = p.dns.servers, .dns_timeout_ms = p.dns.timeout_ms };
    load_services();
    if (g_nservices == 0) {
        fprintf(stderr, "no wildcard-DNS services read from the guard's data file\n");
        return 1;
    }
    ph_diag d = { 0 };
    if (ph_guard_open(argv[1], &opts, &p.guard, &d) != PH_OK) {
        fprintf(stderr, "guard: %s\n", d.message);
        return 1;
    }
    p.file = "hostile.tsv";
    unsigned rows = url_tsv_for_each_row(p.file, hostile_row, &p);
    p.file = "differential.tsv";
    rows += url_tsv_for_each_row(p.file, differential_row, &p);
    /* url_tsv reads below tests/data/urls/. */
    p.file = "../../proxy/data/parity-extra.tsv";
    rows += url_tsv_for_each_row(p.file, extra_row, &p);
    ph_guard_close(&p.guard);

    printf("%s build: %u rows, %u inputs decided by both (%u URLs also as their authority), "
           "%u mismatches, %u wrong verdicts\nreasons:",
           p.test_build ? "test-loopback" : "production", rows, p.sent, p.urls, p.mismatches,
           p.wrong);
    unsigned missing = 0;
    for (size_t i = 0; i < N_DEST; i++)
        printf(" %s=%u", ph_reason_code(DEST_REASONS[i]), p.seen[i]);
    printf("\n");
    for (size_t i = 0; i < N_DEST; i++) {
        if (p.seen[i] == 0 && (p.test_build || DEST_REASONS[i] != PH_REASON_ALLOWED)) {
            printf("MISSING reason %s: no input gave it\n", ph_reason_code(DEST_REASONS[i]));
            missing++;
        }
    }
    return (p.mismatches == 0 && p.wrong == 0 && missing == 0 && p.sent >= 1000) ? 0 : 1;
}
