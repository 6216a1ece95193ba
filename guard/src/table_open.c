/*
 * table_open.c - bringing a table into memory: open + fstat + size limits,
 * read into a private anonymous mapping in chunks, each checksummed as soon
 * as it lands (while it is still in cache: copy and checksum are one pass
 * over memory), verify every byte (table_verify.c), then mprotect the
 * mapping read-only.
 *
 * Why read rather than mmap the file: a MAP_SHARED/MAP_PRIVATE mapping still
 * shows later in-place writes to the file (for pages not yet copied), so
 * bytes verified at open could change under a running proxy. Reading into
 * private memory and then making it read-only gives "verified once, immutable
 * afterwards" whatever happens to the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "pinhole/io.h"
#include "table-int.h"

static void *mmap_or_null(size_t len, int flags)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

static void table_free(ph_table *t)
{
    if (t->map != NULL)
        munmap(t->map, t->map_len);
    free(t);
}

/* Lookups spread over a large table miss the TLB as often as the cache (and
 * a miss costs a two-dimensional page walk under virtualization), so a table
 * of at least one huge page is mapped on a huge-page boundary and asked for
 * transparent huge pages. Advice only: where the kernel declines, the table
 * works the same with small pages. */
#define HUGE_PAGE ((size_t)2 << 20)

static uint8_t *map_image(size_t len)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (len < HUGE_PAGE) /* MAP_POPULATE: one bulk fault instead of one per page */
        return (uint8_t *)mmap_or_null(len, flags | MAP_POPULATE);
    size_t span = len + HUGE_PAGE;
    uint8_t *raw = mmap_or_null(span, flags);
    if (raw == NULL)
        return NULL;
    uint8_t *m = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    size_t head = (size_t)(m - raw), tail = span - head - len;
    if (head > 0)
        munmap(raw, head);
    /* Unmap what follows the page holding the image's last byte. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t keep = (len + page - 1) & ~(page - 1);
    if (keep < len + tail)
        munmap(m + keep, len + tail - keep);
#ifdef MADV_HUGEPAGE
    (void)madvise(m, keep, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
    (void)madvise(m, keep, MADV_POPULATE_WRITE); /* as MAP_POPULATE, after the advice */
#endif
    return m;
}

/* Copy and checksum granularity: a multiple of four checksum blocks, small
 * enough to stay in the L2 cache between the copy and the checksum. */
#define CHUNK ((size_t)512 << 10)

/* Allocates t with a writable anonymous mapping of len bytes. */
static ph_status table_alloc(size_t len, ph_table **out, ph_diag *diag)
{
    if (len > PH_TAB_MAX_FILE_SIZE)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "table is %zu bytes, over the %llu-byte limit",
                           len, (unsigned long long)PH_TAB_MAX_FILE_SIZE);
    if (len < PH_TAB_FIRST_SECTION)
        return ph_diag_set(diag, PH_E_FORMAT, len,
                           "not a Pinhole table: %zu bytes is shorter than the header", len);
    ph_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    uint8_t *m = map_image(len);
    if (m == NULL) {
        free(t);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "cannot map %zu bytes: %s", len, strerror(errno));
    }
    t->map = m;
    t->map_len = len;
    t->bytes = m;
    t->len = len;
    *out = t;
    return PH_OK;
}

static ph_status table_finish(ph_table *t, ph_table **table, ph_diag *diag)
{
    ph_status st = ph_table_verify(t, diag);
    if (st == PH_OK && mprotect(t->map, t->map_len, PROT_READ) != 0)
        st = ph_diag_set(diag, PH_E_IO, 0, "cannot make the table read-only: %s", strerror(errno));
    if (st != PH_OK) {
        table_free(t);
        return st;
    }
    ph_hex_encode(t->bytes + PH_TAB_OFF_POLICY_ID, PH_TAB_ID_LEN, t->id_hex);
    *table = t;
    return PH_OK;
}

ph_status ph_table_open_buffer(const void *data, size_t len, ph_table **table, ph_diag *diag)
{
    if (table == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no output table");
    *table = NULL;
    if (data == NULL && len != 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no table data");
    ph_table *t = NULL;
    ph_status st = table_alloc(len, &t, diag);
    if (st != PH_OK)
        return st;
    ph_tab_crc crc;
    ph_tab_crc_init(&crc);
    for (size_t at = 0; at < len;) {
        size_t n = len - at < CHUNK ? len - at : CHUNK;
        memcpy(t->map + at, (const uint8_t *)data + at, n);
        at += n;
        ph_tab_crc_feed(&crc, t->map, at, at == len);
    }
    t->checksum = ph_tab_crc_final(&crc);
    return table_finish(t, table, diag);
}

ph_status ph_table_open(const char *path, ph_table **table, ph_diag *diag)
{
    if (table == NULL || path == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no path or no output table");
    *table = NULL;
    int fd;
    struct stat st;
    ph_status opened = ph_open_regular(path, &fd, &st, diag);
    if (opened != PH_OK) {
        /* This function's statuses: what is not a regular file is no table. */
        ph_status mine = opened == PH_E_INVAL ? PH_E_FORMAT : PH_E_IO;
        if (diag != NULL)
            diag->status = mine;
        return mine;
    }
    if ((uint64_t)st.st_size > PH_TAB_MAX_FILE_SIZE) {
        close(fd);
        return ph_diag_set(diag, PH_E_LIMIT, 0, "%s is %lld bytes, over the %llu-byte limit",
                           path, (long long)st.st_size, (unsigned long long)PH_TAB_MAX_FILE_SIZE);
    }
    ph_table *t = NULL;
    ph_status s = table_alloc((size_t)st.st_size, &t, diag);
    if (s != PH_OK) {
        close(fd);
        return s;
    }
    /* Read exactly st_size bytes; a file that shrank is refused, and one that
     * grew is still verified against the size recorded in its header. */
    size_t got = 0;
    ph_tab_crc crc;
    ph_tab_crc_init(&crc);
    while (got < t->len) {
        size_t want = t->len - got < CHUNK ? t->len - got : CHUNK;
        ssize_t n = read(fd, t->map + got, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : 0;
            close(fd);
            table_free(t);
            if (e != 0)
                return ph_diag_set(diag, PH_E_IO, got, "cannot read %s: %s", path, strerror(e));
            return ph_diag_set(diag, PH_E_FORMAT, got, "%s shrank while being read", path);
        }
        got += (size_t)n;
        ph_tab_crc_feed(&crc, t->map, got, got == t->len);
    }
    close(fd);
    t->checksum = ph_tab_crc_final(&crc);
    return table_finish(t, table, diag);
}

void ph_table_close(ph_table **table)
{
    if (table == NULL || *table == NULL)
        return;
    table_free(*table);
    *table = NULL;
}

const uint8_t *ph_table_policy_id(const ph_table *table)
{
    return table->bytes + PH_TAB_OFF_POLICY_ID;
}

const char *ph_table_policy_id_hex(const ph_table *table)
{
    return table->id_hex;
}
