/* bench_artifacts - put and get throughput of one large artifact through the
 * filesystem store, against cp(1) of the same file in the same run and on
 * the same filesystem. Prints figures and ratios; asserts nothing.
 *
 *   bench_artifacts [--size BYTES] [--dir DIR] [--runs N (default 3, best of)]
 *   PH_BENCH_ARTIFACT_BYTES=BYTES overrides the default size (1 GiB).
 * Target: put and get at >= 0.7x the rate of the like-for-like baseline,
 * each measured in the same run on the same file:
 *   put (read a file, SHA-256, write, fsync, publish)  vs  cp + fsync;
 *   get written to a file (read, verify, write(2))      vs  cp;
 *   get discarded (read and verify only)                vs  cat FILE > /dev/null.
 * The ratio against plain cp is printed for put as well, for reference.
 * PH_BENCH_S3_CONFIG=FILE adds the S3 rows (see s3_rows);
 * PH_BENCH_S3_SERVER_PIDS="PID ..." (the gateway's and the OSD's) adds the
 * CPU seconds each operation cost the client and each of those processes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_store.h"
#include "s3-int.h"
#include "store-int.h"

#include <openssl/evp.h>

#include "bench_util.h"

static int write_source(const char *path, uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    static uint64_t buf[1 << 17]; /* 1 MiB */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (uint64_t done = 0; done < size;) {
        for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17; /* xorshift: incompressible */
            buf[i] = x;
        }
        size_t n = size - done < sizeof buf ? (size_t)(size - done) : sizeof buf;
        if (write(fd, buf, n) != (ssize_t)n) {
            close(fd);
            return -1;
        }
        done += n;
    }
    return close(fd);
}

/* Runs argv (PATH searched) to completion, its stdout to /dev/null when
 * discard: its wall time, or -1 when it fails. */
static double timed_exec(const char *const argv[], bool discard)
{
    double t = bench_now_s();
    pid_t pid = fork();
    if (pid == 0) {
        if (discard) {
            int null = open("/dev/null", O_WRONLY);
            if (null < 0 || dup2(null, STDOUT_FILENO) < 0)
                _exit(126);
        }
        execvp(argv[0], (char *const *)(uintptr_t)argv); /* execvp does not write them */
        _exit(127);
    }
    if (pid < 0)
        return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return bench_now_s() - t;
}

/* Seconds `cp from to` took (to NULL: `cat from > /dev/null`), -1 on failure. */
static double run_cp(const char *from, const char *to)
{
    const char *const cp[] = {"cp", from, to, NULL}, *const cat[] = {"cat", from, NULL};
    return to ? timed_exec(cp, false) : timed_exec(cat, true);
}

static double fsync_file(const char *path)
{
    double t = bench_now_s();
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0)
        return -1;
    close(fd);
    return bench_now_s() - t;
}


/* ---- CPU seconds per operation (PH_BENCH_S3_SERVER_PIDS) ---- */

enum { OP_CURL_PUT, OP_CURL_GET, OP_PUT, OP_GET, OP_RAW, OP_COUNT };
#define CPU_PIDS 4

typedef struct cpu_log {
    int npids;
    pid_t pid[CPU_PIDS];
    char name[CPU_PIDS][32];
    double client[OP_COUNT], server[OP_COUNT][CPU_PIDS];
    int n[OP_COUNT];
} cpu_log;

typedef struct cpu_mark {
    double client, server[CPU_PIDS];
} cpu_mark;

