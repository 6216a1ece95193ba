/* store_s3_list.c - removing an artifact (metadata first, then content),
 * listing the published ones, and the sweep of what dead writers left
 * (unfinished multipart uploads, content without metadata) once older than
 * staging_grace_seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_s3-int.h"

ph_status ph_s3_remove(ph_artifact_backend *base, const char *key, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    char content[NAME_MAX_LEN], meta[NAME_MAX_LEN];
    ph_s3_object_names(b, key, content, meta);
    CURL *h = ph_s3_handle_get(b);
    s3_resp r;
    ph_status st = ph_s3_head(b, h, meta, &r, diag);
    if (st == PH_OK)
        st = ph_s3_simple(b, h, "DELETE", meta, NULL, 0, NULL, 0, false, NULL,
                          diag); /* invisible */
    if (st == PH_OK)
        st = ph_s3_simple(b, h, "DELETE", content, NULL, 0, NULL, 0, false, NULL, diag);
    ph_s3_handle_put(b, h);
    return st;
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* Classifies a listed name: 1 content, 2 metadata, 0 not ours. *key gets K. */
static int classify(const s3_backend *b, const char *name, char key[static PH_ARTIFACT_KEY_LEN + 1])
{
    size_t pl = strlen(b->cfg.prefix), n = strlen(name);
    if (n < pl + 4 + PH_ARTIFACT_KEY_LEN || strncmp(name, b->cfg.prefix, pl) != 0 ||
        name[pl] != '/' || name[pl + 3] != '/')
        return 0;
    const char *k = name + pl + 4;
    if (!is_hex(k, PH_ARTIFACT_KEY_LEN) || memcmp(k, name + pl + 1, 2) != 0)
        return 0;
    memcpy(key, k, PH_ARTIFACT_KEY_LEN);
    key[PH_ARTIFACT_KEY_LEN] = '\0';
    const char *rest = k + PH_ARTIFACT_KEY_LEN;
    if (*rest == '\0')
        return 1;
    return strcmp(rest, ".meta") == 0 ? 2 : 0;
}

static int64_t parse_iso_time(ph_s3_span sp)
{
    char t[40];
    if (!ph_s3_xml_text(sp, t, sizeof t))
        return -1;
    struct tm tm = {0};
    if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

typedef struct listed {
    char key[PH_ARTIFACT_KEY_LEN + 1];
    int kind;
    int64_t modified;
} listed;

typedef bool (*page_fn)(void *arg, const listed *items, size_t n);

/* Walks ListObjectsV2 under the prefix, a page at a time (continuation
 * tokens), handing our names to fn in listing order. */
static ph_status walk_objects(s3_backend *b, CURL *h, page_fn fn, void *arg, ph_diag *diag)
{
    char prefix[sizeof b->cfg.prefix + 2], token[1024] = "";
    snprintf(prefix, sizeof prefix, "%s/", b->cfg.prefix);
    listed *items = malloc(1000 * sizeof *items);
    if (items == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st = PH_OK;
    for (bool more = true; more && st == PH_OK;) {
        ph_sigv4_pair q[4] = {{"list-type", "2"}, {"prefix", prefix}, {"max-keys", "1000"}};
        size_t nq = 3;
        if (token[0])
            q[nq++] = (ph_sigv4_pair){"continuation-token", token};
        s3_resp r;
        st = ph_s3_simple(b, h, "GET", NULL, q, nq, NULL, 0, false, &r, diag);
        if (st != PH_OK)
            break;
        const char *doc = (const char *)r.body;
        st = ph_s3_xml_check(doc, r.len, diag);
        size_t pos = 0, n = 0;
        ph_s3_span c;
        while (st == PH_OK && n < 1000 && ph_s3_xml_next(doc, r.len, &pos, "Contents", &c) == PH_OK) {
            size_t ip = 0;
            ph_s3_span ks, ms;
            char name[NAME_MAX_LEN];
            if (ph_s3_xml_next(c.p, c.len, &ip, "Key", &ks) != PH_OK ||
                !ph_s3_xml_text(ks, name, sizeof name))
                continue;
            int kind = classify(b, name, items[n].key);
            if (kind == 0)
                continue;
            items[n].kind = kind;
            ip = 0;
            items[n].modified = ph_s3_xml_next(c.p, c.len, &ip, "LastModified", &ms) == PH_OK
                                    ? parse_iso_time(ms)
                                    : -1;
            n++;
        }
        size_t tp = 0;
        ph_s3_span t;
        char trunc[8] = "";
        more = ph_s3_xml_next(doc, r.len, &tp, "IsTruncated", &t) == PH_OK &&
               ph_s3_xml_text(t, trunc, sizeof trunc) && strcmp(trunc, "true") == 0;
        tp = 0;
        if (more && (ph_s3_xml_next(doc, r.len, &tp, "NextContinuationToken", &t) != PH_OK ||
                     !ph_s3_xml_text(t, token, sizeof token) || token[0] == '\0'))
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: truncated listing without a token");
        ph_s3_resp_free(&r);
        if (st == PH_OK && !fn(arg, items, n))
            more = false;
    }
    free(items);
    return st;
}

typedef struct list_ctx {
    s3_backend *b;
    CURL *h;
    ph_artifact_backend_visit_fn visit;
    void *arg;
} list_ctx;

static bool list_page(void *arg, const listed *items, size_t n)
{
    list_ctx *c = arg;
    char content[NAME_MAX_LEN], meta_name[NAME_MAX_LEN];
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != 2)
            continue;
        ph_s3_object_names(c->b, items[i].key, content, meta_name);
        char *meta = NULL;
        size_t len = 0;
        ph_status st = ph_s3_get_meta(c->b, c->h, meta_name, &meta, &len, NULL);
        if (st == PH_E_NOT_FOUND)
            continue; /* deleted while we listed it */
        bool more = c->visit(c->arg, items[i].key, st == PH_OK ? meta : NULL, len);
        free(meta);
        if (!more)
            return false;
    }
    return true;
}

