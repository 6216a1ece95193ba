/* test_grant_keyfile.c - the grant key file: accepted form, every refusal
 * (short keys, duplicate ids, bad hex, stray whitespace, permissions). */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/grant.h"

#define HEX64 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static ph_status parse(const char *text, ph_diag *d)
{
    ph_keyring *kr = NULL;
    ph_status st = ph_keyring_parse(text, strlen(text), &kr, d);
    if (st == PH_OK) {
        assert_non_null(kr);
        ph_keyring_free(&kr);
    } else {
        assert_null(kr);
    }
    return st;
}

static void test_accepted_file(void **state)
{
    (void)state;
    const char *text = "# grant keys, newest first\n"
                       "\n"
                       "k2026-11 " HEX64 HEX64 "\n"
                       "k2026_10 " HEX64 "\n";
    ph_keyring *kr = NULL;
    assert_int_equal(ph_keyring_parse(text, strlen(text), &kr, NULL), PH_OK);
    assert_int_equal(ph_keyring_count(kr), 2);
    assert_string_equal(ph_keyring_signing_kid(kr), "k2026-11");
    ph_keyring_free(&kr);
    /* No final newline is fine. */
    assert_int_equal(parse("k1 " HEX64, NULL), PH_OK);
}

static void test_refusals_name_the_line(void **state)
{
    (void)state;
    struct {
        const char *text;
        const char *needle;
    } cases[] = {
        {"", "no key"},
        {"# only a comment\n", "no key"},
        {"k1 " HEX64 "\nk1 " HEX64 "\n", "line 2: duplicate key id k1"},
        {"k1 0001\n", "line 1: the key has 4 hex digits"},
        {"k1 " HEX64 "0\n", "hex digits"},                               /* odd */
        {"k1 " HEX64 HEX64 "00\n", "hex digits"},                         /* 65 bytes */
        {"k1 000102030405060708090A0B0C0D0E0F101112131415161718191a1b1c1d1e1f\n", "lowercase hex"},
        {"k1  " HEX64 "\n", "lowercase hex"},
        {"k1\t" HEX64 "\n", "control or non-ASCII"},
        {"k1 " HEX64 "\r\n", "control or non-ASCII"},
        {"k1 " HEX64 " \n", "lowercase hex"},
        {" k1 " HEX64 "\n", "key id"},
        {"k.1 " HEX64 "\n", "key id"},
        {"k1\n", "expected"},
        {"k1 " HEX64 "\n\xc3\xa9\n", "line 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_diag d;
        memset(&d, 0, sizeof d);
        ph_status st = parse(cases[i].text, &d);
        if (st == PH_OK || strstr(d.message, cases[i].needle) == NULL)
            fail_msg("case %zu: status %d, message \"%s\", wanted \"%s\"", i, st, d.message,
                     cases[i].needle);
    }
    /* An embedded NUL is refused, not a silent end of file. */
    static const char nul[] = "k1 " HEX64 "\n\0k2 " HEX64 "\n";
    ph_keyring *kr = NULL;
    assert_int_not_equal(ph_keyring_parse(nul, sizeof nul - 1, &kr, NULL), PH_OK);
    /* More keys than a keyring holds. */
    char many[8192] = "";
    for (int i = 0; i <= PH_GRANT_KEYS_MAX; i++) {
        char line[128];
        snprintf(line, sizeof line, "k%d " HEX64 "\n", i);
        strcat(many, line);
    }
    assert_int_equal(parse(many, NULL), PH_E_LIMIT);
}

static void test_file_permissions(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/keys", dir);
    const char *text = "k1 " HEX64 "\n";
    assert_int_equal(ph_test_write_file(path, text, strlen(text)), 0);
    ph_keyring *kr = NULL;
    ph_diag d;
    const mode_t refused[] = {0644, 0640, 0604, 0660, 0602, 0620};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        assert_int_equal(chmod(path, refused[i]), 0);
        memset(&d, 0, sizeof d);
        assert_int_equal(ph_keyring_load_file(path, &kr, &d), PH_E_INVAL);
        assert_null(kr);
        assert_non_null(strstr(d.message, "chmod 600"));
    }
    const mode_t accepted[] = {0600, 0400};
    for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++) {
        assert_int_equal(chmod(path, accepted[i]), 0);
        assert_int_equal(ph_keyring_load_file(path, &kr, NULL), PH_OK);
        assert_int_equal(ph_keyring_count(kr), 1);
        ph_keyring_free(&kr);
    }
    /* Not a regular file; missing file; parse errors carry the path. */
    assert_int_equal(chmod(dir, 0700), 0);
    assert_int_equal(ph_keyring_load_file(dir, &kr, NULL), PH_E_INVAL);
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10); /* a FIFO without a writer is refused, not waited on */
    memset(&d, 0, sizeof d);
    assert_int_equal(ph_keyring_load_file(path, &kr, &d), PH_E_INVAL);
    alarm(0);
    assert_non_null(strstr(d.message, "a FIFO"));
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(ph_keyring_load_file(path, &kr, NULL), PH_E_NOT_FOUND);
    snprintf(path, sizeof path, "%s/short", dir);
    assert_int_equal(ph_test_write_file(path, "k1 00\n", 6), 0);
    assert_int_equal(chmod(path, 0600), 0);
    memset(&d, 0, sizeof d);
    assert_int_equal(ph_keyring_load_file(path, &kr, &d), PH_E_FORMAT);
    assert_non_null(strstr(d.message, path));
    assert_non_null(strstr(d.message, "line 1"));
    ph_test_rmtree(dir);
    free(dir);
}

static void test_key_line_round_trip(void **state)
{
    (void)state;
    uint8_t key[48];
    assert_int_equal(ph_grant_keygen(key, sizeof key, NULL), PH_OK);
    char line[256];
    assert_int_equal(ph_grant_format_key_line("fresh", key, sizeof key, line, sizeof line, NULL),
                     PH_OK);
    assert_int_equal(strlen(line), 5 + 1 + 96 + 1);
    ph_keyring *kr = NULL;
    assert_int_equal(ph_keyring_parse(line, strlen(line), &kr, NULL), PH_OK);
    assert_string_equal(ph_keyring_signing_kid(kr), "fresh");
    ph_keyring_free(&kr);
    assert_int_equal(ph_grant_format_key_line("fresh", key, sizeof key, line, 50, NULL),
                     PH_E_LIMIT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted_file),
        cmocka_unit_test(test_refusals_name_the_line),
        cmocka_unit_test(test_file_permissions),
        cmocka_unit_test(test_key_line_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
