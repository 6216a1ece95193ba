/* load.c - the front end's entry points: read, parse, resolve includes, lint. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "load-int.h"
#include "pinhole/host.h"

void pc_report(pc_loader *L, pc_code code, pc_pos pos, const char *help, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *line = NULL;
    /* Stored diagnostics are capped; do not build source lines for ones that
     * will only be counted. */
    if (pos.line && L->diags->count < PC_MAX_STORED_DIAGNOSTICS)
        line = pc_source_line_text(&L->src, pos.line);
    if (pc_diagnostics_add(L->diags, code, L->file, pos.line, pos.line ? pos.col : 0, line, help,
                           "%s", msg) == PH_E_NOMEM)
        L->nomem = true;
    free(line);
}

const char *pc_quote(char *buf, size_t size, const char *s, size_t len)
{
    size_t o = 0, i = 0;
    const size_t room = size - 4; /* "..." and NUL */
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        size_t n = ph_utf8_decode((const unsigned char *)s + i, len - i, &cp);
        /* A hidden character (C1, bidi control, zero-width...) is spelled
         * out: raw, it would reorder or forge the message in a terminal. */
        bool hidden = n > 1 && pc_code_point_hidden(cp);
        bool printable = !hidden && (n > 1 || (c >= 0x20 && c < 0x7F));
        size_t need = printable ? n : hidden ? 6 : 4;
        if (o + need > room) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (printable) {
            memcpy(buf + o, s + i, n);
        } else if (hidden) {
            snprintf(buf + o, 7, "\\u%04X", (unsigned)cp);
        } else {
            snprintf(buf + o, 5, "\\x%02X", c);
        }
        o += need;
        i += n;
    }
    buf[o] = '\0';
    return buf;
}

