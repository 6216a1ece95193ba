/* pinhole-artifacts - the filesystem artifact store from the command line:
 * put, get, stat, ls, rm, sweep. Results are JSON on stdout (one object per
 * line), errors are JSON lines on stderr. Manual: docs/artifacts.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_metadata.h"
#include "pinhole/artifact_name.h"
#include "pinhole/artifact_store.h"
#include "pinhole/file_atomic.h"
#include "pinhole/hex.h"
#include "pinhole/io.h"
#include "pinhole/version.h"

enum {
    EXIT_OK = 0,
    EXIT_NOT_FOUND = 1,
    EXIT_USAGE = 2,
    EXIT_REFUSED = 3,
    EXIT_CORRUPT = 4,
    EXIT_FAILURE_IO = 5,
};

static const char usage_text[] =
    "Usage: pinhole-artifacts [--root DIR | --backend s3 --s3-config FILE]\n"
    "                         COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Commands:\n"
    "  put  --tenant T FILE|-   store FILE (or stdin); prints the metadata\n"
    "       [--filename NAME] [--content-type TYPE] [--run-id ID]\n"
    "       [--source-path PATH] [--ttl SECONDS] [--max-size BYTES]\n"
    "  get  --tenant T ID       write the content to stdout, or with -O to the\n"
    "       [-O] [--output-dir DIR]  sanitized filename (never overwrites)\n"
    "  stat --tenant T ID       print the metadata\n"
    "  ls   [--tenant T]        print the metadata of every artifact\n"
    "  rm   --tenant T ID       delete\n"
    "  sweep [--now SECONDS]    delete expired artifacts and dead staging\n"
    "\n"
    "Options:\n"
    "  -r, --root DIR           store root (default $PINHOLE_ARTIFACTS_ROOT)\n"
    "      --backend fs|s3      where artifacts live (default fs)\n"
    "      --s3-config FILE     the S3 backend's configuration (docs/artifacts.md)\n"
    "  -t, --tenant T           tenant id (bytes as given)\n"
    "      --tenant-hex HEX     tenant id as lowercase hex (any bytes)\n"
    "  -h, --help               this text\n"
    "  -V, --version            the version\n"
    "\n"
    "Exit status: 0 success, 1 not found (absent, other tenant or expired),\n"
    "2 usage error, 3 input refused (malformed id, limit), 4 artifact corrupt,\n"
    "5 I/O or other failure.\n";

static int exit_for(ph_status st)
{
    switch (st) {
    case PH_OK: return EXIT_OK;
    case PH_E_NOT_FOUND: return EXIT_NOT_FOUND;
    case PH_E_INVAL: case PH_E_LIMIT: case PH_E_DENIED: return EXIT_REFUSED;
    case PH_E_FORMAT: return EXIT_CORRUPT;
    default: return EXIT_FAILURE_IO;
    }
}

/* One JSON error line on stderr; returns the exit code for st. */
static int report(ph_status st, const char *message)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "level", "error", "status", ph_strerror(st),
                          "message", message ? message : "");
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    fprintf(stderr, "%s\n", text ? text : "{\"level\":\"error\"}");
    free(text);
    json_decref(o);
    return exit_for(st);
}

static int usage_error(const char *message)
{
    report(PH_E_INVAL, message);
    fputs("Try 'pinhole-artifacts --help'.\n", stderr);
    return EXIT_USAGE;
}

typedef struct cli {
    const char *root;
    unsigned char *tenant;
    size_t tenant_len;
    ph_artifact_store *store;
} cli;

static int set_tenant_hex(cli *c, const char *hex)
{
    size_t n = strlen(hex);
    if (n == 0 || n % 2 != 0)
        return -1;
    free(c->tenant);
    c->tenant = malloc(n / 2);
    if (c->tenant == NULL || !ph_hex_decode(hex, n, c->tenant, NULL))
        return -1;
    c->tenant_len = n / 2;
    return 0;
}

static void set_tenant(cli *c, const char *t)
{
    free(c->tenant);
    c->tenant = (unsigned char *)strdup(t);
    c->tenant_len = strlen(t);
}

/* Prints m as one JSON line: the stored document plus the safe filename and
 * the Content-Disposition a server would send. */
static int print_metadata(const ph_artifact_metadata *m)
{
    char *doc = NULL;
    size_t len = 0;
    ph_diag d = {0};
    if (ph_artifact_metadata_encode(m, &doc, &len, &d) != PH_OK)
        return report(d.status, d.message);
    json_t *o = json_loadb(doc, len, JSON_ALLOW_NUL, NULL);
    free(doc);
    char safe[PH_FILENAME_SAFE_MAX + 1], cd[PH_CONTENT_DISPOSITION_MAX + 1];
    ph_artifact_safe_filename(m, safe);
    ph_artifact_content_disposition(m, cd);
    if (o == NULL || json_object_set_new(o, "safe_filename", json_string(safe)) != 0 ||
        json_object_set_new(o, "content_disposition", json_string(cd)) != 0) {
        json_decref(o);
        return report(PH_E_NOMEM, "cannot format metadata");
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text == NULL)
        return report(PH_E_NOMEM, "cannot format metadata");
    printf("%s\n", text);
    free(text);
    return EXIT_OK;
}

