/* execd_main.c - pinhole-execd: parse the options, refuse to start where the
 * daemon would not be safe (docker or fake in production, a tier-0
 * credential in its own environment), destroy what a previous run left in
 * the state directory, bind the unix socket, serve (execd_service.c).
 * docs/execd.md is the manual. */
#include "execd_service-int.h"

#include <dirent.h>
#include <errno.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/clock.h"
#include "pinhole/unix_listen.h"
#include "pinhole/version.h"

enum {
    XD_EXIT_OK = 0,
    XD_EXIT_USAGE = 64,
    XD_EXIT_UNAVAILABLE = 69,
    XD_EXIT_OS = 71,
    XD_EXIT_REFUSED = 78,
};

extern char **environ;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pinhole-execd --socket=PATH --state-dir=DIR --allow-uid=UID [options]\n"
            "Serves the ExecutionEnvironment and WorkspaceFiles ports to workers (docs/execd.md).\n"
            "\n"
            "  --socket=PATH            unix socket to listen on (required)\n"
            "  --socket-mode=OCTAL      permission bits of the socket file (0660)\n"
            "  --state-dir=DIR          the daemon's own directory for sandboxes (required)\n"
            "  --allow-uid=UID          a peer uid allowed to connect (repeatable)\n"
            "  --allow-gid=GID          a peer gid allowed to connect (repeatable)\n"
            "  --mechanism=NAME         gvisor (default), docker or fake\n"
            "  --mode=MODE              production (default) or development\n"
            "  --hard-cap-ms=N          service hard cap on any command (600000)\n"
            "  --proxy-socket=PATH      the egress proxy's unix socket for granted sandboxes\n"
            "  --max-sandboxes=N        live sandboxes at most (64)\n"
            "  --max-executions=N       requests served at once (4)\n"
            "  --queue=N                requests waiting at most; more are answered busy (16)\n"
            "  --max-request-bytes=N    largest request frame (16777216)\n"
            "  --max-connections=N      open connections at most (256)\n"
            "  --max-connections-per-identity=N  of those, one identity's (half)\n"
            "  --max-requests-per-identity=N     one identity's requests queued or\n"
            "                           running (half of --max-executions)\n"
            "  --max-sandboxes-per-identity=N    one identity's live sandboxes (half)\n"
            "  --handshake-timeout-ms=N a connection not identified this long after\n"
            "                           accept is closed (10000)\n"
            "  --frame-timeout-ms=N     a request frame must complete this long after\n"
            "                           its first byte (30000)\n"
            "  --grace-seconds=N        an identity's sandboxes outlive its last connection\n"
            "                           by this long (60)\n"
            "  --tls-listen=HOST:PORT   also serve TCP with mutual TLS (port 0: any, logged)\n"
            "  --tls-cert=FILE          the server's certificate chain (PEM)\n"
            "  --tls-key=FILE           its private key (PEM; mode 0600 or stricter)\n"
            "  --tls-ca=FILE            the CA whose client certificates are accepted;\n"
            "                           the certificate subject is the identity\n"
            "  --metrics-listen=HOST:PORT  GET /metrics (Prometheus) and /health over HTTP\n"
            "  --workspace-total-max=BYTES  workspace bytes all sandboxes may reserve on the\n"
            "                           host (default: half the state directory's filesystem)\n"
            "  --workspace-tenant-max=BYTES  workspace bytes one tenant's sandboxes may reserve\n"
            "                           (default: a quarter of --workspace-total-max's default)\n"
            "  --help, --version\n"
            "\n"
            "Exit: 0 stopped by a signal, 64 usage, 69 mechanism unavailable, 71 OS error,\n"
            "78 refused (startup check, a credential in the environment).\n");
}

