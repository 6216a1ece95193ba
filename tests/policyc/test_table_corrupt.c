/* test_table_corrupt.c - the reader against systematically damaged tables:
 * truncation at every length (every header byte, every section boundary),
 * every byte flipped, every header and directory field set to bad values
 * with the checksum recomputed (so the structural checks themselves are
 * exercised), semantic damage behind a valid checksum, and every 32-bit word
 * and byte rewritten. Each is refused whole, or (when the damage happens to
 * be another valid table) answers lookups without reading out of bounds. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "table_fixture.h"
#include "table_format.h"

static const char *const POLICY = FX_POLICY;

static uint8_t *image;
static size_t image_len;

static int setup(void **state)
{
    (void)state;
    fx_compile(POLICY, &image, &image_len);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(image);
    return 0;
}

/* The writer's and the reader's one checksum function. */
static void refix_checksum(uint8_t *b, size_t len)
{
    ph_tab_put32(b + PH_TAB_OFF_CHECKSUM, ph_tab_checksum(b, len));
}

/* Whether [off, off + width) overlaps the checksum field. */
static bool in_checksum(size_t off, size_t width)
{
    return off < PH_TAB_OFF_CHECKSUM + PH_TAB_CHECKSUM_LEN && off + width > PH_TAB_OFF_CHECKSUM;
}

/* Opens b; when it opens, every rule's own host:port must answer and some
 * misses must not crash. Returns the open status. */
static ph_status try_open(const uint8_t *b, size_t len)
{
    ph_table *t = NULL;
    ph_diag diag = {0};
    ph_status st = ph_table_open_buffer(b, len, &t, &diag);
    if (st != PH_OK) {
        assert_null(t);
        assert_true(diag.message[0] != '\0');
        return st;
    }
    for (size_t i = 0; i < ph_table_rule_count(t); i++) {
        ph_table_rule r;
        assert_int_equal(ph_table_rule_at(t, i, &r), PH_OK);
        const char *h = r.host[0] == '*' ? r.host + 2 : r.host;
        ph_table_explanation ex;
        ph_table_explain(t, r.list, h, strlen(h), 443, &ex);
        ph_table_explain(t, r.list, "x.y.example.com", 15, 1, &ex);
        uint16_t lo, hi;
        for (size_t k = 0; ph_table_rule_port(t, i, k, &lo, &hi) == PH_OK; k++)
            ph_table_explain(t, r.list, h, strlen(h), lo, &ex);
    }
    for (size_t l = 0; l < ph_table_list_count(t); l++) {
        char host[256];
        size_t n;
        for (size_t d = 0; ph_table_destination_at(t, l, d, host, &n) == PH_OK; d++) {
            uint16_t lo[64], hi[64];
            ph_table_destination_ranges(t, l, d, lo, hi, 64, &n);
        }
    }
    ph_table_close(&t);
    return PH_OK;
}

static void intact_table_opens(void **state)
{
    (void)state;
    assert_int_equal(try_open(image, image_len), PH_OK);
}

static void truncation_at_every_length_is_refused(void **state)
{
    (void)state;
    for (size_t len = 0; len < image_len; len++) {
        ph_status st = try_open(image, len);
        if (st != PH_E_FORMAT)
            fail_msg("truncated to %zu of %zu bytes: status %d", len, image_len, st);
    }
    /* One extra byte is refused too. */
    uint8_t *longer = calloc(1, image_len + 8);
    memcpy(longer, image, image_len);
    assert_int_equal(try_open(longer, image_len + 1), PH_E_FORMAT);
    assert_int_equal(try_open(longer, image_len + 8), PH_E_FORMAT);
    free(longer);
}

static void every_flipped_byte_is_refused(void **state)
{
    (void)state;
    uint8_t *b = malloc(image_len);
    for (size_t i = 0; i < image_len; i++) {
        static const uint8_t masks[] = {0x01, 0x80, 0xff};
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(b, image, image_len);
            b[i] ^= masks[m];
            if (try_open(b, image_len) == PH_OK)
                fail_msg("flipping byte %zu with 0x%02x was accepted", i, masks[m]);
        }
    }
    free(b);
}

