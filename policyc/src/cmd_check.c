/* cmd_check.c - `policyc check FILE...`: validate allowlists, report every
 * error and warning in a fixed order, in text, JSON, SARIF or GitHub format. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "load.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc check [OPTIONS] FILE...\n"
          "Validate allowlists: report every error and warning, in file, line, column order.\n"
          "A FILE of '-' is standard input.\n"
          "\n"
          "Options:\n"
          "  -f, --format=FORMAT  text (default), json, sarif (SARIF 2.1.0) or github\n"
          "                       (GitHub Actions annotations)\n"
          "  -W, --werror         treat warnings as errors\n"
          "  -q, --quiet          text format: print no summary line\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: 0 every file is valid, 1 a file has errors (or warnings with\n"
          "--werror), 2 usage, I/O or internal error.\n"
          "Codes and the grammar: docs/allowlist.md; formats: docs/policyc.md.\n",
          out);
}

static size_t count_rules(const pc_policy *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->nlists; i++)
        n += p->lists[i].nrules;
    return n;
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

static void print_summary(const char *file, const pc_policy *p, const pc_diagnostics *d)
{
    if (d->errors == 0 && p) {
        size_t nr = count_rules(p);
        printf("%s: ok", file);
        if (d->warnings)
            printf(" with %zu %s", d->warnings, plural(d->warnings, "warning", "warnings"));
        printf(" (%zu %s, %zu %s)\n", p->nlists, plural(p->nlists, "list", "lists"), nr,
               plural(nr, "rule", "rules"));
    } else {
        printf("%s: %zu %s, %zu %s\n", file, d->errors, plural(d->errors, "error", "errors"),
               d->warnings, plural(d->warnings, "warning", "warnings"));
    }
}

int pc_cmd_check(int argc, char **argv)
{
    static const struct option options[] = {
        {"format", required_argument, NULL, 'f'},
        {"werror", no_argument, NULL, 'W'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    pc_diag_format format = PC_FORMAT_TEXT;
    bool werror = false, quiet = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "f:Wqh", options, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!pc_diag_format_parse(optarg, &format)) {
                fprintf(stderr, "policyc check: unknown format '%s' (text, json, sarif, github)\n",
                        optarg);
                return 2;
            }
            break;
        case 'W':
            werror = true;
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fputs("policyc check: no FILE given\n", stderr);
        usage(stderr);
        return 2;
    }

    int rc = 0;
    pc_diagnostics all;
    pc_diagnostics_init(&all);
    for (int i = optind; i < argc; i++) {
        pc_diagnostics d;
        pc_diagnostics_init(&d);
        pc_policy *p = NULL;
        /* "-" is standard input, shown as "<stdin>". */
        bool is_stdin = strcmp(argv[i], "-") == 0;
        const char *name = is_stdin ? "<stdin>" : argv[i];
        ph_status st = pc_policy_load_file(is_stdin ? "/dev/stdin" : argv[i], name, &p, &d);
        if (werror)
            pc_diagnostics_promote_warnings(&d);
        if (st == PH_E_IO || st == PH_E_NOMEM || st == PH_E_INTERNAL) {
            if (st != PH_E_IO)
                fprintf(stderr, "policyc check: %s: %s\n", name, ph_strerror(st));
            rc = 2;
        } else if (d.errors > 0 && rc == 0) {
            rc = 1;
        }
        if (format == PC_FORMAT_TEXT || format == PC_FORMAT_GITHUB) {
            if (pc_diagnostics_print(stdout, &d, format) != PH_OK)
                rc = 2;
            if (format == PC_FORMAT_TEXT && !quiet)
                print_summary(name, p, &d);
        } else if (pc_diagnostics_move(&all, &d) != PH_OK) {
            rc = 2;
        }
        pc_policy_free(&p);
        pc_diagnostics_free(&d);
    }
    if (format == PC_FORMAT_JSON || format == PC_FORMAT_SARIF)
        if (pc_diagnostics_print(stdout, &all, format) != PH_OK)
            rc = 2;
    pc_diagnostics_free(&all);
    if (fflush(stdout) != 0)
        rc = 2;
    return rc;
}
