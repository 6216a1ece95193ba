/*
 * cmd_fleet_status.c - policyc fleet-status [--expect ID|TABLE] [--wait S]
 * URL...: which policy each pinhole-proxy of a fleet serves, read from the
 * pinhole_proxy_policy_info gauge of each admin listener's /metrics, and
 * whether they all agree (on the expected policy, when one is given).
 *
 * Here rather than in pinhole-proxy: a rollout is compile, ship, then this
 * check, from wherever the table is compiled (CI, a workstation), and the
 * proxy, which faces tenants, links no HTTP client. libcurl fetches every
 * endpoint at once (a multi handle), http and https only, no redirect, no
 * proxy from the environment, each answer capped.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "pinhole/clock.h"
#include "pinhole/hex.h"
#include "pinhole/table.h"
#include "table_input.h"

/* The gauge pinhole-proxy exposes (proxy/src/metrics.c). */
#define POLICY_METRIC "pinhole_proxy_policy_info{policy_id=\""
#define BODY_MAX (1L << 20)      /* a /metrics answer is a few KiB */
#define FETCH_TIMEOUT_MS 5000    /* per endpoint and round */
#define POLL_MS 500              /* --wait: between rounds */
#define ENDPOINTS_MAX 1024
#define WHY_MAX 160

typedef struct endpoint {
    const char *arg;             /* as given */
    char *url;                   /* the /metrics URL asked */
    char *body;                  /* this round's answer */
    size_t len;
    bool too_large;
    char id[PH_TABLE_ID_HEX_LEN + 1]; /* "" when not known */
    char why[WHY_MAX];           /* when id is "": what went wrong */
} endpoint;

static void usage(FILE *out)
{
    fputs("Usage: policyc fleet-status [--expect ID|TABLE] [--wait SECONDS] URL...\n"
          "\n"
          "Print which policy each pinhole-proxy serves, one line per URL (an admin\n"
          "listener, http://HOST:PORT, or its /metrics), read from the\n"
          "pinhole_proxy_policy_info gauge of its /metrics, then whether they agree.\n"
          "The fleet has converged when every proxy answered and all serve one\n"
          "policy id (the expected one, with --expect). Endpoints are asked at\n"
          "once, each within 5 s, over http or https, following no redirect and\n"
          "ignoring proxy variables.\n"
          "\n"
          "Options:\n"
          "  -e, --expect=ID|TABLE  the policy id every proxy must serve (64 hex\n"
          "                         digits, as 'policyc compile' prints it), or a\n"
          "                         table or allowlist whose id it is\n"
          "  -w, --wait=SECONDS     ask again every 0.5 s until converged or SECONDS\n"
          "                         passed, printing the table whenever it changes\n"
          "  -h, --help             show this help\n"
          "\n"
          "Exit status: 0 converged, 1 not converged (proxies disagree, one did\n"
          "not answer or names no policy, or one serves another than --expect; at\n"
          "the deadline with --wait), 2 usage error or unreadable --expect TABLE.\n",
          out);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    endpoint *e = arg;
    size_t add = size * n;
    if (e->len + add > BODY_MAX) {
        e->too_large = true;
        return 0; /* ends the transfer */
    }
    char *b = realloc(e->body, e->len + add + 1);
    if (b == NULL)
        return 0;
    memcpy(b + e->len, data, add);
    e->len += add;
    b[e->len] = '\0';
    e->body = b;
    return add;
}