/* Sets a field (width 1, 2, 4 or 8) to v, recomputes the checksum, expects refusal. */
static void expect_refused(size_t off, unsigned width, uint64_t v, const char *what)
{
    uint8_t *b = malloc(image_len);
    memcpy(b, image, image_len);
    if (width == 1)
        b[off] = (uint8_t)v;
    else if (width == 2)
        ph_tab_put16(b + off, (uint16_t)v);
    else if (width == 4)
        ph_tab_put32(b + off, (uint32_t)v);
    else
        ph_tab_put64(b + off, v);
    if (!in_checksum(off, width))
        refix_checksum(b, image_len);
    ph_status st = try_open(b, image_len);
    if (st == PH_OK)
        fail_msg("%s = %llu was accepted", what, (unsigned long long)v);
    free(b);
}

static void every_header_field_is_checked(void **state)
{
    (void)state;
    for (size_t i = 0; i < PH_TAB_MAGIC_LEN; i++) {
        uint8_t *b = malloc(image_len);
        memcpy(b, image, image_len);
        b[i] ^= 0x20;
        refix_checksum(b, image_len);
        assert_int_equal(try_open(b, image_len), PH_E_FORMAT);
        free(b);
    }
    /* Every version but this reader's, the previous ones included. */
    for (uint32_t v = 0; v < PH_TAB_VERSION + 2; v++)
        if (v != PH_TAB_VERSION)
            expect_refused(PH_TAB_OFF_VERSION, 4, v, "version");
    static const uint64_t v32[] = {0, 2, 0x7fffffff, 0xffffffff};
    for (size_t i = 0; i < 4; i++) {
        expect_refused(PH_TAB_OFF_VERSION, 4, v32[i] ^ 0x80000000u, "version");
        expect_refused(PH_TAB_OFF_SECTION_COUNT, 4, v32[i] + 6 * (i == 0), "section count");
        expect_refused(PH_TAB_OFF_FLAGS, 4, v32[i] | 1, "flags");
    }
    expect_refused(PH_TAB_OFF_HEADER_SIZE, 4, PH_TAB_HEADER_SIZE - 1, "header size");
    expect_refused(PH_TAB_OFF_HEADER_SIZE, 4, PH_TAB_HEADER_SIZE + 8, "header size");
    expect_refused(PH_TAB_OFF_HEADER_SIZE, 4, 0, "header size");
    expect_refused(PH_TAB_OFF_SECTION_COUNT, 4, PH_TAB_SECTION_COUNT + 1, "section count");
    expect_refused(PH_TAB_OFF_SECTION_COUNT, 4, PH_TAB_SECTION_COUNT - 1, "section count");
    static const int64_t dsize[] = {-1, 1, -8, 8};
    for (size_t i = 0; i < 4; i++)
        expect_refused(PH_TAB_OFF_FILE_SIZE, 8, image_len + (uint64_t)dsize[i], "file size");
    expect_refused(PH_TAB_OFF_FILE_SIZE, 8, 0, "file size");
    expect_refused(PH_TAB_OFF_FILE_SIZE, 8, UINT64_MAX, "file size");
    /* The checksum field itself. */
    for (uint32_t bit = 0; bit < 32; bit++)
        expect_refused(PH_TAB_OFF_CHECKSUM, 4,
                       ph_tab_get32(image + PH_TAB_OFF_CHECKSUM) ^ (1u << bit), "checksum");
    /* The reserved bytes after it, checksum recomputed: must stay zero. */
    for (size_t i = 0; i + 4 <= PH_TAB_RESERVED_LEN; i += 4)
        expect_refused(PH_TAB_OFF_RESERVED + i, 4, 0x100u, "reserved header bytes");
}

/* A table of an older format (version 1: 8-byte buckets; version 2: 24-byte
 * slots, SHA-256 checksum) is refused by name, so an operator knows to
 * recompile it rather than suspect damage. */
static void an_older_format_version_is_refused_clearly(void **state)
{
    (void)state;
    uint8_t *b = malloc(image_len);
    for (uint32_t v = 1; v < PH_TAB_VERSION; v++) {
        memcpy(b, image, image_len);
        ph_tab_put32(b + PH_TAB_OFF_VERSION, v);
        refix_checksum(b, image_len);
        ph_table *t = NULL;
        ph_diag diag = {0};
        assert_int_equal(ph_table_open_buffer(b, image_len, &t, &diag), PH_E_FORMAT);
        assert_null(t);
        char want[64];
        snprintf(want, sizeof want, "unsupported table format version %u", v);
        assert_non_null(strstr(diag.message, want));
        assert_non_null(strstr(diag.message, "recompile the policy"));
    }
    free(b);
}

