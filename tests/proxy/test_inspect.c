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
    assert_int_equal(px_inspect_step(&in, d, n, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_PASS_HELLO);
    assert_int_equal(in.hello.end, n);
    assert_string_equal(in.hello.sni, "allowed.test");
    /* The name compared ASCII case-insensitively (the CONNECT host is
     * lowercase; a client may send capitals). */
    px_inspect_init(&in);
    uint8_t *name = memmem(d, n, "allowed.test", 12);
    assert_non_null(name);
    memcpy(name, "ALLOWED", 7);
    assert_int_equal(px_inspect_step(&in, d, n, "allowed.test", PH_PROTOCOL_DEFAULT, false), PX_INSPECT_PASS_HELLO);
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
            assert_int_equal(v, PX_INSPECT_PASS_HELLO);
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

/* A hello for the CONNECT host made as tls_records.h makes them, into out. */
static size_t make_hello(const char *name, uint8_t *out)
{
    uint8_t exts[300], msg[400];
    size_t e = ph_test_tls_sni_ext(name, exts);
    size_t m = ph_test_tls_hello_message(exts, e, 1, msg);
    return ph_test_tls_records(msg, m, 0, 16384, out);
}

/* The server's first bytes: a ServerHello record holding random. */
static size_t server_hello(const uint8_t random[32], uint8_t *out)
{
    static const uint8_t head[] = { 22, 3, 3, 0, 42, 2, 0, 0, 38, 3, 3 };
    memcpy(out, head, sizeof head);
    memcpy(out + sizeof head, random, 32);
    return sizeof head + 32;
}

static const uint8_t HRR[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

/* A second ClientHello after a HelloRetryRequest may name any server, and
 * a server reads it as it read the first (OpenSSL's servername callback
 * runs again with the new name): so the first hello goes alone, what
 * follows is held until the server's answer shows a ServerHello (then it
 * all goes), and after a HelloRetryRequest (or anything else first) the
 * next flight is inspected as the first was, after the dummy
 * change_cipher_spec record a TLS 1.3 client may send. */
static void hello_retry_request(void **state)
{
    (void)state;
    static const uint8_t ccs[6] = { 20, 3, 3, 0, 1, 1 };
    uint8_t flight[1024], srv[64], rnd[32];
    memset(rnd, 0x5a, sizeof rnd);
    px_inspect in;

    /* A plain ServerHello (after a warning unrecognized_name alert, as
     * some servers send): released, whatever was held. */
    size_t n = make_hello("allowed.test", flight);
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, flight, n, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_PASS_HELLO);
    assert_int_equal(in.hello.end, n);
    assert_int_equal(px_inspect_step(&in, flight, 0, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_WAIT);
    memcpy(srv, "\x15\x03\x03\x00\x02\x01\x70", 7);
    size_t s = 7 + server_hello(rnd, srv + 7);
    for (size_t i = 0; i < s; i++) { /* a byte at a time */
        assert_int_equal(in.kept.stage, PX_INSPECT_AWAIT_SERVER);
        px_inspect_server(&in.kept, srv + i, 1);
    }
    assert_int_equal(in.kept.stage, PX_INSPECT_RELEASED);
    assert_int_equal(px_inspect_step(&in, flight, 0, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_PASS);

    /* A HelloRetryRequest, then a second hello naming another server, or
     * the host, with or without the change_cipher_spec record before it,
     * or something else. */
    const struct {
        const char *name;
        bool ccs;
        px_inspect_verdict v;
        ph_reason reason;
    } second[] = {
        { "evil.test", false, PX_INSPECT_REFUSE, PH_REASON_SNI_MISMATCH },
        { "evil.test", true, PX_INSPECT_REFUSE, PH_REASON_SNI_MISMATCH },
        { "allowed.test", false, PX_INSPECT_PASS, PH_REASON_ALLOWED },
        { "allowed.test", true, PX_INSPECT_PASS, PH_REASON_ALLOWED },
        { NULL, true, PX_INSPECT_REFUSE, PH_REASON_TLS_MALFORMED },
    };
    for (size_t i = 0; i < sizeof second / sizeof *second; i++) {
        n = make_hello("allowed.test", flight);
        px_inspect_init(&in);
        assert_int_equal(px_inspect_step(&in, flight, n, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                         PX_INSPECT_PASS_HELLO);
        /* The HelloRetryRequest in two pieces, cut in its random. */
        s = server_hello(HRR, srv);
        px_inspect_server(&in.kept, srv, 20 + i);
        assert_int_equal(in.kept.stage, PX_INSPECT_AWAIT_SERVER);
        px_inspect_server(&in.kept, srv + 20 + i, s - 20 - i);
        assert_int_equal(in.kept.stage, PX_INSPECT_SECOND_HELLO);
        size_t k = 0;
        if (second[i].ccs) {
            memcpy(flight, ccs, sizeof ccs);
            k = sizeof ccs;
        }
        if (second[i].name != NULL) {
            k += make_hello(second[i].name, flight + k);
        } else {
            memcpy(flight + k, "\x17\x03\x03\x00\x01\x00", 6);
            k += 6;
        }
        /* Cut short first: more is needed (or refused at once). */
        px_inspect_verdict cut = px_inspect_step(&in, flight, k - 1, "allowed.test",
                                                 PH_PROTOCOL_DEFAULT, false);
        assert_true(cut == PX_INSPECT_WAIT || cut == second[i].v);
        px_inspect_verdict v = px_inspect_step(&in, flight, k, "allowed.test",
                                               PH_PROTOCOL_DEFAULT, false);
        assert_int_equal(v, second[i].v);
        if (v == PX_INSPECT_REFUSE) {
            assert_int_equal(in.reason, second[i].reason);
            assert_int_equal(in.alert_len, 7);
        }
    }

    /* A server whose first bytes are not a ServerHello (an alert): the
     * next flight is inspected too. Waiting for the server, a last step
     * (the client's EOF, the hold's cap or deadline) is a refusal. */
    n = make_hello("allowed.test", flight);
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, flight, n, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_PASS_HELLO);
    px_inspect_server(&in.kept, (const uint8_t *)"\x15\x03\x03\x00\x02\x02\x28", 7);
    assert_int_equal(in.kept.stage, PX_INSPECT_SECOND_HELLO);
    n = make_hello("evil.test", flight);
    assert_int_equal(px_inspect_step(&in, flight, n, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_REFUSE);
    n = make_hello("allowed.test", flight);
    px_inspect_init(&in);
    assert_int_equal(px_inspect_step(&in, flight, n, "allowed.test", PH_PROTOCOL_DEFAULT, false),
                     PX_INSPECT_PASS_HELLO);
    assert_int_equal(px_inspect_step(&in, flight, 3, "allowed.test", PH_PROTOCOL_DEFAULT, true),
                     PX_INSPECT_REFUSE);
    assert_int_equal(in.reason, PH_REASON_TLS_MALFORMED);

    /* A ServerHello record too short to hold its random (a fragmented
     * one) shows nothing: the next flight is inspected. */
    px_inspect_init(&in);
    in.kept.stage = PX_INSPECT_AWAIT_SERVER;
    s = server_hello(rnd, srv);
    srv[4] = 20;
    px_inspect_server(&in.kept, srv, s);
    assert_int_equal(in.kept.stage, PX_INSPECT_SECOND_HELLO);
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
                         tls_ok ? PX_INSPECT_PASS_HELLO : PX_INSPECT_REFUSE);
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
        cmocka_unit_test(hello_retry_request),
        cmocka_unit_test(the_rule_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
