/*
 * cmd_explain.c - policyc explain FILE|TABLE HOST:PORT [--list NAME]: the
 * verdict, the rule that allowed the destination, or why nothing did,
 * naming the nearest rule.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "decide.h"
#include "table_input.h"
#include "compiler-int.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc explain [--list NAME] FILE|TABLE HOST:PORT\n"
          "\n"
          "Decide HOST:PORT against a list with the guard's decision function, the\n"
          "one the proxy calls for a CONNECT (the same parser and canonicalization:\n"
          "API.GitHub.com:443 is decided as api.github.com:443), and say which rule\n"
          "allowed it (file:line, reason) or why nothing did, naming the nearest\n"
          "rule, and the HTTP status the proxy answers. FILE is an allowlist\n"
          "(compiled in memory) or a table written by 'policyc compile' (recognized\n"
          "by its magic bytes). A destination the proxy cannot parse is denied\n"
          "(parse_error), as the proxy denies it.\n"
          "\n"
          "Options:\n"
          "  -l, --list=NAME  the list to ask (default: default)\n"
          "  -h, --help       show this help\n"
          "\n"
          "Exit status: 0 allowed, 1 denied, 2 usage error, unreadable or invalid input.\n",
          out);
}

static void print_rule(const char *label, const ph_table *t, const ph_table_rule *r)
{
    char ports[512];
    pc_format_rule_ports(t, r->index, ports, sizeof ports);
    printf("  %s: %s ports [%s]%s%s (%s:%u)\n", label, r->host, ports,
           r->protocol != PH_PROTOCOL_DEFAULT ? " protocol " : "",
           r->protocol != PH_PROTOCOL_DEFAULT ? ph_protocol_name(r->protocol) : "", r->file,
           r->line);
    if (r->reason != NULL)
        printf("  reason: %s\n", r->reason);
}

static void print_why(const ph_table *t, const ph_table_explanation *ex, const char *host,
                      uint16_t port, const char *list)
{
    const ph_table_rule *n = &ex->near_rule;
    switch (ex->near) {
    case PH_TABLE_NEAR_UNKNOWN_LIST:
        printf("  why: the table has no list named '%s' (lists:", list);
        for (size_t i = 0; i < ph_table_list_count(t); i++) {
            const char *name;
            ph_table_list_at(t, i, &name, NULL, NULL);
            printf(" %s", name);
        }
        puts(")");
        return;
    case PH_TABLE_NEAR_WRONG_PORT:
        printf("  why: %s is allowed, but not on port %u\n", host, port);
        print_rule("nearest rule", t, n);
        return;
    case PH_TABLE_NEAR_TOO_DEEP:
        printf("  why: %s covers exactly one label; %s is deeper than that\n", n->host, host);
        print_rule("nearest rule", t, n);
        return;
    case PH_TABLE_NEAR_WILDCARD_DNS:
        /* the service line below says why */
        print_rule("refused rule", t, n);
        return;
    case PH_TABLE_NEAR_APEX:
        printf("  why: %s covers names below %s, never %s itself; add an exact rule for it\n",
               n->host, host, host);
        print_rule("nearest rule", t, n);
        return;
    case PH_TABLE_NEAR_NONE:
        break;
    }
    printf("  why: no rule of list '%s' names %s or a wildcard over it\n", list, host);
}

int pc_cmd_explain(int argc, char **argv)
{
    static const struct option opts[] = {
        {"list", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *list = "default";
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "l:h", opts, NULL)) != -1) {
        switch (c) {
        case 'l': list = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (argc - optind != 2) {
        fputs("policyc explain: expected FILE|TABLE and HOST:PORT\n", stderr);
        usage(stderr);
        return 2;
    }
    const char *dest = argv[optind + 1];
    ph_table *t = NULL;
    int rc = pc_open_table_input("explain", argv[optind], &t, NULL);
    if (rc != 0)
        return 2;
    pc_decider dc;
    ph_diag diag = { 0 };
    if (pc_decider_open(&t, &dc, &diag) != PH_OK) {
        fprintf(stderr, "policyc explain: %s\n", diag.message);
        return 2;
    }
    ph_decision d;
    pc_decide(&dc, list, dest, &d);
    const char *host = d.verdict.host;
    uint16_t port = d.verdict.port;
    ph_table_rule rule;
    if (d.allowed) {
        printf("allowed: %s:%u by list '%s'\n", host, port, list);
        if (pc_decision_rule(&dc, &d, &rule))
            print_rule("rule", dc.table, &rule);
        /* What the proxy lets through the tunnel (TUNNEL INSPECTION in
         * docs/pinhole-proxy.md). */
        switch (d.verdict.rule_protocol) {
        case PH_PROTOCOL_TLS:
            printf("  protocol: tls (a TLS ClientHello naming %s)\n", host);
            break;
        case PH_PROTOCOL_HTTP:
            printf("  protocol: http (HTTP/1 in clear, every request's Host %s)\n", host);
            break;
        case PH_PROTOCOL_TCP:
            puts("  protocol: tcp (any bytes, relayed without inspection)");
            break;
        default:
            printf("  protocol: tls or http (default: a TLS ClientHello naming %s, or HTTP/1 "
                   "in clear with every request's Host %s)\n", host, host);
            break;
        }
    } else if (!d.has_authority) {
        /* Refused before any lookup: as the proxy refuses the bytes. */
        printf("denied: '%s' by list '%s' (%s)\n", dest, list, ph_reason_code(d.reason));
        if (d.reason == PH_REASON_IP_LITERAL)
            puts("  why: an IP address is never an allowed destination; name the host");
        else
            printf("  why: %s\n", d.log_detail);
    } else {
        printf("denied: %s:%u by list '%s' (%s)\n", host, port, list, ph_reason_code(d.reason));
        /* Any host under a wildcard-DNS service, allowed by a rule or not:
         * say which service, so no one adds the rule that would be refused. */
        const ph_wildcard_dns_service *w = ph_wildcard_dns_find(host, strlen(host));
        if (w != NULL)
            printf("  service: %s is under %s, a wildcard-DNS service (%s; source: %s): "
                   "never allowed\n", host, w->domain, ph_wildcard_dns_describe(w), w->source);
        ph_table_explanation ex;
        if (ph_table_explain(dc.table, list, host, strlen(host), port, &ex) == PH_OK)
            print_why(dc.table, &ex, host, port, list);
    }
    printf("  proxy answer: %d %s\n", d.http_status, ph_reason_code(d.reason));
    printf("  policy id: %s\n", ph_table_policy_id_hex(dc.table));
    pc_decider_close(&dc);
    return d.allowed ? 0 : 1;
}
