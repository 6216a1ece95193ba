/* wire.c - the wire format of docs/execd.md, once for the daemon and the
 * client: length-prefixed JSON frames, the byte-string encoding of
 * byte_strings.c (text when UTF-8, else <key>_base64), and the port's types
 * as JSON objects. Every decoder checks every field's type and refuses
 * what does not fit rather than guessing. */
#include "execd-int.h"

#include <errno.h>
#include "pinhole/base64.h"
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- frames ---- */

uint32_t ph_wire_frame_len(const uint8_t hdr[static PH_EXECD_FRAME_HEADER])
{
    return (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
}

int ph_wire_frame(const json_t *o, uint8_t **frame, size_t *len)
{
    char *text = json_dumps(o, JSON_COMPACT);
    if (text == NULL)
        return -1;
    size_t n = strlen(text);
    if (n > UINT32_MAX) {
        free(text);
        return -1;
    }
    uint8_t *f = malloc(PH_EXECD_FRAME_HEADER + n);
    if (f == NULL) {
        free(text);
        return -1;
    }
    f[0] = (uint8_t)(n >> 24);
    f[1] = (uint8_t)(n >> 16);
    f[2] = (uint8_t)(n >> 8);
    f[3] = (uint8_t)n;
    memcpy(f + PH_EXECD_FRAME_HEADER, text, n);
    free(text);
    *frame = f;
    *len = PH_EXECD_FRAME_HEADER + n;
    return 0;
}

bool ph_wire_frame_scan(const uint8_t *body, size_t len, ph_wire_cost *cost, size_t *offset)
{
    size_t values = 0, depth = 0;
    *cost = (ph_wire_cost){0};
    bool in_string = false, in_scalar = false;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = body[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped byte, whatever it is */
            else if (c == '"')
                in_string = false;
            continue;
        }
        bool starts = false;
        switch (c) {
        case '"': in_string = true; starts = true; in_scalar = false; break;
        case '{': case '[': depth++; starts = true; in_scalar = false; break;
        case '}': case ']': depth -= depth > 0; in_scalar = false; break;
        case ',': case ':': case ' ': case '\t': case '\n': case '\r': in_scalar = false; break;
        default: /* a number or a literal: one value per run of such bytes */
            starts = !in_scalar;
            in_scalar = true;
            break;
        }
        values += starts;
        cost->values = values;
        cost->depth = depth > cost->depth ? depth : cost->depth;
        if (values > PH_WIRE_VALUES_MAX || depth > PH_WIRE_DEPTH_MAX) {
            *offset = i;
            return false;
        }
    }
    return true;
}

static ssize_t fd_write(void *ctx, const void *buf, size_t len)
{
    return send(*(int *)ctx, buf, len, MSG_NOSIGNAL);
}

static ssize_t fd_read(void *ctx, void *buf, size_t len)
{
    return read(*(int *)ctx, buf, len);
}

int ph_wire_send_io(ph_wire_write_fn *wr, void *ctx, const json_t *o)
{
    uint8_t *f;
    size_t len;
    if (ph_wire_frame(o, &f, &len) != 0) {
        errno = ENOMEM;
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = wr(ctx, f + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int saved = n == 0 ? EPIPE : errno;
            free(f);
            errno = saved;
            return -1;
        }
        off += (size_t)n;
    }
    free(f);
    return 0;
}

