/* test_execd.c - pinhole-execd as a daemon (docs/execd.md), on the fake
 * mechanism: each test starts its own daemon on a private socket and state
 * directory, talks to it through the client library or raw frames, and
 * stops it. What is asserted: who may connect, that another identity or
 * tenant cannot tell an object exists, the limits answering `busy`, restart
 * recovery, the command of a vanished client being killed, leases through
 * the service, and the refusals to start. */
#include "sandbox_test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <linux/sockios.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "execd-int.h"
#include "pinhole/clock.h"
#include "pinhole/execd_client.h"

typedef struct xdaemon {
    char *dir;
    char sock[256];
    char state[256];
    char log[256];
    pid_t pid;
} xdaemon;

/* The daemons of the running test: a failed assertion jumps out of the test
 * past its daemon_stop, so the teardown (stop_left) stops and reaps what is
 * still here, and a daemon whose test process dies gets SIGTERM
 * (PR_SET_PDEATHSIG). Each dir is the xdaemon's own string; the entry owns
 * it until daemon_stop or stop_left frees it. */
#define LIVE_MAX 4
static struct {
    char *dir;
    pid_t pid;
} g_live[LIVE_MAX];

static int live_slot(const char *dir)
{
    for (int i = 0; i < LIVE_MAX; i++)
        if (g_live[i].dir == dir)
            return i;
    fail_msg("more than %d daemons in one test", LIVE_MAX);
    return -1;
}

/* Stops pid if it is still our running child (SIGTERM; SIGKILL after
 * 10 s) and reaps it. Its wait status, or -1 when it was reaped before
 * (then the pid may be another process's: it is not signalled). */
static int reap(pid_t pid)
{
    int status;
    pid_t r = pid > 0 ? waitpid(pid, &status, WNOHANG) : -1;
    if (r != 0)
        return r == pid ? status : -1;
    kill(pid, SIGTERM);
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        usleep(10 * 1000);
    }
    kill(pid, SIGKILL);
    return waitpid(pid, &status, 0) == pid ? status : -1;
}

static void live_end(int i)
{
    int status = reap(g_live[i].pid);
    (void)status;
    ph_test_rmtree(g_live[i].dir);
    free(g_live[i].dir);
    g_live[i].dir = NULL;
    g_live[i].pid = 0;
}

static int stop_left(void **state)
{
    (void)state;
    for (int i = 0; i < LIVE_MAX; i++)
        if (g_live[i].dir != NULL)
            live_end(i);
    return 0;
}

/* A fresh directory for one daemon: socket, state directory, log. */
static void daemon_prepare(xdaemon *d)
{
    memset(d, 0, sizeof *d);
    d->dir = ph_test_mkdtemp();
    assert_non_null(d->dir);
    g_live[live_slot(NULL)].dir = d->dir;
    chmod(d->dir, 0755);
    snprintf(d->sock, sizeof d->sock, "%s/execd.sock", d->dir);
    snprintf(d->state, sizeof d->state, "%s/state", d->dir);
    snprintf(d->log, sizeof d->log, "%s/execd.log", d->dir);
}

/* Starts pinhole-execd on d with the extra options and environment (both
 * NULL-terminated; PATH is always set, nothing else is inherited). Returns
 * -1 once it listens, or its exit status when it exits instead. fresh: what
 * d->sock holds is removed first, and the daemon listens once the path
 * exists; else the path is left as it is (another daemon's socket, a stale
 * one, a file) and the daemon listens once its log (emptied first) says so. */
/* Whether d's log holds what. */
static bool log_has(const xdaemon *d, const char *what)
{
    size_t len;
    char *log = ph_test_read_file(d->log, &len);
    bool has = log != NULL && strstr(log, what) != NULL;
    free(log);
    return has;
}

static int daemon_spawn_at(xdaemon *d, const char *const *extra, const char *const *env,
                           bool fresh)
{
    char a_sock[300], a_state[300];
    snprintf(a_sock, sizeof a_sock, "--socket=%s", d->sock);
    snprintf(a_state, sizeof a_state, "--state-dir=%s", d->state);
    /* execve wants mutable strings: copies, freed by the exec or the exit. */
    char *argv[40] = {strdup(PH_EXECD_BINARY), strdup(a_sock), strdup(a_state),
                      strdup("--mechanism=fake"), strdup("--mode=development")};
    size_t n = 5;
    for (size_t i = 0; extra && extra[i] && n < 38; i++)
        argv[n++] = strdup(extra[i]);
    argv[n] = NULL;
    char *envp[16] = {
        strdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")};
    size_t m = 1;
    for (size_t i = 0; env && env[i] && m < 15; i++)
        envp[m++] = strdup(env[i]);
    envp[m] = NULL;
    if (fresh)
        unlink(d->sock); /* a previous daemon's: "listening" means this one's */
    else if (truncate(d->log, 0) != 0 && errno != ENOENT)
        fail_msg("truncate %s: %s", d->log, strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(127);
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        dup2(null, 0);
        dup2(null, 1); /* never ctest's pipe: a leftover daemon would hold it */
        dup2(fd, 2);
        execve(PH_EXECD_BINARY, argv, envp);
        _exit(127);
    }
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    for (size_t i = 0; i < m; i++)
        free(envp[i]);
    d->pid = g_live[live_slot(d->dir)].pid = pid;
    /* By the clock: a refused start comes after the daemon's wait for a
     * lock or socket to be released (3 s). */
    for (int64_t end = ph_monotonic_ms() + 30000; ph_monotonic_ms() < end;) {
        struct stat st;
        if (fresh ? stat(d->sock, &st) == 0 : log_has(d, "\"event\":\"listening\""))
            return -1;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            d->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        usleep(25 * 1000);
    }
    fail_msg("pinhole-execd neither listened nor exited");
    return 0;
}

static int daemon_spawn(xdaemon *d, const char *const *extra, const char *const *env)
{
    return daemon_spawn_at(d, extra, env, true);
}

static void daemon_start(xdaemon *d, const char *const *extra)
{
    daemon_prepare(d);
    const char *const allow[] = {"--allow-uid=0", NULL};
    const char *opts[32];
    size_t n = 0;
    for (size_t i = 0; allow[i]; i++)
        opts[n++] = allow[i];
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        opts[n++] = extra[i];
    opts[n] = NULL;
    int rc = daemon_spawn(d, opts, NULL);
    if (rc != -1) {
        size_t len;
        char *log = ph_test_read_file(d->log, &len);
        fail_msg("pinhole-execd exited %d: %s", rc, log ? log : "");
    }
}

static int daemon_stop(xdaemon *d)
{
    int i = live_slot(d->dir);
    int status = d->pid > 0 ? reap(d->pid) : -1;
    /* A sanitizer build's report fails the test, whatever the exit. */
    size_t len;
    char *log = ph_test_read_file(d->log, &len);
    bool report = log && (strstr(log, "Sanitizer") || strstr(log, "runtime error:"));
    if (report)
        fprintf(stderr, "%s\n", log);
    free(log);
    if (report) {
        g_live[i].pid = 0;
        live_end(i);
        d->dir = NULL;
        fail_msg("pinhole-execd reported a sanitizer error (above)");
    }
    g_live[i].pid = 0;
    live_end(i);
    d->dir = NULL;
    d->pid = 0;
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static size_t env_dirs(const char *state)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s 2>/dev/null | grep -c '^env-'", state);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (p && fscanf(p, "%zu", &n) != 1)
        n = 0;
    if (p)
        pclose(p);
    return n;
}

/* ---- raw frames ---- */

static int raw_connect(const xdaemon *d)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, d->sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0)
        return -1;
    return fd;
}

/* Sends req (consumed) and returns the response (new) or NULL at EOF. */
static json_t *raw_call(int fd, json_t *req)
{
    json_t *resp = NULL;
    int rc = ph_wire_send(fd, req);
    json_decref(req);
    if (rc == 0)
        (void)ph_wire_recv(fd, PH_EXECD_MAX_RESPONSE_BYTES, &resp);
    return resp;
}

static int raw_hello(const xdaemon *d)
{
    int fd = raw_connect(d);
    assert_true(fd >= 0);
    json_t *r = raw_call(fd, json_pack("{s:s}", "op", "hello"));
    assert_non_null(r);
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    return fd;
}

static char *raw_create(int fd, const char *tenant)
{
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.create", "tenant",
                                       tenant, "lease", "lease-1"));
    assert_non_null(r);
    if (!json_is_true(json_object_get(r, "ok")))
        fail_msg("create: %s", ph_wire_str(r, "message"));
    char *id = strdup(ph_wire_str(r, "environment"));
    json_decref(r);
    return id;
}

/* A workspace id (new) on tenant t1's environment env. */
static char *raw_workspace(int fd, const char *env)
{
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.workspace",
                                       "tenant", "t1", "environment", env));
    assert_true(json_is_true(json_object_get(r, "ok")));
    char *ws = strdup(ph_wire_str(r, "workspace"));
    json_decref(r);
    return ws;
}

static json_t *raw_execute_req(const char *tenant, const char *env, const char *const *argv)
{
    json_t *a = json_array();
    for (size_t i = 0; argv[i]; i++)
        json_array_append_new(a, json_string(argv[i]));
    return json_pack("{s:s, s:s, s:s, s:o}", "op", "environment.execute", "tenant", tenant,
                     "environment", env, "argv", a);
}

static const char *error_of(const json_t *r)
{
    return r ? ph_wire_str(r, "error") : "eof";
}

/* ---- the operation table (wire_ops.c) against the daemon ---- */

/* The objects a row's NAME fields name: made fresh for each row (its
 * baseline request may end them). */
typedef struct table_objs {
    char env[PH_EXECD_ID_MAX];
    char ws[PH_EXECD_ID_MAX];
    char lease[PH_EXECD_ID_MAX];
} table_objs;

static void b64_of(const ph_wire_field *f, char out[static 64])
{
    snprintf(out, 64, "%s_base64", f->key);
}

/* Sets a valid value of f in obj: the objects' names, a mechanism this
 * daemon runs, defaults, one-element lists of valid members. */
static void put_sample(json_t *obj, const ph_wire_field *f, const table_objs *o)
{
    char b64[64];
    b64_of(f, b64);
    json_t *v = NULL;
    switch (f->type) {
    case PH_WT_NAME:
        v = json_string(strcmp(f->key, "environment") == 0 ? o->env
                        : strcmp(f->key, "workspace") == 0 ? o->ws
                        : strcmp(f->key, "handle") == 0    ? o->lease
                                                           : "t1");
        break;
    case PH_WT_TEXT:
        v = json_string(strcmp(f->key, "mechanism") == 0 ? "fake"
                        : strcmp(f->key, "name") == 0    ? "PH_TABLE_SAMPLE"
                                                         : "t1");
        break;
    case PH_WT_FLAG: v = json_true(); break;
    case PH_WT_INT:
        /* A default no value has (chunk_bytes: not streamed) is the
         * field's absence. */
        if (f->dflt < f->min || f->dflt > f->max)
            return;
        v = json_integer(f->dflt);
        break;
    case PH_WT_BYTES: v = json_string("a.txt"); break;
    case PH_WT_BINARY: json_object_set_new(obj, b64, json_string("aGk=")); return;
    case PH_WT_ARGV: v = json_pack("[s]", "true"); break;
    case PH_WT_OBJECT:
    case PH_WT_LIST:
        v = json_object();
        for (const ph_wire_field *const *m = f->sub; *m; m++)
            if ((*m)->flags & PH_WF_REQUIRED)
                put_sample(v, *m, o);
        if (f->type == PH_WT_LIST)
            v = json_pack("[o]", v);
        break;
    }
    json_object_set_new(obj, f->key, v);
}

/* The request every mutation starts from: every field but the optional
 * byte strings and flags (a cwd or a stream would change what the command
 * does), each valid. */
static json_t *table_baseline(ph_wire_op_id op, const table_objs *o)
{
    json_t *req = json_pack("{s:s}", "op", ph_wire_ops[op].name);
    for (const ph_wire_field *const *f = ph_wire_ops[op].req; *f; f++) {
        bool optional_bytes = !((*f)->flags & PH_WF_REQUIRED) &&
                              ((*f)->type == PH_WT_BYTES || (*f)->type == PH_WT_BINARY);
        if (!optional_bytes && (*f)->type != PH_WT_FLAG)
            put_sample(req, *f, o);
    }
    return req;
}

/* One bad form of a field: the members to set in its container once the
 * field's own keys are removed (none: the field absent), and the message
 * of the refusal (NULL: a NAME that names nothing, `not_found`). */
typedef struct table_bad {
    json_t *patch;
    const char *msg;
} table_bad;
#define TABLE_BAD_MAX 64

static void bad_add(table_bad *out, size_t *n, json_t *patch, const char *msg)
{
    assert_true(*n < TABLE_BAD_MAX);
    out[(*n)++] = (table_bad){patch, msg};
}

/* Every bad form of f (a member of an object or list when outer is its
 * enclosing field's message), generated from its type and limits. */
static size_t table_bad_forms(const ph_wire_field *f, const char *outer, const table_objs *o,
                              table_bad *out)
{
    const char *msg = f->msg ? f->msg : outer;
    const char *k = f->key;
    char b64[64];
    b64_of(f, b64);
    size_t n = 0;
    if (f->flags & PH_WF_REQUIRED)
        bad_add(out, &n, json_object(), f->type == PH_WT_NAME ? NULL : f->missing ? f->missing : msg);
    switch (f->type) {
    case PH_WT_NAME: bad_add(out, &n, json_pack("{s:i}", k, 5), NULL); break;
    case PH_WT_TEXT:
        if (f->flags & PH_WF_REQUIRED)
            bad_add(out, &n, json_pack("{s:i}", k, 5), msg);
        break;
    case PH_WT_FLAG: break; /* anything but true is false */
    case PH_WT_INT:
        bad_add(out, &n, json_pack("{s:s}", k, "1"), msg);
        bad_add(out, &n, json_pack("{s:f}", k, 1.5), msg);
        bad_add(out, &n, json_pack("{s:b}", k, 1), msg);
        if (f->min > INT64_MIN)
            bad_add(out, &n, json_pack("{s:I}", k, (json_int_t)(f->min - 1)), msg);
        if (f->max < INT64_MAX)
            bad_add(out, &n, json_pack("{s:I}", k, (json_int_t)(f->max + 1)), msg);
        break;
    case PH_WT_BYTES:
    case PH_WT_BINARY:
        bad_add(out, &n, json_pack("{s:i}", k, 5), msg);
        bad_add(out, &n, json_pack("{s:n}", b64, 5), msg);
        bad_add(out, &n, json_pack("{s:s}", b64, "a@=="), msg);
        bad_add(out, &n, json_pack("{s:s, s:s}", k, "a", b64, "YQ=="), msg);
        /* (A NUL in a JSON string never gets past the frame parser.) */
        if (f->flags & PH_WF_NO_NUL)
            bad_add(out, &n, json_pack("{s:s}", b64, "YQBi"), msg);
        break;
    case PH_WT_ARGV: {
        bad_add(out, &n, json_pack("{s:s}", k, "true"), msg);
        bad_add(out, &n, json_pack("{s:[i]}", k, 5), msg);
        bad_add(out, &n, json_pack("{s:[{s:s}]}", k, "base64", "a@=="), msg);
        bad_add(out, &n, json_pack("{s:[{s:s}]}", k, "base64", "YQBi"), msg);
        if (f->min > 0)
            bad_add(out, &n, json_pack("{s:[]}", k), msg);
        json_t *many = json_array();
        for (int64_t i = 0; i <= f->max; i++)
            json_array_append_new(many, json_string("x"));
        bad_add(out, &n, json_pack("{s:o}", k, many), msg);
        break;
    }
    case PH_WT_OBJECT:
    case PH_WT_LIST: {
        bool list = f->type == PH_WT_LIST;
        bad_add(out, &n, json_pack("{s:i}", k, 5), msg);
        bad_add(out, &n, json_pack("{s:n}", k), msg);
        bad_add(out, &n, json_pack(list ? "{s:{}}" : "{s:[]}", k), msg);
        if (list) {
            json_t *many = json_array();
            for (int64_t i = 0; i <= f->max; i++) {
                json_t *item = json_object();
                for (const ph_wire_field *const *m = f->sub; *m; m++)
                    if ((*m)->flags & PH_WF_REQUIRED)
                        put_sample(item, *m, o);
                json_array_append_new(many, item);
            }
            bad_add(out, &n, json_pack("{s:o}", k, many), msg);
        }
        /* Each member's bad forms, inside an otherwise valid value. */
        for (const ph_wire_field *const *m = f->sub; *m; m++) {
            table_bad sub[TABLE_BAD_MAX];
            size_t sn = table_bad_forms(*m, msg, o, sub);
            for (size_t i = 0; i < sn; i++) {
                json_t *item = json_object();
                for (const ph_wire_field *const *s = f->sub; *s; s++)
                    if (*s != *m && ((*s)->flags & PH_WF_REQUIRED))
                        put_sample(item, *s, o);
                json_object_update(item, sub[i].patch);
                json_decref(sub[i].patch);
                bad_add(out, &n, json_pack("{s:o}", k, list ? json_pack("[o]", item) : item),
                        sub[i].msg);
            }
        }
        break;
    }
    }
    return n;
}

/* Whether msg is a refusal message of fields (members included). */
static bool table_says(const ph_wire_field *const *fields, const char *outer, const char *msg)
{
    for (const ph_wire_field *const *f = fields; f && *f; f++) {
        const char *m = (*f)->msg ? (*f)->msg : outer;
        if ((m && strcmp(m, msg) == 0) || ((*f)->missing && strcmp((*f)->missing, msg) == 0) ||
            table_says((*f)->sub, m, msg))
            return true;
    }
    return false;
}

/* A row's objects, fresh: an environment, a workspace on it holding a.txt,
 * a lease. */