static int need_tenant(const cli *c)
{
    return c->tenant ? 0 : usage_error("--tenant or --tenant-hex is required");
}

static int make_ref(const cli *c, const char *id, ph_artifact_ref *ref)
{
    ph_diag d = {0};
    if (ph_artifact_ref_make(ref, c->tenant, c->tenant_len, id, strlen(id), &d) != PH_OK)
        return report(d.status, d.message);
    return EXIT_OK;
}

/* Handles -t/--tenant and --tenant-hex: 1 handled, 0 not a tenant option,
 * -1 malformed. */
static int tenant_option(cli *c, int ch)
{
    if (ch == 't') {
        set_tenant(c, optarg);
        return 1;
    }
    if (ch == 'T')
        return set_tenant_hex(c, optarg) == 0 ? 1 : -1;
    return 0;
}

/* Options of commands that take only a tenant (stat, rm, ls). */
static int parse_tenant_only(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"tenant", required_argument, NULL, 't'}, {"tenant-hex", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "t:", opts, NULL)) != -1)
        if (tenant_option(c, ch) != 1)
            return usage_error("bad option: wants --tenant T or --tenant-hex HEX");
    return EXIT_OK;
}

static int cmd_put(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"tenant", required_argument, NULL, 't'}, {"tenant-hex", required_argument, NULL, 'T'},
        {"filename", required_argument, NULL, 'f'}, {"content-type", required_argument, NULL, 'c'},
        {"run-id", required_argument, NULL, 'R'}, {"source-path", required_argument, NULL, 's'},
        {"ttl", required_argument, NULL, 'l'}, {"max-size", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0}};
    ph_artifact_spec spec = {0};
    const char *filename = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "t:", opts, NULL)) != -1) {
        char *end = NULL;
        switch (ch) {
        case 't': case 'T':
            if (tenant_option(c, ch) != 1)
                return usage_error("--tenant-hex wants lowercase hex");
            break;
        case 'f': filename = optarg; break;
        case 'c': spec.content_type = optarg; break;
        case 'R': spec.run_id = optarg; break;
        case 's': spec.source_path = optarg; break;
        case 'l':
            spec.ttl_seconds = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || spec.ttl_seconds <= 0)
                return usage_error("--ttl wants a positive number of seconds");
            break;
        case 'm':
            spec.max_size = strtoull(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || spec.max_size == 0)
                return usage_error("--max-size wants a positive number of bytes");
            break;
        default: return usage_error("unknown option for put");
        }
    }
    if (need_tenant(c) != 0)
        return EXIT_USAGE;
    if (optind + 1 != argc)
        return usage_error("put wants exactly one FILE (or - for stdin)");
    const char *path = argv[optind];
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return report(PH_E_IO, strerror(errno));
    if (filename == NULL && fd != STDIN_FILENO) {
        const char *slash = strrchr(path, '/');
        filename = slash ? slash + 1 : path;
    }
    spec.tenant_id = c->tenant;
    spec.tenant_id_len = c->tenant_len;
    spec.filename = filename;
    spec.filename_len = filename ? strlen(filename) : 0;
    ph_artifact_source src = {.read = ph_artifact_read_fd, .ctx = &fd};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    ph_status st = ph_artifact_put(c->store, &spec, &src, &m, &d);
    if (fd != STDIN_FILENO)
        close(fd);
    if (st != PH_OK)
        return report(st, d.message);
    int rc = print_metadata(m);
    ph_artifact_metadata_free(&m);
    return rc;
}

static ph_status write_all(int fd, const void *buf, size_t len)
{
    return ph_write_all(fd, buf, len) == 0 ? PH_OK : PH_E_IO;
}

/* Streams the artifact into fd; PH_OK only at the verified end. */
static ph_status copy_out(ph_artifact_stream *s, int fd, ph_diag *d)
{
    static unsigned char buf[256 * 1024];
    for (;;) {
        size_t got = 0;
        ph_status st = ph_artifact_stream_read(s, buf, sizeof buf, &got, d);
        if (st != PH_OK || got == 0)
            return st;
        if (write_all(fd, buf, got) != PH_OK) {
            snprintf(d->message, sizeof d->message, "write: %s", strerror(errno));
            return d->status = PH_E_IO;
        }
    }
}