static void every_section_bound_is_checked(void **state)
{
    (void)state;
    for (uint32_t s = 0; s < PH_TAB_SECTION_COUNT; s++) {
        size_t d = PH_TAB_HEADER_SIZE + s * PH_TAB_DIRENT_SIZE;
        uint32_t id = ph_tab_get32(image + d), count = ph_tab_get32(image + d + 4);
        uint64_t off = ph_tab_get64(image + d + 8), size = ph_tab_get64(image + d + 16);
        uint32_t rec = ph_tab_record_size(id);
        expect_refused(d, 4, 0, "section id");
        expect_refused(d, 4, id + 1, "section id");
        expect_refused(d, 4, 0xffffffff, "section id");
        expect_refused(d + 4, 4, count + 1, "section count");
        if (count > 0)
            expect_refused(d + 4, 4, count - 1, "section count");
        expect_refused(d + 4, 4, 0xffffffff, "section count");
        static const int64_t doff[] = {-8, -1, 1, 8};
        for (size_t i = 0; i < 4; i++) {
            expect_refused(d + 8, 8, off + (uint64_t)doff[i], "section offset");
            expect_refused(d + 16, 8, size + (uint64_t)doff[i], "section size");
        }
        expect_refused(d + 16, 8, size + rec, "section size");
        expect_refused(d + 8, 8, image_len, "section offset");
        expect_refused(d + 8, 8, UINT64_MAX, "section offset");
        expect_refused(d + 8, 8, UINT64_MAX - 7, "section offset");
        expect_refused(d + 16, 8, UINT64_MAX, "section size");
        expect_refused(d + 16, 8, (uint64_t)UINT32_MAX * rec, "section size");
        /* Truncation at the section's start and end, with a consistent header. */
        for (int end = 0; end < 2; end++) {
            size_t cut = (size_t)(off + (end ? size : 0));
            if (cut == image_len || cut < PH_TAB_FIRST_SECTION)
                continue;
            uint8_t *b = malloc(image_len);
            memcpy(b, image, image_len);
            ph_tab_put64(b + PH_TAB_OFF_FILE_SIZE, cut);
            refix_checksum(b, cut);
            assert_int_equal(try_open(b, cut), PH_E_FORMAT);
            free(b);
        }
    }
}

/* Finds the directory entry of section id. */
static const uint8_t *section(uint32_t id, uint32_t *count)
{
    const uint8_t *d = image + PH_TAB_HEADER_SIZE + (id - 1) * PH_TAB_DIRENT_SIZE;
    *count = ph_tab_get32(d + 4);
    return image + ph_tab_get64(d + 8);
}

