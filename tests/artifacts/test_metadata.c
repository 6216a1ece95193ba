/* test_metadata.c - the metadata document round-trips byte for byte (any
 * tenant bytes, any filename bytes) and anything else is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/artifact_metadata.h"
#include "test_support.h"

static ph_artifact_metadata sample(void)
{
    ph_artifact_metadata m = {
        .tenant_id = (unsigned char *)(uintptr_t)"t\0../x",
        .tenant_id_len = 6,
        .filename = (char *)(uintptr_t)"a\0\xff\xfe" "b",
        .filename_len = 5,
        .content_type = (char *)(uintptr_t)"text/plain",
        .run_id = (char *)(uintptr_t)"run-1",
        .source_path = (char *)(uintptr_t)"out/r\xc3\xa9sultat.csv",
        .size = 12345,
        .created_at = 1000,
        .expires_at = 2000,
    };
    memcpy(m.artifact_id, "0123456789abcdef0123456789abcdef", 33);
    for (int i = 0; i < 32; i++)
        m.sha256[i] = (unsigned char)i;
    return m;
}

static void test_round_trip_any_bytes(void **state)
{
    (void)state;
    ph_artifact_metadata m = sample();
    char *doc = NULL;
    size_t len = 0;
    assert_int_equal(ph_artifact_metadata_encode(&m, &doc, &len, NULL), PH_OK);
    assert_non_null(strstr(doc, "\"filename_hex\":\"6100fffe62\""));
    ph_artifact_metadata *d = NULL;
    assert_int_equal(ph_artifact_metadata_decode(doc, len, &d, NULL), PH_OK);
    assert_int_equal(d->tenant_id_len, 6);
    assert_memory_equal(d->tenant_id, m.tenant_id, 6);
    assert_int_equal(d->filename_len, 5);
    assert_memory_equal(d->filename, m.filename, 5);
    assert_string_equal(d->source_path, m.source_path);
    assert_memory_equal(d->sha256, m.sha256, 32);
    assert_int_equal(d->size, 12345);
    assert_int_equal(d->expires_at, 2000);
    char *doc2 = NULL;
    size_t len2 = 0;
    assert_int_equal(ph_artifact_metadata_encode(d, &doc2, &len2, NULL), PH_OK);
    assert_string_equal(doc, doc2);
    free(doc);
    free(doc2);
    ph_artifact_metadata_free(&d);
    assert_null(d);
}

static void test_utf8_filename_with_nul_is_a_string(void **state)
{
    (void)state;
    ph_artifact_metadata m = sample();
    m.filename = (char *)(uintptr_t)"a\0b";
    m.filename_len = 3;
    char *doc = NULL;
    size_t len = 0;
    assert_int_equal(ph_artifact_metadata_encode(&m, &doc, &len, NULL), PH_OK);
    assert_non_null(strstr(doc, "\"filename\":\"a\\u0000b\""));
    ph_artifact_metadata *d = NULL;
    assert_int_equal(ph_artifact_metadata_decode(doc, len, &d, NULL), PH_OK);
    assert_int_equal(d->filename_len, 3);
    assert_memory_equal(d->filename, "a\0b", 3);
    free(doc);
    ph_artifact_metadata_free(&d);
}

/* Replaces the first occurrence of from with to in doc (a fresh string). */
static char *edit(const char *doc, const char *from, const char *to)
{
    const char *at = strstr(doc, from);
    assert_non_null(at);
    char *out = malloc(strlen(doc) + strlen(to) + 1);
    sprintf(out, "%.*s%s%s", (int)(at - doc), doc, to, at + strlen(from));
    return out;
}

static void test_strict_refusals(void **state)
{
    (void)state;
    ph_artifact_metadata m = sample();
    m.filename = (char *)(uintptr_t)"x.txt";
    m.filename_len = 5;
    char *doc = NULL;
    size_t len = 0;
    assert_int_equal(ph_artifact_metadata_encode(&m, &doc, &len, NULL), PH_OK);
    static const struct {
        const char *from, *to;
    } edits[] = {
        {"{\"v\":1", "{\"v\":2"},                               /* unknown version */
        {"{\"v\":1", "{\"v\":1,\"extra\":1"},                   /* unknown member */
        {"{\"v\":1", "{\"v\":1,\"v\":1"},                       /* duplicate */
        {"\"size\":12345", "\"size\":-1"},                       /* negative */
        {"\"size\":12345", "\"size\":1.5"},                      /* not an integer */
        {"\"size\":12345", "\"size\":\"12345\""},                /* mistyped */
        {"\"size\":12345", "\"size\":99999999999999999999999"},  /* too big */
        {"\"expires_at\":2000", "\"expires_at\":1000"},          /* not after created */
        {"0123456789abcdef0123456789abcdef", "0123456789ABCDEF0123456789abcdef"},
        {"\"filename\":\"x.txt\"", "\"filename_hex\":\"782e747874\""}, /* non-canonical */
        {"\"filename\":\"x.txt\"", "\"filename\":\"x\",\"filename_hex\":\"ff\""},
        {"\"filename\":\"x.txt\",", ""},                         /* missing */
        {"\"content_type\":\"text/plain\"", "\"content_type\":\"a\\nb\""},
        {"\"content_type\":\"text/plain\"", "\"content_type\":\"\""},
        {"\"source_path\":\"out/", "\"source_path\":\"/out/"},    /* absolute */
        {"\"run_id\":\"run-1\"", "\"run_id\":\"r\\u0000\""},
        {"\"tenant_id_hex\":\"", "\"tenant_id_hex\":\"X"},
        {"\"tenant_id_hex\":\"7", "\"tenant_id_hex\":\""},       /* odd length */
        {"\"sha256\":\"00", "\"sha256\":\""},                     /* short digest */
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *bad = edit(doc, edits[i].from, edits[i].to);
        ph_artifact_metadata *d = NULL;
        ph_diag diag = {0};
        if (ph_artifact_metadata_decode(bad, strlen(bad), &d, &diag) != PH_E_FORMAT)
            fail_msg("accepted edit %zu: %s", i, bad);
        assert_null(d);
        assert_true(diag.message[0] != '\0');
        free(bad);
    }
    ph_artifact_metadata *d = NULL;
    assert_int_equal(ph_artifact_metadata_decode("[]", 2, &d, NULL), PH_E_FORMAT);
    assert_int_equal(ph_artifact_metadata_decode("{", 1, &d, NULL), PH_E_FORMAT);
    assert_int_equal(ph_artifact_metadata_decode(doc, len - 1, &d, NULL), PH_E_FORMAT);
    free(doc);
}

static void test_encode_refuses_bad_fields(void **state)
{
    (void)state;
    char *doc = NULL;
    size_t len = 0;
    ph_artifact_metadata m = sample();
    m.content_type = (char *)(uintptr_t)"text/plain\r\nX-Evil: 1";
    assert_int_equal(ph_artifact_metadata_encode(&m, &doc, &len, NULL), PH_E_INVAL);
    m = sample();
    m.tenant_id_len = 0;
    assert_int_equal(ph_artifact_metadata_encode(&m, &doc, &len, NULL), PH_E_INVAL);
    m = sample();
    m.artifact_id[0] = 'G';
    assert_int_equal(ph_artifact_metadata_encode(&m, &doc, &len, NULL), PH_E_INVAL);
    assert_null(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_any_bytes),
        cmocka_unit_test(test_utf8_filename_with_nul_is_a_string),
        cmocka_unit_test(test_strict_refusals),
        cmocka_unit_test(test_encode_refuses_bad_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
