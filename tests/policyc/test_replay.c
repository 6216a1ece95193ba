/* test_replay.c - policyc replay: the exact report of a log recorded from
 * the proxy's e2e suite (tests/proxy/e2e_decisions.sh) against a narrowed
 * and a widened table; hostile lines counted, never a stop; gzip read like
 * plain; memory that grows with destinations, never with lines. */
#include <fcntl.h>
#include <malloc.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "commands.h"
#include "replay.h"
#include "table_fixture.h"

static char *dir;
static char out_path[4096];

static int setup(void **state)
{
    (void)state;
    dir = ph_test_mkdtemp();
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_test_rmtree(dir);
    free(dir);
    return 0;
}

/* Runs policyc replay ARGS (NULL-terminated) from the source directory
 * (the data's paths are relative to it), stdout captured into *out. */
static int run(char **out, ...)
{
    static char storage[16][4200];
    char *argv[16];
    int argc = 0;
    snprintf(storage[0], sizeof storage[0], "replay");
    argv[argc++] = storage[0];
    va_list ap;
    va_start(ap, out);
    for (const char *a; argc < 15 && (a = va_arg(ap, const char *)) != NULL; argc++) {
        snprintf(storage[argc], sizeof storage[argc], "%s", a);
        argv[argc] = storage[argc];
    }
    va_end(ap);
    argv[argc] = NULL;
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(PH_SOURCE_DIR), 0);
    fflush(stdout);
    int saved = dup(1);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    close(fd);
    int rc = pc_cmd_replay(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    assert_int_equal(chdir(cwd), 0);
    size_t len;
    char *text = ph_test_read_file(out_path, &len);
    if (out)
        *out = text;
    else
        free(text);
    return rc;
}

/* DATA "e2e-allowlist.yaml" is the proxy e2e allowlist as the log was
 * recorded under it (its policy id is in the log), kept here byte for byte so
 * later edits of tests/proxy/data/e2e-allowlist.yaml leave the report alone. */
#define DATA "tests/policyc/data/replay/"

static void expect_file(const char *got, const char *expected_rel)
{
    size_t len;
    char *want = ph_test_read_file(ph_test_source_path(expected_rel), &len);
    assert_non_null(want);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "---- got\n%s---- want (%s)\n%s", got, expected_rel, want);
    assert_string_equal(got, want);
    free(want);
}

/* The recorded log against a narrowed table: the connections it allowed
 * that the narrowed table refuses are newly refused, exactly. */
static void recorded_log_narrowed(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run(&out, DATA "narrowed.yaml", DATA "e2e-decisions.log", NULL), 1);
    expect_file(out, DATA "narrowed.expected");
    free(out);
    assert_int_equal(run(&out, "--fail-on=newly-allowed", DATA "narrowed.yaml",
                         DATA "e2e-decisions.log", NULL), 0);
    free(out);
}

static void recorded_log_widened(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run(&out, "--old", DATA "e2e-allowlist.yaml",
                         DATA "widened.yaml", DATA "e2e-decisions.log", NULL), 1);
    expect_file(out, DATA "widened.expected");
    free(out);
    assert_int_equal(run(&out, "--format=json", "--old", DATA "e2e-allowlist.yaml",
                         DATA "widened.yaml", DATA "e2e-decisions.log", NULL), 1);
    expect_file(out, DATA "widened.expected.json");
    free(out);
    assert_int_equal(run(&out, "--format=github", DATA "widened.yaml", DATA "e2e-decisions.log",
                         NULL), 1);
    expect_file(out, DATA "widened.expected.github");
    free(out);
    assert_int_equal(run(&out, "--fail-on=newly-refused", DATA "widened.yaml",
                         DATA "e2e-decisions.log", NULL), 0);
    free(out);
    /* The table it was recorded under changes nothing. */
    assert_int_equal(run(&out, DATA "e2e-allowlist.yaml", DATA "e2e-decisions.log",
                         NULL), 0);
    assert_non_null(strstr(out, "newly refused: 0 destination(s)"));
    assert_non_null(strstr(out, "newly allowed: 0 destination(s)"));
    assert_null(strstr(out, "flagged"));
    free(out);
}