static void semantic_damage_behind_a_valid_checksum_is_refused(void **state)
{
    (void)state;
    uint32_t n;
    const uint8_t *strings = section(PH_TAB_SEC_STRINGS, &n);
    size_t so = (size_t)(strings - image);
    uint32_t nstrings = n;
    const uint8_t *lists = section(PH_TAB_SEC_LISTS, &n);
    size_t lo = (size_t)(lists - image);
    const uint8_t *rules = section(PH_TAB_SEC_RULES, &n);
    size_t ro = (size_t)(rules - image);
    uint32_t nrules = n;
    size_t so5 = (size_t)(section(PH_TAB_SEC_ENTRIES, &n) - image);
    uint32_t nslots = n;
    size_t go = (size_t)(section(PH_TAB_SEC_RANGES, &n) - image);
    size_t to = (size_t)(section(PH_TAB_SEC_TAGS, &n) - image);
    size_t oo = (size_t)(section(PH_TAB_SEC_ORDER, &n) - image);
    uint32_t nentries = n;
    /* The first destination's entry. */
    size_t eo = so5 + (size_t)ph_tab_get32(image + oo) * PH_TAB_ENTRY_SIZE;

    const size_t nm = PH_TAB_LIST_NAME, rh = PH_TAB_RULE_HOST;
    expect_refused(lo + nm + PH_TAB_STR_OFF, 4, nstrings, "list name offset");
    expect_refused(lo + nm + PH_TAB_STR_LEN, 4, nstrings, "list name length");
    expect_refused(lo + nm + PH_TAB_STR_LEN, 4, 0, "list name length");
    expect_refused(lo + PH_TAB_LIST_RULE_FIRST, 4, 1, "list rule_first");
    expect_refused(lo + PH_TAB_LIST_RULE_COUNT, 4, nrules + 1, "list rule_count");
    expect_refused(lo + PH_TAB_LIST_RULE_COUNT, 4, 0, "list rule_count");
    expect_refused(lo + PH_TAB_LIST_ENTRY_COUNT, 4, nentries + 1, "list entry_count");
    expect_refused(ro + rh + PH_TAB_STR_OFF, 4, nstrings - 1, "rule host offset");
    expect_refused(ro + rh + PH_TAB_STR_LEN, 4, 1, "rule host length");
    expect_refused(ro + PH_TAB_RULE_FILE + PH_TAB_STR_LEN, 4, 0, "rule file length");
    expect_refused(ro + PH_TAB_RULE_REASON + PH_TAB_STR_LEN, 4, 5000, "rule reason length");
    expect_refused(ro + PH_TAB_RULE_LINE, 4, 0, "rule line");
    expect_refused(ro + PH_TAB_RULE_LIST, 4, 1, "rule list");
    expect_refused(ro + PH_TAB_RULE_PORT_FIRST, 4, 1, "rule port_first");
    expect_refused(ro + PH_TAB_RULE_PORT_COUNT, 4, 0, "rule port_count");
    expect_refused(ro + PH_TAB_RULE_PORT_COUNT, 4, 0xffffffff, "rule port_count");
    expect_refused(ro + PH_TAB_RULE_PROTOCOL, 1, PH_TAB_PROTO_MAX + 1, "rule protocol");
    for (uint32_t z = 0; z < PH_TAB_RULE_ZERO_LEN; z++)
        expect_refused(ro + PH_TAB_RULE_ZERO + z, 1, 1, "rule padding");
    /* tcp is never on a wildcard, whoever wrote the table. */
    for (uint32_t r = 0; r < nrules; r++) {
        size_t at = ro + (size_t)r * PH_TAB_RULE_SIZE;
        if (strings[ph_tab_get32(image + at + rh + PH_TAB_STR_OFF)] == '*')
            expect_refused(at + PH_TAB_RULE_PROTOCOL, 1, PH_TAB_PROTO_TCP, "tcp on a wildcard");
    }
    expect_refused(eo + PH_TAB_ENTRY_LIST, 2, 1, "entry list");
    expect_refused(eo + PH_TAB_ENTRY_KIND, 1, 2, "entry kind");
    expect_refused(eo + PH_TAB_ENTRY_RANGE_COUNT, 2, 0, "entry range_count");
    expect_refused(eo + PH_TAB_ENTRY_RANGE_COUNT, 2, 0xffff, "entry range_count");
    expect_refused(go + PH_TAB_RANGE_LO, 2, 0, "range lo = 0");
    expect_refused(go + PH_TAB_RANGE_RULE, 4, nrules, "range rule");
    expect_refused(go + PH_TAB_RANGE_RULE, 4, nrules - 1, "range rule of another list or host");
    /* Every bit of every slot: each field of an entry is either checked
     * or a copy checked against its original (first range, its rule's
     * provenance, the inline host prefix and its zero padding); an empty
     * slot must stay all zero. */
    for (uint32_t e = 0; e < nslots; e++) {
        size_t at = so5 + (size_t)e * PH_TAB_ENTRY_SIZE;
        for (size_t f = 0; f < PH_TAB_ENTRY_SIZE; f++)
            for (uint32_t bit = 0; bit < 8; bit++)
                expect_refused(at + f, 1, image[at + f] ^ (1u << bit), "slot byte");
    }
    /* Every bit of every tag: an occupied slot's tag is its key's, an empty
     * slot's zero (and the occupied slots as many as the destinations). */
    for (uint32_t e = 0; e < nslots; e++)
        for (uint32_t bit = 0; bit < 8; bit++)
            expect_refused(to + e, 1, image[to + e] ^ (1u << bit), "tag");
    /* Every destination's slot: another slot is empty or another's. */
    for (uint32_t d = 0; d < nentries; d++) {
        size_t at = oo + (size_t)d * PH_TAB_ORDER_SIZE;
        uint32_t v = ph_tab_get32(image + at);
        expect_refused(at, 4, v + 1, "destination slot");
        for (uint32_t bit = 0; bit < 32; bit++)
            expect_refused(at, 4, v ^ (1u << bit), "destination slot");
    }
    /* The string section must end with NUL; hosts must stay canonical. */
    expect_refused(so + nstrings - 4, 4, 0x41414141, "string bytes");
    const uint8_t *h = memmem(strings, nstrings, "api.github.com", 14);
    assert_non_null(h);
    expect_refused((size_t)(h - image), 4, 0x2e495041 /* "API." */, "uppercase host");
    /* Two rules swapped: out of canonical order. */
    uint8_t *b = malloc(image_len);
    memcpy(b, image, image_len);
    uint8_t tmp[PH_TAB_RULE_SIZE];
    memcpy(tmp, b + ro, PH_TAB_RULE_SIZE);
    memcpy(b + ro, b + ro + PH_TAB_RULE_SIZE, PH_TAB_RULE_SIZE);
    memcpy(b + ro + PH_TAB_RULE_SIZE, tmp, PH_TAB_RULE_SIZE);
    refix_checksum(b, image_len);
    assert_int_equal(try_open(b, image_len), PH_E_FORMAT);
    free(b);
}

