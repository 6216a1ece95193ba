/* table_input.c - open FILE or TABLE as a table (see table_input.h). */
#include "table_input.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "load.h"
#include "compiler-int.h"

static bool starts_with_magic(const char *path, int *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *err = errno;
        return false;
    }
    char m[PH_TAB_MAGIC_LEN];
    size_t n = fread(m, 1, sizeof m, f);
    fclose(f);
    *err = 0;
    return n == sizeof m && memcmp(m, PH_TAB_MAGIC, sizeof m) == 0;
}

int pc_open_table_input(const char *cmd, const char *path, ph_table **table, bool *was_table)
{
    *table = NULL;
    int err = 0;
    bool is_table = starts_with_magic(path, &err);
    if (was_table)
        *was_table = is_table;
    if (err != 0) {
        fprintf(stderr, "policyc %s: cannot open %s: %s\n", cmd, path, strerror(err));
        return 2;
    }
    ph_diag diag = {0};
    if (is_table) {
        if (ph_table_open(path, table, &diag) != PH_OK) {
            fprintf(stderr, "policyc %s: %s: %s\n", cmd, path, diag.message);
            return 2;
        }
        return 0;
    }
    pc_diagnostics diags;
    pc_diagnostics_init(&diags);
    pc_policy *policy = NULL;
    ph_status st = pc_policy_load_file(path, path, &policy, &diags);
    if (st != PH_OK) {
        pc_diagnostics_print(stderr, &diags, PC_FORMAT_TEXT);
        fprintf(stderr, "policyc %s: %s: %zu error(s); nothing to answer from\n", cmd, path,
                diags.errors);
        pc_diagnostics_free(&diags);
        return st == PH_E_FORMAT ? 1 : 2;
    }
    pc_diagnostics_free(&diags); /* warnings are check's business */
    uint8_t *image = NULL;
    size_t len = 0;
    st = pc_compile(policy, &image, &len, &diag);
    pc_policy_free(&policy);
    if (st == PH_OK)
        st = ph_table_open_buffer(image, len, table, &diag);
    free(image);
    if (st != PH_OK) {
        fprintf(stderr, "policyc %s: %s: %s\n", cmd, path, diag.message);
        return 2;
    }
    return 0;
}

int pc_args_operands_only(int argc, char **argv, size_t nargs, const char *what,
                          void (*usage)(FILE *out), int *first)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    if ((size_t)(argc - optind) != nargs) {
        fprintf(stderr, "policyc %s: expected %s\n", argv[0], what);
        usage(stderr);
        return 2;
    }
    *first = optind;
    return -1;
}
