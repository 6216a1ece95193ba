/* test_evbuffer_wipe.c - the wiping drain and pullup of evbuffer_wipe.h on
 * evbuffers of many chains: what stays in the buffer is exactly the bytes
 * that were there (the n first ones made contiguous by a pullup, the rest
 * untouched; a drain takes exactly n, or all when n is more), and the
 * memory of every chain a drain or a pullup gives up holds zeros where the
 * bytes were. The chains are made from memory the test owns
 * (evbuffer_add_reference of writable blocks, whose cleanup sees the
 * block as libevent lets it go) or moved in from other buffers
 * (evbuffer_add_buffer, as the proxy's reads and hand-overs make them);
 * shapes: tens of chains of a few bytes (more than one evbuffer_peek
 * batch), a head ending inside a chain, a buffer drained before (a
 * misaligned first chain), and random ones. And a chunked body decoded
 * (px_h1_rechunk) from such chains with a request pipelined behind it:
 * the chains given up held the body alone, never a byte of what follows
 * (a pipelined head's grant), and the data out is the body's, whatever the
 * chains' split. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "evbuffer_wipe.h"
#include "h1_reframe.h"
#include "http1.h"

/* A referenced block: its bytes when added, and what cleanup saw. */
typedef struct block {
    uint8_t *mem;
    size_t len;
    size_t gone;     /* bytes at its start the buffer gave up before cleanup (drained) */
    int released;    /* cleanup ran */
    int dirty;       /* cleanup saw a byte not wiped where the buffer's bytes were */
} block;

#define BLOCKS_MAX 512

static void block_cleanup(const void *data, size_t len, void *arg)
{
    block *b = arg;
    (void)data;
    (void)len;
    b->released = 1;
    /* Every byte of a block let go was given up by a drain or a pullup:
     * each must be wiped. */
    for (size_t i = 0; i < b->len; i++)
        b->dirty |= b->mem[i] != 0;
    free(b->mem);
    b->mem = NULL;
}

typedef struct shape {
    struct evbuffer *buf;
    uint8_t *bytes; /* what the buffer holds, in order */
    size_t len;
    block blocks[BLOCKS_MAX];
    size_t nblocks;
} shape;

/* Bytes no wipe makes: never 0. */
static uint8_t byte_at(size_t i) { return (uint8_t)(1 + i % 251); }

/* A buffer of the pieces' lengths, each piece its own chain: a referenced
 * writable block (even pieces) or a chain moved in from another buffer
 * (odd ones); its bytes from[] (NULL: byte_at's, never 0). */
static void shape_make(shape *s, const size_t *piece, size_t npieces, const uint8_t *from)
{
    memset(s, 0, sizeof *s);
    s->buf = evbuffer_new();
    assert_non_null(s->buf);
    for (size_t k = 0; k < npieces; k++)
        s->len += piece[k];
    s->bytes = malloc(s->len + 1);
    assert_non_null(s->bytes);
    size_t at = 0;
    for (size_t k = 0; k < npieces; k++) {
        for (size_t i = 0; i < piece[k]; i++)
            s->bytes[at + i] = from != NULL ? from[at + i] : byte_at(at + i);
        if (k % 2 == 0) {
            assert_true(s->nblocks < BLOCKS_MAX);
            block *b = &s->blocks[s->nblocks++];
            b->mem = malloc(piece[k] + 1);
            assert_non_null(b->mem);
            memcpy(b->mem, s->bytes + at, piece[k]);
            b->len = piece[k];
            assert_int_equal(
                evbuffer_add_reference(s->buf, b->mem, b->len, block_cleanup, b), 0);
        } else {
            struct evbuffer *t = evbuffer_new();
            assert_non_null(t);
            assert_int_equal(evbuffer_add(t, s->bytes + at, piece[k]), 0);
            assert_int_equal(evbuffer_add_buffer(s->buf, t), 0);
            evbuffer_free(t);
        }
        at += piece[k];
    }
    assert_int_equal(evbuffer_get_length(s->buf), s->len);
}

/* The buffer holds exactly s->bytes[from..len). */
static void assert_holds(const shape *s, size_t from)
{
    size_t n = evbuffer_get_length(s->buf);
    assert_int_equal(n, s->len - from);
    uint8_t *got = malloc(n + 1);
    assert_non_null(got);
    assert_int_equal(evbuffer_copyout(s->buf, got, n), (ev_ssize_t)n);
    assert_memory_equal(got, s->bytes + from, n);
    free(got);
}

/* Every block released is wiped whole; one still held is wiped exactly
 * over its first `gone` bytes (a drain ended inside it). */
static void assert_wiped(const shape *s)
{
    for (size_t k = 0; k < s->nblocks; k++) {
        const block *b = &s->blocks[k];
        if (b->released) {
            assert_int_equal(b->dirty, 0);
            continue;
        }
        for (size_t i = 0; i < b->len; i++)
            assert_int_equal(b->mem[i] == 0, i < b->gone);
    }
}

