/* e2e_curl.c - libpinhole-curl end to end (label "e2e"): real libcurl
 * against local HTTP and HTTPS servers named by dnsmasq, on the
 * PINHOLE_TEST_LOOPBACK_UPSTREAM build (127.0.0.0/8 and ::1 exempt from the
 * denylist, every other block denied). Every refused hop asserts its reason
 * code and that no request reached the refused target; the servers record
 * the credentials they were sent. */
#include "test_support.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "dnsmasq_fixture.h"
#include "pinhole/clock.h"
#include "pinhole/curl.h"
#include "pinhole/dial.h"

static ph_dnsmasq dns = {-1, ""};
static char *dir;
static char table[4200], hosts[4200], cert[4200], key[4200], ccert[4200], ckey[4200];
static ph_guard *G;
static SSL_CTX *tls_ctx;

typedef struct server {
    const char *tag; /* "A", "B", "T" in the log */
    bool tls;
    int fd;
    uint16_t port;
    pthread_t thread;
} server;
static server A = {"A", false, -1, 0, 0}, B = {"B", false, -1, 0, 0}, T = {"T", true, -1, 0, 0};
static atomic_bool stop;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char request_log[8192]; /* "TAG /path auth=<v> cookie=<v>\n" per request */
static char b_heads[8192];     /* every request head B received, with its body */
static char t_certs[1024];     /* "/path:yes|no\n": T was shown a client certificate */
static atomic_ullong flood_sent; /* bytes of /flood's body the kernel took */

/* The value of header name in the request head, or "-". */
static void header_value(const char *req, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "-");
    for (const char *p = strstr(req, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
        size_t n = strlen(name);
        if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':') {
            const char *v = p + 2 + n + 1;
            while (*v == ' ')
                v++;
            size_t k = strcspn(v, "\r");
            snprintf(out, cap, "%.*s", (int)(k < cap - 1 ? k : cap - 1), v);
            return;
        }
    }
}

/* The response to path on server s. */
static void respond(const server *s, const char *path, char *resp, size_t cap)
{
    static const struct {
        const char *path, *location;
        int which; /* 0: as written; "%u" is 1: A's port, 2: B's port, 3: T's port */
        int status;
    } redirects[] = {
        {"/to-metadata-literal", "http://169.254.169.254/latest/meta-data/", 0, 302},
        {"/to-metadata-name", "http://metadata.test:%u/ok", 1, 302},
        {"/to-literal", "http://127.0.0.1:%u/ok", 1, 302},
        {"/to-unlisted", "http://private.test:%u/ok", 1, 302},
        {"/to-port", "http://loop.test:%u/ok", 2, 302},
        {"/loop", "/loop", 0, 302},
        {"/to-other", "http://other.test:%u/echo", 2, 302},
        {"/to-same", "/echo", 0, 302},
        {"/body-redirect", "/ok", 0, 302},
        {"/down", "http://loop.test:%u/ok", 1, 302},
        {"/to-bad", "/\t/evil.example/", 0, 302}, /* WHATWG would strip the tab */
        {"/to-other-307", "http://other.test:%u/echo", 2, 307},
        {"/to-other-303", "http://other.test:%u/echo", 2, 303},
        /* answered before the body is read ("Expect: 100-continue") */
        {"/to-other-307-early", "http://other.test:%u/echo", 2, 307},
        {"/to-tls-other", "https://tls2.test:%u/echo", 3, 302},
        {"/to-tls-other-and-back", "https://tls2.test:%u/to-tls-home", 3, 302},
        {"/to-tls-home", "https://tls.test:%u/echo", 3, 302},
    };
    /* Redirects that set a cookie, and a final answer of another origin
     * that sets one. */
    char loc[256];
    const char *cookie_redirect = NULL;
    if (strcmp(path, "/cookie-to-other") == 0) {
        snprintf(loc, sizeof loc, "http://other.test:%u/set-cookie", (unsigned)B.port);
        cookie_redirect = loc;
    } else if (strcmp(path, "/cookie-to-same") == 0) {
        cookie_redirect = "/echo";
    } else if (strcmp(path, "/cookie-to-other-and-back") == 0) {
        snprintf(loc, sizeof loc, "http://other.test:%u/cookie-back", (unsigned)B.port);
        cookie_redirect = loc;
    } else if (strcmp(path, "/cookie-back") == 0) {
        snprintf(loc, sizeof loc, "http://loop.test:%u/echo", (unsigned)A.port);
        cookie_redirect = loc;
    }
    if (cookie_redirect != NULL) {
        snprintf(resp, cap,
                 "HTTP/1.1 302 Found\r\nLocation: %s\r\nSet-Cookie: hop%s=1; Path=/\r\n"
                 "Content-Length: 0\r\nConnection: close\r\n\r\n",
                 cookie_redirect, s->tag);
        return;
    }
    if (strcmp(path, "/set-cookie") == 0) {
        snprintf(resp, cap,
                 "HTTP/1.1 200 OK\r\nSet-Cookie: final%s=1; Path=/\r\nContent-Length: 5\r\n"
                 "Connection: close\r\n\r\nfinal",
                 s->tag);
        return;
    }
    for (size_t i = 0; i < sizeof redirects / sizeof *redirects; i++) {
        if (strcmp(path, redirects[i].path) != 0)
            continue;
        snprintf(loc, sizeof loc, "%s", redirects[i].location);
        if (redirects[i].which != 0) { /* "%u" replaced by the port */
            const char *fmt = redirects[i].location;
            const char *pct = strstr(fmt, "%u");
            uint16_t port = redirects[i].which == 1   ? A.port
                            : redirects[i].which == 2 ? B.port
                                                      : T.port;
            snprintf(loc, sizeof loc, "%.*s%u%s", (int)(pct - fmt), fmt, (unsigned)port,
                     pct + 2);
        }
        snprintf(resp, cap,
                 "HTTP/1.1 %d Found\r\nLocation: %s\r\nContent-Length: 17\r\n"
                 "Connection: close\r\n\r\nSHOULD-NOT-APPEAR",
                 redirects[i].status, loc);
        return;
    }
    const char *body = s->tls ? "tls-body\n" : strcmp(path, "/echo") == 0 ? "echo\n" : "page-body\n";
    snprintf(resp, cap, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(body), body);
}

