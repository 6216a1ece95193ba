/* metadata.c - the metadata document beside each artifact: encode, strict
 * decode (pinhole/artifact_metadata.h), field rules, copy and free. A
 * document that is not exactly what encode produces is corruption. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "pinhole/artifact_metadata.h"
#include "pinhole/utf8.h"

#define FORMAT_VERSION 1

void ph_artifact_metadata_free(ph_artifact_metadata **m)
{
    if (m == NULL || *m == NULL)
        return;
    free((*m)->tenant_id);
    free((*m)->filename);
    free((*m)->content_type);
    free((*m)->run_id);
    free((*m)->source_path);
    free(*m);
    *m = NULL;
}

static bool printable_ascii(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

static bool has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return true;
    return false;
}

ph_status ph_artifact_metadata_check(const ph_artifact_metadata *m, ph_diag *diag)
{
    if (m->tenant_id == NULL || m->tenant_id_len == 0 || m->tenant_id_len > PH_ARTIFACT_TENANT_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "tenant id must be 1..%d bytes",
                           PH_ARTIFACT_TENANT_MAX);
    if (!ph_artifact_id_valid(m->artifact_id, strnlen(m->artifact_id, sizeof m->artifact_id)))
        return ph_diag_set(diag, PH_E_INVAL, 0, "artifact id is not 32 lowercase hex characters");
    if (m->filename_len > PH_ARTIFACT_FILENAME_MAX || (m->filename_len > 0 && m->filename == NULL))
        return ph_diag_set(diag, PH_E_INVAL, 0, "filename longer than %d bytes",
                           PH_ARTIFACT_FILENAME_MAX);
    const char *ct = m->content_type ? m->content_type : "";
    size_t ctl = strlen(ct);
    if (ctl == 0 || ctl > PH_ARTIFACT_FIELD_MAX || !printable_ascii(ct, ctl))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "content type must be 1..%d printable ASCII characters",
                           PH_ARTIFACT_FIELD_MAX);
    const char *run = m->run_id ? m->run_id : "";
    size_t rl = strlen(run);
    if (rl > PH_ARTIFACT_FIELD_MAX || !printable_ascii(run, rl))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "run id must be at most %d printable ASCII characters",
                           PH_ARTIFACT_FIELD_MAX);
    const char *sp = m->source_path ? m->source_path : "";
    size_t spl = strlen(sp);
    if (spl > PH_ARTIFACT_SOURCE_PATH_MAX || !ph_utf8_valid(sp, spl) || has_control(sp, spl) ||
        sp[0] == '/')
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "source path must be workspace-relative UTF-8 without control "
                           "characters, at most %d bytes",
                           PH_ARTIFACT_SOURCE_PATH_MAX);
    if (m->created_at < 0 || m->expires_at <= m->created_at)
        return ph_diag_set(diag, PH_E_INVAL, 0, "expires_at must be after created_at >= 0");
    if (m->size > (uint64_t)INT64_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "size out of range");
    return PH_OK;
}

/* json_object_set_new that reports failure instead of leaking. */
static bool set(json_t *obj, const char *k, json_t *v)
{
    return v != NULL && json_object_set_new(obj, k, v) == 0;
}

static json_t *hex_string(const void *p, size_t len)
{
    char *h = malloc(2 * len + 1);
    if (h == NULL)
        return NULL;
    ph_hex_encode(p, len, h);
    json_t *s = json_stringn(h, 2 * len);
    free(h);
    return s;
}

ph_status ph_artifact_metadata_encode(const ph_artifact_metadata *m, char **out, size_t *out_len,
                                      ph_diag *diag)
{
    *out = NULL;
    *out_len = 0;
    ph_status st = ph_artifact_metadata_check(m, diag);
    if (st != PH_OK)
        return st;
    json_t *o = json_object();
    bool ok = o != NULL && set(o, "v", json_integer(FORMAT_VERSION)) &&
              set(o, "tenant_id_hex", hex_string(m->tenant_id, m->tenant_id_len)) &&
              set(o, "artifact_id", json_string(m->artifact_id));
    if (ok) {
        const char *fn = m->filename ? m->filename : "";
        if (ph_utf8_valid(fn, m->filename_len))
            ok = set(o, "filename", json_stringn(fn, m->filename_len));
        else
            ok = set(o, "filename_hex", hex_string(fn, m->filename_len));
    }
    ok = ok &&
         set(o, "content_type", json_string(m->content_type)) &&
         set(o, "run_id", json_string(m->run_id ? m->run_id : "")) &&
         set(o, "source_path", json_string(m->source_path ? m->source_path : "")) &&
         set(o, "size", json_integer((json_int_t)m->size)) &&
         set(o, "sha256", hex_string(m->sha256, sizeof m->sha256)) &&
         set(o, "created_at", json_integer(m->created_at)) &&
         set(o, "expires_at", json_integer(m->expires_at));
    char *text = ok ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "cannot encode artifact metadata");
    *out = text;
    *out_len = strlen(text);
    return PH_OK;
}