static double rusage_s(int who)
{
    struct rusage r;
    getrusage(who, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static void cpu_log_init(cpu_log *c)
{
    memset(c, 0, sizeof *c);
    const char *env = getenv("PH_BENCH_S3_SERVER_PIDS");
    for (char *end; env && *env && c->npids < CPU_PIDS; env = end) {
        long pid = strtol(env, &end, 10);
        if (end == env)
            break;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/comm", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL || fgets(c->name[c->npids], sizeof c->name[0], f) == NULL) {
            if (f)
                fclose(f);
            continue;
        }
        fclose(f);
        c->name[c->npids][strcspn(c->name[c->npids], "\n")] = '\0';
        c->pid[c->npids++] = (pid_t)pid;
    }
}

/* This process and its waited-for children (curl), and each server. */
static void cpu_mark_now(const cpu_log *c, cpu_mark *m)
{
    m->client = rusage_s(RUSAGE_SELF) + rusage_s(RUSAGE_CHILDREN);
    for (int i = 0; c && i < c->npids; i++)
        m->server[i] = bench_proc_cpu_s(c->pid[i]);
}

static void cpu_record(cpu_log *c, int op, const cpu_mark *before)
{
    if (c == NULL || c->npids == 0)
        return;
    cpu_mark now;
    cpu_mark_now(c, &now);
    c->client[op] += now.client - before->client;
    for (int i = 0; i < c->npids; i++)
        c->server[op][i] += now.server[i] - before->server[i];
    c->n[op]++;
}

static void cpu_print(const cpu_log *c)
{
    static const char *const label[OP_COUNT] = {"curl PUT", "curl GET", "put", "get (verify)",
                                                "get, raw"};
    for (int op = 0; op < OP_COUNT && c->npids > 0; op++) {
        if (c->n[op] == 0)
            continue;
        printf("s3 cpu %-16s client %6.3f s", label[op], c->client[op] / c->n[op]);
        for (int i = 0; i < c->npids; i++)
            printf("  %s %6.3f s", c->name[i], c->server[op][i] / c->n[op]);
        printf("  (user+sys per operation, mean of %d)\n", c->n[op]);
    }
}

/* Opens ref and reads it to the end, each chunk written to fd (-1: dropped). */
static ph_status get_into(ph_artifact_store *store, const ph_artifact_ref *ref, int fd, ph_diag *d)
{
    static unsigned char buf[1 << 20];
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *s = NULL;
    ph_status st = ph_artifact_open(store, ref, &m, &s, d);
    for (size_t got = 1; st == PH_OK && got > 0;) {
        st = ph_artifact_stream_read(s, buf, sizeof buf, &got, d);
        if (st == PH_OK && got > 0 && fd >= 0 && write(fd, buf, got) != (ssize_t)got)
            st = PH_E_IO;
    }
    ph_artifact_stream_close(&s);
    ph_artifact_metadata_free(&m);
    return st;
}

/* Reads ref's content straight from the backend to the end, discarding it
 * and verifying nothing: the transfer alone, like curl -o /dev/null. */
static ph_status raw_get(ph_artifact_backend *b, const ph_artifact_ref *ref, ph_diag *d)
{
    static unsigned char buf[1 << 20];
    char key[PH_ARTIFACT_KEY_LEN + 1], *meta = NULL;
    size_t meta_len = 0;
    uint64_t size = 0;
    ph_artifact_backend_reader *r = NULL;
    ph_status st = ph_artifact_ref_key(ref, key, d);
    if (st == PH_OK)
        st = b->ops->open(b, key, &meta, &meta_len, &r, &size, d);
    for (size_t got = 1; st == PH_OK && got > 0;)
        st = b->ops->read(r, buf, sizeof buf, &got, d);
    if (r)
        b->ops->read_close(r);
    free(meta);
    return st;
}

/* Seconds one SHA-256 of size bytes takes in memory (1 MiB at a time). */
static double hash_cost(uint64_t size)
{
    static unsigned char buf[1 << 20];
    unsigned char md[EVP_MAX_MD_SIZE];
    memset(buf, 0x5a, sizeof buf);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    double t = bench_now_s();
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    for (uint64_t done = 0; done < size; done += sizeof buf)
        EVP_DigestUpdate(c, buf, size - done < sizeof buf ? (size_t)(size - done) : sizeof buf);
    EVP_DigestFinal_ex(c, md, NULL);
    t = bench_now_s() - t;
    EVP_MD_CTX_free(c);
    return t;
}

/* One put of src and one get of it into out, timed; the artifact is deleted.
 * raw (may be NULL): also the time of a raw_get through backend b.
 * cpu (may be NULL): the CPU seconds of put, get and raw get added to it. */
static ph_status put_and_get(ph_artifact_store *store, const char *src, const char *out,
                             double *t_put, double *t_get, double *t_get_file,
                             ph_artifact_backend *b, double *raw, cpu_log *cpu, ph_diag *d)
{
    cpu_mark mark;
    int fd = open(src, O_RDONLY);
    ph_artifact_source source = {.read = ph_artifact_read_fd, .ctx = &fd};
    ph_artifact_spec spec = {.tenant_id = "bench", .tenant_id_len = 5, .filename = "source.bin",
                             .filename_len = 10};
    ph_artifact_metadata *m = NULL;
    cpu_mark_now(cpu, &mark);
    double t = bench_now_s();
    ph_status st = ph_artifact_put(store, &spec, &source, &m, d);
    *t_put = bench_now_s() - t;
    cpu_record(cpu, OP_PUT, &mark);
    close(fd);
    if (st != PH_OK)
        return st;
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    cpu_mark_now(cpu, &mark);
    t = bench_now_s();
    st = get_into(store, &ref, -1, d); /* the store's own rate: read + verify */
    *t_get = bench_now_s() - t;
    cpu_record(cpu, OP_GET, &mark);
    int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    t = bench_now_s();
    if (st == PH_OK)
        st = ofd < 0 ? PH_E_IO : get_into(store, &ref, ofd, d);
    *t_get_file = bench_now_s() - t;
    if (raw && st == PH_OK) {
        cpu_mark_now(cpu, &mark);
        t = bench_now_s();
        st = raw_get(b, &ref, d);
        *raw = bench_now_s() - t;
        cpu_record(cpu, OP_RAW, &mark);
    }
    if (ofd >= 0)
        close(ofd);
    unlink(out);
    ph_artifact_delete(store, &ref, NULL);
    ph_artifact_metadata_free(&m);
    return st;
}

/* ---- S3 rows: PH_BENCH_S3_CONFIG=FILE (an S3 backend configuration, e.g.
 * on scripts/start-ceph-rgw.sh) adds put and get of the same file through
 * the S3 backend, against curl --aws-sigv4 uploading and downloading it to
 * the same bucket in the same run (the client floor). The store signs the
 * SHA-256 of the content while streaming (parts go as UNSIGNED-PAYLOAD
 * over https or loopback, docs/artifacts.md) and verifies it on get; curl
 * sends UNSIGNED-PAYLOAD and verifies nothing, so a raw backend get (no
 * verification) and the in-memory cost of the hash are printed too. */

/* Runs curl with the keys in a 0600 config file (never on the command line). */
static double run_curl(const ph_s3_config *c, const char *curl_cfg, const char *upload,
                       const char *object)
{
    char url[1024], sigv4[128];
    snprintf(url, sizeof url, "%s://%s/%s/%s", c->https ? "https" : "http", c->host, c->bucket,
             object);
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", c->region);
    const char *argv[16] = {"curl", "-sSf", "-K", curl_cfg, "--aws-sigv4", sigv4, "-H",
                            "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", "/dev/null"};
    int n = 10;
    if (upload) {
        argv[n++] = "-T";
        argv[n++] = upload;
    }
    argv[n++] = url;
    argv[n] = NULL;
    return timed_exec(argv, false);
}

static int s3_rows(const char *config, const char *work, const char *src, uint64_t size, int runs)
{
    ph_s3_config cfg;
    ph_diag d = {0};
    if (ph_s3_config_load(config, &cfg, &d) != PH_OK) {
        fprintf(stderr, "s3 config: %s\n", d.message);
        return 1;
    }
    char curl_cfg[4300];
    snprintf(curl_cfg, sizeof curl_cfg, "%s/curl.cfg", work);
    int fd = open(curl_cfg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dprintf(fd, "user = \"%s:%s\"\n", cfg.access_key, cfg.secret_key) < 0) {
        perror("curl config");
        return 1;
    }
    close(fd);
    ph_artifact_backend *b = NULL;
    ph_artifact_store *store = NULL;
    ph_artifact_store_options o = {.max_size = size};
    if (ph_s3_backend_open_config(&cfg, &b, &d) != PH_OK ||
        ph_artifact_store_new(b, &o, &store, &d) != PH_OK) {
        fprintf(stderr, "s3 store: %s\n", d.message);
        return 1;
    }
    double c_put = 1e30, c_get = 1e30, t_put = 1e30, t_get = 1e30, t_raw = 1e30, t_hash = 1e30;
    ph_status st = PH_OK;
    char out[4300];
    snprintf(out, sizeof out, "%s/s3get.bin", work);
    cpu_log cpu;
    cpu_log_init(&cpu);
    for (int run = 0; run < runs && st == PH_OK; run++) {
        cpu_mark mark;
        cpu_mark_now(&cpu, &mark);
        double cp = run_curl(&cfg, curl_cfg, src, "bench-curl.bin");
        cpu_record(&cpu, OP_CURL_PUT, &mark);
        cpu_mark_now(&cpu, &mark);
        double cg = run_curl(&cfg, curl_cfg, NULL, "bench-curl.bin");
        cpu_record(&cpu, OP_CURL_GET, &mark);
        if (cp <= 0 || cg <= 0) {
            fprintf(stderr, "curl --aws-sigv4 failed\n");
            st = PH_E_IO;
            break;
        }
        c_put = cp < c_put ? cp : c_put;
        c_get = cg < c_get ? cg : c_get;
        double p = 0, g = 0, gf = 0;
        double raw = 0;
        st = put_and_get(store, src, out, &p, &g, &gf, b, &raw, &cpu, &d);
        t_put = p < t_put ? p : t_put;
        t_get = g < t_get ? g : t_get;
        t_raw = raw < t_raw ? raw : t_raw;
        double h = hash_cost(size);
        t_hash = h < t_hash ? h : t_hash;
    }
    ph_artifact_store_close(&store);
    unlink(curl_cfg);
    if (st != PH_OK) {
        fprintf(stderr, "s3 failed: %s\n", d.message);
        return 1;
    }
    double mib = (double)size / (1 << 20);
    printf("s3 curl --aws-sigv4 PUT %8.1f MiB/s  (%.3f s)\n", mib / c_put, c_put);
    printf("s3 curl --aws-sigv4 GET %8.1f MiB/s  (%.3f s)\n", mib / c_get, c_get);
    printf("s3 put (multipart)      %8.1f MiB/s  (%.3f s)  %.2fx curl  (target >= 0.8x)\n",
           mib / t_put, t_put, c_put / t_put);
    printf("s3 get (sha256 verify)  %8.1f MiB/s  (%.3f s)  %.2fx curl  (target >= 0.8x)\n",
           mib / t_get, t_get, c_get / t_get);
    printf("s3 get, discarded raw   %8.1f MiB/s  (%.3f s)  %.2fx curl  (backend only, no verify: "
           "like curl -o /dev/null)\n",
           mib / t_raw, t_raw, c_get / t_raw);
    printf("sha256 in memory        %8.1f MiB/s  (%.3f s)  (the verification's own cost, one core)\n",
           mib / t_hash, t_hash);
    cpu_print(&cpu);
    return 0;
}

static void usage(void)
{
    puts("Usage: bench_artifacts [--size BYTES] [--dir DIR] [--runs N]\n"
         "Put and get of one artifact vs cp; default 1 GiB (PH_BENCH_ARTIFACT_BYTES).\n"
         "Exit status: 0 measured, 1 setup or store failure, 2 usage.");
}

int main(int argc, char **argv)
{
    uint64_t size = (uint64_t)1 << 30;
    const char *env = getenv("PH_BENCH_ARTIFACT_BYTES");
    if (env && *env)
        size = strtoull(env, NULL, 10);
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int runs = 3;
    static const struct option opts[] = {{"size", required_argument, NULL, 's'},
                                         {"runs", required_argument, NULL, 'n'},
                                         {"dir", required_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "s:d:n:h", opts, NULL)) != -1) {
        if (ch == 'n')
            runs = atoi(optarg);
        else if (ch == 's')
            size = strtoull(optarg, NULL, 10);
        else if (ch == 'd')
            dir = optarg;
        else if (ch == 'h')
            return usage(), 0;
        else
            return usage(), 2;
    }
    if (size == 0 || runs < 1)
        return usage(), 2;
    char work[4096], src[4200], cp_dst[4200], root[4200], out[4200], cmd[4300];
    snprintf(work, sizeof work, "%s/bench-artifacts-XXXXXX", dir);
    if (mkdtemp(work) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(src, sizeof src, "%s/source.bin", work);
    snprintf(cp_dst, sizeof cp_dst, "%s/cp.bin", work);
    snprintf(root, sizeof root, "%s/store", work);
    snprintf(out, sizeof out, "%s/get.bin", work);
    int rc = 1;
    if (write_source(src, size) != 0) {
        perror("write source");
        goto done;
    }
    double mib = (double)size / (1 << 20);
    ph_artifact_store_options o = {.max_size = size};
    ph_artifact_store *store = NULL;
    ph_diag d = {0};
    if (ph_artifact_store_open_fs(root, &o, &store, &d) != PH_OK) {
        fprintf(stderr, "setup failed: %s\n", d.message);
        goto done;
    }
    /* Best of `runs` for each figure: the machine is shared, the minimum is
     * the least disturbed measurement. */
    double t_cp = 1e30, t_sync = 1e30, t_cat = 1e30, t_put = 1e30, t_get = 1e30,
           t_get_file = 1e30;
    ph_status st = PH_OK;
    for (int run = 0; run < runs && st == PH_OK; run++) {
        double c = run_cp(src, cp_dst), y = fsync_file(cp_dst);
        unlink(cp_dst);
        if (c <= 0 || y < 0) {
            fprintf(stderr, "cp failed\n");
            st = PH_E_IO;
            break;
        }
        if (c + y < t_cp + t_sync) {
            t_cp = c;
            t_sync = y;
        }
        double k = run_cp(src, NULL);
        if (k <= 0) {
            fprintf(stderr, "cat failed\n");
            st = PH_E_IO;
            break;
        }
        t_cat = k < t_cat ? k : t_cat;
        double p = 0, g = 0, gf = 0;
        st = put_and_get(store, src, out, &p, &g, &gf, NULL, NULL, NULL, &d);
        t_put = p < t_put ? p : t_put;
        t_get = g < t_get ? g : t_get;
        t_get_file = gf < t_get_file ? gf : t_get_file;
    }
    ph_artifact_store_close(&store);
    if (st != PH_OK) {
        fprintf(stderr, "store failed: %s\n", d.message);
        goto done;
    }
    printf("runs                 %d (best of each)\n", runs);
    printf("size                 %.0f MiB\n", mib);
    printf("cp                   %8.1f MiB/s  (%.3f s)\n", mib / t_cp, t_cp);
    printf("cp + fsync           %8.1f MiB/s  (%.3f s)\n", mib / (t_cp + t_sync), t_cp + t_sync);
    printf("cat > /dev/null      %8.1f MiB/s  (%.3f s)\n", mib / t_cat, t_cat);
    printf("put (sha256, fsync)  %8.1f MiB/s  (%.3f s)  %.2fx cp+fsync  (target >= 0.7x)  "
           "[%.2fx plain cp]\n",
           mib / t_put, t_put, (t_cp + t_sync) / t_put, t_cp / t_put);
    printf("get -> file          %8.1f MiB/s  (%.3f s)  %.2fx cp  (target >= 0.7x; get + write(2) "
           "of a copy)\n",
           mib / t_get_file, t_get_file, t_cp / t_get_file);
    printf("get, discarded       %8.1f MiB/s  (%.3f s)  %.2fx cat > /dev/null  (target >= 0.7x; "
           "read + verify)\n",
           mib / t_get, t_get, t_cat / t_get);
    rc = 0;
    if (getenv("PH_BENCH_S3_CONFIG") && *getenv("PH_BENCH_S3_CONFIG"))
        rc = s3_rows(getenv("PH_BENCH_S3_CONFIG"), work, src, size, runs);
done:
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", work);
    return rc;
}
