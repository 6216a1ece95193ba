/* wire_ops.c - the table of pinhole-execd's operations (wire_ops-int.h,
 * docs/execd.md section 5) and the two routines that read it: the client's
 * request builder and the daemon's request checker. Every field is named
 * once, here; a field's JSON type decides both how it is written and what
 * is refused, so a request the client can build is one the daemon accepts.
 *
 * The `invalid` messages are the protocol's: one message names the fields
 * of a group (an execute's, a file operation's), so a client learns which
 * request was malformed, not which byte. */
#include "execd-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R PH_WF_REQUIRED

/* ---- the fields ---- */

static const char EXEC_MSG[] = "argv, cwd, stdin, timeout_seconds, run_budget_ms";
static const char WS_MSG[] = "path, data, max_bytes, max_entries, mode";

#define NAME(fid, k) {.id = (fid), .key = (k), .type = PH_WT_NAME, .flags = R}
#define TEXT(fid, k) {.id = (fid), .key = (k), .type = PH_WT_TEXT}
#define INT(fid, k, lo, hi, d, m)                                                            \
    {.id = (fid), .key = (k), .type = PH_WT_INT, .min = (lo), .max = (hi), .dflt = (d),     \
     .msg = (m)}

static const ph_wire_field f_tenant = NAME(PH_F_TENANT, "tenant");
static const ph_wire_field f_environment = NAME(PH_F_ENVIRONMENT, "environment");
static const ph_wire_field f_workspace = NAME(PH_F_WORKSPACE, "workspace");
static const ph_wire_field f_handle = NAME(PH_F_HANDLE, "handle");

static const ph_wire_field f_hard_cap = INT(PH_F_HARD_CAP_MS, "hard_cap_ms", 100, INT64_MAX, 0,
                                            "hard_cap_ms must be an integer of at least 100");

/* The spec of environment.create and lease.open. The tenant and lease
 * names, the mechanism and the passthrough names and values are the port's
 * to judge (ph_environment_create, ph_env_set): it refuses them with its
 * own messages. */
static const ph_wire_field f_spec_tenant = TEXT(PH_F_TENANT, "tenant");
static const ph_wire_field f_mechanism = TEXT(PH_F_MECHANISM, "mechanism");
static const ph_wire_field f_lease = TEXT(PH_F_LEASE, "lease");
#define LIMIT(fid, k) INT(fid, k, INT64_MIN, INT64_MAX, PH_SANDBOX_UNSET, NULL)
static const ph_wire_field m_memory = LIMIT(PH_F_MEMORY_BYTES, "memory_bytes"),
                           m_pids = LIMIT(PH_F_PIDS, "pids"),
                           m_cpu = LIMIT(PH_F_CPU_MILLIS, "cpu_millis"),
                           m_wall = LIMIT(PH_F_WALL_CLOCK_MS, "wall_clock_ms"),
                           m_output = LIMIT(PH_F_OUTPUT_BYTES, "output_bytes");
static const ph_wire_field *const limits_members[] = {&m_memory, &m_pids, &m_cpu, &m_wall,
                                                      &m_output, NULL};
static const ph_wire_field f_limits = {.id = PH_F_LIMITS, .key = "limits", .type = PH_WT_OBJECT,
                                       .msg = "limits: every field is an integer",
                                       .sub = limits_members};
static const ph_wire_field m_grant = TEXT(PH_F_GRANT_TOKEN, "grant_token");
static const ph_wire_field m_proxy_port = INT(PH_F_PROXY_PORT, "proxy_port", 0, 65535, 0, NULL);
static const ph_wire_field *const network_members[] = {&m_grant, &m_proxy_port, NULL};
static const ph_wire_field f_network = {.id = PH_F_NETWORK, .key = "network",
                                        .type = PH_WT_OBJECT,
                                        .msg = "network.proxy_port must be 0-65535",
                                        .sub = network_members};
static const char PASS_ITEM_MSG[] = "passthrough[]: name and value";
static const ph_wire_field m_pass_name = {.id = PH_F_PASS_NAME, .key = "name",
                                          .type = PH_WT_TEXT, .flags = R, .msg = PASS_ITEM_MSG};