static void table_objs_make(int fd, table_objs *o)
{
    char *env = raw_create(fd, "t1");
    snprintf(o->env, sizeof o->env, "%s", env);
    free(env);
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.workspace",
                                       "tenant", "t1", "environment", o->env));
    snprintf(o->ws, sizeof o->ws, "%s", ph_wire_str(r, "workspace"));
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:s, s:s}", "op", "workspace.write", "tenant",
                               "t1", "workspace", o->ws, "path", "a.txt", "data", "hi"));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant", "t1",
                               "lease", "l1", "approval_hold_seconds", 60));
    snprintf(o->lease, sizeof o->lease, "%s", ph_wire_str(r, "handle"));
    json_decref(r);
}

static void table_objs_end(int fd, const table_objs *o)
{
    json_decref(raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.destroy", "tenant",
                                       "t1", "environment", o->env)));
    json_decref(raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "lease.end", "tenant", "t1",
                                       "handle", o->lease)));
}

/* Every row of the operation table is served, and every field of every
 * row is checked as the table says: for each required field missing and
 * each field of a wrong type, out of range, malformed base64, with a NUL
 * where none may be, or over its count, the daemon answers the row's
 * refusal (`invalid` with the field's message; a NAME that names nothing:
 * `not_found` "no such <object>"), and nothing else; each row's valid
 * request is served and answered with the row's reply fields. Generated
 * from the table: a new row or field is covered as it is added. */
static void test_the_operation_table_is_what_the_daemon_checks(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    size_t checked = 0;
    size_t len;
    char *doc = ph_test_read_file(PH_SOURCE_DIR "/docs/execd.md", &len);
    assert_non_null(doc);
    for (int op = 0; op < PH_OP_COUNT; op++) {
        const ph_wire_op *row = &ph_wire_ops[op];
        char named[64];
        snprintf(named, sizeof named, "%s`", row->name);
        if (strstr(doc, named) == NULL) {
            snprintf(named, sizeof named, "%s**", row->name);
            if (strstr(doc, named) == NULL)
                fail_msg("docs/execd.md does not describe %s", row->name);
        }
        table_objs o = {0};
        if (row->object)
            table_objs_make(fd, &o);
        char not_found_msg[64];
        snprintf(not_found_msg, sizeof not_found_msg, "no such %s", row->object ? row->object : "?");
        for (const ph_wire_field *const *f = row->req; *f; f++) {
            table_bad bad[TABLE_BAD_MAX];
            size_t n = table_bad_forms(*f, NULL, &o, bad);
            for (size_t i = 0; i < n; i++) {
                json_t *req = table_baseline((ph_wire_op_id)op, &o);
                char b64[64];
                b64_of(*f, b64);
                json_object_del(req, (*f)->key);
                json_object_del(req, b64);
                json_object_update(req, bad[i].patch);
                char *text = json_dumps(req, JSON_COMPACT);
                json_t *r = raw_call(fd, req);
                const char *code = bad[i].msg ? "invalid" : "not_found";
                const char *want = bad[i].msg ? bad[i].msg : not_found_msg;
                const char *got = r && ph_wire_str(r, "error") ? ph_wire_str(r, "error")
                                  : r                          ? "ok"
                                                               : "eof";
                const char *said = r && ph_wire_str(r, "message") ? ph_wire_str(r, "message") : "";
                if (strcmp(got, code) != 0 || strcmp(said, want) != 0)
                    fail_msg("%.300s: got %s \"%s\", want %s \"%s\"", text, got, said, code,
                             want);
                free(text);
                json_decref(r);
                json_decref(bad[i].patch);
                checked++;
            }
        }
        /* The row is served: its valid request is refused neither as an
         * unknown operation nor by the table (what the port judges, e.g. an
         * approval_hold_seconds of 0, is not the table's). */
        json_t *r = raw_call(fd, table_baseline((ph_wire_op_id)op, &o));
        assert_non_null(r);
        const char *err = ph_wire_str(r, "error");
        const char *said = ph_wire_str(r, "message") ? ph_wire_str(r, "message") : "";
        if (err && ((strcmp(err, "invalid") == 0 &&
                     (strcmp(said, "unknown op") == 0 || table_says(row->req, NULL, said))) ||
                    (strcmp(err, "not_found") == 0 && strcmp(said, not_found_msg) == 0)))
            fail_msg("%s: the valid request was refused: %s", row->name, said);
        /* ... and its answer has the row's reply fields, of their types. */
        const char *reply_bad = json_is_true(json_object_get(r, "ok"))
                                    ? ph_wire_reply_check((ph_wire_op_id)op, r)
                                    : NULL;
        if (reply_bad != NULL)
            fail_msg("%s: reply field %s missing or of another type", row->name, reply_bad);
        json_decref(r);
        if (row->object)
            table_objs_end(fd, &o);
    }
    free(doc);
    /* Nothing the table lacks is served. */
    const char *const unknown[] = {"shell", "environment.exec", "workspace.delete", "lease.",
                                   "HELLO", "maintain.hold", ""};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        json_t *r = raw_call(fd, json_pack("{s:s}", "op", unknown[i]));
        assert_string_equal(error_of(r), "invalid");
        assert_string_equal(ph_wire_str(r, "message"), "unknown op");
        json_decref(r);
    }
    printf("operation table: %d operations, %zu bad requests refused as the table says\n",
           PH_OP_COUNT, checked);
    close(fd);
    assert_int_equal(daemon_stop(&d), 0);
}

/* ---- the client library on the unix socket ---- */

static ph_execd_service *client_open(const xdaemon *d)
{
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE, .hard_cap_ms = 10000};
    ph_execd_service *svc = NULL;
    ph_diag diag = {0};
    if (ph_execd_service_open(d->sock, &cfg, &svc, &diag) != PH_OK)
        fail_msg("connect: %s", diag.message);
    return svc;
}

/* Tenant t1, lease l1, the fake mechanism, no limits. */
static ph_environment_spec fake_spec(void)
{
    ph_environment_spec spec = {.tenant = "t1", .lease = "l1", .mechanism = PH_MECHANISM_FAKE};
    ph_sandbox_limits_init(&spec.limits);
    return spec;
}

/* ---- tests ---- */

static void test_refuses_credential_in_environment(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    const char *const opts[] = {"--allow-uid=0", NULL};
    const char *const env[] = {"OPENAI_API_KEY=canary-7c1e", "HARMLESS=1", NULL};
    assert_int_equal(daemon_spawn(&d, opts, env), 78);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "credential_in_environment"));
    assert_non_null(strstr(log, "OPENAI_API_KEY"));
    assert_null(strstr(log, "canary-7c1e")); /* names, never values */
    assert_null(strstr(log, "HARMLESS"));
    free(log);
    /* A credential carried in a URL's userinfo, whatever the name. */
    const char *const env2[] = {"MIRROR=https://bob:hunter2@mirror.example/", NULL};
    assert_int_equal(daemon_spawn(&d, opts, env2), 78);
    /* The startup check: fake is refused in production. */
    const char *const prod[] = {"--allow-uid=0", "--mode=production", NULL};
    assert_int_equal(daemon_spawn(&d, prod, NULL), 78);
    log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "mechanism_refused_in_production"));
    free(log);
    assert_false(access(d.sock, F_OK) == 0);
    daemon_stop(&d);
}

/* Started from a shell: PWD, OLDPWD, SHLVL and _ are a shell's bookkeeping,
 * not credentials, and the daemon listens. */
static void test_starts_from_a_shell_environment(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    const char *const opts[] = {"--allow-uid=0", NULL};
    const char *const env[] = {"PWD=/home/dev/src/app@2", "OLDPWD=/home/dev", "SHLVL=2",
                               "_=/usr/bin/pinhole-execd", "HOME=/home/dev", "TERM=xterm",
                               "LANG=C.UTF-8", "USER=dev", NULL};
    int rc = daemon_spawn(&d, opts, env);
    if (rc != -1) {
        size_t len;
        char *log = ph_test_read_file(d.log, &len);
        fail_msg("pinhole-execd exited %d instead of listening: %s", rc, log ? log : "");
    }
    assert_int_equal(daemon_stop(&d), 0);
}

/* Whether dir holds anything but "." and "..". */
static bool dir_has_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool any = false;
    for (struct dirent *de; !any && (de = readdir(d)) != NULL;)
        any = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return any;
}

/* A state directory the service refuses (below a symlink, below a
 * directory others can write in) refuses the start before anything
 * listens, with the reason in the log, and nothing is made or written
 * there: the daemon used to create the directory and write its owner claim
 * and lock file through the symlink, or in the shared directory, before it
 * refused (`state/` with `owner` and `execd.lock` left in either). */
static void test_refuses_an_untrusted_state_dir(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    char real[128], link[128];
    snprintf(real, sizeof real, "%s/real", d.dir);
    snprintf(link, sizeof link, "%s/link", d.dir);
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(symlink(real, link), 0);
    snprintf(d.state, sizeof d.state, "%.128s/state", link);
    const char *const opts[] = {"--allow-uid=0", NULL};
    assert_int_equal(daemon_spawn(&d, opts, NULL), 78);
    assert_false(access(d.sock, F_OK) == 0);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "state_dir_refused"));
    assert_non_null(strstr(log, "state_dir_symlink"));
    assert_null(strstr(log, "\"listening\""));
    free(log);
    printf("state directory below a symlink: refused, the symlink's target %s\n",
           dir_has_entries(real) ? "was written in" : "is untouched");
    assert_false(dir_has_entries(real));
    char shared[128];
    snprintf(shared, sizeof shared, "%s/shared", d.dir);
    assert_int_equal(mkdir(shared, 0755), 0);
    assert_int_equal(chmod(shared, 0777), 0);
    snprintf(d.state, sizeof d.state, "%.128s/state", shared);
    assert_int_equal(daemon_spawn(&d, opts, NULL), 78);
    log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "state_dir_untrusted_ancestor"));
    free(log);
    printf("state directory below a directory others write in: refused, that directory %s\n",
           dir_has_entries(shared) ? "was written in" : "is untouched");
    assert_false(dir_has_entries(shared));
    daemon_stop(&d);
}

/* A socket in a directory others can write to could be swapped for
 * another's: refused, unless the directory is sticky and the daemon's. */
static void test_refuses_a_shared_socket_directory(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    const char *const opts[] = {"--allow-uid=0", NULL};
    assert_int_equal(chmod(d.dir, 0777), 0);
    assert_int_equal(daemon_spawn(&d, opts, NULL), 78);
    assert_false(access(d.sock, F_OK) == 0);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "socket_dir_untrusted"));
    free(log);
    assert_int_equal(chmod(d.dir, 0775), 0);
    assert_int_equal(daemon_spawn(&d, opts, NULL), 78);
    assert_int_equal(chmod(d.dir, 01777), 0); /* sticky and ours (root's) */
    assert_int_equal(daemon_spawn(&d, opts, NULL), -1);
    assert_int_equal(daemon_stop(&d), 0);
    /* A directory another user made (mode 0755, theirs alone): they could
     * serve the socket themselves. */
    xdaemon e;
    daemon_prepare(&e);
    char squat[300];
    snprintf(squat, sizeof squat, "%.200s/squat", e.dir);
    assert_int_equal(mkdir(squat, 0755), 0);
    assert_int_equal(chown(squat, 65534, 65534), 0);
    snprintf(e.sock, sizeof e.sock, "%.200s/execd.sock", squat);
    int rc = daemon_spawn(&e, opts, NULL);
    log = ph_test_read_file(e.log, &len);
    printf("socket directory owned by uid 65534, mode 0755: exit %d, %s\n", rc,
           log && strstr(log, "socket_dir_untrusted") ? "socket_dir_untrusted" : "served");
    assert_int_equal(rc, 78);
    assert_non_null(strstr(log, "socket_dir_untrusted"));
    free(log);
    (void)daemon_stop(&e); /* it never listened: this frees its directory */
}

/* The service's own settings are not credentials: a daemon started with
 * them listens (the values are still checked). */
static void test_own_settings_are_not_credentials(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    const char *const opts[] = {"--allow-uid=0", NULL};
    const char *const env[] = {"PINHOLE_GVISOR_ROOTFS=/var/lib/pinhole/rootfs",
                               "PINHOLE_RUNSC=/usr/bin/runsc",
                               "PINHOLE_FORWARDER=/usr/local/libexec/pinhole/pinhole-forwarder",
                               "PINHOLE_SANDBOX_ID_RANGE=200000:1000",
                               "PINHOLE_DOCKER=/usr/bin/docker", "PINHOLE_RUNSC_DEBUG_LOG=", NULL};
    /* Another PINHOLE_ name is still tier 0, and a setting's value is still
     * checked for a credential. */
    const char *const env2[] = {"PINHOLE_GRANT_KEY=abc", NULL};
    assert_int_equal(daemon_spawn(&d, opts, env2), 78);
    const char *const env3[] = {"PINHOLE_RUNSC=https://bob:hunter2@x.example/", NULL};
    assert_int_equal(daemon_spawn(&d, opts, env3), 78);
    assert_int_equal(daemon_spawn(&d, opts, env), -1);
    assert_int_equal(daemon_stop(&d), 0);
}

static void test_usage_errors(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    const char *const none[] = {NULL}; /* no --allow-uid */
    assert_int_equal(daemon_spawn(&d, none, NULL), 64);
    const char *const bad[] = {"--allow-uid=0", "--queue=lots", NULL};
    assert_int_equal(daemon_spawn(&d, bad, NULL), 64);
    daemon_stop(&d);
}

/* Runs fn(d, verdict, cap) in a child switched to uid and gid 65534 and
 * returns what it wrote into verdict ("setuid failed" if it could not). */
static void as_nobody(const xdaemon *d, void (*fn)(const xdaemon *, char *, size_t),
                      char *verdict, size_t cap)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        char out[512] = "setuid failed";
        if (setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0)
            fn(d, out, sizeof out);
        (void)!write(pipefd[1], out, strlen(out));
        _exit(0);
    }
    close(pipefd[1]);
    ssize_t n = read(pipefd[0], verdict, cap - 1);
    verdict[n > 0 ? n : 0] = '\0';
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
}

static void refused_peer(const xdaemon *d, char *verdict, size_t cap)
{
    int fd = raw_connect(d);
    json_t *r = fd >= 0 ? raw_call(fd, json_pack("{s:s}", "op", "hello")) : NULL;
    /* After the refusal the connection is closed. */
    json_t *again = r ? raw_call(fd, json_pack("{s:s}", "op", "health")) : NULL;
    /* The client library reports it as a refusal, never as I/O. */
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE, .hard_cap_ms = 1000};
    ph_execd_service *svc = NULL;
    ph_diag diag = {0};
    ph_status st = ph_execd_service_open(d->sock, &cfg, &svc, &diag);
    snprintf(verdict, cap, "%s %s %s %.15s", fd < 0 ? "noconnect" : error_of(r),
             again ? "open" : "closed", ph_strerror(st), diag.message);
}

static void test_wrong_uid_is_refused(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--socket-mode=0666", NULL};
    daemon_start(&d, opts);
    char buf[512];
    as_nobody(&d, refused_peer, buf, sizeof buf);
    assert_string_equal(buf, "unauthenticated closed denied unauthenticated");
    /* uid 0 is allowed and served. */
    int fd = raw_hello(&d);
    close(fd);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "\"event\":\"unauthenticated\",\"identity\":\"uid:65534\""));
    free(log);
    assert_int_equal(daemon_stop(&d), 0);
}

/* hello as uid/gid 65534 with gid as a supplementary group: the verdict
 * ("ok" or the error code). */
static void hello_in_group(const xdaemon *d, gid_t gid, char *verdict, size_t cap)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        char out[64] = "setuid failed";
        if (setgroups(1, &gid) == 0 && setresgid(65534, 65534, 65534) == 0 &&
            setresuid(65534, 65534, 65534) == 0) {
            int fd = raw_connect(d);
            json_t *r = fd >= 0 ? raw_call(fd, json_pack("{s:s}", "op", "hello")) : NULL;
            snprintf(out, sizeof out, "%s",
                     json_is_true(json_object_get(r, "ok")) ? "ok" : error_of(r));
        }
        (void)!write(pipefd[1], out, strlen(out));
        _exit(0);
    }
    close(pipefd[1]);
    ssize_t n = read(pipefd[0], verdict, cap - 1);
    verdict[n > 0 ? n : 0] = '\0';
    close(pipefd[0]);
    waitpid(pid, NULL, 0);
}

/* --allow-gid matches a supplementary group of the peer, not only its
 * primary one. */
static void test_allow_gid_matches_supplementary_groups(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--socket-mode=0666", "--allow-gid=4242", NULL};
    daemon_start(&d, opts);
    char buf[64];
    hello_in_group(&d, 4242, buf, sizeof buf);
    assert_string_equal(buf, "ok");
    hello_in_group(&d, 4243, buf, sizeof buf);
    assert_string_equal(buf, "unauthenticated");
    assert_int_equal(daemon_stop(&d), 0);
}

/* The client reads an answer only once it has the row's reply fields: a
 * service whose hello answer lacks a valid mechanism (here: a number) is
 * PH_E_FORMAT naming the field, and nothing is read from it. */
static void test_client_checks_answers_against_the_table(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    assert_non_null(dir);
    char path[100];
    snprintf(path, sizeof path, "%.80s/execd.sock", dir);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&sun, sizeof sun), 0);
    assert_int_equal(listen(l, 4), 0);
    pid_t pid = fork();
    if (pid == 0) { /* a service that answers hello without a valid mechanism */
        alarm(20);
        int c = accept(l, NULL, NULL);
        json_t *req = NULL;
        if (c < 0 || ph_wire_recv(c, 1 << 20, &req) != 0)
            _exit(1);
        json_t *resp = json_pack("{s:b, s:i, s:i, s:s, s:i, s:s}", "ok", 1, "protocol", 1,
                                 "mechanism", 5, "mode", "development", "hard_cap_ms", 1000,
                                 "identity", "uid:0");
        _exit(ph_wire_send(c, resp) == 0 ? 0 : 1);
    }
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE, .hard_cap_ms = 1000};
    ph_execd_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_execd_service_open(path, &cfg, &svc, &diag), PH_E_FORMAT);
    assert_string_equal(diag.message, "pinhole-execd answered hello without a valid mechanism");
    assert_null(svc);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(l);
    ph_test_rmtree(dir);
    free(dir);
}

/* A socket put in a shared directory by someone else (uid 65534 here)
 * must not get a worker's first request, whose create would carry a grant
 * token: the client checks who serves before it sends. */
