/* test_filename_sanitize.c - every rule of docs/filenames.md, from a table of
 * hostile filenames, and the Content-Disposition value built on it. Every
 * output is also passed through ph_filename_is_safe, the checker the fuzzer
 * uses, and sanitized again to prove idempotence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uninorm.h>
#include <unistr.h>

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
    {"leading dash prefixed", N("-rf"), "_-rf"},
    {"leading double dash prefixed", N("--help"), "_--help"},
    {"dash exposed by trimming", N(". -x"), "_-x"},
    {"inner dash kept", N("a-b"), "a-b"},
    {"fullwidth dash prefixed", N("\xef\xbc\x8drf"), "_\xef\xbc\x8drf"},
    {"fullwidth traversal", N("\xef\xbc\x8e\xef\xbc\x8e\xef\xbc\x8f\xef\xbc\x8e\xef\xbc\x8e\xef\xbc\x8f"
                              "etc\xef\xbc\x8fpasswd"),
     "_\xef\xbc\x8e\xef\xbc\x8e_etc_passwd"},
    {"small reverse solidus replaced", N("a\xef\xb9\xa8" "b"), "a_b"},
    {"account-of sign holds a slash", N("\xe2\x84\x80.txt"), "_.txt"},
    {"division slash replaced", N("a\xe2\x88\x95" "b"), "a_b"},
    {"fullwidth device name", N("\xef\xbc\xa3\xef\xbc\xaf\xef\xbc\xae"),
     "_\xef\xbc\xa3\xef\xbc\xaf\xef\xbc\xae"},
    {"trailing digit full stop stripped", N("v\xe2\x92\x88"), "v"},
    {"composed into NFC", N("e\xcc\x81.txt"), "\xc3\xa9.txt"},
    {"fraction kept", N("\xc2\xbd.txt"), "\xc2\xbd.txt"},
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
        {N("-rf"), "leading dash"},
        {N("e\xcc\x81"), "not in Unicode NFC"},
        {N("a\xe2\x88\x95" "b"), "look-alike of a directory separator"},
        {N("a\xef\xbc\x8f" "b"), "directory separator after NFKC"},
        {N("\xef\xbc\x8e" "bashrc"), "leading dot or space after NFKC"},
        {N("a\xef\xbc\x8e"), "trailing dot or space after NFKC"},
        {N("\xef\xbc\x8drf"), "leading dash after NFKC"},
        {N("\xef\xbc\xa3\xef\xbc\xaf\xef\xbc\xae"), "reserved device name after NFKC"},
        {N("a\xef\xbc\x9a" "b"), "quote or Windows-forbidden character after NFKC"},
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

/* Look-alikes of '.', '/', '\\' and the other characters the rules refuse,
 * with what NFKC makes of each (checked against libunistring below, so the
 * table cannot claim a mapping NFKC does not make). */
typedef enum look_kind {
    LOOK_DOT,      /* NFKC gives '.' at an edge */
    LOOK_SEP,      /* NFKC gives text holding '/' or '\\' */
    LOOK_PUNCT,    /* NFKC gives a quote or a Windows-forbidden character */
    LOOK_DASH,     /* NFKC gives a leading '-' */
    LOOK_SPACE,    /* NFKC gives ' ' */
    LOOK_SHAPE,    /* NFKC leaves it alone; drawn as a slash (best-fit may map it) */
    LOOK_HARMLESS, /* NFKC gives nothing the rules refuse */
} look_kind;