/* ---- strict decoding ---- */

typedef struct decoder {
    json_t *root;
    size_t seen;       /* members consumed; must equal the object size */
    ph_diag *diag;
} decoder;

static ph_status bad(decoder *d, const char *member, const char *what)
{
    return ph_diag_set(d->diag, PH_E_FORMAT, 0, "artifact metadata: %s %s", member, what);
}

static ph_status get_string(decoder *d, const char *k, const char **s, size_t *len)
{
    json_t *v = json_object_get(d->root, k);
    if (v == NULL)
        return bad(d, k, "is missing");
    if (!json_is_string(v))
        return bad(d, k, "is not a string");
    d->seen++;
    *s = json_string_value(v);
    *len = json_string_length(v);
    return PH_OK;
}

static ph_status get_int(decoder *d, const char *k, int64_t *out)
{
    json_t *v = json_object_get(d->root, k);
    if (v == NULL)
        return bad(d, k, "is missing");
    if (!json_is_integer(v))
        return bad(d, k, "is not an integer");
    d->seen++;
    *out = (int64_t)json_integer_value(v);
    if (*out < 0)
        return bad(d, k, "is negative");
    return PH_OK;
}

/* A NUL-free copy of a string member. */
static ph_status get_text(decoder *d, const char *k, char **out)
{
    const char *s = NULL;
    size_t len = 0;
    ph_status st = get_string(d, k, &s, &len);
    if (st != PH_OK)
        return st;
    if (memchr(s, '\0', len) != NULL)
        return bad(d, k, "contains NUL");
    *out = strdup(s);
    return *out ? PH_OK : ph_diag_set(d->diag, PH_E_NOMEM, 0, "out of memory");
}

static ph_status get_hex(decoder *d, const char *k, size_t max_bytes, unsigned char **out,
                         size_t *out_len)
{
    const char *s = NULL;
    size_t len = 0;
    ph_status st = get_string(d, k, &s, &len);
    if (st != PH_OK)
        return st;
    if (len / 2 > max_bytes)
        return bad(d, k, "is too long");
    unsigned char *buf = malloc(len / 2 + 1);
    if (buf == NULL)
        return ph_diag_set(d->diag, PH_E_NOMEM, 0, "out of memory");
    if (!ph_hex_decode(s, len, buf, NULL)) {
        free(buf);
        return bad(d, k, "is not lowercase hex");
    }
    buf[len / 2] = '\0';
    *out = buf;
    *out_len = len / 2;
    return PH_OK;
}

static ph_status decode_filename(decoder *d, ph_artifact_metadata *m)
{
    bool plain = json_object_get(d->root, "filename") != NULL;
    bool hex = json_object_get(d->root, "filename_hex") != NULL;
    if (plain == hex)
        return bad(d, "filename", "must appear exactly once (filename or filename_hex)");
    if (hex) {
        unsigned char *b = NULL;
        ph_status st = get_hex(d, "filename_hex", PH_ARTIFACT_FILENAME_MAX, &b, &m->filename_len);
        m->filename = (char *)b;
        if (st == PH_OK && ph_utf8_valid(m->filename, m->filename_len))
            return bad(d, "filename_hex", "holds valid UTF-8 (must be filename)");
        return st;
    }
    const char *s = NULL;
    size_t len = 0;
    ph_status st = get_string(d, "filename", &s, &len);
    if (st != PH_OK)
        return st;
    if (len > PH_ARTIFACT_FILENAME_MAX)
        return bad(d, "filename", "is too long");
    m->filename = malloc(len + 1);
    if (m->filename == NULL)
        return ph_diag_set(d->diag, PH_E_NOMEM, 0, "out of memory");
    memcpy(m->filename, s, len);
    m->filename[len] = '\0';
    m->filename_len = len;
    return PH_OK;
}