static const ph_wire_field m_pass_value = {.id = PH_F_PASS_VALUE, .key = "value",
                                           .type = PH_WT_BYTES, .flags = R,
                                           .msg = PASS_ITEM_MSG};
static const ph_wire_field *const passthrough_members[] = {&m_pass_name, &m_pass_value, NULL};
static const ph_wire_field f_passthrough = {.id = PH_F_PASSTHROUGH, .key = "passthrough",
                                            .type = PH_WT_LIST, .max = 256,
                                            .msg = "passthrough must be an array of at most 256",
                                            .sub = passthrough_members};
static const ph_wire_field f_approval_hold =
    INT(PH_F_APPROVAL_HOLD, "approval_hold_seconds", INT64_MIN, INT64_MAX, 0,
        "approval_hold_seconds must be an integer");

static const ph_wire_field f_argv = {.id = PH_F_ARGV, .key = "argv", .type = PH_WT_ARGV,
                                     .flags = R, .min = 1, .max = PH_WIRE_ARGV_MAX,
                                     .msg = EXEC_MSG};
static const ph_wire_field f_timeout = INT(PH_F_TIMEOUT_SECONDS, "timeout_seconds", INT64_MIN,
                                           INT64_MAX, PH_SANDBOX_UNSET, EXEC_MSG);
static const ph_wire_field f_run_budget = INT(PH_F_RUN_BUDGET_MS, "run_budget_ms", INT64_MIN,
                                              INT64_MAX, PH_SANDBOX_UNSET, EXEC_MSG);
static const ph_wire_field f_cwd = {.id = PH_F_CWD, .key = "cwd", .type = PH_WT_BYTES,
                                    .flags = PH_WF_NO_NUL, .msg = EXEC_MSG};
static const ph_wire_field f_stdin = {.id = PH_F_STDIN, .key = "stdin", .type = PH_WT_BINARY,
                                      .msg = EXEC_MSG};
static const ph_wire_field f_stream_output = {.id = PH_F_STREAM_OUTPUT, .key = "stream_output",
                                              .type = PH_WT_FLAG};

/* The file operations share one group of fields, each checked whatever the
 * operation (a stat with a malformed mode is refused). */
static const ph_wire_field f_path = {.id = PH_F_PATH, .key = "path", .type = PH_WT_BYTES,
                                     .flags = R | PH_WF_NO_NUL, .msg = WS_MSG};
static const ph_wire_field f_data = {.id = PH_F_DATA, .key = "data", .type = PH_WT_BINARY,
                                     .msg = WS_MSG};
static const ph_wire_field f_write_data = {.id = PH_F_DATA, .key = "data", .type = PH_WT_BINARY,
                                           .flags = R, .msg = WS_MSG,
                                           .missing = "workspace.write needs data or data_base64"};
static const ph_wire_field f_max_bytes = INT(PH_F_MAX_BYTES, "max_bytes", 0, INT64_MAX,
                                             16 * 1024 * 1024, WS_MSG);
static const ph_wire_field f_max_entries = INT(PH_F_MAX_ENTRIES, "max_entries", 0, INT64_MAX,
                                               16 * 1024 * 1024, WS_MSG);
static const ph_wire_field f_mode = INT(PH_F_MODE, "mode", INT64_MIN, INT64_MAX, 0644, WS_MSG);
/* A streamed read's chunk: at least PH_WIRE_CHUNK_MIN, so a peer cannot make the
 * daemon send one frame (and spend one base64 encoding, one queue entry) per
 * byte of a file; absent means not streamed. */
static const ph_wire_field f_chunk_bytes = INT(PH_F_CHUNK_BYTES, "chunk_bytes", PH_WIRE_CHUNK_MIN,
                                               8 * 1024 * 1024, 0,
                                               "chunk_bytes must be 4096..8388608");

/* A monotonic clock's seconds: the daemon's own tick adds its elapsed time
 * to a hold's begin, which must not overflow. */