bool pc_list_name_valid(const char *s, size_t len)
{
    if (len == 0 || len > PC_MAX_LIST_NAME)
        return false;
    if (!ph_is_lower((unsigned char)s[0]) && !ph_is_digit((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!ph_is_ldh(c) && c != '_')
            return false;
    }
    return true;
}

/* What libyaml's reader does not refuse but a reviewer must not be shown:
 * UTF-16 and UTF-32 (positions are counted on UTF-8 bytes, and libyaml would
 * only guess them from a byte order mark), and the deceptive characters of
 * pc_code_point_deceptive, comments included. Reports one PC003 and returns
 * false on the first. Stops at the first invalid UTF-8 sequence: libyaml
 * reports that one. */
static bool encoding_ok(pc_loader *L, const char *data, size_t len, bool had_bom)
{
    const char *help = "save the file as UTF-8 text";
    const unsigned char *p = (const unsigned char *)data;
    if (!had_bom && ((len >= 4 && memcmp(p, "\0\0\xFE\xFF", 4) == 0) ||
                     (len >= 4 && memcmp(p, "\xFF\xFE\0\0", 4) == 0))) {
        pc_report(L, PC_E_ENCODING, (pc_pos){1, 1}, help,
                  "the file is UTF-32 (it starts with a UTF-32 byte order mark)");
        return false;
    }
    if (!had_bom && len >= 2 && (memcmp(p, "\xFF\xFE", 2) == 0 || memcmp(p, "\xFE\xFF", 2) == 0)) {
        pc_report(L, PC_E_ENCODING, (pc_pos){1, 1}, help,
                  "the file is UTF-16 (it starts with a UTF-16 byte order mark)");
        return false;
    }
    /* UTF-16 without a mark: ASCII text has a NUL in every other byte. */
    if (len >= 2 && (p[0] == 0) != (p[1] == 0)) {
        pc_report(L, PC_E_ENCODING, (pc_pos){1, 1}, help,
                  "the file looks like UTF-16 or UTF-32 (NUL bytes between the characters)");
        return false;
    }
    for (size_t i = 0; i < len;) {
        /* ASCII, nearly all of an allowlist, eight bytes at a time. */
        if (p[i] < 0x80) {
            uint64_t w;
            for (; i + 8 <= len; i += 8) {
                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
            }
            while (i < len && p[i] < 0x80)
                i++;
            continue;
        }
        uint32_t cp;
        size_t n = ph_utf8_decode(p + i, len - i, &cp);
        if (n == 1) {
            if (p[i] >= 0x80)
                return true;
            i++;
            continue;
        }
        if (pc_code_point_deceptive(cp)) {
            bool line_break = cp == 0x85 || cp == 0x2028 || cp == 0x2029;
            pc_report(L, PC_E_ENCODING, pc_source_pos_of_offset(&L->src, i),
                      line_break ? "end lines with a plain line feed"
                                 : "remove it: it makes the text shown differ from the text read",
                      "%s (U+%04X) is not allowed anywhere in an allowlist",
                      line_break ? "a line separator editors do not show"
                      : cp == 0xFEFF ? "a byte order mark past the start of the file"
                                     : "a bidirectional control character",
                      (unsigned)cp);
            return false;
        }
        i += n;
    }
    return true;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

ph_status pc_policy_load_buffer(const char *data, size_t len, const char *display_name,
                                pc_policy **out, pc_diagnostics *diags)
{
    return pc_policy_load_buffer_limits(data, len, display_name, &PC_LOAD_LIMITS_DEFAULT, out, diags);
}

ph_status pc_policy_load_buffer_limits(const char *data, size_t len, const char *display_name,
                                       const pc_load_limits *limits, pc_policy **out,
                                       pc_diagnostics *diags)
{
    *out = NULL;
    pc_loader L = {.limits = *limits,
                   .file = display_name, .base_name = base_name(display_name), .diags = diags,
                   .errors_before = diags->errors};
    /* A UTF-8 byte order mark is not content. libyaml mishandles it when the
     * encoding is set (line 1 shifts one column right of the others), so it
     * is dropped here, for libyaml and for positions alike. */
    bool had_bom = len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0;
    if (had_bom) {
        data += 3;
        len -= 3;
    }
    pc_source_init(&L.src, data, len);
    ph_status st = PH_OK;
    if (len > PC_MAX_FILE_BYTES) {
        pc_report(&L, PC_E_FILE_TOO_LARGE, (pc_pos){0, 0}, "split the policy",
                  "file is %zu bytes (limit %zu)", len, PC_MAX_FILE_BYTES);
        st = PH_E_LIMIT;
        goto done;
    }
    L.policy = calloc(1, sizeof *L.policy);
    if (!L.policy || !(L.policy->file = strdup(display_name))) {
        st = PH_E_NOMEM;
        goto done;
    }
    bool yaml_ok = encoding_ok(&L, data, len, had_bom) && pc_parse_yaml(&L);
    /* After a YAML error the walk stopped early: lists after it were never
     * read, so include and duplicate checks would only add false errors. */
    if (yaml_ok && !L.nomem && pc_resolve_includes(&L) && !L.nomem)
        pc_lint_policy(&L);
    if (L.nomem)
        st = PH_E_NOMEM;
    else if (diags->errors > L.errors_before)
        st = PH_E_FORMAT;
done:
    free(L.port_pos);
    pc_source_free(&L.src);
    pc_diagnostics_sort(diags);
    if (st == PH_OK)
        *out = L.policy;
    else
        pc_policy_free(&L.policy);
    return st;
}

ph_status pc_policy_load_file(const char *path, const char *display_name, pc_policy **out,
                              pc_diagnostics *diags)
{
    *out = NULL;
    if (!display_name)
        display_name = path;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        pc_diagnostics_add(diags, PC_E_READ, display_name, 0, 0, NULL, NULL, "cannot open: %s",
                           strerror(e));
        pc_diagnostics_sort(diags);
        return PH_E_IO;
    }
    /* Read at most one byte past the limit, whatever the file type (a pipe or
     * a growing file has no trustworthy size); a regular file's size only
     * sizes the buffer and refuses a file that is already too large. */
    size_t cap = 64 * 1024, len = 0;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        if ((uint64_t)sb.st_size > PC_MAX_FILE_BYTES) {
            fclose(f);
            pc_diagnostics_add(diags, PC_E_FILE_TOO_LARGE, display_name, 0, 0, NULL,
                               "split the policy", "file is larger than %zu bytes",
                               PC_MAX_FILE_BYTES);
            pc_diagnostics_sort(diags);
            return PH_E_LIMIT;
        }
        if ((size_t)sb.st_size + 1 > cap)
            cap = (size_t)sb.st_size + 1; /* +1: EOF is seen without a realloc */
    }
    char *buf = malloc(cap);
    ph_status st = buf ? PH_OK : PH_E_NOMEM;
    while (st == PH_OK) {
        if (len == cap) {
            if (cap > PC_MAX_FILE_BYTES) {
                st = PH_E_LIMIT;
                break;
            }
            size_t ncap = cap * 2 > PC_MAX_FILE_BYTES + 1 ? PC_MAX_FILE_BYTES + 1 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                st = PH_E_NOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) {
                int e = errno;
                pc_diagnostics_add(diags, PC_E_READ, display_name, 0, 0, NULL, NULL,
                                   "cannot read: %s", strerror(e));
                st = PH_E_IO;
            }
            break;
        }
    }
    fclose(f);
    if (st == PH_E_LIMIT) {
        pc_diagnostics_add(diags, PC_E_FILE_TOO_LARGE, display_name, 0, 0, NULL,
                           "split the policy", "file is larger than %zu bytes", PC_MAX_FILE_BYTES);
    } else if (st == PH_OK) {
        st = pc_policy_load_buffer(buf, len, display_name, out, diags);
    }
    free(buf);
    pc_diagnostics_sort(diags);
    return st;
}

long pc_policy_find_list(const pc_policy *policy, const char *name)
{
    for (size_t i = 0; i < policy->nlists; i++)
        if (strcmp(policy->lists[i].name, name) == 0)
            return (long)i;
    return -1;
}
