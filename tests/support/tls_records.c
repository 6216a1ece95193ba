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

static size_t put16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return 2;
}

size_t ph_test_tls_sni_ext(const char *name, uint8_t *out)
{
    size_t n = strlen(name), o = 0;
    o += put16(out + o, 0); /* server_name */
    o += put16(out + o, n + 5);
    o += put16(out + o, n + 3);
    out[o++] = 0; /* host_name */
    o += put16(out + o, n);
    memcpy(out + o, name, n);
    return o + n;
}

size_t ph_test_tls_hello_message(const uint8_t *exts, size_t n, int with_exts, uint8_t *out)
{
    size_t o = 0;
    out[o++] = 1; /* client_hello; its 24-bit length below */
    o += 3;
    o += put16(out + o, 0x0303);
    for (int i = 0; i < 32; i++)
        out[o++] = (uint8_t)i;
    out[o++] = 0; /* session id */
    o += put16(out + o, 2);
    o += put16(out + o, 0x1301);
    out[o++] = 1; /* compression methods: null */
    out[o++] = 0;
    if (with_exts) {
        o += put16(out + o, n);
        memcpy(out + o, exts, n);
        o += n;
    }
    size_t body = o - 4;
    out[1] = (uint8_t)(body >> 16);
    out[2] = (uint8_t)(body >> 8);
    out[3] = (uint8_t)body;
    return o;
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