static const ph_wire_field f_now = INT(PH_F_NOW_SECONDS, "now_seconds", 0, PH_EXECD_NOW_SECONDS_MAX,
                                       0, "now_seconds must be an integer from 0 to 2^62");

/* ---- the replies ---- */

#define REPLY(k, t, fl) {.id = PH_F_NONE, .key = (k), .type = (t), .flags = (fl)}
static const ph_wire_field r_protocol = REPLY("protocol", PH_WT_INT, R),
                           r_mechanism = REPLY("mechanism", PH_WT_TEXT, R),
                           r_mode = REPLY("mode", PH_WT_TEXT, R),
                           r_hard_cap = REPLY("hard_cap_ms", PH_WT_INT, R),
                           r_identity = REPLY("identity", PH_WT_TEXT, R),
                           r_status = REPLY("status", PH_WT_TEXT, R),
                           r_sandboxes = REPLY("sandboxes", PH_WT_INT, R),
                           r_executions = REPLY("executions", PH_WT_INT, R),
                           r_queued = REPLY("queued", PH_WT_INT, R),
                           r_prometheus = REPLY("prometheus", PH_WT_TEXT, R),
                           r_environment = REPLY("environment", PH_WT_TEXT, R),
                           r_workspace = REPLY("workspace", PH_WT_TEXT, R),
                           r_warnings = REPLY("warnings", PH_WT_LIST, R),
                           r_result = REPLY("result", PH_WT_OBJECT, R),
                           r_dropped = REPLY("stream_dropped_bytes", PH_WT_INT, 0),
                           r_stat = REPLY("stat", PH_WT_OBJECT, R),
                           /* a streamed read's header has no data, its end no stat */
                           r_read_stat = REPLY("stat", PH_WT_OBJECT, 0),
                           r_data = REPLY("data", PH_WT_BYTES, 0),
                           r_stream = REPLY("stream", PH_WT_FLAG, 0),
                           r_end = REPLY("end", PH_WT_FLAG, 0),
                           r_size = REPLY("size", PH_WT_INT, 0),
                           r_entries = REPLY("entries", PH_WT_LIST, R),
                           r_truncated = REPLY("truncated", PH_WT_FLAG, R),
                           r_handle = REPLY("handle", PH_WT_TEXT, R),
                           r_has_sandbox = REPLY("has_sandbox", PH_WT_FLAG, R),
                           r_destroyed = REPLY("destroyed", PH_WT_FLAG, R);

/* ---- the operations ---- */

#define FIELDS(...) ((const ph_wire_field *const[]){__VA_ARGS__, NULL})
#define NONE ((const ph_wire_field *const[]){NULL})
#define SPEC &f_mechanism, &f_limits, &f_spec_tenant, &f_lease, &f_network, &f_passthrough

