/* oci_bundle.c - config.json and process documents for OCI runtimes (runsc).
 *
 * The sandbox is deliberately bare: a read-only root, the workspace, a fresh
 * /tmp, /proc, a tiny /run/pinhole (the forwarder binary and, with a grant,
 * the proxy socket) and nothing else from the host. No capability, no new
 * privileges, a non-root user, a network namespace with loopback only.
 */
#include "oci_bundle-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "pinhole/utf8.h"
#include "sandbox-int.h"

#define DEFAULT_TMP_BYTES (64ull * 1024 * 1024)

/* json_* constructors return NULL on allocation failure; building a whole
 * document, we keep going with NULLs (json_object_set_new ignores and frees
 * safely) and check once at the end via this flag. */
typedef struct builder {
    int failed;
} builder;

static void set(builder *b, json_t *obj, const char *key, json_t *value)
{
    if (value == NULL || obj == NULL || json_object_set_new(obj, key, value) != 0)
        b->failed = 1;
}

static void push(builder *b, json_t *arr, json_t *value)
{
    if (value == NULL || arr == NULL || json_array_append_new(arr, value) != 0)
        b->failed = 1;
}

static json_t *string_array(builder *b, const char *const *items, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        push(b, arr, json_string(items[i]));
    return arr;
}

/* No capability in any set: the process can do nothing root-like even if a
 * setuid binary existed (and no_new_privileges stops those anyway). */