static bool parse_u64(const char *s, int base, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, xd_config *cfg)
{
    enum { O_SOCKET = 256, O_SOCKET_MODE, O_STATE, O_UID, O_GID, O_MECH, O_MODE, O_CAP, O_PROXY,
           O_MAX_SBX, O_MAX_EXEC, O_QUEUE, O_MAX_REQ, O_GRACE, O_TLS_LISTEN, O_TLS_CERT,
           O_TLS_KEY, O_TLS_CA, O_METRICS, O_MAX_CONN, O_WS_TOTAL, O_WS_TENANT, O_CONN_ID,
           O_REQ_ID, O_SBX_ID, O_HANDSHAKE, O_FRAME };
    static const struct option opts[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"socket-mode", required_argument, NULL, O_SOCKET_MODE},
        {"state-dir", required_argument, NULL, O_STATE},
        {"allow-uid", required_argument, NULL, O_UID},
        {"allow-gid", required_argument, NULL, O_GID},
        {"mechanism", required_argument, NULL, O_MECH},
        {"mode", required_argument, NULL, O_MODE},
        {"hard-cap-ms", required_argument, NULL, O_CAP},
        {"proxy-socket", required_argument, NULL, O_PROXY},
        {"max-sandboxes", required_argument, NULL, O_MAX_SBX},
        {"max-executions", required_argument, NULL, O_MAX_EXEC},
        {"queue", required_argument, NULL, O_QUEUE},
        {"max-request-bytes", required_argument, NULL, O_MAX_REQ},
        {"grace-seconds", required_argument, NULL, O_GRACE},
        {"tls-listen", required_argument, NULL, O_TLS_LISTEN},
        {"tls-cert", required_argument, NULL, O_TLS_CERT},
        {"tls-key", required_argument, NULL, O_TLS_KEY},
        {"tls-ca", required_argument, NULL, O_TLS_CA},
        {"metrics-listen", required_argument, NULL, O_METRICS},
        {"max-connections", required_argument, NULL, O_MAX_CONN},
        {"workspace-total-max", required_argument, NULL, O_WS_TOTAL},
        {"workspace-tenant-max", required_argument, NULL, O_WS_TENANT},
        {"max-connections-per-identity", required_argument, NULL, O_CONN_ID},
        {"max-requests-per-identity", required_argument, NULL, O_REQ_ID},
        {"max-sandboxes-per-identity", required_argument, NULL, O_SBX_ID},
        {"handshake-timeout-ms", required_argument, NULL, O_HANDSHAKE},
        {"frame-timeout-ms", required_argument, NULL, O_FRAME},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    uint64_t v;
    ph_diag d = {0};
    while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'h': usage(stdout); return -1;
        case 'V': printf("pinhole-execd %s\n", ph_version()); return -1;
        case O_SOCKET: cfg->socket_path = optarg; break;
        case O_SOCKET_MODE:
            ok = parse_u64(optarg, 8, 0777, &v);
            cfg->socket_mode = (unsigned)v;
            break;
        case O_STATE: cfg->state_dir = optarg; break;
        case O_UID:
            ok = cfg->allow_uid_count < XD_MAX_ALLOW && parse_u64(optarg, 10, UINT32_MAX - 1, &v);
            if (ok)
                cfg->allow_uid[cfg->allow_uid_count++] = (uid_t)v;
            break;
        case O_GID:
            ok = cfg->allow_gid_count < XD_MAX_ALLOW && parse_u64(optarg, 10, UINT32_MAX - 1, &v);
            if (ok)
                cfg->allow_gid[cfg->allow_gid_count++] = (gid_t)v;
            break;
        case O_MECH: ok = ph_sandbox_mechanism_from_name(optarg, &cfg->mechanism, &d) == PH_OK; break;
        case O_MODE: ok = ph_service_mode_from_name(optarg, &cfg->mode, &d) == PH_OK; break;
        case O_CAP:
            ok = parse_u64(optarg, 10, INT64_MAX, &v) && v > 0;
            cfg->hard_cap_ms = (int64_t)v;
            break;
        case O_PROXY: cfg->proxy_socket = optarg; break;
        case O_MAX_SBX:
            ok = parse_u64(optarg, 10, 1000000, &v) && v > 0;
            cfg->max_sandboxes = v;
            break;
        case O_MAX_EXEC:
            ok = parse_u64(optarg, 10, 1024, &v) && v > 0;
            cfg->max_executions = v;
            break;
        case O_QUEUE:
            ok = parse_u64(optarg, 10, 1000000, &v);
            cfg->queue = v;
            break;
        case O_MAX_REQ:
            ok = parse_u64(optarg, 10, UINT32_MAX, &v) && v >= 1024;
            cfg->max_request_bytes = v;
            break;
        case O_GRACE:
            ok = parse_u64(optarg, 10, 86400 * 365, &v);
            cfg->grace_seconds = (int64_t)v;
            break;
        case O_TLS_LISTEN: cfg->tls_listen = optarg; break;
        case O_TLS_CERT: cfg->tls_cert = optarg; break;
        case O_TLS_KEY: cfg->tls_key = optarg; break;
        case O_TLS_CA: cfg->tls_ca = optarg; break;
        case O_METRICS: cfg->metrics_listen = optarg; break;
        case O_MAX_CONN:
            ok = parse_u64(optarg, 10, 1000000, &v) && v > 0;
            cfg->max_connections = v;
            break;
        case O_WS_TOTAL:
            ok = parse_u64(optarg, 10, UINT64_MAX, &v) && v > 0;
            cfg->workspace_total_max_bytes = v;
            break;
        case O_WS_TENANT:
            ok = parse_u64(optarg, 10, UINT64_MAX, &v) && v > 0;
            cfg->workspace_tenant_max_bytes = v;
            break;
        case O_CONN_ID:
        case O_REQ_ID:
        case O_SBX_ID:
            ok = parse_u64(optarg, 10, 1000000, &v) && v > 0;
            *(c == O_CONN_ID  ? &cfg->max_connections_per_identity
              : c == O_REQ_ID ? &cfg->max_requests_per_identity
                              : &cfg->max_sandboxes_per_identity) = v;
            break;
        case O_HANDSHAKE:
        case O_FRAME:
            ok = parse_u64(optarg, 10, 3600 * 1000, &v) && v >= 100;
            *(c == O_HANDSHAKE ? &cfg->handshake_timeout_ms : &cfg->frame_timeout_ms) =
                (int64_t)v;
            break;
        default: usage(stderr); return XD_EXIT_USAGE;
        }
        if (!ok) {
            fprintf(stderr, "pinhole-execd: bad value for --%s: '%s'%s%s\n",
                    opts[c - O_SOCKET].name, optarg, d.message[0] ? ": " : "", d.message);
            return XD_EXIT_USAGE;
        }
    }
    /* A fair share defaults to half of the daemon's, at least one. */
    size_t *share[] = {&cfg->max_connections_per_identity, &cfg->max_requests_per_identity,
                       &cfg->max_sandboxes_per_identity};
    size_t whole[] = {cfg->max_connections, cfg->max_executions, cfg->max_sandboxes};
    for (size_t i = 0; i < 3; i++)
        if (*share[i] == 0)
            *share[i] = whole[i] / 2 > 0 ? whole[i] / 2 : 1;
    if (optind < argc) {
        fprintf(stderr, "pinhole-execd: unexpected argument '%s'\n", argv[optind]);
        return XD_EXIT_USAGE;
    }
    if (cfg->socket_path == NULL || cfg->state_dir == NULL ||
        cfg->allow_uid_count + cfg->allow_gid_count == 0) {
        fprintf(stderr, "pinhole-execd: --socket, --state-dir and at least one --allow-uid or "
                        "--allow-gid are required\n");
        return XD_EXIT_USAGE;
    }
    int tls = !!cfg->tls_listen + !!cfg->tls_cert + !!cfg->tls_key + !!cfg->tls_ca;
    if (tls != 0 && tls != 4) {
        fprintf(stderr, "pinhole-execd: --tls-listen, --tls-cert, --tls-key and --tls-ca go "
                        "together\n");
        return XD_EXIT_USAGE;
    }
    if (cfg->state_dir[0] != '/' || cfg->socket_path[0] != '/' ||
        (cfg->proxy_socket && cfg->proxy_socket[0] != '/')) {
        fprintf(stderr, "pinhole-execd: --socket, --state-dir and --proxy-socket must be "
                        "absolute paths\n");
        return XD_EXIT_USAGE;
    }
    return 0;
}