static void test_client_checks_who_serves_the_socket(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    assert_non_null(dir);
    /* The impostor's own directory, writable by it alone: a third uid's
     * socket is refused wherever it is. */
    assert_int_equal(chown(dir, 65534, 65534), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    char path[100];
    snprintf(path, sizeof path, "%.80s/execd.sock", dir);
    int ready[2], got[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(got), 0);
    pid_t pid = fork();
    if (pid == 0) { /* the impostor: counts the bytes a client sends it */
        alarm(20); /* whatever the test does, it goes */
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
        int l = -1;
        if (setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0)
            l = socket(AF_UNIX, SOCK_STREAM, 0);
        if (l < 0 || bind(l, (struct sockaddr *)&sun, sizeof sun) != 0 || listen(l, 4) != 0)
            _exit(1);
        (void)!write(ready[1], "r", 1);
        for (int i = 0; i < 2; i++) {
            int c = accept(l, NULL, NULL);
            char buf[4096];
            ssize_t n = c >= 0 ? read(c, buf, sizeof buf) : -1;
            char verdict = n > 0 ? 'S' : 'N'; /* something sent, or nothing */
            (void)!write(got[1], &verdict, 1);
            if (c >= 0)
                close(c);
        }
        _exit(0);
    }
    char r;
    assert_int_equal(read(ready[0], &r, 1), 1);
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE, .hard_cap_ms = 1000};
    ph_execd_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_execd_service_open(path, &cfg, &svc, &diag), PH_E_DENIED);
    assert_non_null(strstr(diag.message, "execd_peer_untrusted"));
    assert_null(svc);
    char verdict;
    assert_int_equal(read(got[0], &verdict, 1), 1);
    assert_int_equal(verdict, 'N');
    /* Told to expect that uid, the client talks to it (and fails later). */
    setenv(PH_EXECD_UID_ENV, "65534", 1);
    assert_int_not_equal(ph_execd_service_open(path, &cfg, &svc, &diag), PH_OK);
    unsetenv(PH_EXECD_UID_ENV);
    assert_int_equal(read(got[0], &verdict, 1), 1);
    assert_int_equal(verdict, 'S');
    waitpid(pid, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    close(got[0]);
    close(got[1]);
    ph_test_rmtree(dir);
    free(dir);
}

static char g_victim[PH_EXECD_ID_MAX]; /* the environment another identity tries */

static void other_identity(const xdaemon *d, char *verdict, size_t cap)
{
    const char *const argv[] = {"true", NULL};
    int c = raw_hello(d);
    json_t *r = raw_call(c, raw_execute_req("t1", g_victim, argv));
    json_t *destroy = raw_call(c, json_pack("{s:s, s:s, s:s}", "op", "environment.destroy",
                                            "tenant", "t1", "environment", g_victim));
    char *t = json_dumps(r, JSON_SORT_KEYS);
    snprintf(verdict, cap, "%s|%s", t ? t : "", error_of(destroy));
    free(t);
}

static void test_other_identity_or_tenant_gets_not_found(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--allow-uid=65534", "--socket-mode=0666", NULL};
    daemon_start(&d, opts);
    int fd = raw_hello(&d);
    char *id = raw_create(fd, "t1");
    const char *const argv[] = {"true", NULL};
    json_t *own = raw_call(fd, raw_execute_req("t1", id, argv));
    assert_true(json_is_true(json_object_get(own, "ok")));
    json_decref(own);

    /* Another tenant, a nonexistent id: the same answer, byte for byte. */
    json_t *other = raw_call(fd, raw_execute_req("t2", id, argv));
    json_t *none = raw_call(fd, raw_execute_req("t1", "env-0000000000000000", argv));
    assert_string_equal(error_of(other), "not_found");
    char *a = json_dumps(other, JSON_SORT_KEYS), *b = json_dumps(none, JSON_SORT_KEYS);
    assert_string_equal(a, b);
    free(a);
    free(b);
    json_decref(other);
    json_decref(none);
    json_t *ws = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.workspace",
                                        "tenant", "t2", "environment", id));
    assert_string_equal(error_of(ws), "not_found");
    json_decref(ws);

    /* Another identity (allowed, uid 65534), right tenant: not found too. */
    snprintf(g_victim, sizeof g_victim, "%s", id);
    char buf[512];
    as_nobody(&d, other_identity, buf, sizeof buf);
    none = raw_call(fd, raw_execute_req("t1", "env-0000000000000000", argv));
    char *expect = json_dumps(none, JSON_SORT_KEYS), want[600];
    snprintf(want, sizeof want, "%s|not_found", expect);
    assert_string_equal(buf, want);
    free(expect);
    json_decref(none);
    /* ... and the owner's environment survived the attempt. */
    own = raw_call(fd, raw_execute_req("t1", id, argv));
    assert_true(json_is_true(json_object_get(own, "ok")));
    json_decref(own);
    free(id);
    close(fd);
    daemon_stop(&d);
}

static void test_restart_destroys_what_a_previous_run_left(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    ph_execd_service *svc = client_open(&d);
    ph_diag diag = {0};
    ph_environment_spec spec = fake_spec();
    ph_execd_environment *e1 = NULL, *e2 = NULL;
    assert_int_equal(ph_execd_environment_create(svc, &spec, &e1, &diag), PH_OK);
    assert_int_equal(ph_execd_environment_create(svc, &spec, &e2, &diag), PH_OK);
    assert_int_equal(env_dirs(d.state), 2);
    /* The daemon dies without cleaning up. */
    kill(d.pid, SIGKILL);
    waitpid(d.pid, NULL, 0);
    d.pid = 0;
    ph_execd_service_close(&svc);
    free(e1); /* the handles are dead with their connection: free only */
    free(e2);
    assert_int_equal(env_dirs(d.state), 2);
    const char *const opts[] = {"--allow-uid=0", NULL};
    assert_int_equal(daemon_spawn(&d, opts, NULL), -1);
    assert_int_equal(env_dirs(d.state), 0);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "\"event\":\"recovered_destroyed\",\"destroyed\":2,\"left\":0"));
    free(log);
    assert_int_equal(daemon_stop(&d), 0);
}

static void test_disconnect_kills_the_command(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    char *id = raw_create(fd, "t1");
    const char *const argv[] = {"sh", "-c", "sleep 71.33 & sleep 71.34", NULL};
    json_t *req = raw_execute_req("t1", id, argv);
    assert_int_equal(ph_wire_send(fd, req), 0);
    json_decref(req);
    for (int i = 0; i < 100 && !sbx_process_with_arg_exists("71.34"); i++)
        usleep(20 * 1000);
    assert_true(sbx_process_with_arg_exists("71.34"));
    close(fd);
    for (int i = 0; i < 100 && (sbx_process_with_arg_exists("71.33") ||
                                sbx_process_with_arg_exists("71.34")); i++)
        usleep(20 * 1000);
    assert_false(sbx_process_with_arg_exists("71.33"));
    assert_false(sbx_process_with_arg_exists("71.34"));
    /* The daemon goes on serving, and the killed execution is over (its
     * thread returns just after the processes are gone). */
    fd = raw_hello(&d);
    json_int_t executions = -1;
    for (int i = 0; i < 100 && executions != 0; i++) {
        if (executions > 0)
            usleep(20 * 1000);
        json_t *h = raw_call(fd, json_pack("{s:s}", "op", "health"));
        assert_true(json_is_true(json_object_get(h, "ok")));
        executions = json_integer_value(json_object_get(h, "executions"));
        json_decref(h);
    }
    assert_int_equal(executions, 0);
    close(fd);
    free(id);
    assert_int_equal(daemon_stop(&d), 0);
}

/* stream_output with a peer that reads nothing while the command runs: the
 * daemon drops pieces past its backlog instead of waiting, so the deadline
 * kill comes on time; what was streamed plus what was dropped is exactly the
 * kept output, and the frames come before the response. */
static void test_slow_stream_peer_cannot_delay_the_deadline(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:{s:I}}", "op", "environment.create",
                                       "tenant", "t1", "lease", "lease-1", "limits",
                                       "output_bytes", (json_int_t)32 * 1024 * 1024));
    assert_true(json_is_true(json_object_get(r, "ok")));
    char *id = strdup(ph_wire_str(r, "environment"));
    json_decref(r);
    const char *const argv[] = {"sh", "-c", "while :; do head -c 1048576 /dev/zero; done", NULL};
    json_t *req = raw_execute_req("t1", id, argv);
    json_object_set_new(req, "stream_output", json_true());
    json_object_set_new(req, "timeout_seconds", json_integer(2));
    assert_int_equal(ph_wire_send(fd, req), 0);
    json_decref(req);
    sleep(5); /* read nothing while the command runs and well past its deadline */
    uint64_t streamed = 0;
    size_t frames = 0;
    json_t *resp = NULL;
    for (;;) {
        json_t *f = NULL;
        assert_int_equal(ph_wire_recv(fd, PH_EXECD_MAX_RESPONSE_BYTES, &f), 0);
        if (json_object_get(f, "ok") != NULL) {
            resp = f;
            break;
        }
        assert_string_equal(ph_wire_str(f, "output"), "stdout");
        uint8_t *data = NULL;
        size_t len = 0;
        assert_int_equal(ph_wire_get_bytes(f, NULL, "data_base64", &data, &len), 0);
        streamed += len;
        frames++;
        free(data);
        json_decref(f);
    }
    if (!json_is_true(json_object_get(resp, "ok")))
        fail_msg("execute: %s", ph_wire_str(resp, "message"));
    json_t *res = json_object_get(resp, "result");
    assert_true(json_is_true(json_object_get(res, "timed_out")));
    int64_t duration = json_integer_value(json_object_get(res, "duration_ms"));
    uint64_t dropped = (uint64_t)json_integer_value(json_object_get(resp, "stream_dropped_bytes"));
    printf("deadline 2000 ms, killed after %lld ms; %zu frames, %llu bytes streamed, "
           "%llu dropped\n", (long long)duration, frames, (unsigned long long)streamed,
           (unsigned long long)dropped);
    assert_true(duration >= 2000 && duration < 3500);
    assert_true(dropped > 0);
    ph_execution_result *er = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_wire_get_result(res, &er, &diag), PH_OK);
    assert_int_equal(streamed + dropped, er->out.len);
    ph_execution_result_free(&er);
    json_decref(resp);
    close(fd);
    free(id);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A new connection that asks for a streamed read of path in ws (1 MiB
 * chunks) and never reads the answer; the caller closes it. */
static int unread_stream(const xdaemon *d, const char *ws, const char *path)
{
    int s = raw_hello(d);
    json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "op", "workspace.read", "tenant",
                            "t1", "workspace", ws, "path", path, "chunk_bytes",
                            (json_int_t)1024 * 1024, "max_bytes", (json_int_t)64 * 1024 * 1024);
    assert_int_equal(ph_wire_send(s, req), 0);
    json_decref(req);
    usleep(500 * 1000);
    return s;
}

/* One peer must not be able to starve the others: a streamed read its
 * client never reads gives its thread back (after the stall limit) and
 * never holds up a stop; workspace ids, leases and distinct hard caps are
 * bounded per environment, identity and daemon. */
static void test_one_peer_cannot_exhaust_the_daemon(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--max-executions=1", "--max-requests-per-identity=2", NULL};
    daemon_start(&d, opts);
    int a = raw_hello(&d);
    char *id = raw_create(a, "t1");
    const char *const mk[] = {"sh", "-c", "head -c 41943040 /dev/zero > big.bin", NULL};
    json_t *r = raw_call(a, raw_execute_req("t1", id, mk));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    /* 64 workspace ids on one environment, not 65. */
    char *ws = NULL;
    for (int i = 0; i < 65; i++) {
        r = raw_call(a, json_pack("{s:s, s:s, s:s}", "op", "environment.workspace", "tenant",
                                  "t1", "environment", id));
        if (i < 64) {
            assert_true(json_is_true(json_object_get(r, "ok")));
            if (ws == NULL)
                ws = strdup(ph_wire_str(r, "workspace"));
        } else {
            assert_string_equal(error_of(r), "limit");
        }
        json_decref(r);
    }
    /* A streamed read nobody reads: the only pool thread is held... */
    int s = unread_stream(&d, ws, "big.bin");
    /* ...until the stall limit (10 s) gives it back: another tenant's
     * request is answered. */
    int64_t t0 = ph_monotonic_ms();
    int v = raw_hello(&d);
    r = raw_call(v, json_pack("{s:s, s:s, s:s}", "op", "environment.create", "tenant", "t2",
                              "lease", "l2"));
    double waited = (double)(ph_monotonic_ms() - t0) / 1000;
    printf("another tenant's create answered after %.1f s behind a stalled stream: %s\n", waited,
           json_is_true(json_object_get(r, "ok")) ? "ok" : ph_wire_str(r, "message"));
    assert_true(json_is_true(json_object_get(r, "ok")));
    assert_true(waited < 14.0);
    json_decref(r);
    close(v);
    close(s);
    /* Hard caps: peers asking for 20 distinct ones share a few steps, and
     * the default one still gets a service. */
    for (int i = 0; i < 20; i++) {
        int c = raw_connect(&d);
        r = raw_call(c, json_pack("{s:s, s:I}", "op", "hello", "hard_cap_ms",
                                  (json_int_t)(1000 + 997 * i)));
        int64_t got = json_integer_value(json_object_get(r, "hard_cap_ms"));
        assert_true(got == 1000 || got == 2000 || got == 5000 || got == 10000 || got == 20000);
        json_decref(r);
        r = raw_call(c, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant", "t3",
                                  "lease", "cap", "approval_hold_seconds", 60));
        if (!json_is_true(json_object_get(r, "ok")))
            fail_msg("lease.open with cap %d: %s", 1000 + 997 * i, ph_wire_str(r, "message"));
        json_decref(r);
        close(c);
    }
    /* Leases: at most 256 open per identity (20 are open already). */
    int opened = 20;
    for (;; opened++) {
        char lease[32];
        snprintf(lease, sizeof lease, "l-%d", opened);
        r = raw_call(a, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant", "t1",
                                  "lease", lease, "approval_hold_seconds", 60));
        bool ok = json_is_true(json_object_get(r, "ok"));
        if (!ok)
            assert_string_equal(error_of(r), "limit");
        json_decref(r);
        if (!ok || opened > 256)
            break;
    }
    assert_int_equal(opened, 256);
    v = raw_hello(&d);
    r = raw_call(v, json_pack("{s:s, s:s, s:s}", "op", "environment.create", "tenant", "t4",
                              "lease", "l4"));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    close(v);
    /* A stream stuck again, then SIGTERM: the daemon stops at once. */
    s = unread_stream(&d, ws, "big.bin");
    t0 = ph_monotonic_ms();
    int status = -1;
    kill(d.pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(d.pid, &status, WNOHANG) == d.pid)
            break;
        usleep(50 * 1000);
    }
    waited = (double)(ph_monotonic_ms() - t0) / 1000;
    printf("stopped %.1f s after SIGTERM with a stalled stream\n", waited);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    d.pid = 0;
    close(s);
    close(a);
    free(ws);
    free(id);
    (void)daemon_stop(&d); /* already stopped: removes its directory */
}

static void test_files_are_served_beside_a_running_command(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int a = raw_hello(&d), b = raw_hello(&d);
    char *id = raw_create(a, "t1");
    json_t *r = raw_call(a, json_pack("{s:s, s:s, s:s}", "op", "environment.workspace", "tenant",
                                      "t1", "environment", id));
    char *ws = strdup(ph_wire_str(r, "workspace"));
    json_decref(r);
    r = raw_call(a, json_pack("{s:s, s:s, s:s, s:s, s:s}", "op", "workspace.write", "tenant",
                              "t1", "workspace", ws, "path", "notes.txt", "data", "kept\n"));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    const char *const argv[] = {"sleep", "1.5", NULL};
    json_t *req = raw_execute_req("t1", id, argv);
    assert_int_equal(ph_wire_send(a, req), 0);
    json_decref(req);
    usleep(300 * 1000);
    /* While it runs: files are served, a second execute and a destroy are not. */
    r = raw_call(b, json_pack("{s:s, s:s, s:s, s:s}", "op", "workspace.read", "tenant", "t1",
                              "workspace", ws, "path", "notes.txt"));
    assert_true(json_is_true(json_object_get(r, "ok")));
    assert_string_equal(ph_wire_str(r, "data"), "kept\n");
    json_decref(r);
    r = raw_call(b, raw_execute_req("t1", id, argv));
    assert_string_equal(error_of(r), "busy");
    json_decref(r);
    r = raw_call(b, json_pack("{s:s, s:s, s:s}", "op", "environment.destroy", "tenant", "t1",
                              "environment", id));
    assert_string_equal(error_of(r), "busy");
    json_decref(r);
    json_t *done = NULL;
    assert_int_equal(ph_wire_recv(a, PH_EXECD_MAX_RESPONSE_BYTES, &done), 0);
    assert_true(json_is_true(json_object_get(done, "ok")));
    json_decref(done);
    r = raw_call(b, json_pack("{s:s, s:s, s:s}", "op", "environment.destroy", "tenant", "t1",
                              "environment", id));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    close(a);
    close(b);
    free(ws);
    free(id);
    assert_int_equal(daemon_stop(&d), 0);
}

static int64_t health_field(const xdaemon *d, const char *key)
{
    int fd = raw_hello(d);
    json_t *h = raw_call(fd, json_pack("{s:s}", "op", "health"));
    int64_t v = (int64_t)json_integer_value(json_object_get(h, key));
    json_decref(h);
    close(fd);
    return v;
}