static int read_full(ph_wire_read_fn *rd, void *ctx, uint8_t *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = rd(ctx, buf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            errno = EPIPE;
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

int ph_wire_recv_io(ph_wire_read_fn *rd, void *ctx, size_t max, json_t **out)
{
    uint8_t hdr[PH_EXECD_FRAME_HEADER];
    *out = NULL;
    if (read_full(rd, ctx, hdr, sizeof hdr) != 0)
        return -1;
    uint32_t n = ph_wire_frame_len(hdr);
    if (n == 0 || n > max) {
        errno = EMSGSIZE;
        return -1;
    }
    uint8_t *buf = malloc(n);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (read_full(rd, ctx, buf, n) != 0) {
        int saved = errno;
        free(buf);
        errno = saved;
        return -1;
    }
    json_error_t err;
    json_t *o = json_loadb((const char *)buf, n, JSON_REJECT_DUPLICATES, &err);
    free(buf);
    if (!json_is_object(o)) {
        json_decref(o);
        errno = EPROTO;
        return -1;
    }
    *out = o;
    return 0;
}

ssize_t ph_wire_ssl_write(void *ctx, const void *buf, size_t len)
{
    size_t done = 0;
    if (SSL_write_ex(ctx, buf, len, &done) != 1) {
        errno = EPIPE;
        return -1;
    }
    return (ssize_t)done;
}

ssize_t ph_wire_ssl_read(void *ctx, void *buf, size_t len)
{
    size_t done = 0;
    if (SSL_read_ex(ctx, buf, len, &done) == 1)
        return (ssize_t)done;
    if (SSL_get_error(ctx, 0) == SSL_ERROR_ZERO_RETURN)
        return 0;
    errno = EPIPE;
    return -1;
}

int ph_wire_send(int fd, const json_t *o)
{
    return ph_wire_send_io(fd_write, &fd, o);
}

int ph_wire_recv(int fd, size_t max, json_t **out)
{
    return ph_wire_recv_io(fd_read, &fd, max, out);
}

/* ---- errors ---- */

static const struct {
    const char *code;
    ph_status st;
} g_errors[] = {
    {"invalid", PH_E_INVAL},     {"denied", PH_E_DENIED},
    {"not_found", PH_E_NOT_FOUND}, {"limit", PH_E_LIMIT},
    {"timeout", PH_E_TIMEOUT},   {"unsupported", PH_E_UNSUPPORTED},
    {"io", PH_E_IO},             {"protocol", PH_E_FORMAT},
    {"internal", PH_E_INTERNAL}, {"nomem", PH_E_NOMEM},
    /* Codes with no status of their own (the daemon says them directly). */
    {"busy", PH_E_LIMIT},        {"too_large", PH_E_LIMIT},
    {"unauthenticated", PH_E_DENIED}, {"shutting_down", PH_E_IO},
};

const char *ph_wire_error_code(ph_status st)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].st == st)
            return g_errors[i].code;
    return "internal";
}

