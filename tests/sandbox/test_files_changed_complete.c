/* test_files_changed_complete.c - files_changed never omits silently
 * (ADR-0029 decision 10). A change is reported, or files_changed_truncated
 * is set with a reason: a file 140 directories deep, a 4,200-byte path;
 * the ordering is a total order on bytes ("src/lib" and "src\001lib" are
 * different paths); names that are not UTF-8 survive JSON (path_base64,
 * name_base64, `--json read`), and a newline in a name cannot forge a
 * result line in text mode.
 *
 * argv[1] is the mechanism (default fake); the CLI cases run on fake only.
 * Exit 77 with "SKIP: ..." when the mechanism is not available here. */
#include "sandbox_test_util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinhole/utf8.h"
#include "sandbox-int.h"

static ph_sandbox_mechanism g_mechanism = PH_MECHANISM_FAKE;
static sbx_fixture g_fx;

static int setup(void **state)
{
    (void)state;
    return sbx_open(&g_fx, g_mechanism, 120000) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    sbx_close(&g_fx);
    return 0;
}

static ph_execution_result *sh(ph_environment *env, const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    ph_execution_result *r = sbx_run(env, argv);
    if (!r->exited || r->exit_code != 0)
        fail_msg("script failed (%d): %s\n%s", r->exit_code, script, (const char *)r->err.data);
    return r;
}

static bool only_gap(const ph_execution_result *r, unsigned gap)
{
    return r->files_changed_truncated && r->files_changed_gaps == gap;
}

/* 140 nested directories; deeper than the walk goes. */
#define DEEP_SCRIPT                                                                     \
    "i=0; while [ $i -lt 140 ]; do mkdir -p d && cd d || exit 1; i=$((i+1)); done; "

static void test_depth_140_is_reported_or_truncated_with_a_reason(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    ph_execution_result *r = sh(env, DEEP_SCRIPT "echo x > deep; cd /workspace; echo y > shallow");
    char deep[2 * 140 + 8] = "";
    for (int i = 0; i < 140; i++)
        strcat(deep, "d/");
    strcat(deep, "deep");
    /* Either the file is there, or the result says why it may not be. */
    assert_true(sbx_change(r, deep) != NULL ||
                (r->files_changed_truncated && (r->files_changed_gaps & PH_FC_GAP_TOO_DEEP)));
    assert_non_null(sbx_change(r, "shallow")); /* the rest is still complete */
    ph_execution_result_free(&r);
    /* Modified twice: the same answer each time. */
    for (int k = 0; k < 2; k++) {
        r = sh(env, DEEP_SCRIPT "echo more >> deep");
        assert_true(sbx_change(r, deep) != NULL ||
                    (r->files_changed_truncated && (r->files_changed_gaps & PH_FC_GAP_TOO_DEEP)));
        ph_execution_result_free(&r);
    }
    ph_environment_destroy(&env);
}

/* 16 directories of 250 bytes and a 184-byte name: a 4,200-byte path. */
#define LONG_SCRIPT                                                                     \
    "n=$(printf '%0250d' 0); i=0; while [ $i -lt 16 ]; do mkdir -p $n && cd $n || exit 1; " \
    "i=$((i+1)); done; f=$(printf '%0184d' 1); "