static void test_queue_full_answers_busy(void **state)
{
    (void)state;
    xdaemon d;
    /* One identity may use the whole pool and queue here: the global limits
     * are under test, not the fair share. */
    const char *const opts[] = {"--max-executions=1", "--queue=1",
                                "--max-requests-per-identity=3", NULL};
    daemon_start(&d, opts);
    int fds[3];
    char *ids[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = raw_hello(&d);
        ids[i] = raw_create(fds[i], "t1");
    }
    const char *const argv[] = {"sleep", "71.41", NULL};
    for (int i = 0; i < 2; i++) {
        json_t *req = raw_execute_req("t1", ids[i], argv);
        assert_int_equal(ph_wire_send(fds[i], req), 0);
        json_decref(req);
        const char *key = i == 0 ? "executions" : "queued";
        for (int t = 0; t < 100 && health_field(&d, key) != 1; t++)
            usleep(20 * 1000);
        assert_int_equal(health_field(&d, key), 1);
    }
    int64_t t0 = ph_monotonic_ms();
    json_t *r = raw_call(fds[2], raw_execute_req("t1", ids[2], argv));
    assert_string_equal(error_of(r), "busy");
    assert_non_null(strstr(ph_wire_str(r, "message"), "queue"));
    assert_true(ph_monotonic_ms() - t0 < 1000); /* at once, never a hang */
    json_decref(r);
    int fd = raw_hello(&d);
    json_t *m = raw_call(fd, json_pack("{s:s}", "op", "metrics"));
    assert_non_null(strstr(ph_wire_str(m, "prometheus"), "pinhole_execd_busy_total 1\n"));
    assert_non_null(strstr(ph_wire_str(m, "prometheus"), "pinhole_execd_queue_depth 1\n"));
    /* Three creates, each in the latency histogram. */
    assert_non_null(strstr(ph_wire_str(m, "prometheus"),
                           "pinhole_execd_op_duration_seconds_count{op=\"environment.create\"} 3\n"));
    assert_non_null(strstr(ph_wire_str(m, "prometheus"),
                           "pinhole_execd_op_duration_seconds_bucket{op=\"environment.create\","
                           "le=\"+Inf\"} 3\n"));
    json_decref(m);
    close(fd);
    for (int i = 0; i < 3; i++) {
        close(fds[i]);
        free(ids[i]);
    }
    assert_int_equal(daemon_stop(&d), 0);
    assert_false(sbx_process_with_arg_exists("71.41"));
}

static void test_limits_on_sandboxes_and_requests(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--max-sandboxes=1", "--max-request-bytes=4096", NULL};
    daemon_start(&d, opts);
    int fd = raw_hello(&d);
    char *id = raw_create(fd, "t1");
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.create", "tenant",
                                       "t1", "lease", "l2"));
    assert_string_equal(error_of(r), "busy");
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.destroy", "tenant", "t1",
                               "environment", id));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    free(raw_create(fd, "t1")); /* the slot is free again */
    /* A frame over --max-request-bytes: too_large, then the connection closes. */
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    r = raw_call(fd, json_pack("{s:s, s:s}", "op", "health", "pad", big));
    assert_string_equal(error_of(r), "too_large");
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s}", "op", "health"));
    assert_null(r);
    close(fd);
    /* A request before hello, an unknown op. */
    fd = raw_connect(&d);
    r = raw_call(fd, json_pack("{s:s, s:s}", "op", "environment.create", "tenant", "t1"));
    assert_string_equal(error_of(r), "protocol");
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s}", "op", "shell"));
    assert_string_equal(error_of(r), "invalid");
    json_decref(r);
    close(fd);
    free(id);
    assert_int_equal(daemon_stop(&d), 0);
}

static void test_connections_are_bounded(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--max-connections=2", "--max-connections-per-identity=2", NULL};
    daemon_start(&d, opts);
    int a = raw_hello(&d), b = raw_hello(&d);
    int c = raw_connect(&d);
    assert_true(c >= 0);
    assert_null(raw_call(c, json_pack("{s:s}", "op", "hello"))); /* closed at once */
    close(c);
    close(b);
    usleep(100 * 1000);
    c = raw_hello(&d); /* a slot is free again */
    close(c);
    close(a);
    assert_int_equal(daemon_stop(&d), 0);
}

static void test_lease_hold_and_end_through_the_service(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    ph_execd_service *svc = client_open(&d);
    ph_diag diag = {0};
    ph_environment_spec spec = fake_spec();
    ph_execd_lease *lease = NULL;
    assert_int_equal(ph_execd_lease_open(svc, &spec, 2, &lease, &diag), PH_OK);
    assert_false(ph_execd_lease_has_sandbox(lease));
    assert_int_equal(env_dirs(d.state), 0); /* lazily: nothing yet */
    ph_execd_workspace *ws = NULL;
    assert_int_equal(ph_execd_lease_workspace(lease, &ws, &diag), PH_OK);
    assert_int_equal(env_dirs(d.state), 1);
    assert_int_equal(ph_execd_workspace_write(ws, "kept.txt", "k", 1, 0644, &diag), PH_OK);
    /* The worker begins a hold and never calls again: the daemon's own tick
     * destroys the sandbox once the hold has lasted 2 s. */
    ph_execd_lease_hold_begin(lease, 500);
    usleep(1000 * 1000);
    assert_true(ph_execd_lease_has_sandbox(lease));
    /* lease.status answers busy (no sandbox) while the tick destroys: wait
     * for the destroy itself. */
    for (int i = 0; i < 100 && (ph_execd_lease_has_sandbox(lease) || env_dirs(d.state) > 0); i++)
        usleep(100 * 1000);
    assert_false(ph_execd_lease_has_sandbox(lease));
    assert_int_equal(env_dirs(d.state), 0);
    ph_ws_stat st;
    assert_int_equal(ph_execd_workspace_stat(ws, "kept.txt", &st, &diag), PH_E_NOT_FOUND);
    assert_false(ph_execd_lease_hold_end(lease, 503));
    ph_execd_workspace_close(&ws);
    /* A fresh one on the next call; lease end destroys it. */
    ph_execd_environment *env = NULL;
    assert_int_equal(ph_execd_lease_environment(lease, &env, &diag), PH_OK);
    assert_int_equal(env_dirs(d.state), 1);
    ph_execd_lease_end(&lease);
    assert_null(lease);
    assert_int_equal(env_dirs(d.state), 0);
    ph_execd_service_close(&svc);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A lease's now_seconds is the worker's clock, any int64 on the wire: the
 * daemon's own tick adds its elapsed time to the hold's begin, so a begin
 * of INT64_MAX overflowed (undefined; UBSan reports it in the daemon's
 * log). Out of 0..2^62 it is invalid, and nothing is held. */
static void test_lease_clock_out_of_range_is_invalid(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant",
                                       "t1", "lease", "l1", "approval_hold_seconds", 1));
    assert_true(json_is_true(json_object_get(r, "ok")));
    char *h = strdup(ph_wire_str(r, "handle"));
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "lease.environment", "tenant", "t1",
                               "handle", h));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    const json_int_t bad[] = {INT64_MAX, INT64_MIN, -1, (json_int_t)PH_EXECD_NOW_SECONDS_MAX + 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:I}", "op", "lease.hold_begin", "tenant",
                                   "t1", "handle", h, "now_seconds", bad[i]));
        printf("lease.hold_begin now_seconds %lld: %s\n", (long long)bad[i],
               error_of(r) ? error_of(r) : "ok");
        assert_string_equal(error_of(r) ? error_of(r) : "ok", "invalid");
        json_decref(r);
    }
    /* The largest accepted begin: the daemon's tick (once a second) ends
     * the one-second hold on its own. */
    r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:I}", "op", "lease.hold_begin", "tenant", "t1",
                               "handle", h, "now_seconds", (json_int_t)PH_EXECD_NOW_SECONDS_MAX));
    assert_null(error_of(r));
    json_decref(r);
    bool has = true;
    for (int t = 0; t < 200 && has; t++) {
        r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "lease.status", "tenant", "t1",
                                   "handle", h));
        has = json_is_true(json_object_get(r, "has_sandbox"));
        json_decref(r);
        if (has)
            usleep(50 * 1000);
    }
    assert_false(has);
    close(fd);
    free(h);
    assert_int_equal(daemon_stop(&d), 0);
}

static void test_owner_gone_past_grace(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--grace-seconds=1", NULL};
    daemon_start(&d, opts);
    int fd = raw_hello(&d);
    free(raw_create(fd, "t1"));
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant",
                                       "t1", "lease", "l9", "approval_hold_seconds", 60));
    char *h = strdup(ph_wire_str(r, "handle"));
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "lease.environment", "tenant", "t1",
                               "handle", h));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    assert_int_equal(env_dirs(d.state), 2);
    close(fd);
    for (int i = 0; i < 50 && env_dirs(d.state) != 0; i++)
        usleep(100 * 1000);
    assert_int_equal(env_dirs(d.state), 0);
    /* Reconnecting after that finds nothing. */
    fd = raw_hello(&d);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "lease.status", "tenant", "t1",
                               "handle", h));
    assert_string_equal(error_of(r), "not_found");
    json_decref(r);
    close(fd);
    free(h);
    assert_int_equal(daemon_stop(&d), 0);
}

/* Asks health on fd until its member key is want (10 s at most). */
static void wait_health(int fd, const char *key, json_int_t want)
{
    for (int i = 0; i < 1000; i++) {
        json_t *h = raw_call(fd, json_pack("{s:s}", "op", "health"));
        json_int_t v = json_integer_value(json_object_get(h, key));
        json_decref(h);
        if (v == want)
            return;
        usleep(10 * 1000);
    }
    fail_msg("health never showed %s %lld", key, (long long)want);
}

static void test_shutdown_destroys_everything(void **state)
{
    (void)state;
    xdaemon d;
    const char *const one_thread[] = {"--max-executions=1", "--max-requests-per-identity=36",
                                      NULL};
    daemon_start(&d, one_thread);
    int fd = raw_hello(&d);
    free(raw_create(fd, "t1"));
    free(raw_create(fd, "t2"));
    assert_int_equal(env_dirs(d.state), 2);
    /* Clients waiting for an answer get one: a command running, a request
     * queued behind it. */
    char *env = raw_create(fd, "t1");
    const char *const sleep_argv[] = {"sleep", "30", NULL};
    int running = raw_hello(&d), queued = raw_hello(&d);
    json_t *req = raw_execute_req("t1", env, sleep_argv);
    assert_int_equal(ph_wire_send(running, req), 0);
    json_decref(req);
    wait_health(fd, "executions", 1);
    req = json_pack("{s:s, s:s, s:s}", "op", "environment.create", "tenant", "t3", "lease", "l");
    assert_int_equal(ph_wire_send(queued, req), 0);
    json_decref(req);
    wait_health(fd, "queued", 1);
    kill(d.pid, SIGTERM);
    int status;
    waitpid(d.pid, &status, 0);
    d.pid = 0;
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(env_dirs(d.state), 0);
    int conns[] = {running, queued};
    for (size_t i = 0; i < 2; i++) {
        json_t *r = NULL;
        (void)ph_wire_recv(conns[i], PH_EXECD_MAX_RESPONSE_BYTES, &r); /* NULL at EOF: "eof" */
        const char *e = error_of(r);
        assert_string_equal(e ? e : "(an answer that is not an error)", "shutting_down");
        json_decref(r);
        close(conns[i]);
    }
    free(env);
    close(fd);
    daemon_stop(&d);
}

/* ---- memory and time a peer can make the daemon spend ---- */

/* Under ASan the daemon's RSS is not its own (quarantine, redzones): the
 * memory tests print their figures but do not judge them. */
#if defined(__SANITIZE_ADDRESS__)
#define PH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PH_ASAN 1
#endif
#endif
#ifndef PH_ASAN
#define PH_ASAN 0
#endif

/* A field of /proc/<pid>/status in KiB (VmRSS, VmHWM), or -1. */
static long proc_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

/* A frame (header included) of {"op":op,...,"x":[{},{},...]} of exactly
 * len body bytes: an ignored field that parses into ~80 times its size. */
static uint8_t *amplifying_frame(const char *op, size_t len)
{
    char head[128];
    int hn = snprintf(head, sizeof head, "{\"op\":\"%s\",\"tenant\":\"t1\",\"x\":[", op);
    uint8_t *f = malloc(PH_EXECD_FRAME_HEADER + len);
    assert_non_null(f);
    uint8_t *b = f + PH_EXECD_FRAME_HEADER;
    memcpy(b, head, (size_t)hn);
    size_t i = (size_t)hn;
    while (i + 5 <= len - 2) {
        memcpy(b + i, "{},", 3);
        i += 3;
    }
    memcpy(b + i, "{}", 2); /* pad the rest with spaces inside the array */
    i += 2;
    while (i < len - 2)
        b[i++] = ' ';
    b[i++] = ']';
    b[i++] = '}';
    f[0] = (uint8_t)(len >> 24);
    f[1] = (uint8_t)(len >> 16);
    f[2] = (uint8_t)(len >> 8);
    f[3] = (uint8_t)len;
    return f;
}

static void send_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n > 0);
        p += n;
        len -= (size_t)n;
    }
}

/* A peer sends 300,000 `metrics` requests and reads none of the answers:
 * the daemon stops reading it once 64 KiB of answers wait (the requests stay
 * in the socket, where the kernel bounds them), serves it again once it
 * reads, and closes it once it has read nothing for 10 s. Sending stops when the daemon has stopped reading (this socket's
 * unread bytes unchanged for 2 s), when all are sent and read, or after
 * 20 s; the daemon's RSS is checked as it goes. */
