/* test_inspect.c - a tunnel's inspection on a real client's hello (curl's,
 * fuzz/corpus/tls_hello/): the CONNECT host passes in any case, another
 * host, no name, a hello cut short, a hello offering Encrypted Client Hello
 * and other protocols are refused with their reasons, TLS ones with a fatal
 * access_denied alert. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "inspect.h"
#include "test_support.h"
#include "tls_records.h"

static uint8_t *curl_hello(size_t *n)
{
    uint8_t *d = (uint8_t *)ph_test_read_file(
        ph_test_source_path("fuzz/corpus/tls_hello/curl.hello"), n);
    assert_non_null(d);
    return d;
}

static const uint8_t ALERT[7] = { 21, 3, 3, 0, 2, 2, 49 };

static void the_connect_host_passes(void **state)
{
    (void)state;
    size_t n;
    uint8_t *d = curl_hello(&n);
    px_inspect in;
    px_inspect_init(&in);
    /* Byte by byte: WAIT until the last byte, then PASS. */
    for (size_t got = 1; got < n; got++)
        assert_int_equal(px_inspect_step(&in, d, got, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_WAIT);
    assert_int_equal(px_inspect_step(&in, d, n, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_PASS);
    assert_string_equal(in.hello.sni, "allowed.test");
    /* The name compared ASCII case-insensitively (the CONNECT host is
     * lowercase; a client may send capitals). */
    px_inspect_init(&in);
    uint8_t *name = memmem(d, n, "allowed.test", 12);
    assert_non_null(name);
    memcpy(name, "ALLOWED", 7);
    assert_int_equal(px_inspect_step(&in, d, n, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_PASS);
    assert_string_equal(in.hello.sni, "ALLOWED.test");
    free(d);
}

static void refusals(void **state)
{
    (void)state;
    size_t n;
    uint8_t *d = curl_hello(&n);
    px_inspect in;

    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, d, n, "other.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_REFUSE);
    assert_int_equal(in.reason, PH_REASON_SNI_MISMATCH);
    assert_true(in.has_sni);
    assert_int_equal(in.alert_len, 7);
    assert_memory_equal(in.alert, ALERT, 7);
    /* A suffix or a prefix of the host is another host. */
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, d, n, "allowed.tes", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_REFUSE);
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, d, n, "x.allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_REFUSE);

    /* Cut short, then the deadline (last). */
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, d, n - 1, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_WAIT);
    assert_int_equal(px_inspect_step(&in, d, n - 1, "allowed.test", PH_PROTOCOL_DEFAULT, true), PX_INSPECT_REFUSE);
    assert_int_equal(in.reason, PH_REASON_TLS_MALFORMED);
    assert_int_equal(in.alert_len, 7);

    /* SSH (its banner has a space, after no method), a lowercase or too
     * long "method", an SSLv2-style hello: neither TLS nor HTTP/1. */
    static const char *const other[] = { "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", "get / HTTP/1.1\r\n",
                                         "GETGETGETGETGETGETGETGETGETGETGETGET / HTTP/1.1\r\n",
                                         "\x80\x2e\x01\x00\x02" };
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        px_inspect_init(&in);
        assert_int_equal(px_inspect_step(&in, (const uint8_t *)other[i], strlen(other[i]),
                                         "allowed.test", PH_PROTOCOL_DEFAULT, false),
                         PX_INSPECT_REFUSE);
        assert_int_equal(in.reason, PH_REASON_PROTOCOL_NOT_ALLOWED);
        assert_int_equal(in.alert_len, 0);
    }
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, d, 0, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_WAIT);
    assert_int_equal(px_inspect_step(&in, d, 0, "allowed.test", PH_PROTOCOL_DEFAULT, true), PX_INSPECT_REFUSE);
    assert_int_equal(in.reason, PH_REASON_PROTOCOL_NOT_ALLOWED);
    free(d);
}

/* Encrypted Client Hello: the outer name is the CONNECT host, but a server
 * that decrypts the extension routes on the inner hello's name, which the
 * proxy cannot read (fronting through an allowed name), and a GREASE
 * extension looks like a real one: refused, sni_encrypted, with the alert,
 * before a byte is relayed. Every codepoint servers deployed: RFC 9849's,
 * draft 10's, ESNI's. Without it the same hello passes. */