static void shape_free(shape *s)
{
    evbuffer_free(s->buf); /* releases the blocks left (not checked: not given up) */
    free(s->bytes);
}

/* Marks, for each block, how many of its first bytes the first n bytes of
 * the buffer cover (the pieces in order). */
static void mark_gone(shape *s, const size_t *piece, size_t npieces, size_t n)
{
    size_t at = 0, blk = 0;
    for (size_t k = 0; k < npieces; k++) {
        size_t take = n > at ? (n - at < piece[k] ? n - at : piece[k]) : 0;
        if (k % 2 == 0)
            s->blocks[blk++].gone = take;
        at += piece[k];
    }
}

static void drain_case(const size_t *piece, size_t npieces, size_t n)
{
    shape s;
    shape_make(&s, piece, npieces, NULL);
    mark_gone(&s, piece, npieces, n);
    px_evbuffer_drain_wiped(s.buf, n);
    assert_holds(&s, n < s.len ? n : s.len);
    assert_wiped(&s);
    shape_free(&s);
}

static void pullup_case(const size_t *piece, size_t npieces, size_t n)
{
    shape s;
    shape_make(&s, piece, npieces, NULL);
    const uint8_t *p = px_evbuffer_pullup_wiped(s.buf, n);
    assert_non_null(p);
    assert_memory_equal(p, s.bytes, n);
    assert_holds(&s, 0);
    if (piece[0] >= n) {
        /* In one chain already: that chain's own bytes, nothing copied. */
        assert_ptr_equal(p, s.blocks[0].mem);
    } else {
        /* The chains it copied from and let go are wiped whole. */
        for (size_t k = 0; k < s.nblocks; k++)
            assert_int_equal(s.blocks[k].dirty, 0);
    }
    /* Then the head's drain, as forward.c's decide does. */
    px_evbuffer_drain_wiped(s.buf, n);
    assert_holds(&s, n);
    for (size_t k = 0; k < s.nblocks; k++)
        assert_int_equal(s.blocks[k].dirty, 0);
    shape_free(&s);
}

static void test_many_small_chains(void **state)
{
    (void)state;
    size_t piece[100];
    for (size_t k = 0; k < 100; k++)
        piece[k] = 3 + k % 5; /* 100 chains: many evbuffer_peek batches */
    size_t total = 0;
    for (size_t k = 0; k < 100; k++)
        total += piece[k];
    const size_t cuts[] = { 1, 3, 4, 37, 250, total - 1, total, total + 10 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        drain_case(piece, 100, cuts[i]);
        if (cuts[i] <= total && cuts[i] > 0)
            pullup_case(piece, 100, cuts[i]);
    }
}

static void test_head_in_one_chain_then_pipelined(void **state)
{
    (void)state;
    /* A head of 300 bytes in the first chain, the next request behind it in
     * the same and later chains. */
    const size_t piece[] = { 500, 40, 7, 1200 };
    pullup_case(piece, 4, 300);
    drain_case(piece, 4, 300);
    /* A head across the first two chains, ending inside the third. */
    pullup_case(piece, 4, 545);
    drain_case(piece, 4, 545);
}

static void test_misaligned_first_chain(void **state)
{
    (void)state;
    const size_t piece[] = { 64, 64, 64, 64, 64 };
    shape s;
    shape_make(&s, piece, 5, NULL);
    /* A first request taken (drained, wiped), the next one 100 bytes long
     * from byte 30 of the first chain over three chains. */
    px_evbuffer_drain_wiped(s.buf, 30);
    const uint8_t *p = px_evbuffer_pullup_wiped(s.buf, 100);
    assert_non_null(p);
    assert_memory_equal(p, s.bytes + 30, 100);
    assert_holds(&s, 30);
    px_evbuffer_drain_wiped(s.buf, 100);
    assert_holds(&s, 130);
    for (size_t k = 0; k < s.nblocks; k++)
        assert_int_equal(s.blocks[k].dirty, 0);
    shape_free(&s);
}

static void test_random_shapes(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (int round = 0; round < 300; round++) {
        size_t piece[40];
        size_t npieces = 1 + (size_t)(rand_r(&seed) % 40), total = 0;
        for (size_t k = 0; k < npieces; k++) {
            piece[k] = 1 + (size_t)(rand_r(&seed) % (round % 2 ? 700 : 20));
            total += piece[k];
        }
        size_t n = 1 + (size_t)rand_r(&seed) % total;
        if (n > PH_H1_REQUEST_HEAD_MAX)
            n = PH_H1_REQUEST_HEAD_MAX;
        pullup_case(piece, npieces, n);
        drain_case(piece, npieces, (size_t)rand_r(&seed) % (total + 5));
    }
}

/* A chunked body of body_len bytes (chunks of chunk bytes, one with an
 * extension), then a pipelined head holding a grant, cut into pieces of
 * the given lengths (the last piece takes the rest). */
static const char PIPELINED[] = "GET http://ok.example/next HTTP/1.1\r\nHost: ok.example\r\n"
                                "Proxy-Authorization: Bearer v1.SECRET-SECRET-SECRET\r\n\r\n";