static void test_pipelined_requests_are_not_buffered(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    long rss0 = proc_kib(d.pid, "VmRSS");
    enum { TOTAL = 300000, BATCH = 1000 };
    static const char req[] = "{\"op\":\"metrics\"}";
    size_t flen = PH_EXECD_FRAME_HEADER + sizeof req - 1;
    uint8_t *batch = malloc(flen * BATCH);
    assert_non_null(batch);
    for (size_t i = 0; i < BATCH; i++) {
        uint8_t *f = batch + i * flen;
        f[0] = f[1] = f[2] = 0;
        f[3] = (uint8_t)(sizeof req - 1);
        memcpy(f + PH_EXECD_FRAME_HEADER, req, sizeof req - 1);
    }
    size_t sent = 0; /* bytes */
    const size_t want = flen * TOTAL;
    long growth = 0;
    int outq = -1, stable_since = 0;
    bool closed = false;
    int64_t t0 = ph_monotonic_ms(), stable_ms = t0;
    while (ph_monotonic_ms() - t0 < 20000 && growth < 32 * 1024) {
        if (sent < want) {
            size_t off = sent % (flen * BATCH);
            size_t n = flen * BATCH - off;
            if (n > want - sent)
                n = want - sent;
            ssize_t w = send(fd, batch + off, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0) {
                sent += (size_t)w;
                continue;
            }
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                closed = true;
                break;
            }
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        (void)poll(&p, 1, 100);
        growth = proc_kib(d.pid, "VmRSS") - rss0;
        int q = -1;
        assert_int_equal(ioctl(fd, SIOCOUTQ, &q), 0);
        if (sent == want && q == 0)
            break; /* everything sent was read */
        if (q != outq || (p.revents & POLLOUT)) {
            outq = q;
            stable_ms = ph_monotonic_ms();
            stable_since = 0;
        } else if (ph_monotonic_ms() - stable_ms >= 2000) {
            stable_since = 1; /* the daemon has stopped reading this peer */
            break;
        }
    }
    growth = proc_kib(d.pid, "VmRSS") - rss0;
    printf("%zu of %d pipelined metrics requests sent unread in %.1f s; the daemon %s; "
           "RSS growth %.1f MiB\n", sent / flen, TOTAL,
           (double)(ph_monotonic_ms() - t0) / 1000,
           closed ? "closed the connection" : stable_since ? "stopped reading" : "read on",
           (double)growth / 1024);
    assert_true(growth < 32 * 1024 || PH_ASAN);
    assert_true(closed || stable_since);
    if (!closed) {
        /* Paused, not dropped: reading the answers lets it go on... */
        for (int i = 0; i < 400; i++) {
            json_t *r = NULL;
            assert_int_equal(ph_wire_recv(fd, PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
            assert_non_null(ph_wire_str(r, "prometheus"));
            json_decref(r);
        }
        /* ...and a peer that then reads nothing for 10 s is closed. */
        int64_t t1 = ph_monotonic_ms();
        struct pollfd p = {.fd = fd, .events = 0};
        int ready = poll(&p, 1, 20000);
        int64_t after = ph_monotonic_ms() - t1;
        printf("then unread again: %s after %lld ms\n",
               ready == 1 && (p.revents & POLLHUP) ? "closed" : "still open", (long long)after);
        assert_true(ready == 1 && (p.revents & POLLHUP));
        assert_true(after >= 9000);
    }
    free(batch);
    close(fd);
    assert_int_equal(health_field(&d, "sandboxes"), 0); /* still serving */
    assert_int_equal(daemon_stop(&d), 0);
}

/* What a frame costs once parsed is bounded (docs/execd.md section 6): 20
 * frames of 16 MiB whose ignored field is [{},{},...] (each ~1.3 GB as
 * jansson objects) are refused before they are parsed, and 20 lease.open
 * frames at the value cap are parsed and queued behind a running command;
 * the daemon's peak RSS stays under the documented bound for 20
 * connections, 20 x (16 MiB + 8 MiB) + 4 x 16 MiB. The daemon's RSS is checked
 * between frames, so a daemon without the bound fails here before it takes
 * the host's memory. */
static void test_parse_amplification_is_bounded(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--max-executions=1", "--queue=32",
                                "--max-requests-per-identity=32", NULL};
    daemon_start(&d, opts);
    const size_t len = PH_EXECD_DEFAULT_MAX_REQUEST;
    const long bound_kib = (20L * (16 + 8) + 4 * 16) * 1024;
    long rss0 = proc_kib(d.pid, "VmRSS");
    uint8_t *amp = amplifying_frame("lease.open", len);
    /* At the cap: 32,000 values, the rest one long string. */
    uint8_t *cap = malloc(PH_EXECD_FRAME_HEADER + len);
    assert_non_null(cap);
    memcpy(cap, amp, PH_EXECD_FRAME_HEADER);
    int hn = snprintf((char *)cap + PH_EXECD_FRAME_HEADER, 128,
                      "{\"op\":\"lease.open\",\"tenant\":\"t1\",\"lease\":\"l\","
                      "\"approval_hold_seconds\":60,\"x\":[");
    size_t i = PH_EXECD_FRAME_HEADER + (size_t)hn;
    for (int k = 0; k < 32000; k++, i += 3)
        memcpy(cap + i, "{},", 3);
    memcpy(cap + i, "\"\"],\"pad\":\"", 11);
    i += 11;
    memset(cap + i, 'a', PH_EXECD_FRAME_HEADER + len - 2 - i);
    memcpy(cap + PH_EXECD_FRAME_HEADER + len - 2, "\"}", 2);
    const char *const expect[2] = {"too_large", NULL};
    long peak = 0;
    int runner = -1;
    for (int round = 0; round < 2; round++) {
        int fds[20];
        if (round == 1) { /* the only thread busy: what follows waits in the queue */
            runner = raw_hello(&d);
            char *id = raw_create(runner, "t1");
            const char *const argv[] = {"sleep", "371.61", NULL};
            json_t *req = raw_execute_req("t1", id, argv);
            json_object_set_new(req, "timeout_seconds", json_integer(300));
            assert_int_equal(ph_wire_send(runner, req), 0);
            json_decref(req);
            free(id);
            for (int t = 0; t < 100 && health_field(&d, "executions") != 1; t++)
                usleep(20 * 1000);
        }
        for (int k = 0; k < 20; k++) {
            fds[k] = raw_hello(&d);
            send_all(fds[k], round == 0 ? amp : cap, PH_EXECD_FRAME_HEADER + len);
            long now = proc_kib(d.pid, "VmHWM") - rss0;
            if (now > bound_kib && !PH_ASAN)
                fail_msg("peak RSS growth %ld MiB after %d frames: over the bound (%ld MiB)",
                         now / 1024, k + 1, bound_kib / 1024);
        }
        if (round == 1) {
            /* Each frame is parsed in turn (seconds apiece under ASan). */
            int64_t queued = 0, t0 = ph_monotonic_ms();
            while (queued != 20 && ph_monotonic_ms() - t0 < 240000) {
                if ((queued = health_field(&d, "queued")) != 20)
                    usleep(50 * 1000);
            }
            printf("20 parsed requests queued: %lld; RSS growth %.1f MiB\n", (long long)queued,
                   (double)(proc_kib(d.pid, "VmRSS") - rss0) / 1024);
            assert_int_equal(queued, 20);
            close(runner); /* its command is killed; the queue runs */
        }
        for (int k = 0; k < 20; k++) {
            json_t *r = NULL;
            assert_int_equal(ph_wire_recv(fds[k], PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
            if (expect[round])
                assert_string_equal(error_of(r) ? error_of(r) : "ok", expect[round]);
            else
                assert_true(json_is_true(json_object_get(r, "ok")));
            json_decref(r);
            close(fds[k]);
        }
        long hwm = proc_kib(d.pid, "VmHWM") - rss0;
        peak = hwm > peak ? hwm : peak;
        printf("20 frames of 16 MiB (%s): peak RSS growth %.1f MiB, documented bound %ld MiB\n",
               round == 0 ? "[{},{},...]: refused too_large" : "32,000 values: queued, served",
               (double)hwm / 1024, bound_kib / 1024);
    }
    assert_true(peak < bound_kib || PH_ASAN);
    free(amp);
    free(cap);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A frame of len body bytes, {"op":op,"p":"\ud83d\ude00..."}: escapes the
 * pre-scan counts as one value and jansson takes seconds to decode. */
static uint8_t *escape_frame(const char *op, size_t len)
{
    uint8_t *f = malloc(PH_EXECD_FRAME_HEADER + len);
    assert_non_null(f);
    uint8_t *b = f + PH_EXECD_FRAME_HEADER;
    size_t i = (size_t)sprintf((char *)b, "{\"op\":\"%s\",\"p\":\"", op);
    while (i + 12 + 2 <= len) {
        memcpy(b + i, "\\ud83d\\ude00", 12);
        i += 12;
    }
    while (i < len - 2)
        b[i++] = 'a';
    memcpy(b + i, "\"}", 2);
    f[0] = (uint8_t)(len >> 24);
    f[1] = (uint8_t)(len >> 16);
    f[2] = (uint8_t)(len >> 8);
    f[3] = (uint8_t)len;
    return f;
}

/* Open, hello, a 16 MiB frame, close, again and again: a frame still on the
 * parser's queue keeps its connection's slot, so what is queued stays within
 * --max-connections frames. */
static void test_closing_does_not_free_a_queued_frame_slot(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--max-connections=4", NULL};
    daemon_start(&d, opts);
    const size_t len = PH_EXECD_DEFAULT_MAX_REQUEST - 64;
    const long bound_kib = (4L * (16 + 8) + 4 * 16) * 1024;
    uint8_t *f = escape_frame("health", len);
    long rss0 = proc_kib(d.pid, "VmRSS");
    int sent = 0;
    for (int k = 0; k < 24; k++) {
        int fd = raw_connect(&d);
        assert_true(fd >= 0);
        json_t *r = raw_call(fd, json_pack("{s:s}", "op", "hello"));
        if (r != NULL && json_is_true(json_object_get(r, "ok"))) {
            size_t off = 0;
            ssize_t n;
            while (off < PH_EXECD_FRAME_HEADER + len &&
                   (n = send(fd, f + off, PH_EXECD_FRAME_HEADER + len - off, MSG_NOSIGNAL)) > 0)
                off += (size_t)n;
            sent += off == PH_EXECD_FRAME_HEADER + len;
        }
        json_decref(r);
        close(fd);
    }
    long hwm = proc_kib(d.pid, "VmHWM") - rss0;
    printf("24 rounds (%d frames of 16 MiB sent, then closed) at --max-connections=4: peak RSS "
           "growth %.1f MiB, documented bound %ld MiB\n",
           sent, (double)hwm / 1024, bound_kib / 1024);
    assert_true(hwm < bound_kib || PH_ASAN);
    /* Every slot is given back once its frame is: a frame being parsed
     * finishes, those queued behind it are dropped unparsed. */
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE, .hard_cap_ms = 10000};
    ph_execd_service *svc = NULL;
    ph_diag diag = {0};
    for (int t = 0; t < 1200 && svc == NULL; t++)
        if (ph_execd_service_open(d.sock, &cfg, &svc, &diag) != PH_OK)
            usleep(100 * 1000);
    assert_non_null(svc);
    ph_execd_service_close(&svc);
    free(f);
    assert_int_equal(daemon_stop(&d), 0);
}

/* Identity A queues four 16 MiB frames that take the parser a while each;
 * identity B's (uid 65534) 100 KiB frame, sent right after, is parsed next,
 * not after all of A's. */
static void test_one_identity_cannot_hold_the_parser(void **state)
{
    (void)state;
    enum { HOL_A = 4 };
    xdaemon d;
    const char *const opts[] = {"--allow-uid=65534", "--socket-mode=0666",
                                "--max-requests-per-identity=8", NULL};
    daemon_start(&d, opts);
    assert_int_equal(setresuid((uid_t)-1, 65534, (uid_t)-1), 0);
    int b = raw_hello(&d); /* SO_PEERCRED: the effective uid at connect */
    assert_int_equal(setresuid((uid_t)-1, 0, (uid_t)-1), 0);
    const size_t len = PH_EXECD_DEFAULT_MAX_REQUEST - 64, small = 100 * 1024;
    uint8_t *f = escape_frame("health", len), *g = escape_frame("health", small);
    int a[HOL_A];
    for (int i = 0; i < HOL_A; i++) { /* all but their last byte, then those at once */
        a[i] = raw_hello(&d);
        send_all(a[i], f, PH_EXECD_FRAME_HEADER + len - 1);
    }
    for (int i = 0; i < HOL_A; i++)
        send_all(a[i], f + PH_EXECD_FRAME_HEADER + len - 1, 1);
    int64_t t0 = ph_monotonic_ms();
    send_all(b, g, PH_EXECD_FRAME_HEADER + small);
    json_t *r = NULL;
    assert_int_equal(ph_wire_recv(b, PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
    int64_t b_ms = ph_monotonic_ms() - t0;
    int answered = 0;
    for (int i = 0; i < HOL_A; i++) {
        struct pollfd p = {.fd = a[i], .events = POLLIN};
        answered += poll(&p, 1, 0) == 1;
    }
    printf("identity B's 100 KiB frame behind %d of A's 16 MiB frames: %s after %lld ms, "
           "with %d of A's answered by then\n",
           HOL_A, error_of(r) ? error_of(r) : "served", (long long)b_ms, answered);
    assert_null(error_of(r));
    json_decref(r);
    assert_true(answered <= HOL_A - 2); /* B waits for the frame being parsed, not all */
    for (int i = 0; i < HOL_A; i++) {
        assert_int_equal(ph_wire_recv(a[i], PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
        assert_null(error_of(r));
        json_decref(r);
        close(a[i]);
    }
    close(b);
    free(f);
    free(g);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A peer that asks for a whole 8 MiB file and reads it at 80 KiB/s is
 * closed once the answer is past its deadline (10 s + 1 s per MiB unsent),
 * not served for minutes. */
static void test_a_slow_reader_does_not_hold_an_answer(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    char *id = raw_create(fd, "t1");
    const char *const argv[] = {"sh", "-c", "head -c 8388608 /dev/zero > big", NULL};
    json_t *r = raw_call(fd, raw_execute_req("t1", id, argv));
    assert_null(error_of(r));
    json_decref(r);
    r = raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.workspace", "tenant", "t1",
                               "environment", id));
    char ws[128];
    snprintf(ws, sizeof ws, "%s", ph_wire_str(r, "workspace"));
    json_decref(r);
    int slow = raw_hello(&d);
    int small = 4096;
    assert_int_equal(setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    json_t *read = json_pack("{s:s, s:s, s:s, s:s, s:I}", "op", "workspace.read", "tenant", "t1",
                             "workspace", ws, "path", "big", "max_bytes",
                             (json_int_t)(16 * 1024 * 1024));
    assert_int_equal(ph_wire_send(slow, read), 0);
    json_decref(read);
    int64_t t0 = ph_monotonic_ms();
    size_t got = 0;
    bool closed = false;
    while (!closed && ph_monotonic_ms() - t0 < 60000) {
        char buf[16384];
        ssize_t n = recv(slow, buf, sizeof buf, 0);
        closed = n <= 0;
        got += n > 0 ? (size_t)n : 0;
        usleep(200 * 1000); /* the peer's pace: 80 KiB/s */
    }
    int64_t ms = ph_monotonic_ms() - t0;
    printf("an 8 MiB answer read at 80 KiB/s: %s after %lld ms, %zu KiB read\n",
           closed ? "closed" : "still open", (long long)ms, got / 1024);
    assert_true(closed);
    assert_true(ms < 40000);
    close(slow);
    close(fd);
    free(id);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A 16 MiB frame is parsed off the loop: another connection's health is
 * answered while it is. */
/* workspace.list is bounded whatever max_entries asks: a sandbox fills a
 * directory with entries of long names (here 50,000 names of 240 bytes,
 * made from the host side for speed; a command makes them the same way, up
 * to its workspace's inode limit), and a list asking for 10^9 entries must
 * come back truncated at the port's caps, with the daemon's peak RSS
 * growing by a bounded amount, not by the size of the directory. */
static void test_a_huge_directory_list_is_bounded(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    char *env = raw_create(fd, "t1");
    char *ws = raw_workspace(fd, env);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s/workspace/many", d.state, env);
    assert_int_equal(mkdir(dir, 0755), 0);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    const int files = 50000;
    char name[256];
    memset(name, 'n', 240);
    name[240] = '\0';
    for (int i = 0; i < files; i++) {
        snprintf(name, 12, "%010d", i);
        name[10] = 'n';
        int f = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(f >= 0);
        close(f);
    }
    close(dfd);
    long rss0 = proc_kib(d.pid, "VmHWM");
    int64_t t0 = ph_monotonic_ms();
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:s, s:I}", "op", "workspace.list",
                                       "tenant", "t1", "workspace", ws, "path", "many",
                                       "max_entries", (json_int_t)1000000000));
    int64_t ms = ph_monotonic_ms() - t0;
    long grew = proc_kib(d.pid, "VmHWM") - rss0;
    assert_non_null(r);
    size_t got = json_array_size(json_object_get(r, "entries"));
    bool truncated = json_is_true(json_object_get(r, "truncated"));
    printf("list of %d entries of 240-byte names, max_entries 10^9: %zu entries, truncated %d, "
           "%lld ms, daemon peak RSS growth %.1f MiB\n",
           files, got, truncated, (long long)ms, (double)grew / 1024);
    assert_true(json_is_true(json_object_get(r, "ok")));
    assert_true(truncated);
    assert_true(got <= PH_WS_LIST_MAX_ENTRIES);
    size_t name_bytes = 0;
    for (size_t i = 0; i < got; i++)
        name_bytes += strlen(ph_wire_str(json_array_get(json_object_get(r, "entries"), i),
                                         "name")) + 1;
    assert_true(name_bytes <= PH_WS_LIST_MAX_NAME_BYTES);
    if (!PH_ASAN)
        assert_true(grew < 32 * 1024);
    json_decref(r);
    ph_test_rmtree(dir); /* else destroying them could outlast the stop's 10 s */
    close(fd);
    free(ws);
    free(env);
    assert_int_equal(daemon_stop(&d), 0);
}

/* Reads a streamed workspace.read of path in ws with chunk_bytes chunk on
 * fd: the number of chunk frames up to the end (or an error); the error
 * code in err ("" for none), the bytes in *data (new, may be NULL). */
static size_t stream_frames(int fd, const char *ws, const char *path, json_int_t chunk,
                            char err[static 64], uint8_t **data, size_t *len)
{
    json_t *r = raw_call(fd, json_pack("{s:s, s:s, s:s, s:s, s:I}", "op", "workspace.read",
                                       "tenant", "t1", "workspace", ws, "path", path,
                                       "chunk_bytes", chunk));
    assert_non_null(r);
    snprintf(err, 64, "%s", json_is_true(json_object_get(r, "ok")) ? "" : error_of(r));
    if (err[0] != '\0' && strcmp(err, "invalid") == 0)
        assert_string_equal(ph_wire_str(r, "message"), "chunk_bytes must be 4096..8388608");
    json_decref(r);
    size_t frames = 0;
    *data = NULL;
    *len = 0;
    while (err[0] == '\0') {
        r = NULL;
        assert_int_equal(ph_wire_recv(fd, PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
        uint8_t *c = NULL;
        size_t n = 0;
        if (ph_wire_get_bytes(r, NULL, "chunk_base64", &c, &n) == 0) {
            frames++;
            *data = realloc(*data, *len + n + 1);
            assert_non_null(*data);
            memcpy(*data + *len, c, n);
            *len += n;
            free(c);
        } else if (!json_is_true(json_object_get(r, "ok"))) {
            snprintf(err, 64, "%s", error_of(r));
        } else {
            assert_true(json_is_true(json_object_get(r, "end")));
            json_decref(r);
            break;
        }
        json_decref(r);
    }
    return frames;
}

/* A streamed read costs the daemon one frame (a base64 encoding, a queue
 * entry, a loop wake-up) per chunk: chunks below the floor are refused, so
 * a file of size bytes never takes more than size / 4096 + 1 frames. */
static void test_a_streamed_read_has_a_chunk_floor(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    char *env = raw_create(fd, "t1");
    char *ws = raw_workspace(fd, env);
    enum { SIZE = 256 * 1024 };
    static uint8_t content[SIZE];
    for (size_t i = 0; i < SIZE; i++)
        content[i] = (uint8_t)(i * 7 + i / 251);
    char file[512];
    snprintf(file, sizeof file, "%s/%s/workspace/f.bin", d.state, env);
    int f = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(f >= 0);
    assert_int_equal(write(f, content, SIZE), SIZE);
    close(f);
    const json_int_t asks[] = {1, PH_WIRE_CHUNK_MIN - 1, 0, PH_WIRE_CHUNK_MIN, 65536};
    for (size_t i = 0; i < sizeof asks / sizeof *asks; i++) {
        char err[64];
        uint8_t *data;
        size_t len;
        size_t frames = stream_frames(fd, ws, "f.bin", asks[i], err, &data, &len);
        printf("chunk_bytes %lld on a %d-byte file: %zu chunk frames, %s\n",
               (long long)asks[i], SIZE, frames, err[0] ? err : "streamed");
        assert_true(frames <= SIZE / PH_WIRE_CHUNK_MIN + 1);
        if (asks[i] < PH_WIRE_CHUNK_MIN) {
            assert_string_equal(err, "invalid");
        } else {
            assert_string_equal(err, "");
            assert_int_equal(frames, (SIZE + asks[i] - 1) / asks[i]);
            assert_int_equal(len, SIZE);
            assert_memory_equal(data, content, SIZE);
        }
        free(data);
    }
    close(fd);
    free(ws);
    free(env);
    assert_int_equal(daemon_stop(&d), 0);
}

/* At start the daemon destroys every environment its state directory holds
 * (recovery): a second daemon started on the state directory of a running
 * one (two units, a copy started by hand) must be refused, not destroy the
 * first one's live sandboxes. */
static void test_a_second_daemon_on_the_state_dir_is_refused(void **state)
{
    (void)state;
    xdaemon a, b;
    daemon_start(&a, NULL);
    int fd = raw_hello(&a);
    char *env = raw_create(fd, "t1");
    assert_int_equal(env_dirs(a.state), 1);
    daemon_prepare(&b);
    snprintf(b.state, sizeof b.state, "%s", a.state);
    const char *const allow[] = {"--allow-uid=0", NULL};
    int rc = daemon_spawn(&b, allow, NULL);
    size_t len;
    char *log = ph_test_read_file(b.log, &len);
    size_t left = env_dirs(a.state);
    const char *const argv[] = {"true", NULL};
    json_t *r = raw_call(fd, raw_execute_req("t1", env, argv));
    printf("second daemon on the same state directory: %s (exit %d); the first's "
           "environments left: %zu of 1; executing in it: %s\n",
           rc == -1 ? "listening" : "refused", rc, left, error_of(r) ? error_of(r) : "ok");
    assert_int_equal(rc, 78);
    assert_non_null(log);
    assert_non_null(strstr(log, "state_dir_in_use"));
    assert_int_equal(left, 1);
    assert_null(error_of(r));
    json_decref(r);
    free(log);
    assert_int_equal(daemon_stop(&b), -1);
    close(fd);
    free(env);
    assert_int_equal(daemon_stop(&a), 0);
}

/* Reaps d's daemon by hand (SIGTERM), so what its stop left can be looked
 * at before daemon_stop removes its directory. Its exit status. */
static int daemon_reap(xdaemon *d)
{
    int status = reap(d->pid);
    g_live[live_slot(d->dir)].pid = 0;
    d->pid = 0;
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A second daemon given another state directory but the --socket of a
 * running one (two units sharing a socket path) is refused; it used to
 * replace the first one's socket, cutting its clients off. */
static void test_a_second_daemon_on_the_socket_is_refused(void **state)
{
    (void)state;
    xdaemon a, b;
    daemon_start(&a, NULL);
    int fd = raw_hello(&a);
    char *env = raw_create(fd, "t1");
    struct stat before, after;
    assert_int_equal(lstat(a.sock, &before), 0);
    daemon_prepare(&b);
    snprintf(b.sock, sizeof b.sock, "%s", a.sock);
    const char *const allow[] = {"--allow-uid=0", NULL};
    int rc = daemon_spawn_at(&b, allow, NULL, false);
    size_t len;
    char *log = ph_test_read_file(b.log, &len);
    bool same = lstat(a.sock, &after) == 0 && after.st_ino == before.st_ino;
    /* A new connection reaches the first daemon (its environment is
     * found), and so does the one made before. */
    int fresh = raw_connect(&a);
    json_t *h = fresh >= 0 ? raw_call(fresh, json_pack("{s:s}", "op", "hello")) : NULL;
    const char *const argv[] = {"true", NULL};
    json_t *r1 = fresh >= 0 ? raw_call(fresh, raw_execute_req("t1", env, argv)) : NULL;
    json_t *r0 = raw_call(fd, raw_execute_req("t1", env, argv));
    printf("second daemon on the same socket: %s (exit %d); the path is still the first's: %s; "
           "a new client's execute: %s; the old client's: %s\n",
           rc == -1 ? "listening" : "refused", rc, same ? "yes" : "no",
           r1 ? (error_of(r1) ? error_of(r1) : "ok") : "no connection",
           error_of(r0) ? error_of(r0) : "ok");
    assert_int_equal(rc, 78);
    assert_non_null(log);
    assert_non_null(strstr(log, "\"socket_in_use\""));
    assert_true(same);
    assert_non_null(h);
    assert_null(error_of(r1));
    assert_null(error_of(r0));
    json_decref(h);
    json_decref(r1);
    json_decref(r0);
    free(log);
    assert_int_equal(daemon_stop(&b), -1);
    if (fresh >= 0)
        close(fresh);
    close(fd);
    free(env);
    assert_int_equal(daemon_stop(&a), 0);
}

/* A daemon's stop removes its socket's path only while it is still its own:
 * a daemon that took the path since (the file was removed, another was
 * started there) keeps serving. It used to be unlinked, whoever it was. */
static void test_the_stop_leaves_a_socket_another_bound(void **state)
{
    (void)state;
    xdaemon a, b;
    daemon_start(&a, NULL);
    daemon_prepare(&b);
    snprintf(b.sock, sizeof b.sock, "%s", a.sock);
    assert_int_equal(unlink(a.sock), 0);
    const char *const allow[] = {"--allow-uid=0", NULL};
    assert_int_equal(daemon_spawn(&b, allow, NULL), -1);
    struct stat bound, after;
    assert_int_equal(lstat(b.sock, &bound), 0);
    assert_int_equal(daemon_reap(&a), 0);
    bool kept = lstat(b.sock, &after) == 0 && after.st_ino == bound.st_ino;
    int fd = kept ? raw_connect(&b) : -1;
    json_t *h = fd >= 0 ? raw_call(fd, json_pack("{s:s}", "op", "hello")) : NULL;
    printf("the first daemon stopped: the second's socket %s; hello through it: %s\n",
           kept ? "kept" : "removed", h ? (error_of(h) ? error_of(h) : "ok") : "no connection");
    assert_true(kept);
    assert_non_null(h);
    assert_null(error_of(h));
    json_decref(h);
    close(fd);
    /* The second's own stop removes it: it is still its own. */
    assert_int_equal(daemon_reap(&b), 0);
    assert_int_equal(lstat(b.sock, &after), -1);
    assert_int_equal(daemon_stop(&b), -1);
    assert_int_equal(daemon_stop(&a), -1);
}

/* A killed daemon's socket (nothing accepts on it) is replaced by the next
 * one; a symlink or a regular file at --socket is refused and kept. */
static void test_a_stale_socket_is_replaced_a_file_is_not(void **state)
{
    (void)state;
    xdaemon a, b;
    daemon_start(&a, NULL);
    kill(a.pid, SIGKILL);
    daemon_reap(&a);
    struct stat st;
    assert_int_equal(lstat(a.sock, &st), 0); /* left behind, stale */
    daemon_prepare(&b);
    snprintf(b.sock, sizeof b.sock, "%s", a.sock);
    const char *const allow[] = {"--allow-uid=0", NULL};
    assert_int_equal(daemon_spawn_at(&b, allow, NULL, false), -1);
    close(raw_hello(&b));
    assert_int_equal(daemon_reap(&b), 0);
    /* A symlink to a socket path, and a regular file. */
    char target[300];
    snprintf(target, sizeof target, "%s/elsewhere.sock", a.dir);
    assert_int_equal(symlink(target, a.sock), 0);
    int rc_link = daemon_spawn_at(&b, allow, NULL, false);
    bool link_kept = lstat(a.sock, &st) == 0 && S_ISLNK(st.st_mode) && lstat(target, &st) != 0;
    unlink(a.sock);
    int f = open(a.sock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(f >= 0);
    assert_int_equal(write(f, "keep", 4), 4);
    close(f);
    int rc_file = daemon_spawn_at(&b, allow, NULL, false);
    size_t len;
    char *back = ph_test_read_file(a.sock, &len);
    char *log = ph_test_read_file(b.log, &len);
    printf("--socket a symlink: exit %d (kept: %s); a regular file: exit %d (kept: %s)\n",
           rc_link, link_kept ? "yes" : "no", rc_file,
           back && strcmp(back, "keep") == 0 ? "yes" : "no");
    assert_int_equal(rc_link, 78);
    assert_true(link_kept);
    assert_int_equal(rc_file, 78);
    assert_non_null(back);
    assert_string_equal(back, "keep");
    assert_non_null(log);
    assert_non_null(strstr(log, "\"socket_not_a_socket\""));
    free(back);
    free(log);
    assert_int_equal(daemon_stop(&b), -1);
    assert_int_equal(daemon_stop(&a), -1);
}

/* Runs the pinhole-sandbox CLI (fake, development) on state with args;
 * its exit status, its stdout and stderr in out. */
static int sandbox_cli(const char *state, const char *args, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s --mechanism fake --mode development --state-dir '%s' %s 2>&1 </dev/null",
             PH_SANDBOX_CLI, state, args);
    return sbx_shell(cmd, out, cap);
}

/* The daemon's start destroys every environment of its state directory
 * (recovery), so the environments pinhole-sandbox keeps in its own state
 * directory between runs would be destroyed by a daemon given that
 * directory: it is refused there instead, and nothing is deleted. */
static void test_the_daemon_refuses_the_cli_state_dir(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    char out[4096], id[64] = "";
    assert_int_equal(sandbox_cli(d.state, "create --tenant t --lease l", out, sizeof out), 0);
    assert_int_equal(strncmp(out, "env-", 4), 0);
    snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
    const char *const allow[] = {"--allow-uid=0", NULL};
    int rc = daemon_spawn(&d, allow, NULL);
    size_t left = env_dirs(d.state);
    char args[256];
    snprintf(args, sizeof args, "exec %s -- echo still-here", id);
    int exec_rc = sandbox_cli(d.state, args, out, sizeof out);
    printf("pinhole-execd on pinhole-sandbox's state directory: %s (exit %d); the CLI's "
           "environments left: %zu of 1; exec in it: exit %d\n",
           rc == -1 ? "listening" : "refused", rc, left, exec_rc);
    assert_int_equal(rc, 78);
    assert_true(log_has(&d, "\"state_dir_owned\""));
    assert_int_equal(left, 1);
    assert_int_equal(exec_rc, 0);
    assert_non_null(strstr(out, "still-here"));
    /* A directory an earlier version left without the owner file: its
     * environments without an execd.lock are the CLI's. */
    char owner[400];
    snprintf(owner, sizeof owner, "%s/owner", d.state);
    assert_int_equal(unlink(owner), 0);
    assert_int_equal(daemon_spawn(&d, allow, NULL), 78);
    assert_int_equal(env_dirs(d.state), 1);
    assert_int_equal(access(owner, F_OK), -1);
    snprintf(args, sizeof args, "destroy %s", id);
    assert_int_equal(sandbox_cli(d.state, args, out, sizeof out), 0);
    assert_int_equal(daemon_stop(&d), -1);
}

/* And the CLI is refused in the daemon's state directory: what it made
 * there would be destroyed at the daemon's next start, and what it could
 * reach there is the daemon's (a destroy through the CLI used to remove
 * the daemon's sandbox under its client). */
static void test_the_cli_refuses_the_daemon_state_dir(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int fd = raw_hello(&d);
    char *env = raw_create(fd, "t1");
    char out[4096], args[256];
    int create_rc = sandbox_cli(d.state, "create --tenant t --lease l", out, sizeof out);
    bool owned = strstr(out, "state_dir_owned") != NULL;
    snprintf(args, sizeof args, "destroy %s", env);
    int destroy_rc = sandbox_cli(d.state, args, out, sizeof out);
    size_t left = env_dirs(d.state);
    const char *const argv[] = {"true", NULL};
    json_t *r = raw_call(fd, raw_execute_req("t1", env, argv));
    printf("pinhole-sandbox on pinhole-execd's state directory: create exit %d%s, destroy of "
           "the daemon's environment exit %d; environments: %zu (want 1); the daemon's "
           "execute: %s\n",
           create_rc, owned ? " (state_dir_owned)" : "", destroy_rc, left,
           error_of(r) ? error_of(r) : "ok");
    assert_int_equal(create_rc, 3);
    assert_true(owned);
    assert_int_equal(destroy_rc, 3);
    assert_int_equal(left, 1);
    assert_null(error_of(r));
    json_decref(r);
    close(fd);
    free(env);
    assert_int_equal(daemon_stop(&d), 0);
}

static void test_a_big_frame_does_not_stall_the_loop(void **state)
{
    (void)state;
    xdaemon d;
    daemon_start(&d, NULL);
    int big = raw_hello(&d), other = raw_hello(&d);
    uint8_t *f = amplifying_frame("health", PH_EXECD_DEFAULT_MAX_REQUEST);
    send_all(big, f, PH_EXECD_FRAME_HEADER + PH_EXECD_DEFAULT_MAX_REQUEST);
    free(f);
    int unread = -1; /* until the daemon has read the whole frame: it parses now */
    for (int i = 0; i < 1000 && unread != 0; i++) {
        assert_int_equal(ioctl(big, SIOCOUTQ, &unread), 0);
        if (unread != 0)
            usleep(5 * 1000);
    }
    assert_int_equal(unread, 0);
    int64_t t0 = ph_monotonic_ms();
    json_t *h = raw_call(other, json_pack("{s:s}", "op", "health"));
    int64_t ms = ph_monotonic_ms() - t0;
    printf("health answered %lld ms after a 16 MiB frame was sent on another connection\n",
           (long long)ms);
    assert_true(json_is_true(json_object_get(h, "ok")));
    assert_true(ms < 1000);
    json_decref(h);
    json_t *r = NULL;
    assert_int_equal(ph_wire_recv(big, PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
    assert_string_equal(error_of(r) ? error_of(r) : "ok", "too_large");
    json_decref(r);
    close(big);
    close(other);
    assert_int_equal(daemon_stop(&d), 0);
}

/* Another identity (uid 65534) connects, creates and executes. */
static void second_identity_served(const xdaemon *d, char *verdict, size_t cap)
{
    int64_t t0 = ph_monotonic_ms();
    int fd = raw_connect(d);
    json_t *h = fd >= 0 ? raw_call(fd, json_pack("{s:s}", "op", "hello")) : NULL;
    json_t *c = h ? raw_call(fd, json_pack("{s:s, s:s, s:s}", "op", "environment.create",
                                           "tenant", "t9", "lease", "l9"))
                  : NULL;
    const char *const argv[] = {"echo", "b", NULL};
    const char *id = ph_wire_str(c, "environment");
    json_t *x = id ? raw_call(fd, raw_execute_req("t9", id, argv)) : NULL;
    snprintf(verdict, cap, "%s %s %s %lld", error_of(h) ? error_of(h) : "ok",
             error_of(c) ? error_of(c) : "ok", error_of(x) ? error_of(x) : "ok",
             (long long)(ph_monotonic_ms() - t0));
    json_decref(h);
    json_decref(c);
    json_decref(x);
    if (fd >= 0)
        close(fd);
}

/* One identity at every cap of its fair share (connections, requests,
 * sandboxes): a second identity is still served at once. */
static void test_one_identity_at_its_caps_leaves_room(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--allow-uid=65534", "--socket-mode=0666",
                                "--max-connections=4", "--max-executions=2",
                                "--max-sandboxes=2", NULL};
    daemon_start(&d, opts);
    /* A tries every connection the daemon has: its share is 2 of 4. */
    int a[4], served = 0;
    for (int i = 0; i < 4; i++) {
        a[i] = raw_connect(&d);
        json_t *r = raw_call(a[i], json_pack("{s:s}", "op", "hello"));
        served += r != NULL;
        json_decref(r);
    }
    char *id = raw_create(a[0], "t1");
    json_t *r = raw_call(a[1], json_pack("{s:s, s:s, s:s}", "op", "environment.create",
                                         "tenant", "t1", "lease", "l2"));
    char second_sandbox[32];
    snprintf(second_sandbox, sizeof second_sandbox, "%s", error_of(r) ? error_of(r) : "created");
    json_decref(r);
    const char *const argv[] = {"sleep", "71.51", NULL};
    json_t *req = raw_execute_req("t1", id, argv);
    assert_int_equal(ph_wire_send(a[0], req), 0);
    json_decref(req);
    for (int t = 0; t < 100 && !sbx_process_with_arg_exists("71.51"); t++)
        usleep(20 * 1000);
    r = raw_call(a[1], json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant", "t1",
                                 "lease", "l3", "approval_hold_seconds", 60));
    char second_request[32];
    snprintf(second_request, sizeof second_request, "%s", error_of(r) ? error_of(r) : "ok");
    json_decref(r);
    char verdict[512];
    as_nobody(&d, second_identity_served, verdict, sizeof verdict);
    printf("identity A: %d of 4 connections served, a second sandbox %s, a second request "
           "while one runs %s; identity B (hello, create, execute, ms): %s\n",
           served, second_sandbox, second_request, verdict);
    assert_int_equal(served, 2);
    assert_string_equal(second_sandbox, "busy");
    assert_string_equal(second_request, "busy");
    assert_true(strncmp(verdict, "ok ok ok ", 9) == 0);
    assert_true(atol(verdict + 9) < 2000);
    for (int i = 0; i < 4; i++)
        close(a[i]);
    free(id);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A frame begun must complete within --frame-timeout-ms of its first byte:
 * a peer holding 3 bytes of one is answered `protocol` and closed. */
static void test_a_frame_must_complete_in_time(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--frame-timeout-ms=1000", NULL};
    daemon_start(&d, opts);
    int a2 = raw_hello(&d);
    int64_t t0 = ph_monotonic_ms();
    assert_int_equal(send(a2, "\0\0\0", 3, MSG_NOSIGNAL), 3);
    struct pollfd p = {.fd = a2, .events = POLLIN};
    json_t *gone = NULL;
    int ready = poll(&p, 1, 5000);
    if (ready == 1)
        (void)ph_wire_recv(a2, PH_EXECD_MAX_RESPONSE_BYTES, &gone);
    int64_t held = ph_monotonic_ms() - t0;
    printf("a partial frame (3 bytes): %s after %lld ms\n",
           ready == 1 ? "answered and closed" : "still open", (long long)held);
    assert_int_equal(ready, 1);
    assert_string_equal(error_of(gone), "protocol");
    assert_true(held >= 900 && held < 3000);
    json_decref(gone);
    assert_null(raw_call(a2, json_pack("{s:s}", "op", "health"))); /* closed */
    close(a2);
    /* Pipelined: each write completes a frame and begins the next, each
     * frame complete 600 ms after its first byte; the third ends 1200 ms
     * after the second began. Each frame has its own deadline. */
    int a3 = raw_hello(&d);
    uint8_t *f;
    size_t flen;
    json_t *h = json_pack("{s:s}", "op", "health");
    assert_int_equal(ph_wire_frame(h, &f, &flen), 0);
    json_decref(h);
    send_all(a3, f, flen);
    send_all(a3, f, 3);
    for (int i = 0; i < 2; i++) {
        usleep(600 * 1000); /* the peer's pace */
        send_all(a3, f + 3, flen - 3);
        if (i == 0)
            send_all(a3, f, 3);
    }
    int answered = 0;
    for (int i = 0; i < 3; i++) {
        json_t *r = NULL;
        if (ph_wire_recv(a3, PH_EXECD_MAX_RESPONSE_BYTES, &r) == 0 && error_of(r) == NULL)
            answered++;
        json_decref(r);
    }
    printf("three pipelined frames, each complete 600 ms after its first byte: %d answered\n",
           answered);
    assert_int_equal(answered, 3);
    free(f);
    close(a3);
    assert_int_equal(daemon_stop(&d), 0);
}

/* ---- TCP with mutual TLS ---- */

/* Makes ca1 (server + workers a and b) and ca2 (a rogue "worker-a") with the
 * openssl command in dir. */
static void make_pki(const char *dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "set -e; cd '%s'; "
             "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key "
             "2>/dev/null; }; "
             "ca() { key $1; openssl req -x509 -new -key $1.key -out $1.pem -days 2 -subj /CN=$1; }; "
             "leaf() { key $1; openssl req -new -key $1.key -out $1.csr -subj \"$3\"; "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > $1.ext; "
             "if [ -n \"$4\" ]; then printf 'extendedKeyUsage=%%s\\n' $4 >> $1.ext; fi; "
             "openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -days 2 "
             "-extfile $1.ext -out $1.pem 2>/dev/null; }; "
             "ca ca1; ca ca2; leaf srv ca1 /CN=localhost serverAuth; "
             "leaf wa ca1 /O=pinhole/CN=worker-a clientAuth; "
             "leaf wb ca1 /O=pinhole/CN=worker-b clientAuth; "
             "leaf rogue ca2 /O=pinhole/CN=worker-a clientAuth; "
             "leaf noeku ca1 /O=pinhole/CN=worker-c; leaf srvonly ca1 /O=pinhole/CN=worker-d serverAuth; "
             "chmod 644 srv.key",
             dir);
    assert_int_equal(system(cmd), 0);
}

/* The daemon's --tls-cert, --tls-key and --tls-ca options for the PKI
 * make_pki made in d->dir. */
static void tls_options(const xdaemon *d, char cert[static 300], char key[static 300],
                        char ca[static 300])
{
    snprintf(cert, 300, "--tls-cert=%s/srv.pem", d->dir);
    snprintf(key, 300, "--tls-key=%s/srv.key", d->dir);
    snprintf(ca, 300, "--tls-ca=%s/ca1.pem", d->dir);
}

static int port_from_log(const xdaemon *d, const char *event)
{
    size_t len;
    char *log = ph_test_read_file(d->log, &len);
    char key[64];
    snprintf(key, sizeof key, "\"event\":\"%s\"", event);
    const char *p = log ? strstr(log, key) : NULL;
    const char *q = p ? strstr(p, "\"port\":") : NULL;
    int port = q ? atoi(q + 7) : 0;
    free(log);
    return port;
}

static ph_status tls_open(const xdaemon *d, int port, const char *who, const char *ca,
                          ph_execd_service **svc, ph_diag *diag)
{
    char ca_file[300], cert[300], key[300];
    snprintf(ca_file, sizeof ca_file, "%s/%s.pem", d->dir, ca);
    snprintf(cert, sizeof cert, "%s/%s.pem", d->dir, who ? who : "");
    snprintf(key, sizeof key, "%s/%s.key", d->dir, who ? who : "");
    ph_execd_tls_config tls = {.host = "127.0.0.1", .port = (uint16_t)port,
                               .server_name = "localhost", .ca_file = ca_file,
                               .cert_file = who ? cert : NULL, .key_file = who ? key : NULL};
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE, .hard_cap_ms = 10000};
    return ph_execd_service_open_tls(&tls, &cfg, svc, diag);
}

/* A raw TLS session as worker `who`, for requests the client API cannot
 * forge (another identity's environment id). */
static SSL *tls_raw(const xdaemon *d, int port, const char *who, SSL_CTX **ctx, int *fd)
{
    char ca[300], cert[300], key[300];
    snprintf(ca, sizeof ca, "%s/ca1.pem", d->dir);
    snprintf(cert, sizeof cert, "%s/%s.pem", d->dir, who);
    snprintf(key, sizeof key, "%s/%s.key", d->dir, who);
    *ctx = SSL_CTX_new(TLS_client_method());
    assert_int_equal(SSL_CTX_load_verify_locations(*ctx, ca, NULL), 1);
    assert_int_equal(SSL_CTX_use_certificate_chain_file(*ctx, cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(*ctx, key, SSL_FILETYPE_PEM), 1);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(*fd, (struct sockaddr *)&sin, sizeof sin), 0);
    SSL *ssl = SSL_new(*ctx);
    SSL_set_fd(ssl, *fd);
    assert_int_equal(SSL_connect(ssl), 1);
    return ssl;
}

static json_t *tls_call(SSL *ssl, json_t *req)
{
    json_t *resp = NULL;
    int rc = ph_wire_send_io(ph_wire_ssl_write, ssl, req);
    json_decref(req);
    if (rc == 0)
        (void)ph_wire_recv_io(ph_wire_ssl_read, ssl, PH_EXECD_MAX_RESPONSE_BYTES, &resp);
    return resp;
}

static void test_tls_mutual_authentication(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    make_pki(d.dir);
    char o_cert[300], o_key[300], o_ca[300];
    tls_options(&d, o_cert, o_key, o_ca);
    const char *const opts[] = {"--allow-uid=0", "--tls-listen=127.0.0.1:0", o_cert, o_key, o_ca,
                                NULL};
    /* A key others can read is refused: the one secret the daemon holds. */
    assert_int_equal(daemon_spawn(&d, opts, NULL), 78);
    char key[300];
    snprintf(key, sizeof key, "%s/srv.key", d.dir);
    assert_int_equal(chmod(key, 0600), 0);
    assert_int_equal(daemon_spawn(&d, opts, NULL), -1);
    int port = port_from_log(&d, "listening_tls");
    assert_true(port > 0);

    ph_execd_service *a = NULL, *x = NULL;
    ph_diag diag = {0};
    if (tls_open(&d, port, "wa", "ca1", &a, &diag) != PH_OK)
        fail_msg("worker-a: %s", diag.message);
    ph_environment_spec spec = fake_spec();
    ph_execd_environment *env = NULL;
    assert_int_equal(ph_execd_environment_create(a, &spec, &env, &diag), PH_OK);
    const char *argv[] = {"echo", "over tls", NULL};
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = NULL;
    assert_int_equal(ph_execd_environment_execute(env, &cmd, &r, &diag), PH_OK);
    assert_string_equal((char *)r->out.data, "over tls\n");
    ph_execution_result_free(&r);

    /* Connections that never start their handshake: they have a budget of
     * their own, so identified workers on the unix socket are still served. */
    int hang[80];
    for (int i = 0; i < 80; i++) {
        hang[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(connect(hang[i], (struct sockaddr *)&sin, sizeof sin), 0);
    }
    usleep(300 * 1000);
    int u = raw_hello(&d);
    close(u);
    for (int i = 0; i < 80; i++)
        close(hang[i]);
    usleep(300 * 1000);

    /* No client certificate; a certificate of another CA (same subject!). */
    assert_int_equal(tls_open(&d, port, NULL, "ca1", &x, &diag), PH_E_DENIED);
    assert_null(x);
    assert_int_equal(tls_open(&d, port, "rogue", "ca1", &x, &diag), PH_E_DENIED);
    assert_null(x);
    /* A certificate of the right CA that is not for client authentication
     * (no extended key usage, or serverAuth only) is not a worker's. */
    assert_int_equal(tls_open(&d, port, "noeku", "ca1", &x, &diag), PH_E_DENIED);
    assert_null(x);
    assert_int_equal(tls_open(&d, port, "srvonly", "ca1", &x, &diag), PH_E_DENIED);
    assert_null(x);
    /* The worker's own trust: a service it cannot verify is refused. */
    assert_int_equal(tls_open(&d, port, "wa", "ca2", &x, &diag), PH_E_DENIED);

    /* Worker b (same CA, another subject) cannot tell a's environment from
     * one that never existed. */
    SSL_CTX *ctx;
    int fd;
    SSL *b = tls_raw(&d, port, "wb", &ctx, &fd);
    json_t *h = tls_call(b, json_pack("{s:s}", "op", "hello"));
    assert_string_equal(ph_wire_str(h, "identity"), "cert:CN=worker-b,O=pinhole");
    json_decref(h);
    json_t *r1 = tls_call(b, raw_execute_req("t1", ph_execd_environment_id(env), argv));
    json_t *r2 = tls_call(b, raw_execute_req("t1", "env-0000000000000000", argv));
    assert_string_equal(error_of(r1), "not_found");
    char *t1 = json_dumps(r1, JSON_SORT_KEYS), *t2 = json_dumps(r2, JSON_SORT_KEYS);
    assert_string_equal(t1, t2);
    free(t1);
    free(t2);
    json_decref(r1);
    json_decref(r2);
    SSL_free(b);
    SSL_CTX_free(ctx);
    close(fd);

    ph_execd_environment_destroy(&env);
    ph_execd_service_close(&a);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "\"event\":\"tls_refused\""));
    assert_non_null(strstr(log, "\"identity\":\"cert:CN=worker-a,O=pinhole\""));
    free(log);
    assert_int_equal(daemon_stop(&d), 0);
}

/* The accept queue of the TCP listener on port (/proc/net/tcp), -1 when
 * there is none. */
static long listen_backlog(int port)
{
    FILE *f = fopen("/proc/net/tcp", "re");
    char line[512];
    long q = -1;
    while (f && fgets(line, sizeof line, f)) {
        unsigned lport, st;
        unsigned long txq, rxq;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %lx:%lx", &lport, &st, &txq, &rxq) == 4 &&
            lport == (unsigned)port && st == 0x0A)
            q = (long)rxq;
    }
    if (f)
        fclose(f);
    return q;
}

/* Unidentified peers cannot lock workers out: 70 connections that never
 * start a handshake and 64 (each from an address of its own) that trickle a
 * ClientHello byte every 500 ms are open; a worker with a valid certificate
 * is served at once, and the trickling ones are closed at the handshake
 * deadline (3 s from accept, however often they send). */
static void test_unidentified_peers_cannot_lock_out_workers(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    make_pki(d.dir);
    char o_cert[300], o_key[300], o_ca[300], key[300];
    tls_options(&d, o_cert, o_key, o_ca);
    snprintf(key, sizeof key, "%s/srv.key", d.dir);
    assert_int_equal(chmod(key, 0600), 0);
    const char *const opts[] = {"--allow-uid=0", "--tls-listen=127.0.0.1:0", o_cert, o_key, o_ca,
                                "--handshake-timeout-ms=3000", NULL};
    assert_int_equal(daemon_spawn(&d, opts, NULL), -1);
    int port = port_from_log(&d, "listening_tls");
    assert_true(port > 0);
    enum { SILENT = 70, TRICKLE = 64, DEADLINE = 3000 };
    static const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01,
                                    0xfc, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00};
    int silent[SILENT], tr[TRICKLE];
    int64_t opened[TRICKLE], closed_at[TRICKLE] = {0};
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < SILENT; i++) {
        silent[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(connect(silent[i], (struct sockaddr *)&to, sizeof to), 0);
    }
    for (int i = 0; i < TRICKLE; i++) {
        struct sockaddr_in from = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(0x7f000100u + (unsigned)i + 1)};
        tr[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(tr[i], (struct sockaddr *)&from, sizeof from), 0);
        assert_int_equal(connect(tr[i], (struct sockaddr *)&to, sizeof to), 0);
        opened[i] = ph_monotonic_ms();
    }
    for (int i = 0; i < 500 && listen_backlog(port) != 0; i++)
        usleep(10 * 1000); /* until the daemon has accepted every one */
    assert_int_equal(listen_backlog(port), 0);
    int64_t served_ms = -1;
    ph_execd_service *a = NULL;
    for (size_t round = 0;; round++) {
        bool open = false;
        for (int i = 0; i < TRICKLE; i++) {
            if (closed_at[i] != 0)
                continue;
            char b;
            ssize_t n = recv(tr[i], &b, 1, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN) ||
                (round < sizeof hello &&
                 send(tr[i], &hello[round], 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)) {
                closed_at[i] = ph_monotonic_ms();
                continue;
            }
            open = true;
        }
        if (round == 0) {
            ph_diag diag = {0};
            int64_t t0 = ph_monotonic_ms();
            ph_status st = tls_open(&d, port, "wa", "ca1", &a, &diag);
            served_ms = ph_monotonic_ms() - t0;
            printf("a worker with a valid certificate: %s after %lld ms\n",
                   st == PH_OK ? "served" : diag.message, (long long)served_ms);
            assert_int_equal(st, PH_OK);
        }
        if (!open || ph_monotonic_ms() - opened[TRICKLE - 1] > DEADLINE + 3000)
            break;
        usleep(500 * 1000);
    }
    int early = 0, late = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < TRICKLE; i++) {
        int64_t life = closed_at[i] ? closed_at[i] - opened[i] : INT64_MAX;
        early += life < DEADLINE - 300;
        late += life > DEADLINE + 1500;
        if (life >= DEADLINE - 300 && life <= DEADLINE + 1500) {
            lo = life < lo ? life : lo;
            hi = life > hi ? life : hi;
        }
    }
    printf("%d trickling connections: %d closed at the deadline (after %lld to %lld ms; "
           "deadline %d ms), %d evicted earlier for newer ones, %d still open past it\n",
           TRICKLE, TRICKLE - early - late, (long long)lo, (long long)hi, DEADLINE, early,
           late);
    assert_true(served_ms < 1000);
    assert_int_equal(late, 0);
    assert_true(early <= 2);
    ph_execd_service_close(&a);
    for (int i = 0; i < SILENT; i++)
        close(silent[i]);
    for (int i = 0; i < TRICKLE; i++)
        close(tr[i]);
    size_t len;
    char *log = ph_test_read_file(d.log, &len);
    assert_non_null(strstr(log, "\"event\":\"handshake_timeout\""));
    assert_non_null(strstr(log, "\"event\":\"unidentified_evicted\",\"source\":\"ip:127.0.0.1\""));
    free(log);
    assert_int_equal(daemon_stop(&d), 0);
}

/* Fresh bare connects from many addresses (the flood a botnet or one host
 * with a /24 sends) evict the flooders' own connections, never a worker's
 * handshake in progress from an address holding fewer. */
static void test_a_flood_from_many_sources_leaves_handshakes_alone(void **state)
{
    (void)state;
    xdaemon d;
    daemon_prepare(&d);
    make_pki(d.dir);
    char o_cert[300], o_key[300], o_ca[300], key[300];
    tls_options(&d, o_cert, o_key, o_ca);
    snprintf(key, sizeof key, "%s/srv.key", d.dir);
    assert_int_equal(chmod(key, 0600), 0);
    const char *const opts[] = {"--allow-uid=0", "--tls-listen=127.0.0.1:0", o_cert, o_key, o_ca,
                                NULL};
    assert_int_equal(daemon_spawn(&d, opts, NULL), -1);
    int port = port_from_log(&d, "listening_tls");
    assert_true(port > 0);
    if (PH_ASAN) { /* an instrumented loop cannot keep up with any flood: the listen
                    * backlog overflows, which is not what this checks */
        printf("skipped under ASan\n");
        assert_int_equal(daemon_stop(&d), 0);
        return;
    }
    enum { SOURCES = 12, KEEP = 8, TRIES = 4 };
    signal(SIGPIPE, SIG_IGN); /* a refused worker is counted, not killed */
    pid_t flood = fork();
    assert_true(flood >= 0);
    if (flood == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int ring[SOURCES][KEEP];
        memset(ring, -1, sizeof ring);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        for (unsigned k = 0;; k++) {
            unsigned s = k % SOURCES, slot = (k / SOURCES) % KEEP;
            if (ring[s][slot] >= 0)
                close(ring[s][slot]);
            struct sockaddr_in from = {.sin_family = AF_INET,
                                       .sin_addr.s_addr = htonl(0x7f000002u + s)};
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd >= 0 && bind(fd, (struct sockaddr *)&from, sizeof from) == 0)
                (void)connect(fd, (struct sockaddr *)&to, sizeof to);
            ring[s][slot] = fd;
        }
    }
    size_t len;
    char *log = NULL;
    for (int i = 0; i < 1000; i++) { /* until the flood fills the unidentified slots */
        free(log);
        log = ph_test_read_file(d.log, &len);
        if (log && strstr(log, "\"event\":\"unidentified_evicted\""))
            break;
        usleep(10 * 1000);
    }
    assert_non_null(strstr(log, "\"event\":\"unidentified_evicted\""));
    free(log);
    int served = 0;
    int64_t slowest = 0;
    for (int i = 0; i < TRIES; i++) {
        ph_execd_service *a = NULL;
        ph_diag diag = {0};
        int64_t t0 = ph_monotonic_ms();
        ph_status st = tls_open(&d, port, "wa", "ca1", &a, &diag);
        int64_t ms = ph_monotonic_ms() - t0;
        served += st == PH_OK;
        slowest = ms > slowest ? ms : slowest;
        if (st != PH_OK)
            printf("a worker refused: %s\n", diag.message);
        ph_execd_service_close(&a);
    }
    kill(flood, SIGKILL);
    waitpid(flood, NULL, 0);
    printf("%d sources flooding: a worker served %d of %d times, the slowest in %lld ms\n",
           SOURCES, served, TRIES, (long long)slowest);
    assert_int_equal(served, TRIES);
    assert_int_equal(daemon_stop(&d), 0);
}

/* One HTTP/1.0 request to 127.0.0.1:port, its sending side closed after
 * the request as a probe written with nc does (the answer still comes);
 * the whole answer (malloc'd). */
static char *http_get(int port, const char *method, const char *path)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    char req[256];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\n\r\n", method, path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    char *buf = calloc(1, 65536);
    size_t used = 0;
    ssize_t got;
    while ((got = read(fd, buf + used, 65535 - used)) > 0)
        used += (size_t)got;
    close(fd);
    return buf;
}

