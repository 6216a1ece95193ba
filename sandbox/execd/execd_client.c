/* execd_client.c - the ports of pinhole/execd_client.h over pinhole-execd's
 * socket: each call is one request frame and one response frame
 * (docs/execd.md) on the service's connection, under its mutex. Every
 * request is built from the operation table (wire_ops.c) that the daemon
 * checks it against. */
#include "pinhole/execd_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <netdb.h>
#include <openssl/err.h>
#include "pinhole/io.h"
#include <openssl/ssl.h>

#include "execd-int.h"

struct ph_execd_service {
    int fd;
    SSL_CTX *ctx; /* TLS only */
    SSL *ssl;
    pthread_mutex_t mu;
    ph_sandbox_log_fn *log;
    void *log_ctx;
    ph_sandbox_mechanism mechanism;
};

struct ph_execd_environment {
    ph_execd_service *svc;
    char id[PH_EXECD_ID_MAX];
    char tenant[129];
    bool of_lease;
};

struct ph_execd_workspace {
    ph_execd_service *svc;
    char id[PH_EXECD_ID_MAX];
    char tenant[129];
};

struct ph_execd_lease {
    ph_execd_service *svc;
    char handle[PH_EXECD_ID_MAX];
    char tenant[129];
    ph_execd_environment *env; /* the last one the service gave, owned */
};

/* ---- one request ---- */

/* One frame on svc's connection (svc->mu held). */
static int recv_locked(ph_execd_service *svc, json_t **resp)
{
    if (svc->ssl != NULL)
        return ph_wire_recv_io(ph_wire_ssl_read, svc->ssl, PH_EXECD_MAX_RESPONSE_BYTES, resp);
    return ph_wire_recv(svc->fd, PH_EXECD_MAX_RESPONSE_BYTES, resp);
}

/* Handles one intermediate frame of a streamed response (one without "ok");
 * false ends the exchange as malformed. Runs with svc->mu held. */
typedef bool frame_fn(const void *ctx, const json_t *frame);

/* With svc->mu held: sends req (a new reference, consumed) and returns the
 * response of an ok call (new reference), or NULL with the status in *st
 * and the message in diag. Frames before the response (those without "ok")
 * go to on_frame; without one, such a frame is a protocol error. */
static json_t *exchange_locked(ph_execd_service *svc, json_t *req, frame_fn *on_frame,
                               const void *ctx, ph_status *st, ph_diag *diag)
{
    if (req == NULL) {
        *st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        return NULL;
    }
    json_t *resp = NULL;
    int rc = -1;
    if (svc->ssl != NULL)
        (void)ph_wire_send_io(ph_wire_ssl_write, svc->ssl, req);
    else if (svc->fd >= 0)
        (void)ph_wire_send(svc->fd, req);
    /* Receive even when the send failed: the service may have answered (and
     * closed) first, e.g. `unauthenticated`. */
    while (svc->ssl != NULL || svc->fd >= 0) {
        rc = recv_locked(svc, &resp);
        if (rc != 0 || json_object_get(resp, "ok") != NULL)
            break;
        bool handled = on_frame != NULL && on_frame(ctx, resp);
        json_decref(resp);
        resp = NULL;
        if (!handled) {
            /* The rest of the stream cannot be told from the next response. */
            if (svc->fd >= 0)
                shutdown(svc->fd, SHUT_RDWR);
            rc = -1;
            errno = EPROTO;
            break;
        }
    }
    int saved = errno;
    ph_wire_op_id op;
    bool known = ph_wire_op_find(ph_wire_str(req, "op"), &op);
    json_decref(req);
    if (rc != 0) {
        *st = ph_diag_set(diag, PH_E_IO, 0, "pinhole-execd connection: %s", strerror(saved));
        return NULL;
    }
    /* An answer is read only once it has what the operation's row says. */
    const char *bad = json_is_true(json_object_get(resp, "ok")) && known
                          ? ph_wire_reply_check(op, resp)
                          : NULL;
    if (bad != NULL) {
        *st = ph_diag_set(diag, PH_E_FORMAT, 0, "pinhole-execd answered %s without a valid %s",
                          ph_wire_ops[op].name, bad);
        json_decref(resp);
        return NULL;
    }
    if (json_is_true(json_object_get(resp, "ok"))) {
        *st = PH_OK;
        return resp;
    }
    const char *code = ph_wire_str(resp, "error");
    const char *msg = ph_wire_str(resp, "message");
    ph_status s = ph_wire_error_status(code);
    if (code && (strcmp(code, "busy") == 0 || strcmp(code, "too_large") == 0 ||
                 strcmp(code, "unauthenticated") == 0 || strcmp(code, "shutting_down") == 0))
        *st = ph_diag_set(diag, s, 0, "%s: %s", code, msg ? msg : "");
    else
        *st = ph_diag_set(diag, s, 0, "%s", msg ? msg : (code ? code : "error"));
    json_decref(resp);
    return NULL;
}

