/* test_table_open.c - the table reader on its own (no compiler): inputs that
 * are not tables at all, the argument contract, and the one-pass canonical
 * host check used on every lookup agreeing with ph_host_check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/host.h"
#include "table-int.h"
#include "test_support.h"

/* The file checksum: CRC-32C by the fast path equals the portable table
 * (and the published check value), and the block scheme sums the whole
 * file with the checksum field read as zero, whatever it holds. */
static void checksum_paths_agree(void **state)
{
    (void)state;
    assert_int_equal(ph_tab_crc32c(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(ph_tab_crc32c_portable(0, "123456789", 9), 0xe3069283u);
    size_t n = 5 * PH_TAB_CRC_BLOCK + 123;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 2654435761u >> 13);
    for (size_t len = 0; len < 300; len += 7)
        assert_int_equal(ph_tab_crc32c(7, b + 3, len), ph_tab_crc32c_portable(7, b + 3, len));
    /* Fed in uneven pieces or at once: the same value. */
    uint32_t whole = ph_tab_checksum(b, n);
    ph_tab_crc c;
    ph_tab_crc_init(&c);
    for (size_t at = 0; at < n;) {
        at += at + 40000 < n ? 40000 : n - at;
        ph_tab_crc_feed(&c, b, at, at == n);
    }
    assert_int_equal(ph_tab_crc_final(&c), whole);
    /* The field does not count; any other byte does. */
    b[PH_TAB_OFF_CHECKSUM] ^= 0xff;
    assert_int_equal(ph_tab_checksum(b, n), whole);
    b[PH_TAB_OFF_CHECKSUM + PH_TAB_CHECKSUM_LEN] ^= 1;
    assert_int_not_equal(ph_tab_checksum(b, n), whole);
    b[PH_TAB_OFF_CHECKSUM + PH_TAB_CHECKSUM_LEN] ^= 1;
    b[4 * PH_TAB_CRC_BLOCK + 5] ^= 0x10;
    assert_int_not_equal(ph_tab_checksum(b, n), whole);
    free(b);
}

static void non_tables_are_refused_whole(void **state)
{
    (void)state;
    uint8_t buf[4096];
    memset(buf, 0, sizeof buf);
    ph_table *t = (ph_table *)buf; /* must be overwritten with NULL */
    ph_diag diag;
    assert_int_equal(ph_table_open_buffer(buf, 0, &t, &diag), PH_E_FORMAT);
    assert_null(t);
    assert_int_equal(ph_table_open_buffer(buf, sizeof buf, &t, &diag), PH_E_FORMAT);
    assert_non_null(strstr(diag.message, "magic"));
    memcpy(buf, PH_TAB_MAGIC, PH_TAB_MAGIC_LEN);
    assert_int_equal(ph_table_open_buffer(buf, sizeof buf, &t, &diag), PH_E_FORMAT);
    assert_non_null(strstr(diag.message, "version"));
    ph_tab_put32(buf + PH_TAB_OFF_VERSION, PH_TAB_VERSION);
    ph_tab_put32(buf + PH_TAB_OFF_HEADER_SIZE, PH_TAB_HEADER_SIZE);
    ph_tab_put64(buf + PH_TAB_OFF_FILE_SIZE, sizeof buf);
    ph_tab_put32(buf + PH_TAB_OFF_SECTION_COUNT, PH_TAB_SECTION_COUNT);
    assert_int_equal(ph_table_open_buffer(buf, sizeof buf, &t, &diag), PH_E_FORMAT);
    assert_non_null(strstr(diag.message, "section"));
    assert_null(t);
    static const char yaml[] = "version: 1\nlists: {}\n";
    assert_int_equal(ph_table_open_buffer(yaml, sizeof yaml, &t, &diag), PH_E_FORMAT);
    for (size_t n = 0; n < PH_TAB_FIRST_SECTION + 16; n++)
        assert_int_equal(ph_table_open_buffer(buf, n, &t, NULL), PH_E_FORMAT);
}

static void arguments_are_checked(void **state)
{
    (void)state;
    ph_table *t = NULL;
    assert_int_equal(ph_table_open_buffer(NULL, 10, &t, NULL), PH_E_INVAL);
    assert_int_equal(ph_table_open_buffer("x", 1, NULL, NULL), PH_E_INVAL);
    assert_int_equal(ph_table_open(NULL, &t, NULL), PH_E_INVAL);
    assert_int_equal(ph_table_open("/nonexistent/table", NULL, NULL), PH_E_INVAL);
    ph_diag diag;
    assert_int_equal(ph_table_open("/nonexistent/table", &t, &diag), PH_E_IO);
    assert_non_null(strstr(diag.message, "/nonexistent/table"));
    assert_int_equal(ph_table_open("/", &t, &diag), PH_E_FORMAT);
    assert_null(t);
    /* A FIFO (no writer) or a device is refused at once, never waited on:
     * the open of a reload runs on the proxy's main thread. */
    char *dir = ph_test_mkdtemp();
    char fifo[4200];
    snprintf(fifo, sizeof fifo, "%s/table.ptab", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(10); /* SIGALRM ends a test that blocks */
    assert_int_equal(ph_table_open(fifo, &t, &diag), PH_E_FORMAT);
    assert_int_equal(ph_table_open("/dev/zero", &t, NULL), PH_E_FORMAT);
    alarm(0);
    assert_non_null(strstr(diag.message, "a FIFO"));
    assert_null(t);
    ph_test_rmtree(dir);
    free(dir);
    ph_table_close(&t);
    ph_table_close(NULL);
}

static void check_agrees(const char *h)
{
    size_t len = strlen(h);
    bool fast = ph_tab_host_canonical(h, len);
    bool full = ph_host_check(h, len, NULL) == PH_HOST_OK;
    if (fast != full)
        fail_msg("'%s': one-pass check says %d, ph_host_check says %d", h, fast, full);
    /* The lookup's check, on an exact-size copy (ASan sees any over-read). */
    char *exact = malloc(len + 1);
    assert_non_null(exact);
    memcpy(exact, h, len);
    bool masked_exact = ph_tab_host_canonical_exact(exact, len);
    free(exact);
    if (masked_exact != full)
        fail_msg("'%s': exact-size check says %d, ph_host_check says %d", h, masked_exact, full);
    /* The verifier's wide check reads PH_TAB_HOST_WIDE bytes: the name
     * followed by bytes that would be wrong in a name, which it must ignore. */
    if (len <= PH_TAB_HOST_WIDE) {
        char wide[PH_TAB_HOST_WIDE];
        memset(wide, '.', sizeof wide);
        memcpy(wide, h, len);
        bool masked = ph_tab_host_canonical_wide(wide, len);
        if (masked != full)
            fail_msg("'%s': wide check says %d, ph_host_check says %d", h, masked, full);
    }
}

static void fast_canonical_check_agrees_with_ph_host_check(void **state)
{
    (void)state;
    static const char *const hosts[] = {
        "example.com", "a.b", "a.example.com", "xn--bcher-kva.example", "a-b.c-d", "1.2",
        "1.2.3.4", "127.1", "0x7f.1", "a.0x10", "a.0x", "a.0xg", "a.0x1g", "a.1a", "a.a1",
        "2130706433", "a.123", "a.b.c.d.e.f", "-a.com", "a-.com", "a..com", ".a.com", "a.com.",
        "A.com", "a_b.com", "a b.com", "com", "", "a.-", "a.b-", "0.0", "a.00", "a.0x0",
        "a.0X1", "[::1]", "::1", "a.com:443", "\xc3\xa9.com", "a.c\x7f",
    };
    for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++)
        check_agrees(hosts[i]);
    char label63[64], label64[65], name[300];
    memset(label63, 'a', 63);
    label63[63] = '\0';
    memset(label64, 'a', 64);
    label64[64] = '\0';
    snprintf(name, sizeof name, "%s.com", label63);
    check_agrees(name);
    snprintf(name, sizeof name, "%s.com", label64);
    check_agrees(name);
    /* 253 and 254 bytes. */
    snprintf(name, sizeof name, "%s.%s.%s.%.61s", label63, label63, label63, label63);
    check_agrees(name);
    snprintf(name, sizeof name, "%s.%s.%s.%.62s", label63, label63, label63, label63);
    check_agrees(name);
    /* Random names over a small alphabet that hits every rule. */
    static const char alphabet[] = "ax0-.9fX_";
    srand(7);
    for (int n = 0; n < 200000; n++) {
        size_t len = (size_t)(rand() % 12);
        for (size_t i = 0; i < len; i++)
            name[i] = alphabet[rand() % (int)(sizeof alphabet - 1)];
        name[len] = '\0';
        check_agrees(name);
    }
    /* Longer names, mostly letters, around the wide check's 64 bytes (every
     * 16-byte chunk, the last bit of the masks, labels of 62 to 64 bytes),
     * and bytes of 0x80 and up. */
    static const char letters[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0x-.\x80\xff";
    for (int n = 0; n < 200000; n++) {
        size_t len = 40 + (size_t)(rand() % 30);
        for (size_t i = 0; i < len; i++)
            name[i] = letters[rand() % (int)(sizeof letters - 1)];
        name[len] = '\0';
        check_agrees(name);
    }
    for (size_t cut = 60; cut <= 66; cut++) {
        memset(name, 'a', cut);
        name[1] = '.';
        name[cut] = '\0';
        check_agrees(name);
        name[1] = 'a';
        name[cut - 2] = '.';
        check_agrees(name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(checksum_paths_agree),
        cmocka_unit_test(non_tables_are_refused_whole),
        cmocka_unit_test(arguments_are_checked),
        cmocka_unit_test(fast_canonical_check_agrees_with_ph_host_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