/* -O: a temporary file beside the target, renamed into place only after the
 * stream verified, and never over an existing file. */
static int get_to_file(ph_artifact_stream *s, const ph_artifact_metadata *m, const char *dir)
{
    char safe[PH_FILENAME_SAFE_MAX + 1], final[4096];
    ph_artifact_safe_filename(m, safe);
    /* A cut path would name another file (a shorter name, or another
     * directory): refused. */
    if ((size_t)snprintf(final, sizeof final, "%s/%s", dir, safe) >= sizeof final)
        return report(PH_E_LIMIT, "output path too long");
    ph_diag d = {0};
    ph_atomic_file af;
    ph_status st = ph_atomic_file_begin(&af, final, 0600, &d);
    if (st != PH_OK)
        return report(st, d.message);
    st = copy_out(s, af.fd, &d);
    if (st != PH_OK) {
        ph_atomic_file_abort(&af);
        return report(st, d.message);
    }
    if (ph_atomic_file_commit(&af, PH_WRITE_NO_REPLACE, &d) != PH_OK)
        return report(errno == EEXIST ? PH_E_INVAL : PH_E_IO, d.message);
    /* An output directory that is not UTF-8 (json_string refuses it) is
     * reported as written_hex, never dropped from the line. */
    json_t *o = json_pack("{s:s}", "artifact_id", m->artifact_id);
    json_t *w = json_string(final);
    const char *key = "written";
    if (w == NULL) {
        char hex[2 * sizeof final + 1];
        ph_hex_encode(final, strlen(final), hex);
        w = json_string(hex);
        key = "written_hex";
    }
    if (o != NULL)
        json_object_set_new(o, key, w); /* takes w, NULL included */
    else
        json_decref(w);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(o);
    return EXIT_OK;
}

static int cmd_get(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"tenant", required_argument, NULL, 't'}, {"tenant-hex", required_argument, NULL, 'T'},
        {"remote-name", no_argument, NULL, 'O'}, {"output-dir", required_argument, NULL, 'd'},
        {NULL, 0, NULL, 0}};
    bool to_file = false;
    const char *dir = ".";
    int ch;
    while ((ch = getopt_long(argc, argv, "t:Od:", opts, NULL)) != -1) {
        switch (ch) {
        case 't': case 'T':
            if (tenant_option(c, ch) != 1)
                return usage_error("--tenant-hex wants lowercase hex");
            break;
        case 'O': to_file = true; break;
        case 'd': dir = optarg; to_file = true; break;
        default: return usage_error("unknown option for get");
        }
    }
    if (need_tenant(c) != 0)
        return EXIT_USAGE;
    if (optind + 1 != argc)
        return usage_error("get wants exactly one artifact ID");
    ph_artifact_ref ref;
    int rc = make_ref(c, argv[optind], &ref);
    if (rc != EXIT_OK)
        return rc;
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *s = NULL;
    ph_diag d = {0};
    ph_status st = ph_artifact_open(c->store, &ref, &m, &s, &d);
    if (st != PH_OK)
        return report(st, d.message);
    if (to_file) {
        rc = get_to_file(s, m, dir);
    } else {
        st = copy_out(s, STDOUT_FILENO, &d);
        rc = st == PH_OK ? EXIT_OK : report(st, d.message);
    }
    ph_artifact_stream_close(&s);
    ph_artifact_metadata_free(&m);
    return rc;
}

/* stat and rm: a tenant and one id. */
static int cmd_one(cli *c, int argc, char **argv, bool remove)
{
    if (parse_tenant_only(c, argc, argv) != EXIT_OK)
        return EXIT_USAGE;
    if (need_tenant(c) != 0)
        return EXIT_USAGE;
    if (optind + 1 != argc)
        return usage_error("wants exactly one artifact ID");
    ph_artifact_ref ref;
    int rc = make_ref(c, argv[optind], &ref);
    if (rc != EXIT_OK)
        return rc;
    ph_diag d = {0};
    if (remove) {
        ph_status st = ph_artifact_delete(c->store, &ref, &d);
        if (st != PH_OK)
            return report(st, d.message);
        printf("{\"deleted\":\"%s\"}\n", ref.artifact_id);
        return EXIT_OK;
    }
    ph_artifact_metadata *m = NULL;
    ph_status st = ph_artifact_open(c->store, &ref, &m, NULL, &d);
    if (st != PH_OK)
        return report(st, d.message);
    rc = print_metadata(m);
    ph_artifact_metadata_free(&m);
    return rc;
}

static bool ls_visit(void *arg, const ph_artifact_metadata *m)
{
    const cli *c = arg;
    if (c->tenant == NULL ||
        (m->tenant_id_len == c->tenant_len && memcmp(m->tenant_id, c->tenant, c->tenant_len) == 0))
        print_metadata(m);
    return true;
}

