/*
 * cmd_compile.c - policyc compile FILE -o TABLE.
 *
 * Loads and validates FILE, compiles it, verifies the image with the same
 * reader the proxy uses (a writer bug can never ship an unreadable table),
 * then replaces TABLE atomically. Any error: diagnostics on stderr, nothing
 * written, TABLE untouched.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "compile.h"
#include "load.h"
#include "pinhole/table.h"
#include "pinhole/file_atomic.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc compile FILE -o TABLE\n"
          "\n"
          "Validate the allowlist FILE and compile it into the binary table TABLE,\n"
          "replacing TABLE atomically. Nothing is written when FILE has any error.\n"
          "\n"
          "Options:\n"
          "  -o, --output=TABLE  where to write the table (required)\n"
          "  -q, --quiet         print nothing on success\n"
          "  -h, --help          show this help\n"
          "\n"
          "Exit status: 0 compiled, 1 the policy has errors, 2 usage or I/O error.\n",
          out);
}

int pc_cmd_compile(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *output = NULL;
    bool quiet = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'q': quiet = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (output == NULL || argc - optind != 1) {
        fputs(output == NULL ? "policyc compile: -o TABLE is required\n"
                             : "policyc compile: exactly one FILE is required\n",
              stderr);
        usage(stderr);
        return 2;
    }
    const char *input = argv[optind];
    pc_diagnostics diags;
    pc_diagnostics_init(&diags);
    pc_policy *policy = NULL;
    ph_status st = pc_policy_load_file(input, input, &policy, &diags);
    pc_diagnostics_print(stderr, &diags, PC_FORMAT_TEXT);
    if (st != PH_OK) {
        fprintf(stderr, "policyc compile: %s: %zu error(s); no table written\n", input,
                diags.errors);
        pc_diagnostics_free(&diags);
        return st == PH_E_FORMAT ? 1 : 2;
    }
    pc_diagnostics_free(&diags);

    ph_diag diag = {0};
    uint8_t *image = NULL;
    size_t len = 0;
    ph_table *table = NULL;
    st = pc_compile(policy, &image, &len, &diag);
    pc_policy_free(&policy);
    if (st == PH_OK)
        st = ph_table_open_buffer(image, len, &table, &diag);
    if (st == PH_OK)
        st = ph_file_write_atomic(output, image, len, 0644, PH_WRITE_REPLACE, &diag);
    free(image);
    if (st != PH_OK) {
        fprintf(stderr, "policyc compile: %s\npolicyc compile: no table written\n", diag.message);
        ph_table_close(&table);
        return 2;
    }
    if (!quiet)
        printf("%s: %zu list(s), %zu rule(s), %zu bytes, policy id %s\n", output,
               ph_table_list_count(table), ph_table_rule_count(table), len,
               ph_table_policy_id_hex(table));
    ph_table_close(&table);
    return 0;
}
