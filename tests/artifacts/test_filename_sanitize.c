/* test_filename_sanitize.c - every rule of docs/filenames.md, from a table of
 * hostile filenames, and the Content-Disposition value built on it. Every
 * output is also passed through ph_filename_is_safe, the checker the fuzzer
 * uses, and sanitized again to prove idempotence. */
#include <stdio.h>
#include <string.h>

#include "pinhole/artifact_name.h"
#include "test_support.h"

static const char id[] = "0123456789abcdef0123456789abcdef";

#define N(s) s, sizeof(s) - 1
static const struct {
    const char *why;
    const char *in;
    size_t len;
    const char *out;
} cases[] = {
    {"plain name kept", N("report.pdf"), "report.pdf"},
    {"UTF-8 kept", N("r\xc3\xa9sum\xc3\xa9.pdf"), "r\xc3\xa9sum\xc3\xa9.pdf"},
    {"traversal: last component only", N("../../etc/passwd"), "passwd"},
    {"backslash traversal", N("..\\..\\windows\\system32\\cmd.exe"), "cmd.exe"},
    {"absolute path", N("/etc/shadow"), "shadow"},
    {"trailing separator", N("dir/"), "dir"},
    {"only a separator", N("/"), "artifact-01234567"},
    {"NUL dropped", N("a\0b.txt"), "ab.txt"},
    {"newlines dropped", N("line1\nline2\r.txt"), "line1line2.txt"},
    {"tab and DEL and C1 dropped", N("a\tb\x7f\xc2\x85" "c"), "abc"},
    {"RTL override dropped", N("\xe2\x80\xae" "fdp.exe"), "fdp.exe"},
    {"RLO in the middle", N("invoice\xe2\x80\xaegpj.exe"), "invoicegpj.exe"},
    {"isolates dropped", N("\xe2\x81\xa6x\xe2\x81\xa9"), "x"},
    {"zero width space dropped", N("a\xe2\x80\x8b" "b"), "ab"},
    {"soft hyphen dropped", N("file\xc2\xadname"), "filename"},
    {"BOM dropped", N("\xef\xbb\xbfx.txt"), "x.txt"},
    {"tag characters dropped", N("a\xf3\xa0\x80\x81" "b"), "ab"},
    {"quotes replaced", N("a\"b'c.txt"), "a_b_c.txt"},
    {"windows-forbidden replaced", N("x<y>z:w|q?r*s"), "x_y_z_w_q_r_s"},
    {"header injection", N("evil\"; filename=\"x"), "evil_; filename=_x"},
    {"leading dots removed", N(".bashrc"), "bashrc"},
    {"leading spaces removed", N("  lead"), "lead"},
    {"trailing dots and spaces removed", N("name. . ."), "name"},
    {"only dots", N("..."), "artifact-01234567"},
    {"dot dot", N(".."), "artifact-01234567"},
    {"only spaces", N("    "), "artifact-01234567"},
    {"empty", N(""), "artifact-01234567"},
    {"only invisible", N("\xe2\x80\xae\xe2\x80\x8b"), "artifact-01234567"},
    {"device CON", N("CON"), "_CON"},
    {"device lowercase with extension", N("con.txt"), "_con.txt"},
    {"device with double extension", N("nul.tar.gz"), "_nul.tar.gz"},
    {"device LPT9", N("LPT9.log"), "_LPT9.log"},
    {"device com1", N("com1"), "_com1"},
    {"device with spaces before dot", N("AUX .txt"), "_AUX .txt"},
    {"device with superscript", N("COM\xc2\xb9"), "_COM\xc2\xb9"},
    {"device made by trimming", N("PRN. "), "_PRN"},
    {"device CONIN$", N("conin$"), "_conin$"},
    {"not a device: CONTACT", N("CONTACT.txt"), "CONTACT.txt"},
    {"not a device: COM10", N("COM10"), "COM10"},
    {"invalid UTF-8 replaced", N("\xff\xfe" "abc"), "__abc"},
    {"overlong slash is not a separator", N("a\xc0\xaf" "b"), "a__b"},
    {"surrogate replaced", N("\xed\xa0\x80"), "___"},
    {"truncated sequence replaced", N("ab\xe2\x82"), "ab__"},
    {"noncharacter dropped", N("a\xef\xbf\xbf" "b"), "ab"},
};

static void test_table_of_hostile_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[PH_FILENAME_SAFE_MAX + 1];
        size_t n = ph_filename_sanitize(cases[i].in, cases[i].len, id, out);
        if (strcmp(out, cases[i].out) != 0)
            fail_msg("%s: got \"%s\", want \"%s\"", cases[i].why, out, cases[i].out);
        assert_int_equal(n, strlen(out));
        const char *why = NULL;
        if (!ph_filename_is_safe(out, n, &why))
            fail_msg("%s: output unsafe: %s", cases[i].why, why);
        char again[PH_FILENAME_SAFE_MAX + 1];
        ph_filename_sanitize(out, n, id, again);
        assert_string_equal(out, again);
    }
}

