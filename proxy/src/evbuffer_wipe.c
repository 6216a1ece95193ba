/* evbuffer_wipe.c - a client's bytes wiped where the proxy consumes them
 * (evbuffer_wipe.h). evbuffer_peek gives the chains' own memory, writable. */
#include "evbuffer_wipe.h"

#include <string.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "http1.h"

/* The first n bytes of b overwritten in place: with src[0..n), or wiped
 * when src is NULL. */
static void overwrite(struct evbuffer *b, size_t n, const uint8_t *src)
{
    size_t len = evbuffer_get_length(b);
    if (n > len)
        n = len;
    struct evbuffer_ptr at;
    if (n == 0 || evbuffer_ptr_set(b, &at, 0, EVBUFFER_PTR_SET) != 0)
        return;
    while (n > 0) {
        struct evbuffer_iovec v[8];
        int k = evbuffer_peek(b, (ev_ssize_t)n, &at, v, 8);
        if (k <= 0)
            return;
        for (int i = 0; i < k && i < 8 && n > 0; i++) {
            size_t m = v[i].iov_len < n ? v[i].iov_len : n;
            if (src != NULL) {
                memcpy(v[i].iov_base, src, m);
                src += m;
            } else {
                OPENSSL_cleanse(v[i].iov_base, m);
            }
            n -= m;
            if (n > 0 && evbuffer_ptr_set(b, &at, m, EVBUFFER_PTR_ADD) != 0)
                return;
        }
    }
}

void px_evbuffer_drain_wiped(struct evbuffer *b, size_t n)
{
    overwrite(b, n, NULL);
    evbuffer_drain(b, n);
}

/* The bytes of a pullup that spans chains, per thread (the largest head
 * pulled up). */
static _Thread_local uint8_t pull_scratch[PH_H1_RESPONSE_HEAD_MAX];

const uint8_t *px_evbuffer_pullup_wiped(struct evbuffer *b, size_t n)
{
    struct evbuffer_iovec v;
    if (evbuffer_peek(b, (ev_ssize_t)n, NULL, &v, 1) == 1 && v.iov_len >= n)
        return v.iov_base; /* in one chain already: evbuffer_pullup would copy nothing */
    if (n > sizeof pull_scratch || evbuffer_get_length(b) < n)
        return evbuffer_pullup(b, (ev_ssize_t)n); /* never: callers cap n; the length is there */
    /* evbuffer_pullup copies the chains' bytes into one chain and frees
     * the others: they are wiped first, and the bytes put back in the one. */
    evbuffer_copyout(b, pull_scratch, n);
    overwrite(b, n, NULL);
    uint8_t *p = evbuffer_pullup(b, (ev_ssize_t)n);
    if (p != NULL)
        memcpy(p, pull_scratch, n);
    else
        overwrite(b, n, pull_scratch); /* out of memory: b as it was */
    OPENSSL_cleanse(pull_scratch, n);
    return p;
}
