/* test_grant.c - grant tokens: round trip, every forgery the verifier must
 * refuse (flipped bytes, wrong key, other key id, truncation, times, list,
 * non-canonical base64, oversize), the verifier's per-thread keyed contexts
 * (keys changed under a kid, more keys than contexts, threads sharing a
 * keyring, the allocations left, a replaced keyring's keys dropped from
 * every thread's contexts, keyrings and threads coming and going at once,
 * a fork while another thread verifies), and the Proxy-Authorization
 * transports. */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_count.h"
#include "grant-int.h"
#include "grant_keyring-int.h"
#include "pinhole/grant.h"

#define NOW INT64_C(1800000000)

static const uint8_t KEY_A[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t KEY_B[32] = {99, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static ph_keyring *ring(const char *kid, const uint8_t *key)
{
    ph_keyring *kr = NULL;
    assert_int_equal(ph_keyring_new(&kr, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(kr, kid, key, 32, NULL), PH_OK);
    return kr;
}

static ph_grant sample(void)
{
    ph_grant g;
    memset(&g, 0, sizeof g);
    strcpy(g.tenant, "tenant-7");
    strcpy(g.lease, "lease.42");
    strcpy(g.list, "default");
    g.not_before = NOW - 10;
    g.expires = NOW + 600;
    return g;
}

static size_t issue(const ph_keyring *kr, const ph_grant *g, char *tok)
{
    size_t n = 0;
    assert_int_equal(ph_grant_issue(kr, NULL, g, tok, PH_GRANT_TOKEN_MAX + 1, &n, NULL), PH_OK);
    assert_int_equal(strlen(tok), n);
    return n;
}

static ph_reason verify(const ph_keyring *kr, const char *tok, size_t n, int64_t now,
                        const char *list)
{
    ph_reason r = PH_REASON_ALLOWED;
    ph_status st = ph_grant_verify(kr, tok, n, now, list, NULL, &r, NULL);
    assert_int_equal(st, r == PH_REASON_ALLOWED ? PH_OK : PH_E_DENIED);
    return r;
}

static void test_round_trip(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample(), out;
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    assert_memory_equal(tok, "v1.k1.", 6);
    ph_reason r;
    assert_int_equal(ph_grant_verify(kr, tok, n, NOW, "default", &out, &r, NULL), PH_OK);
    assert_int_equal(r, PH_REASON_ALLOWED);
    assert_string_equal(out.kid, "k1");
    assert_string_equal(out.tenant, "tenant-7");
    assert_string_equal(out.lease, "lease.42");
    assert_string_equal(out.list, "default");
    assert_int_equal(out.not_before, g.not_before);
    assert_int_equal(out.expires, g.expires);
    /* Issuing is deterministic: same inputs, same token. */
    char tok2[PH_GRANT_TOKEN_MAX + 1];
    issue(kr, &g, tok2);
    assert_string_equal(tok, tok2);
    ph_keyring_free(&kr);
    assert_null(kr);
}

static void test_every_flipped_byte_is_refused(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    for (size_t i = 0; i < n; i++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            char t[PH_GRANT_TOKEN_MAX + 1];
            memcpy(t, tok, n + 1);
            t[i] = (char)(t[i] ^ (1u << bit));
            ph_reason r = verify(kr, t, n, NOW, NULL);
            if (r != PH_REASON_GRANT_INVALID)
                fail_msg("flipping bit %u of byte %zu gave %s", bit, i, ph_reason_code(r));
        }
    }
    ph_keyring_free(&kr);
}

static void test_wrong_key_and_other_kid(void **state)
{
    (void)state;
    ph_keyring *a = ring("k1", KEY_A);
    ph_keyring *b = ring("k1", KEY_B);  /* same id, other key */
    ph_keyring *c = ring("k2", KEY_A);  /* same key, other id */
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(a, &g, tok);
    assert_int_equal(verify(b, tok, n, NOW, NULL), PH_REASON_GRANT_INVALID);
    assert_int_equal(verify(c, tok, n, NOW, NULL), PH_REASON_GRANT_INVALID);
    /* Relabelling the kid with a key the verifier has does not help: the kid
     * is under the MAC. */
    char t[PH_GRANT_TOKEN_MAX + 1];
    snprintf(t, sizeof t, "v1.k2.%s", tok + 6);
    assert_int_equal(verify(c, t, strlen(t), NOW, NULL), PH_REASON_GRANT_INVALID);
    ph_keyring_free(&a);
    ph_keyring_free(&b);
    ph_keyring_free(&c);
}

static void test_rotation_keeps_old_tokens_valid(void **state)
{
    (void)state;
    ph_keyring *old = ring("k1", KEY_A);
    ph_keyring *rotated = ring("k2", KEY_B);
    assert_int_equal(ph_keyring_add(rotated, "k1", KEY_A, 32, NULL), PH_OK);
    assert_string_equal(ph_keyring_signing_kid(rotated), "k2");
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(old, &g, tok);
    assert_int_equal(verify(rotated, tok, n, NOW, NULL), PH_REASON_ALLOWED);
    n = issue(rotated, &g, tok);
    assert_memory_equal(tok, "v1.k2.", 6);
    assert_int_equal(verify(rotated, tok, n, NOW, NULL), PH_REASON_ALLOWED);
    assert_int_equal(verify(old, tok, n, NOW, NULL), PH_REASON_GRANT_INVALID);
    /* Explicit kid. */
    assert_int_equal(ph_grant_issue(rotated, "k1", &g, tok, sizeof tok, &n, NULL), PH_OK);
    assert_int_equal(verify(old, tok, n, NOW, NULL), PH_REASON_ALLOWED);
    assert_int_equal(ph_grant_issue(rotated, "k9", &g, tok, sizeof tok, &n, NULL), PH_E_INVAL);
    ph_keyring_free(&old);
    ph_keyring_free(&rotated);
}

/* A verifier keeps keyed contexts per thread, found by the key's bytes:
 * a kid that names another key in the next keyring (a keyring freed and
 * another made, perhaps at the same address) must not verify with the
 * context of the key it named before. */
static void test_same_kid_other_key_after_reload(void **state)
{
    (void)state;
    ph_grant g = sample();
    char tok_a[PH_GRANT_TOKEN_MAX + 1], tok_b[PH_GRANT_TOKEN_MAX + 1];
    for (int round = 0; round < 3; round++) {
        ph_keyring *a = ring("k1", KEY_A);
        size_t na = issue(a, &g, tok_a);
        assert_int_equal(verify(a, tok_a, na, NOW, NULL), PH_REASON_ALLOWED);
        ph_keyring_free(&a);
        ph_keyring *b = ring("k1", KEY_B);
        assert_int_equal(verify(b, tok_a, na, NOW, NULL), PH_REASON_GRANT_INVALID);
        size_t nb = issue(b, &g, tok_b);
        assert_int_equal(verify(b, tok_b, nb, NOW, NULL), PH_REASON_ALLOWED);
        ph_keyring_free(&b);
        a = ring("k1", KEY_A);
        assert_int_equal(verify(a, tok_b, nb, NOW, NULL), PH_REASON_GRANT_INVALID);
        assert_int_equal(verify(a, tok_a, na, NOW, NULL), PH_REASON_ALLOWED);
        ph_keyring_free(&a);
    }
}

/* More keys than a thread keeps keyed contexts for, in turn: each token
 * verifies under its own key and no other. */
static void test_many_keys_in_turn(void **state)
{
    (void)state;
    enum { KEYS = 9 };
    ph_keyring *kr = NULL;
    assert_int_equal(ph_keyring_new(&kr, NULL), PH_OK);
    char tok[KEYS][PH_GRANT_TOKEN_MAX + 1];
    size_t n[KEYS];
    ph_grant g = sample();
    for (int k = 0; k < KEYS; k++) {
        uint8_t key[32];
        memcpy(key, KEY_A, sizeof key);
        key[5] = (uint8_t)(100 + k);
        char kid[8];
        snprintf(kid, sizeof kid, "k%d", k);
        assert_int_equal(ph_keyring_add(kr, kid, key, sizeof key, NULL), PH_OK);
        assert_int_equal(ph_grant_issue(kr, kid, &g, tok[k], sizeof tok[k], &n[k], NULL), PH_OK);
    }
    for (int i = 0; i < 5 * KEYS; i++) {
        int k = (i * 4) % KEYS;
        assert_int_equal(verify(kr, tok[k], n[k], NOW, NULL), PH_REASON_ALLOWED);
        /* The MAC of another key's token under this kid: refused. */
        char mixed[PH_GRANT_TOKEN_MAX + 1];
        int o = (k + 1) % KEYS;
        const char *mac_k = strrchr(tok[k], '.'), *mac_o = strrchr(tok[o], '.');
        size_t head = (size_t)(mac_k - tok[k]);
        memcpy(mixed, tok[k], head);
        strcpy(mixed + head, mac_o);
        assert_int_equal(verify(kr, mixed, strlen(mixed), NOW, NULL), PH_REASON_GRANT_INVALID);
    }
    ph_keyring_free(&kr);
}

/* Worker threads share one keyring (the proxy's): each verifies its own
 * stream of tokens under two keys at once, and every verdict is right. */
typedef struct verify_job {
    const ph_keyring *kr;
    const char *tok[2];
    size_t n[2];
    const char *forged;
    int wrong;
} verify_job;

static void *verify_many(void *arg)
{
    verify_job *j = arg;
    for (int i = 0; i < 2000; i++) {
        int k = i % 2;
        ph_reason r = PH_REASON_ALLOWED;
        if (ph_grant_verify(j->kr, j->tok[k], j->n[k], NOW, "default", NULL, &r, NULL) != PH_OK ||
            r != PH_REASON_ALLOWED)
            j->wrong++;
        if (ph_grant_verify(j->kr, j->forged, j->n[0], NOW, "default", NULL, &r, NULL) !=
                PH_E_DENIED ||
            r != PH_REASON_GRANT_INVALID)
            j->wrong++;
    }
    return NULL;
}

static void test_threads_share_a_keyring(void **state)
{
    (void)state;
    enum { THREADS = 4 };
    ph_keyring *kr = ring("new", KEY_B);
    assert_int_equal(ph_keyring_add(kr, "old", KEY_A, 32, NULL), PH_OK);
    ph_grant g = sample();
    char t0[PH_GRANT_TOKEN_MAX + 1], t1[PH_GRANT_TOKEN_MAX + 1], forged[PH_GRANT_TOKEN_MAX + 1];
    size_t n0 = 0, n1 = 0;
    assert_int_equal(ph_grant_issue(kr, "new", &g, t0, sizeof t0, &n0, NULL), PH_OK);
    assert_int_equal(ph_grant_issue(kr, "old", &g, t1, sizeof t1, &n1, NULL), PH_OK);
    memcpy(forged, t0, n0 + 1);
    forged[n0 - 1] = forged[n0 - 1] == 'A' ? 'Q' : 'A';
    verify_job jobs[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (verify_job){ kr, { t0, t1 }, { n0, n1 }, forged, 0 };
        assert_int_equal(pthread_create(&th[i], NULL, verify_many, &jobs[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(jobs[i].wrong, 0);
    }
    ph_keyring_free(&kr);
}

/* What verifying costs the heap: after a thread's first verification under
 * a key (which keys a context the thread keeps), each further one, allowed
 * or refused, makes at most OpenSSL 3.0's own two allocations (HMAC_Init_ex
 * and HMAC_Final copy a SHA-256 state into a new one) and frees all it
 * made. Counted in this binary (alloc_count.h); skipped under a sanitizer. */
#define ALLOCS_PER_VERIFY_MAX 2

static void test_verify_allocates_only_openssls_copies(void **state)
{
    (void)state;
    if (!PH_TEST_ALLOC_COUNTED)
        skip();
    /* Two keys (a rotation): tokens of each, alternated, and a forgery. */
    ph_keyring *kr = ring("new", KEY_B);
    assert_int_equal(ph_keyring_add(kr, "old", KEY_A, 32, NULL), PH_OK);
    ph_grant g = sample(), out;
    char tok[2][PH_GRANT_TOKEN_MAX + 1], forged[PH_GRANT_TOKEN_MAX + 1];
    size_t n[2];
    assert_int_equal(ph_grant_issue(kr, "new", &g, tok[0], sizeof tok[0], &n[0], NULL), PH_OK);
    assert_int_equal(ph_grant_issue(kr, "old", &g, tok[1], sizeof tok[1], &n[1], NULL), PH_OK);
    memcpy(forged, tok[0], n[0] + 1);
    forged[n[0] - 1] = forged[n[0] - 1] == 'A' ? 'Q' : 'A'; /* the MAC's last character */
    ph_reason r;
    /* The first verification under each key: not counted. */
    for (int k = 0; k < 2; k++)
        assert_int_equal(verify(kr, tok[k], n[k], NOW, "default"), PH_REASON_ALLOWED);
    enum { ROUNDS = 200 };
    long a0 = ph_test_allocs(), f0 = ph_test_frees();
    for (int i = 0; i < ROUNDS; i++) {
        int k = i % 2;
        assert_int_equal(ph_grant_verify(kr, tok[k], n[k], NOW, "default", &out, &r, NULL), PH_OK);
        assert_string_equal(out.kid, k == 0 ? "new" : "old");
        assert_int_equal(verify(kr, forged, n[0], NOW, "default"), PH_REASON_GRANT_INVALID);
    }
    long made = ph_test_allocs() - a0, freed = ph_test_frees() - f0;
    print_message("# %ld allocations, %ld frees over %d verifications\n", made, freed,
                  2 * ROUNDS);
    assert_true(made <= (long)ALLOCS_PER_VERIFY_MAX * 2 * ROUNDS);
    assert_int_equal(freed, made);
    ph_keyring_free(&kr);
}

/* A keyring replaced (a reload rotating its keys) takes its keys out of
 * every thread's keyed contexts when it is freed: neither the thread that
 * frees it nor another that verified under it and lives on keeps a context
 * (or a copy) of a key of a keyring gone; each verifies under the next
 * keyring as before. */
typedef struct cache_peer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;                  /* 1: verified under kr; 2: kr replaced; 3: done */
    const ph_keyring *kr;       /* the keyring of the stage */
    const char *tok;
    size_t n;
    ph_reason r1, r2;
    size_t cached_a;            /* KEY_A's contexts of the thread, after the replacement */
} cache_peer;

static void peer_stage(cache_peer *p, int stage)
{
    pthread_mutex_lock(&p->mu);
    p->stage = stage;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void peer_wait(cache_peer *p, int stage)
{
    pthread_mutex_lock(&p->mu);
    while (p->stage < stage)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void *cache_peer_run(void *arg)
{
    cache_peer *p = arg;
    (void)ph_grant_verify(p->kr, p->tok, p->n, NOW, NULL, NULL, &p->r1, NULL);
    peer_stage(p, 1);
    peer_wait(p, 2);
    p->cached_a = ph_grant_mac_cached(KEY_A, 32);
    (void)ph_grant_verify(p->kr, p->tok, p->n, NOW, NULL, NULL, &p->r2, NULL);
    peer_stage(p, 3);
    return NULL;
}

static void test_replaced_keyring_leaves_no_keyed_context(void **state)
{
    (void)state;
    ph_keyring *old = ring("k1", KEY_A);
    ph_keyring *next = ring("k2", KEY_B);
    assert_int_equal(ph_keyring_add(next, "k1", KEY_A, 32, NULL), PH_OK);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(old, &g, tok);
    cache_peer p = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
                     .kr = old, .tok = tok, .n = n };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cache_peer_run, &p), 0);
    assert_int_equal(verify(old, tok, n, NOW, NULL), PH_REASON_ALLOWED);
    peer_wait(&p, 1);
    assert_int_equal(p.r1, PH_REASON_ALLOWED);
    assert_int_equal(ph_grant_mac_cached(KEY_A, 32), 1);
    /* The next keyring holds KEY_A too (k1 kept through a rotation): its
     * contexts are the next keyring's own, made anew. */
    ph_keyring_free(&old);
    size_t left = ph_grant_mac_cached(KEY_A, 32);
    p.kr = next;
    peer_stage(&p, 2);
    peer_wait(&p, 3);
    assert_int_equal(pthread_join(th, NULL), 0);
    print_message("# after the replacement: %zu context(s) of the old key here, %zu in the "
                  "other thread\n", left, p.cached_a);
    assert_int_equal(left, 0);
    assert_int_equal(p.cached_a, 0);
    assert_int_equal(p.r2, PH_REASON_ALLOWED);
    assert_int_equal(verify(next, tok, n, NOW, NULL), PH_REASON_ALLOWED);
    ph_keyring_free(&next);
    assert_int_equal(ph_grant_mac_cached(KEY_A, 32), 0);
    assert_int_equal(ph_grant_mac_cached(KEY_B, 32), 0);
}

/* Keyrings made and freed while threads verify under them, and threads
 * that start, verify and exit meanwhile: the caches' list (a thread's exit
 * unlisting its cache, ph_keyring_free walking every cache) under
 * contention. A keyring is held as a snapshot holds it (a count under a
 * lock; whoever drops the last frees it, a worker as often as the
 * reloader). Every verification must be right; the sanitized builds (ASan,
 * and TSan built ad hoc) see the races. */
typedef struct held_ring {
    ph_keyring *kr;
    int refs;
    char tok[PH_GRANT_TOKEN_MAX + 1]; /* signed by its own key (kid "own") */
    size_t n;
} held_ring;

typedef struct churn {
    pthread_mutex_t mu;
    held_ring *cur;
    const char *tok_a; /* signed by KEY_A ("k1", in every keyring) */
    size_t n_a;
    int stop;
    int wrong;
} churn;

static held_ring *churn_acquire(churn *c)
{
    pthread_mutex_lock(&c->mu);
    held_ring *h = c->cur;
    h->refs++;
    pthread_mutex_unlock(&c->mu);
    return h;
}

static void churn_release(churn *c, held_ring *h)
{
    pthread_mutex_lock(&c->mu);
    int left = --h->refs;
    pthread_mutex_unlock(&c->mu);
    if (left == 0) {
        ph_keyring_free(&h->kr);
        free(h);
    }
}

static void churn_verify(churn *c)
{
    held_ring *h = churn_acquire(c);
    ph_reason r = PH_REASON_ALLOWED;
    int bad = ph_grant_verify(h->kr, c->tok_a, c->n_a, NOW, NULL, NULL, &r, NULL) != PH_OK ||
              ph_grant_verify(h->kr, h->tok, h->n, NOW, NULL, NULL, &r, NULL) != PH_OK;
    churn_release(c, h);
    if (bad) {
        pthread_mutex_lock(&c->mu);
        c->wrong++;
        pthread_mutex_unlock(&c->mu);
    }
}

static int churn_stopped(churn *c)
{
    pthread_mutex_lock(&c->mu);
    int stop = c->stop;
    pthread_mutex_unlock(&c->mu);
    return stop;
}

static void *churn_worker(void *arg)
{
    churn *c = arg;
    while (!churn_stopped(c))
        churn_verify(c);
    return NULL;
}

static void *churn_short_lived(void *arg)
{
    churn_verify(arg);
    return NULL;
}

static void *churn_spawner(void *arg)
{
    churn *c = arg;
    while (!churn_stopped(c)) {
        pthread_t th[4];
        int made = 0;
        for (int i = 0; i < 4; i++)
            made += pthread_create(&th[made], NULL, churn_short_lived, c) == 0;
        for (int i = 0; i < made; i++)
            pthread_join(th[i], NULL);
    }
    return NULL;
}

/* A keyring of KEY_A ("k1") and a key of its own that signs ("own"). */
static held_ring *churn_ring(int i)
{
    uint8_t own[32];
    memcpy(own, KEY_B, sizeof own);
    memcpy(own, &i, sizeof i);
    held_ring *h = calloc(1, sizeof *h);
    assert_non_null(h);
    h->kr = ring("own", own);
    assert_int_equal(ph_keyring_add(h->kr, "k1", KEY_A, 32, NULL), PH_OK);
    ph_grant g = sample();
    h->n = issue(h->kr, &g, h->tok);
    h->refs = 1;
    return h;
}

static void test_keyrings_come_and_go_under_threads(void **state)
{
    (void)state;
    enum { WORKERS = 4, RELOADS = 400 };
    ph_keyring *a = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok_a[PH_GRANT_TOKEN_MAX + 1];
    churn c = { .mu = PTHREAD_MUTEX_INITIALIZER, .tok_a = tok_a };
    c.n_a = issue(a, &g, tok_a);
    c.cur = churn_ring(0);
    pthread_t th[WORKERS + 1];
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn_worker, &c), 0);
    assert_int_equal(pthread_create(&th[WORKERS], NULL, churn_spawner, &c), 0);
    for (int i = 1; i <= RELOADS; i++) {
        held_ring *next = churn_ring(i);
        pthread_mutex_lock(&c.mu);
        held_ring *old = c.cur;
        c.cur = next;
        pthread_mutex_unlock(&c.mu);
        churn_release(&c, old);
        churn_verify(&c);
    }
    pthread_mutex_lock(&c.mu);
    c.stop = 1;
    pthread_mutex_unlock(&c.mu);
    for (int i = 0; i <= WORKERS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(c.wrong, 0);
    churn_release(&c, c.cur);
    ph_keyring_free(&a);
    assert_int_equal(ph_grant_mac_cached(KEY_A, 32), 0);
}

/* fork(2) while another thread verifies: the child (one thread, the
 * forking one) frees the keyring, which reaches every cache, the other
 * thread's too, whose lock that thread may have held at the fork. The
 * child must end; alarm(2) only ends one that hangs so that the test can
 * say so. */
typedef struct fork_peer {
    const ph_keyring *kr;
    const char *tok;
    size_t n;
    atomic_int stop;
    atomic_int rounds;
} fork_peer;

static void *fork_peer_run(void *arg)
{
    fork_peer *p = arg;
    while (!atomic_load(&p->stop)) {
        ph_reason r;
        (void)ph_grant_verify(p->kr, p->tok, p->n, NOW, NULL, NULL, &r, NULL);
        atomic_fetch_add(&p->rounds, 1);
    }
    return NULL;
}

static void test_fork_while_another_thread_verifies(void **state)
{
    (void)state;
    enum { FORKS = 200 };
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    fork_peer p = { .kr = kr, .tok = tok, .n = n };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fork_peer_run, &p), 0);
    while (atomic_load(&p.rounds) == 0)
        sched_yield(); /* its cache exists */
    int hung = 0, done = 0, status = 0;
    for (; done < FORKS && hung == 0; done++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(10);
            ph_reason r;
            ph_status st = ph_grant_verify(kr, tok, n, NOW, NULL, NULL, &r, NULL);
            ph_keyring_free(&kr);
            _exit(st == PH_OK ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        hung = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    atomic_store(&p.stop, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    print_message("# %d fork(s), %s (status 0x%x)\n", done,
                  hung ? "the last child hung (SIGALRM) or failed" : "every child ended", status);
    assert_int_equal(hung, 0);
    ph_keyring_free(&kr);
}

static void test_truncated_and_extended(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    assert_int_equal(verify(kr, tok, 0, NOW, NULL), PH_REASON_NO_GRANT);
    for (size_t i = 1; i < n; i++)
        assert_int_equal(verify(kr, tok, i, NOW, NULL), PH_REASON_GRANT_INVALID);
    char t[PH_GRANT_TOKEN_MAX + 8];
    const char *suffixes[] = {"A", ".", "=", "==", " ", "\n", ".x"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        snprintf(t, sizeof t, "%s%s", tok, suffixes[i]);
        assert_int_equal(verify(kr, t, strlen(t), NOW, NULL), PH_REASON_GRANT_INVALID);
    }
    ph_keyring_free(&kr);
}

static void test_times(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    const int64_t skew = PH_GRANT_CLOCK_SKEW_SECONDS;
    assert_int_equal(verify(kr, tok, n, g.expires - 1, NULL), PH_REASON_ALLOWED);
    assert_int_equal(verify(kr, tok, n, g.expires + skew - 1, NULL), PH_REASON_ALLOWED);
    assert_int_equal(verify(kr, tok, n, g.expires + skew, NULL), PH_REASON_GRANT_EXPIRED);
    assert_int_equal(verify(kr, tok, n, INT64_MAX, NULL), PH_REASON_GRANT_EXPIRED);
    assert_int_equal(verify(kr, tok, n, g.not_before - skew, NULL), PH_REASON_ALLOWED);
    assert_int_equal(verify(kr, tok, n, g.not_before - skew - 1, NULL), PH_REASON_GRANT_INVALID);
    assert_int_equal(verify(kr, tok, n, INT64_MIN, NULL), PH_REASON_GRANT_INVALID);
    /* Issuing refuses times out of order or out of range. */
    g.expires = g.not_before;
    assert_int_equal(ph_grant_issue(kr, NULL, &g, tok, sizeof tok, NULL, NULL), PH_E_INVAL);
    g = sample();
    g.not_before = -1;
    assert_int_equal(ph_grant_issue(kr, NULL, &g, tok, sizeof tok, NULL, NULL), PH_E_INVAL);
    g = sample();
    g.expires = PH_GRANT_TIME_MAX + 1;
    assert_int_equal(ph_grant_issue(kr, NULL, &g, tok, sizeof tok, NULL, NULL), PH_E_INVAL);
    ph_keyring_free(&kr);
}

static void test_wrong_list(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    assert_int_equal(verify(kr, tok, n, NOW, "default"), PH_REASON_ALLOWED);
    assert_int_equal(verify(kr, tok, n, NOW, "other"), PH_REASON_GRANT_INVALID);
    assert_int_equal(verify(kr, tok, n, NOW, "defaul"), PH_REASON_GRANT_INVALID);
    assert_int_equal(verify(kr, tok, n, NOW, "default2"), PH_REASON_GRANT_INVALID);
    assert_int_equal(verify(kr, tok, n, NOW, ""), PH_REASON_GRANT_INVALID);
    ph_keyring_free(&kr);
}

static void test_non_canonical_base64_is_refused(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = issue(kr, &g, tok);
    /* The MAC's last character carries 4 unused bits (43 chars for 32
     * bytes): every other spelling with the same decoded bytes is refused. */
    const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int accepted = 0;
    for (const char *c = alpha; *c; c++) {
        char t[PH_GRANT_TOKEN_MAX + 1];
        memcpy(t, tok, n + 1);
        t[n - 1] = *c;
        if (verify(kr, t, n, NOW, NULL) == PH_REASON_ALLOWED)
            accepted++;
    }
    assert_int_equal(accepted, 1);
    /* Standard-alphabet and padded forms. */
    uint8_t out[8];
    size_t on;
    assert_true(ph_b64_decode("-_8", 3, PH_B64_URL_NOPAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("+/8", 3, PH_B64_URL_NOPAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("-_8=", 4, PH_B64_URL_NOPAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("-_9", 3, PH_B64_URL_NOPAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("A", 1, PH_B64_URL_NOPAD, out, sizeof out, &on));
    assert_true(ph_b64_decode("YQ==", 4, PH_B64_STD_PAD, out, sizeof out, &on));
    assert_int_equal(on, 1);
    assert_false(ph_b64_decode("YR==", 4, PH_B64_STD_PAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("YQ", 2, PH_B64_STD_PAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("YQ=A", 4, PH_B64_STD_PAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("Y===", 4, PH_B64_STD_PAD, out, sizeof out, &on));
    assert_false(ph_b64_decode("YQ =", 4, PH_B64_STD_PAD, out, sizeof out, &on));
    ph_keyring_free(&kr);
}

static void test_oversized_and_malformed(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    char big[PH_GRANT_TOKEN_MAX + 2];
    memset(big, 'A', sizeof big);
    memcpy(big, "v1.k1.", 6);
    assert_int_equal(verify(kr, big, sizeof big, NOW, NULL), PH_REASON_GRANT_INVALID);
    const char *bad[] = {"v2.k1.AAAA.AAAA", "v1..AAAA.AAAA", "v1.k1", "v1.k1.AAAA",
                         "v1.k.1.AAAA.AAAA", "V1.k1.AAAA.AAAA", "v1.k1..", "\0v1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(verify(kr, bad[i], strlen(bad[i]) + (i == 7), NOW, NULL),
                         PH_REASON_GRANT_INVALID);
    /* Field limits on issue. */
    ph_grant g = sample();
    char tok[PH_GRANT_TOKEN_MAX + 1];
    memset(g.tenant, 'a', PH_GRANT_FIELD_MAX);
    g.tenant[PH_GRANT_FIELD_MAX] = '\0';
    memset(g.lease, 'b', PH_GRANT_FIELD_MAX);
    g.lease[PH_GRANT_FIELD_MAX] = '\0';
    memset(g.list, 'c', PH_GRANT_FIELD_MAX);
    g.list[PH_GRANT_FIELD_MAX] = '\0';
    size_t n = 0;
    assert_int_equal(ph_keyring_add(kr, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", KEY_B, 32, NULL),
                     PH_OK);
    assert_int_equal(ph_grant_issue(kr, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", &g, tok, sizeof tok,
                                    &n, NULL),
                     PH_OK);
    assert_true(n <= PH_GRANT_TOKEN_MAX);
    assert_int_equal(verify(kr, tok, n, NOW, NULL), PH_REASON_ALLOWED);
    assert_int_equal(ph_grant_issue(kr, NULL, &g, tok, 10, &n, NULL), PH_E_LIMIT);
    strcpy(g.lease, "a:b");
    assert_int_equal(ph_grant_issue(kr, NULL, &g, tok, sizeof tok, &n, NULL), PH_E_INVAL);
    strcpy(g.lease, "");
    assert_int_equal(ph_grant_issue(kr, NULL, &g, tok, sizeof tok, &n, NULL), PH_E_INVAL);
    ph_keyring_free(&kr);
}

static void test_keyring_rules(void **state)
{
    (void)state;
    ph_keyring *kr = NULL;
    uint8_t key[65] = {0};
    assert_int_equal(ph_keyring_new(&kr, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(kr, "k1", key, 31, NULL), PH_E_INVAL);
    assert_int_equal(ph_keyring_add(kr, "k1", key, 65, NULL), PH_E_INVAL);
    assert_int_equal(ph_keyring_add(kr, "k.1", key, 32, NULL), PH_E_INVAL);
    assert_int_equal(ph_keyring_add(kr, "", key, 32, NULL), PH_E_INVAL);
    assert_int_equal(ph_keyring_add(kr, "k1", key, 32, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(kr, "k1", key, 64, NULL), PH_E_INVAL);
    for (int i = 1; i < PH_GRANT_KEYS_MAX; i++) {
        char kid[8];
        snprintf(kid, sizeof kid, "x%d", i);
        assert_int_equal(ph_keyring_add(kr, kid, key, 32, NULL), PH_OK);
    }
    assert_int_equal(ph_keyring_add(kr, "last", key, 32, NULL), PH_E_LIMIT);
    ph_keyring_free(&kr);
    /* Key generation: right length, not all zero, two keys differ. */
    uint8_t a[32] = {0}, b[32] = {0}, zero[32] = {0};
    assert_int_equal(ph_grant_keygen(a, 32, NULL), PH_OK);
    assert_int_equal(ph_grant_keygen(b, 32, NULL), PH_OK);
    assert_memory_not_equal(a, zero, 32);
    assert_memory_not_equal(a, b, 32);
    assert_int_equal(ph_grant_keygen(a, 16, NULL), PH_E_INVAL);
}

static char *basic(const char *user_pass)
{
    static char out[1024];
    strcpy(out, "Basic ");
    ph_b64_encode((const uint8_t *)user_pass, strlen(user_pass), PH_B64_STD_PAD, out + 6,
                  sizeof out - 6);
    return out;
}

static void test_proxy_authorization(void **state)
{
    (void)state;
    ph_keyring *kr = ring("k1", KEY_A);
    ph_grant g = sample(), out;
    char tok[PH_GRANT_TOKEN_MAX + 1];
    issue(kr, &g, tok);
    char v[1024];
    ph_reason r;

    snprintf(v, sizeof v, "Bearer %s", tok);
    assert_int_equal(ph_grant_verify_proxy_authorization(kr, v, strlen(v), NOW, NULL, &out, &r,
                                                         NULL),
                     PH_OK);
    assert_string_equal(out.lease, "lease.42");
    snprintf(v, sizeof v, "bearer %s", tok);
    assert_int_equal(ph_grant_verify_proxy_authorization(kr, v, strlen(v), NOW, NULL, NULL, &r,
                                                         NULL),
                     PH_OK);

    char up[600];
    snprintf(up, sizeof up, "lease.42:%s", tok);
    const char *b = basic(up);
    assert_int_equal(ph_grant_verify_proxy_authorization(kr, b, strlen(b), NOW, "default", NULL,
                                                         &r, NULL),
                     PH_OK);
    /* The Basic user must be the grant's lease. */
    snprintf(up, sizeof up, "lease.43:%s", tok);
    b = basic(up);
    assert_int_equal(ph_grant_verify_proxy_authorization(kr, b, strlen(b), NOW, NULL, NULL, &r,
                                                         NULL),
                     PH_E_DENIED);
    assert_int_equal(r, PH_REASON_GRANT_INVALID);

    assert_int_equal(ph_grant_verify_proxy_authorization(kr, NULL, 0, NOW, NULL, NULL, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r, PH_REASON_NO_GRANT);

    snprintf(up, sizeof up, "lease.42:%s", tok);
    char padded[1024];
    snprintf(padded, sizeof padded, "%s", basic(up));
    const char *bad[] = {
        "Basic", "Basic ", "Bearer", "Bearer ", "Digest abc", "Basic  xxxx",
        "Basic bGVhc2U=",     /* "lease": no colon */
        "Basic OnRvaw==",     /* ":tok": empty lease */
        "Basic bGVhc2U6",     /* no padding */
        "Negotiate x", "Bearer a b", "Bearer\ttok",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(ph_grant_verify_proxy_authorization(kr, bad[i], strlen(bad[i]), NOW,
                                                             NULL, NULL, &r, NULL),
                         PH_E_DENIED);
        assert_int_equal(r, PH_REASON_GRANT_INVALID);
    }
    /* Trailing garbage after valid Basic credentials. */
    strcat(padded, " ");
    assert_int_equal(ph_grant_verify_proxy_authorization(kr, padded, strlen(padded), NOW, NULL,
                                                         NULL, &r, NULL),
                     PH_E_DENIED);
    ph_keyring_free(&kr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_flipped_byte_is_refused),
        cmocka_unit_test(test_wrong_key_and_other_kid),
        cmocka_unit_test(test_rotation_keeps_old_tokens_valid),
        cmocka_unit_test(test_same_kid_other_key_after_reload),
        cmocka_unit_test(test_many_keys_in_turn),
        cmocka_unit_test(test_threads_share_a_keyring),
        cmocka_unit_test(test_verify_allocates_only_openssls_copies),
        cmocka_unit_test(test_replaced_keyring_leaves_no_keyed_context),
        cmocka_unit_test(test_keyrings_come_and_go_under_threads),
        cmocka_unit_test(test_fork_while_another_thread_verifies),
        cmocka_unit_test(test_truncated_and_extended),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_wrong_list),
        cmocka_unit_test(test_non_canonical_base64_is_refused),
        cmocka_unit_test(test_oversized_and_malformed),
        cmocka_unit_test(test_keyring_rules),
        cmocka_unit_test(test_proxy_authorization),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