static void test_fallback_without_id(void **state)
{
    (void)state;
    char out[PH_FILENAME_SAFE_MAX + 1];
    assert_int_equal(ph_filename_sanitize("...", 3, NULL, out), 8);
    assert_string_equal(out, "artifact");
    ph_filename_sanitize("", 0, "not-an-id", out);
    assert_string_equal(out, "artifact");
}

static void test_thousand_byte_names_are_capped(void **state)
{
    (void)state;
    char in[1000], out[PH_FILENAME_SAFE_MAX + 1];
    memset(in, 'a', sizeof in);
    memcpy(in + sizeof in - 4, ".txt", 4);
    size_t n = ph_filename_sanitize(in, sizeof in, id, out);
    assert_int_equal(n, 255);
    assert_memory_equal(out + 251, ".txt", 4); /* the extension survives */
    assert_true(ph_filename_is_safe(out, n, NULL));

    /* 500 two-byte characters: cut at a character boundary (254 bytes). */
    for (size_t i = 0; i < sizeof in; i += 2) {
        in[i] = (char)0xc3;
        in[i + 1] = (char)0xa9;
    }
    n = ph_filename_sanitize(in, sizeof in, id, out);
    assert_int_equal(n, 254);
    assert_true(ph_filename_is_safe(out, n, NULL));

    /* A cut that would leave a trailing space or dot trims it too. */
    memset(in, 'b', sizeof in);
    in[254] = ' ';
    n = ph_filename_sanitize(in, sizeof in, id, out);
    assert_int_equal(n, 254);
    assert_true(ph_filename_is_safe(out, n, NULL));
}

static void test_checker_refuses_each_rule(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t len;
        const char *why;
    } bad[] = {
        {N(""), "empty"},
        {N("a/b"), "directory separator"},
        {N("a\\b"), "directory separator"},
        {N(".a"), "leading dot or space"},
        {N(" a"), "leading dot or space"},
        {N("a."), "trailing dot or space"},
        {N("a "), "trailing dot or space"},
        {N("CON"), "reserved device name"},
        {N("lpt1.txt"), "reserved device name"},
        {N("a\x01"), "control character"},
        {N("a\0"), "control character"},
        {N("\xff"), "invalid UTF-8"},
        {N("a\xe2\x80\xae"), "invisible or format character"},
        {N("a\"b"), "quote or Windows-forbidden character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        assert_false(ph_filename_is_safe(bad[i].name, bad[i].len, &why));
        assert_string_equal(why, bad[i].why);
    }
    char longname[256];
    memset(longname, 'x', sizeof longname);
    assert_false(ph_filename_is_safe(longname, 256, NULL));
    assert_true(ph_filename_is_safe(longname, 255, NULL));
}

static void test_content_disposition(void **state)
{
    (void)state;
    char cd[PH_CONTENT_DISPOSITION_MAX + 1];
    ph_content_disposition(N("r\xc3\xa9sum\xc3\xa9.pdf"), id, cd);
    assert_string_equal(cd, "attachment; filename=\"r_sum_.pdf\"; "
                            "filename*=UTF-8''r%C3%A9sum%C3%A9.pdf");
    ph_content_disposition(N("100% done.txt"), id, cd);
    assert_string_equal(cd, "attachment; filename=\"100_ done.txt\"; "
                            "filename*=UTF-8''100%25%20done.txt");
    ph_content_disposition(N("evil\"\r\nSet-Cookie: x=1\\.txt"), id, cd);
    assert_string_equal(cd, "attachment; filename=\"txt\"; filename*=UTF-8''txt");
    assert_null(strchr(cd, '\r'));
    assert_null(strchr(cd, '\n'));
    assert_null(strchr(cd, '\\'));
    ph_content_disposition(N("a\"; b=\"c\r\nX: y"), id, cd);
    assert_string_equal(cd, "attachment; filename=\"a_; b=_cX_ y\"; "
                            "filename*=UTF-8''a_%3B%20b%3D_cX_%20y");
    ph_content_disposition(N("../../x"), id, cd);
    assert_string_equal(cd, "attachment; filename=\"x\"; filename*=UTF-8''x");
    ph_content_disposition(N("\xe2\x80\xae"), id, cd);
    assert_string_equal(cd, "attachment; filename=\"artifact-01234567\"; "
                            "filename*=UTF-8''artifact-01234567");
}

static void test_content_disposition_worst_case_fits(void **state)
{
    (void)state;
    char in[4096], cd[PH_CONTENT_DISPOSITION_MAX + 1];
    for (size_t i = 0; i + 3 <= sizeof in; i += 3)
        memcpy(in + i, "\xe4\xb8\x80", 3); /* U+4E00, all percent-encoded */
    size_t n = ph_content_disposition(in, sizeof in - sizeof in % 3, id, cd);
    assert_true(n <= PH_CONTENT_DISPOSITION_MAX);
    assert_int_equal(strlen(cd), n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_of_hostile_names),
        cmocka_unit_test(test_fallback_without_id),
        cmocka_unit_test(test_thousand_byte_names_are_capped),
        cmocka_unit_test(test_checker_refuses_each_rule),
        cmocka_unit_test(test_content_disposition),
        cmocka_unit_test(test_content_disposition_worst_case_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
