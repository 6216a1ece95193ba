/* free_scan.c - an LD_PRELOAD shim for the proxy's secrets test
 * (tests/proxy/e2e_secrets.sh): every block given back through free(3), or
 * left behind by a realloc(3) that moved it, is searched (its whole
 * malloc_usable_size) for the byte strings PH_FREE_SCAN names, and each
 * block holding one is recorded in the file PH_FREE_SCAN_HITS, one line a
 * hit: "hit <marker index> <block size> <caller> <caller's object>" (the
 * caller's address and its object's load address: addr2line finds the line
 * from their difference).
 *
 * PH_FREE_SCAN: markers separated by commas, each hex digits (the bytes
 * searched for; 8 bytes at least, so that chance does not match). Markers
 * that are secrets (a grant token, its key) found in freed memory mean a
 * copy outlived its use without being wiped. Read before main; without
 * them (or PH_FREE_SCAN_HITS) the shim records nothing. The hits file
 * starts with "markers <count> pid <pid>" from each process that read
 * them, and ends with "scanned <blocks> pid <pid>" (written at its exit):
 * a test reading none, or 0 blocks, searched nothing. A marker that is no
 * secret but a byte string the process surely frees unwiped (a control)
 * shows the search sees that process's frees at all.
 *
 * glibc's allocator only: the shim calls __libc_free and __libc_realloc,
 * so a sanitizer's allocator (which intercepts free itself) and this shim
 * cannot be used together. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void __libc_free(void *p);
extern void *__libc_realloc(void *p, size_t n);

#define MARKERS_MAX 8
#define MARKER_BYTES_MAX 512

static struct {
    size_t len;
    unsigned char bytes[MARKER_BYTES_MAX];
} markers[MARKERS_MAX];
static size_t nmarkers;
static int hits_fd = -1;
static unsigned long scanned; /* blocks searched (atomic) */
/* Set while this thread records a hit: what dladdr may free is not scanned. */
static __thread int busy;

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                 : -1;
}

/* Reads PH_FREE_SCAN before main (frees before it are not searched: no
 * secret exists yet). */
__attribute__((constructor)) static void load(void)
{
    const char *s = getenv("PH_FREE_SCAN"), *path = getenv("PH_FREE_SCAN_HITS");
    if (s == NULL || path == NULL)
        return;
    while (*s != '\0' && nmarkers < MARKERS_MAX) {
        size_t n = 0;
        int bad = 0;
        while (s[0] != '\0' && s[0] != ',') {
            int hi = hexval(s[0]), lo = s[1] != '\0' ? hexval(s[1]) : -1;
            if (hi < 0 || lo < 0 || n == MARKER_BYTES_MAX) {
                bad = 1;
                break;
            }
            markers[nmarkers].bytes[n++] = (unsigned char)(hi << 4 | lo);
            s += 2;
        }
        if (bad)
            return; /* a malformed list: nothing searched (the test sees no marker line) */
        if (n >= 8)
            markers[nmarkers++].len = n;
        if (*s == ',')
            s++;
    }
    hits_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (hits_fd >= 0) {
        char line[64];
        int k = snprintf(line, sizeof line, "markers %zu pid %d\n", nmarkers, (int)getpid());
        if (write(hits_fd, line, (size_t)k) != k)
            hits_fd = -1;
    }
}

/* Records each marker block p (of usable size n) holds; caller: who freed it. */
static void scan(const void *p, size_t n, const void *caller)
{
    if (hits_fd < 0 || busy)
        return;
    __atomic_fetch_add(&scanned, 1, __ATOMIC_RELAXED);
    for (size_t m = 0; m < nmarkers; m++) {
        if (memmem(p, n, markers[m].bytes, markers[m].len) == NULL)
            continue;
        busy = 1;
        Dl_info info;
        const void *base = dladdr(caller, &info) != 0 ? info.dli_fbase : NULL;
        char line[256];
        int k = snprintf(line, sizeof line, "hit %zu %zu %p %p %s\n", m, n, caller, base,
                         base != NULL && info.dli_fname != NULL ? info.dli_fname : "?");
        if (write(hits_fd, line, (size_t)k) != k)
            k = 0;
        busy = 0;
    }
}

__attribute__((destructor)) static void report(void)
{
    if (hits_fd < 0)
        return;
    char line[64];
    int k = snprintf(line, sizeof line, "scanned %lu pid %d\n",
                     __atomic_load_n(&scanned, __ATOMIC_RELAXED), (int)getpid());
    if (write(hits_fd, line, (size_t)k) != k)
        hits_fd = -1;
}

void free(void *p)
{
    if (p != NULL)
        scan(p, malloc_usable_size(p), __builtin_return_address(0));
    __libc_free(p);
}

void *realloc(void *p, size_t n)
{
    const void *caller = __builtin_return_address(0);
    if (p != NULL && n == 0) {
        scan(p, malloc_usable_size(p), caller); /* glibc frees p */
        return __libc_realloc(p, n);
    }
    size_t old = p != NULL ? malloc_usable_size(p) : 0;
    void *q = __libc_realloc(p, n);
    /* Moved: p was freed holding what q holds now (its first min(old, n)
     * bytes); searched there, not in freed memory. A block resized in place
     * keeps its bytes live. */
    if (p != NULL && q != NULL && q != p)
        scan(q, old < n ? old : n, caller);
    return q;
}
