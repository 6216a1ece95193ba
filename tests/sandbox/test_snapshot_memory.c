/* test_snapshot_memory.c - the host memory a sandbox-controlled workspace can
 * make the service spend on files_changed: 16 nested directories with
 * 250-byte names and 99,990 files in the deepest (paths of ~4,000 bytes),
 * then what `exec -- true` costs: a snapshot before, one after, the diff.
 * A snapshot is a tree of names, so this must stay under 64 MiB (it was
 * 805 MB when every full path was kept).
 *
 * Measured in a forked child: the growth of its peak RSS (getrusage
 * ru_maxrss) and the heap in use with both snapshots alive (mallinfo2).
 * Exit 77 under AddressSanitizer, whose allocator makes both figures
 * meaningless. */
#include "sandbox_test_util.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-int.h"

#if defined(__SANITIZE_ADDRESS__)
#define PH_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PH_UNDER_ASAN 1
#endif
#endif

#define DIRS 16
#define DIR_NAME_LEN 250
#define FILES 99990
#define LIMIT_BYTES (64ull * 1024 * 1024)

typedef struct figures {
    long maxrss_growth_kib; /* ru_maxrss after - before */
    size_t heap_bytes;      /* mallinfo2 in use with both snapshots alive */
    size_t entries;
    unsigned gaps;
    size_t changes;
    size_t path_bytes;      /* of the paths files_changed carries */
} figures;

static char *g_dir;

/* The 16 nested directories; returns a descriptor of the deepest. */
static int build_dirs(void)
{
    g_dir = ph_test_mkdtemp();
    assert_non_null(g_dir);
    int fd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    for (int level = 0; level < DIRS; level++) {
        char name[DIR_NAME_LEN + 1];
        memset(name, 'a' + level, DIR_NAME_LEN);
        name[DIR_NAME_LEN] = '\0';
        assert_int_equal(mkdirat(fd, name, 0755), 0);
        int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        assert_true(sub >= 0);
        close(fd);
        fd = sub;
    }
    return fd;
}

static void add_files(int fd, int count)
{
    for (int i = 0; i < count; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%05d", i);
        int f = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (f < 0)
            _exit(6);
        close(f);
    }
}