/* A whole chunked body of in decoded into out, call after call as
 * forward.c pumps it: its data bytes. */
static uint64_t decode_all(struct evbuffer *in, struct evbuffer *out, bool chunked_out)
{
    ph_h1_chunked st;
    ph_h1_chunked_init(&st);
    uint64_t count = 0;
    int r = 0;
    for (int calls = 0; r == 0 && calls < 1000; calls++)
        r = px_h1_rechunk(in, out, &st, chunked_out, &count);
    assert_int_equal(r, 1);
    return count;
}

static void rechunk_case(size_t body_len, size_t chunk, const size_t *cut, size_t ncut,
                         bool chunked_out)
{
    uint8_t *body = malloc(body_len + 1);
    assert_non_null(body);
    for (size_t i = 0; i < body_len; i++)
        body[i] = (uint8_t)('a' + i % 26);
    struct evbuffer *wire = evbuffer_new();
    for (size_t at = 0; at < body_len; at += chunk) {
        size_t n = body_len - at < chunk ? body_len - at : chunk;
        evbuffer_add_printf(wire, at == 0 ? "%zx;ext=1\r\n" : "%zx\r\n", n);
        evbuffer_add(wire, body + at, n);
        evbuffer_add(wire, "\r\n", 2);
    }
    static const char last[] = "0\r\nX-Trailer: 1\r\n\r\n";
    evbuffer_add(wire, last, sizeof last - 1);
    size_t body_wire = evbuffer_get_length(wire);
    evbuffer_add(wire, PIPELINED, sizeof PIPELINED - 1);
    size_t total = evbuffer_get_length(wire);
    const uint8_t *flat = evbuffer_pullup(wire, -1);

    /* The wire in chains of the pieces' lengths, as shape_make makes them. */
    size_t piece[BLOCKS_MAX], npieces = 0, at = 0;
    for (size_t i = 0; i < ncut && at + cut[i] < total; i++) {
        piece[npieces++] = cut[i];
        at += cut[i];
    }
    piece[npieces++] = total - at;
    shape s;
    shape_make(&s, piece, npieces, flat);

    struct evbuffer *out = evbuffer_new();
    assert_int_equal(decode_all(s.buf, out, chunked_out), body_len);
    /* What follows the body is left, whole and in place. */
    assert_int_equal(evbuffer_get_length(s.buf), total - body_wire);
    uint8_t rest[sizeof PIPELINED];
    evbuffer_copyout(s.buf, rest, sizeof PIPELINED - 1);
    assert_memory_equal(rest, PIPELINED, sizeof PIPELINED - 1);
    /* No chain let go held a byte after the body: a block is released only
     * once the body's bytes used it up. */
    at = 0;
    for (size_t k = 0, blk = 0; k < npieces; k++) {
        if (k % 2 == 0) {
            if (s.blocks[blk].released && at + piece[k] > body_wire)
                print_message("# a chain of bytes %zu..%zu let go unwiped; the body ends at "
                              "%zu, a request with its grant follows\n", at, at + piece[k],
                              body_wire);
            assert_false(s.blocks[blk].released && at + piece[k] > body_wire);
            blk++;
        }
        at += piece[k];
    }
    if (!chunked_out) {
        assert_int_equal(evbuffer_get_length(out), body_len);
        assert_memory_equal(evbuffer_pullup(out, -1), body, body_len);
    } else {
        /* Chunked again: decoded, it is the body. */
        struct evbuffer *plain = evbuffer_new();
        assert_int_equal(decode_all(out, plain, false), body_len);
        assert_memory_equal(evbuffer_pullup(plain, -1), body, body_len);
        evbuffer_free(plain);
    }
    evbuffer_free(out);
    shape_free(&s);
    evbuffer_free(wire);
    free(body);
}

static void test_rechunk_leaves_what_follows_in_place(void **state)
{
    (void)state;
    /* The body's tail and the pipelined head in one chain, behind chains of
     * the body (the shape reads spanning chains make). */
    const size_t three[] = { 2000, 1500 };
    rechunk_case(5000, 1000, three, 2, false);
    rechunk_case(5000, 1000, three, 2, true);
    /* Size lines, data and the trailer cut at every few bytes. */
    size_t small[BLOCKS_MAX - 1];
    for (size_t i = 0; i < BLOCKS_MAX - 1; i++)
        small[i] = 1 + i % 7;
    rechunk_case(900, 100, small, BLOCKS_MAX - 1, false);
    rechunk_case(900, 100, small, BLOCKS_MAX - 1, true);
    /* More than one call's batch. */
    const size_t big[] = { 40000, 40000, 40000, 100 };
    rechunk_case(150000, 9000, big, 4, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_small_chains),
        cmocka_unit_test(test_head_in_one_chain_then_pipelined),
        cmocka_unit_test(test_misaligned_first_chain),
        cmocka_unit_test(test_random_shapes),
        cmocka_unit_test(test_rechunk_leaves_what_follows_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
