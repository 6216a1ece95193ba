/* tls_records.h - TLS handshake records taken apart and put back together,
 * and ClientHellos built by hand, for the ClientHello reader's tests and
 * fuzzer (proxy/src/tls_hello.c: the same message re-split into other
 * records must read the same) and for bench_proxy's inspected tunnels. No
 * cmocka here: the fuzzer and the benchmark include it too. */
#ifndef PINHOLE_TEST_TLS_RECORDS_H
#define PINHOLE_TEST_TLS_RECORDS_H

#include <stddef.h>
#include <stdint.h>

/* The handshake bytes of the records in d[0..n) (whole records, as a
 * DONE parse's end delimits them) into out (n bytes suffice); returns
 * their length. */
size_t ph_test_tls_message(const uint8_t *d, size_t n, uint8_t *out);

/* msg[0..m) as handshake records (version 3.1) into out: the first of
 * `first` bytes (0: like the others), the others of at most `per`, none
 * over 2^14; returns the bytes written (m + 5 per record). */
size_t ph_test_tls_records(const uint8_t *msg, size_t m, size_t first, size_t per,
                           uint8_t *out);

/* A server_name extension naming one host_name, into out (strlen(name) + 9
 * bytes); returns its length. */
size_t ph_test_tls_sni_ext(const char *name, uint8_t *out);

/* A ClientHello handshake message (TLS 1.2 legacy version, a fixed random,
 * no session id, one cipher suite, null compression) around the extension
 * block exts[0..n) (with_exts false: no extensions field at all), into out
 * (n + 48 bytes suffice); returns its length. */
size_t ph_test_tls_hello_message(const uint8_t *exts, size_t n, int with_exts, uint8_t *out);

#endif