static void test_a_4200_byte_path_is_truncated_with_a_reason(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    /* Directories of a 4,015-byte path: not reported, nothing missing. */
    ph_execution_result *r = sh(env, LONG_SCRIPT "true");
    assert_false(r->files_changed_truncated);
    assert_int_equal(r->files_changed_count, 0);
    ph_execution_result_free(&r);
    r = sh(env, LONG_SCRIPT "[ ${#PWD} -gt 4000 ] && echo x > $f && echo y > /workspace/near");
    assert_true(only_gap(r, PH_FC_GAP_PATH_TOO_LONG));
    assert_non_null(sbx_change(r, "near"));
    assert_int_equal(r->files_changed_count, 1);
    ph_execution_result_free(&r);
    r = sh(env, LONG_SCRIPT "echo again >> $f");
    assert_true(only_gap(r, PH_FC_GAP_PATH_TOO_LONG));
    ph_execution_result_free(&r);
    r = sh(env, "true"); /* an unchanged long path costs nothing */
    assert_false(r->files_changed_truncated);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

static void test_slash_and_0x01_are_different_bytes(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    ph_execution_result *r = sh(env, "mkdir -p src/lib && echo m > src/lib/main.c && echo a > src/a");
    ph_execution_result_free(&r);
    r = sh(env, "mv src/lib \"$(printf 'src\\001lib')\"");
    assert_false(r->files_changed_truncated);
    assert_int_equal(r->files_changed_count, 2);
    const ph_file_change *gone = sbx_change(r, "src/lib/main.c");
    const ph_file_change *moved = sbx_change(r, "src\001lib/main.c");
    assert_non_null(gone);
    assert_non_null(moved);
    assert_int_equal(gone->kind, PH_CHANGE_DELETED);
    assert_int_equal(moved->kind, PH_CHANGE_ADDED);
    /* Sorted bytewise: "src\001lib/..." before "src/lib/...". */
    assert_string_equal(r->files_changed[0].path, "src\001lib/main.c");
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

/* ---- the CLI: JSON and text ---- */

static char g_state[512];

/* Runs pinhole-sandbox (fake, development) with args; stdout and stderr
 * into *out and *err (caller frees). Returns the exit status. */
static int cli(char **out, char **err, const char *args)
{
    char errfile[600], cmd[4096];
    snprintf(errfile, sizeof errfile, "%s/stderr", g_state);
    snprintf(cmd, sizeof cmd,
             "PINHOLE_SANDBOX_STATE_DIR='%s' %s/sandbox/pinhole-sandbox --mechanism fake "
             "--mode development %s 2>'%s' </dev/null",
             g_state, PH_BINARY_DIR, args, errfile);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    size_t n = fread(buf, 1, cap - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    *out = buf;
    *err = ph_test_read_file(errfile, NULL);
    assert_non_null(*err);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The object of array arr whose key equals value, or NULL. */
static json_t *find(json_t *arr, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        const char *v = json_string_value(json_object_get(e, key));
        if (v && strcmp(v, value) == 0)
            return e;
    }
    return NULL;
}

#define WEIRD_NAMES                                                                     \
    "sh -c 'echo v > visible.txt; printf x > \"$(printf \"\\377bad\")\"; "             \
    "printf y > \"$(printf \"a\\n# deleted visible.txt\")\"'"

static void test_non_utf8_and_newlines_through_json_and_text(void **state)
{
    (void)state;
    char *d = ph_test_mkdtemp();
    snprintf(g_state, sizeof g_state, "%s", d);
    free(d);
    char *out, *err;
    /* exec --json: every name present, faithfully. */
    assert_int_equal(cli(&out, &err, "--json run -- " WEIRD_NAMES), 0);
    json_t *o = json_loads(out, 0, NULL);
    if (o == NULL)
        fail_msg("not JSON: %s", out);
    json_t *fc = json_object_get(o, "files_changed");
    assert_int_equal(json_array_size(fc), 3);
    assert_non_null(find(fc, "path_base64", "/2JhZA=="));    /* "\377bad" */
    assert_non_null(find(fc, "path", "a\n# deleted visible.txt"));
    assert_non_null(find(fc, "path", "visible.txt"));
    assert_false(json_is_true(json_object_get(o, "files_changed_truncated")));
    assert_int_equal(json_array_size(json_object_get(o, "files_changed_truncated_reasons")), 0);
    json_decref(o);
    free(out);
    free(err);

    /* Text: escaped, one line per change, nothing forged. */
    assert_int_equal(cli(&out, &err, "run -- " WEIRD_NAMES), 0);
    if (strstr(err, "\n# deleted") != NULL || strncmp(err, "# deleted", 9) == 0)
        fail_msg("a name forged a result line:\n%s", err);
    assert_non_null(strstr(err, "# added a\\n# deleted visible.txt (1 bytes)\n"));
    assert_non_null(strstr(err, "# added \\xffbad (1 bytes)\n"));
    free(out);
    free(err);

    /* files and read on a kept environment. */
    assert_int_equal(cli(&out, &err, "create"), 0);
    char id[64];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
    free(out);
    free(err);
    char args[1024];
    snprintf(args, sizeof args, "exec %s -- %s", id, WEIRD_NAMES);
    assert_int_equal(cli(&out, &err, args), 0);
    free(out);
    free(err);
    snprintf(args, sizeof args, "--json files %s", id);
    assert_int_equal(cli(&out, &err, args), 0);
    o = json_loads(out, 0, NULL);
    assert_non_null(o);
    json_t *entries = json_object_get(o, "entries");
    assert_int_equal(json_array_size(entries), 3);
    assert_non_null(find(entries, "name_base64", "/2JhZA=="));
    assert_non_null(find(entries, "name", "a\n# deleted visible.txt"));
    json_decref(o);
    free(out);
    free(err);
    snprintf(args, sizeof args, "files %s", id);
    assert_int_equal(cli(&out, &err, args), 0);
    assert_non_null(strstr(out, " a\\n# deleted visible.txt\n"));
    assert_non_null(strstr(out, " \\xffbad\n"));
    assert_null(strstr(out, "\n# deleted"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "--json read %s \"$(printf '\\377bad')\"", id);
    assert_int_equal(cli(&out, &err, args), 0);
    o = json_loads(out, 0, NULL);
    if (o == NULL)
        fail_msg("read --json printed no JSON: '%s' (stderr %s)", out, err);
    assert_string_equal(json_string_value(json_object_get(o, "path_base64")), "/2JhZA==");
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "content"), "text")),
                        "x");
    json_decref(o);
    free(out);
    free(err);
    snprintf(args, sizeof args, "destroy %s", id);
    assert_int_equal(cli(&out, &err, args), 0);
    free(out);
    free(err);
    ph_test_rmtree(g_state);
}