/* One read of what the client sent into req[*n..cap-1), NUL-terminated;
 * false at EOF, on an error or after 2 s of silence. */
static bool read_some(int c, SSL *ssl, char *req, size_t cap, size_t *n)
{
    struct pollfd p = {.fd = c, .events = POLLIN};
    if (!(ssl != NULL && SSL_pending(ssl) > 0) && poll(&p, 1, 2000) <= 0)
        return false;
    int r = ssl != NULL ? SSL_read(ssl, req + *n, (int)(cap - 1 - *n))
                        : (int)read(c, req + *n, cap - 1 - *n);
    if (r <= 0)
        return false;
    *n += (size_t)r;
    req[*n] = '\0';
    return true;
}

static void serve(server *s, int c)
{
    SSL *ssl = NULL;
    if (s->tls) {
        ssl = SSL_new(tls_ctx);
        SSL_set_fd(ssl, c);
        if (SSL_accept(ssl) != 1) {
            SSL_free(ssl);
            return;
        }
    }
    char req[4096];
    size_t n = 0;
    while (n < sizeof req - 1 && read_some(c, ssl, req, sizeof req, &n))
        if (strstr(req, "\r\n\r\n") != NULL)
            break;
    req[n] = '\0';
    char path[256] = "", auth[256], cookie[256];
    sscanf(req, "%*15s %255s", path);
    /* The body (Content-Length only), so a POST is read whole; not for a
     * path that answers before it (a client waiting for 100 Continue). */
    char clen[32];
    header_value(req, "Content-Length", clen, sizeof clen);
    char *end = strstr(req, "\r\n\r\n");
    size_t want = end != NULL ? (size_t)(end + 4 - req) + strtoul(clen, NULL, 10) : n;
    if (strcmp(path, "/to-other-307-early") == 0)
        want = n;
    while (n < want && n < sizeof req - 1 && read_some(c, ssl, req, sizeof req, &n))
        ;
    req[n] = '\0';
    header_value(req, "Authorization", auth, sizeof auth);
    header_value(req, "Cookie", cookie, sizeof cookie);
    pthread_mutex_lock(&log_lock);
    size_t at = strlen(request_log);
    snprintf(request_log + at, sizeof request_log - at, "%s %s auth=%s cookie=%s\n", s->tag, path,
             auth, cookie);
    if (s == &B) {
        at = strlen(b_heads);
        snprintf(b_heads + at, sizeof b_heads - at, "%s\n", req);
    }
    if (ssl != NULL) {
        X509 *peer = SSL_get1_peer_certificate(ssl);
        at = strlen(t_certs);
        snprintf(t_certs + at, sizeof t_certs - at, "%s:%s\n", path, peer != NULL ? "yes" : "no");
        X509_free(peer);
    }
    pthread_mutex_unlock(&log_lock);
    if (strcmp(path, "/flood") == 0) { /* a redirect whose body never ends */
        static char chunk[65536];
        memset(chunk, 'f', sizeof chunk);
        const char *head = "HTTP/1.1 302 Found\r\nLocation: /ok\r\n"
                           "Content-Length: 1073741824\r\n\r\n";
        if (send(c, head, strlen(head), MSG_NOSIGNAL) < 0)
            return;
        for (unsigned long long sent = 0; sent < (1ULL << 30);) {
            ssize_t w = send(c, chunk, sizeof chunk, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            sent += (unsigned long long)w;
            atomic_store(&flood_sent, sent);
        }
        return;
    }
    if (strcmp(path, "/trickle") == 0) { /* a redirect to itself, its body a byte at a time */
        const char *head = "HTTP/1.1 302 Found\r\nLocation: /trickle\r\n"
                           "Content-Length: 4\r\n\r\n";
        if (send(c, head, strlen(head), MSG_NOSIGNAL) < 0)
            return;
        for (int i = 0; i < 4; i++) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
            if (send(c, "t", 1, MSG_NOSIGNAL) != 1)
                return;
        }
        return;
    }
    char resp[1024];
    respond(s, path, resp, sizeof resp);
    if (ssl != NULL) {
        SSL_write(ssl, resp, (int)strlen(resp));
        SSL_shutdown(ssl);
        SSL_free(ssl);
    } else if (write(c, resp, strlen(resp)) < 0) {
        return;
    }
}

