/*
 * cmd_test.c - policyc test FILE CASES.yaml: expectations (cases.h) checked
 * against the compiled policy, the same lookup the guard and proxy make.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "commands.h"
#include "decide.h"
#include "table_input.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc test FILE|TABLE CASES.yaml\n"
          "\n"
          "Check every expectation of CASES.yaml against the policy (an allowlist,\n"
          "compiled in memory, or a compiled table). Prints each failing case and a\n"
          "last line 'N passed, N failed'. CASES.yaml:\n"
          "\n"
          "  cases:\n"
          "    - destination: \"api.github.com:443\"\n"
          "      expect: allow             # allow | deny\n"
          "      list: default             # optional (default: default)\n"
          "      reason: port_not_allowed  # optional, with deny: expected reason code\n"
          "\n"
          "Options:\n"
          "  -h, --help  show this help\n"
          "\n"
          "Exit status: 0 every case passed, 1 a case failed, 2 usage error or\n"
          "unreadable/invalid policy or cases file.\n",
          out);
}

/* 1 when case c passes, 0 when it fails (printed). The destination is
 * decided as the proxy decides it (pc_decide). */
static int run_case(const pc_decider *dc, const char *file, const pc_case *c)
{
    ph_decision d;
    pc_decide(dc, c->list, c->destination, &d);
    const char *got = d.allowed ? "allow" : "deny";
    const char *code = ph_reason_code(d.reason);
    bool pass = d.allowed == c->expect_allow && (c->reason == NULL || strcmp(c->reason, code) == 0);
    if (pass)
        return 1;
    printf("%s:%u:%u: FAIL %s (list %s): expected %s%s%s, got %s (%s)\n", file, c->line, c->col,
           c->destination, c->list, c->expect_allow ? "allow" : "deny",
           c->reason ? " " : "", c->reason ? c->reason : "", got, code);
    if (!d.has_authority) {
        printf("  why: %s\n", d.log_detail);
        return 0;
    }
    ph_table_explanation ex;
    ph_table_rule rule;
    const ph_table_rule *r = NULL;
    if (pc_decision_rule(dc, &d, &rule))
        r = &rule;
    else if (ph_table_explain(dc->table, c->list, d.verdict.host, strlen(d.verdict.host),
                              d.verdict.port, &ex) == PH_OK && ex.has_near_rule)
        r = &ex.near_rule;
    if (r != NULL) {
        char ports[256];
        pc_format_rule_ports(dc->table, r->index, ports, sizeof ports);
        printf("  %s: %s ports [%s] (%s:%u)\n", d.allowed ? "allowed by" : "nearest rule",
               r->host, ports, r->file, r->line);
    }
    return 0;
}

int pc_cmd_test(int argc, char **argv)
{
    int first;
    int rc = pc_args_operands_only(argc, argv, 2, "FILE|TABLE and CASES.yaml", usage, &first);
    if (rc >= 0)
        return rc;
    const char *cases_path = argv[first + 1];
    FILE *f = fopen(cases_path, "rb");
    if (f == NULL) {
        perror(cases_path);
        return 2;
    }
    char *data = malloc(PC_MAX_CASES_FILE + 1);
    size_t len = data ? fread(data, 1, PC_MAX_CASES_FILE + 1, f) : 0;
    bool read_error = data == NULL || ferror(f);
    fclose(f);
    if (read_error) {
        fprintf(stderr, "policyc test: cannot read %s\n", cases_path);
        free(data);
        return 2;
    }
    pc_cases cases;
    ph_diag diag = {0};
    ph_status st = pc_cases_parse(data, len, &cases, &diag);
    free(data);
    if (st != PH_OK) {
        fprintf(stderr, "%s:%s\n", cases_path, diag.message);
        return 2;
    }
    ph_table *t = NULL;
    if (pc_open_table_input("test", argv[first], &t, NULL) != 0) {
        pc_cases_free(&cases);
        return 2;
    }
    pc_decider dc;
    if (pc_decider_open(&t, &dc, &diag) != PH_OK) {
        fprintf(stderr, "policyc test: %s\n", diag.message);
        pc_cases_free(&cases);
        return 2;
    }
    size_t passed = 0;
    for (size_t i = 0; i < cases.count; i++)
        passed += (size_t)run_case(&dc, cases_path, &cases.items[i]);
    size_t failed = cases.count - passed;
    printf("%zu passed, %zu failed\n", passed, failed);
    pc_decider_close(&dc);
    pc_cases_free(&cases);
    return failed ? 1 : 0;
}