ph_status ph_s3_list(ph_artifact_backend *base, ph_artifact_backend_visit_fn visit, void *arg,
                     ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    CURL *h = ph_s3_handle_get(b), *h2 = ph_s3_handle_get(b);
    list_ctx c = {.b = b, .h = h2, .visit = visit, .arg = arg};
    ph_status st = walk_objects(b, h, list_page, &c, diag);
    ph_s3_handle_put(b, h2);
    ph_s3_handle_put(b, h);
    return st;
}

typedef struct upload_visit {
    s3_backend *b;
    CURL *h;
    int64_t cutoff; /* initiated at or before: abandoned */
    uint64_t seen, removed;
    bool abort;
} upload_visit;

/* Walks ListMultipartUploads under the prefix; aborts the abandoned ones
 * when u->abort. */
static ph_status walk_uploads(upload_visit *u, ph_diag *diag)
{
    s3_backend *b = u->b;
    char prefix[sizeof b->cfg.prefix + 2], key_marker[NAME_MAX_LEN] = "", id_marker[256] = "";
    snprintf(prefix, sizeof prefix, "%s/", b->cfg.prefix);
    ph_status st = PH_OK;
    for (bool more = true; more && st == PH_OK;) {
        ph_sigv4_pair q[4] = {{"uploads", NULL}, {"prefix", prefix}};
        size_t nq = 2;
        if (key_marker[0]) {
            q[nq++] = (ph_sigv4_pair){"key-marker", key_marker};
            q[nq++] = (ph_sigv4_pair){"upload-id-marker", id_marker};
        }
        s3_resp r;
        st = ph_s3_simple(b, u->h, "GET", NULL, q, nq, NULL, 0, false, &r, diag);
        if (st != PH_OK)
            break;
        const char *doc = (const char *)r.body;
        st = ph_s3_xml_check(doc, r.len, diag);
        size_t pos = 0;
        ph_s3_span up;
        while (st == PH_OK && ph_s3_xml_next(doc, r.len, &pos, "Upload", &up) == PH_OK) {
            size_t ip = 0;
            ph_s3_span s;
            char name[NAME_MAX_LEN], id[256], k[PH_ARTIFACT_KEY_LEN + 1];
            if (ph_s3_xml_next(up.p, up.len, &ip, "Key", &s) != PH_OK ||
                !ph_s3_xml_text(s, name, sizeof name) || classify(b, name, k) != 1)
                continue;
            ip = 0;
            if (ph_s3_xml_next(up.p, up.len, &ip, "UploadId", &s) != PH_OK ||
                !ph_s3_xml_text(s, id, sizeof id))
                continue;
            ip = 0;
            int64_t started = ph_s3_xml_next(up.p, up.len, &ip, "Initiated", &s) == PH_OK
                                  ? parse_iso_time(s)
                                  : -1;
            u->seen++;
            if (u->abort && started >= 0 && started <= u->cutoff) {
                ph_sigv4_pair aq[] = {{"uploadId", id}};
                if (ph_s3_simple(b, u->h, "DELETE", name, aq, 1, NULL, 0, false, NULL, NULL) ==
                    PH_OK)
                    u->removed++;
            }
        }
        size_t tp = 0;
        ph_s3_span t;
        char trunc[8] = "";
        more = ph_s3_xml_next(doc, r.len, &tp, "IsTruncated", &t) == PH_OK &&
               ph_s3_xml_text(t, trunc, sizeof trunc) && strcmp(trunc, "true") == 0;
        if (more) {
            size_t a = 0, c = 0;
            ph_s3_span km, im;
            if (ph_s3_xml_next(doc, r.len, &a, "NextKeyMarker", &km) != PH_OK ||
                ph_s3_xml_next(doc, r.len, &c, "NextUploadIdMarker", &im) != PH_OK ||
                !ph_s3_xml_text(km, key_marker, sizeof key_marker) ||
                !ph_s3_xml_text(im, id_marker, sizeof id_marker))
                st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: truncated upload listing");
        }
        ph_s3_resp_free(&r);
    }
    return st;
}

