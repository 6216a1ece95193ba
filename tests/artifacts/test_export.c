/* test_export.c - artifact.export reads one workspace file through the
 * WorkspaceFiles port and nothing else: symlinks out, special files,
 * directories, traversal and oversize files are refused and store nothing;
 * a file whose name is any bytes (a newline, a control, not UTF-8) is
 * exported, its name kept whole as the filename. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_export.h"
#include "pinhole/artifact_store.h"
#include "test_support.h"

typedef struct fixture {
    char *dir;          /* holds ws/ and store/ */
    char ws_path[4096], store_path[4096];
    ph_workspace *ws;
    ph_artifact_store *store;
} fixture;

static void make_file(fixture *f, const char *rel, const char *data, size_t len)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", f->ws_path, rel);
    assert_int_equal(ph_test_write_file(p, data, len), 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = ph_test_mkdtemp();
    snprintf(f->ws_path, sizeof f->ws_path, "%s/ws", f->dir);
    snprintf(f->store_path, sizeof f->store_path, "%s/store", f->dir);
    mkdir(f->ws_path, 0700);
    char p[4200];
    snprintf(p, sizeof p, "%s/out", f->ws_path);
    mkdir(p, 0700);
    make_file(f, "out/report.csv", "a,b\n1,2\n", 8);
    make_file(f, "big.bin", "0123456789abcdef", 16);
    snprintf(p, sizeof p, "%s/secret", f->dir);
    ph_test_write_file(p, "outside", 7);
    char link[4200];
    snprintf(link, sizeof link, "%s/escape", f->ws_path);
    if (symlink(p, link) != 0)
        return -1;
    snprintf(link, sizeof link, "%s/escape_rel", f->ws_path);
    if (symlink("../secret", link) != 0)
        return -1;
    snprintf(p, sizeof p, "%s/fifo", f->ws_path);
    if (mkfifo(p, 0600) != 0)
        return -1;
    if (ph_workspace_open(f->ws_path, &f->ws, NULL) != PH_OK)
        return -1;
    ph_artifact_store_options o = {.max_size = 10};
    if (ph_artifact_store_open_fs(f->store_path, &o, &f->store, NULL) != PH_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ph_workspace_close(&f->ws);
    ph_artifact_store_close(&f->store);
    ph_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static bool count_visit(void *arg, const ph_artifact_metadata *m)
{
    (void)m;
    ++*(int *)arg;
    return true;
}

static int stored(fixture *f)
{
    int n = 0;
    ph_artifact_list(f->store, count_visit, &n, NULL);
    return n;
}

static void test_export_regular_file(void **state)
{
    fixture *f = *state;
    ph_artifact_spec spec = {.tenant_id = "acme", .tenant_id_len = 4, .run_id = "run-7"};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(ph_artifact_export(f->store, f->ws, "./out//report.csv", &spec, &m, &d),
                     PH_OK);
    assert_string_equal(m->source_path, "out/report.csv");
    assert_int_equal(m->filename_len, 10);
    assert_memory_equal(m->filename, "report.csv", 10);
    assert_int_equal(m->size, 8);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    unsigned char *data = NULL;
    size_t len = 0;
    assert_int_equal(get_bytes(f->store, &ref, &data, &len, NULL), PH_OK);
    assert_memory_equal(data, "a,b\n1,2\n", 8);
    free(data);
    ph_artifact_metadata_free(&m);
}

static void expect_refusal(fixture *f, const char *path, ph_status want, const char *text)
{
    ph_artifact_spec spec = {.tenant_id = "acme", .tenant_id_len = 4};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    ph_status st = ph_artifact_export(f->store, f->ws, path, &spec, &m, &d);
    if (st != want)
        fail_msg("%s: status %d, want %d (%s)", path, st, want, d.message);
    assert_null(m);
    if (text && strstr(d.message, text) == NULL)
        fail_msg("%s: message \"%s\" lacks \"%s\"", path, d.message, text);
    assert_int_equal(stored(f), 0);
}

static void test_export_refusals(void **state)
{
    fixture *f = *state;
    expect_refusal(f, "escape", PH_E_DENIED, NULL);        /* absolute symlink out */
    expect_refusal(f, "escape_rel", PH_E_DENIED, NULL);    /* relative symlink out */
    expect_refusal(f, "../secret", PH_E_DENIED, "path_dotdot");
    expect_refusal(f, "/etc/passwd", PH_E_DENIED, "path_absolute");
    expect_refusal(f, "fifo", PH_E_INVAL, NULL);           /* never opened: no blocking */
    expect_refusal(f, "out", PH_E_INVAL, NULL);            /* a directory */
    expect_refusal(f, ".", PH_E_INVAL, "path_is_root");
    expect_refusal(f, "big.bin", PH_E_LIMIT, NULL);        /* 16 bytes > 10 */
    expect_refusal(f, "missing", PH_E_NOT_FOUND, NULL);
    /* A trailing slash names a directory, as it does at the port: a file
     * through one is refused, never exported as if the slash were not there. */
    expect_refusal(f, "out/report.csv/", PH_E_INVAL, "path_not_directory");
    expect_refusal(f, "out/report.csv/.", PH_E_INVAL, "path_not_directory");
}

static void test_export_socket_refused(void **state)
{
    fixture *f = *state;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    /* Bound by a relative name from inside the workspace: sun_path holds
     * 108 bytes, fewer than a deep $TMPDIR may need. */
    struct sockaddr_un a = {.sun_family = AF_UNIX, .sun_path = "sock"};
    int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(cwd >= 0);
    assert_int_equal(chdir(f->ws_path), 0);
    int bound = bind(s, (struct sockaddr *)&a, sizeof a);
    assert_int_equal(fchdir(cwd), 0);
    close(cwd);
    assert_int_equal(bound, 0);
    expect_refusal(f, "sock", PH_E_INVAL, NULL);
    close(s);
}

/* A sandbox names its files: any byte but NUL and '/'. The file is exported
 * all the same, the filename holds the name's bytes as they are, and the
 * recorded source_path is the path's text form (docs/sandbox.md: a newline
 * as backslash-n, a byte of a name that is not UTF-8 as backslash-x). */
static void test_export_hostile_names(void **state)
{
    fixture *f = *state;
    static const struct {
        const char *name, *source_path;
    } cases[] = {
        {"line\nbreak.txt", "out/line\\nbreak.txt"},
        {"caf\xe9.txt", "out/caf\\xe9.txt"},
        {"esc\x1b[31m.txt", "out/esc\\x1b[31m.txt"},
        {"back\\slash", "out/back\\\\slash"},
        {"zero\xe2\x80\x8bwidth", "out/zero\\xe2\\x80\\x8bwidth"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "out/%s", cases[i].name);
        make_file(f, rel, "hostile", 7);
        ph_artifact_spec spec = {.tenant_id = "acme", .tenant_id_len = 4};
        ph_artifact_metadata *m = NULL;
        ph_diag d = {0};
        ph_status st = ph_artifact_export(f->store, f->ws, rel, &spec, &m, &d);
        if (st != PH_OK)
            fail_msg("exporting 'out/%s': status %d (%s)", cases[i].name, st, d.message);
        assert_int_equal(m->filename_len, strlen(cases[i].name));
        assert_memory_equal(m->filename, cases[i].name, m->filename_len);
        assert_string_equal(m->source_path, cases[i].source_path);
        ph_artifact_ref ref = ph_artifact_metadata_ref(m);
        unsigned char *data = NULL;
        size_t len = 0;
        assert_int_equal(get_bytes(f->store, &ref, &data, &len, NULL), PH_OK);
        assert_int_equal(len, 7);
        assert_memory_equal(data, "hostile", 7);
        free(data);
        ph_artifact_metadata_free(&m);
    }
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_export_regular_file),
        T(test_export_refusals),
        T(test_export_socket_refused),
        T(test_export_hostile_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