/* Starts d with an admin listener on a port of the kernel's; the port. */
static int metrics_daemon_start(xdaemon *d)
{
    const char *const opts[] = {"--metrics-listen=127.0.0.1:0", NULL};
    daemon_start(d, opts);
    int port = port_from_log(d, "listening_metrics");
    assert_true(port > 0);
    return port;
}

static void test_metrics_over_http(void **state)
{
    (void)state;
    xdaemon d;
    int port = metrics_daemon_start(&d);
    int fd = raw_hello(&d);
    free(raw_create(fd, "t1"));
    char *m = http_get(port, "GET", "/metrics");
    assert_non_null(strstr(m, "HTTP/1.0 200") ? m : strstr(m, "HTTP/1.1 200"));
    assert_non_null(strstr(m, "pinhole_execd_sandboxes_live 1\n"));
    assert_non_null(strstr(m, "pinhole_execd_op_duration_seconds_count{op=\"environment.create\"} 1\n"));
    assert_null(strstr(m, "t1")); /* counts only: no tenant, identity or id */
    assert_null(strstr(m, "uid:"));
    free(m);
    m = http_get(port, "GET", "/health");
    assert_non_null(strstr(m, " 200 "));
    free(m);
    m = http_get(port, "POST", "/metrics");
    assert_null(strstr(m, " 200 "));
    free(m);
    m = http_get(port, "GET", "/nothing");
    assert_non_null(strstr(m, " 404 "));
    free(m);
    /* A query (a scraper's params) is ignored, as the proxy's listener
     * ignores it; the old listener answered 404. */
    m = http_get(port, "GET", "/metrics?job=execd");
    assert_non_null(strstr(m, " 200 "));
    assert_non_null(strstr(m, "pinhole_execd_sandboxes_live 1\n"));
    free(m);
    m = http_get(port, "GET", "/health?");
    assert_non_null(strstr(m, " 200 "));
    free(m);
    m = http_get(port, "GET", "/healthz?x");
    assert_non_null(strstr(m, " 404 "));
    free(m);
    close(fd);
    assert_int_equal(daemon_stop(&d), 0);
}

