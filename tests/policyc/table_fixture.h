/* table_fixture.h - compiling allowlist YAML into tables inside a test
 * (shared by the tests/policyc/test_table_*.c and test_compile_*.c files). */
#ifndef PINHOLE_TEST_TABLE_FIXTURE_H
#define PINHOLE_TEST_TABLE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "load.h"
#include "pinhole/table.h"
#include "test_support.h"

/* A small policy with an include, an exact rule with a reason, and a
 * wildcard with a port range. */
#define FX_POLICY                                  \
    "version: 1\n"                                 \
    "lists:\n"                                     \
    "  default:\n"                                 \
    "    include: [common]\n"                      \
    "    rules:\n"                                 \
    "      - host: api.github.com\n"               \
    "        ports: [443]\n"                       \
    "        reason: GitHub API\n"                 \
    "      - host: \"*.example.com\"\n"            \
    "        ports: [443, \"8000-8010\"]\n"        \
    "  common:\n"                                  \
    "    rules:\n"                                 \
    "      - host: pypi.org\n"                     \
    "        ports: [443]\n"

/* Loads yaml (display name `name`), renames in every rule's host the
 * suffix `from` to `to` (same length; none when from is NULL), and compiles
 * it; fails the test on any error, printing the diagnostics. The caller
 * frees *image. The renaming writes a table the loader would refuse, as a
 * policyc that did not know a rule yet would have written it. */
static inline void fx_compile_renamed(const char *yaml, const char *name, const char *from,
                                      const char *to, uint8_t **image, size_t *len)
{
    pc_diagnostics diags;
    pc_diagnostics_init(&diags);
    pc_policy *policy = NULL;
    ph_status st = pc_policy_load_buffer(yaml, strlen(yaml), name, &policy, &diags);
    if (st != PH_OK)
        pc_diagnostics_print(stderr, &diags, PC_FORMAT_TEXT);
    pc_diagnostics_free(&diags);
    assert_int_equal(st, PH_OK);
    for (size_t l = 0; from != NULL && l < policy->nlists; l++)
        for (size_t r = 0; r < policy->lists[l].nrules; r++) {
            char *host = policy->lists[l].rules[r].host;
            size_t hl = strlen(host), fl = strlen(from);
            assert_int_equal(strlen(to), fl);
            if (hl >= fl && strcmp(host + hl - fl, from) == 0)
                memcpy(host + hl - fl, to, fl);
        }
    ph_diag diag = {0};
    st = pc_compile(policy, image, len, &diag);
    if (st != PH_OK)
        fprintf(stderr, "compile: %s\n", diag.message);
    assert_int_equal(st, PH_OK);
    pc_policy_free(&policy);
}

static inline void fx_compile_named(const char *yaml, const char *name, uint8_t **image,
                                    size_t *len)
{
    fx_compile_renamed(yaml, name, NULL, NULL, image, len);
}

static inline void fx_compile(const char *yaml, uint8_t **image, size_t *len)
{
    fx_compile_named(yaml, "allow.yaml", image, len);
}

/* fx_compile_renamed (display name "allow.yaml"), opened. */
static inline ph_table *fx_open_renamed(const char *yaml, const char *from, const char *to)
{
    uint8_t *image = NULL;
    size_t len = 0;
    fx_compile_renamed(yaml, "allow.yaml", from, to, &image, &len);
    ph_table *t = NULL;
    ph_diag diag = {0};
    ph_status st = ph_table_open_buffer(image, len, &t, &diag);
    if (st != PH_OK)
        fprintf(stderr, "open: %s\n", diag.message);
    assert_int_equal(st, PH_OK);
    free(image);
    return t;
}

static inline ph_table *fx_open(const char *yaml)
{
    return fx_open_renamed(yaml, NULL, NULL);
}

#endif