/* The same log gzip-compressed gives the same report, byte for byte. */
static void gzip_reads_like_plain(void **state)
{
    (void)state;
    size_t len;
    char *plain = ph_test_read_file(ph_test_source_path(DATA "e2e-decisions.log"), &len);
    assert_non_null(plain);
    char gz_path[4200];
    snprintf(gz_path, sizeof gz_path, "%s/log.gz", dir);
    gzFile gz = gzopen(gz_path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, plain, (unsigned)len), (int)len);
    assert_int_equal(gzclose(gz), Z_OK);
    free(plain);
    char *a, *b;
    run(&a, DATA "narrowed.yaml", DATA "e2e-decisions.log", NULL);
    run(&b, DATA "narrowed.yaml", gz_path, NULL);
    /* Only the file names in malformed-line listings could differ; the
     * recorded log has none. */
    assert_string_equal(a, b);
    free(a), free(b);
    /* A truncated gzip stream is bad input: exit 2. */
    char cut_path[4200];
    snprintf(cut_path, sizeof cut_path, "%s/cut.gz", dir);
    char *z = ph_test_read_file(gz_path, &len);
    assert_int_equal(ph_test_write_file(cut_path, z, len / 2), 0);
    free(z);
    assert_int_equal(run(NULL, DATA "narrowed.yaml", cut_path, NULL), 2);
}

static const char GOOD[] =
    "{\"time\":\"2026-12-02T03:00:00.000Z\",\"event\":\"connection\",\"conn_id\":1,"
    "\"tenant\":\"t1\",\"lease\":\"l1\",\"list\":\"default\",\"host\":\"api.github.com\","
    "\"port\":443,\"status\":200,\"verdict\":\"allowed\",\"reason\":\"allowed\","
    "\"rule\":\"allow.yaml:5\",\"policy_id\":"
    "\"0000000000000000000000000000000000000000000000000000000000000000\"}";

/* Hostile lines: each is counted malformed with its line number; the good
 * lines between them are all decided; nothing stops the run. */
static void hostile_lines_counted(void **state)
{
    (void)state;
    size_t big = 1024 * 1024;
    char *buf = malloc(big + 8192);
    assert_non_null(buf);
    size_t n = 0;
#define ADD(s, l) (memcpy(buf + n, (s), (l)), n += (l), buf[n++] = '\n')
    ADD(GOOD, strlen(GOOD));                                 /* 1 */
    ADD("{not json", 9);                                    /* 2 */
    static const char nul_line[] = "{\"event\":\"connection\",\"host\":\"a\0b.com\"}";
    ADD(nul_line, sizeof nul_line - 1);                      /* 3: raw NUL */
    memset(buf + n, 'x', big);                              /* 4: 1 MiB */
    n += big;
    buf[n++] = '\n';
    ADD(GOOD, strlen(GOOD));                                 /* 5 */
    const char *wrong[] = {
        "{\"event\":\"connection\",\"host\":\"api.github.com\",\"port\":\"443\"}", /* 6 */
        "{\"event\":\"connection\",\"host\":7,\"port\":443}",                     /* 7 */
        "{\"event\":\"connection\",\"host\":\"api.github.com\",\"port\":70000}",  /* 8 */
        "{\"event\":\"connection\",\"host\":\"API.github.com\",\"port\":443,"
        "\"reason\":\"allowed\",\"list\":\"default\"}",                           /* 9 */
        "{\"event\":\"connection\",\"host\":\"a.com\",\"port\":443,"
        "\"reason\":\"bogus\",\"list\":\"default\"}",                              /* 10 */
        "{\"event\":\"connection\",\"host\":\"a.com\",\"host\":\"b.com\"}",         /* 11 */
        "[1,2,3]",                                                                /* 12 */
        "{\"event\":\"connection\",\"list\":\"a\\u0000b\"}",                       /* 13 */
        "{\"event\":\"connection\",\"policy_id\":\"XYZ\"}",                        /* 14 */
        /* Text the report prints: no terminal escapes, no hidden characters. */
        "{\"event\":\"connection\",\"list\":\"a\\u001b[31m\"}",                  /* 15 */
        "{\"event\":\"connection\",\"rule\":\"a.yaml:1\\u0007\"}",               /* 16 */
        "{\"event\":\"connection\",\"rule\":\"a\\u202e.yaml:1\"}",               /* 17 */
        "{\"event\":\"connection\",\"time\":\"2026-12-02\\u001b[2J\"}",          /* 18 */
    };
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++)
        ADD(wrong[i], strlen(wrong[i]));
    static const char bad_utf8[] = "{\"event\":\"connection\",\"host\":\"\xff\xfe.com\"}";
    ADD(bad_utf8, sizeof bad_utf8 - 1);                      /* 19: not UTF-8 */
    ADD("", 0);                                                      /* 20: empty */
    ADD("{\"event\":\"reload\"}", 18);                              /* 21: other event */
    ADD(GOOD, strlen(GOOD) - 1);                                     /* 22: cut short */
    memcpy(buf + n, GOOD, strlen(GOOD));                             /* 23: no final '\n' */
    n += strlen(GOOD);
