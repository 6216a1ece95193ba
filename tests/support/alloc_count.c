/* alloc_count.c - the heap allocations of a unit test's process
 * (alloc_count.h). Relaxed atomics: a test may count across threads. */
#include "alloc_count.h"

#include <stdatomic.h>
#include <stddef.h>

static atomic_long allocs, frees;

#if PH_TEST_ALLOC_COUNTED
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

void *malloc(size_t n);
void *calloc(size_t k, size_t n);
void *realloc(void *p, size_t n);
void free(void *p);

void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
    if (p != NULL)
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    if (p != NULL)
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    __libc_free(p);
}
#endif

long ph_test_allocs(void)
{
    return atomic_load_explicit(&allocs, memory_order_relaxed);
}

long ph_test_frees(void)
{
    return atomic_load_explicit(&frees, memory_order_relaxed);
}
