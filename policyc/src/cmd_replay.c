/*
 * cmd_replay.c - policyc replay NEW LOG...: which connections that really
 * happened a new table would refuse, and which refusals it would allow,
 * from the proxy's connection logs (plain or gzip, streamed).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "commands.h"
#include "replay.h"
#include "table_input.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc replay [OPTIONS] NEW LOG...\n"
          "\n"
          "Decide every destination of the proxy's connection logs again on the table\n"
          "NEW (an allowlist or a compiled table), with the guard's decision function,\n"
          "in the list each line names, and report by list and destination what is\n"
          "newly refused (allowed then, refused now), newly allowed (refused then,\n"
          "allowed now) and unchanged, with counts, first and last times, and the\n"
          "rule that decided then (from the log) and now (file:line). A LOG is a\n"
          "file or '-' (standard input), plain or gzip. Lines without a destination\n"
          "or a list, or refused before the table was asked, are counted and\n"
          "skipped; a malformed line is counted with its line number.\n"
          "\n"
          "Options:\n"
          "  -o, --old=OLD          decide 'then' on OLD too, rather than reading it\n"
          "                         from the log (lines logged under another policy\n"
          "                         id than OLD's are flagged)\n"
          "  -f, --format=FORMAT    text (default), json or github\n"
          "  -F, --fail-on=WHAT     newly-refused, newly-allowed or any (default): the\n"
          "                         changes that make the exit status 1\n"
          "  -m, --max-destinations=N  groups kept in memory (default 1000000); lines of\n"
          "                         further destinations are counted untracked, exit 2\n"
          "  -h, --help             show this help\n"
          "\n"
          "Exit status: 0 nothing changed, 1 something changed (--fail-on), 2 usage\n"
          "error, unreadable or invalid input (a table, a log, a gzip stream), or an\n"
          "incomplete report. Formats and examples: docs/policyc.md.\n",
          out);
}

/* gzread over one descriptor: gzip or plain (zlib passes plain bytes
 * through), so a rotated log.1.gz and the live log read alike. */
static ssize_t gz_read(void *ctx, void *buf, size_t n, const char **why)
{
    gzFile gz = ctx;
    int got = gzread(gz, buf, (unsigned)(n > INT_MAX ? INT_MAX : n));
    int err = Z_OK;
    const char *msg = gzerror(gz, &err);
    if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
        *why = msg != NULL && msg[0] ? msg : "gzip read error";
        return -1;
    }
    return got;
}

static int replay_file(pc_replay *rp, const char *path)
{
    bool is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    int fd = is_stdin ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "policyc replay: %s: %s\n", name, strerror(errno));
        return 2;
    }
    gzFile gz = gzdopen(fd, "rb");
    if (gz == NULL) {
        close(fd);
        fprintf(stderr, "policyc replay: %s: out of memory\n", name);
        return 2;
    }
    gzbuffer(gz, 256 * 1024);
    ph_diag diag = { 0 };
    ph_status st = pc_replay_read(rp, name, gz_read, gz, &diag);
    gzclose(gz);
    if (st != PH_OK) {
        fprintf(stderr, "policyc replay: %s: %s\n", name, diag.message);
        return 2;
    }
    return 0;
}

static int open_decider(const char *path, pc_decider *dc)
{
    ph_table *t = NULL;
    if (pc_open_table_input("replay", path, &t, NULL) != 0)
        return 2;
    ph_diag diag = { 0 };
    if (pc_decider_open(&t, dc, &diag) != PH_OK) {
        fprintf(stderr, "policyc replay: %s\n", diag.message);
        return 2;
    }
    return 0;
}

int pc_cmd_replay(int argc, char **argv)
{
    static const struct option opts[] = {
        {"old", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"fail-on", required_argument, NULL, 'F'},
        {"max-destinations", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *old_path = NULL;
    pc_replay_format format = PC_REPLAY_TEXT;
    bool fail_refused = true, fail_allowed = true;
    size_t max_groups = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:f:F:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': old_path = optarg; break;
        case 'f':
            if (strcmp(optarg, "text") == 0)
                format = PC_REPLAY_TEXT;
            else if (strcmp(optarg, "json") == 0)
                format = PC_REPLAY_JSON;
            else if (strcmp(optarg, "github") == 0)
                format = PC_REPLAY_GITHUB;
            else {
                fprintf(stderr, "policyc replay: unknown format '%s' (text, json, github)\n",
                        optarg);
                return 2;
            }
            break;
        case 'F':
            fail_refused = strcmp(optarg, "newly-refused") == 0 || strcmp(optarg, "any") == 0;
            fail_allowed = strcmp(optarg, "newly-allowed") == 0 || strcmp(optarg, "any") == 0;
            if (!fail_refused && !fail_allowed) {
                fprintf(stderr, "policyc replay: unknown --fail-on '%s' "
                                "(newly-refused, newly-allowed, any)\n", optarg);
                return 2;
            }
            break;
        case 'm': {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || end == optarg || v == 0 || v > 100000000ull ||
                optarg[0] == '-') {
                fprintf(stderr, "policyc replay: --max-destinations wants 1..100000000\n");
                return 2;
            }
            max_groups = (size_t)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (argc - optind < 2) {
        fputs("policyc replay: expected NEW and at least one LOG\n", stderr);
        usage(stderr);
        return 2;
    }
    int stdin_uses = 0;
    for (int i = optind + 1; i < argc; i++)
        stdin_uses += strcmp(argv[i], "-") == 0;
    if (stdin_uses > 1) {
        fputs("policyc replay: '-' (standard input) may be named once\n", stderr);
        return 2;
    }

    pc_decider new_, old;
    bool have_old = false;
    if (open_decider(argv[optind], &new_) != 0)
        return 2;
    if (old_path != NULL) {
        if (open_decider(old_path, &old) != 0) {
            pc_decider_close(&new_);
            return 2;
        }
        have_old = true;
    }
    const char *new_id = ph_table_policy_id_hex(new_.table);
    const char *old_id = have_old ? ph_table_policy_id_hex(old.table) : NULL;

    pc_replay rp;
    pc_replay_init(&rp, max_groups, old_id);
    int rc = 0;
    for (int i = optind + 1; i < argc && rc == 0; i++)
        rc = replay_file(&rp, argv[i]);
    if (rc == 0 && pc_replay_decide(&rp, &new_, have_old ? &old : NULL) != PH_OK) {
        fputs("policyc replay: out of memory\n", stderr);
        rc = 2;
    }
    if (rc == 0) {
        if (pc_replay_print(stdout, &rp, format, new_id, old_id) != PH_OK || fflush(stdout) != 0)
            rc = 2;
        else if (rp.untracked > 0)
            rc = 2;
        else if ((fail_refused && rp.changes[PC_REPLAY_NEWLY_REFUSED] > 0) ||
                 (fail_allowed && rp.changes[PC_REPLAY_NEWLY_ALLOWED] > 0))
            rc = 1;
    }
    pc_replay_free(&rp);
    if (have_old)
        pc_decider_close(&old);
    pc_decider_close(&new_);
    return rc;
}