/* The daemon holds no secret: a tier-0 name (or a credential-carrying value)
 * in its own environment refuses the start, naming every one. The
 * service's own settings (PINHOLE_RUNSC, ...) are names it knows. */
static int check_environment(void)
{
    json_t *names = json_array();
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (eq == NULL || eq == *e)
            continue;
        char *name = strndup(*e, (size_t)(eq - *e));
        if (name && ((ph_env_name_is_credential(name) && !ph_env_name_is_setting(name)) ||
                     ph_env_value_is_credential(name, eq + 1)))
            json_array_append_new(names, json_string(name));
        free(name);
    }
    if (json_array_size(names) == 0) {
        json_decref(names);
        return 0;
    }
    json_t *x = json_pack("{s:o, s:s}", "names", names, "fix",
                          "start the daemon with an environment that holds no credential");
    xd_log("error", "credential_in_environment", x);
    json_decref(x);
    return XD_EXIT_REFUSED;
}

/* One daemon per state directory. At start the daemon destroys every
 * environment the directory holds (recover, below), so a second daemon
 * started on the directory of a running one would destroy that one's live
 * sandboxes, commands and all. An exclusive flock on <state>/execd.lock,
 * taken before recovery and held for the daemon's life (the descriptor is
 * never closed; the kernel drops the lock when the daemon exits, however it
 * dies), refuses the second one instead. The lock is a file of its own: the
 * directory itself is flocked briefly by every create (the workspace caps).
 * A clean stop removes the file last, once every sandbox is destroyed
 * (unlock_state_dir), so a stopped daemon's state directory is empty. */