const ph_wire_op ph_wire_ops[PH_OP_COUNT] = {
    [PH_OP_HELLO] = {"hello", NULL, FIELDS(&f_hard_cap),
                     FIELDS(&r_protocol, &r_mechanism, &r_mode, &r_hard_cap, &r_identity)},
    [PH_OP_HEALTH] = {"health", NULL, NONE,
                      FIELDS(&r_status, &r_mechanism, &r_sandboxes, &r_executions, &r_queued)},
    [PH_OP_METRICS] = {"metrics", NULL, NONE, FIELDS(&r_prometheus)},
    [PH_OP_ENV_CREATE] = {"environment.create", NULL, FIELDS(SPEC),
                          FIELDS(&r_environment, &r_warnings)},
    [PH_OP_ENV_EXECUTE] = {"environment.execute", "environment",
                           FIELDS(&f_tenant, &f_environment, &f_argv, &f_timeout, &f_run_budget,
                                  &f_cwd, &f_stdin, &f_stream_output),
                           FIELDS(&r_result, &r_dropped)},
    [PH_OP_ENV_DESTROY] = {"environment.destroy", "environment",
                           FIELDS(&f_tenant, &f_environment), NONE},
    [PH_OP_ENV_WORKSPACE] = {"environment.workspace", "environment",
                             FIELDS(&f_tenant, &f_environment), FIELDS(&r_workspace)},
    [PH_OP_WS_STAT] = {"workspace.stat", "workspace",
                       FIELDS(&f_tenant, &f_workspace, &f_path, &f_data, &f_max_bytes, &f_mode),
                       FIELDS(&r_stat)},
    [PH_OP_WS_READ] = {"workspace.read", "workspace",
                       FIELDS(&f_tenant, &f_workspace, &f_path, &f_max_bytes, &f_chunk_bytes,
                              &f_data, &f_mode),
                       FIELDS(&r_stream, &r_read_stat, &r_data, &r_end, &r_size)},
    [PH_OP_WS_WRITE] = {"workspace.write", "workspace",
                        FIELDS(&f_tenant, &f_workspace, &f_path, &f_write_data, &f_mode,
                               &f_max_bytes),
                        NONE},
    [PH_OP_WS_LIST] = {"workspace.list", "workspace",
                       FIELDS(&f_tenant, &f_workspace, &f_path, &f_max_entries, &f_data,
                              &f_mode),
                       FIELDS(&r_entries, &r_truncated)},
    [PH_OP_WS_CLOSE] = {"workspace.close", "workspace", FIELDS(&f_tenant, &f_workspace), NONE},
    [PH_OP_LEASE_OPEN] = {"lease.open", NULL, FIELDS(SPEC, &f_approval_hold),
                          FIELDS(&r_handle)},
    [PH_OP_LEASE_ENVIRONMENT] = {"lease.environment", "lease", FIELDS(&f_tenant, &f_handle),
                                 FIELDS(&r_environment, &r_warnings)},
    [PH_OP_LEASE_WORKSPACE] = {"lease.workspace", "lease", FIELDS(&f_tenant, &f_handle),
                               FIELDS(&r_workspace, &r_warnings)},
    [PH_OP_LEASE_STATUS] = {"lease.status", "lease", FIELDS(&f_tenant, &f_handle),
                            FIELDS(&r_has_sandbox)},
    [PH_OP_LEASE_HOLD_BEGIN] = {"lease.hold_begin", "lease",
                                FIELDS(&f_tenant, &f_handle, &f_now), NONE},
    [PH_OP_LEASE_HOLD_TICK] = {"lease.hold_tick", "lease", FIELDS(&f_tenant, &f_handle, &f_now),
                               FIELDS(&r_destroyed)},
    [PH_OP_LEASE_HOLD_END] = {"lease.hold_end", "lease", FIELDS(&f_tenant, &f_handle, &f_now),
                              FIELDS(&r_destroyed)},
    /* now_seconds is checked here too, though the end reads no clock. */
    [PH_OP_LEASE_END] = {"lease.end", "lease", FIELDS(&f_tenant, &f_handle, &f_now), NONE},
};

bool ph_wire_op_find(const char *name, ph_wire_op_id *id)
{
    for (size_t i = 0; name && i < PH_OP_COUNT; i++) {
        if (strcmp(ph_wire_ops[i].name, name) == 0) {
            *id = (ph_wire_op_id)i;
            return true;
        }
    }
    return false;
}

const char *ph_wire_field_msg(ph_wire_op_id op, ph_wire_field_id id)
{
    for (const ph_wire_field *const *f = ph_wire_ops[op].req; *f; f++)
        if ((*f)->id == id)
            return (*f)->msg;
    return NULL;
}

static void b64_key(const ph_wire_field *f, char out[static 64])
{
    snprintf(out, 64, "%s_base64", f->key);
}

/* ---- the client's side ---- */