/* exchange_locked under svc->mu: one request and its response, whole. */
static json_t *call_streamed(ph_execd_service *svc, json_t *req, frame_fn *on_frame, const void *ctx,
                             ph_status *st, ph_diag *diag)
{
    pthread_mutex_lock(&svc->mu);
    json_t *resp = exchange_locked(svc, req, on_frame, ctx, st, diag);
    pthread_mutex_unlock(&svc->mu);
    return resp;
}

static json_t *call(ph_execd_service *svc, json_t *req, ph_status *st, ph_diag *diag)
{
    return call_streamed(svc, req, NULL, NULL, st, diag);
}

static void forward_warnings(ph_execd_service *svc, const json_t *resp)
{
    json_t *w = json_object_get(resp, "warnings");
    for (size_t i = 0; json_is_array(w) && i < json_array_size(w); i++) {
        char *line = json_dumps(json_array_get(w, i), JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (line == NULL)
            continue;
        if (svc->log)
            svc->log(svc->log_ctx, line);
        else
            fprintf(stderr, "%s\n", line);
        free(line);
    }
}

/* ---- the service ---- */

static int connect_to(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sun.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Who serves the socket, checked before a byte is sent (a create carries
 * a grant token): whoever could put a socket at the path could be serving
 * it. The peer (SO_PEERCRED) must be uid $PINHOLE_EXECD_UID when that is
 * set; otherwise root or this process's own effective uid, never a third
 * uid (docs/execd.md, "Who serves the socket"). */
static ph_status check_server(int fd, ph_diag *diag)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "SO_PEERCRED: %s", strerror(errno));
    const char *want = getenv(PH_EXECD_UID_ENV);
    if (want != NULL && want[0] != '\0') {
        char *end;
        errno = 0;
        unsigned long v = want[0] >= '0' && want[0] <= '9' ? strtoul(want, &end, 10) : 0;
        if (want[0] < '0' || want[0] > '9' || errno != 0 || *end != '\0' || v > UINT32_MAX - 1)
            return ph_diag_set(diag, PH_E_INVAL, 0, "$%s must be a uid", PH_EXECD_UID_ENV);
        if (cred.uid == (uid_t)v)
            return PH_OK;
    } else if (cred.uid == 0 || cred.uid == geteuid()) {
        return PH_OK;
    }
    return ph_diag_set(diag, PH_E_DENIED, 0,
                       "execd_peer_untrusted: the socket is served by uid %u, not the service's "
                       "($%s, else root or this process's own uid)",
                       (unsigned)cred.uid, PH_EXECD_UID_ENV);
}

static ph_execd_service *svc_new(const ph_service_config *config)
{
    ph_execd_service *svc = calloc(1, sizeof *svc);
    if (svc == NULL)
        return NULL;
    pthread_mutex_init(&svc->mu, NULL);
    svc->fd = -1;
    svc->log = config->log;
    svc->log_ctx = config->log_ctx;
    svc->mechanism = config->mechanism;
    return svc;
}

static ph_status tls_fail(ph_execd_service **svc, ph_status st, const char *what, ph_diag *diag)
{
    char reason[256] = "";
    ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
    ph_execd_service_close(svc);
    return ph_diag_set(diag, st, 0, "%s: %s", what, reason[0] ? reason : "refused");
}

/* hello on a connected svc; closes it on failure. */
static ph_status svc_hello(ph_execd_service **svcp, const ph_service_config *config,
                           ph_execd_service **out, ph_diag *diag)
{
    ph_status st;
    ph_execd_service *svc = *svcp;
    ph_wire_args a = {.f[PH_F_HARD_CAP_MS] = PH_WV_INT(config->hard_cap_ms)};
    json_t *resp = call(svc, ph_wire_request(PH_OP_HELLO, &a), &st, diag);
    const char *mech = ph_wire_str(resp, "mechanism");
    if (resp != NULL && strcmp(mech, ph_sandbox_mechanism_name(config->mechanism)) != 0)
        st = ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "pinhole-execd runs %s, not %s", mech,
                         ph_sandbox_mechanism_name(config->mechanism));
    json_decref(resp);
    /* TLS 1.3: the service checks the client certificate after the client's
     * side of the handshake returned, so a refusal (an alert, or the session
     * closed) shows at this first exchange. */
    if (st == PH_E_IO && svc->ssl != NULL)
        return tls_fail(svcp, PH_E_DENIED, "TLS: the service refused this worker", diag);
    if (st != PH_OK) {
        ph_execd_service_close(svcp);
        return st;
    }
    *out = svc;
    *svcp = NULL;
    return PH_OK;
}