static int cmd_ls(cli *c, int argc, char **argv)
{
    if (parse_tenant_only(c, argc, argv) != EXIT_OK)
        return EXIT_USAGE;
    if (optind != argc)
        return usage_error("ls takes no arguments");
    ph_diag d = {0};
    ph_status st = ph_artifact_list(c->store, ls_visit, c, &d);
    return st == PH_OK ? EXIT_OK : report(st, d.message);
}

static int cmd_sweep(cli *c, int argc, char **argv)
{
    static const struct option opts[] = {{"now", required_argument, NULL, 'n'},
                                         {NULL, 0, NULL, 0}};
    int64_t now = (int64_t)time(NULL);
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        if (ch != 'n')
            return usage_error("bad option");
        now = strtoll(optarg, &end, 10);
        if (*optarg == '\0' || *end != '\0' || now < 0)
            return usage_error("--now wants unix seconds");
    }
    if (optind != argc)
        return usage_error("sweep takes no arguments");
    ph_artifact_sweep_stats s;
    ph_diag d = {0};
    ph_status st = ph_artifact_sweep(c->store, now, &s, &d);
    if (st != PH_OK)
        return report(st, d.message);
    printf("{\"now\":%lld,\"examined\":%llu,\"expired\":%llu,\"unreadable\":%llu,"
           "\"staging_removed\":%llu}\n",
           (long long)now, (unsigned long long)s.examined, (unsigned long long)s.expired,
           (unsigned long long)s.unreadable, (unsigned long long)s.staging_removed);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"root", required_argument, NULL, 'r'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'}, {"backend", required_argument, NULL, 'B'},
        {"s3-config", required_argument, NULL, 'S'}, {NULL, 0, NULL, 0}};
    const char *backend = "fs", *s3_config = NULL;
    cli c = {.root = getenv("PINHOLE_ARTIFACTS_ROOT")};
    int ch;
    /* '+': stop at the command; its own options are parsed after it. */
    while ((ch = getopt_long(argc, argv, "+r:hV", opts, NULL)) != -1) {
        switch (ch) {
        case 'r': c.root = optarg; break;
        case 'B': backend = optarg; break;
        case 'S': s3_config = optarg; break;
        case 'h': fputs(usage_text, stdout); return EXIT_OK;
        case 'V': printf("pinhole-artifacts %s\n", ph_version()); return EXIT_OK;
        default: return usage_error("unknown option");
        }
    }
    if (optind >= argc)
        return usage_error("no command");
    bool s3 = strcmp(backend, "s3") == 0;
    if (!s3 && strcmp(backend, "fs") != 0)
        return usage_error("--backend wants fs or s3");
    if (s3 && s3_config == NULL)
        return usage_error("--backend s3 wants --s3-config FILE");
    if (!s3 && s3_config != NULL)
        return usage_error("--s3-config goes with --backend s3");
    if (!s3 && (c.root == NULL || *c.root == '\0'))
        return usage_error("no store root: pass --root or set PINHOLE_ARTIFACTS_ROOT");
    const char *cmd = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* glibc: re-initialize getopt for the command's options */
    if (strcmp(cmd, "put") && strcmp(cmd, "get") && strcmp(cmd, "stat") && strcmp(cmd, "ls") &&
        strcmp(cmd, "rm") && strcmp(cmd, "sweep"))
        return usage_error("unknown command");
    ph_diag d = {0};
    if (s3) {
        ph_artifact_backend *b = NULL;
        if (ph_artifact_backend_s3_open(s3_config, &b, &d) != PH_OK ||
            ph_artifact_store_new(b, NULL, &c.store, &d) != PH_OK)
            return report(d.status, d.message);
    } else if (ph_artifact_store_open_fs(c.root, NULL, &c.store, &d) != PH_OK) {
        return report(d.status, d.message);
    }
    int rc;
    if (strcmp(cmd, "put") == 0)
        rc = cmd_put(&c, sub_argc, sub_argv);
    else if (strcmp(cmd, "get") == 0)
        rc = cmd_get(&c, sub_argc, sub_argv);
    else if (strcmp(cmd, "stat") == 0)
        rc = cmd_one(&c, sub_argc, sub_argv, false);
    else if (strcmp(cmd, "rm") == 0)
        rc = cmd_one(&c, sub_argc, sub_argv, true);
    else if (strcmp(cmd, "ls") == 0)
        rc = cmd_ls(&c, sub_argc, sub_argv);
    else
        rc = cmd_sweep(&c, sub_argc, sub_argv);
    ph_artifact_store_close(&c.store);
    free(c.tenant);
    if (fflush(stdout) != 0 && rc == EXIT_OK)
        rc = report(PH_E_IO, "cannot write to stdout");
    return rc;
}
