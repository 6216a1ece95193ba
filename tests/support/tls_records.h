/* tls_records.h - TLS handshake records taken apart and put back together,
 * for the ClientHello reader's tests and fuzzer (proxy/src/tls_hello.c):
 * the same message re-split into other records must read the same. No
 * cmocka here: the fuzzer includes it too. */
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

#endif
