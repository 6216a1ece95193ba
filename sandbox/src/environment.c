/* environment.c - the ExecutionEnvironment port: the service, and create /
 * execute / destroy over whichever mechanism the service runs. Everything a
 * mechanism does not own lives here, once: spec validation, the environment
 * tiers, the timeout rule, the pre-command snapshot and files_changed. */
#include "sandbox-int.h"

#include "pinhole/tree_remove.h"
#include "pinhole/hex.h"
#include "pinhole/io.h"
#include "pinhole/utf8.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARGV_MAX_COUNT 4096
#define ARGV_MAX_BYTES (1024 * 1024)
#define STDIN_MAX_BYTES (64 * 1024 * 1024)
#define DEFAULT_OUTPUT_BYTES (1024 * 1024)
#define MAX_OUTPUT_BYTES (64 * 1024 * 1024)
#define CPU_MILLIS_MAX (1024ll * 1000) /* 1024 CPUs */
#define ENV_ID_LEN 20 /* "env-" + 16 hex */
#define PROXY_PIN "proxy.sock" /* <env>/proxy.sock: the pinned proxy socket */

struct ph_execution_service {
    ph_service_mode mode;
    const ph_mechanism_ops *ops;
    int64_t hard_cap_ms;
    int state_fd;    /* the verified state directory (state_dir.c) */
    /* Where ids/ (the host id claims) lives: PH_SANDBOX_ID_CLAIM_DIR, one
     * for the whole host, as root; the state directory otherwise (an
     * unprivileged fake service: its commands run as its own uid). */
    int claims_fd;
    char *state_dir; /* host: its walked path; never shown */
    uint32_t id_first, id_count; /* host uid/gid range of sandboxes */
    bool volumes;    /* workspaces are their own filesystems (limits) */
    ph_ws_caps caps; /* on the disk their volumes reserve */
    ph_sandbox_log_fn *log;
    void *log_ctx;
};

struct ph_environment {
    ph_execution_service *svc;
    char id[ENV_ID_LEN + 1];
    int env_fd;           /* the verified <state_dir>/<id> */
    char *state_path;     /* host: <state_dir>/<id> */
    char *workspace_path; /* host: <state_path>/workspace */
    char *proxy_path;     /* host: the proxy socket the mechanism mounts, or NULL */
    int ws_fd;            /* O_PATH on the workspace root */
    uid_t uid;            /* this environment's own host identity */
    gid_t gid;
    bool id_claimed;      /* ids/<uid> in the state directory is ours */
    ph_intent intent;     /* what create has recorded (intent.c) */
    ph_spec_copy spec;
    ph_env_block env;
    void *mech;
};

/* ---- logging ---- */

static void log_to_stderr(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

void ph_sandbox_log_warning(ph_sandbox_log_fn *log, void *ctx, const char *event,
                            const char *detail_key, const char *detail)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "level", "warning", "module", "sandbox", "event",
                          event);
    if (o == NULL)
        return;
    char b64_key[64];
    if (detail_key && detail && snprintf(b64_key, sizeof b64_key, "%s_base64", detail_key) > 0)
        ph_json_set_bytes(o, detail_key, b64_key, detail, strlen(detail));
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (line == NULL)
        return;
    (log ? log : log_to_stderr)(ctx, line);
    free(line);
}

/* ---- the service ---- */

/* The id range from the configuration, else $PINHOLE_SANDBOX_ID_RANGE
 * ("first:count"), else the default. Ids 0 and those past 2^31 are refused:
 * they would be root or wrap in the runtimes' signed fields. */
static ph_status id_range(const ph_service_config *c, uint32_t *first, uint32_t *count,
                          ph_diag *diag)
{
    unsigned long long f = c->id_first, n = c->id_count;
    if (f == 0 && n == 0) {
        f = PH_SANDBOX_ID_DEFAULT_FIRST;
        n = PH_SANDBOX_ID_DEFAULT_COUNT;
        const char *env = getenv("PINHOLE_SANDBOX_ID_RANGE");
        if (env != NULL && env[0] != '\0') {
            /* Digits only: strtoull would take a sign or blanks. */
            char *end;
            errno = 0;
            f = 0;
            if (env[0] >= '0' && env[0] <= '9') {
                f = strtoull(env, &end, 10);
                if (errno != 0 || end[0] != ':' || end[1] < '0' || end[1] > '9')
                    f = 0;
                else
                    n = strtoull(end + 1, &end, 10);
                if (errno != 0 || *end != '\0')
                    f = 0;
            }
        }
    }
    /* Each bound on its own first: strtoull takes "-1" as ULLONG_MAX, and a
     * sum that wraps would pass (ids through 0, i.e. root). */
    if (f < 1000 || n == 0 || f > 0x7fffffffull || n > 0x7fffffffull ||
        f + n > 0x7fffffffull)
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "id_range_invalid: the sandbox id range must be first:count with "
                           "first >= 1000, count >= 1 and first + count <= 2147483647");
    /* nobody and every account stay out: a sandbox running as one of them
     * could signal or trace that account's processes, open its files. */
    if (f <= 65534 && 65534 < f + n)
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "id_range_account: the sandbox id range holds 65534 (nobody)");
    setpwent();
    struct passwd *pw;
    while ((pw = getpwent()) != NULL) {
        if ((unsigned long long)pw->pw_uid >= f && (unsigned long long)pw->pw_uid < f + n) {
            unsigned uid = (unsigned)pw->pw_uid;
            endpwent();
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "id_range_account: the sandbox id range holds uid %u, an "
                               "account's",
                               uid);
        }
    }
    endpwent();
    *first = (uint32_t)f;
    *count = (uint32_t)n;
    return PH_OK;
}