static ph_status decode_members(decoder *d, ph_artifact_metadata *m)
{
    int64_t v = 0, size = 0;
    const char *s = NULL;
    size_t len = 0;
    unsigned char *sha = NULL;
    size_t sha_len = 0;
    ph_status st;
    if ((st = get_int(d, "v", &v)) != PH_OK)
        return st;
    if (v != FORMAT_VERSION)
        return bad(d, "v", "is not a supported version");
    if ((st = get_hex(d, "tenant_id_hex", PH_ARTIFACT_TENANT_MAX, &m->tenant_id,
                      &m->tenant_id_len)) != PH_OK)
        return st;
    if ((st = get_string(d, "artifact_id", &s, &len)) != PH_OK)
        return st;
    if (!ph_artifact_id_valid(s, len))
        return bad(d, "artifact_id", "is not 32 lowercase hex characters");
    memcpy(m->artifact_id, s, PH_ARTIFACT_ID_LEN + 1);
    if ((st = decode_filename(d, m)) != PH_OK ||
        (st = get_text(d, "content_type", &m->content_type)) != PH_OK ||
        (st = get_text(d, "run_id", &m->run_id)) != PH_OK ||
        (st = get_text(d, "source_path", &m->source_path)) != PH_OK ||
        (st = get_int(d, "size", &size)) != PH_OK ||
        (st = get_hex(d, "sha256", PH_ARTIFACT_SHA256_LEN, &sha, &sha_len)) != PH_OK)
        return st;
    m->size = (uint64_t)size;
    bool sha_ok = sha_len == PH_ARTIFACT_SHA256_LEN;
    if (sha_ok)
        memcpy(m->sha256, sha, PH_ARTIFACT_SHA256_LEN);
    free(sha);
    if (!sha_ok)
        return bad(d, "sha256", "is not 64 hex characters");
    if ((st = get_int(d, "created_at", &m->created_at)) != PH_OK ||
        (st = get_int(d, "expires_at", &m->expires_at)) != PH_OK)
        return st;
    if (d->seen != json_object_size(d->root))
        return ph_diag_set(d->diag, PH_E_FORMAT, 0, "artifact metadata: unknown member");
    ph_diag inner;
    if (ph_artifact_metadata_check(m, &inner) != PH_OK)
        return ph_diag_set(d->diag, PH_E_FORMAT, 0, "artifact metadata: %s", inner.message);
    return PH_OK;
}

ph_status ph_artifact_metadata_decode(const char *text, size_t len, ph_artifact_metadata **out,
                                      ph_diag *diag)
{
    *out = NULL;
    if (len > PH_ARTIFACT_METADATA_MAX)
        return ph_diag_set(diag, PH_E_FORMAT, 0, "artifact metadata larger than %zu bytes",
                           (size_t)PH_ARTIFACT_METADATA_MAX);
    json_error_t err;
    decoder d = {.root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err),
                 .diag = diag};
    if (d.root == NULL)
        return ph_diag_set(diag, PH_E_FORMAT, (size_t)(err.position > 0 ? err.position : 0),
                           "artifact metadata is not JSON: %s", err.text);
    if (!json_is_object(d.root)) {
        json_decref(d.root);
        return ph_diag_set(diag, PH_E_FORMAT, 0, "artifact metadata is not a JSON object");
    }
    ph_artifact_metadata *m = calloc(1, sizeof *m);
    ph_status st = m ? decode_members(&d, m) : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    json_decref(d.root);
    if (st != PH_OK) {
        ph_artifact_metadata_free(&m);
        return st;
    }
    *out = m;
    return PH_OK;
}

static void *dup_bytes(const void *p, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        if (len)
            memcpy(c, p, len);
        c[len] = '\0';
    }
    return c;
}

ph_status ph_artifact_metadata_copy(const ph_artifact_metadata *m, ph_artifact_metadata **out,
                                    ph_diag *diag)
{
    ph_artifact_metadata *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    *c = *m;
    c->tenant_id = dup_bytes(m->tenant_id, m->tenant_id_len);
    c->filename = dup_bytes(m->filename ? m->filename : "", m->filename_len);
    c->content_type = dup_bytes(m->content_type ? m->content_type : "",
                                m->content_type ? strlen(m->content_type) : 0);
    c->run_id = dup_bytes(m->run_id ? m->run_id : "", m->run_id ? strlen(m->run_id) : 0);
    c->source_path = dup_bytes(m->source_path ? m->source_path : "",
                               m->source_path ? strlen(m->source_path) : 0);
    if (!c->tenant_id || !c->filename || !c->content_type || !c->run_id || !c->source_path) {
        ph_artifact_metadata_free(&c);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    *out = c;
    return PH_OK;
}
