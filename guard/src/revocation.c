/* revocation.c - the revocation list (pinhole/revocation.h; the file format
 * is in docs/grants.md): parsed strictly, whole or not at all, kept sorted
 * by (tenant, lease) for a binary search per decision. */
#include "pinhole/revocation.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grant-int.h"
#include "pinhole/ascii.h"
#include "pinhole/diag.h"
#include "pinhole/grant.h"
#include "policy_file-int.h"

typedef struct entry {
    char tenant[PH_GRANT_FIELD_MAX + 1];
    char lease[PH_GRANT_FIELD_MAX + 1];
    int64_t until;
} entry;

struct ph_revocations {
    entry *e; /* sorted by (tenant, lease), no two alike */
    size_t n, cap;
};

ph_status ph_revocations_new(ph_revocations **out, ph_diag *diag)
{
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "revocations: missing argument");
    *out = calloc(1, sizeof **out);
    return *out != NULL ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
}

void ph_revocations_free(ph_revocations **r)
{
    if (r == NULL || *r == NULL)
        return;
    free((*r)->e);
    free(*r);
    *r = NULL;
}

size_t ph_revocations_count(const ph_revocations *r) { return r != NULL ? r->n : 0; }

static int cmp_key(const char *tenant, const char *lease, const entry *e)
{
    int c = strcmp(tenant, e->tenant);
    return c != 0 ? c : strcmp(lease, e->lease);
}

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return cmp_key(x->tenant, x->lease, y);
}

/* The index of (tenant, lease), or where it would go (*found false). */
static size_t search(const ph_revocations *r, const char *tenant, const char *lease, bool *found)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_key(tenant, lease, &r->e[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

bool ph_revocations_revoked(const ph_revocations *r, const char *tenant, const char *lease,
                            int64_t now)
{
    if (r == NULL || r->n == 0 || tenant == NULL || lease == NULL)
        return false;
    bool found;
    size_t i = search(r, tenant, lease, &found);
    return found && now < r->e[i].until;
}

size_t ph_revocations_live(const ph_revocations *r, int64_t now)
{
    size_t n = 0;
    for (size_t i = 0; r != NULL && i < r->n; i++)
        n += now < r->e[i].until;
    return n;
}

static bool field_ok(const char *s)
{
    return s != NULL && ph_grant_field_valid(s, strnlen(s, PH_GRANT_FIELD_MAX + 1));
}

ph_status ph_revocations_add(ph_revocations *r, const char *tenant, const char *lease,
                             int64_t until, ph_diag *diag)
{
    if (r == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "revocations: missing argument");
    if (!field_ok(tenant) || !field_ok(lease))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "tenant and lease must be 1..%d characters of [A-Za-z0-9._-]",
                           PH_GRANT_FIELD_MAX);
    if (until < 0 || until > PH_GRANT_TIME_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "until must be 0..%" PRId64 " (unix seconds)",
                           (int64_t)PH_GRANT_TIME_MAX);
    bool found;
    size_t i = search(r, tenant, lease, &found);
    if (found) {
        if (until > r->e[i].until)
            r->e[i].until = until;
        return PH_OK;
    }
    if (r->n >= PH_REVOCATIONS_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "more than %d revocations", PH_REVOCATIONS_MAX);
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        entry *e = realloc(r->e, cap * sizeof *e);
        if (e == NULL)
            return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        r->e = e;
        r->cap = cap;
    }
    memmove(&r->e[i + 1], &r->e[i], (r->n - i) * sizeof *r->e);
    snprintf(r->e[i].tenant, sizeof r->e[i].tenant, "%s", tenant);
    snprintf(r->e[i].lease, sizeof r->e[i].lease, "%s", lease);
    r->e[i].until = until;
    r->n++;
    return PH_OK;
}

/* A decimal time: no sign, no leading zero, at most PH_GRANT_TIME_MAX. */
static bool parse_time(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 12 || (n > 1 && s[0] == '0'))
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ph_is_digit(s[i]))
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > PH_GRANT_TIME_MAX)
        return false;
    *out = v;
    return true;
}