/* The two encodings themselves (byte_strings.c, docs/sandbox.md). */
static void test_the_encodings(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } text[] = {
        {"plain caf\xc3\xa9", "plain caf\xc3\xa9"},        /* UTF-8 kept */
        {"a\nb\rc\td\\e", "a\\nb\\rc\\td\\\\e"},
        {"\x1b[2J\x7f", "\\x1b[2J\\x7f"},                   /* ESC, DEL */
        {"c1\xc2\x9b!", "c1\\xc2\\x9b!"},                    /* U+009B (CSI) */
        {"caf\xc3\xa9\xff", "caf\\xc3\\xa9\\xff"},           /* not UTF-8: every high byte */
        /* Invisible: drawn as nothing (a zero-width space: "a.txt" twice)
         * or reordering what is drawn around it (RLO: "evil" + reversed). */
        {"a\xe2\x80\x8b.txt", "a\\xe2\\x80\\x8b.txt"},
        {"evil\xe2\x80\xaetxt.exe", "evil\\xe2\\x80\\xaetxt.exe"},
        {"bom\xef\xbb\xbf", "bom\\xef\\xbb\\xbf"},
    };
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        char *e = ph_text_escape(text[i].in, strlen(text[i].in));
        assert_string_equal(e, text[i].out);
        free(e);
    }
    json_t *o = json_object();
    assert_int_equal(ph_json_set_bytes(o, "path", "path_base64", "ok/\xc3\xa9", 5), 0);
    assert_int_equal(ph_json_set_bytes(o, "name", "name_base64", "\xff" "bad", 4), 0);
    assert_string_equal(json_string_value(json_object_get(o, "path")), "ok/\xc3\xa9");
    assert_null(json_object_get(o, "path_base64"));
    assert_null(json_object_get(o, "name"));
    assert_string_equal(json_string_value(json_object_get(o, "name_base64")), "/2JhZA==");
    json_decref(o);
}

/* Two executes in one environment at once (two CLI processes, or two
 * handles): each files_changed holds its own command's change only, and
 * neither command is killed by the other's end-of-command sweep. */
static void test_concurrent_executes_do_not_mix(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    ph_diag diag = {0};
    assert_int_equal(ph_environment_persist_spec(env, &diag), PH_OK);
    char id[64];
    snprintf(id, sizeof id, "%s", ph_environment_id(env));
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        /* Another process: its own handle on the same environment. */
        ph_environment *mine = NULL;
        if (ph_environment_reattach(g_fx.svc, id, &mine, &diag) != PH_OK)
            _exit(10);
        const char *argv[] = {"sh", "-c", "sleep 1.5; echo a > a.txt", NULL};
        ph_execution_command cmd = {.argv = argv,
                                    .timeout_seconds = PH_SANDBOX_UNSET,
                                    .run_budget_ms = PH_SANDBOX_UNSET};
        ph_execution_result *r = NULL;
        if (ph_environment_execute(mine, &cmd, &r, &diag) != PH_OK)
            _exit(11);
        int rc = !r->exited || r->exit_code != 0          ? 12
                 : r->files_changed_count != 1            ? 13
                 : strcmp(r->files_changed[0].path, "a.txt") != 0 ? 14
                                                          : 0;
        ph_execution_result_free(&r);
        ph_environment_detach(&mine);
        _exit(rc);
    }
    usleep(400 * 1000); /* the child's command is running by now */
    ph_execution_result *r = sh(env, "echo b > b.txt");
    assert_int_equal(r->files_changed_count, 1);
    assert_string_equal(r->files_changed[0].path, "b.txt");
    ph_execution_result_free(&r);
    int ws = 0;
    assert_int_equal(waitpid(child, &ws, 0), child);
    assert_true(WIFEXITED(ws));
    if (WEXITSTATUS(ws) != 0)
        fail_msg("the other process's execute: code %d (12: its command was killed or "
                 "failed, 13/14: its files_changed held another command's change)",
                 WEXITSTATUS(ws));
    ph_environment_destroy(&env);
}

int main(int argc, char **argv)
{
    ph_diag diag = {0};
    if (argc > 1 && ph_sandbox_mechanism_from_name(argv[1], &g_mechanism, &diag) != PH_OK) {
        fprintf(stderr, "%s\n", diag.message);
        return 2;
    }
    if (ph_sandbox_mechanism_available(g_mechanism, &diag) != PH_OK) {
        printf("SKIP: mechanism %s is not available here: %s\n",
               ph_sandbox_mechanism_name(g_mechanism), diag.message);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_encodings),
        cmocka_unit_test(test_depth_140_is_reported_or_truncated_with_a_reason),
        cmocka_unit_test(test_a_4200_byte_path_is_truncated_with_a_reason),
        cmocka_unit_test(test_slash_and_0x01_are_different_bytes),
        cmocka_unit_test(test_concurrent_executes_do_not_mix),
        cmocka_unit_test(test_non_utf8_and_newlines_through_json_and_text),
    };
    /* The CLI case drives the fake mechanism itself: run it once, there. */
    size_t n = sizeof tests / sizeof tests[0] - (g_mechanism == PH_MECHANISM_FAKE ? 0 : 1);
    return _cmocka_run_group_tests("files_changed complete", tests, n, setup, teardown);
}
