/*
 * worker_libcurl.c - how a worker fetches a tenant-supplied URL with libcurl
 * under the guard (docs/worker.md).
 *
 *   worker_libcurl --table allow.ptab [--list NAME] [--dns-server IP:PORT]
 *                  [--max-redirects N] URL
 *
 * libpinhole-curl does the security-critical part (pinhole/curl.h): every
 * hop decided and resolved by the guard, curl pinned to exactly the checked
 * addresses (CURLOPT_RESOLVE, an open-socket check), http/https only, no
 * proxy from the environment, redirects followed by the guard (each hop
 * checked anew, credentials dropped on an origin change, no https -> http).
 * The body goes to stdout (at most 16 MiB).
 *
 * Exit status: 0 fetched, 1 refused by the guard, 2 usage or setup error,
 * 3 transfer failed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>

#include "pinhole/curl.h"

static size_t write_body(char *data, size_t size, size_t n, void *arg)
{
    return fwrite(data, size, n, arg) * size;
}

static int fetch(ph_guard *g, const char *list, unsigned max_redirects, const char *url)
{
    CURL *c = curl_easy_init();
    if (c == NULL)
        return 2;
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)16 * 1024 * 1024);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* One deadline for the whole chain, every redirect hop included. */
    ph_curl_options o = {.redirect = {.max_hops = max_redirects},
                         .write = write_body, .write_arg = stdout, .timeout_ms = 60000};
    ph_curl *pc = NULL;
    ph_diag d;
    if (ph_curl_attach(c, g, list, &o, &pc, &d) != PH_OK) {
        fprintf(stderr, "worker: %s\n", d.message);
        curl_easy_cleanup(c);
        return 2;
    }
    ph_curl_result r;
    ph_status st = ph_curl_perform(pc, url, &r);
    int status = 0;
    if (st == PH_E_DENIED) {
        fprintf(stderr, "worker: refused %s: %s (%s)\n", r.url, ph_reason_code(r.reason), r.detail);
        status = 1;
    } else if (st != PH_OK) {
        fprintf(stderr, "worker: %s: %s\n", r.url, r.detail);
        status = 3;
    } else {
        fprintf(stderr, "worker: %ld from %s after %u redirect(s), at %s, allowed by %s:%u\n",
                r.http_status, r.url, r.hops, r.addr_text, r.verdict.rule_file,
                (unsigned)r.verdict.rule_line);
        status = r.http_status < 400 ? 0 : 3;
    }
    ph_curl_detach(&pc); /* before curl_easy_cleanup: curl has no destructor hook */
    curl_easy_cleanup(c);
    return status;
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
    long max_redirects = 5;
    int c;
    while ((c = getopt_long(argc, argv, "t:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': table = optarg; break;
        case 'l': list = optarg; break;
        case 'S': opts.dns_servers = optarg; break;
        case 'm': {
            char *end = NULL;
            max_redirects = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0')
                max_redirects = -1;
            break;
        }
        case 'h':
        default:
            fputs("Usage: worker_libcurl --table FILE [--list NAME] [--dns-server IP:PORT]\n"
                  "                      [--max-redirects 1..20] URL\n",
                  c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (table == NULL || optind + 1 != argc || max_redirects < 1 || max_redirects > 20) {
        fputs("worker: need --table and one URL (--max-redirects 1..20)\n", stderr);
        return 2;
    }
    ph_guard *g = NULL;
    ph_diag d;
    if (ph_guard_open(table, &opts, &g, &d) != PH_OK) {
        fprintf(stderr, "worker: %s\n", d.message);
        return 2;
    }
    int status = 2;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK) {
        status = fetch(g, list, (unsigned)max_redirects, argv[optind]);
        curl_global_cleanup();
    }
    ph_guard_close(&g);
    return status;
}