static void *server_main(void *arg)
{
    server *s = arg;
    while (!atomic_load(&stop)) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int c = accept(s->fd, NULL, NULL);
        if (c >= 0) {
            serve(s, c);
            close(c);
        }
    }
    return NULL;
}

static void start(server *s)
{
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(s->fd, 16), 0);
    socklen_t len = sizeof sin;
    getsockname(s->fd, (struct sockaddr *)&sin, &len);
    s->port = ntohs(sin.sin_port);
}

/* T asks every client for a certificate and takes any (it only logs). */
static int accept_any_certificate(int ok, X509_STORE_CTX *ctx)
{
    (void)ok;
    (void)ctx;
    return 1;
}

static void run(const char *cmd)
{
    int st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("failed: %s", cmd);
}

static int setup(void **state)
{
    (void)state;
    dir = ph_test_mkdtemp();
    start(&A);
    start(&B);
    start(&T);
    /* A self-signed certificate for tls.test (the name, never the address). */
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    char cmd[13000];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
             "-subj /CN=tls.test -addext subjectAltName=DNS:tls.test,DNS:tls2.test -keyout '%s' "
             "-out '%s' >/dev/null 2>&1",
             key, cert);
    run(cmd);
    /* The worker's client certificate (T asks for one and logs whether it
     * was shown). */
    snprintf(ccert, sizeof ccert, "%s/client.pem", dir);
    snprintf(ckey, sizeof ckey, "%s/client.key", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
             "-subj /CN=worker -keyout '%s' -out '%s' >/dev/null 2>&1",
             ckey, ccert);
    run(cmd);
    tls_ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(tls_ctx);
    assert_int_equal(SSL_CTX_use_certificate_file(tls_ctx, cert, SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(tls_ctx, key, SSL_FILETYPE_PEM), 1);
    SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, accept_any_certificate);
    snprintf(hosts, sizeof hosts, "%s/hosts", dir);
    ph_dnsmasq_set_hosts(NULL, hosts,
                         "127.0.0.1 other.test\n127.0.0.1 tls.test\n127.0.0.1 tls2.test\n"
                         "127.0.0.1 flip.test\n");
    char yaml[2048], src[4300];
    snprintf(yaml, sizeof yaml,
             "version: 1\nlists:\n  default:\n    rules:\n"
             "      - host: loop.test\n        ports: [%u]\n"
             "      - host: other.test\n        ports: [%u]\n"
             "      - host: tls.test\n        ports: [%u]\n"
             "      - host: tls2.test\n        ports: [%u]\n"
             "      - host: metadata.test\n        ports: [%u]\n"
             "      - host: flip.test\n        ports: [%u]\n",
             A.port, B.port, T.port, T.port, A.port, A.port);
    snprintf(src, sizeof src, "%s/allow.yaml", dir);
    snprintf(table, sizeof table, "%s/allow.ptab", dir);
    assert_int_equal(ph_test_write_file(src, yaml, strlen(yaml)), 0);
    snprintf(cmd, sizeof cmd, "'%s' compile '%s' -o '%s' >/dev/null", PH_POLICYC, src, table);
    run(cmd);
    ph_dnsmasq_start_hosts(&dns, hosts);
    /* The DNS cache off: the rebinding case must see the changed answer on
     * the very next request (the cache is test_dns_cache's and e2e_dial's). */
    ph_guard_options o = {.dns_servers = dns.server, .dns_timeout_ms = 2000,
                          .dns_cache_off = true};
    assert_int_equal(ph_guard_open(table, &o, &G, NULL), PH_OK);
    assert_int_equal(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
    server *all[] = {&A, &B, &T};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&all[i]->thread, NULL, server_main, all[i]), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    atomic_store(&stop, true);
    server *all[] = {&A, &B, &T};
    for (size_t i = 0; i < 3; i++) {
        pthread_join(all[i]->thread, NULL);
        close(all[i]->fd);
    }
    SSL_CTX_free(tls_ctx);
    curl_global_cleanup();
    ph_guard_close(&G);
    ph_dnsmasq_stop(&dns);
    ph_test_rmtree(dir);
    free(dir);
    return 0;
}

