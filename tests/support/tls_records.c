/* tls_records.c - tls_records.h. */
#include "tls_records.h"

#include <string.h>

#include "tls_hello.h"

size_t ph_test_tls_message(const uint8_t *d, size_t n, uint8_t *out)
{
    size_t m = 0;
    for (size_t p = 0; p + 5 <= n;) {
        size_t len = (size_t)d[p + 3] << 8 | d[p + 4];
        if (len > n - p - 5)
            len = n - p - 5;
        memcpy(out + m, d + p + 5, len);
        m += len;
        p += 5 + len;
    }
    return m;
}

size_t ph_test_tls_records(const uint8_t *msg, size_t m, size_t first, size_t per,
                           uint8_t *out)
{
    size_t o = 0;
    for (size_t p = 0; p < m;) {
        size_t len = p == 0 && first > 0 ? first : per;
        if (len > m - p)
            len = m - p;
        if (len > PH_TLS_RECORD_MAX)
            len = PH_TLS_RECORD_MAX;
        const uint8_t h[5] = { PH_TLS_RECORD_HANDSHAKE, 3, 1, (uint8_t)(len >> 8), (uint8_t)len };
        memcpy(out + o, h, 5);
        memcpy(out + o + 5, msg + p, len);
        o += 5 + len;
        p += len;
    }
    return o;
}