ph_status ph_execd_service_open(const char *socket_path, const ph_service_config *config,
                                ph_execd_service **out, ph_diag *diag)
{
    if (socket_path == NULL || config == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_execd_service_open: NULL argument");
    *out = NULL;
    if (config->hard_cap_ms <= 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "the service hard cap must be > 0 ms");
    ph_execd_service *svc = svc_new(config);
    if (svc == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    svc->fd = connect_to(socket_path);
    if (svc->fd < 0) {
        int saved = errno;
        ph_execd_service_close(&svc);
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "cannot reach pinhole-execd: %s",
                           strerror(saved));
    }
    ph_status st = check_server(svc->fd, diag);
    if (st != PH_OK) {
        ph_execd_service_close(&svc);
        return st;
    }
    return svc_hello(&svc, config, out, diag);
}

static int connect_tcp(const char *host, uint16_t port)
{
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, service, &hints, &ai) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

ph_status ph_execd_service_open_tls(const ph_execd_tls_config *tls,
                                    const ph_service_config *config, ph_execd_service **out,
                                    ph_diag *diag)
{
    if (tls == NULL || tls->host == NULL || tls->ca_file == NULL || config == NULL ||
        out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_execd_service_open_tls: NULL argument");
    *out = NULL;
    if (config->hard_cap_ms <= 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "the service hard cap must be > 0 ms");
    ph_execd_service *svc = svc_new(config);
    if (svc == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ERR_clear_error();
    svc->ctx = SSL_CTX_new(TLS_client_method());
    if (svc->ctx == NULL || SSL_CTX_set_min_proto_version(svc->ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_load_verify_locations(svc->ctx, tls->ca_file, NULL) != 1 ||
        (tls->cert_file &&
         (SSL_CTX_use_certificate_chain_file(svc->ctx, tls->cert_file) != 1 ||
          SSL_CTX_use_PrivateKey_file(svc->ctx, tls->key_file, SSL_FILETYPE_PEM) != 1)))
        return tls_fail(&svc, PH_E_INVAL, "TLS configuration", diag);
    SSL_CTX_set_verify(svc->ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(svc->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    svc->fd = connect_tcp(tls->host, tls->port);
    if (svc->fd < 0) {
        int saved = errno;
        ph_execd_service_close(&svc);
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "cannot reach pinhole-execd: %s",
                           strerror(saved));
    }
    /* A copy: SSL_set_tlsext_host_name takes a mutable pointer. */
    char name[256];
    snprintf(name, sizeof name, "%s", tls->server_name ? tls->server_name : tls->host);
    svc->ssl = SSL_new(svc->ctx);
    if (svc->ssl == NULL || SSL_set_fd(svc->ssl, svc->fd) != 1 ||
        SSL_set1_host(svc->ssl, name) != 1 ||
        SSL_set_tlsext_host_name(svc->ssl, name) != 1)
        return tls_fail(&svc, PH_E_NOMEM, "TLS", diag);
    if (SSL_connect(svc->ssl) != 1)
        return tls_fail(&svc, PH_E_DENIED, "TLS handshake", diag);
    return svc_hello(&svc, config, out, diag);
}

ph_status ph_execd_service_open_default(const ph_service_config *config, ph_execd_service **out,
                                        ph_diag *diag)
{
    const char *path = getenv(PH_EXECD_SOCKET_ENV);
    if (path == NULL || *path == '\0')
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "%s is not set", PH_EXECD_SOCKET_ENV);
    return ph_execd_service_open(path, config, out, diag);
}

void ph_execd_service_close(ph_execd_service **svc)
{
    if (svc == NULL || *svc == NULL)
        return;
    if ((*svc)->ssl) {
        (void)SSL_shutdown((*svc)->ssl);
        SSL_free((*svc)->ssl);
    }
    SSL_CTX_free((*svc)->ctx);
    if ((*svc)->fd >= 0)
        close((*svc)->fd);
    pthread_mutex_destroy(&(*svc)->mu);
    free(*svc);
    *svc = NULL;
}

ph_status ph_execd_mechanism_available(ph_sandbox_mechanism m, ph_diag *diag)
{
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT, .mechanism = m,
                             .hard_cap_ms = 1000};
    ph_execd_service *svc = NULL;
    ph_status st = ph_execd_service_open_default(&cfg, &svc, diag);
    ph_execd_service_close(&svc);
    return st == PH_OK ? PH_OK : PH_E_UNSUPPORTED;
}

/* ---- spec ---- */

/* Tier-1 values come from the worker's own environment. */
static const char *worker_getenv(const char *name)
{
    return getenv(name);
}

/* Tier 1 as the worker resolves it: the sandbox's own builder over the
 * worker's list and environment (warnings to the service's log), then only
 * the variables tier 2 does not synthesize. *out: the "passthrough" array
 * (new), or NULL without a passthrough file. */
static ph_status get_passthrough(ph_execd_service *svc, const ph_environment_spec *spec,
                                 json_t **out, ph_diag *diag)
{
    *out = NULL;
    if (spec->passthrough_file == NULL)
        return PH_OK;
    ph_env_inputs in = {.lease = spec->lease ? spec->lease : "",
                        .passthrough_file = spec->passthrough_file,
                        .getenv_fn = worker_getenv,
                        .log = svc->log,
                        .log_ctx = svc->log_ctx};
    ph_env_block env = {0};
    ph_status st = ph_env_build(&in, &env, diag);
    json_t *arr = st == PH_OK ? json_array() : NULL;
    for (size_t i = 0; arr && i < env.count; i++) {
        char *eq = strchr(env.vars[i], '=');
        *eq = '\0';
        ph_wire_args item = {.f = {[PH_F_PASS_NAME] = PH_WV_STR(env.vars[i]),
                                   [PH_F_PASS_VALUE] = PH_WV_BYTES(eq + 1, strlen(eq + 1))}};
        if (!ph_env_name_is_synthesized(env.vars[i]) &&
            json_array_append_new(arr, ph_wire_item(PH_F_PASSTHROUGH, &item)) != 0)
            st = PH_E_NOMEM;
        *eq = '=';
    }
    ph_env_block_clear(&env);
    if (arr && st == PH_OK) {
        *out = arr;
        return PH_OK;
    }
    json_decref(arr);
    return st == PH_OK ? ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory")
                       : ph_diag_set(diag, st, 0, "building tier 1: %s", ph_strerror(st));
}

/* environment.create or lease.open (approval_hold_seconds hold) of spec. */
static json_t *spec_request(ph_execd_service *svc, ph_wire_op_id op,
                            const ph_environment_spec *spec, int64_t hold, ph_status *st,
                            ph_diag *diag)
{
    json_t *pass;
    *st = get_passthrough(svc, spec, &pass, diag);
    if (*st != PH_OK)
        return NULL;
    const ph_sandbox_limits *l = &spec->limits;
    ph_wire_args a = {.f = {
                          [PH_F_MECHANISM] = PH_WV_STR(ph_sandbox_mechanism_name(spec->mechanism)),
                          [PH_F_LIMITS] = {.present = true},
                          [PH_F_MEMORY_BYTES] = PH_WV_INT(l->memory_bytes),
                          [PH_F_PIDS] = PH_WV_INT(l->pids),
                          [PH_F_CPU_MILLIS] = PH_WV_INT(l->cpu_millis),
                          [PH_F_WALL_CLOCK_MS] = PH_WV_INT(l->wall_clock_ms),
                          [PH_F_OUTPUT_BYTES] = PH_WV_INT(l->output_bytes),
                          [PH_F_TENANT] = PH_WV_STR(spec->tenant),
                          [PH_F_LEASE] = PH_WV_STR(spec->lease),
                          [PH_F_NETWORK] = {.present = spec->network.grant_token != NULL},
                          [PH_F_GRANT_TOKEN] = PH_WV_STR(spec->network.grant_token),
                          [PH_F_PROXY_PORT] = PH_WV_INT(spec->network.proxy_port),
                          [PH_F_PASSTHROUGH] = PH_WV_JSON(pass),
                          [PH_F_APPROVAL_HOLD] = PH_WV_INT(hold),
                      }};
    json_t *req = ph_wire_request(op, &a);
    json_decref(pass);
    if (req == NULL)
        *st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    return req;
}

static void copy_tenant(char dst[129], const char *tenant)
{
    snprintf(dst, 129, "%s", tenant ? tenant : "");
}

/* ---- ExecutionEnvironment ---- */

static ph_execd_environment *env_new(ph_execd_service *svc, const char *id, const char *tenant)
{
    ph_execd_environment *env = calloc(1, sizeof *env);
    if (env == NULL)
        return NULL;
    env->svc = svc;
    snprintf(env->id, sizeof env->id, "%s", id);
    copy_tenant(env->tenant, tenant);
    return env;
}

ph_status ph_execd_environment_create(ph_execd_service *svc, const ph_environment_spec *spec,
                                      ph_execd_environment **out, ph_diag *diag)
{
    if (svc == NULL || spec == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_environment_create: NULL argument");
    *out = NULL;
    ph_status st;
    json_t *req = spec_request(svc, PH_OP_ENV_CREATE, spec, 0, &st, diag);
    json_t *resp = req ? call(svc, req, &st, diag) : NULL;
    if (resp == NULL)
        return st;
    forward_warnings(svc, resp);
    *out = env_new(svc, ph_wire_str(resp, "environment"), spec->tenant);
    json_decref(resp);
    return *out ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
}

/* An operation on env that takes no more than its names. */
static json_t *env_request(const ph_execd_environment *env, ph_wire_op_id op)
{
    ph_wire_args a = {.f = {[PH_F_TENANT] = PH_WV_STR(env->tenant),
                            [PH_F_ENVIRONMENT] = PH_WV_STR(env->id)}};
    return ph_wire_request(op, &a);
}

const char *ph_execd_environment_id(const ph_execd_environment *env)
{
    return env->id;
}

/* One streamed piece of a command's output: {"output": "stdout"|"stderr",
 * "data_base64": ...} to cmd->on_output. */
static bool output_frame(const void *ctx, const json_t *frame)
{
    const ph_execution_command *cmd = ctx;
    const char *name = ph_wire_str(frame, "output");
    int stream = name == NULL                  ? 0
                 : strcmp(name, "stdout") == 0 ? PH_STREAM_STDOUT
                 : strcmp(name, "stderr") == 0 ? PH_STREAM_STDERR
                                               : 0;
    uint8_t *data = NULL;
    size_t len = 0;
    if (stream == 0 || ph_wire_get_bytes(frame, NULL, "data_base64", &data, &len) != 0)
        return false;
    if (len > 0)
        cmd->on_output(cmd->on_output_ctx, stream, data, len);
    free(data);
    return true;
}

ph_status ph_execd_environment_execute(ph_execd_environment *env, const ph_execution_command *cmd,
                                       ph_execution_result **out, ph_diag *diag)
{
    if (env == NULL || cmd == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_environment_execute: NULL argument");
    *out = NULL;
    if (cmd->argv == NULL || cmd->argv[0] == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "argv must have a non-empty argv[0]");
    if (cmd->stdin_data == NULL && cmd->stdin_len > 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "stdin_len without stdin_data");
    ph_wire_args a = {.f = {
                          [PH_F_TENANT] = PH_WV_STR(env->tenant),
                          [PH_F_ENVIRONMENT] = PH_WV_STR(env->id),
                          [PH_F_ARGV] = {.present = true, .argv = cmd->argv},
                          [PH_F_TIMEOUT_SECONDS] = PH_WV_INT(cmd->timeout_seconds),
                          [PH_F_RUN_BUDGET_MS] = PH_WV_INT(cmd->run_budget_ms),
                          [PH_F_CWD] = {.present = cmd->cwd != NULL, .data = cmd->cwd,
                                        .len = cmd->cwd ? strlen(cmd->cwd) : 0},
                          [PH_F_STDIN] = {.present = cmd->stdin_data != NULL,
                                          .data = cmd->stdin_data, .len = cmd->stdin_len},
                          [PH_F_STREAM_OUTPUT] = {.present = cmd->on_output != NULL, .i = 1},
                      }};
    json_t *req = cmd->stdin_len <= (size_t)INT32_MAX / 2
                      ? ph_wire_request(PH_OP_ENV_EXECUTE, &a)
                      : NULL;
    ph_status st;
    json_t *resp = call_streamed(env->svc, req, cmd->on_output ? output_frame : NULL,
                                 cmd, &st, diag);
    if (resp == NULL)
        return st;
    st = ph_wire_get_result(json_object_get(resp, "result"), out, diag);
    json_int_t dropped = json_integer_value(json_object_get(resp, "stream_dropped_bytes"));
    if (st == PH_OK && dropped > 0)
        (*out)->stream_dropped_bytes = (uint64_t)dropped;
    json_decref(resp);
    return st;
}

void ph_execd_environment_destroy(ph_execd_environment **envp)
{
    if (envp == NULL || *envp == NULL)
        return;
    ph_execd_environment *env = *envp;
    if (!env->of_lease) {
        ph_status st;
        json_decref(call(env->svc, env_request(env, PH_OP_ENV_DESTROY), &st, NULL));
        free(env);
    }
    *envp = NULL;
}

static ph_status workspace_from(ph_execd_service *svc, const char *tenant, json_t *resp,
                                ph_execd_workspace **out, ph_diag *diag)
{
    ph_execd_workspace *ws = calloc(1, sizeof *ws);
    if (ws != NULL) {
        ws->svc = svc;
        snprintf(ws->id, sizeof ws->id, "%s", ph_wire_str(resp, "workspace"));
        copy_tenant(ws->tenant, tenant);
    }
    json_decref(resp);
    *out = ws;
    return ws ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
}

ph_status ph_execd_environment_workspace(ph_execd_environment *env, ph_execd_workspace **out,
                                         ph_diag *diag)
{
    if (env == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "NULL argument");
    *out = NULL;
    ph_status st;
    json_t *resp = call(env->svc, env_request(env, PH_OP_ENV_WORKSPACE), &st, diag);
    return resp ? workspace_from(env->svc, env->tenant, resp, out, diag) : st;
}

/* ---- WorkspaceFiles ---- */

/* A WorkspaceFiles request on ws: the fields of a, ws's names and path
 * (NULL: none). */
static json_t *ws_request(const ph_execd_workspace *ws, ph_wire_op_id op, ph_wire_args *a,
                          const char *path)
{
    a->f[PH_F_TENANT] = PH_WV_STR(ws->tenant);
    a->f[PH_F_WORKSPACE] = PH_WV_STR(ws->id);
    if (path != NULL)
        a->f[PH_F_PATH] = PH_WV_BYTES(path, strlen(path));
    return ph_wire_request(op, a);
}

void ph_execd_workspace_close(ph_execd_workspace **ws)
{
    if (ws == NULL || *ws == NULL)
        return;
    ph_status st;
    ph_wire_args a = {0};
    json_decref(call((*ws)->svc, ws_request(*ws, PH_OP_WS_CLOSE, &a, NULL), &st, NULL));
    free(*ws);
    *ws = NULL;
}

ph_status ph_execd_workspace_stat(ph_execd_workspace *ws, const char *path, ph_ws_stat *out,
                                  ph_diag *diag)
{
    if (ws == NULL || path == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "NULL argument");
    ph_status st;
    ph_wire_args a = {0};
    json_t *resp = call(ws->svc, ws_request(ws, PH_OP_WS_STAT, &a, path), &st, diag);
    if (resp == NULL)
        return st;
    bool ok = ph_wire_get_stat(json_object_get(resp, "stat"), out);
    json_decref(resp);
    return ok ? PH_OK : ph_diag_set(diag, PH_E_FORMAT, 0, "malformed stat from the service");
}

ph_status ph_execd_workspace_read(ph_execd_workspace *ws, const char *path, size_t max_bytes,
                                  uint8_t **data, size_t *len, ph_diag *diag)
{
    if (ws == NULL || path == NULL || data == NULL || len == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "NULL argument");
    *data = NULL;
    *len = 0;
    ph_wire_args a = {.f[PH_F_MAX_BYTES] = PH_WV_INT(max_bytes)};
    ph_status st;
    json_t *resp = call(ws->svc, ws_request(ws, PH_OP_WS_READ, &a, path), &st, diag);
    if (resp == NULL)
        return st;
    int rc = ph_wire_get_bytes(resp, "data", "data_base64", data, len);
    json_decref(resp);
    if (rc == 0 && *len > max_bytes) {
        free(*data);
        *data = NULL;
        *len = 0;
        return ph_diag_set(diag, PH_E_LIMIT, 0, "the file is over %zu bytes", max_bytes);
    }
    return rc == 0 ? PH_OK : ph_diag_set(diag, PH_E_FORMAT, 0, "malformed data from the service");
}

#define STREAM_CHUNK (1024 * 1024)

/* A streamed workspace.read into fd: the header, chunks of at most
 * STREAM_CHUNK bytes, the end; at most max_bytes in all. The connection is
 * unusable after a failure in the middle of a stream, so it is closed. */
static ph_status stream_into(ph_execd_workspace *ws, json_t *req, int fd, uint64_t max_bytes,
                             ph_ws_stat *st_out, ph_diag *diag)
{
    ph_execd_service *svc = ws->svc;
    ph_status st;
    /* One hold of the connection for the header, the chunks and the end:
     * another thread's request cannot land in the middle of the stream. */
    pthread_mutex_lock(&svc->mu);
    json_t *head = exchange_locked(svc, req, NULL, NULL, &st, diag); /* the header, or the error */
    if (head == NULL) {
        pthread_mutex_unlock(&svc->mu);
        return st;
    }
    bool ok = json_is_true(json_object_get(head, "stream")) &&
              ph_wire_get_stat(json_object_get(head, "stat"), st_out);
    json_decref(head);
    uint64_t got = 0;
    while (ok) {
        json_t *f = NULL;
        if (recv_locked(svc, &f) != 0) {
            ok = false;
            break;
        }
        if (json_object_get(f, "ok") != NULL) { /* the final response */
            ok = json_is_true(json_object_get(f, "end")) &&
                 (uint64_t)json_integer_value(json_object_get(f, "size")) == got;
            if (!ok && ph_wire_str(f, "error"))
                st = ph_diag_set(diag, ph_wire_error_status(ph_wire_str(f, "error")), 0, "%s",
                                 ph_wire_str(f, "message") ? ph_wire_str(f, "message") : "");
            json_decref(f);
            break;
        }
        uint8_t *chunk = NULL;
        size_t len = 0;
        ok = ph_wire_get_bytes(f, NULL, "chunk_base64", &chunk, &len) == 0 &&
             len <= STREAM_CHUNK && got + len <= max_bytes;
        ok = ok && ph_write_all(fd, chunk, len) == 0;
        got += len;
        free(chunk);
        json_decref(f);
    }
    if (!ok && st == PH_OK) {
        if (svc->fd >= 0)
            shutdown(svc->fd, SHUT_RDWR);
        st = ph_diag_set(diag, PH_E_IO, 0, "the service's stream broke off");
    }
    pthread_mutex_unlock(&svc->mu);
    if (st == PH_OK)
        st_out->size = got;
    return st;
}

ph_status ph_execd_workspace_open_read(ph_execd_workspace *ws, const char *path,
                                       uint64_t max_bytes, int *fd_out, ph_ws_stat *st_out,
                                       ph_diag *diag)
{
    if (ws == NULL || path == NULL || fd_out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "NULL argument");
    *fd_out = -1;
    int fd = memfd_create("pinhole-execd-read", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "memfd: %s", strerror(errno));
    ph_wire_args a = {.f = {[PH_F_MAX_BYTES] = PH_WV_INT(max_bytes),
                            [PH_F_CHUNK_BYTES] = PH_WV_INT(STREAM_CHUNK)}};
    json_t *req = ws_request(ws, PH_OP_WS_READ, &a, path);
    ph_ws_stat st;
    ph_status rc = stream_into(ws, req, fd, max_bytes, &st, diag);
    if (rc == PH_OK &&
        (lseek(fd, 0, SEEK_SET) != 0 ||
         fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0))
        rc = ph_diag_set(diag, PH_E_IO, 0, "memfd: %s", strerror(errno));
    if (rc != PH_OK) {
        close(fd);
        return rc;
    }
    if (st_out)
        *st_out = st;
    *fd_out = fd;
    return PH_OK;
}

ph_status ph_execd_workspace_write(ph_execd_workspace *ws, const char *path, const void *data,
                                   size_t len, uint32_t mode, ph_diag *diag)
{
    if (ws == NULL || path == NULL || (data == NULL && len > 0))
        return ph_diag_set(diag, PH_E_INVAL, 0, "NULL argument");
    ph_wire_args a = {.f = {[PH_F_DATA] = PH_WV_BYTES(data, len), [PH_F_MODE] = PH_WV_INT(mode)}};
    json_t *req = len <= (size_t)INT32_MAX ? ws_request(ws, PH_OP_WS_WRITE, &a, path) : NULL;
    if (req == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st;
    json_decref(call(ws->svc, req, &st, diag));
    return st;
}

ph_status ph_execd_workspace_write_fd(ph_execd_workspace *ws, const char *path, int src_fd,
                                      uint64_t max_bytes, uint32_t mode, ph_diag *diag)
{
    size_t cap = 0, len = 0;
    uint8_t *buf = NULL;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (nb == NULL) {
                free(buf);
                return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
            }
            buf = nb;
        }
        ssize_t n = read(src_fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return ph_diag_set(diag, PH_E_IO, 0, "read: %s", strerror(errno));
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max_bytes) {
            free(buf);
            return ph_diag_set(diag, PH_E_LIMIT, 0, "the source is over %llu bytes",
                               (unsigned long long)max_bytes);
        }
    }
    ph_status st = ph_execd_workspace_write(ws, path, buf, len, mode, diag);
    free(buf);
    return st;
}

ph_status ph_execd_workspace_list(ph_execd_workspace *ws, const char *path, size_t max_entries,
                                  ph_ws_list **out, ph_diag *diag)
{
    if (ws == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "NULL argument");
    *out = NULL;
    ph_wire_args a = {.f[PH_F_MAX_ENTRIES] = PH_WV_INT(max_entries)};
    json_t *req = ws_request(ws, PH_OP_WS_LIST, &a, path ? path : "");
    ph_status st;
    json_t *resp = call(ws->svc, req, &st, diag);
    if (resp == NULL)
        return st;
    json_t *arr = json_object_get(resp, "entries");
    ph_ws_list *l = calloc(1, sizeof *l);
    bool ok = l && json_is_array(arr) && json_array_size(arr) <= max_entries;
    if (ok && json_array_size(arr)) {
        l->entries = calloc(json_array_size(arr), sizeof *l->entries);
        ok = l->entries != NULL;
    }
    for (size_t i = 0; ok && i < json_array_size(arr); i++) {
        json_t *e = json_array_get(arr, i);
        uint8_t *name;
        size_t len;
        ok = ph_wire_get_bytes(e, "name", "name_base64", &name, &len) == 0;
        if (ok) {
            l->entries[i].name = (char *)name;
            l->count = i + 1;
            ok = ph_wire_get_stat(e, &l->entries[i].st);
        }
    }
    if (l)
        l->truncated = json_is_true(json_object_get(resp, "truncated"));
    json_decref(resp);
    if (!ok) {
        ph_ws_list_free(&l);
        return ph_diag_set(diag, PH_E_FORMAT, 0, "malformed listing from the service");
    }
    *out = l;
    return PH_OK;
}

/* ---- leases ---- */

ph_status ph_execd_lease_open(ph_execd_service *svc, const ph_environment_spec *spec,
                              int64_t approval_hold_seconds, ph_execd_lease **out, ph_diag *diag)
{
    if (svc == NULL || spec == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_sandbox_lease_open: NULL argument");
    *out = NULL;
    ph_status st;
    json_t *req = spec_request(svc, PH_OP_LEASE_OPEN, spec, approval_hold_seconds, &st, diag);
    json_t *resp = req ? call(svc, req, &st, diag) : NULL;
    if (resp == NULL)
        return st;
    ph_execd_lease *l = calloc(1, sizeof *l);
    if (l) {
        l->svc = svc;
        snprintf(l->handle, sizeof l->handle, "%s", ph_wire_str(resp, "handle"));
        copy_tenant(l->tenant, spec->tenant);
    }
    json_decref(resp);
    *out = l;
    return l ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
}

/* A lease operation on l: now_seconds when now is not NULL. */
static json_t *lease_call(const ph_execd_lease *l, ph_wire_op_id op, const int64_t *now,
                          ph_status *st, ph_diag *diag)
{
    ph_wire_args a = {.f = {[PH_F_TENANT] = PH_WV_STR(l->tenant),
                            [PH_F_HANDLE] = PH_WV_STR(l->handle)}};
    if (now != NULL)
        a.f[PH_F_NOW_SECONDS] = PH_WV_INT(*now);
    return call(l->svc, ph_wire_request(op, &a), st, diag);
}

ph_status ph_execd_lease_environment(ph_execd_lease *lease, ph_execd_environment **env,
                                     ph_diag *diag)
{
    if (lease == NULL || env == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_sandbox_lease_environment: NULL argument");
    ph_status st;
    json_t *resp = lease_call(lease, PH_OP_LEASE_ENVIRONMENT, NULL, &st, diag);
    if (resp == NULL)
        return st;
    forward_warnings(lease->svc, resp);
    const char *id = ph_wire_str(resp, "environment");
    if (lease->env == NULL || strcmp(lease->env->id, id) != 0) {
        free(lease->env);
        lease->env = env_new(lease->svc, id, lease->tenant);
        if (lease->env)
            lease->env->of_lease = true;
    }
    json_decref(resp);
    *env = lease->env;
    return lease->env ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
}

ph_status ph_execd_lease_workspace(ph_execd_lease *lease, ph_execd_workspace **ws, ph_diag *diag)
{
    if (lease == NULL || ws == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_sandbox_lease_workspace: NULL argument");
    *ws = NULL;
    ph_status st;
    json_t *resp = lease_call(lease, PH_OP_LEASE_WORKSPACE, NULL, &st, diag);
    if (resp == NULL)
        return st;
    forward_warnings(lease->svc, resp);
    return workspace_from(lease->svc, lease->tenant, resp, ws, diag);
}

bool ph_execd_lease_has_sandbox(const ph_execd_lease *lease)
{
    if (lease == NULL)
        return false;
    ph_status st;
    json_t *resp = lease_call(lease, PH_OP_LEASE_STATUS, NULL, &st, NULL);
    bool has = json_is_true(json_object_get(resp, "has_sandbox"));
    json_decref(resp);
    return has;
}

static bool hold_call(ph_execd_lease *lease, ph_wire_op_id op, int64_t now)
{
    if (lease == NULL)
        return false;
    ph_status st;
    json_t *resp = lease_call(lease, op, &now, &st, NULL);
    bool destroyed = json_is_true(json_object_get(resp, "destroyed"));
    json_decref(resp);
    return destroyed;
}

void ph_execd_lease_hold_begin(ph_execd_lease *lease, int64_t now_seconds)
{
    (void)hold_call(lease, PH_OP_LEASE_HOLD_BEGIN, now_seconds);
}

bool ph_execd_lease_hold_tick(ph_execd_lease *lease, int64_t now_seconds)
{
    return hold_call(lease, PH_OP_LEASE_HOLD_TICK, now_seconds);
}

bool ph_execd_lease_hold_end(ph_execd_lease *lease, int64_t now_seconds)
{
    return hold_call(lease, PH_OP_LEASE_HOLD_END, now_seconds);
}

void ph_execd_lease_end(ph_execd_lease **lease)
{
    if (lease == NULL || *lease == NULL)
        return;
    ph_status st;
    json_decref(lease_call(*lease, PH_OP_LEASE_END, NULL, &st, NULL));
    free((*lease)->env);
    free(*lease);
    *lease = NULL;
}