static void encrypted_client_hello(void **state)
{
    (void)state;
    static const unsigned types[] = { 0xfe0d, 0xfe0a, 0xffce };
    /* An outer ECH payload's start: type outer, a KDF and AEAD, config id,
     * an empty enc; its contents do not matter to the proxy. */
    static const uint8_t ech[] = { 0, 0, 1, 0, 1, 7, 0, 0, 0, 4, 1, 2, 3, 4 };
    uint8_t exts[128], msg[256], rec[512];
    px_inspect in;
    for (size_t i = 0; i <= sizeof types / sizeof *types; i++) {
        size_t e = ph_test_tls_sni_ext("allowed.test", exts);
        if (i < sizeof types / sizeof *types) {
            exts[e++] = (uint8_t)(types[i] >> 8);
            exts[e++] = (uint8_t)types[i];
            exts[e++] = 0;
            exts[e++] = sizeof ech;
            memcpy(exts + e, ech, sizeof ech);
            e += sizeof ech;
        }
        size_t m = ph_test_tls_hello_message(exts, e, 1, msg);
        size_t n = ph_test_tls_records(msg, m, 0, 16384, rec);
        px_inspect_init(&in);
        px_inspect_verdict v = px_inspect_step(&in, rec, n, "allowed.test", PH_PROTOCOL_DEFAULT,
                                               false);
        if (i == sizeof types / sizeof *types) {
            assert_int_equal(v, PX_INSPECT_PASS);
            continue;
        }
        assert_int_equal(v, PX_INSPECT_REFUSE);
        assert_int_equal(in.reason, PH_REASON_SNI_ENCRYPTED);
        assert_string_equal(ph_reason_code(in.reason), "sni_encrypted");
        assert_int_equal(ph_reason_http_status(in.reason), 403);
        assert_true(in.has_sni);
        assert_string_equal(in.hello.sni, "allowed.test");
        assert_int_equal(in.alert_len, 7);
        assert_memory_equal(in.alert, ALERT, 7);
        /* The rule that says tcp is the one way through (not inspected). */
        px_inspect_init(&in);
        assert_int_equal(px_inspect_step(&in, rec, n, "allowed.test", PH_PROTOCOL_TCP, false),
                         PX_INSPECT_PASS);
    }
}

/* The rule's protocol: the default takes TLS or HTTP/1, tls only TLS, http
 * only HTTP/1 (each refusing the other as protocol_not_allowed, TLS with
 * an alert); an HTTP method is recognized before the line is complete. */
static void the_rule_protocol(void **state)
{
    (void)state;
    size_t n;
    uint8_t *d = curl_hello(&n);
    const uint8_t *get = (const uint8_t *)"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    px_inspect in;
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, get, 2, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_WAIT);
    assert_int_equal(px_inspect_step(&in, get, 2, "allowed.test", PH_PROTOCOL_DEFAULT, true),
                     PX_INSPECT_REFUSE);
    for (int p = PH_PROTOCOL_DEFAULT; p <= PH_PROTOCOL_HTTP; p++) {
        bool http_ok = p != PH_PROTOCOL_TLS, tls_ok = p != PH_PROTOCOL_HTTP;
        px_inspect_init(&in);
        assert_int_equal(px_inspect_step(&in, get, 4, "allowed.test", (ph_protocol)p, false),
                         http_ok ? PX_INSPECT_HTTP : PX_INSPECT_REFUSE);
        if (!http_ok) {
            assert_int_equal(in.reason, PH_REASON_PROTOCOL_NOT_ALLOWED);
            assert_int_equal(in.alert_len, 0);
        }
        px_inspect_init(&in);
        assert_int_equal(px_inspect_step(&in, d, n, "allowed.test", (ph_protocol)p, false),
                         tls_ok ? PX_INSPECT_PASS : PX_INSPECT_REFUSE);
        if (!tls_ok) {
            assert_int_equal(in.reason, PH_REASON_PROTOCOL_NOT_ALLOWED);
            assert_int_equal(in.alert_len, 7);
        }
    }
    /* tcp (a reload made it so while the bytes were held): anything passes,
     * an SSH banner and silence too. */
    const uint8_t *ssh = (const uint8_t *)"SSH-2.0-OpenSSH_9.2p1 Debian\r\n";
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, ssh, 30, "allowed.test", PH_PROTOCOL_TCP, false),
                     PX_INSPECT_PASS);
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, ssh, 0, "allowed.test", PH_PROTOCOL_TCP, true),
                     PX_INSPECT_PASS);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_connect_host_passes),
        cmocka_unit_test(refusals),
        cmocka_unit_test(encrypted_client_hello),
        cmocka_unit_test(the_rule_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