ph_status ph_execution_service_open(const ph_service_config *config, ph_execution_service **out,
                                    ph_diag *diag)
{
    if (config == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_execution_service_open: NULL argument");
    *out = NULL;
    ph_status st = ph_sandbox_startup_check(config->mode, config->mechanism, diag);
    if (st != PH_OK)
        return st;
    if (config->hard_cap_ms <= 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "the service hard cap must be > 0 ms");
    const ph_mechanism_ops *ops = ph_mechanism_ops_for(config->mechanism);
    st = ph_sandbox_mechanism_available(config->mechanism, diag);
    if (st != PH_OK)
        return st;
    ph_execution_service *svc = calloc(1, sizeof *svc);
    if (svc == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    svc->state_fd = svc->claims_fd = -1;
    svc->mode = config->mode;
    svc->ops = ops;
    svc->hard_cap_ms = config->hard_cap_ms;
    svc->log = config->log;
    svc->log_ctx = config->log_ctx;
    /* The fake mechanism does not isolate and may run unprivileged: its
     * workspaces are plain directories. gvisor and docker run as root and
     * get a filesystem per workspace. */
    svc->volumes = config->mechanism != PH_MECHANISM_FAKE;
    if ((st = id_range(config, &svc->id_first, &svc->id_count, diag)) != PH_OK) {
        free(svc);
        return st;
    }
    char *def = NULL;
    if (config->state_dir == NULL && (st = ph_state_dir_default(&def, diag)) != PH_OK) {
        free(svc);
        return st;
    }
    st = ph_state_dir_open(config->state_dir ? config->state_dir : def, &svc->state_fd,
                           &svc->state_dir, diag);
    free(def);
    if (st == PH_OK && geteuid() == 0) {
        char *claims = NULL;
        st = ph_state_dir_open(PH_SANDBOX_ID_CLAIM_DIR, &svc->claims_fd, &claims, diag);
        free(claims);
    } else if (st == PH_OK) {
        svc->claims_fd = fcntl(svc->state_fd, F_DUPFD_CLOEXEC, 3);
        if (svc->claims_fd < 0)
            st = ph_diag_set(diag, PH_E_IO, 0, "dup: %s", strerror(errno));
    }
    if (st == PH_OK)
        st = ph_ws_caps_init(svc->state_fd, config->workspace_total_max_bytes,
                             config->workspace_tenant_max_bytes, &svc->caps, diag);
    if (st != PH_OK) {
        ph_execution_service_close(&svc);
        return st;
    }
    *out = svc;
    return PH_OK;
}

ph_status ph_execution_service_claim_for_cli(ph_execution_service *svc, ph_diag *diag)
{
    return ph_state_claim(svc->state_fd, PH_STATE_OWNER_CLI, diag);
}

void ph_execution_service_close(ph_execution_service **svc)
{
    if (svc == NULL || *svc == NULL)
        return;
    if ((*svc)->state_fd >= 0)
        close((*svc)->state_fd);
    if ((*svc)->claims_fd >= 0)
        close((*svc)->claims_fd);
    free((*svc)->state_dir);
    free(*svc);
    *svc = NULL;
}

void ph_sandbox_limits_init(ph_sandbox_limits *limits)
{
    limits->memory_bytes = PH_SANDBOX_UNSET;
    limits->pids = PH_SANDBOX_UNSET;
    limits->cpu_millis = PH_SANDBOX_UNSET;
    limits->wall_clock_ms = PH_SANDBOX_UNSET;
    limits->output_bytes = PH_SANDBOX_UNSET;
    limits->workspace_bytes = PH_SANDBOX_UNSET;
    limits->workspace_inodes = PH_SANDBOX_UNSET;
}

/* ---- spec validation and copy ---- */

static bool valid_ident(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static bool printable_token(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 2048)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* check_socket: the proxy socket must be one now (create). A reattach
 * passes false: the spec is the service's own (spec.json, verified), gvisor
 * and docker mount the socket pinned at create, and an environment whose
 * proxy has gone away must still be reachable, if only to destroy it. */
static ph_status validate_spec(const ph_execution_service *svc, const ph_environment_spec *s,
                               bool check_socket, ph_diag *diag)
{
    if (!valid_ident(s->tenant))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.tenant must be 1-128 of [A-Za-z0-9._-]");
    if (!valid_ident(s->lease))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.lease must be 1-128 of [A-Za-z0-9._-]");
    if (s->mechanism != svc->ops->id)
        return ph_diag_set(diag, PH_E_DENIED, 0,
                           "spec.mechanism is %s but this service runs %s",
                           ph_sandbox_mechanism_name(s->mechanism), svc->ops->name);
    const ph_sandbox_limits *l = &s->limits;
    if (l->wall_clock_ms != PH_SANDBOX_UNSET && l->wall_clock_ms <= 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.limits.wall_clock_ms must be > 0");
    if (l->output_bytes != PH_SANDBOX_UNSET &&
        (l->output_bytes <= 0 || l->output_bytes > MAX_OUTPUT_BYTES))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.limits.output_bytes must be 1..%d",
                           MAX_OUTPUT_BYTES);
    if ((l->memory_bytes != PH_SANDBOX_UNSET && l->memory_bytes <= 0) ||
        (l->pids != PH_SANDBOX_UNSET && l->pids <= 0) ||
        (l->cpu_millis != PH_SANDBOX_UNSET && l->cpu_millis <= 0))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.limits: memory, pids and cpu must be > 0");
    /* The quota is cpu_millis * 100 us per 100 ms period: past this the
     * product wraps (184467440737096 became 1% of one CPU). */
    if (l->cpu_millis != PH_SANDBOX_UNSET && l->cpu_millis > CPU_MILLIS_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.limits.cpu_millis must be 1..%lld",
                           (long long)CPU_MILLIS_MAX);
    if (l->workspace_bytes != PH_SANDBOX_UNSET &&
        (l->workspace_bytes < PH_WORKSPACE_MIN_BYTES || l->workspace_bytes > PH_WORKSPACE_MAX_BYTES))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "spec.limits.workspace_bytes must be %lld..%lld (16 MiB..1 TiB)",
                           PH_WORKSPACE_MIN_BYTES, PH_WORKSPACE_MAX_BYTES);
    if (l->workspace_inodes != PH_SANDBOX_UNSET &&
        (l->workspace_inodes < PH_WORKSPACE_MIN_INODES ||
         l->workspace_inodes > PH_WORKSPACE_MAX_INODES))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.limits.workspace_inodes must be %lld..%lld",
                           PH_WORKSPACE_MIN_INODES, PH_WORKSPACE_MAX_INODES);
    if (l->workspace_inodes != PH_SANDBOX_UNSET &&
        (uint64_t)l->workspace_inodes > ph_ws_limit_bytes(l) / PH_WORKSPACE_MIN_BYTES_PER_INODE)
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "workspace_inodes_too_many: spec.limits.workspace_inodes must be at "
                           "most one per KiB of the workspace (%llu for %llu bytes)",
                           (unsigned long long)(ph_ws_limit_bytes(l) /
                                                PH_WORKSPACE_MIN_BYTES_PER_INODE),
                           (unsigned long long)ph_ws_limit_bytes(l));
    if (s->network.grant_token != NULL) {
        if (!printable_token(s->network.grant_token))
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "spec.network.grant_token must be 1-2048 printable ASCII bytes");
        /* A socket, not any path: a directory here would be bind-mounted
         * read-write into the sandbox. */
        const char *sock = s->network.proxy_socket_path;
        if (check_socket || sock == NULL || sock[0] != '/') {
            ph_status st = ph_state_check_socket(sock, diag);
            if (st != PH_OK)
                return st;
        }
    }
    /* Both paths are saved in spec.json for reattach: a path JSON cannot
     * carry as text would come back as none. */
    if (s->passthrough_file && !ph_utf8_valid(s->passthrough_file, strlen(s->passthrough_file)))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.passthrough_file must be valid UTF-8");
    if (s->network.proxy_socket_path &&
        !ph_utf8_valid(s->network.proxy_socket_path, strlen(s->network.proxy_socket_path)))
        return ph_diag_set(diag, PH_E_INVAL, 0, "spec.network.proxy_socket_path must be valid UTF-8");
    return PH_OK;
}

