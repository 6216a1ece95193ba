/* test_grant_alloc.c - what verifying a grant costs the heap: after a
 * thread's first verification under a key (which keys a context it keeps),
 * each further one, allowed or refused, makes at most OpenSSL 3.0's own two
 * allocations (HMAC_Init_ex and HMAC_Final copy a SHA-256 state into a new
 * one) and frees everything it made. Counted by malloc, calloc, realloc and
 * free defined here, in the executable, which libpinhole and libcrypto call
 * instead of glibc's. A sanitizer build replaces the allocator itself: the
 * count is skipped there. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include "pinhole/grant.h"

#if defined(__SANITIZE_ADDRESS__)
#define PH_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PH_TEST_SANITIZED 1
#endif
#endif

#define NOW INT64_C(1800000000)
#define ROUNDS 200
/* OpenSSL 3.0's HMAC: two SHA-256 state copies per MAC. */
#define ALLOCS_PER_VERIFY_MAX 2

#ifndef PH_TEST_SANITIZED
static long allocs, frees;

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

void *malloc(size_t n)
{
    allocs++;
    return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    allocs++;
    return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
    allocs++;
    if (p != NULL)
        frees++; /* the old block goes (or stays, counted as a new one) */
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p != NULL)
        frees++;
    __libc_free(p);
}

static const uint8_t KEY_A[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t KEY_B[32] = {99, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                  17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static void test_verify_allocates_only_openssls_copies(void **state)
{
    (void)state;
    /* Two keys (a rotation): tokens of each, alternated. */
    ph_keyring *kr = NULL;
    assert_int_equal(ph_keyring_new(&kr, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(kr, "new", KEY_B, 32, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(kr, "old", KEY_A, 32, NULL), PH_OK);
    ph_grant g;
    memset(&g, 0, sizeof g);
    strcpy(g.tenant, "tenant-7");
    strcpy(g.lease, "lease.42");
    strcpy(g.list, "default");
    g.not_before = NOW - 10;
    g.expires = NOW + 600;
    char tok[2][PH_GRANT_TOKEN_MAX + 1], forged[PH_GRANT_TOKEN_MAX + 1];
    size_t n[2];
    assert_int_equal(ph_grant_issue(kr, "new", &g, tok[0], sizeof tok[0], &n[0], NULL), PH_OK);
    assert_int_equal(ph_grant_issue(kr, "old", &g, tok[1], sizeof tok[1], &n[1], NULL), PH_OK);
    memcpy(forged, tok[0], n[0] + 1);
    forged[n[0] - 1] = forged[n[0] - 1] == 'A' ? 'Q' : 'A'; /* the MAC's last character */

    ph_reason r;
    ph_grant out;
    /* The first verification under each key: counted apart. */
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ph_grant_verify(kr, tok[k], n[k], NOW, "default", &out, &r, NULL), PH_OK);
        assert_int_equal(r, PH_REASON_ALLOWED);
    }
    long a0 = allocs, f0 = frees;
    for (int i = 0; i < ROUNDS; i++) {
        int k = i % 2;
        assert_int_equal(ph_grant_verify(kr, tok[k], n[k], NOW, "default", &out, &r, NULL), PH_OK);
        assert_int_equal(r, PH_REASON_ALLOWED);
        assert_string_equal(out.kid, k == 0 ? "new" : "old");
        assert_int_equal(ph_grant_verify(kr, forged, n[0], NOW, "default", NULL, &r, NULL),
                         PH_E_DENIED);
        assert_int_equal(r, PH_REASON_GRANT_INVALID);
    }
    long made = allocs - a0, freed = frees - f0;
    print_message("# %ld allocations, %ld frees over %d verifications\n", made, freed,
                  2 * ROUNDS);
    assert_true(made <= (long)ALLOCS_PER_VERIFY_MAX * 2 * ROUNDS);
    assert_int_equal(freed, made);
    ph_keyring_free(&kr);
}
#else
static void test_verify_allocates_only_openssls_copies(void **state)
{
    (void)state;
    skip(); /* the sanitizer's allocator, not ours */
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_allocates_only_openssls_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