static const struct {
    uint32_t cp;
    const char *nfkc; /* NULL: NFKC leaves the character alone */
    look_kind kind;
} lookalikes[] = {
    {0xFF0E, ".", LOOK_DOT},     /* FULLWIDTH FULL STOP */
    {0xFE52, ".", LOOK_DOT},     /* SMALL FULL STOP */
    {0x2024, ".", LOOK_DOT},     /* ONE DOT LEADER */
    {0x2025, "..", LOOK_DOT},    /* TWO DOT LEADER */
    {0x2026, "...", LOOK_DOT},   /* HORIZONTAL ELLIPSIS */
    {0x2488, "1.", LOOK_DOT},    /* DIGIT ONE FULL STOP */
    {0x2490, "9.", LOOK_DOT},    /* DIGIT NINE FULL STOP */
    {0x249B, "20.", LOOK_DOT},   /* NUMBER TWENTY FULL STOP */
    {0x1F100, "0.", LOOK_DOT},   /* DIGIT ZERO FULL STOP */
    {0x33C2, "a.m.", LOOK_DOT},  /* SQUARE AM */
    {0x33D8, "p.m.", LOOK_DOT},  /* SQUARE PM */
    {0xFF0F, "/", LOOK_SEP},     /* FULLWIDTH SOLIDUS */
    {0xFF3C, "\\", LOOK_SEP},    /* FULLWIDTH REVERSE SOLIDUS */
    {0xFE68, "\\", LOOK_SEP},    /* SMALL REVERSE SOLIDUS */
    {0x2100, "a/c", LOOK_SEP},   /* ACCOUNT OF */
    {0x2101, "a/s", LOOK_SEP},   /* ADDRESSED TO THE SUBJECT */
    {0x2105, "c/o", LOOK_SEP},   /* CARE OF */
    {0x2106, "c/u", LOOK_SEP},   /* CADA UNA */
    {0x2044, NULL, LOOK_SHAPE},  /* FRACTION SLASH */
    {0x2215, NULL, LOOK_SHAPE},  /* DIVISION SLASH */
    {0x2216, NULL, LOOK_SHAPE},  /* SET MINUS */
    {0x2571, NULL, LOOK_SHAPE},  /* BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT */
    {0x2572, NULL, LOOK_SHAPE},  /* BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT */
    {0x27CB, NULL, LOOK_SHAPE},  /* MATHEMATICAL RISING DIAGONAL */
    {0x27CD, NULL, LOOK_SHAPE},  /* MATHEMATICAL FALLING DIAGONAL */
    {0x29F5, NULL, LOOK_SHAPE},  /* REVERSE SOLIDUS OPERATOR */
    {0x29F8, NULL, LOOK_SHAPE},  /* BIG SOLIDUS */
    {0x29F9, NULL, LOOK_SHAPE},  /* BIG REVERSE SOLIDUS */
    {0xFF1A, ":", LOOK_PUNCT},   /* FULLWIDTH COLON */
    {0xFE55, ":", LOOK_PUNCT},   /* SMALL COLON */
    {0xFF02, "\"", LOOK_PUNCT},  /* FULLWIDTH QUOTATION MARK */
    {0xFF1C, "<", LOOK_PUNCT},   /* FULLWIDTH LESS-THAN SIGN */
    {0xFE64, "<", LOOK_PUNCT},   /* SMALL LESS-THAN SIGN */
    {0xFE56, "?", LOOK_PUNCT},   /* SMALL QUESTION MARK */
    {0xFE61, "*", LOOK_PUNCT},   /* SMALL ASTERISK */
    {0xFF5C, "|", LOOK_PUNCT},   /* FULLWIDTH VERTICAL LINE */
    {0xFF0D, "-", LOOK_DASH},    /* FULLWIDTH HYPHEN-MINUS */
    {0xFE63, "-", LOOK_DASH},    /* SMALL HYPHEN-MINUS */
    {0x00A0, " ", LOOK_SPACE},   /* NO-BREAK SPACE */
    {0x3000, " ", LOOK_SPACE},   /* IDEOGRAPHIC SPACE */
    {0x2002, " ", LOOK_SPACE},   /* EN SPACE */
    {0xFE6A, "%", LOOK_HARMLESS}, /* SMALL PERCENT SIGN */
};

/* NFKC (compat) or NFC of s as a new NUL-terminated string; the test fails
 * when libunistring does. */
static char *normalize(bool compat, const char *s, size_t len, size_t *n)
{
    uint8_t *r = u8_normalize(compat ? UNINORM_NFKC : UNINORM_NFC, (const uint8_t *)s, len,
                              NULL, n);
    assert_non_null(r);
    char *z = malloc(*n + 1);
    assert_non_null(z);
    memcpy(z, r, *n);
    z[*n] = '\0';
    free(r);
    return z;
}

/* The sanitizer's output for in passes the checker and stays safe after an
 * independent NFKC round trip: no separator, not "." or "..", no leading
 * dot, space or dash, no device name; and it is in NFC. */
static void assert_survives_nfkc(const char *what, const char *in, size_t len)
{
    char out[PH_FILENAME_SAFE_MAX + 1];
    size_t n = ph_filename_sanitize(in, len, id, out);
    const char *why = NULL;
    if (!ph_filename_is_safe(out, n, &why))
        fail_msg("%s: output unsafe: %s", what, why);
    size_t kn, cn;
    char *k = normalize(true, out, n, &kn);
    char *c = normalize(false, out, n, &cn);
    if (cn != n || memcmp(c, out, n) != 0)
        fail_msg("%s: output \"%s\" is not in NFC", what, out);
    if (strchr(k, '/') != NULL || strchr(k, '\\') != NULL || strcmp(k, ".") == 0 ||
        strcmp(k, "..") == 0 || k[0] == '.' || k[0] == ' ' || k[0] == '-' ||
        k[kn - 1] == '.' || k[kn - 1] == ' ')
        fail_msg("%s: output \"%s\" becomes \"%s\" under NFKC", what, out, k);
    const char *kwhy = NULL;
    if (!ph_filename_is_safe(k, kn, &kwhy) && strcmp(kwhy, "look-alike of a directory separator") != 0)
        fail_msg("%s: NFKC form \"%s\" of \"%s\" is unsafe: %s", what, k, out, kwhy);
    free(k);
    free(c);
}