/* The body sink of one fetch. */
typedef struct body {
    char data[4096];
    size_t len;
} body;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    body *b = arg;
    size_t k = size * n;
    if (k > sizeof b->data - 1 - b->len)
        return 0;
    memcpy(b->data + b->len, data, k);
    b->len += k;
    b->data[b->len] = '\0';
    return k;
}

static const char *const credentials[] = {"Authorization: Bearer secret-token",
                                          "Cookie: session=abc", "X-Trace: 1", NULL};

/* What one fetch does beyond a GET with the credentials above. */
typedef struct fetch_opts {
    unsigned max_hops;
    const char *userpwd;            /* CURLOPT_USERPWD instead of the headers */
    const char *const *headers;     /* instead of credentials */
    const char *post;               /* CURLOPT_POSTFIELDS */
    const char *method;             /* CURLOPT_CUSTOMREQUEST */
    bool client_cert;               /* CURLOPT_SSLCERT/SSLKEY */
    bool body_cross_origin;         /* redirect.allow_body_cross_origin */
    unsigned timeout_ms;            /* ph_curl_options.timeout_ms */
    long curl_timeout_ms;           /* CURLOPT_TIMEOUT_MS before attaching; 0: none */
    const char *const *cookies;     /* curl's cookie engine on, holding these (Netscape) */
    const char *cookie_file;        /* curl's cookie engine on, reading this file */
    char *jar_after;                /* the engine's cookies after the chain, "name=value;" */
    size_t jar_cap;
} fetch_opts;

static ph_status fetch_ex(const char *path_or_url, const fetch_opts *fo, ph_curl_result *r,
                          body *b);

/* Fetches url (a path on A, or a full URL) on a fresh guarded handle. */
static ph_status fetch(const char *path_or_url, unsigned max_hops, const char *userpwd,
                       ph_curl_result *r, body *b)
{
    fetch_opts fo = {.max_hops = max_hops, .userpwd = userpwd, .curl_timeout_ms = 5000};
    return fetch_ex(path_or_url, &fo, r, b);
}

static ph_status fetch_ex(const char *path_or_url, const fetch_opts *fo, ph_curl_result *r,
                          body *b)
{
    char url[512];
    if (path_or_url[0] == '/')
        snprintf(url, sizeof url, "http://loop.test:%u%s", (unsigned)A.port, path_or_url);
    else
        snprintf(url, sizeof url, "%s", path_or_url);
    pthread_mutex_lock(&log_lock);
    request_log[0] = '\0';
    b_heads[0] = '\0';
    t_certs[0] = '\0';
    pthread_mutex_unlock(&log_lock);
    memset(b, 0, sizeof *b);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_CAINFO, cert);
    if (fo->curl_timeout_ms != 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, fo->curl_timeout_ms);
    if (fo->userpwd != NULL)
        curl_easy_setopt(c, CURLOPT_USERPWD, fo->userpwd);
    if (fo->post != NULL)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, fo->post);
    if (fo->method != NULL)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, fo->method);
    if (fo->client_cert) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, ccert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, ckey);
    }
    /* Set before attaching: the attachment overrides all of these. */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "http://127.0.0.1:9/");
    ph_curl_options o = {
        .redirect = {.max_hops = fo->max_hops, .allow_body_cross_origin = fo->body_cross_origin},
        .headers = fo->headers != NULL ? fo->headers : fo->userpwd == NULL ? credentials : NULL,
        .write = on_body,
        .write_arg = b,
        .timeout_ms = fo->timeout_ms};
    ph_curl *pc = NULL;
    ph_diag d;
    assert_int_equal(ph_curl_attach(c, G, "default", &o, &pc, &d), PH_OK);
    if (fo->cookies != NULL) {
        curl_easy_setopt(c, CURLOPT_COOKIEFILE, "");
        for (const char *const *k = fo->cookies; *k != NULL; k++)
            curl_easy_setopt(c, CURLOPT_COOKIELIST, *k);
    }
    if (fo->cookie_file != NULL)
        curl_easy_setopt(c, CURLOPT_COOKIEFILE, fo->cookie_file);
    ph_status st = ph_curl_perform(pc, url, r);
    if (fo->jar_after != NULL) {
        struct curl_slist *jar = NULL;
        curl_easy_getinfo(c, CURLINFO_COOKIELIST, &jar);
        fo->jar_after[0] = '\0';
        for (struct curl_slist *l = jar; l != NULL; l = l->next) {
            char name[64] = "", value[64] = "";
            sscanf(l->data, "%*s %*s %*s %*s %*s %63s %63s", name, value);
            size_t at = strlen(fo->jar_after);
            snprintf(fo->jar_after + at, fo->jar_cap - at, "%s=%s;", name, value);
        }
        curl_slist_free_all(jar);
    }
    ph_curl_detach(&pc);
    assert_null(pc);
    curl_easy_cleanup(c);
    return st;
}