/* ---- removal of a workspace tree, never following a symlink ---- */

/* A workspace is the command's: any depth, any names, links anywhere.
 * ph_tree_remove_at (pinhole/tree_remove.h) walks it from descriptors
 * without following a link or recursing, and stays on the filesystem it
 * started on (a mount inside is not the workspace's to delete). */
/* Removes env_fd/workspace: its volume is unmounted (which frees all of it
 * at once); when something still holds the volume (a workspace capability
 * outliving destroy) its files are deleted first, so that holder finds an
 * empty directory, and the unmount is lazy. */
static void remove_workspace(int env_fd, const char *env_path)
{
    if (ph_ws_volume_unmount(env_fd, env_path, false) < 0) {
        int root = openat(env_fd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root >= 0) {
            (void)ph_tree_empty(root, PH_TREE_ONE_FS, NULL);
            close(root);
        }
        (void)ph_ws_volume_unmount(env_fd, env_path, true);
    }
    (void)ph_tree_remove_at(env_fd, "workspace", PH_TREE_ONE_FS, NULL);
}

/* ---- create / execute / destroy ---- */

static ph_status new_env_id(char out[ENV_ID_LEN + 1])
{
    memcpy(out, "env-", 4);
    return ph_hex_random((ENV_ID_LEN - 4) / 2, out + 4) ? PH_OK : PH_E_IO;
}