static void test_lookalikes_through_nfkc(void **state)
{
    (void)state;
    size_t count = sizeof lookalikes / sizeof lookalikes[0];
    assert_true(count >= 30);
    for (size_t i = 0; i < count; i++) {
        char x[8];
        int xl = u8_uctomb((uint8_t *)x, lookalikes[i].cp, 4);
        assert_true(xl > 0);
        x[xl] = '\0';
        char what[64];
        snprintf(what, sizeof what, "U+%04X", (unsigned)lookalikes[i].cp);

        /* The table says what NFKC really does. */
        size_t kn;
        char *k = normalize(true, x, (size_t)xl, &kn);
        const char *want = lookalikes[i].nfkc != NULL ? lookalikes[i].nfkc : x;
        if (strcmp(k, want) != 0)
            fail_msg("%s: NFKC gives \"%s\", the table says \"%s\"", what, k, want);
        free(k);

        /* The checker refuses each way the character could break a rule. */
        char name[128];
        const char *why = NULL;
        look_kind kind = lookalikes[i].kind;
        snprintf(name, sizeof name, "a%sb", x);
        bool inner_ok = ph_filename_is_safe(name, strlen(name), &why);
        if (kind == LOOK_SEP || kind == LOOK_SHAPE || kind == LOOK_PUNCT)
            assert_false(inner_ok);
        else
            assert_true(inner_ok);
        snprintf(name, sizeof name, "%sbashrc", x);
        bool lead_ok = ph_filename_is_safe(name, strlen(name), &why);
        if (kind == LOOK_HARMLESS || (kind == LOOK_DOT && want[0] != '.'))
            assert_true(lead_ok);
        else
            assert_false(lead_ok);
        snprintf(name, sizeof name, "name%s", x);
        bool trail_ok = ph_filename_is_safe(name, strlen(name), &why);
        if (kind == LOOK_DOT || kind == LOOK_SPACE || kind == LOOK_SEP || kind == LOOK_SHAPE ||
            kind == LOOK_PUNCT)
            assert_false(trail_ok);
        else
            assert_true(trail_ok);

        /* Hostile names built from it come out safe, also after NFKC. */
        snprintf(name, sizeof name, "%s%s%s%s%s%setc%spasswd", x, x, x, x, x, x, x);
        assert_survives_nfkc(what, name, strlen(name));
        snprintf(name, sizeof name, "%s", x);
        assert_survives_nfkc(what, name, strlen(name));
        snprintf(name, sizeof name, "%s%s", x, x);
        assert_survives_nfkc(what, name, strlen(name));
        snprintf(name, sizeof name, "..%s..%sx", x, x);
        assert_survives_nfkc(what, name, strlen(name));
        snprintf(name, sizeof name, "%srf", x);
        assert_survives_nfkc(what, name, strlen(name));
        snprintf(name, sizeof name, "CON%stxt", x);
        assert_survives_nfkc(what, name, strlen(name));
        snprintf(name, sizeof name, "report%s", x);
        assert_survives_nfkc(what, name, strlen(name));
    }
}

/* 255 bytes whose NFKC form is 18 times longer (U+FDFA): the name is cut
 * until the NFKC form fits in 255 bytes too. */
static void test_nfkc_expansion_is_capped(void **state)
{
    (void)state;
    char in[255];
    for (size_t i = 0; i + 3 <= sizeof in; i += 3)
        memcpy(in + i, "\xef\xb7\xba", 3);
    char out[PH_FILENAME_SAFE_MAX + 1];
    size_t n = ph_filename_sanitize(in, sizeof in, id, out);
    const char *why = NULL;
    if (!ph_filename_is_safe(out, n, &why))
        fail_msg("output unsafe: %s", why);
    size_t kn;
    char *k = normalize(true, out, n, &kn);
    assert_true(kn <= PH_FILENAME_SAFE_MAX);
    assert_true(n >= 3);
    free(k);
    assert_false(ph_filename_is_safe(in, sizeof in, &why));
    assert_string_equal(why, "longer than 255 bytes after NFKC");
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
        cmocka_unit_test(test_lookalikes_through_nfkc),
        cmocka_unit_test(test_nfkc_expansion_is_capped),
        cmocka_unit_test(test_content_disposition),
        cmocka_unit_test(test_content_disposition_worst_case_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