static bool is_policy_id(const char *s, size_t len)
{
    if (len != PH_TABLE_ID_HEX_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (ph_hex_value((unsigned char)s[i]) < 0)
            return false;
    return true;
}

/* The policy id of a /metrics text: the one pinhole_proxy_policy_info
 * line at the start of a line; none or two are an answer without an id. */
static void read_id(endpoint *e)
{
    const char *found = NULL;
    size_t mlen = strlen(POLICY_METRIC);
    for (const char *line = e->body; line != NULL && *line;) {
        if (strncmp(line, POLICY_METRIC, mlen) == 0) {
            if (found != NULL) {
                snprintf(e->why, sizeof e->why, "more than one policy_info line");
                return;
            }
            found = line + mlen;
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    if (found == NULL || !is_policy_id(found, PH_TABLE_ID_HEX_LEN) ||
        strncmp(found + PH_TABLE_ID_HEX_LEN, "\"} 1", 4) != 0) {
        snprintf(e->why, sizeof e->why, "no pinhole_proxy_policy_info in its /metrics");
        return;
    }
    memcpy(e->id, found, PH_TABLE_ID_HEX_LEN);
    e->id[PH_TABLE_ID_HEX_LEN] = '\0';
}

static CURL *easy_for(endpoint *e)
{
    CURL *h = curl_easy_init();
    if (h == NULL)
        return NULL;
    curl_easy_setopt(h, CURLOPT_URL, e->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)FETCH_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, e);
    curl_easy_setopt(h, CURLOPT_PRIVATE, e);
    return h;
}

/* One round: every endpoint asked at once; each ends with an id or why. */
static void ask_all(endpoint *eps, int n)
{
    CURLM *m = curl_multi_init();
    CURL **hs = calloc((size_t)n, sizeof *hs);
    for (int i = 0; i < n; i++) {
        endpoint *e = &eps[i];
        free(e->body);
        e->body = NULL;
        e->len = 0;
        e->too_large = false;
        e->id[0] = '\0';
        snprintf(e->why, sizeof e->why, "out of memory");
        if (m != NULL && hs != NULL && (hs[i] = easy_for(e)) != NULL)
            curl_multi_add_handle(m, hs[i]);
    }
    int running = m != NULL && hs != NULL;
    while (running) {
        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(m, NULL, 0, 1000, NULL);
    }
    CURLMsg *msg;
    int left;
    while (m != NULL && (msg = curl_multi_info_read(m, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        endpoint *e;
        long code = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&e);
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
        if (e->too_large)
            snprintf(e->why, sizeof e->why, "its answer is larger than 1 MiB");
        else if (msg->data.result != CURLE_OK)
            snprintf(e->why, sizeof e->why, "unreachable: %s",
                     curl_easy_strerror(msg->data.result));
        else if (code != 200)
            snprintf(e->why, sizeof e->why, "HTTP %ld", code);
        else
            read_id(e);
    }
    for (int i = 0; hs != NULL && i < n; i++) {
        if (hs[i] == NULL)
            continue;
        curl_multi_remove_handle(m, hs[i]);
        curl_easy_cleanup(hs[i]);
    }
    free(hs);
    if (m != NULL)
        curl_multi_cleanup(m);
}

/* Whether the round converged; writes the table and the verdict to *text
 * (owned by the caller). */
static bool report(const endpoint *eps, int n, const char *expect, char **text)
{
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (f == NULL)
        return false;
    int width = 0, unknown = 0, policies = 0, off = 0;
    for (int i = 0; i < n; i++)
        if ((int)strlen(eps[i].arg) > width)
            width = (int)strlen(eps[i].arg);
    for (int i = 0; i < n; i++) {
        const endpoint *e = &eps[i];
        fprintf(f, "%-*s  %s\n", width, e->arg, e->id[0] ? e->id : e->why);
        if (!e->id[0]) {
            unknown++;
            continue;
        }
        if (expect != NULL && strcmp(e->id, expect) != 0)
            off++;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(eps[j].id, e->id) == 0;
        policies += !seen;
    }
    bool converged = unknown == 0 && policies == 1 && off == 0;
    if (converged)
        fprintf(f, "converged: %d of %d serve policy %s\n", n, n, eps[0].id);
    else
        fprintf(f, "not converged: %d polic%s among %d proxies, %d without an answer%s%s\n",
                policies, policies == 1 ? "y" : "ies", n, unknown,
                expect ? ", expected " : "", expect ? expect : "");
    fclose(f);
    return converged;
}

/* --expect: a policy id as written, or the id of a table or allowlist. */
static int expected_id(const char *arg, char out[static PH_TABLE_ID_HEX_LEN + 1])
{
    if (is_policy_id(arg, strlen(arg))) {
        memcpy(out, arg, PH_TABLE_ID_HEX_LEN + 1);
        return 0;
    }
    ph_table *t = NULL;
    if (pc_open_table_input("fleet-status", arg, &t, NULL) != 0)
        return 2;
    snprintf(out, PH_TABLE_ID_HEX_LEN + 1, "%s", ph_table_policy_id_hex(t));
    ph_table_close(&t);
    return 0;
}

/* The /metrics URL of an argument: an admin listener's base URL gets
 * /metrics; one with a path is asked as it is. */
static char *metrics_url(const char *arg)
{
    const char *scheme = strstr(arg, "://");
    const char *path = scheme ? strchr(scheme + 3, '/') : NULL;
    size_t n = strlen(arg) + sizeof "/metrics";
    char *url = malloc(n);
    if (url == NULL)
        return NULL;
    if (path == NULL)
        snprintf(url, n, "%s/metrics", arg);
    else if (strcmp(path, "/") == 0)
        snprintf(url, n, "%smetrics", arg);
    else
        snprintf(url, n, "%s", arg);
    return url;
}

int pc_cmd_fleet_status(int argc, char **argv)
{
    static const struct option opts[] = {
        {"expect", required_argument, NULL, 'e'},
        {"wait", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *expect_arg = NULL;
    long wait_s = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "e:w:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'e': expect_arg = optarg; break;
        case 'w':
            wait_s = strtol(optarg, &end, 10);
            if (optarg[0] < '0' || optarg[0] > '9' || *end != '\0' || wait_s > 86400) {
                fprintf(stderr, "policyc fleet-status: --wait: expected 0 to 86400 seconds\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int n = argc - optind;
    if (n < 1 || n > ENDPOINTS_MAX) {
        fputs("policyc fleet-status: expected 1 to 1024 admin URLs\n", stderr);
        usage(stderr);
        return 2;
    }
    for (int i = optind; i < argc; i++)
        if (strncmp(argv[i], "http://", 7) != 0 && strncmp(argv[i], "https://", 8) != 0) {
            fprintf(stderr, "policyc fleet-status: '%s': expected an http:// or https:// URL\n",
                    argv[i]);
            return 2;
        }
    char expect[PH_TABLE_ID_HEX_LEN + 1];
    if (expect_arg != NULL && expected_id(expect_arg, expect) != 0)
        return 2;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("policyc fleet-status: cannot initialise libcurl\n", stderr);
        return 2;
    }
    endpoint *eps = calloc((size_t)n, sizeof *eps);
    int rc = eps == NULL ? 2 : 1;
    for (int i = 0; eps != NULL && i < n; i++) {
        eps[i].arg = argv[optind + i];
        if ((eps[i].url = metrics_url(eps[i].arg)) == NULL)
            rc = 2;
    }
    int64_t deadline = ph_monotonic_ms() + wait_s * 1000;
    char *last = NULL;
    while (rc == 1) {
        ask_all(eps, n);
        char *text = NULL;
        bool done = report(eps, n, expect_arg ? expect : NULL, &text);
        bool final = done || ph_monotonic_ms() >= deadline;
        /* Printed when it changed: the last table printed is the state at the end. */
        if (text != NULL && (last == NULL || strcmp(text, last) != 0)) {
            fputs(text, stdout);
            fflush(stdout);
        }
        free(last);
        last = text;
        if (done)
            rc = 0;
        if (final)
            break;
        struct timespec ts = { POLL_MS / 1000, (POLL_MS % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    free(last);
    for (int i = 0; eps != NULL && i < n; i++) {
        free(eps[i].url);
        free(eps[i].body);
    }
    free(eps);
    curl_global_cleanup();
    return rc;
}