const char *ph_wire_reply_check(ph_wire_op_id op, const json_t *resp)
{
    for (const ph_wire_field *const *f = ph_wire_ops[op].reply; *f; f++) {
        char b64[64];
        b64_key(*f, b64);
        json_t *v = json_object_get(resp, (*f)->key);
        bool typed = false;
        switch ((*f)->type) {
        case PH_WT_NAME:
        case PH_WT_TEXT: typed = json_is_string(v); break;
        case PH_WT_FLAG: typed = json_is_boolean(v); break;
        case PH_WT_INT: typed = json_is_integer(v); break;
        case PH_WT_BYTES:
        case PH_WT_BINARY:
            v = v ? v : json_object_get(resp, b64);
            typed = json_is_string(v);
            break;
        case PH_WT_ARGV:
        case PH_WT_LIST: typed = json_is_array(v); break;
        case PH_WT_OBJECT: typed = json_is_object(v); break;
        }
        if (v == NULL ? ((*f)->flags & PH_WF_REQUIRED) != 0 : !typed)
            return (*f)->key;
    }
    return NULL;
}

static int put(json_t *o, const ph_wire_field *f, const ph_wire_args *a);

/* The members of a present in a new object, or NULL when out of memory. */
static json_t *object_of(const ph_wire_field *f, const ph_wire_args *a)
{
    json_t *o = json_object();
    for (const ph_wire_field *const *m = f->sub; o && *m; m++) {
        if (a->f[(*m)->id].present && put(o, *m, a) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static int put(json_t *o, const ph_wire_field *f, const ph_wire_args *a)
{
    const ph_wire_value *v = &a->f[f->id];
    char b64[64];
    b64_key(f, b64);
    switch (f->type) {
    case PH_WT_NAME:
    case PH_WT_TEXT: return json_object_set_new(o, f->key, json_string(v->s));
    case PH_WT_FLAG: return v->i ? json_object_set_new(o, f->key, json_true()) : 0;
    case PH_WT_INT: return json_object_set_new(o, f->key, json_integer((json_int_t)v->i));
    case PH_WT_BYTES: return ph_json_set_bytes(o, f->key, b64, v->data ? v->data : "", v->len);
    case PH_WT_BINARY: return json_object_set_new(o, b64, ph_json_b64(v->data, v->len));
    case PH_WT_ARGV: {
        json_t *arr = json_array();
        for (size_t i = 0; arr && v->argv[i]; i++) {
            if (json_array_append_new(arr, ph_wire_arg(v->argv[i])) != 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
        return json_object_set_new(o, f->key, arr);
    }
    case PH_WT_OBJECT: return json_object_set_new(o, f->key, object_of(f, a));
    case PH_WT_LIST: return json_object_set(o, f->key, v->json);
    }
    return -1;
}

json_t *ph_wire_request(ph_wire_op_id op, const ph_wire_args *a)
{
    json_t *req = json_pack("{s:s}", "op", ph_wire_ops[op].name);
    for (const ph_wire_field *const *f = ph_wire_ops[op].req; req && *f; f++) {
        if (a->f[(*f)->id].present && put(req, *f, a) != 0) {
            json_decref(req);
            req = NULL;
        }
    }
    return req;
}

/* ---- the daemon's side ---- */

static void value_clear(ph_wire_value *v)
{
    free(v->owned_data);
    ph_wire_argv_free(v->owned_argv);
    *v = (ph_wire_value){0};
}

/* Checks field f of obj (an object or not: then every member is absent)
 * and, when a is not NULL, decodes it (an object's members too) into a.
 * NULL, or the message of the refusal; outer is the enclosing field's. */
static const char *take(const json_t *obj, const ph_wire_field *f, const char *outer,
                        ph_wire_args *a)
{
    ph_wire_value *v = a ? &a->f[f->id] : NULL;
    const char *msg = f->msg ? f->msg : outer;
    json_t *j = json_object_get(obj, f->key);
    ph_wire_value tmp = {0}, *out = v ? v : &tmp;
    switch (f->type) {
    case PH_WT_NAME:
    case PH_WT_TEXT:
        out->s = json_string_value(j); /* NULL unless a string */
        out->present = out->s != NULL;
        break;
    case PH_WT_FLAG:
        out->present = json_is_true(j);
        out->i = out->present;
        break;
    case PH_WT_INT:
        out->i = f->dflt;
        if (j == NULL || json_is_null(j))
            break;
        if (!json_is_integer(j) || json_integer_value(j) < f->min ||
            json_integer_value(j) > f->max)
            return msg;
        out->present = true;
        out->i = json_integer_value(j);
        break;
    case PH_WT_BYTES:
    case PH_WT_BINARY: {
        char b64[64];
        b64_key(f, b64);
        uint8_t *data;
        size_t len;
        int rc = ph_wire_get_bytes(obj, f->key, b64, &data, &len);
        if (rc < 0 || (rc == 0 && (f->flags & PH_WF_NO_NUL) && memchr(data, '\0', len))) {
            free(data);
            return msg;
        }
        out->present = rc == 0;
        out->data = out->owned_data = data;
        out->len = len;
        break;
    }
    case PH_WT_ARGV: {
        if (j == NULL)
            break;
        char **argv = NULL;
        if (!json_is_array(j) || json_array_size(j) < (size_t)f->min ||
            json_array_size(j) > (size_t)f->max || ph_wire_argv(j, &argv) != 0)
            return msg;
        out->present = true;
        out->owned_argv = argv;
        out->argv = (const char *const *)argv;
        break;
    }
    case PH_WT_OBJECT:
    case PH_WT_LIST: {
        bool list = f->type == PH_WT_LIST;
        for (const ph_wire_field *const *m = f->sub; a && !list && *m; m++)
            a->f[(*m)->id].i = (*m)->dflt; /* the members' defaults, sent or not */
        if (j == NULL)
            break;
        if (list ? !json_is_array(j) || json_array_size(j) > (size_t)f->max : !json_is_object(j))
            return msg;
        for (size_t i = 0; i < (list ? json_array_size(j) : 1); i++) {
            const json_t *item = list ? json_array_get(j, i) : j;
            for (const ph_wire_field *const *m = f->sub; *m; m++) {
                const char *bad = take(item, *m, msg, list ? NULL : a);
                if (bad != NULL)
                    return bad;
            }
        }
        out->present = true;
        out->json = list ? j : NULL;
        break;
    }
    }
    const char *bad = NULL;
    if ((f->flags & PH_WF_REQUIRED) && !out->present && f->type != PH_WT_NAME)
        bad = f->missing ? f->missing : msg;
    if (v == NULL || bad != NULL)
        value_clear(out);
    return bad;
}

const char *ph_wire_decode(ph_wire_op_id op, const json_t *req, ph_wire_args *a)
{
    *a = (ph_wire_args){.op = op};
    for (const ph_wire_field *const *f = ph_wire_ops[op].req; *f; f++) {
        const char *bad = take(req, *f, NULL, a);
        if (bad != NULL) {
            ph_wire_args_clear(a);
            return bad;
        }
    }
    return NULL;
}

/* The list field list, wherever it is used. */
static const ph_wire_field *list_field(ph_wire_field_id list)
{
    for (size_t op = 0; op < PH_OP_COUNT; op++)
        for (const ph_wire_field *const *f = ph_wire_ops[op].req; *f; f++)
            if ((*f)->id == list && (*f)->type == PH_WT_LIST)
                return *f;
    return NULL;
}

json_t *ph_wire_item(ph_wire_field_id list, const ph_wire_args *a)
{
    const ph_wire_field *f = list_field(list);
    return f ? object_of(f, a) : NULL;
}

const char *ph_wire_item_decode(ph_wire_field_id list, const json_t *item, ph_wire_args *a)
{
    const ph_wire_field *f = list_field(list);
    *a = (ph_wire_args){0};
    for (const ph_wire_field *const *m = f ? f->sub : NULL; m && *m; m++) {
        const char *bad = take(item, *m, f->msg, a);
        if (bad != NULL) {
            ph_wire_args_clear(a);
            return bad;
        }
    }
    return f ? NULL : "unknown list";
}

void ph_wire_args_clear(ph_wire_args *a)
{
    for (size_t i = 0; i < PH_F_COUNT; i++)
        value_clear(&a->f[i]);
}