static void allowed_fetch_http_and_https(void **state)
{
    (void)state;
    ph_curl_result r;
    body b;
    assert_int_equal(fetch("/ok", 0, NULL, &r, &b), PH_OK);
    assert_int_equal(r.reason, PH_REASON_ALLOWED);
    assert_int_equal(r.http_status, 200);
    assert_string_equal(b.data, "page-body\n");
    assert_string_equal(r.addr_text, "127.0.0.1");
    assert_int_equal(r.hops, 0);
    assert_string_equal(r.verdict.rule_file, "allow.yaml");
    assert_string_equal(request_log, "A /ok auth=Bearer secret-token cookie=session=abc\n");
    /* https: pinned to the address, the certificate checked for the name. */
    char url[128];
    snprintf(url, sizeof url, "https://tls.test:%u/ok-tls", (unsigned)T.port);
    assert_int_equal(fetch(url, 0, NULL, &r, &b), PH_OK);
    assert_string_equal(b.data, "tls-body\n");
    /* A followed redirect: its body is not the caller's. */
    assert_int_equal(fetch("/body-redirect", 0, NULL, &r, &b), PH_OK);
    assert_string_equal(b.data, "page-body\n");
    assert_int_equal(r.hops, 1);
    assert_false(r.credentials_dropped);
}

typedef struct refusal {
    const char *path;
    ph_reason want;
    const char *url_has; /* in r.url: the refused target */
} refusal;

