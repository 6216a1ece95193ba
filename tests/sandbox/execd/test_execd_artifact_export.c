/* test_execd_artifact_export.c - artifact.export as ADR-0029 means it, end
 * to end through pinhole-execd: a command in a sandbox on the execution side
 * writes report.txt; the worker sees it in files_changed, reads it through
 * WorkspaceFiles over the socket (compiled against pinhole/execd_as_port.h),
 * writes it to a filesystem ArtifactStore only the worker knows, and fetches
 * it back byte-identical. A symlink out of the workspace and a fifo are
 * refused with nothing stored.
 *
 *   execd_artifact_export <mechanism>   (run by execd_contract.sh) */
#include "sandbox_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/artifact_export.h"
#include "pinhole/artifact_store.h"

static ph_sandbox_mechanism g_mechanism;

static bool count_one(void *arg, const ph_artifact_metadata *meta)
{
    (void)meta;
    (*(size_t *)arg)++;
    return true;
}

static size_t count_artifacts(ph_artifact_store *store)
{
    size_t n = 0;
    assert_int_equal(ph_artifact_list(store, count_one, &n, NULL), PH_OK);
    return n;
}

static void test_export_through_the_service(void **state)
{
    (void)state;
    sbx_fixture fx;
    assert_true(sbx_open(&fx, g_mechanism, 10000));
    ph_environment_spec spec = sbx_spec(&fx);
    ph_sandbox_lease *lease = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_sandbox_lease_open(fx.svc, &spec, 600, &lease, &diag), PH_OK);
    ph_environment *env = NULL;
    assert_int_equal(ph_sandbox_lease_environment(lease, &env, &diag), PH_OK);
    /* Every byte value, twice, and a line with no newline at the end. */
    const char *argv[] = {"sh", "-c",
                          "i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; "
                          "i=$((i+1)); done > report.txt; cat report.txt report.txt > r2; "
                          "mv r2 report.txt; printf 'tail' >> report.txt; "
                          "ln -s /etc/passwd out-link; mkfifo pipe",
                          NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->exit_code, 0);
    const ph_file_change *c = sbx_change(r, "report.txt");
    assert_non_null(c);
    assert_int_equal(c->kind, PH_CHANGE_ADDED);
    assert_int_equal(c->size, 2 * 256 + 4);
    ph_execution_result_free(&r);

    ph_workspace *ws = NULL;
    assert_int_equal(ph_sandbox_lease_workspace(lease, &ws, &diag), PH_OK);
    char *store_dir = ph_test_mkdtemp();
    char root[512];
    snprintf(root, sizeof root, "%s/store", store_dir);
    ph_artifact_store *store = NULL;
    assert_int_equal(ph_artifact_store_open_fs(root, NULL, &store, &diag), PH_OK);
    ph_artifact_spec as = {.tenant_id = "t1", .tenant_id_len = 2,
                           .content_type = "text/plain"};
    ph_artifact_metadata *meta = NULL;
    if (ph_artifact_export(store, ws, "report.txt", &as, &meta, &diag) != PH_OK)
        fail_msg("export: %s", diag.message);
    assert_int_equal(meta->size, 2 * 256 + 4);
    assert_string_equal(meta->source_path, "report.txt");

    /* Fetch it back: byte-identical to what the command wrote. */
    uint8_t want[2 * 256 + 4];
    for (int i = 0; i < 512; i++)
        want[i] = (uint8_t)(i % 256);
    memcpy(want + 512, "tail", 4);
    ph_artifact_ref ref = ph_artifact_metadata_ref(meta);
    ph_artifact_metadata *m2 = NULL;
    ph_artifact_stream *stream = NULL;
    assert_int_equal(ph_artifact_open(store, &ref, &m2, &stream, &diag), PH_OK);
    uint8_t got[1024];
    size_t total = 0, n = 0;
    do {
        assert_int_equal(ph_artifact_stream_read(stream, got + total, sizeof got - total, &n,
                                                 &diag), PH_OK);
        total += n;
    } while (n > 0 && total < sizeof got);
    assert_int_equal(total, sizeof want);
    assert_memory_equal(got, want, sizeof want);
    ph_artifact_stream_close(&stream);
    ph_artifact_metadata_free(&m2);
    ph_artifact_metadata_free(&meta);

    /* A file of several stream chunks: the artifact's SHA-256 is the one
     * computed inside the sandbox. */
    const char *big[] = {"sh", "-c", "head -c 3500001 /dev/urandom > big.bin && "
                                     "sha256sum big.bin | cut -c1-64", NULL};
    r = sbx_run(env, big);
    assert_int_equal(r->exit_code, 0);
    char hex[65];
    snprintf(hex, sizeof hex, "%.64s", (const char *)r->out.data);
    ph_execution_result_free(&r);
    if (ph_artifact_export(store, ws, "big.bin", &as, &meta, &diag) != PH_OK)
        fail_msg("export big.bin: %s", diag.message);
    assert_int_equal(meta->size, 3500001);
    char got_hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(got_hex + 2 * i, 3, "%02x", meta->sha256[i]);
    assert_string_equal(got_hex, hex);
    ph_artifact_metadata_free(&meta);

    /* Refusals through the service, nothing stored. */
    assert_int_equal(ph_artifact_export(store, ws, "out-link", &as, &meta, &diag), PH_E_DENIED);
    assert_null(meta);
    assert_int_equal(ph_artifact_export(store, ws, "pipe", &as, &meta, &diag), PH_E_INVAL);
    assert_int_equal(ph_artifact_export(store, ws, "../etc/passwd", &as, &meta, &diag),
                     PH_E_DENIED);
    assert_int_equal(ph_artifact_export(store, ws, "missing", &as, &meta, &diag),
                     PH_E_NOT_FOUND);
    as.max_size = 100;
    assert_int_equal(ph_artifact_export(store, ws, "report.txt", &as, &meta, &diag),
                     PH_E_LIMIT);
    assert_int_equal(count_artifacts(store), 2); /* the report and big.bin only */

    ph_artifact_store_close(&store);
    ph_test_rmtree(store_dir);
    free(store_dir);
    ph_workspace_close(&ws);
    ph_sandbox_lease_end(&lease);
    sbx_close(&fx);
}

int main(int argc, char **argv)
{
    ph_diag diag = {0};
    if (argc != 2 || ph_sandbox_mechanism_from_name(argv[1], &g_mechanism, &diag) != PH_OK) {
        fprintf(stderr, "usage: %s <mechanism>\n", argv[0]);
        return 2;
    }
    if (ph_sandbox_mechanism_available(g_mechanism, &diag) != PH_OK) {
        printf("SKIP: no pinhole-execd running %s here: %s\n", argv[1], diag.message);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_through_the_service),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