static bool valid_env_id(const char *id)
{
    if (id == NULL || strlen(id) != ENV_ID_LEN || strncmp(id, "env-", 4) != 0)
        return false;
    for (size_t i = 4; i < ENV_ID_LEN; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return true;
}

static void env_free(ph_environment *env)
{
    if (env->ws_fd >= 0)
        close(env->ws_fd);
    if (env->env_fd >= 0)
        close(env->env_fd);
    ph_env_block_clear(&env->env);
    ph_spec_copy_clear(&env->spec);
    free(env->state_path);
    free(env->workspace_path);
    free(env->proxy_path);
    free(env);
}

/* Tier-1 values come from the service's own environment, read here and
 * nowhere else. */
static const char *service_getenv(const char *name)
{
    return getenv(name);
}

/* ---- per-environment host identities ----
 * Each environment takes one uid (gid the same number) from the service's
 * range by creating ids/<uid> in the host-wide claim directory
 * (PH_SANDBOX_ID_CLAIM_DIR; the state directory for an unprivileged
 * service) with O_EXCL: the claim is atomic across every service of the
 * host, whatever its state directory (two execd, the CLI beside one), so
 * no two environments ever share a host uid; destroy removes it. The first
 * probe is derived from the environment id. */

/* The claim is published whole: the id is written to ids/.claim-<env id>
 * first, then linked to ids/<uid> (linkat fails on an existing name, so
 * the claim stays atomic), so a crash never leaves a claim that does not
 * name its environment; recovery removes both names. */
static ph_status claim_id(ph_environment *env, ph_diag *diag)
{
    ph_execution_service *svc = env->svc;
    ph_status st = ph_fault_point("id_claim", diag);
    int ids = -1, fd = -1;
    char tmp[40];
    snprintf(tmp, sizeof tmp, ".claim-%s", env->id);
    for (int attempt = 0; st == PH_OK && fd < 0 && attempt < 4; attempt++) {
        if (ids >= 0)
            close(ids); /* the last release removed the empty directory meanwhile */
        ids = -1;
        if ((st = ph_state_mkdir(svc->claims_fd, "ids", 0700, false, &ids, diag)) != PH_OK)
            break;
        (void)unlinkat(ids, tmp, 0);
        fd = openat(ids, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != ENOENT)
            break;
    }
    if (st != PH_OK || fd < 0 || ph_write_all(fd, env->id, strlen(env->id)) != 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            (void)unlinkat(ids, tmp, 0);
        }
        if (ids >= 0)
            close(ids);
        return st != PH_OK ? st : ph_diag_set(diag, PH_E_IO, 0, "id_claim_failed: %s", strerror(e));
    }
    close(fd);
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the id: the first probe */
    for (const char *p = env->id; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    int e = EEXIST;
    for (uint32_t i = 0; i < svc->id_count; i++) {
        uint32_t uid = svc->id_first + (uint32_t)((h + i) % svc->id_count);
        char name[16];
        snprintf(name, sizeof name, "%u", (unsigned)uid);
        if (linkat(ids, tmp, ids, name, 0) != 0) {
            e = errno;
            if (e == EEXIST)
                continue;
            break;
        }
        (void)unlinkat(ids, tmp, 0);
        close(ids);
        env->uid = (uid_t)uid;
        env->gid = (gid_t)uid;
        env->id_claimed = true;
        return PH_OK;
    }
    (void)unlinkat(ids, tmp, 0);
    close(ids);
    return ph_diag_set(diag, e == EEXIST ? PH_E_LIMIT : PH_E_IO, 0,
                       "id_range_exhausted: every host id of the sandbox range is in use (%u)",
                       (unsigned)svc->id_count);
}

/* Recovery: removes every claim naming env_id (its uid is not known when
 * the process that claimed died). True when none is left. */
static bool release_claims_of(ph_execution_service *svc, const char *env_id)
{
    int ids = openat(svc->claims_fd, "ids", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ids < 0)
        return errno == ENOENT;
    char tmp[40];
    snprintf(tmp, sizeof tmp, ".claim-%s", env_id);
    (void)unlinkat(ids, tmp, 0); /* first: a claim linked from it has two links */
    bool clean = true;
    int scan = dup(ids);
    DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        char *owner = NULL;
        size_t len = 0;
        /* A process still running as the uid (a sandbox process the crash
         * left) would be the next environment's: it goes first, and the
         * claim stays while one is left. */
        if (ph_state_read(ids, de->d_name, &owner, &len, NULL) == PH_OK &&
            len == strlen(env_id) && memcmp(owner, env_id, len) == 0 &&
            (!ph_kill_uid((uid_t)strtoul(de->d_name, NULL, 10)) ||
             unlinkat(ids, de->d_name, 0) != 0))
            clean = false;
        free(owner);
    }
    if (d != NULL)
        closedir(d);
    else
        clean = false;
    close(ids);
    (void)unlinkat(svc->claims_fd, "ids", AT_REMOVEDIR);
    return clean;
}

static void release_id(ph_environment *env)
{
    if (!env->id_claimed)
        return;
    int ids = openat(env->svc->claims_fd, "ids", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ids >= 0) {
        char name[16];
        snprintf(name, sizeof name, "%u", (unsigned)env->uid);
        /* Only our own claim: a second destroy of this environment (a stale
         * handle in another process) must not free the id of whichever
         * environment claimed it since, nor end that one's processes. What
         * still runs as our uid (a sandbox its runtime failed to end: a
         * runsc delete or docker rm that failed) goes before the claim, as
         * in recovery: the next environment given the uid would share it.
         * A uid that cannot be cleared keeps its claim: lost to the range,
         * never shared. */
        char *owner = NULL;
        size_t len = 0;
        if (ph_state_read(ids, name, &owner, &len, NULL) == PH_OK && len == strlen(env->id) &&
            memcmp(owner, env->id, len) == 0 && ph_kill_uid(env->uid))
            (void)unlinkat(ids, name, 0);
        free(owner);
        close(ids);
        /* Empty once no environment is left: then the state directory is
         * as the service found it. ENOTEMPTY otherwise, which is fine. */
        (void)unlinkat(env->svc->claims_fd, "ids", AT_REMOVEDIR);
    }
    env->id_claimed = false;
}

/* Removes everything of env under the state directory, by descriptor: the
 * workspace's volume, its contents (the command's; they may hold symlinks,
 * which unlinkat never follows), the saved spec, the id claim and the
 * directory itself. Each step runs whatever the others did. */
static void remove_env_state(ph_environment *env)
{
    if (env->ws_fd >= 0) {
        close(env->ws_fd);
        env->ws_fd = -1;
    }
    if (env->env_fd >= 0) {
        remove_workspace(env->env_fd, env->state_path);
        ph_ws_reserve_release(env->env_fd);
        ph_state_unpin(env->env_fd, env->state_path, PROXY_PIN);
        (void)unlinkat(env->env_fd, "spec.json", 0);
        (void)unlinkat(env->env_fd, "root", AT_REMOVEDIR);
    }
    release_id(env);
    /* Last: until the directory goes, the record says what may be left. */
    if (env->env_fd >= 0)
        (void)unlinkat(env->env_fd, PH_INTENT_FILE, 0);
    (void)unlinkat(env->svc->state_fd, env->id, AT_REMOVEDIR);
}