static void build_tree(void)
{
    int fd = build_dirs();
    add_files(fd, FILES);
    close(fd);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* In the child: what the service does around `exec -- true`. */
static figures measure(void)
{
    figures f = {0};
    int root = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    size_t heap0 = heap_in_use();
    ph_snapshot *before = NULL, *after = NULL;
    if (root < 0 || ph_snapshot_take(root, PH_SNAPSHOT_MAX_ENTRIES, &before, NULL) != PH_OK ||
        ph_snapshot_take(root, PH_SNAPSHOT_MAX_ENTRIES, &after, NULL) != PH_OK)
        _exit(3);
    f.heap_bytes = heap_in_use() - heap0;
    ph_execution_result r = {0};
    if (ph_snapshot_diff(before, after, &r, NULL) != PH_OK)
        _exit(4);
    getrusage(RUSAGE_SELF, &ru1);
    f.maxrss_growth_kib = ru1.ru_maxrss - ru0.ru_maxrss;
    f.entries = ph_snapshot_count(before);
    f.gaps = r.files_changed_gaps;
    f.changes = r.files_changed_count;
    ph_snapshot_free(&before);
    ph_snapshot_free(&after);
    close(root);
    return f;
}

static figures in_child(figures (*fn)(void))
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        figures f = fn();
        _exit(write(p[1], &f, sizeof f) == (ssize_t)sizeof f ? 0 : 5);
    }
    close(p[1]);
    figures f;
    ssize_t n = read(p[0], &f, sizeof f);
    close(p[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(n, (ssize_t)sizeof f);
    return f;
}

static void remove_tree(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    assert_int_equal(system(cmd), 0);
    free(g_dir);
    g_dir = NULL;
}

static void test_the_deep_long_named_tree(void **state)
{
    (void)state;
    build_tree();
    figures f = in_child(measure);
    printf("snapshot memory, 16 x 250-byte dirs + 99,990 files, two snapshots + diff: "
           "peak RSS growth %.1f MiB, heap with both snapshots %.1f MiB (%zu entries each)\n",
           (double)f.maxrss_growth_kib / 1024.0, (double)f.heap_bytes / (1024.0 * 1024.0),
           f.entries);
    /* The tree is 100,006 entries: the walk stops at the entry limit and
     * says so; nothing changed, so nothing is reported. */
    assert_int_equal(f.entries, PH_SNAPSHOT_MAX_ENTRIES);
    assert_true(f.gaps & PH_FC_GAP_ENTRY_LIMIT);
    assert_int_equal(f.changes, 0);
    assert_true((unsigned long long)f.maxrss_growth_kib * 1024 < LIMIT_BYTES);
    assert_true(f.heap_bytes < LIMIT_BYTES);
    remove_tree();
}

#define CHANGED_FILES 10000
static int g_deepest = -1;

/* In the child: a command adds 10,000 files whose paths are ~4,020 bytes
 * each (in the deepest of the 16 directories); the diff and its result. */
static figures measure_changes(void)
{
    figures f = {0};
    int root = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ph_snapshot *before = NULL, *after = NULL;
    if (root < 0 || ph_snapshot_take(root, PH_SNAPSHOT_MAX_ENTRIES, &before, NULL) != PH_OK)
        _exit(3);
    add_files(g_deepest, CHANGED_FILES);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    ph_execution_result *r = calloc(1, sizeof *r);
    if (r == NULL || ph_snapshot_take(root, PH_SNAPSHOT_MAX_ENTRIES, &after, NULL) != PH_OK ||
        ph_snapshot_diff(before, after, r, NULL) != PH_OK)
        _exit(4);
    getrusage(RUSAGE_SELF, &ru1);
    f.maxrss_growth_kib = ru1.ru_maxrss - ru0.ru_maxrss;
    f.gaps = r->files_changed_gaps;
    f.changes = r->files_changed_count;
    for (size_t i = 0; i < r->files_changed_count; i++)
        f.path_bytes += strlen(r->files_changed[i].path) + 1;
    ph_execution_result_free(&r);
    ph_snapshot_free(&before);
    ph_snapshot_free(&after);
    close(root);
    return f;
}

/* files_changed of 10,000 changes with 4 KiB paths: the result holds at
 * most 1 MiB of paths (the rest is a change_limit gap), so it and its JSON
 * stay near the snapshot's own figure instead of 40 MB of paths. */
static void test_files_changed_with_long_paths(void **state)
{
    (void)state;
    g_deepest = build_dirs();
    figures f = in_child(measure_changes);
    close(g_deepest);
    printf("files_changed, 10,000 files added under 4,000-byte paths: %zu changes carried, "
           "%.2f MiB of paths, peak RSS growth of the walk and diff %.1f MiB, gaps 0x%x\n",
           f.changes, (double)f.path_bytes / (1024.0 * 1024.0),
           (double)f.maxrss_growth_kib / 1024.0, f.gaps);
    assert_true(f.path_bytes <= PH_FILES_CHANGED_PATH_BYTES);
    assert_true(f.changes > 0 && f.changes < CHANGED_FILES);
    assert_true(f.gaps & PH_FC_GAP_CHANGE_LIMIT);
    assert_true((unsigned long long)f.maxrss_growth_kib * 1024 < 16ull * 1024 * 1024);
    remove_tree();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_deep_long_named_tree),
        cmocka_unit_test(test_files_changed_with_long_paths),
    };
#ifdef PH_UNDER_ASAN
    (void)tests;
    printf("SKIP: memory figures are meaningless under AddressSanitizer\n");
    return 77;
#endif
    return cmocka_run_group_tests(tests, NULL, NULL);
}