/* The daemon's open descriptors (/proc/PID/fd). */
static size_t fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *dir = opendir(path);
    assert_non_null(dir);
    size_t n = 0;
    for (struct dirent *de; (de = readdir(dir)) != NULL;)
        n += de->d_name[0] != '.';
    closedir(dir);
    return n;
}

/* Whether a hello on a fresh unix connection is answered within ms. */
static bool hello_answered_within(const xdaemon *d, int ms)
{
    int fd = raw_connect(d);
    if (fd < 0)
        return false;
    json_t *req = json_pack("{s:s}", "op", "hello");
    bool sent = ph_wire_send(fd, req) == 0;
    json_decref(req);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    json_t *resp = NULL;
    bool ok = sent && poll(&p, 1, ms) == 1 &&
              ph_wire_recv(fd, PH_EXECD_MAX_RESPONSE_BYTES, &resp) == 0 &&
              json_is_true(json_object_get(resp, "ok"));
    json_decref(resp);
    close(fd);
    return ok;
}

/* A peer that reaches --metrics-listen cannot take the daemon's
 * descriptors: at most 16 admin connections are open (one more is closed
 * at accept), each closed 10 s after accept however it drips its head.
 * With evhttp (no cap, a timeout restarted at every byte) 100 idle
 * connections to a daemon allowed 64 descriptors took them all: every
 * accept failed with EMFILE, a worker's hello went unanswered, and the loop
 * retried the listener at once, logging each failure (78 MB of log in
 * 10 s). The daemon's accepts that fail for want of descriptors now pause
 * the listener instead. */