static int g_state_lock_dir_fd = -1;

/* How long a start waits for what a dead daemon held to be released
 * before it refuses: the state directory's lock, the --socket, a TCP
 * port. A daemon killed while one of its threads was starting a tool
 * (ph_cli_spawn, the fake mechanism's clone) leaves a child between fork
 * and exec. That child holds copies of all the daemon's descriptors, the
 * lock's and the listening sockets' included (O_CLOEXEC drops them only at
 * exec), until it execs or dies a moment later: it dies with the daemon
 * (PR_SET_PDEATHSIG) or exits on seeing its parent gone, and what it
 * execs gets no descriptor above 2. A restart at once would take it for a
 * second daemon (seen holding them up to 177 ms on a loaded host). A second daemon
 * holds them for good, and is refused once the wait is over.
 * docs/execd.md states the bound. */
#define XD_RELEASE_WAIT_MS 3000

/* One step of that wait, for what (a name for the log) held since the
 * start's first attempt at since_ms: sleeps a while (10 ms, doubling up to
 * 200 ms: a release is usually seen within a few steps, and a live holder
 * probed by connect is not flooded) and returns true, or returns false at
 * once when the bound has passed. *step is 0 before the first call; the
 * first logs waiting_for_release. */
static bool wait_for_release(const char *what, int64_t since_ms, int *step)
{
    int64_t left = since_ms + XD_RELEASE_WAIT_MS - ph_monotonic_ms();
    if (left <= 0)
        return false;
    if (*step == 0) {
        json_t *x = json_pack("{s:s, s:i}", "what", what, "up_to_ms", XD_RELEASE_WAIT_MS);
        xd_log("warning", "waiting_for_release", x);
        json_decref(x);
    }
    int64_t ms = (int64_t)10 << (*step < 5 ? *step : 5);
    (*step)++;
    ms = ms > 200 ? 200 : ms;
    struct timespec ts = {0, (long)(ms < left ? ms : left) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return true;
}

/* The state directory's refusal: the reason in the log, 78 for a directory
 * the service refuses, 71 for an OS error. */
static int state_dir_refused(ph_status st, const char *why)
{
    json_t *x = json_pack("{s:s}", "error", why);
    xd_log("error", "state_dir_refused", x);
    json_decref(x);
    return st == PH_E_DENIED || st == PH_E_INVAL ? XD_EXIT_REFUSED : XD_EXIT_OS;
}

static int lock_state_dir(const char *dir)
{
    /* Opened through the service's verified walk (made 0700 if missing,
     * ours, no symlink on the way, no ancestor others can write) before
     * anything is written there: a directory the service refuses gets no
     * owner claim and no lock file, wherever a symlink or another user's
     * directory on the way would have put them. */
    ph_diag d = {0};
    char *canon = NULL;
    int dfd = -1, fd = -1, rc = -1, err = 0;
    ph_status opened = ph_state_dir_open(dir, &dfd, &canon, &d);
    free(canon);
    if (opened != PH_OK)
        return state_dir_refused(opened, d.message);
    /* The directory is claimed first (<state>/owner): one the
     * pinhole-sandbox CLI keeps environments in is refused before recovery
     * could destroy them, and before execd.lock is made (which marks a
     * directory without an owner file as a daemon's). */
    ph_status claim = ph_state_claim(dfd, PH_STATE_OWNER_EXECD, &d);
    if (claim != PH_OK) {
        close(dfd);
        bool owned = strncmp(d.message, "state_dir_owned:", 16) == 0;
        json_t *x = json_pack("{s:s, s:s}", "error", d.message, "fix",
                              owned ? "the pinhole-sandbox CLI keeps environments in this state "
                                      "directory: give the daemon a --state-dir of its own"
                                    : "see error");
        xd_log("error", owned ? "state_dir_owned" : "state_dir_refused", x);
        json_decref(x);
        return claim == PH_E_IO || claim == PH_E_NOMEM ? XD_EXIT_OS : XD_EXIT_REFUSED;
    }
    /* The lock held must be on the file the name holds once it is held: a
     * daemon stopping unlinks the file it locked (unlock_state_dir), so one
     * that opened that file just before the unlink gets its lock once the
     * stopping daemon exits, on a file no longer in the directory, while a
     * third daemon creates and locks a new one: two daemons on one state
     * directory. Such a lock is dropped and the file the name now holds is
     * locked instead. A lock held is waited for, up to XD_RELEASE_WAIT_MS:
     * a killed daemon's child between fork and exec holds it a moment. */
    int64_t since = ph_monotonic_ms();
    int step = 0;
    for (int tries = 0; dfd >= 0 && tries < 100;) {
        fd = openat(dfd, "execd.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            err = errno;
            break;
        }
        while ((rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR)
            ;
        err = errno;
        if (rc != 0 && err == EWOULDBLOCK && wait_for_release("execd.lock", since, &step)) {
            close(fd);
            fd = -1;
            continue;
        }
        struct stat held, named;
        if (rc != 0 ||
            (fstat(fd, &held) == 0 &&
             fstatat(dfd, "execd.lock", &named, AT_SYMLINK_NOFOLLOW) == 0 &&
             held.st_dev == named.st_dev && held.st_ino == named.st_ino))
            break;
        close(fd); /* unlinked or replaced since it was opened */
        fd = -1;
        rc = -1;
        err = EAGAIN;
        tries++;
    }
    if (fd < 0 && dfd >= 0)
        close(dfd);
    if (fd < 0) {
        fprintf(stderr, "pinhole-execd: cannot open the state directory's lock: %s\n",
                strerror(err));
        return XD_EXIT_OS;
    }
    if (rc == 0) {
        g_state_lock_dir_fd = dfd;
        return 0; /* fd stays open: the lock lasts as long as the daemon */
    }
    close(fd);
    close(dfd);
    if (err != EWOULDBLOCK) {
        fprintf(stderr, "pinhole-execd: cannot lock the state directory: %s\n", strerror(err));
        return XD_EXIT_OS;
    }
    json_t *x = json_pack("{s:I, s:s}", "waited_ms", (json_int_t)(ph_monotonic_ms() - since),
                          "fix",
                          "another pinhole-execd serves this state directory: give each daemon "
                          "its own --state-dir");
    xd_log("error", "state_dir_in_use", x);
    json_decref(x);
    return XD_EXIT_REFUSED;
}

/* After a clean stop (every sandbox destroyed): the claim goes when no
 * environment is left, then the lock's file, the lock itself with the
 * process, so the directory is left empty. */
static void unlock_state_dir(void)
{
    if (g_state_lock_dir_fd >= 0) {
        ph_state_release(g_state_lock_dir_fd, PH_STATE_OWNER_EXECD);
        (void)unlinkat(g_state_lock_dir_fd, "execd.lock", 0);
    }
}

/* The workspace is a cache (decision 1): whatever a previous run left is
 * destroyed, never resumed, whatever moment it died at (each environment's
 * intent record names what it may have made). A state directory the
 * service refuses (a symlinked ancestor, a wrong owner or mode) refuses
 * the start: every request would fail, and nothing could be recovered. */
static int recover(const xd_config *cfg)
{
    ph_service_config sc = {.mode = cfg->mode, .mechanism = cfg->mechanism,
                            .hard_cap_ms = cfg->hard_cap_ms, .state_dir = cfg->state_dir,
                            .log = xd_sandbox_log,
                            .workspace_total_max_bytes = cfg->workspace_total_max_bytes,
                            .workspace_tenant_max_bytes = cfg->workspace_tenant_max_bytes};
    ph_execution_service *svc = NULL;
    ph_diag d = {0};
    ph_status st = ph_execution_service_open(&sc, &svc, &d);
    if (st != PH_OK)
        return state_dir_refused(st, d.message);
    DIR *dir = opendir(cfg->state_dir);
    struct dirent *de;
    size_t destroyed = 0, left = 0;
    while (dir && (de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, "env-", 4) != 0)
            continue;
        if (ph_environment_recover(svc, de->d_name, &d) == PH_OK) {
            destroyed++;
        } else {
            json_t *x = json_pack("{s:s, s:s}", "environment", de->d_name, "error", d.message);
            xd_log("warning", "recovery_left_behind", x);
            json_decref(x);
            left++;
        }
    }
    if (dir)
        closedir(dir);
    ph_execution_service_close(&svc);
    json_t *x = json_pack("{s:I, s:I}", "destroyed", (json_int_t)destroyed, "left",
                          (json_int_t)left);
    xd_log("info", "recovered_destroyed", x);
    json_decref(x);
    return 0;
}

/* Whether path (absolute) and each directory above it pass the socket
 * directory rule (docs/execd.md, "Who serves the socket"): every directory
 * and symlink on the way is owned by root or this daemon's euid, and none
 * is writable by group or others unless sticky; the last, when shared, is
 * also the daemon's own. Checked with lstat, a component at a time, so a
 * symlink is judged itself (its target is checked through the realpath
 * walk). The first prefix that fails goes in bad. */
static bool socket_dir_chain_ok(const char *path, char *bad, size_t badcap)
{
    char prefix[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof prefix || path[0] != '/')
        return snprintf(bad, badcap, "%s", path), false;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/')
            continue;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        struct stat st;
        bool last = i == n, ok = lstat(i == 1 && n == 1 ? "/" : prefix, &st) == 0;
        bool shared = ok && !S_ISLNK(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
        ok = ok && (st.st_uid == 0 || st.st_uid == geteuid()) &&
             (!shared || ((st.st_mode & S_ISVTX) && (!last || st.st_uid == geteuid())));
        if (!ok) {
            snprintf(bad, badcap, "%s", prefix);
            return false;
        }
    }
    struct stat root;
    return lstat("/", &root) == 0 && (root.st_uid == 0 || root.st_uid == geteuid()) &&
           ((root.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (root.st_mode & S_ISVTX));
}

static int check_socket_dir(const char *socket_path)
{
    char dir[PATH_MAX], real[PATH_MAX], bad[PATH_MAX] = "/";
    const char *slash = strrchr(socket_path, '/');
    size_t n = slash ? (size_t)(slash - socket_path) : 0;
    if (n >= sizeof dir)
        return 0; /* too long for a socket anyway: bind_socket says so */
    memcpy(dir, socket_path, n);
    dir[n] = '\0';
    const char *given = slash == NULL ? "." : n == 0 ? "/" : dir;
    if (realpath(given, real) == NULL) {
        fprintf(stderr, "pinhole-execd: the --socket directory: %s\n", strerror(errno));
        return XD_EXIT_OS;
    }
    /* A relative path is reached through the working directory's inode:
     * its real chain is the one that matters. */
    if ((given[0] == '/' && !socket_dir_chain_ok(given, bad, sizeof bad)) ||
        !socket_dir_chain_ok(real, bad, sizeof bad)) {
        json_t *x = json_pack("{s:s, s:s, s:s}", "error", "socket_dir_untrusted", "path", bad, "fix",
                              "put --socket in a directory that root or this daemon's user owns "
                              "and only they can write, under such directories "
                              "(e.g. /run/pinhole-execd, mode 0755)");
        xd_log("error", "startup_refused", x);
        json_decref(x);
        return XD_EXIT_REFUSED;
    }
    return 0;
}

/* The unix socket, for its removal at stop (ph_unix_listen_unlink). */
static ph_unix_listener g_socket = {.fd = -1};

/* Listens on --socket (ph_unix_listen: bound under a temporary name and
 * renamed into place, so a client that sees the path can connect). A
 * socket already there is replaced only when nothing accepts on it (a
 * killed daemon's); one another daemon serves, whatever state directory it
 * serves, is refused (exit 78, socket_in_use): replacing it would cut that
 * daemon's clients off, once it has been served for XD_RELEASE_WAIT_MS (a
 * killed daemon's child between fork and exec holds its socket a moment).
 * A symlink or any other file there is refused too. */
static int bind_socket(const xd_config *cfg, int *out)
{
    ph_diag d = {0};
    int64_t since = ph_monotonic_ms();
    int step = 0;
    ph_status st;
    while ((st = ph_unix_listen(cfg->socket_path, cfg->socket_mode, 128, &g_socket, &d)) ==
               PH_E_DENIED &&
           wait_for_release("socket", since, &step))
        ;
    if (st == PH_OK) {
        *out = g_socket.fd;
        return 0;
    }
    if (st == PH_E_LIMIT) {
        fprintf(stderr, "pinhole-execd: --socket path is too long: %s\n", d.message);
        return XD_EXIT_USAGE;
    }
    bool in_use = st == PH_E_DENIED, other = st == PH_E_INVAL;
    json_t *x = json_pack("{s:s, s:s, s:I, s:s}", "path", cfg->socket_path, "error", d.message,
                          "waited_ms", (json_int_t)(ph_monotonic_ms() - since), "fix",
                          in_use ? "another daemon serves this --socket: give each daemon a "
                                   "socket of its own, or stop that one first"
                          : other ? "--socket must name a socket or nothing: remove what is "
                                    "there"
                                  : "see error");
    xd_log("error", in_use ? "socket_in_use" : other ? "socket_not_a_socket" : "socket_failed", x);
    json_decref(x);
    return in_use || other ? XD_EXIT_REFUSED : XD_EXIT_OS;
}

/* A worker's certificate must say it is for client authentication: an
 * extended key usage with clientAuth. One without any EKU, or a server's,
 * issued by the same CA is not a worker identity (OpenSSL's client
 * purpose check alone accepts a certificate with no EKU). */
static int verify_client(int ok, X509_STORE_CTX *x)
{
    if (!ok || X509_STORE_CTX_get_error_depth(x) != 0)
        return ok;
    X509 *cert = X509_STORE_CTX_get_current_cert(x);
    if (cert == NULL || !(X509_get_extension_flags(cert) & EXFLAG_XKUSAGE) ||
        !(X509_get_extended_key_usage(cert) & XKU_SSL_CLIENT)) {
        X509_STORE_CTX_set_error(x, X509_V_ERR_INVALID_PURPOSE);
        return 0;
    }
    return 1;
}

/* The TLS context: TLS 1.2 or later, our chain and key, and client
 * certificates required and verified against the CA. The key is the one
 * secret of the daemon's own: it must not be readable by anyone else. */
static int tls_context(const xd_config *cfg, SSL_CTX **out)
{
    struct stat st;
    if (stat(cfg->tls_key, &st) != 0 || (st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
        json_t *x = json_pack("{s:s}", "fix", "the --tls-key file must be ours, mode 0600");
        xd_log("error", "tls_key_exposed", x);
        json_decref(x);
        return XD_EXIT_REFUSED;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    bool ok = ctx && SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
              SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) == 1 &&
              SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) == 1 &&
              SSL_CTX_check_private_key(ctx) == 1 &&
              SSL_CTX_load_verify_locations(ctx, cfg->tls_ca, NULL) == 1;
    STACK_OF(X509_NAME) *cas = ok ? SSL_load_client_CA_file(cfg->tls_ca) : NULL;
    if (!ok || cas == NULL) {
        char reason[256] = "";
        ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
        json_t *x = json_pack("{s:s}", "error", reason);
        xd_log("error", "tls_configuration", x);
        json_decref(x);
        SSL_CTX_free(ctx);
        return XD_EXIT_REFUSED;
    }
    SSL_CTX_set_client_CA_list(ctx, cas);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_client);
    /* libevent 2.1 + OpenSSL 3: a peer closing without close_notify. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    *out = ctx;
    return 0;
}

/* Binds host:port ("[v6]:port" for IPv6 literals; numeric hosts only) and
 * logs the port the kernel gave as event. */
static int bind_tcp(const char *spec, const char *event, int *out)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    size_t hl = colon ? (size_t)(colon - spec) : 0;
    if (colon == NULL || hl == 0 || hl >= sizeof host) {
        fprintf(stderr, "pinhole-execd: --tls-listen wants HOST:PORT\n");
        return XD_EXIT_USAGE;
    }
    memcpy(host, spec, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        fprintf(stderr, "pinhole-execd: --tls-listen: not a numeric address and port\n");
        return XD_EXIT_USAGE;
    }
    /* A port in use is waited for, up to XD_RELEASE_WAIT_MS: a killed
     * daemon's child between fork and exec holds its listener a moment. */
    int64_t since = ph_monotonic_ms();
    int step = 0, fd, err;
    bool ok;
    for (;;) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1;
        ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
             bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0;
        err = errno;
        if (ok || err != EADDRINUSE || !wait_for_release(spec, since, &step))
            break;
        close(fd);
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (!ok || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
        fprintf(stderr, "pinhole-execd: cannot listen on %s: %s\n", spec,
                strerror(ok ? errno : err));
        if (fd >= 0)
            close(fd);
        return XD_EXIT_OS;
    }
    unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    json_t *x = json_pack("{s:s, s:i}", "address", host, "port", (int)port);
    xd_log("info", event, x);
    json_decref(x);
    *out = fd;
    return 0;
}

int main(int argc, char **argv)
{
    xd_config cfg = {
        .socket_mode = 0660,
        .mechanism = PH_MECHANISM_GVISOR,
        .mode = PH_SERVICE_MODE_PRODUCTION,
        .hard_cap_ms = 600000,
        .max_sandboxes = 64,
        .max_executions = 4,
        .queue = 16,
        .max_request_bytes = PH_EXECD_DEFAULT_MAX_REQUEST,
        .max_connections = 256,
        .grace_seconds = 60,
        .handshake_timeout_ms = 10000,
        .frame_timeout_ms = 30000,
    };
    int rc = parse_args(argc, argv, &cfg);
    if (rc != 0)
        return rc < 0 ? XD_EXIT_OK : rc;
    /* Frames, parsed requests and answers are megabytes each: a fixed mmap
     * threshold (glibc raises it as big blocks are freed) gives each back
     * to the system when freed, so what the daemon holds is what it uses
     * (docs/execd.md section 6). */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = check_environment()) != 0)
        return rc;
    ph_diag d = {0};
    if (ph_sandbox_startup_check(cfg.mode, cfg.mechanism, &d) != PH_OK) {
        json_t *x = json_pack("{s:s}", "error", d.message);
        xd_log("error", "startup_refused", x);
        json_decref(x);
        return XD_EXIT_REFUSED;
    }
    if (ph_sandbox_mechanism_available(cfg.mechanism, &d) != PH_OK) {
        json_t *x = json_pack("{s:s, s:s}", "mechanism", ph_sandbox_mechanism_name(cfg.mechanism),
                              "error", d.message);
        xd_log("error", "mechanism_unavailable", x);
        json_decref(x);
        return XD_EXIT_UNAVAILABLE;
    }
    if ((rc = check_socket_dir(cfg.socket_path)) != 0 || (rc = lock_state_dir(cfg.state_dir)) != 0)
        return rc;
    if (evthread_use_pthreads() != 0) {
        fprintf(stderr, "pinhole-execd: cannot initialise libevent threads\n");
        return XD_EXIT_OS;
    }
    if ((rc = recover(&cfg)) != 0)
        return rc;
    /* From the moment a socket exists a supervisor may stop the daemon:
     * SIGTERM and SIGINT wait (blocked) until the loop handles them
     * (xd_serve unblocks them then), rather than killing it unclean. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, NULL);
    SSL_CTX *tls_ctx = NULL;
    int tls_fd = -1;
    if (cfg.tls_listen && ((rc = tls_context(&cfg, &tls_ctx)) != 0 ||
                           (rc = bind_tcp(cfg.tls_listen, "listening_tls", &tls_fd)) != 0)) {
        SSL_CTX_free(tls_ctx);
        return rc;
    }
    int fd = -1, admin_fd = -1;
    if ((cfg.metrics_listen &&
         (rc = bind_tcp(cfg.metrics_listen, "listening_metrics", &admin_fd)) != 0) ||
        (rc = bind_socket(&cfg, &fd)) != 0) {
        SSL_CTX_free(tls_ctx);
        if (tls_fd >= 0)
            close(tls_fd);
        if (admin_fd >= 0)
            close(admin_fd);
        return rc;
    }
    rc = xd_serve(&cfg, fd, tls_fd, tls_ctx, admin_fd);
    SSL_CTX_free(tls_ctx);
    /* Only while the path is still the socket bound above: a daemon that
     * took the path since (after this one stopped listening) keeps it. */
    (void)ph_unix_listen_unlink(&g_socket);
    if (rc == XD_EXIT_OK)
        unlock_state_dir();
    return rc;
}
