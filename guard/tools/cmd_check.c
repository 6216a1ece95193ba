/* cmd_check.c - pinhole-guard check: one verdict line per URL (the guard's
 * ph_decide_url, and ph_decision_resolve for --resolve). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinhole/guard.h"
#include "tools.h"

#define LINE_MAX_BYTES (PH_URL_MAX_LEN + 2)

typedef struct check_opts {
    const char *table;
    const char *list;
    bool resolve;
    bool json;
} check_opts;

static void check_usage(FILE *out)
{
    fputs("Usage: pinhole-guard check [--table FILE] [--list NAME] [--resolve]\n"
          "                           [--dns-server IP:PORT[,...]] [--dns-timeout MS] [--json]\n"
          "                           [URL...]\n"
          "Prints one verdict line per URL (read one per line from stdin when none is given).\n"
          "  -t, --table FILE      compiled allowlist (default: $PINHOLE_TABLE)\n"
          "  -l, --list NAME       allowlist name (default: default)\n"
          "  -r, --resolve         also resolve the host and check every address\n"
          "      --dns-server S    DNS servers for --resolve (default: /etc/resolv.conf)\n"
          "      --dns-timeout MS  overall resolution timeout (default: 5000)\n"
          "  -j, --json            one JSON object per line\n"
          "  -h, --help            this text\n"
          "Exit status: 0 all allowed, 1 any refused, 2 usage error or unusable table.\n",
          out);
}

static void print_text(const char *url, const ph_verdict *v, const ph_pinned_addrs *addrs)
{
    if (v->allowed) {
        printf("ALLOW %s host=%s port=%u rule=%s:%u list=%s match=%s", url, v->host,
               (unsigned)v->port, v->rule_file, (unsigned)v->rule_line, v->rule_list,
               v->rule_host);
        for (size_t i = 0; addrs != NULL && i < addrs->count; i++) {
            char a[64];
            if (ph_pinned_addr_string(addrs, i, a, sizeof a) == PH_OK)
                printf("%s%s", i == 0 ? " addresses=" : ",", a);
        }
        putchar('\n');
    } else {
        printf("DENY %s reason=%s detail=", url, ph_reason_code(v->reason));
        pg_print_quoted(v->detail);
        putchar('\n');
    }
}

static void print_json(const char *url, const ph_verdict *v, const ph_pinned_addrs *addrs)
{
    json_t *o = json_object();
    json_object_set_new(o, "url", json_string(url));
    json_object_set_new(o, "allowed", json_boolean(v->allowed));
    json_object_set_new(o, "reason", json_string(ph_reason_code(v->reason)));
    if (v->host[0] != '\0') {
        json_object_set_new(o, "host", json_string(v->host));
        json_object_set_new(o, "port", json_integer(v->port));
    }
    if (v->has_rule) {
        json_t *r = json_object();
        json_object_set_new(r, "list", json_string(v->rule_list));
        json_object_set_new(r, "host", json_string(v->rule_host));
        json_object_set_new(r, "file", json_string(v->rule_file));
        json_object_set_new(r, "line", json_integer(v->rule_line));
        if (v->rule_reason[0] != '\0')
            json_object_set_new(r, "reason", json_string(v->rule_reason));
        json_object_set_new(o, "rule", r);
    }
    if (addrs != NULL && v->allowed) {
        json_t *a = json_array();
        for (size_t i = 0; i < addrs->count; i++) {
            char t[64];
            if (ph_pinned_addr_string(addrs, i, t, sizeof t) == PH_OK)
                json_array_append_new(a, json_string(t));
        }
        json_object_set_new(o, "addresses", a);
    }
    if (!v->allowed && v->detail[0] != '\0')
        json_object_set_new(o, "detail", json_string(v->detail));
    if (v->policy_id[0] != '\0')
        json_object_set_new(o, "policy_id", json_string(v->policy_id));
    pg_print_json(o);
}

/* Checks one URL and prints its line; returns whether it was allowed. */
static bool check_one(ph_guard *g, const check_opts *o, const char *url, size_t len)
{
    /* The worker's decision (the list named), then for --resolve the
     * step after it; the line prints its verdict, whose detail is the
     * parser's, the lookup's or the resolution's own message. */
    ph_url_request req = {.url = url, .url_len = len, .list = o->list, .now = time(NULL)};
    ph_decision d;
    ph_pinned_addrs addrs;
    addrs.count = 0;
    if (ph_decide_url(g, &req, &d) == PH_OK && o->resolve)
        ph_decision_resolve(g, &d, &addrs);
    const ph_verdict *v = &d.verdict;
    /* The URL is echoed only as far as it is printable ASCII: the input is
     * hostile by assumption and must not forge a second output line. */
    char shown[256];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 4 < sizeof shown; i++)
        shown[n++] = (url[i] > 0x20 && url[i] < 0x7f && url[i] != '"') ? url[i] : '?';
    if (n + 4 >= sizeof shown && len > n) {
        memcpy(shown + n, "...", 3);
        n += 3;
    }
    shown[n] = '\0';
    if (o->json)
        print_json(shown, v, o->resolve ? &addrs : NULL);
    else
        print_text(shown, v, o->resolve ? &addrs : NULL);
    return v->allowed;
}