/* One "TENANT LEASE UNTIL" line (printable ASCII already checked) into e. */
static ph_status parse_line(const char *line, size_t len, size_t lineno, size_t off, entry *e,
                            ph_diag *diag)
{
    const char *f[3];
    size_t fl[3], nf = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && line[i] != ' ')
            continue;
        if (nf == 3)
            return ph_diag_set(diag, PH_E_FORMAT, off + i,
                               "line %zu: more than three fields (TENANT LEASE UNTIL)", lineno);
        f[nf] = line + start;
        fl[nf++] = i - start;
        start = i + 1;
    }
    if (nf != 3)
        return ph_diag_set(diag, PH_E_FORMAT, off,
                           "line %zu: expected TENANT LEASE UNTIL, one space apart", lineno);
    for (size_t k = 0; k < 2; k++)
        if (!ph_grant_field_valid(f[k], fl[k]))
            return ph_diag_set(diag, PH_E_FORMAT, off + (size_t)(f[k] - line),
                               "line %zu: the %s must be 1..%d characters of [A-Za-z0-9._-]",
                               lineno, k == 0 ? "tenant" : "lease", PH_GRANT_FIELD_MAX);
    if (!parse_time(f[2], fl[2], &e->until))
        return ph_diag_set(diag, PH_E_FORMAT, off + (size_t)(f[2] - line),
                           "line %zu: UNTIL must be unix seconds, 0..%" PRId64
                           ", without sign or leading zero",
                           lineno, (int64_t)PH_GRANT_TIME_MAX);
    memcpy(e->tenant, f[0], fl[0]);
    e->tenant[fl[0]] = '\0';
    memcpy(e->lease, f[1], fl[1]);
    e->lease[fl[1]] = '\0';
    return PH_OK;
}

/* One line into r's array (sorted and merged once the file is read). */
static ph_status add_line(void *ctx, const char *line, size_t len, size_t lineno, size_t off,
                          ph_diag *diag)
{
    ph_revocations *r = ctx;
    if (r->n >= PH_REVOCATIONS_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, off, "line %zu: more than %d revocations", lineno,
                           PH_REVOCATIONS_MAX);
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        entry *e = realloc(r->e, cap * sizeof *e);
        if (e == NULL)
            return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        r->e = e;
        r->cap = cap;
    }
    ph_status st = parse_line(line, len, lineno, off, &r->e[r->n], diag);
    if (st == PH_OK)
        r->n++;
    return st;
}

ph_status ph_revocations_parse(const char *text, size_t len, ph_revocations **out, ph_diag *diag)
{
    if (out == NULL || (text == NULL && len > 0))
        return ph_diag_set(diag, PH_E_INVAL, 0, "revocations parse: missing argument");
    *out = NULL;
    if (len > PH_REVOCATIONS_FILE_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "the revocation list is over %d bytes",
                           PH_REVOCATIONS_FILE_MAX);
    ph_revocations *r = NULL;
    ph_status st = ph_revocations_new(&r, diag);
    if (st != PH_OK)
        return st;
    st = ph_policy_lines(text, len, add_line, r, diag);
    if (st != PH_OK)
        goto fail;
    /* Sorted, and one entry per lease with the latest until. */
    if (r->n > 0) /* an empty list has no array to sort */
        qsort(r->e, r->n, sizeof *r->e, cmp_entry);
    size_t w = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (w > 0 && cmp_entry(&r->e[w - 1], &r->e[i]) == 0) {
            if (r->e[i].until > r->e[w - 1].until)
                r->e[w - 1].until = r->e[i].until;
            continue;
        }
        r->e[w++] = r->e[i];
    }
    r->n = w;
    *out = r;
    return PH_OK;
fail:
    ph_revocations_free(&r);
    return st;
}

static ph_status parse_list(const char *text, size_t len, void *out, ph_diag *diag)
{
    return ph_revocations_parse(text, len, out, diag);
}

ph_status ph_revocations_load_file(const char *path, ph_revocations **out, ph_diag *diag)
{
    if (path == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "revocations load: missing argument");
    *out = NULL;
    return ph_policy_file_load(path, PH_REVOCATIONS_FILE_MAX, 022,
                               "lets group or others write it (and lift a revocation)", parse_list,
                               out, diag);
}

ph_status ph_revocations_format(const ph_revocations *r, int64_t now, char **out, size_t *len,
                                ph_diag *diag)
{
    if (r == NULL || out == NULL || len == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "revocations format: missing argument");
    /* A line is at most 64 + 1 + 64 + 1 + 12 + 1 bytes. */
    size_t cap = r->n * 144 + 1, at = 0;
    char *s = malloc(cap);
    if (s == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < r->n; i++)
        if (r->e[i].until > now)
            at += (size_t)snprintf(s + at, cap - at, "%s %s %" PRId64 "\n", r->e[i].tenant,
                                   r->e[i].lease, r->e[i].until);
    s[at] = '\0';
    *out = s;
    *len = at;
    return PH_OK;
}
