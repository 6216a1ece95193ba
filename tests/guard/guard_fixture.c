/* guard_fixture.c - see guard_fixture.h. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "guard_fixture.h"
#include "load.h"
#include "pinhole/file_atomic.h"

uint8_t *ph_fixture_compile(const char *yaml, const char *name, size_t *len)
{
    pc_policy *policy = NULL;
    pc_diagnostics diags;
    pc_diagnostics_init(&diags);
    ph_status st = pc_policy_load_buffer(yaml, strlen(yaml), name, &policy, &diags);
    if (st != PH_OK) {
        for (size_t i = 0; i < diags.count; i++)
            print_error("%s:%u:%u: %s\n", name, diags.items[i].line, diags.items[i].col,
                        diags.items[i].message);
        fail_msg("fixture policy %s does not load (%d)", name, st);
    }
    pc_diagnostics_free(&diags);
    uint8_t *image = NULL;
    ph_diag d;
    if (pc_compile(policy, &image, len, &d) != PH_OK)
        fail_msg("fixture policy %s does not compile: %s", name, d.message);
    pc_policy_free(&policy);
    return image;
}

void ph_fixture_write_table(const char *path, const char *yaml, const char *name)
{
    size_t len = 0;
    uint8_t *image = ph_fixture_compile(yaml, name, &len);
    ph_diag d;
    if (ph_file_write_atomic(path, image, len, 0644, PH_WRITE_REPLACE, &d) != PH_OK)
        fail_msg("writing %s: %s", path, d.message);
    free(image);
}

ph_table *ph_fixture_table(const char *yaml, const char *name)
{
    size_t len = 0;
    uint8_t *image = ph_fixture_compile(yaml, name, &len);
    ph_table *t = NULL;
    ph_diag d;
    if (ph_table_open_buffer(image, len, &t, &d) != PH_OK)
        fail_msg("opening the fixture table %s: %s", name, d.message);
    free(image);
    return t;
}