#undef ADD
    /* Read in odd chunk sizes so lines straddle reads. */
    size_t chunks[] = {0, 7, 4093};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        pc_replay rp;
        pc_replay_init(&rp, 0, NULL);
        pc_log_mem m = {buf, n, 0, chunks[c]};
        ph_diag diag;
        assert_int_equal(pc_replay_read(&rp, "hostile.log", pc_log_mem_read, &m, &diag), PH_OK);
        assert_int_equal(rp.read, 23);
        assert_int_equal(rp.kinds[PC_LOG_DECIDED], 3);
        assert_int_equal(rp.kinds[PC_LOG_OTHER_EVENT], 1);
        assert_int_equal(rp.kinds[PC_LOG_MALFORMED], 19);
        assert_int_equal(rp.too_long, 1);
        uint64_t want_lines[] = {2,  3,  4,  6,  7,  8,  9,  10, 11, 12,
                                 13, 14, 15, 16, 17, 18, 19, 20, 22};
        assert_int_equal(rp.nmalformed, 19);
        for (size_t i = 0; i < 19; i++)
            assert_int_equal(rp.malformed[i].line, want_lines[i]);
        assert_int_equal(rp.ngroups, 1);
        pc_replay_free(&rp);
    }
    free(buf);
}

/* Heap in use after 100k lines and after 300k lines of the same 50
 * destinations: equal (memory follows destinations, not lines). */
static void memory_follows_destinations(void **state)
{
    (void)state;
    pc_replay rp;
    pc_replay_init(&rp, 0, NULL);
    char line[1024];
    size_t before = 0;
    for (int i = 0; i < 300000; i++) {
        int len = snprintf(line, sizeof line,
                           "{\"time\":\"2026-12-02T03:%02d:%02d.000Z\",\"event\":\"connection\","
                           "\"list\":\"default\",\"host\":\"h%d.example.com\",\"port\":443,"
                           "\"reason\":\"%s\",\"rule\":\"allow.yaml:%d\"}",
                           (i / 60) % 60, i % 60, i % 50, i % 3 ? "allowed" : "dns_failure",
                           i % 50);
        assert_int_equal(pc_replay_line(&rp, "mem.log", (uint64_t)i + 1, line, (size_t)len, false),
                         PH_OK);
        if (i == 99999)
            before = mallinfo2().uordblks;
    }
    size_t after = mallinfo2().uordblks;
    print_message("heap in use: %zu bytes after 100000 lines, %zu after 300000 (50 groups)\n",
                  before, after);
    assert_int_equal(rp.ngroups, 50);
    assert_int_equal(after, before);
    pc_replay_free(&rp);
}

/* A line logged under another policy id than the reference (the first
 * decided line's without --old) is kept, decided and flagged. */
static void other_policy_flagged(void **state)
{
    (void)state;
    pc_replay rp;
    pc_replay_init(&rp, 0, NULL);
    char other[sizeof GOOD];
    memcpy(other, GOOD, sizeof GOOD);
    char *id = strstr(other, "\"policy_id\":\"") + 13;
    memset(id, 'a', 64);
    assert_int_equal(pc_replay_line(&rp, "p.log", 1, GOOD, strlen(GOOD), false), PH_OK);
    assert_int_equal(pc_replay_line(&rp, "p.log", 2, other, strlen(other), false), PH_OK);
    assert_int_equal(pc_replay_line(&rp, "p.log", 3, GOOD, strlen(GOOD), false), PH_OK);
    assert_int_equal(rp.kinds[PC_LOG_DECIDED], 3);
    assert_int_equal(rp.other_policy, 1);
    assert_int_equal(rp.ngroups, 1);
    for (size_t i = 0; i < rp.nslots; i++)
        if (rp.slots[i] != NULL)
            assert_int_equal(rp.slots[i]->other_policy, 1);
    pc_replay_free(&rp);
}

/* --max-destinations: lines of destinations past the cap are counted
 * untracked and the exit status is 2 (the report is incomplete). */
static void destination_cap(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run(&out, "--max-destinations=2", DATA "e2e-allowlist.yaml",
                         DATA "e2e-decisions.log", NULL), 2);
    assert_non_null(strstr(out, "incomplete: "));
    free(out);
    assert_int_equal(run(NULL, "--max-destinations=0", DATA "e2e-allowlist.yaml",
                         DATA "e2e-decisions.log", NULL), 2);
    assert_int_equal(run(NULL, "--format=sarif", DATA "e2e-allowlist.yaml",
                         DATA "e2e-decisions.log", NULL), 2);
    assert_int_equal(run(NULL, DATA "e2e-allowlist.yaml", "/nonexistent/log", NULL), 2);
    assert_int_equal(run(NULL, DATA "e2e-allowlist.yaml", NULL), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recorded_log_narrowed),
        cmocka_unit_test(recorded_log_widened),
        cmocka_unit_test(gzip_reads_like_plain),
        cmocka_unit_test(hostile_lines_counted),
        cmocka_unit_test(memory_follows_destinations),
        cmocka_unit_test(other_policy_flagged),
        cmocka_unit_test(destination_cap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
