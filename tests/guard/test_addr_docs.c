/* test_addr_docs.c - docs/denylist.md lists exactly the compiled-in blocks:
 * every block has its row "| `prefix` | family | name | document |", and the
 * table has no other rows. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pinhole/addr.h"

static void test_docs_table_matches_compiled_blocks(void **state)
{
    (void)state;
    size_t len = 0;
    char *doc = ph_test_read_file(ph_test_source_path("docs/denylist.md"), &len);
    assert_non_null(doc);
    size_t n = ph_addr_block_count();
    for (size_t i = 0; i < n; i++) {
        const ph_addr_block *b = ph_addr_block_at(i);
        char row[512];
        snprintf(row, sizeof row, "\n| `%s` | %s | %s | %s |\n", b->prefix,
                 b->family == AF_INET ? "IPv4" : "IPv6", b->name, b->rfc);
        const char *hit = strstr(doc, row);
        if (hit == NULL)
            fail_msg("docs/denylist.md lacks the row for %s:%s", b->prefix, row);
        if (strstr(hit + 1, row) != NULL)
            fail_msg("docs/denylist.md lists %s twice", b->prefix);
    }
    size_t rows = 0;
    for (const char *p = doc; (p = strstr(p, "\n| `")) != NULL; p++)
        rows++;
    free(doc);
    assert_int_equal(rows, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_table_matches_compiled_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