static void test_the_admin_listener_cannot_take_the_descriptors(void **state)
{
    (void)state;
    xdaemon d;
    int port = metrics_daemon_start(&d);
    struct rlimit few = {64, 64};
    assert_int_equal(prlimit(d.pid, RLIMIT_NOFILE, &few, NULL), 0);
    size_t before = fd_count(d.pid);
    enum { PEERS = 100 };
    int peer[PEERS];
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < PEERS; i++) {
        peer[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(connect(peer[i], (struct sockaddr *)&sin, sizeof sin), 0);
        assert_int_equal(send(peer[i], "GET /met", 8, MSG_NOSIGNAL), 8);
    }
    bool answered = hello_answered_within(&d, 10000);
    size_t during = fd_count(d.pid);
    size_t len = 0;
    char *log = ph_test_read_file(d.log, &len);
    free(log);
    printf("%d admin peers, descriptors allowed 64: daemon held %zu (%zu before), a worker's "
           "hello %s, log %zu bytes\n",
           PEERS, during, before, answered ? "answered" : "unanswered", len);
    assert_true(answered);
    assert_true(during <= before + 16 + 1);
    assert_true(len < 64 * 1024);
    /* Each admin connection ends within 10 s of accept, dripping or not. */
    int open_peers = PEERS;
    for (int64_t end = ph_monotonic_ms() + 20000; open_peers > 0 && ph_monotonic_ms() < end;) {
        open_peers = 0;
        for (int i = 0; i < PEERS; i++) {
            if (peer[i] < 0)
                continue;
            char b[256];
            ssize_t n = recv(peer[i], b, sizeof b, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN) ||
                send(peer[i], "t", 1, MSG_NOSIGNAL) != 1) {
                close(peer[i]);
                peer[i] = -1;
            } else {
                open_peers++;
            }
        }
        if (open_peers > 0)
            poll(NULL, 0, 500);
    }
    printf("admin peers still open after 20 s of dripping: %d\n", open_peers);
    assert_int_equal(open_peers, 0);
    char *m = http_get(port, "GET", "/health");
    assert_non_null(strstr(m, " 200 "));
    free(m);
    assert_int_equal(daemon_stop(&d), 0);
}

/* The /metrics answer is not lost to a reset when the peer sends more
 * after its request head (a body, or a request pipelined behind it) while
 * the answer is still in the daemon's send queue: the peer's receive
 * window (SO_RCVBUF at its least) holds less than the answer. The daemon
 * closed the socket as soon as the answer was handed to the kernel; the
 * body arriving at the closed socket reset the connection, and the kernel
 * dropped the answer's unsent bytes ("a /metrics answer of 3458 bytes:
 * 2560 read, then reset"). Now the daemon ends its sending side after the
 * answer and reads and drops what the peer still sends until it closes. */
static void test_an_admin_answer_outlives_a_request_body(void **state)
{
    (void)state;
    xdaemon d;
    int port = metrics_daemon_start(&d);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int least = 1;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &least, sizeof least), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    static const char head[] = "GET /metrics HTTP/1.1\r\nContent-Length: 16384\r\n\r\n";
    assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
    /* The answer has begun: then the body. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    static char body[16384];
    memset(body, 'x', sizeof body);
    assert_int_equal(send(fd, body, sizeof body, MSG_NOSIGNAL), (ssize_t)sizeof body);
    char *buf = calloc(1, 65536);
    size_t used = 0;
    ssize_t got;
    while ((got = read(fd, buf + used, 65535 - used)) > 0)
        used += (size_t)got;
    int err = got < 0 ? errno : 0;
    close(fd);
    const char *cl = strstr(buf, "Content-Length: ");
    const char *end = strstr(buf, "\r\n\r\n");
    assert_non_null(cl);
    assert_non_null(end);
    size_t want = (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
    printf("a /metrics answer of %zu bytes: %zu read, then %s\n", want, used,
           err ? strerror(err) : "end of file");
    assert_int_equal(err, 0);
    assert_int_equal(used, want);
    free(buf);
    assert_int_equal(daemon_stop(&d), 0);
}

/* A command that waits for the file `go` in its workspace (let_go). */
static const char *const WAIT_FOR_GO[] = {"sh", "-c", "while [ ! -e go ]; do sleep 0.02; done",
                                          NULL};

/* test_a_returning_owner_keeps_its_sandboxes: the other identity (uid
 * 65534) takes the daemon's one thread with a command that waits for the
 * file `go` in its workspace; its environment's id goes to the pipe. */
static int g_busy_pipe = -1;
static void hold_the_thread(const xdaemon *d, char *verdict, size_t cap)
{
    int c = raw_hello(d);
    char *env = raw_create(c, "t9");
    (void)!write(g_busy_pipe, env, strlen(env) + 1);
    json_t *r = raw_call(c, raw_execute_req("t9", env, WAIT_FOR_GO));
    snprintf(verdict, cap, "%s", error_of(r) ? error_of(r) : "ok");
    json_decref(r);
    free(env);
}

/* Waits until d runs one request. */
static void wait_for_one_execution(const xdaemon *d)
{
    for (int64_t end = ph_monotonic_ms() + 30000;
         health_field(d, "executions") != 1 && ph_monotonic_ms() < end;)
        usleep(10 * 1000);
    assert_int_equal(health_field(d, "executions"), 1);
}

/* Ends a command that waits for the file `go` in environment env's
 * workspace (the fake mechanism's is a host directory). */
static void let_go(const xdaemon *d, const char *env)
{
    char go[400];
    snprintf(go, sizeof go, "%s/%s/workspace/go", d->state, env);
    int g = open(go, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(g >= 0);
    close(g);
}

/* An identity gone past --grace-seconds has its sandboxes destroyed by a
 * job that may wait behind busy threads. One that has connected again by
 * the time the job runs is back: its sandboxes are kept (and nothing it
 * makes meanwhile is destroyed under it). The job used to destroy them
 * anyway, and the worker's next execute on the environment it had just
 * been using found `not_found`. */
static void test_a_returning_owner_keeps_its_sandboxes(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--grace-seconds=1", "--max-executions=1", "--allow-uid=65534",
                                "--socket-mode=0666", NULL};
    daemon_start(&d, opts);
    int fd = raw_hello(&d);
    char *env = raw_create(fd, "t1");
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    g_busy_pipe = pipefd[1];
    pid_t other = fork();
    if (other == 0) {
        close(pipefd[0]);
        close(fd); /* the owner's connection is the parent's alone */
        char out[64] = "setuid failed";
        if (setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0)
            hold_the_thread(&d, out, sizeof out);
        _exit(strcmp(out, "ok") == 0 ? 0 : 1);
    }
    close(pipefd[1]);
    char other_env[PH_EXECD_ID_MAX] = "";
    assert_true(read(pipefd[0], other_env, sizeof other_env - 1) > 0);
    close(pipefd[0]);
    /* The other identity's command holds the one thread. */
    wait_for_one_execution(&d);
    /* The owner goes; past the grace its reaping is queued behind that. */
    close(fd);
    for (int64_t end = ph_monotonic_ms() + 30000;
         !log_has(&d, "owner_gone_reaping") && ph_monotonic_ms() < end;)
        usleep(10 * 1000);
    assert_true(log_has(&d, "owner_gone_reaping"));
    /* It is back, and asks to run in its environment (queued after the
     * reaping); then the thread is let go. */
    fd = raw_hello(&d);
    const char *const argv[] = {"true", NULL};
    json_t *req = raw_execute_req("t1", env, argv);
    assert_int_equal(ph_wire_send(fd, req), 0);
    json_decref(req);
    let_go(&d, other_env);
    json_t *r = NULL;
    assert_int_equal(ph_wire_recv(fd, PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
    printf("the owner back before its reaping ran: its execute answered %s\n",
           error_of(r) ? error_of(r) : "ok");
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    int status;
    assert_int_equal(waitpid(other, &status, 0), other);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free(env);
    close(fd);
    assert_int_equal(daemon_stop(&d), 0);
}

/* The daemon's own jobs (a held lease's tick, an owner's reaping) are one
 * at a time each: while every thread is busy, the once-a-second tick finds
 * the last one still queued and queues no other. One was queued every
 * second, and they count against --queue: with the one thread held by a
 * command for 3.5 s a held lease had 3 ticks queued, so with --queue=3 a
 * worker's request was answered busy. */
static void test_the_daemon_queues_its_own_jobs_once(void **state)
{
    (void)state;
    xdaemon d;
    const char *const opts[] = {"--max-executions=1", "--queue=3",
                                "--max-requests-per-identity=2", NULL};
    daemon_start(&d, opts);
    int a = raw_hello(&d);
    json_t *r = raw_call(a, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.open", "tenant", "t1",
                                      "lease", "l1", "approval_hold_seconds", 3600));
    char *handle = strdup(ph_wire_str(r, "handle"));
    json_decref(r);
    r = raw_call(a, json_pack("{s:s, s:s, s:s}", "op", "lease.environment", "tenant", "t1",
                              "handle", handle));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = raw_call(a, json_pack("{s:s, s:s, s:s, s:i}", "op", "lease.hold_begin", "tenant", "t1",
                              "handle", handle, "now_seconds", 0));
    assert_true(json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    char *env = raw_create(a, "t1");
    json_t *req = raw_execute_req("t1", env, WAIT_FOR_GO);
    assert_int_equal(ph_wire_send(a, req), 0);
    json_decref(req);
    int b = raw_hello(&d);
    wait_for_one_execution(&d);
    /* Three of the daemon's once-a-second ticks and a half. */
    for (int64_t end = ph_monotonic_ms() + 3500; ph_monotonic_ms() < end;)
        usleep(50 * 1000);
    int64_t queued = health_field(&d, "queued");
    printf("the one thread busy for 3.5 s with a lease held: %lld of the daemon's jobs queued\n",
           (long long)queued);
    assert_true(queued <= 1);
    /* A worker's request still has room in the queue. */
    req = json_pack("{s:s, s:s, s:s}", "op", "lease.status", "tenant", "t1", "handle", handle);
    assert_int_equal(ph_wire_send(b, req), 0);
    json_decref(req);
    let_go(&d, env);
    json_t *done = NULL;
    assert_int_equal(ph_wire_recv(a, PH_EXECD_MAX_RESPONSE_BYTES, &done), 0);
    assert_true(json_is_true(json_object_get(done, "ok")));
    json_decref(done);
    /* Queued behind the command, the status is served once it ended. */
    r = NULL;
    assert_int_equal(ph_wire_recv(b, PH_EXECD_MAX_RESPONSE_BYTES, &r), 0);
    if (!json_is_true(json_object_get(r, "ok")))
        fail_msg("lease.status: %s", error_of(r));
    json_decref(r);
    free(env);
    free(handle);
    close(a);
    close(b);
    assert_int_equal(daemon_stop(&d), 0);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("SKIP: the daemon tests switch uids (root needed)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_refuses_credential_in_environment, stop_left),
        cmocka_unit_test_teardown(test_usage_errors, stop_left),
        cmocka_unit_test_teardown(test_refuses_an_untrusted_state_dir, stop_left),
        cmocka_unit_test_teardown(test_starts_from_a_shell_environment, stop_left),
        cmocka_unit_test_teardown(test_refuses_a_shared_socket_directory, stop_left),
        cmocka_unit_test_teardown(test_own_settings_are_not_credentials, stop_left),
        cmocka_unit_test_teardown(test_wrong_uid_is_refused, stop_left),
        cmocka_unit_test_teardown(test_allow_gid_matches_supplementary_groups, stop_left),
        cmocka_unit_test_teardown(test_client_checks_who_serves_the_socket, stop_left),
        cmocka_unit_test_teardown(test_client_checks_answers_against_the_table, stop_left),
        cmocka_unit_test_teardown(test_other_identity_or_tenant_gets_not_found, stop_left),
        cmocka_unit_test_teardown(test_the_operation_table_is_what_the_daemon_checks, stop_left),
        cmocka_unit_test_teardown(test_restart_destroys_what_a_previous_run_left, stop_left),
        cmocka_unit_test_teardown(test_disconnect_kills_the_command, stop_left),
        cmocka_unit_test_teardown(test_queue_full_answers_busy, stop_left),
        cmocka_unit_test_teardown(test_slow_stream_peer_cannot_delay_the_deadline, stop_left),
        cmocka_unit_test_teardown(test_one_peer_cannot_exhaust_the_daemon, stop_left),
        cmocka_unit_test_teardown(test_files_are_served_beside_a_running_command, stop_left),
        cmocka_unit_test_teardown(test_limits_on_sandboxes_and_requests, stop_left),
        cmocka_unit_test_teardown(test_connections_are_bounded, stop_left),
        cmocka_unit_test_teardown(test_pipelined_requests_are_not_buffered, stop_left),
        cmocka_unit_test_teardown(test_parse_amplification_is_bounded, stop_left),
        cmocka_unit_test_teardown(test_closing_does_not_free_a_queued_frame_slot, stop_left),
        cmocka_unit_test_teardown(test_one_identity_cannot_hold_the_parser, stop_left),
        cmocka_unit_test_teardown(test_a_slow_reader_does_not_hold_an_answer, stop_left),
        cmocka_unit_test_teardown(test_a_big_frame_does_not_stall_the_loop, stop_left),
        cmocka_unit_test_teardown(test_a_huge_directory_list_is_bounded, stop_left),
        cmocka_unit_test_teardown(test_a_streamed_read_has_a_chunk_floor, stop_left),
        cmocka_unit_test_teardown(test_a_second_daemon_on_the_state_dir_is_refused, stop_left),
        cmocka_unit_test_teardown(test_a_second_daemon_on_the_socket_is_refused, stop_left),
        cmocka_unit_test_teardown(test_the_stop_leaves_a_socket_another_bound, stop_left),
        cmocka_unit_test_teardown(test_a_stale_socket_is_replaced_a_file_is_not, stop_left),
        cmocka_unit_test_teardown(test_the_daemon_refuses_the_cli_state_dir, stop_left),
        cmocka_unit_test_teardown(test_the_cli_refuses_the_daemon_state_dir, stop_left),
        cmocka_unit_test_teardown(test_one_identity_at_its_caps_leaves_room, stop_left),
        cmocka_unit_test_teardown(test_a_frame_must_complete_in_time, stop_left),
        cmocka_unit_test_teardown(test_lease_hold_and_end_through_the_service, stop_left),
        cmocka_unit_test_teardown(test_owner_gone_past_grace, stop_left),
        cmocka_unit_test_teardown(test_a_returning_owner_keeps_its_sandboxes, stop_left),
        cmocka_unit_test_teardown(test_the_daemon_queues_its_own_jobs_once, stop_left),
        cmocka_unit_test_teardown(test_lease_clock_out_of_range_is_invalid, stop_left),
        cmocka_unit_test_teardown(test_shutdown_destroys_everything, stop_left),
        cmocka_unit_test_teardown(test_tls_mutual_authentication, stop_left),
        cmocka_unit_test_teardown(test_unidentified_peers_cannot_lock_out_workers, stop_left),
        cmocka_unit_test_teardown(test_a_flood_from_many_sources_leaves_handshakes_alone, stop_left),
        cmocka_unit_test_teardown(test_metrics_over_http, stop_left),
        cmocka_unit_test_teardown(test_the_admin_listener_cannot_take_the_descriptors, stop_left),
        cmocka_unit_test_teardown(test_an_admin_answer_outlives_a_request_body, stop_left),
    };
    /* PH_TEST_FILTER: only the tests whose names match (cmocka's pattern). */
    if (getenv("PH_TEST_FILTER"))
        cmocka_set_test_filter(getenv("PH_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