ph_status ph_wire_error_status(const char *code)
{
    for (size_t i = 0; code && i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (strcmp(g_errors[i].code, code) == 0)
            return g_errors[i].st;
    return PH_E_INTERNAL;
}

json_t *ph_wire_error(const char *code, const char *message)
{
    json_t *o = json_pack("{s:b, s:s}", "ok", 0, "error", code);
    if (o != NULL && ph_json_set_bytes(o, "message", "message_base64", message,
                                       strlen(message)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- byte strings ---- */

int ph_wire_b64_decode(const char *s, uint8_t **data, size_t *len)
{
    size_t n = strlen(s);
    if (n % 4 != 0 || n > (size_t)INT32_MAX)
        return -1;
    uint8_t *buf = malloc(n / 4 * 3 + 1);
    if (buf == NULL)
        return -1;
    /* Canonical base64 only (pinhole/base64.h); "" is no bytes. */
    size_t out = 0;
    if (n > 0 && !ph_b64_decode(s, n, PH_B64_STD_PAD, buf, n / 4 * 3, &out)) {
        free(buf);
        return -1;
    }
    buf[out] = '\0';
    *data = buf;
    *len = out;
    return 0;
}

int ph_wire_get_bytes(const json_t *obj, const char *text_key, const char *b64_key,
                      uint8_t **data, size_t *len)
{
    json_t *t = text_key ? json_object_get(obj, text_key) : NULL;
    json_t *b = b64_key ? json_object_get(obj, b64_key) : NULL;
    *data = NULL;
    *len = 0;
    if (t == NULL && b == NULL)
        return 1;
    if ((t != NULL && b != NULL) || (t != NULL && !json_is_string(t)) ||
        (b != NULL && !json_is_string(b)))
        return -1;
    if (b != NULL)
        return ph_wire_b64_decode(json_string_value(b), data, len);
    size_t n = json_string_length(t);
    uint8_t *buf = malloc(n + 1);
    if (buf == NULL)
        return -1;
    memcpy(buf, json_string_value(t), n);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

json_t *ph_wire_arg(const char *arg)
{
    json_t *s = json_string(arg);
    if (s != NULL)
        return s;
    json_t *o = json_object();
    if (o != NULL && ph_json_set_bytes(o, "base64", "base64", arg, strlen(arg)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void ph_wire_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

int ph_wire_argv(const json_t *arr, char ***argv)
{
    *argv = NULL;
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > PH_WIRE_ARGV_MAX)
        return -1;
    size_t n = json_array_size(arr);
    char **v = calloc(n + 1, sizeof *v);
    if (v == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        uint8_t *data = NULL;
        size_t len = 0;
        int rc = -1;
        if (json_is_string(e)) {
            len = json_string_length(e);
            data = malloc(len + 1);
            if (data != NULL) {
                memcpy(data, json_string_value(e), len + 1);
                rc = 0;
            }
        } else if (json_is_object(e) && json_is_string(json_object_get(e, "base64"))) {
            rc = ph_wire_b64_decode(json_string_value(json_object_get(e, "base64")), &data,
                                    &len);
        }
        if (rc != 0 || memchr(data, '\0', len) != NULL) {
            free(data);
            ph_wire_argv_free(v);
            return -1;
        }
        v[i] = (char *)data;
    }
    *argv = v;
    return 0;
}

int64_t ph_wire_int(const json_t *o, const char *key, int64_t dflt, bool *ok)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return dflt;
    if (!json_is_integer(v)) {
        *ok = false;
        return dflt;
    }
    return (int64_t)json_integer_value(v);
}

const char *ph_wire_str(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- the port's types ---- */

static int set_output(json_t *o, const char *key, const ph_output *out)
{
    char b64[32], trunc[32];
    snprintf(b64, sizeof b64, "%s_base64", key);
    snprintf(trunc, sizeof trunc, "%s_truncated", key);
    if (ph_json_set_bytes(o, key, b64, out->data ? (const char *)out->data : "", out->len) != 0)
        return -1;
    return json_object_set_new(o, trunc, json_boolean(out->truncated));
}

json_t *ph_wire_result(const ph_execution_result *r)
{
    json_t *o = json_pack("{s:b, s:i, s:i, s:b, s:I, s:s, s:I, s:b}", "exited", r->exited,
                          "exit_code", r->exit_code, "term_signal", r->term_signal, "timed_out",
                          r->timed_out, "timeout_ms", (json_int_t)r->timeout_ms, "timeout_bound",
                          ph_timeout_bound_code(r->timeout_bound), "duration_ms",
                          (json_int_t)r->duration_ms, "files_changed_truncated",
                          r->files_changed_truncated);
    if (o != NULL && json_object_set_new(o, "workspace_full", json_boolean(r->workspace_full)) != 0) {
        json_decref(o);
        o = NULL;
    }
    json_t *fc = json_array(), *gaps = json_array();
    bool ok = o && fc && gaps && set_output(o, "stdout", &r->out) == 0 &&
              set_output(o, "stderr", &r->err) == 0;
    for (size_t i = 0; ok && i < r->files_changed_count; i++) {
        const ph_file_change *c = &r->files_changed[i];
        json_t *e = json_pack("{s:s, s:I}", "change", ph_change_kind_name(c->kind), "size",
                              (json_int_t)c->size);
        ok = e && ph_json_set_bytes(e, "path", "path_base64", c->path, strlen(c->path)) == 0 &&
             json_array_append_new(fc, e) == 0;
        if (!ok)
            json_decref(e);
    }
    for (unsigned bit = 1; ok && bit != 0 && bit <= PH_FC_GAP_PATH_TOO_LONG; bit <<= 1)
        if (r->files_changed_gaps & bit)
            ok = json_array_append_new(gaps, json_string(ph_fc_gap_name(bit))) == 0;
    if (ok && json_object_set_new(o, "files_changed", fc) == 0) {
        fc = NULL;
        if (json_object_set_new(o, "files_changed_gaps", gaps) == 0)
            return o;
        gaps = NULL;
    }
    json_decref(fc);
    json_decref(gaps);
    json_decref(o);
    return NULL;
}

static bool get_output(const json_t *o, const char *key, ph_output *out)
{
    char b64[32], trunc[32];
    snprintf(b64, sizeof b64, "%s_base64", key);
    snprintf(trunc, sizeof trunc, "%s_truncated", key);
    size_t len;
    if (ph_wire_get_bytes(o, key, b64, &out->data, &len) != 0)
        return false;
    out->len = len;
    out->truncated = json_is_true(json_object_get(o, trunc));
    return true;
}

static bool bound_from_code(const char *code, ph_timeout_bound *out)
{
    for (int b = PH_TIMEOUT_BOUND_SERVICE_CAP; code && b <= PH_TIMEOUT_BOUND_MODEL; b++) {
        if (strcmp(code, ph_timeout_bound_code((ph_timeout_bound)b)) == 0) {
            *out = (ph_timeout_bound)b;
            return true;
        }
    }
    return false;
}

static bool kind_from_name(const char *name, ph_change_kind *out)
{
    for (int k = PH_CHANGE_ADDED; name && k <= PH_CHANGE_DELETED; k++) {
        if (strcmp(name, ph_change_kind_name((ph_change_kind)k)) == 0) {
            *out = (ph_change_kind)k;
            return true;
        }
    }
    return false;
}

ph_status ph_wire_get_result(const json_t *o, ph_execution_result **out, ph_diag *diag)
{
    *out = NULL;
    ph_execution_result *r = calloc(1, sizeof *r);
    if (r == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    bool ok = json_is_object(o);
    r->exited = json_is_true(json_object_get(o, "exited"));
    r->exit_code = (int)ph_wire_int(o, "exit_code", 0, &ok);
    r->term_signal = (int)ph_wire_int(o, "term_signal", 0, &ok);
    r->timed_out = json_is_true(json_object_get(o, "timed_out"));
    r->timeout_ms = ph_wire_int(o, "timeout_ms", 0, &ok);
    r->duration_ms = ph_wire_int(o, "duration_ms", 0, &ok);
    r->files_changed_truncated = json_is_true(json_object_get(o, "files_changed_truncated"));
    r->workspace_full = json_is_true(json_object_get(o, "workspace_full"));
    ok = ok && bound_from_code(ph_wire_str(o, "timeout_bound"), &r->timeout_bound) &&
         get_output(o, "stdout", &r->out) && get_output(o, "stderr", &r->err);
    json_t *fc = json_object_get(o, "files_changed");
    ok = ok && json_is_array(fc) && json_array_size(fc) <= PH_FILES_CHANGED_MAX;
    if (ok && json_array_size(fc) > 0) {
        r->files_changed = calloc(json_array_size(fc), sizeof *r->files_changed);
        ok = r->files_changed != NULL;
    }
    for (size_t i = 0; ok && i < json_array_size(fc); i++) {
        json_t *e = json_array_get(fc, i);
        ph_file_change *c = &r->files_changed[i];
        uint8_t *path;
        size_t len;
        bool item_ok = true;
        ok = json_is_object(e) && ph_wire_get_bytes(e, "path", "path_base64", &path, &len) == 0;
        if (!ok)
            break;
        c->path = (char *)path;
        r->files_changed_count = i + 1;
        c->size = (uint64_t)ph_wire_int(e, "size", 0, &item_ok);
        ok = item_ok && kind_from_name(ph_wire_str(e, "change"), &c->kind);
    }
    json_t *gaps = json_object_get(o, "files_changed_gaps");
    for (size_t i = 0; ok && json_is_array(gaps) && i < json_array_size(gaps); i++) {
        const char *g = json_string_value(json_array_get(gaps, i));
        bool known = false;
        for (unsigned bit = 1; g && bit <= PH_FC_GAP_PATH_TOO_LONG; bit <<= 1) {
            if (strcmp(g, ph_fc_gap_name(bit)) == 0) {
                r->files_changed_gaps |= bit;
                known = true;
            }
        }
        ok = known;
    }
    if (!ok) {
        ph_execution_result_free(&r);
        return ph_diag_set(diag, PH_E_FORMAT, 0, "the service sent a malformed result");
    }
    *out = r;
    return PH_OK;
}

json_t *ph_wire_stat(const ph_ws_stat *st)
{
    return json_pack("{s:s, s:I, s:I, s:i}", "type", ph_ws_file_type_name(st->type), "size",
                     (json_int_t)st->size, "mtime", (json_int_t)st->mtime_sec, "mode",
                     (int)st->mode);
}

bool ph_wire_get_stat(const json_t *o, ph_ws_stat *st)
{
    bool ok = json_is_object(o);
    const char *type = ph_wire_str(o, "type");
    bool known = false;
    for (int t = PH_WS_TYPE_FILE; type && t <= PH_WS_TYPE_OTHER; t++) {
        if (strcmp(type, ph_ws_file_type_name((ph_ws_file_type)t)) == 0) {
            st->type = (ph_ws_file_type)t;
            known = true;
        }
    }
    st->size = (uint64_t)ph_wire_int(o, "size", 0, &ok);
    st->mtime_sec = ph_wire_int(o, "mtime", 0, &ok);
    st->mode = (uint32_t)ph_wire_int(o, "mode", 0, &ok) & 0777;
    return ok && known;
}
