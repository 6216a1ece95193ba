/* alloc_count.c - libbench_alloc_count.so, preloaded into a proxy by
 * bench_proxy to count the heap allocations it makes: malloc, calloc,
 * realloc, posix_memalign, aligned_alloc, memalign (glibc's own callers,
 * strdup or fopen, reach them too), each passed on to glibc's. At exit
 * (SIGTERM: the proxy's drain ends in exit) the counts go to the file
 * named by PH_ALLOC_COUNT_OUT, opened at load, before the proxy drops its
 * privileges: one line "allocs N frees M". Benchmarks only; never linked
 * into anything installed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t k, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static atomic_long allocs, frees;
static int out_fd = -1;

static void counted(void)
{
    atomic_fetch_add_explicit(&allocs, 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
    counted();
    return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    counted();
    return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
    counted();
    return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n)
{
    counted();
    return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    counted();
    return __libc_memalign(align, n);
}

int posix_memalign(void **p, size_t align, size_t n)
{
    counted();
    void *m = __libc_memalign(align, n);
    if (m == NULL)
        return 12; /* ENOMEM */
    *p = m;
    return 0;
}

void free(void *p)
{
    if (p != NULL)
        atomic_fetch_add_explicit(&frees, 1, memory_order_relaxed);
    __libc_free(p);
}

__attribute__((constructor)) static void open_out(void)
{
    const char *path = getenv("PH_ALLOC_COUNT_OUT");
    if (path != NULL)
        out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

__attribute__((destructor)) static void report(void)
{
    if (out_fd < 0)
        return;
    char line[96];
    int n = snprintf(line, sizeof line, "allocs %ld frees %ld\n", atomic_load(&allocs),
                     atomic_load(&frees));
    if (n > 0 && write(out_fd, line, (size_t)n) < 0)
        n = 0;
    close(out_fd);
}
