/* cmd_revoke.c - pinhole-guard revoke: adds a lease to a revocation list
 * (pinhole/revocation.h, docs/grants.md) atomically, so every proxy that
 * reloads the file refuses the lease's grants from then on. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/file_atomic.h"
#include "pinhole/grant.h"
#include "pinhole/revocation.h"
#include "tools.h"

/* The default lifetime of an entry: the longest grant `pinhole-guard grant
 * issue` makes (--ttl at most 366 days), plus the clock skew verification
 * tolerates, so the entry outlives every such grant issued until now. */
#define REVOKE_DEFAULT_S (366LL * 24 * 3600 + PH_GRANT_CLOCK_SKEW_SECONDS)

static void revoke_usage(FILE *out)
{
    fputs("Usage: pinhole-guard revoke --tenant T --lease L [--until UNIX] --file FILE\n"
          "Adds (T, L) to the revocation list FILE, atomically (temporary file, fsync,\n"
          "rename); FILE is created (mode 0644) when it does not exist. Proxies started\n"
          "with --revocations FILE refuse the lease's grants (407 lease_revoked) and end\n"
          "its connections at their next reload (SIGHUP or POST /reload).\n"
          "  -t, --tenant T   the grant's tenant, 1..64 of [A-Za-z0-9._-]\n"
          "  -l, --lease L    the grant's lease, 1..64 of [A-Za-z0-9._-]\n"
          "  -u, --until UNIX when the entry lapses, unix seconds (default: now + 366 days\n"
          "                   + 30 s, past the longest grant 'grant issue' makes); an\n"
          "                   entry already there keeps the later of the two\n"
          "  -f, --file FILE  the revocation list\n"
          "  -h, --help       this text\n"
          "Entries already lapsed are dropped when the file is written. Prints one JSON\n"
          "line: tenant, lease, until, in_force, file, entries (the live ones written).\n"
          "Exit status: 0 done, 2 usage error or an unusable file (left unchanged).\n",
          out);
}

/* Serializes writers of one list: a lock on its directory (a lock on the
 * file would be on the inode the rename replaces). -1 on failure. */
static int lock_dir(const char *file)
{
    char *copy = strdup(file);
    if (copy == NULL)
        return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int pg_cmd_revoke(int argc, char **argv)
{
    static const struct option opts[] = {
        {"tenant", required_argument, NULL, 't'}, {"lease", required_argument, NULL, 'l'},
        {"until", required_argument, NULL, 'u'},  {"file", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *tenant = NULL, *lease = NULL, *file = NULL;
    int64_t now = (int64_t)time(NULL);
    unsigned long long until = (unsigned long long)(now + REVOKE_DEFAULT_S);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:l:u:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 't': tenant = optarg; break;
        case 'l': lease = optarg; break;
        case 'f': file = optarg; break;
        case 'u':
            if (!pg_parse_uint(optarg, 0, (unsigned long long)PH_GRANT_TIME_MAX, &until)) {
                pg_error("--until takes unix seconds, 0..%" PRId64, (int64_t)PH_GRANT_TIME_MAX);
                return EXIT_USAGE;
            }
            break;
        case 'h': revoke_usage(stdout); return EXIT_ALLOWED;
        default: revoke_usage(stderr); return EXIT_USAGE;
        }
    }
    if (tenant == NULL || lease == NULL || file == NULL || optind != argc) {
        pg_error("revoke needs --tenant, --lease and --file (and nothing else)");
        revoke_usage(stderr);
        return EXIT_USAGE;
    }
    int lock = lock_dir(file);
    if (lock < 0) {
        pg_error("%s: cannot lock its directory: %s", file, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = EXIT_USAGE;
    ph_revocations *r = NULL;
    char *text = NULL;
    size_t len = 0;
    ph_diag d = { 0 };
    ph_status st = ph_revocations_load_file(file, &r, &d);
    if (st == PH_E_NOT_FOUND)
        st = ph_revocations_new(&r, &d);
    if (st == PH_OK)
        st = ph_revocations_add(r, tenant, lease, (int64_t)until, &d);
    if (st == PH_OK)
        st = ph_revocations_format(r, now, &text, &len, &d);
    if (st == PH_OK) {
        static const char head[] = "# pinhole revocation list (docs/grants.md): TENANT LEASE UNTIL\n";
        size_t hl = sizeof head - 1;
        char *out = malloc(hl + len + 1);
        if (out == NULL) {
            st = ph_diag_set(&d, PH_E_NOMEM, 0, "out of memory");
        } else {
            memcpy(out, head, hl);
            memcpy(out + hl, text, len);
            st = ph_file_write_atomic(file, out, hl + len, 0644, PH_WRITE_REPLACE, &d);
            free(out);
        }
    }
    if (st != PH_OK) {
        pg_error("%s", d.message);
    } else {
        size_t live = 0; /* the entries written: one a line */
        for (size_t i = 0; i < len; i++)
            live += text[i] == '\n';
        pg_print_json(json_pack("{s:s, s:s, s:I, s:b, s:s, s:I}", "tenant", tenant, "lease", lease,
                                "until", (json_int_t)until, "in_force", (int64_t)until > now,
                                "file", file, "entries", (json_int_t)live));
        rc = EXIT_ALLOWED;
    }
    free(text);
    ph_revocations_free(&r);
    close(lock); /* releases the lock */
    return rc;
}
