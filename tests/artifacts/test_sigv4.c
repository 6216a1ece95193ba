/* test_sigv4.c - the SigV4 signer against the published vectors: the
 * aws-sig-v4-test-suite cases (credentials AKIDEXAMPLE, region us-east-1,
 * service "service", 20150830T123600Z) and the S3 documentation's GET
 * example with x-amz-content-sha256 and a Range header. */
#include <string.h>

#include "sigv4-int.h"
#include "test_support.h"

static const ph_sigv4_creds suite = {
    .access_key = "AKIDEXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "service",
};

#define SUITE_PREFIX                                                                              \
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "

static const ph_sigv4_pair base_headers[] = {
    {"Host", "example.amazonaws.com"},
    {"X-Amz-Date", "20150830T123600Z"},
};

static void check(const ph_sigv4_request *r, const ph_sigv4_creds *c, const char *want)
{
    char out[1024];
    ph_diag d = {0};
    assert_int_equal(ph_sigv4_authorization(r, c, out, sizeof out, &d), PH_OK);
    assert_string_equal(out, want);
}

static void test_get_vanilla(void **state)
{
    (void)state;
    ph_sigv4_request r = {.method = "GET", .path = "/", .headers = base_headers, .n_headers = 2,
                          .payload_hash = PH_SIGV4_EMPTY_SHA256, .amz_date = "20150830T123600Z"};
    char canon[1024];
    assert_int_equal(ph_sigv4_canonical_request(&r, canon, sizeof canon, NULL), PH_OK);
    assert_string_equal(canon, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n"
                               "\nhost;x-amz-date\n" PH_SIGV4_EMPTY_SHA256);
    check(&r, &suite, SUITE_PREFIX "SignedHeaders=host;x-amz-date, "
                      "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

/* Same name twice: sorted by value, byte order ('V' before 'v'). */
static void test_get_vanilla_query_order_key(void **state)
{
    (void)state;
    ph_sigv4_pair q[] = {{"Param1", "value2"}, {"Param1", "Value1"}};
    ph_sigv4_request r = {.method = "GET", .path = "/", .query = q, .n_query = 2,
                          .headers = base_headers, .n_headers = 2,
                          .payload_hash = PH_SIGV4_EMPTY_SHA256, .amz_date = "20150830T123600Z"};
    char qs[256];
    assert_int_equal(ph_sigv4_query(q, 2, qs, sizeof qs, NULL), PH_OK);
    assert_string_equal(qs, "Param1=Value1&Param1=value2");
    check(&r, &suite, SUITE_PREFIX "SignedHeaders=host;x-amz-date, "
                      "Signature=eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1");
}

static void test_get_vanilla_query_order_key_case(void **state)
{
    (void)state;
    ph_sigv4_pair q[] = {{"Param2", "value2"}, {"Param1", "value1"}};
    ph_sigv4_request r = {.method = "GET", .path = "/", .query = q, .n_query = 2,
                          .headers = base_headers, .n_headers = 2,
                          .payload_hash = PH_SIGV4_EMPTY_SHA256, .amz_date = "20150830T123600Z"};
    check(&r, &suite, SUITE_PREFIX "SignedHeaders=host;x-amz-date, "
                      "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

static void test_get_utf8(void **state)
{
    (void)state;
    ph_sigv4_request r = {.method = "GET", .path = "/\xe1\x88\xb4", .headers = base_headers,
                          .n_headers = 2, .payload_hash = PH_SIGV4_EMPTY_SHA256,
                          .amz_date = "20150830T123600Z"};
    check(&r, &suite, SUITE_PREFIX "SignedHeaders=host;x-amz-date, "
                      "Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
}

static void test_post_vanilla(void **state)
{
    (void)state;
    ph_sigv4_request r = {.method = "POST", .path = "/", .headers = base_headers, .n_headers = 2,
                          .payload_hash = PH_SIGV4_EMPTY_SHA256, .amz_date = "20150830T123600Z"};
    check(&r, &suite, SUITE_PREFIX "SignedHeaders=host;x-amz-date, "
                      "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
}

static void test_post_x_www_form_urlencoded(void **state)
{
    (void)state;
    const char body[] = "Param1=value1";
    char hash[65];
    ph_sigv4_sha256_hex(body, strlen(body), hash);
    assert_string_equal(hash, "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
    ph_sigv4_pair h[] = {{"Content-Type", "application/x-www-form-urlencoded"},
                         {"Host", "example.amazonaws.com"},
                         {"X-Amz-Date", "20150830T123600Z"}};
    ph_sigv4_request r = {.method = "POST", .path = "/", .headers = h, .n_headers = 3,
                          .payload_hash = hash, .amz_date = "20150830T123600Z"};
    check(&r, &suite, SUITE_PREFIX "SignedHeaders=content-type;host;x-amz-date, "
                      "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

/* The S3 documentation's "GET Object" example (examplebucket, 20130524). */
static void test_s3_get_object_example(void **state)
{
    (void)state;
    ph_sigv4_creds s3 = {.access_key = "AKIAIOSFODNN7EXAMPLE",
                         .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                         .region = "us-east-1", .service = "s3"};
    ph_sigv4_pair h[] = {{"Host", "examplebucket.s3.amazonaws.com"},
                         {"Range", "bytes=0-9"},
                         {"x-amz-content-sha256", PH_SIGV4_EMPTY_SHA256},
                         {"x-amz-date", "20130524T000000Z"}};
    ph_sigv4_request r = {.method = "GET", .path = "/test.txt", .headers = h, .n_headers = 4,
                          .payload_hash = PH_SIGV4_EMPTY_SHA256, .amz_date = "20130524T000000Z"};
    check(&r, &s3, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                   "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                   "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

/* What S3 multipart needs: a valueless parameter signs as `uploads=`, and
 * keys with reserved bytes are encoded exactly once. */
static void test_valueless_and_reserved(void **state)
{
    (void)state;
    ph_sigv4_pair q[] = {{"uploads", NULL}};
    char qs[64], enc[64];
    assert_int_equal(ph_sigv4_query(q, 1, qs, sizeof qs, NULL), PH_OK);
    assert_string_equal(qs, "uploads=");
    ph_sigv4_pair q2[] = {{"prefix", "a b/c"}, {"continuation-token", "x+y="}};
    assert_int_equal(ph_sigv4_query(q2, 2, qs, sizeof qs, NULL), PH_OK);
    assert_string_equal(qs, "continuation-token=x%2By%3D&prefix=a%20b%2Fc");
    assert_int_equal(ph_sigv4_encode("/p/a b", 6, 1, enc, sizeof enc, NULL), PH_OK);
    assert_string_equal(enc, "/p/a%20b");
    ph_diag d = {0};
    assert_int_equal(ph_sigv4_encode("abcdef", 6, 0, enc, 4, &d), PH_E_LIMIT);
    ph_sigv4_pair bad[] = {{"Ho st", "x"}};
    ph_sigv4_request r = {.method = "GET", .path = "/", .headers = bad, .n_headers = 1,
                          .payload_hash = PH_SIGV4_EMPTY_SHA256, .amz_date = "20150830T123600Z"};
    char out[512];
    assert_int_equal(ph_sigv4_authorization(&r, &suite, out, sizeof out, &d), PH_E_INVAL);
    r.headers = base_headers;
    r.n_headers = 2;
    r.amz_date = "2015-08-30";
    assert_int_equal(ph_sigv4_authorization(&r, &suite, out, sizeof out, &d), PH_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_vanilla),
        cmocka_unit_test(test_get_vanilla_query_order_key),
        cmocka_unit_test(test_get_vanilla_query_order_key_case),
        cmocka_unit_test(test_get_utf8),
        cmocka_unit_test(test_post_vanilla),
        cmocka_unit_test(test_post_x_www_form_urlencoded),
        cmocka_unit_test(test_s3_get_object_example),
        cmocka_unit_test(test_valueless_and_reserved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