/* Makes <state>/<id> (exclusively, 0700), its workspace (a volume when the
 * service limits workspaces) and the id claim. */
static ph_status make_env_state(ph_environment *env, ph_diag *diag)
{
    ph_execution_service *svc = env->svc;
    const ph_sandbox_limits *l = &env->spec.spec.limits;
    ph_status st = ph_fault_point("env_dir", diag);
    if (st == PH_OK)
        st = ph_ws_reserve_env_dir(svc->state_fd, &svc->caps, env->id, env->spec.spec.tenant,
                                   svc->volumes ? ph_ws_limit_bytes(l) : 0, &env->env_fd, diag);
    if (st != PH_OK)
        return st;
    env->intent.env_fd = env->env_fd;
    env->intent.mechanism = svc->ops->id;
    memcpy(env->intent.env_id, env->id, ENV_ID_LEN + 1);
    int ws = -1;
    if ((st = ph_intent_record(&env->intent, PH_EFFECT_ID_CLAIM, diag)) == PH_OK &&
        (st = claim_id(env, diag)) == PH_OK && (st = ph_fault_point("workspace_dir", diag)) == PH_OK)
        st = ph_state_mkdir(env->env_fd, "workspace", 0755, true, &ws, diag);
    if (ws >= 0)
        close(ws);
    if (st == PH_OK && svc->volumes && env->spec.spec.network.grant_token != NULL &&
        (st = ph_intent_record(&env->intent, PH_EFFECT_PROXY_PIN, diag)) == PH_OK)
        st = ph_state_pin_socket(env->env_fd, PROXY_PIN, env->spec.spec.network.proxy_socket_path,
                                 diag);
    if (st == PH_OK && svc->volumes &&
        (st = ph_intent_record(&env->intent, PH_EFFECT_VOLUME, diag)) == PH_OK)
        st = ph_ws_volume_create(env->env_fd, env->state_path, ph_ws_limit_bytes(l),
                                 ph_ws_limit_inodes(l), env->uid, env->gid, diag);
    return st;
}

/* Shared by create and reattach. fresh: make the state (create); else
 * open and verify what a create in another process made. */