static void refused_redirects_carry_their_reason(void **state)
{
    (void)state;
    static const refusal cases[] = {
        {"/to-metadata-literal", PH_REASON_IP_LITERAL, "169.254.169.254"},
        {"/to-metadata-name", PH_REASON_DENIED_ADDRESS, "metadata.test"},
        {"/to-literal", PH_REASON_IP_LITERAL, "127.0.0.1"},
        {"/to-unlisted", PH_REASON_NOT_ALLOWLISTED, "private.test"},
        {"/to-port", PH_REASON_PORT_NOT_ALLOWED, "loop.test"},
        {"/to-bad", PH_REASON_REDIRECT_BAD_LOCATION, "/?/evil.example/"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_curl_result r;
        body b;
        ph_status st = fetch(cases[i].path, 0, NULL, &r, &b);
        if (st != PH_E_DENIED || r.reason != cases[i].want)
            fail_msg("%s: %s %s (%s)", cases[i].path, ph_strerror(st), ph_reason_code(r.reason),
                     r.detail);
        assert_non_null(strstr(r.url, cases[i].url_has));
        assert_string_equal(b.data, ""); /* the redirect's body is not delivered */
        /* One request, to A: nothing reached the target. */
        char want[256];
        snprintf(want, sizeof want, "A %s auth=Bearer secret-token cookie=session=abc\n",
                 cases[i].path);
        assert_string_equal(request_log, want);
    }
    /* The denied address is named. */
    ph_curl_result r;
    body b;
    assert_int_equal(fetch("/to-metadata-name", 0, NULL, &r, &b), PH_E_DENIED);
    assert_non_null(strstr(r.detail, "169.254.169.254"));
}

static void downgrade_and_hop_limit(void **state)
{
    (void)state;
    ph_curl_result r;
    body b;
    char url[128];
    snprintf(url, sizeof url, "https://tls.test:%u/down", (unsigned)T.port);
    assert_int_equal(fetch(url, 0, NULL, &r, &b), PH_E_DENIED);
    assert_int_equal(r.reason, PH_REASON_REDIRECT_DOWNGRADE);
    assert_string_equal(request_log, "T /down auth=Bearer secret-token cookie=session=abc\n");
    /* /loop redirects to itself: three hops followed, the fourth refused. */
    assert_int_equal(fetch("/loop", 3, NULL, &r, &b), PH_E_DENIED);
    assert_int_equal(r.reason, PH_REASON_REDIRECT_LIMIT);
    assert_int_equal(r.hops, 3);
    const char *line = "A /loop auth=Bearer secret-token cookie=session=abc\n";
    char want[512];
    snprintf(want, sizeof want, "%s%s%s%s", line, line, line, line);
    assert_string_equal(request_log, want);
}

static void cross_origin_redirect_drops_credentials(void **state)
{
    (void)state;
    ph_curl_result r;
    body b;
    assert_int_equal(fetch("/to-other", 0, NULL, &r, &b), PH_OK);
    assert_string_equal(b.data, "echo\n");
    assert_true(r.credentials_dropped);
    assert_string_equal(request_log, "A /to-other auth=Bearer secret-token cookie=session=abc\n"
                                     "B /echo auth=- cookie=-\n");
    /* Same origin: they follow. */
    assert_int_equal(fetch("/to-same", 0, NULL, &r, &b), PH_OK);
    assert_false(r.credentials_dropped);
    assert_string_equal(request_log, "A /to-same auth=Bearer secret-token cookie=session=abc\n"
                                     "A /echo auth=Bearer secret-token cookie=session=abc\n");
    /* CURLOPT_USERPWD (curl's own Authorization) is dropped too. */
    assert_int_equal(fetch("/to-other", 0, "user:pass", &r, &b), PH_OK);
    assert_string_equal(request_log, "A /to-other auth=Basic dXNlcjpwYXNz cookie=-\n"
                                     "B /echo auth=- cookie=-\n");
}

/* Of the headers the caller set only the short list of the library
 * reaches another origin; a POST body only when asked for. */
static void cross_origin_redirect_keeps_secrets_home(void **state)
{
    (void)state;
    static const char *const hdrs[] = {"X-Api-Key: key-123", "Private-Token: tok-456",
                                       "Accept: application/json", "User-Agent: worker/1",
                                       "Content-Type: application/x-www-form-urlencoded", NULL};
    fetch_opts fo = {.headers = hdrs, .curl_timeout_ms = 5000};
    ph_curl_result r;
    body b;
    assert_int_equal(fetch_ex("/to-other", &fo, &r, &b), PH_OK);
    printf("# headers B saw after a cross-origin 302:\n%s", b_heads);
    assert_null(strstr(b_heads, "key-123"));
    assert_null(strstr(b_heads, "tok-456"));
    assert_null(strstr(b_heads, "Content-Type")); /* GET: no body, no body headers */
    assert_non_null(strstr(b_heads, "Accept: application/json"));
    assert_non_null(strstr(b_heads, "User-Agent: worker/1"));
    /* A 307 would re-send the POST body: refused, B sees nothing. */
    fo.post = "client_id=x&client_secret=s3cr3t";
    assert_int_equal(fetch_ex("/to-other-307", &fo, &r, &b), PH_E_DENIED);
    printf("# B after a cross-origin 307 of a POST: %s\n", b_heads[0] ? b_heads : "(nothing)");
    assert_int_equal(r.reason, PH_REASON_REDIRECT_BODY_CROSS_ORIGIN);
    assert_string_equal(b_heads, "");
    /* Answered before curl sent the body (it waited for 100 Continue):
     * the body is still the request's and would follow: refused too. */
    static const char *const expect[] = {"Expect: 100-continue", NULL};
    fetch_opts early = {.headers = expect, .post = fo.post, .curl_timeout_ms = 5000};
    assert_int_equal(fetch_ex("/to-other-307-early", &early, &r, &b), PH_E_DENIED);
    printf("# B after an early cross-origin 307 of a POST: %s\n",
           b_heads[0] ? b_heads : "(nothing)");
    assert_int_equal(r.reason, PH_REASON_REDIRECT_BODY_CROSS_ORIGIN);
    assert_string_equal(b_heads, "");
    /* A body is the request's whatever its method is called: a GET
     * with one is refused the same way. */
    early.method = "GET";
    assert_int_equal(fetch_ex("/to-other-307-early", &early, &r, &b), PH_E_DENIED);
    printf("# B after an early cross-origin 307 of a GET with a body: %s\n",
           b_heads[0] ? b_heads : "(nothing)");
    assert_int_equal(r.reason, PH_REASON_REDIRECT_BODY_CROSS_ORIGIN);
    assert_string_equal(b_heads, "");
    /* 303 turns any method into GET, a custom one too. */
    fetch_opts del = {.headers = hdrs, .method = "DELETE", .curl_timeout_ms = 5000};
    assert_int_equal(fetch_ex("/to-other-303", &del, &r, &b), PH_OK);
    printf("# B after a cross-origin 303 of a DELETE: %.20s\n", b_heads);
    assert_non_null(strstr(b_heads, "GET /echo"));
    assert_null(strstr(b_heads, "DELETE"));
    /* 303 continues as GET without the body: followed. */
    assert_int_equal(fetch_ex("/to-other-303", &fo, &r, &b), PH_OK);
    assert_non_null(strstr(b_heads, "GET /echo"));
    assert_null(strstr(b_heads, "s3cr3t"));
    /* Asked for: the body follows (still without the secrets). */
    fo.body_cross_origin = true;
    assert_int_equal(fetch_ex("/to-other-307", &fo, &r, &b), PH_OK);
    assert_non_null(strstr(b_heads, "POST /echo"));
    assert_non_null(strstr(b_heads, "client_secret=s3cr3t"));
    assert_non_null(strstr(b_heads, "Content-Type: application/x-www-form-urlencoded"));
    assert_null(strstr(b_heads, "key-123"));
}

/* The client certificate is shown to the origin it was set for, never to
 * the next one, nor again once the chain left its origin (A -> B -> A). */
static void client_certificate_stays_on_its_origin(void **state)
{
    (void)state;
    static const struct {
        const char *path, *shown;
    } cases[] = {
        {"/to-tls-other", "/to-tls-other:yes\n/echo:no\n"},
        {"/to-tls-other-and-back", "/to-tls-other-and-back:yes\n/to-tls-home:no\n/echo:no\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fetch_opts fo = {.client_cert = true, .curl_timeout_ms = 5000};
        ph_curl_result r;
        body b;
        char url[128];
        snprintf(url, sizeof url, "https://tls.test:%u%s", (unsigned)T.port, cases[i].path);
        assert_int_equal(fetch_ex(url, &fo, &r, &b), PH_OK);
        printf("# client certificate shown:\n%s", t_certs);
        assert_string_equal(t_certs, cases[i].shown);
        assert_true(r.credentials_dropped);
    }
}

/* The engine holds exactly its two cookies of before (in any order). */
static bool jar_is_ab(const char *after)
{
    return strstr(after, "a=1;") != NULL && strstr(after, "b=2;") != NULL && strlen(after) == 8;
}

/* curl's cookie engine, when the caller turns it on, follows the rule of
 * the Python adapters: a redirect's Set-Cookie is never kept nor sent on,
 * the engine's cookies go to no hop once the chain left its first origin,
 * and a final response stores cookies only when the chain never left it. */
static void cookie_engine_keeps_no_redirect_cookie(void **state)
{
    (void)state;
    static const char *const jar[] = {"loop.test\tFALSE\t/\tFALSE\t0\ta\t1",
                                      "other.test\tFALSE\t/\tFALSE\t0\tb\t2", NULL};
    static const char *const none[] = {NULL};
    char after[512];
    fetch_opts fo = {.headers = none, .cookies = jar, .jar_after = after,
                     .jar_cap = sizeof after, .curl_timeout_ms = 5000};
    ph_curl_result r;
    body b;
    assert_int_equal(fetch_ex("/cookie-to-other", &fo, &r, &b), PH_OK);
    printf("# cookie engine, A -> B:\n%s# engine after: %s\n", request_log, after);
    assert_string_equal(request_log, "A /cookie-to-other auth=- cookie=a=1\n"
                                     "B /set-cookie auth=- cookie=-\n");
    assert_true(jar_is_ab(after));
    assert_int_equal(fetch_ex("/cookie-to-same", &fo, &r, &b), PH_OK);
    printf("# cookie engine, A -> A:\n%s# engine after: %s\n", request_log, after);
    assert_string_equal(request_log, "A /cookie-to-same auth=- cookie=a=1\n"
                                     "A /echo auth=- cookie=a=1\n");
    assert_true(jar_is_ab(after));
    assert_int_equal(fetch_ex("/cookie-to-other-and-back", &fo, &r, &b), PH_OK);
    printf("# cookie engine, A -> B -> A:\n%s# engine after: %s\n", request_log, after);
    assert_string_equal(request_log, "A /cookie-to-other-and-back auth=- cookie=a=1\n"
                                     "B /cookie-back auth=- cookie=-\n"
                                     "A /echo auth=- cookie=-\n");
    assert_true(jar_is_ab(after));
    /* A refused redirect's cookie is not kept either. */
    fo.max_hops = 1;
    assert_int_equal(fetch_ex("/cookie-to-other-and-back", &fo, &r, &b), PH_E_DENIED);
    assert_int_equal(r.reason, PH_REASON_REDIRECT_LIMIT);
    assert_true(jar_is_ab(after));
    /* Without redirects the engine is curl's own: a final answer's cookie
     * is kept. */
    char url[128];
    snprintf(url, sizeof url, "http://other.test:%u/set-cookie", (unsigned)B.port);
    fo.max_hops = 0;
    assert_int_equal(fetch_ex(url, &fo, &r, &b), PH_OK);
    assert_non_null(strstr(after, "finalB=1;"));
}

/* The same with the cookies in a file (CURLOPT_COOKIEFILE): curl reads its
 * files again before every transfer, so a hop after the chain left its
 * first origin must not get them back. */
static void cookie_file_keeps_no_redirect_cookie(void **state)
{
    (void)state;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cookies.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("loop.test\tFALSE\t/\tFALSE\t0\ta\t1\nother.test\tFALSE\t/\tFALSE\t0\tb\t2\n", f);
    assert_int_equal(fclose(f), 0);
    static const char *const none[] = {NULL};
    char after[512];
    fetch_opts fo = {.headers = none, .cookie_file = path, .jar_after = after,
                     .jar_cap = sizeof after, .curl_timeout_ms = 5000};
    ph_curl_result r;
    body b;
    assert_int_equal(fetch_ex("/cookie-to-other", &fo, &r, &b), PH_OK);
    printf("# cookie file, A -> B:\n%s# engine after: %s\n", request_log, after);
    assert_string_equal(request_log, "A /cookie-to-other auth=- cookie=a=1\n"
                                     "B /set-cookie auth=- cookie=-\n");
    assert_true(jar_is_ab(after));
    assert_int_equal(fetch_ex("/cookie-to-other-and-back", &fo, &r, &b), PH_OK);
    printf("# cookie file, A -> B -> A:\n%s# engine after: %s\n", request_log, after);
    assert_string_equal(request_log, "A /cookie-to-other-and-back auth=- cookie=a=1\n"
                                     "B /cookie-back auth=- cookie=-\n"
                                     "A /echo auth=- cookie=-\n");
    assert_true(jar_is_ab(after));
}

/* A redirect's body is read up to the bound, then its connection closed;
 * the whole chain runs under one deadline, set or defaulted. */
static void redirect_bodies_and_deadline_are_bounded(void **state)
{
    (void)state;
    fetch_opts fo = {.curl_timeout_ms = 20000};
    ph_curl_result r;
    body b;
    atomic_store(&flood_sent, 0);
    assert_int_equal(fetch_ex("/flood", &fo, &r, &b), PH_OK);
    assert_string_equal(b.data, "page-body\n");
    unsigned long long sent = atomic_load(&flood_sent);
    printf("# a 1 GiB redirect body: %llu bytes left the server\n", sent);
    assert_true(sent < 16ULL << 20);
    /* /trickle redirects to itself, each body a byte per 100 ms: 0.4 s a
     * hop, 10 hops. One deadline of 1 s ends the chain. */
    fo = (fetch_opts){.max_hops = 10, .timeout_ms = 1000};
    int64_t t0 = ph_monotonic_ms();
    ph_status st = fetch_ex("/trickle", &fo, &r, &b);
    int64_t took = ph_monotonic_ms() - t0;
    printf("# trickled chain: %s %s after %lld ms\n", ph_strerror(st),
           ph_reason_code(r.reason), (long long)took);
    assert_int_equal(st, PH_E_IO);
    assert_int_equal(r.reason, PH_REASON_UPSTREAM_TIMEOUT);
    assert_true(took < 2500);
}

static void rebinding_second_request_refused(void **state)
{
    (void)state;
    ph_curl_result r;
    body b;
    char url[128];
    snprintf(url, sizeof url, "http://flip.test:%u/ok", (unsigned)A.port);
    assert_int_equal(fetch(url, 0, NULL, &r, &b), PH_OK);
    assert_string_equal(b.data, "page-body\n");
    ph_dnsmasq_set_hosts(&dns, hosts,
                         "127.0.0.1 other.test\n127.0.0.1 tls.test\n169.254.169.254 flip.test\n");
    assert_true(ph_dnsmasq_wait_refused(&dns, "flip.test", PH_REASON_DENIED_ADDRESS));
    assert_int_equal(fetch(url, 0, NULL, &r, &b), PH_E_DENIED);
    assert_int_equal(r.reason, PH_REASON_DENIED_ADDRESS);
    assert_string_equal(request_log, ""); /* no connection at all */
}

static void socket_check_refuses_unchecked_addresses(void **state)
{
    (void)state;
    ph_pinned_addrs a = {0};
    struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons(A.port)};
    s4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memcpy(&a.addr[0], &s4, sizeof s4);
    a.addr_len[0] = sizeof s4;
    a.count = 1;
    assert_true(ph_pinned_addrs_contains(&a, (struct sockaddr *)&s4, sizeof s4));
    struct sockaddr_in other = s4;
    other.sin_port = htons(B.port);
    assert_false(ph_pinned_addrs_contains(&a, (struct sockaddr *)&other, sizeof other));
    other = s4;
    other.sin_addr.s_addr = htonl(0x7f000002);
    assert_false(ph_pinned_addrs_contains(&a, (struct sockaddr *)&other, sizeof other));
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons(A.port)};
    assert_false(ph_pinned_addrs_contains(&a, (struct sockaddr *)&s6, sizeof s6));
    assert_false(ph_pinned_addrs_contains(NULL, (struct sockaddr *)&s4, sizeof s4));
    /* Missing arguments. */
    ph_curl *pc = (ph_curl *)&a;
    assert_int_equal(ph_curl_attach(NULL, G, "default", NULL, &pc, NULL), PH_E_INVAL);
    assert_null(pc);
    ph_curl_result r;
    assert_int_equal(ph_curl_perform(NULL, "http://loop.test/", &r), PH_E_INVAL);
    ph_curl_detach(NULL);
}

int main(void)
{
    if (!ph_dnsmasq_installed())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allowed_fetch_http_and_https),
        cmocka_unit_test(refused_redirects_carry_their_reason),
        cmocka_unit_test(downgrade_and_hop_limit),
        cmocka_unit_test(cross_origin_redirect_drops_credentials),
        cmocka_unit_test(cross_origin_redirect_keeps_secrets_home),
        cmocka_unit_test(client_certificate_stays_on_its_origin),
        cmocka_unit_test(cookie_engine_keeps_no_redirect_cookie),
        cmocka_unit_test(cookie_file_keeps_no_redirect_cookie),
        cmocka_unit_test(redirect_bodies_and_deadline_are_bounded),
        cmocka_unit_test(rebinding_second_request_refused),
        cmocka_unit_test(socket_check_refuses_unchecked_addresses),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