/* URLs from stdin, one per line; an over-long line is one refused entry. */
static int check_stdin(ph_guard *g, const check_opts *o)
{
    char *line = malloc(LINE_MAX_BYTES + 1);
    if (line == NULL) {
        pg_error("out of memory");
        return EXIT_USAGE;
    }
    bool all = true;
    size_t len = 0;
    bool overlong = false;
    int c;
    while ((c = getchar()) != EOF || len > 0 || overlong) {
        if (c != EOF && c != '\n') {
            if (len < LINE_MAX_BYTES)
                line[len++] = (char)c;
            else
                overlong = true;
            continue;
        }
        if (len > 0 || overlong)
            all &= check_one(g, o, line, overlong ? PH_URL_MAX_LEN + 1 : len);
        len = 0;
        overlong = false;
        if (c == EOF)
            break;
    }
    free(line);
    return all ? EXIT_ALLOWED : EXIT_REFUSED;
}

int pg_cmd_check(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"table", required_argument, NULL, 't'},
        {"list", required_argument, NULL, 'l'},
        {"resolve", no_argument, NULL, 'r'},
        {"dns-server", required_argument, NULL, 'S'},
        {"dns-timeout", required_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    check_opts o = {getenv("PINHOLE_TABLE"), "default", false, false};
    ph_guard_options gopts = {0};
    unsigned long long timeout = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:l:rjh", longopts, NULL)) != -1) {
        switch (c) {
        case 't': o.table = optarg; break;
        case 'l': o.list = optarg; break;
        case 'r': o.resolve = true; break;
        case 'S': gopts.dns_servers = optarg; break;
        case 'T':
            if (!pg_parse_uint(optarg, 1, 600000, &timeout)) {
                pg_error("--dns-timeout takes milliseconds, 1..600000");
                return EXIT_USAGE;
            }
            gopts.dns_timeout_ms = (unsigned)timeout;
            break;
        case 'j': o.json = true; break;
        case 'h': check_usage(stdout); return EXIT_ALLOWED;
        default: check_usage(stderr); return EXIT_USAGE;
        }
    }
    if (o.table == NULL || o.table[0] == '\0') {
        pg_error("no table: give --table FILE or set PINHOLE_TABLE");
        return EXIT_USAGE;
    }
    if ((gopts.dns_servers != NULL || timeout != 0) && !o.resolve) {
        pg_error("--dns-server and --dns-timeout need --resolve");
        return EXIT_USAGE;
    }
    ph_guard *g = NULL;
    ph_diag d;
    if (ph_guard_open(o.table, &gopts, &g, &d) != PH_OK) {
        pg_error("%s", d.message);
        return EXIT_USAGE;
    }
    int rc;
    if (optind == argc) {
        rc = check_stdin(g, &o);
    } else {
        bool all = true;
        for (int i = optind; i < argc; i++)
            all &= check_one(g, &o, argv[i], strlen(argv[i]));
        rc = all ? EXIT_ALLOWED : EXIT_REFUSED;
    }
    ph_guard_close(&g);
    return rc;
}