static ph_status env_open(ph_execution_service *svc, const ph_environment_spec *spec,
                          const char *id, bool fresh, uid_t uid, ph_environment **out,
                          ph_diag *diag)
{
    ph_environment *env = calloc(1, sizeof *env);
    if (env == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    env->svc = svc;
    env->ws_fd = -1;
    env->env_fd = -1;
    memcpy(env->id, id, ENV_ID_LEN + 1);
    if (asprintf(&env->state_path, "%s/%s", svc->state_dir, id) < 0)
        env->state_path = NULL;
    if (env->state_path && asprintf(&env->workspace_path, "%s/workspace", env->state_path) < 0)
        env->workspace_path = NULL;
    if (env->workspace_path == NULL || ph_spec_copy_init(&env->spec, spec) != PH_OK) {
        env_free(env);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    ph_status st;
    if (fresh) {
        st = make_env_state(env, diag);
    } else {
        env->uid = uid;
        env->gid = (gid_t)uid;
        st = ph_state_opendir(svc->state_fd, id, &env->env_fd, diag);
        if (st == PH_OK)
            st = ph_state_verify_dir(env->env_fd, true, id, diag);
    }
    if (st == PH_OK) {
        env->ws_fd = openat(env->env_fd, "workspace", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (env->ws_fd < 0)
            st = ph_diag_set(diag, errno == ENOENT ? PH_E_NOT_FOUND : PH_E_IO, 0,
                             "cannot open the workspace of %s: %s", id, strerror(errno));
    }
    if (st == PH_OK && env->spec.spec.network.grant_token != NULL) {
        /* gvisor and docker mount the pinned socket; fake (no mounts, maybe
         * unprivileged) the spec's path. */
        if (svc->volumes && asprintf(&env->proxy_path, "%s/%s", env->state_path, PROXY_PIN) < 0)
            env->proxy_path = NULL;
        if (!svc->volumes)
            env->proxy_path = strdup(env->spec.spec.network.proxy_socket_path);
        if (env->proxy_path == NULL)
            st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    if (st == PH_OK) {
        ph_env_inputs in = {
            .lease = env->spec.spec.lease,
            .network = &env->spec.spec.network,
            .passthrough_file = env->spec.spec.passthrough_file,
            .getenv_fn = service_getenv,
            .log = svc->log,
            .log_ctx = svc->log_ctx,
        };
        st = ph_env_build(&in, &env->env, diag);
    }
    ph_mech_create_args args = {.env_id = env->id,
                                .env_fd = env->env_fd,
                                .env_state_dir = env->state_path,
                                .workspace_fd = env->ws_fd,
                                .workspace_dir = env->workspace_path,
                                .uid = env->uid,
                                .gid = env->gid,
                                .proxy_socket = env->proxy_path,
                                .spec = &env->spec.spec};
    if (st == PH_OK && fresh && svc->ops->recover != NULL)
        st = ph_intent_record(&env->intent, PH_EFFECT_MECHANISM, diag);
    if (st == PH_OK && (st = ph_fault_point("mechanism_create", diag)) == PH_OK)
        st = svc->ops->create(&args, &env->mech, diag);
    if (st != PH_OK) {
        if (fresh)
            remove_env_state(env);
        env_free(env);
        return st;
    }
    *out = env;
    return PH_OK;
}

ph_status ph_environment_create(ph_execution_service *svc, const ph_environment_spec *spec,
                                ph_environment **out, ph_diag *diag)
{
    if (svc == NULL || spec == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_environment_create: NULL argument");
    *out = NULL;
    ph_status st = validate_spec(svc, spec, true, diag);
    if (st != PH_OK)
        return st;
    char id[ENV_ID_LEN + 1];
    if (new_env_id(id) != PH_OK)
        return ph_diag_set(diag, PH_E_IO, 0, "no randomness for an environment id");
    return env_open(svc, spec, id, true, 0, out, diag);
}

const char *ph_environment_id(const ph_environment *env)
{
    return env->id;
}

void ph_environment_destroy(ph_environment **envp)
{
    if (envp == NULL || *envp == NULL)
        return;
    ph_environment *env = *envp;
    env->svc->ops->destroy(&env->mech);
    /* A reattached handle did not claim the id itself; the claim is the
     * environment's, and goes with it. */
    env->id_claimed = true;
    remove_env_state(env);
    env_free(env);
    *envp = NULL;
}

void ph_environment_detach(ph_environment **envp)
{
    if (envp == NULL || *envp == NULL)
        return;
    ph_environment *env = *envp;
    if (env->svc->ops->detach)
        env->svc->ops->detach(&env->mech);
    env_free(env);
    *envp = NULL;
}

ph_status ph_environment_workspace(ph_environment *env, ph_workspace **out, ph_diag *diag)
{
    int fd = fcntl(env->ws_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "dup: %s", strerror(errno));
    return ph_workspace_from_fd(fd, out, diag);
}

static ph_status check_argv(const char *const *argv, ph_diag *diag)
{
    if (argv == NULL || argv[0] == NULL || argv[0][0] == '\0')
        return ph_diag_set(diag, PH_E_INVAL, 0, "argv must have a non-empty argv[0]");
    size_t bytes = 0, n = 0;
    for (; argv[n]; n++) {
        bytes += strlen(argv[n]) + 1;
        if (n >= ARGV_MAX_COUNT || bytes > ARGV_MAX_BYTES)
            return ph_diag_set(diag, PH_E_LIMIT, 0, "argv is over %d arguments or %d bytes",
                               ARGV_MAX_COUNT, ARGV_MAX_BYTES);
    }
    return PH_OK;
}

static void free_argv(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

/* A private, mutable copy for execve (whose prototype is not const). */
static char **copy_argv(const char *const *argv)
{
    size_t n = 0;
    while (argv[n])
        n++;
    char **c = calloc(n + 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++) {
        c[i] = strdup(argv[i]);
        if (c[i] == NULL) {
            free_argv(c);
            return NULL;
        }
    }
    return c;
}

static int make_stdin(const ph_execution_command *cmd)
{
    int fd = memfd_create("pinhole-stdin", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (cmd->stdin_data && ph_write_all(fd, cmd->stdin_data, cmd->stdin_len) != 0) {
        close(fd);
        return -1;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

ph_status ph_environment_execute(ph_environment *env, const ph_execution_command *cmd,
                                 ph_execution_result **out, ph_diag *diag)
{
    if (env == NULL || cmd == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_environment_execute: NULL argument");
    *out = NULL;
    ph_status st = check_argv(cmd->argv, diag);
    if (st != PH_OK)
        return st;
    if (cmd->stdin_data == NULL && cmd->stdin_len > 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "stdin_len without stdin_data");
    if (cmd->stdin_len > STDIN_MAX_BYTES)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "stdin is limited to %d bytes", STDIN_MAX_BYTES);
    char cwd[PH_WS_PATH_MAX + 1];
    st = ph_ws_normalize_or_refuse(cmd->cwd ? cmd->cwd : "", cwd, diag);
    if (st != PH_OK)
        return st;
    /* One command at a time per environment, across threads and processes
     * (the CLI): the snapshots must bracket this command alone, and the
     * sweep after a command (forwarder --run) kills every other process of
     * the sandbox. The lock is on a fresh open file description of the
     * environment's directory, so two handles of one process exclude each
     * other too; the time spent waiting comes out of the run budget. */
    int64_t wait_start = ph_monotonic_us();
    int lock_fd = ph_state_lock_dir(env->env_fd);
    if (lock_fd < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "environment_lock_failed: %s", strerror(errno));
    int64_t budget = cmd->run_budget_ms;
    if (budget != PH_SANDBOX_UNSET) {
        budget -= (ph_monotonic_us() - wait_start) / 1000; /* whole ms waited */
        if (budget < 0)
            budget = 0; /* spent (and never -1, which means none) */
    }
    ph_timeout_choice tc = ph_timeout_compose(env->svc->hard_cap_ms,
                                              env->spec.spec.limits.wall_clock_ms, budget,
                                              cmd->timeout_seconds);
    if (tc.ms <= 0) {
        close(lock_fd);
        return ph_diag_set(diag, PH_E_TIMEOUT, 0, "the run budget is spent; nothing was started");
    }
    int cwd_fd = ph_ws_open_beneath(env->ws_fd, cwd, O_PATH | O_DIRECTORY, 0);
    if (cwd_fd < 0) {
        int e = errno;
        close(lock_fd);
        return ph_ws_errno_status(e, cmd->cwd ? cmd->cwd : ".", diag);
    }

    ph_execution_result *r = calloc(1, sizeof *r);
    ph_env_block envp = {0};
    ph_snapshot *before = NULL, *after = NULL;
    int stdin_fd = -1;
    char **argv = copy_argv(cmd->argv);
    if (r == NULL || argv == NULL) {
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        goto done;
    }
    /* The per-command part of tier 2: PWD names the working directory as the
     * command sees it. */
    for (size_t i = 0; st == PH_OK && i < env->env.count; i++) {
        char *eq = strchr(env->env.vars[i], '=');
        *eq = '\0';
        st = ph_env_set(&envp, env->env.vars[i], eq + 1);
        *eq = '=';
    }
    char pwd[PH_WS_PATH_MAX + 16];
    snprintf(pwd, sizeof pwd, "%s%s%s", PH_SANDBOX_WORKSPACE_PATH, strcmp(cwd, ".") ? "/" : "",
             strcmp(cwd, ".") ? cwd : "");
    if (st == PH_OK)
        st = ph_env_set(&envp, "PWD", pwd);
    if (st != PH_OK) {
        st = ph_diag_set(diag, st, 0, "building the environment: %s", ph_strerror(st));
        goto done;
    }
    stdin_fd = make_stdin(cmd);
    if (stdin_fd < 0) {
        st = ph_diag_set(diag, PH_E_IO, 0, "stdin: %s", strerror(errno));
        goto done;
    }
    if ((st = ph_fault_point("exec_snapshot", diag)) != PH_OK)
        goto done;
    st = ph_snapshot_take(env->ws_fd, PH_SNAPSHOT_MAX_ENTRIES, &before, diag);
    if (st != PH_OK)
        goto done;

    int64_t out_cap = env->spec.spec.limits.output_bytes;
    ph_mech_exec_args args = {
        .argv = argv,
        .envp = envp.vars,
        .cwd = cwd,
        .cwd_fd = cwd_fd,
        .stdin_fd = stdin_fd,
        .timeout_ms = tc.ms,
        .output_cap = out_cap == PH_SANDBOX_UNSET ? DEFAULT_OUTPUT_BYTES : (size_t)out_cap,
        .on_output = cmd->on_output,
        .on_output_ctx = cmd->on_output_ctx,
    };
    ph_mech_outcome o = {0};
    st = ph_fault_point("exec_mechanism", diag);
    if (st == PH_OK)
        st = env->svc->ops->execute(env->mech, &args, &o, diag);
    r->out = o.out;
    r->err = o.err;
    if (st != PH_OK)
        goto done;
    r->exited = o.exited;
    r->exit_code = o.exit_code;
    r->term_signal = o.term_signal;
    r->timed_out = o.timed_out;
    r->timeout_ms = tc.ms;
    r->timeout_bound = tc.bound;
    r->duration_ms = o.duration_ms;
    r->workspace_full = env->svc->volumes && ph_ws_volume_full(env->ws_fd);
    if (ph_output_finish(&r->out) != PH_OK || ph_output_finish(&r->err) != PH_OK) {
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        goto done;
    }
    st = ph_snapshot_take(env->ws_fd, PH_SNAPSHOT_MAX_ENTRIES, &after, diag);
    if (st == PH_OK)
        st = ph_snapshot_diff(before, after, r, diag);

done:
    if (stdin_fd >= 0)
        close(stdin_fd);
    close(cwd_fd);
    close(lock_fd); /* releases the lock */
    free_argv(argv);
    ph_env_block_clear(&envp);
    ph_snapshot_free(&before);
    ph_snapshot_free(&after);
    if (st != PH_OK) {
        ph_execution_result_free(&r);
        return st;
    }
    *out = r;
    return PH_OK;
}

void ph_execution_result_free(ph_execution_result **result)
{
    if (result == NULL || *result == NULL)
        return;
    ph_execution_result *r = *result;
    free(r->out.data);
    free(r->err.data);
    for (size_t i = 0; i < r->files_changed_count; i++)
        free(r->files_changed[i].path);
    free(r->files_changed);
    free(r);
    *result = NULL;
}

const char *ph_change_kind_name(ph_change_kind k)
{
    switch (k) {
    case PH_CHANGE_ADDED: return "added";
    case PH_CHANGE_MODIFIED: return "modified";
    case PH_CHANGE_DELETED: return "deleted";
    }
    return "unknown";
}

/* ---- CLI support: persisting a spec so another process can re-attach ---- */

ph_status ph_environment_persist_spec(ph_environment *env, ph_diag *diag)
{
    const ph_environment_spec *s = &env->spec.spec;
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "tenant",
                          s->tenant, "lease", s->lease, "mechanism",
                          ph_sandbox_mechanism_name(s->mechanism), "memory_bytes",
                          (json_int_t)s->limits.memory_bytes, "pids", (json_int_t)s->limits.pids,
                          "cpu_millis", (json_int_t)s->limits.cpu_millis, "wall_clock_ms",
                          (json_int_t)s->limits.wall_clock_ms, "output_bytes",
                          (json_int_t)s->limits.output_bytes, "workspace_bytes",
                          (json_int_t)s->limits.workspace_bytes, "workspace_inodes",
                          (json_int_t)s->limits.workspace_inodes, "host_id",
                          (json_int_t)env->uid);
    if (o == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    if (s->passthrough_file)
        json_object_set_new(o, "passthrough_file", json_string(s->passthrough_file));
    if (s->network.grant_token) {
        json_object_set_new(o, "grant_token", json_string(s->network.grant_token));
        json_object_set_new(o, "proxy_socket_path", json_string(s->network.proxy_socket_path));
        json_object_set_new(o, "proxy_port", json_integer(s->network.proxy_port));
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (text == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st = ph_fault_point("spec_write", diag);
    if (st == PH_OK)
        st = ph_state_write(env->env_fd, "spec.json", text, strlen(text), 0600, diag);
    free(text);
    return st;
}

static const char *json_str(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t json_i64(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : PH_SANDBOX_UNSET;
}

ph_status ph_environment_reattach(ph_execution_service *svc, const char *env_id,
                                  ph_environment **out, ph_diag *diag)
{
    if (svc == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_environment_reattach: NULL argument");
    *out = NULL;
    if (!valid_env_id(env_id))
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s' is not an environment id (env-<16 hex>)",
                           env_id ? env_id : "");
    /* The spec is read back only from a directory and a file this service
     * made: owner euid, 0700 / 0600, no symlink (state_dir.c). */
    int dir = -1;
    char *text = NULL;
    ph_status st = ph_state_opendir(svc->state_fd, env_id, &dir, diag);
    if (st == PH_OK)
        st = ph_state_verify_dir(dir, true, env_id, diag);
    if (st == PH_OK)
        st = ph_state_read(dir, "spec.json", &text, NULL, diag);
    if (dir >= 0)
        close(dir);
    if (st == PH_E_NOT_FOUND)
        return ph_diag_set(diag, PH_E_NOT_FOUND, 0, "no environment %s in this state directory",
                           env_id);
    if (st != PH_OK)
        return st;
    json_error_t jerr;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (o == NULL)
        return ph_diag_set(diag, PH_E_FORMAT, 0, "state_file_malformed: the spec of %s", env_id);
    ph_environment_spec spec = {0};
    spec.tenant = json_str(o, "tenant");
    spec.lease = json_str(o, "lease");
    st = ph_sandbox_mechanism_from_name(json_str(o, "mechanism"), &spec.mechanism, diag);
    spec.limits.memory_bytes = json_i64(o, "memory_bytes");
    spec.limits.pids = json_i64(o, "pids");
    spec.limits.cpu_millis = json_i64(o, "cpu_millis");
    spec.limits.wall_clock_ms = json_i64(o, "wall_clock_ms");
    spec.limits.output_bytes = json_i64(o, "output_bytes");
    spec.limits.workspace_bytes = json_i64(o, "workspace_bytes");
    spec.limits.workspace_inodes = json_i64(o, "workspace_inodes");
    spec.passthrough_file = json_str(o, "passthrough_file");
    spec.network.grant_token = json_str(o, "grant_token");
    spec.network.proxy_socket_path = json_str(o, "proxy_socket_path");
    int64_t port = json_i64(o, "proxy_port");
    spec.network.proxy_port = port > 0 && port <= 65535 ? (uint16_t)port : 0;
    int64_t host_id = json_i64(o, "host_id");
    if (st == PH_OK && (host_id < (int64_t)svc->id_first ||
                        host_id >= (int64_t)svc->id_first + (int64_t)svc->id_count))
        st = ph_diag_set(diag, PH_E_FORMAT, 0,
                         "state_file_malformed: the host id of %s is outside the sandbox range",
                         env_id);
    if (st == PH_OK)
        st = validate_spec(svc, &spec, false, diag);
    if (st == PH_OK)
        st = env_open(svc, &spec, env_id, false, (uid_t)host_id, out, diag);
    json_decref(o);
    return st;
}

ph_status ph_environment_recover(ph_execution_service *svc, const char *env_id, ph_diag *diag)
{
    if (svc == NULL || !valid_env_id(env_id))
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s' is not an environment id (env-<16 hex>)",
                           env_id ? env_id : "");
    /* Only a directory this service made (owner euid, 0700, no symlink):
     * anything else is reported and left alone. */
    int dir = -1;
    ph_status st = ph_state_opendir(svc->state_fd, env_id, &dir, diag);
    if (st == PH_OK)
        st = ph_state_verify_dir(dir, true, env_id, diag);
    char *path = NULL;
    if (st == PH_OK && asprintf(&path, "%s/%s", svc->state_dir, env_id) < 0) {
        path = NULL;
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    if (st != PH_OK) {
        if (dir >= 0)
            close(dir);
        return st;
    }
    ph_intent in;
    (void)ph_intent_read(dir, svc->ops->id, &in, NULL);
    /* The reverse of create's order; each undo removes what is there. */
    const ph_mechanism_ops *ops = ph_mechanism_ops_for(in.mechanism);
    if ((in.effects & PH_EFFECT_MECHANISM) && ops != NULL && ops->recover != NULL)
        ops->recover(env_id, dir, path);
    if (in.effects & PH_EFFECT_PROXY_PIN)
        ph_state_unpin(dir, path, PROXY_PIN);
    if (in.effects & PH_EFFECT_VOLUME)
        remove_workspace(dir, path);
    bool claims_gone = !(in.effects & PH_EFFECT_ID_CLAIM) || release_claims_of(svc, env_id);
    close(dir);
    free(path);
    /* The claims first: once the directory is gone nothing leads to them. */
    if (!claims_gone)
        return ph_diag_set(diag, PH_E_IO, 0,
                           "recovery_incomplete: the host id claim of %s could not be removed",
                           env_id);
    ph_diag td = {0};
    if (ph_tree_remove_at(svc->state_fd, env_id, PH_TREE_ONE_FS, &td) != PH_OK)
        return ph_diag_set(diag, PH_E_IO, 0, "recovery_incomplete: %s: %s", env_id,
                           errno == EXDEV ? "its workspace is still mounted" : strerror(errno));
    return PH_OK;
}