typedef struct orphan_ctx {
    s3_backend *b;
    CURL *h;
    int64_t cutoff;
    uint64_t removed;
    listed pending; /* a content object whose metadata has not been listed yet */
    bool has_pending;
} orphan_ctx;

/* A content object without metadata, old enough: its writer is gone. */
static void settle_pending(orphan_ctx *c)
{
    if (!c->has_pending)
        return;
    c->has_pending = false;
    if (c->pending.modified < 0 || c->pending.modified > c->cutoff)
        return;
    char content[NAME_MAX_LEN], meta[NAME_MAX_LEN];
    ph_s3_object_names(c->b, c->pending.key, content, meta);
    s3_resp r;
    if (ph_s3_head(c->b, c->h, meta, &r, NULL) == PH_E_NOT_FOUND &&
        ph_s3_simple(c->b, c->h, "DELETE", content, NULL, 0, NULL, 0, false, NULL, NULL) == PH_OK)
        c->removed++;
}

/* Listing order puts K right before K.meta, across pages too. */
static bool orphan_page(void *arg, const listed *items, size_t n)
{
    orphan_ctx *c = arg;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind == 2 && c->has_pending && strcmp(items[i].key, c->pending.key) == 0) {
            c->has_pending = false;
            continue;
        }
        settle_pending(c);
        if (items[i].kind == 1) {
            c->pending = items[i];
            c->has_pending = true;
        }
    }
    return true;
}

ph_status ph_s3_clean_staging(ph_artifact_backend *base, uint64_t *removed, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    CURL *h = ph_s3_handle_get(b), *h2 = ph_s3_handle_get(b);
    int64_t cutoff = (int64_t)time(NULL) - b->cfg.staging_grace_seconds;
    upload_visit u = {.b = b, .h = h, .cutoff = cutoff, .abort = true};
    ph_status st = walk_uploads(&u, diag);
    orphan_ctx o = {.b = b, .h = h2, .cutoff = cutoff};
    if (st == PH_OK)
        st = walk_objects(b, h, orphan_page, &o, diag);
    if (st == PH_OK)
        settle_pending(&o);
    *removed += u.removed + o.removed;
    ph_s3_handle_put(b, h2);
    ph_s3_handle_put(b, h);
    return st;
}

ph_status ph_s3_backend_count_uploads(ph_artifact_backend *base, uint64_t *n, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    upload_visit u = {.b = b, .h = ph_s3_handle_get(b)};
    ph_status st = walk_uploads(&u, diag);
    ph_s3_handle_put(b, u.h);
    *n = u.seen;
    return st;
}