static json_t *no_capabilities(builder *b)
{
    json_t *caps = json_object();
    static const char *const sets[] = {"bounding", "effective", "inheritable", "permitted",
                                       "ambient"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        set(b, caps, sets[i], json_array());
    return caps;
}

static json_t *user_doc(builder *b, uid_t uid, gid_t gid)
{
    json_t *user = json_object();
    set(b, user, "uid", json_integer((json_int_t)uid));
    set(b, user, "gid", json_integer((json_int_t)gid));
    set(b, user, "additionalGids", json_array());
    return user;
}

/* [{0 -> 0}, {id -> id}], one id each. */
static json_t *id_maps(builder *b, unsigned id)
{
    json_t *maps = json_array();
    const unsigned ids[] = {0, id};
    for (size_t i = 0; i < 2; i++) {
        json_t *m = json_object();
        set(b, m, "containerID", json_integer((json_int_t)ids[i]));
        set(b, m, "hostID", json_integer((json_int_t)ids[i]));
        set(b, m, "size", json_integer(1));
        push(b, maps, m);
    }
    return maps;
}

static json_t *rlimit(builder *b, const char *type, json_int_t value)
{
    json_t *r = json_object();
    set(b, r, "type", json_string(type));
    set(b, r, "hard", json_integer(value));
    set(b, r, "soft", json_integer(value));
    return r;
}

/* The fields shared by the init process and every exec'd command. */
static json_t *process_doc(builder *b, const char *const *argv, size_t argc,
                           const char *const *env, size_t envc, const char *cwd, uid_t uid,
                           gid_t gid)
{
    json_t *p = json_object();
    set(b, p, "terminal", json_false());
    set(b, p, "user", user_doc(b, uid, gid));
    set(b, p, "args", string_array(b, argv, argc));
    set(b, p, "env", string_array(b, env, envc));
    set(b, p, "cwd", json_string(cwd));
    set(b, p, "capabilities", no_capabilities(b));
    set(b, p, "noNewPrivileges", json_true());
    json_t *limits = json_array();
    push(b, limits, rlimit(b, "RLIMIT_NOFILE", 1024));
    push(b, limits, rlimit(b, "RLIMIT_CORE", 0));
    set(b, p, "rlimits", limits);
    return p;
}

static json_t *mount_doc(builder *b, const char *dest, const char *type, const char *source,
                         const char *const *options, size_t n)
{
    json_t *m = json_object();
    set(b, m, "destination", json_string(dest));
    set(b, m, "type", json_string(type));
    set(b, m, "source", json_string(source));
    set(b, m, "options", string_array(b, options, n));
    return m;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static json_t *mounts_doc(builder *b, const ph_oci_sandbox *s, const char *tmp_size)
{
    static const char *const proc_opts[] = {"nosuid", "noexec", "nodev"};
    static const char *const dev_opts[] = {"nosuid", "strictatime", "mode=755", "size=65536k"};
    static const char *const run_opts[] = {"nosuid", "nodev", "mode=755", "size=64k"};
    static const char *const ro_bind[] = {"rbind", "ro", "nosuid", "nodev"};
    static const char *const rw_bind[] = {"rbind", "rw", "nosuid", "nodev"};
    const char *tmp_opts[] = {"nosuid", "nodev", "mode=1777", tmp_size};

    json_t *mounts = json_array();
    push(b, mounts, mount_doc(b, "/proc", "proc", "proc", proc_opts, N(proc_opts)));
    push(b, mounts, mount_doc(b, "/dev", "tmpfs", "tmpfs", dev_opts, N(dev_opts)));
    push(b, mounts, mount_doc(b, "/tmp", "tmpfs", "tmpfs", tmp_opts, N(tmp_opts)));
    push(b, mounts, mount_doc(b, PH_OCI_WORKSPACE, "bind", s->workspace, rw_bind, N(rw_bind)));
    /* /run/pinhole is a tmpfs so its mount points exist without writing to
     * the read-only root filesystem. */
    push(b, mounts, mount_doc(b, PH_OCI_RUN_DIR, "tmpfs", "tmpfs", run_opts, N(run_opts)));
    push(b, mounts, mount_doc(b, PH_OCI_FORWARDER, "bind", s->forwarder, ro_bind, N(ro_bind)));
    if (s->proxy_socket != NULL)
        push(b, mounts,
             mount_doc(b, PH_OCI_PROXY_SOCKET, "bind", s->proxy_socket, rw_bind, N(rw_bind)));
    return mounts;
}

static json_t *resources_doc(builder *b, const ph_oci_sandbox *s)
{
    json_t *res = json_object();
    if (s->memory_bytes > 0) {
        uint64_t mem = s->memory_bytes < PH_OCI_MEMORY_FLOOR ? PH_OCI_MEMORY_FLOOR : s->memory_bytes;
        json_t *m = json_object();
        set(b, m, "limit", json_integer((json_int_t)mem));
        /* Same value as swap+memory: no swapping past the limit. */
        set(b, m, "swap", json_integer((json_int_t)mem));
        set(b, res, "memory", m);
    }
    if (s->pids > 0) {
        uint64_t pids = s->pids < PH_OCI_PIDS_FLOOR ? PH_OCI_PIDS_FLOOR : s->pids;
        json_t *p = json_object();
        set(b, p, "limit", json_integer((json_int_t)pids));
        set(b, res, "pids", p);
    }
    if (s->cpu_millis > 0) {
        json_t *c = json_object();
        uint64_t quota = s->cpu_millis * PH_OCI_CPU_PERIOD_US / 1000;
        if (quota < 1000)
            quota = 1000; /* the kernel's minimum quota is 1 ms */
        set(b, c, "quota", json_integer((json_int_t)quota));
        set(b, c, "period", json_integer((json_int_t)PH_OCI_CPU_PERIOD_US));
        set(b, res, "cpu", c);
    }
    return res;
}

static ph_status check_abs(const char *what, const char *path, ph_diag *diag)
{
    if (path == NULL || path[0] != '/')
        return ph_diag_set(diag, PH_E_INVAL, 0, "%s must be an absolute host path", what);
    return PH_OK;
}

ph_status ph_oci_config_new(const ph_oci_sandbox *s, json_t **out, ph_diag *diag)
{
    *out = NULL;
    ph_status st;
    if ((st = check_abs("rootfs", s->rootfs, diag)) != PH_OK ||
        (st = check_abs("workspace", s->workspace, diag)) != PH_OK ||
        (st = check_abs("forwarder", s->forwarder, diag)) != PH_OK)
        return st;
    if (s->proxy_socket != NULL &&
        ((st = check_abs("proxy socket", s->proxy_socket, diag)) != PH_OK))
        return st;
    if (s->proxy_socket != NULL && s->forwarder_port == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "a proxy socket needs a forwarder port");
    if (s->uid == 0 || s->gid == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "sandbox processes must not run as root");

    builder b = {0};
    char port[16], listen[32], tmp_size[48];
    snprintf(port, sizeof port, "%u", (unsigned)s->forwarder_port);
    snprintf(listen, sizeof listen, "127.0.0.1:%s", port);
    snprintf(tmp_size, sizeof tmp_size, "size=%llu",
             (unsigned long long)(s->tmp_bytes ? s->tmp_bytes : DEFAULT_TMP_BYTES));

    /* The init: the forwarder reaps orphans and, with a grant, relays. Its
     * environment is empty: nothing in /proc/1/environ to find. */
    const char *init_plain[] = {PH_OCI_FORWARDER, "--init"};
    const char *init_relay[] = {PH_OCI_FORWARDER, "--init", "--listen", listen,
                                "--connect", PH_OCI_PROXY_SOCKET};
    json_t *doc = json_object();
    set(&b, doc, "ociVersion", json_string("1.0.2"));
    if (s->proxy_socket != NULL)
        set(&b, doc, "process",
            process_doc(&b, init_relay, N(init_relay), NULL, 0, "/", s->uid, s->gid));
    else
        set(&b, doc, "process",
            process_doc(&b, init_plain, N(init_plain), NULL, 0, "/", s->uid, s->gid));

    json_t *root = json_object();
    set(&b, root, "path", json_string(s->rootfs));
    set(&b, root, "readonly", json_true());
    set(&b, doc, "root", root);
    set(&b, doc, "hostname", json_string(s->hostname ? s->hostname : "pinhole"));
    set(&b, doc, "mounts", mounts_doc(&b, s, tmp_size));

    json_t *linux_doc = json_object();
    json_t *ns = json_array();
    static const char *const namespaces[] = {"pid", "network", "ipc", "uts", "mount"};
    for (size_t i = 0; i < N(namespaces); i++) {
        json_t *n = json_object();
        set(&b, n, "type", json_string(namespaces[i]));
        push(&b, ns, n);
    }
    if (s->user_namespace) {
        json_t *n = json_object();
        set(&b, n, "type", json_string("user"));
        push(&b, ns, n);
    }
    set(&b, linux_doc, "namespaces", ns);
    if (s->user_namespace) {
        set(&b, linux_doc, "uidMappings", id_maps(&b, s->uid));
        set(&b, linux_doc, "gidMappings", id_maps(&b, s->gid));
    }
    if (s->cgroups_path != NULL)
        set(&b, linux_doc, "cgroupsPath", json_string(s->cgroups_path));
    set(&b, linux_doc, "resources", resources_doc(&b, s));
    set(&b, doc, "linux", linux_doc);

    if (b.failed) {
        json_decref(doc);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory building config.json");
    }
    *out = doc;
    return PH_OK;
}

ph_status ph_oci_process_new(const char *const *argv, size_t argc, const char *const *env,
                             size_t envc, const char *cwd, uid_t uid, gid_t gid, json_t **out,
                             ph_diag *diag)
{
    *out = NULL;
    if (argc == 0 || argv == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "a command needs at least argv[0]");
    if (uid == 0 || gid == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "sandbox processes must not run as root");
    if (cwd == NULL || cwd[0] != '/')
        return ph_diag_set(diag, PH_E_INVAL, 0, "the working directory must be absolute");
    /* JSON carries Unicode text: a byte string that is not UTF-8 cannot reach
     * the runtime verbatim (Go would replace the bad bytes), so refuse it. */
    for (size_t i = 0; i < argc + envc; i++) {
        const char *item = i < argc ? argv[i] : env[i - argc];
        json_t *probe = json_string(item);
        if (probe == NULL)
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "%s %zu is not valid UTF-8 and cannot be passed to the runtime",
                               i < argc ? "argument" : "environment entry",
                               i < argc ? i : i - argc);
        json_decref(probe);
    }
    builder b = {0};
    json_t *doc = process_doc(&b, argv, argc, env, envc, cwd, uid, gid);
    if (b.failed || doc == NULL) {
        json_decref(doc);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory building the process document");
    }
    *out = doc;
    return PH_OK;
}

ph_status ph_oci_write_json(int dir_fd, const char *name, const json_t *doc, ph_diag *diag)
{
    /* No fsync: the document is read at once by the runtime and never
     * survives a reboot that matters (the sandbox would not either). */
    char *text = json_dumps(doc, JSON_COMPACT);
    if (text == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory writing %s", name);
    ph_status st = ph_state_write(dir_fd, name, text, strlen(text), 0600, diag);
    free(text);
    return st;
}

ph_status ph_oci_run_argv(char *const *argv, char ***out, bool *hex, ph_diag *diag)
{
    size_t n = 0;
    *out = NULL;
    *hex = false;
    for (; argv[n] != NULL; n++)
        if (!ph_utf8_valid(argv[n], strlen(argv[n])))
            *hex = true;
    if (!*hex)
        return PH_OK;
    char **v = calloc(n + 1, sizeof *v);
    for (size_t i = 0; v != NULL && i < n; i++) {
        size_t len = strlen(argv[i]);
        if ((v[i] = malloc(2 * len + 1)) == NULL) {
            ph_oci_run_argv_free(v);
            v = NULL;
            break;
        }
        ph_hex_encode(argv[i], len, v[i]);
    }
    if (v == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    *out = v;
    return PH_OK;
}

void ph_oci_run_argv_free(char **argv)
{
    for (size_t i = 0; argv != NULL && argv[i] != NULL; i++)
        free(argv[i]);
    free(argv);
}
