/* alloc_count.h - heap allocations counted in a unit test's own binary:
 * alloc_count.c defines malloc, calloc, realloc and free, which the test,
 * libpinhole and the libraries beneath (OpenSSL, libevent) then call
 * instead of glibc's, each passed on to glibc's. Link alloc_count.c only
 * into the tests that count. Under a sanitizer, which owns malloc itself,
 * nothing is counted: PH_TEST_ALLOC_COUNTED is 0 and the counts stay 0. */
#ifndef PINHOLE_TEST_ALLOC_COUNT_H
#define PINHOLE_TEST_ALLOC_COUNT_H

#if defined(__SANITIZE_ADDRESS__)
#define PH_TEST_ALLOC_COUNTED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(thread_sanitizer)
#define PH_TEST_ALLOC_COUNTED 0
#endif
#endif
#ifndef PH_TEST_ALLOC_COUNTED
#define PH_TEST_ALLOC_COUNTED 1
#endif

/* Blocks allocated (malloc, calloc, realloc) and freed (free, and realloc
 * of a block) so far by every thread of the process. */
long ph_test_allocs(void);
long ph_test_frees(void);

#endif