/* Every 32-bit word and every byte rewritten, checksum recomputed: refused
 * or a valid table; never a crash (this file also runs under ASan). */
static void every_word_and_byte_rewritten_never_crashes(void **state)
{
    (void)state;
    uint8_t *b = malloc(image_len);
    size_t accepted = 0, tried = 0;
    for (size_t off = PH_TAB_FIRST_SECTION; off + 4 <= image_len; off += 4) {
        uint32_t v = ph_tab_get32(image + off);
        const uint32_t values[] = {0, 1, v + 1, v - 1, 0x7fffffff, 0xffffffff, v ^ 0x8000};
        for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
            memcpy(b, image, image_len);
            ph_tab_put32(b + off, values[i]);
            refix_checksum(b, image_len);
            accepted += try_open(b, image_len) == PH_OK;
            tried++;
        }
    }
    for (size_t off = 0; off < image_len; off++) {
        memcpy(b, image, image_len);
        b[off] ^= 0x20;
        if (!in_checksum(off, 1))
            refix_checksum(b, image_len);
        accepted += try_open(b, image_len) == PH_OK;
        tried++;
    }
    print_message("%zu of %zu rewritten tables were still valid tables\n", accepted, tried);
    free(b);
}

static void files_are_checked_before_reading(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/t.ptab", dir);
    ph_table *t = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_table_open(path, &t, &diag), PH_E_IO);
    assert_null(t);
    assert_int_equal(ph_table_open(dir, &t, &diag), PH_E_FORMAT);
    assert_int_equal(ph_test_write_file(path, image, image_len), 0);
    assert_int_equal(ph_table_open(path, &t, &diag), PH_OK);
    ph_table_close(&t);
    ph_table_close(&t); /* NULL-safe */
    ph_table_close(NULL);
    assert_int_equal(ph_test_write_file(path, image, image_len - 1), 0);
    assert_int_equal(ph_table_open(path, &t, &diag), PH_E_FORMAT);
    /* A sparse file over the format limit is refused before it is read. */
    int fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)PH_TAB_MAX_FILE_SIZE + 1), 0);
    close(fd);
    assert_int_equal(ph_table_open(path, &t, &diag), PH_E_LIMIT);
    assert_null(t);
    ph_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(intact_table_opens),
        cmocka_unit_test(truncation_at_every_length_is_refused),
        cmocka_unit_test(every_flipped_byte_is_refused),
        cmocka_unit_test(every_header_field_is_checked),
        cmocka_unit_test(an_older_format_version_is_refused_clearly),
        cmocka_unit_test(every_section_bound_is_checked),
        cmocka_unit_test(semantic_damage_behind_a_valid_checksum_is_refused),
        cmocka_unit_test(every_word_and_byte_rewritten_never_crashes),
        cmocka_unit_test(files_are_checked_before_reading),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
