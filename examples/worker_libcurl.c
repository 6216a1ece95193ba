/*
 * worker_libcurl.c - how a worker fetches a tenant-supplied URL safely with
 * libcurl and libpinhole (docs/guard.md).
 *
 *   worker_libcurl --table allow.ptab [--list NAME] [--dns-server IP:PORT]
 *                  [--max-redirects N] URL
 *
 * For the URL and for every redirect hop:
 *   1. ph_guard_check_and_resolve: parse strictly, check the allowlist,
 *      resolve exactly that name and check every address (denylist);
 *   2. pin: CURLOPT_RESOLVE maps host:port to the checked addresses only, so
 *      libcurl never resolves the name itself (no second, different answer:
 *      DNS rebinding), while TLS is still verified against the NAME (SNI and
 *      certificate check use the URL's host, not the address);
 *   3. a CURLOPT_OPENSOCKETFUNCTION refuses any address that is not pinned,
 *      as a second lock on the same door;
 *   4. automatic redirects are off: a Location header is a new, untrusted
 *      URL, so it goes back to step 1 (an allowed host can redirect to
 *      http://169.254.169.254/ or to a name that is not allowlisted).
 * Proxies from the environment are ignored: the pinned address must be the
 * peer. The body goes to stdout (at most 16 MiB).
 *
 * Exit status: 0 fetched, 1 refused by the guard, 2 usage or setup error,
 * 3 transfer failed.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "pinhole/guard.h"

#define BODY_MAX (16L * 1024 * 1024)
#define URL_MAX 8192

/* The addresses one hop may use, for the open-socket check. */
typedef struct hop_pins {
    const ph_pinned_addrs *addrs;
} hop_pins;

static bool same_endpoint(const struct sockaddr *a, const struct sockaddr_storage *b)
{
    if (a->sa_family != b->ss_family)
        return false;
    if (a->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)(const void *)a;
        const struct sockaddr_in *y = (const struct sockaddr_in *)(const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)(const void *)a;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)(const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return false;
}

/* libcurl asks us for every socket it opens: only to a pinned address. */
static curl_socket_t open_pinned_socket(void *clientp, curlsocktype purpose,
                                        struct curl_sockaddr *address)
{
    const hop_pins *pins = clientp;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKET_BAD;
    for (size_t i = 0; i < pins->addrs->count; i++)
        if (same_endpoint(&address->addr, &pins->addrs->addr[i]))
            return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    fprintf(stderr, "worker: libcurl tried an address that was not pinned; refused\n");
    return CURL_SOCKET_BAD;
}

static size_t write_body(char *data, size_t size, size_t n, void *arg)
{
    (void)arg;
    return fwrite(data, size, n, stdout) * size;
}

/* "host:port:addr1,[v6addr2],..." for CURLOPT_RESOLVE. */
static bool resolve_entry(const ph_verdict *v, const ph_pinned_addrs *addrs, char *out,
                          size_t cap)
{
    int n = snprintf(out, cap, "%s:%u:", v->host, (unsigned)v->port);
    if (n < 0 || (size_t)n >= cap)
        return false;
    size_t len = (size_t)n;
    for (size_t i = 0; i < addrs->count; i++) {
        char a[INET6_ADDRSTRLEN];
        if (ph_pinned_addr_string(addrs, i, a, sizeof a) != PH_OK)
            return false;
        bool v6 = addrs->addr[i].ss_family == AF_INET6;
        n = snprintf(out + len, cap - len, "%s%s%s%s", i > 0 ? "," : "", v6 ? "[" : "", a,
                     v6 ? "]" : "");
        if (n < 0 || (size_t)n >= cap - len)
            return false;
        len += (size_t)n;
    }
    return true;
}

/* Fetches one hop. Returns the HTTP status, or -1; *location gets the
 * absolute redirect target (if any). */
static long fetch_hop(const char *url, const ph_verdict *v, const ph_pinned_addrs *addrs,
                      char *location, size_t cap)
{
    char entry[PH_HOST_MAX + 16 + PH_PINNED_MAX * (INET6_ADDRSTRLEN + 3)];
    if (!resolve_entry(v, addrs, entry, sizeof entry))
        return -1;
    hop_pins pins = {addrs};
    struct curl_slist *resolve = curl_slist_append(NULL, entry);
    CURL *c = curl_easy_init();
    long code = -1;
    location[0] = '\0';
    if (c == NULL || resolve == NULL)
        goto out;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_pinned_socket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &pins);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);      /* every hop is re-checked here */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_PROXY, "");               /* no proxy from the environment */
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);      /* the defaults, spelled out: */
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);      /* TLS checks the NAME */
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)BODY_MAX);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
        fprintf(stderr, "worker: %s: %s\n", url, curl_easy_strerror(rc));
        goto out;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    char *redirect = NULL;
    if (code >= 300 && code < 400 &&
        curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &redirect) == CURLE_OK && redirect != NULL)
        snprintf(location, cap, "%s", redirect);
out:
    curl_easy_cleanup(c);
    curl_slist_free_all(resolve);
    return code;
}

static void usage(FILE *out)
{
    fputs("Usage: worker_libcurl --table FILE [--list NAME] [--dns-server IP:PORT]\n"
          "                      [--max-redirects N] URL\n",
          out);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"table", required_argument, NULL, 't'},  {"list", required_argument, NULL, 'l'},
        {"dns-server", required_argument, NULL, 'S'},
        {"max-redirects", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *table = NULL, *list = "default";
    ph_guard_options opts = {0};
    int max_redirects = 5, c;
    while ((c = getopt_long(argc, argv, "t:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': table = optarg; break;
        case 'l': list = optarg; break;
        case 'S': opts.dns_servers = optarg; break;
        case 'm': {
            char *end = NULL;
            long m = strtol(optarg, &end, 10);
            max_redirects = (*optarg != '\0' && *end == '\0' && m >= 0 && m <= 20) ? (int)m : -1;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (table == NULL || optind + 1 != argc || max_redirects < 0 || max_redirects > 20) {
        usage(stderr);
        return 2;
    }
    ph_guard *g = NULL;
    ph_diag d;
    if (ph_guard_open(table, &opts, &g, &d) != PH_OK) {
        fprintf(stderr, "worker: %s\n", d.message);
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        ph_guard_close(&g);
        return 2;
    }
    char url[URL_MAX], next[URL_MAX];
    snprintf(url, sizeof url, "%s", argv[optind]);
    int status = 3;
    for (int hop = 0; hop <= max_redirects; hop++) {
        ph_verdict v;
        ph_pinned_addrs addrs;
        if (ph_guard_check_and_resolve(g, list, url, strlen(url), &v, &addrs, NULL) != PH_OK) {
            fprintf(stderr, "worker: refused %s: %s (%s)\n", url, ph_reason_code(v.reason),
                    v.detail);
            status = 1;
            break;
        }
        fprintf(stderr, "worker: hop %d %s allowed by %s:%u, pinned to %zu address(es)\n", hop,
                url, v.rule_file, (unsigned)v.rule_line, addrs.count);
        long code = fetch_hop(url, &v, &addrs, next, sizeof next);
        if (code < 0)
            break;
        if (next[0] == '\0') {
            status = code < 400 ? 0 : 3;
            break;
        }
        if (hop == max_redirects) {
            fprintf(stderr, "worker: more than %d redirects\n", max_redirects);
            break;
        }
        memcpy(url, next, sizeof url); /* checked again at the top of the loop */
    }
    curl_global_cleanup();
    ph_guard_close(&g);
    return status;
}
