/*
 * rule_host.c - a rule's host: canonical names, wildcards, no IP, no
 * allow-everything, and an exact fix in the help line for non-canonical input.
 *
 * The fix is computed, never guessed: lowercase ASCII, one trailing dot
 * removed, and each non-ASCII label converted to its A-label by libidn2.
 * ASCII labels never go through libidn2 (with STD3 rules it silently deletes
 * characters, turning "ex@mple.com" into "exmple.com"); the candidate is then
 * checked with the one definition of a canonical host (pinhole/host.h), and
 * its xn-- labels with the URL parser's own A-label check.
 */
#include <idn2.h>
#include <libpsl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compiler-int.h"
#include "load-int.h"
#include "pinhole/host.h"
#include "scalar.h"

/* Worst case for an A-label candidate: every input byte becomes at most a
 * few ASCII bytes; anything longer than this is refused as too long before
 * any conversion is attempted. */
#define RAW_HOST_MAX 1024
#define CAND_MAX 2048

static const int idn_flags = IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL;

/* The public suffix data, loaded once per process and kept until exit: the
 * system's list when present (the newest), else the copy built into libpsl.
 * NULL when neither exists, and then every wildcard is refused. */
static const psl_ctx_t *psl_ctx;
static pthread_once_t psl_once = PTHREAD_ONCE_INIT;

static void load_public_suffixes(void)
{
    psl_ctx = psl_latest(NULL);
    if (!psl_ctx)
        psl_ctx = psl_builtin();
}

static const psl_ctx_t *public_suffixes(void)
{
    pthread_once(&psl_once, load_public_suffixes);
    return psl_ctx;
}

static bool is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

typedef struct candidate {
    char text[CAND_MAX];
    size_t len;
    bool had_upper, had_trailing_dot, had_unicode;
    bool unicode_failed;
} candidate;

/* Builds the canonical spelling of name[0..len) (see the file comment). */
static void make_candidate(const char *name, size_t len, candidate *c)
{
    /* Not memset: this runs once per rule and text is large. */
    c->len = 0;
    c->had_upper = c->had_trailing_dot = c->had_unicode = c->unicode_failed = false;
    /* Fast path, the common case: already lowercase LDH without a trailing
     * dot, so the candidate is the input itself. */
    bool plain = len > 0 && len < CAND_MAX && name[len - 1] != '.';
    for (size_t i = 0; plain && i < len; i++)
        plain = ph_is_ldh((unsigned char)name[i]) || name[i] == '.';
    if (plain) {
        memcpy(c->text, name, len);
        c->text[len] = '\0';
        c->len = len;
        return;
    }
    if (len > 1 && name[len - 1] == '.') {
        c->had_trailing_dot = true;
        len--;
    }
    size_t start = 0;
    while (start <= len) {
        size_t end = start;
        while (end < len && name[end] != '.')
            end++;
        const char *label = name + start;
        size_t llen = end - start;
        if (start > 0 && c->len < CAND_MAX - 1)
            c->text[c->len++] = '.';
        if (is_ascii(label, llen)) {
            for (size_t i = 0; i < llen && c->len < CAND_MAX - 1; i++) {
                if (ph_is_upper((unsigned char)label[i]))
                    c->had_upper = true;
                c->text[c->len++] = (char)ph_ascii_lower((unsigned char)label[i]);
            }
        } else {
            c->had_unicode = true;
            char u[RAW_HOST_MAX + 1];
            memcpy(u, label, llen);
            u[llen] = '\0';
            char *a = NULL;
            if (memchr(label, '\0', llen) || idn2_to_ascii_8z(u, &a, idn_flags) != IDN2_OK) {
                c->unicode_failed = true;
            } else {
                size_t alen = strlen(a);
                if (c->len + alen < CAND_MAX - 1) {
                    memcpy(c->text + c->len, a, alen);
                    c->len += alen;
                } else {
                    c->unicode_failed = true;
                }
            }
            idn2_free(a);
        }
        start = end + 1;
    }
    c->text[c->len] = '\0';
}

static pc_code code_for(ph_host_error e)
{
    switch (e) {
    case PH_HOST_EMPTY: return PC_E_HOST_EMPTY;
    case PH_HOST_TOO_LONG:
    case PH_HOST_LABEL_TOO_LONG: return PC_E_HOST_LENGTH;
    case PH_HOST_SINGLE_LABEL: return PC_E_HOST_SINGLE_LABEL;
    case PH_HOST_IP_LITERAL: return PC_E_HOST_IP;
    case PH_HOST_UPPERCASE: return PC_E_HOST_UPPERCASE;
    case PH_HOST_NON_ASCII: return PC_E_HOST_UNICODE;
    default: return PC_E_HOST_SYNTAX;
    }
}

static bool only_stars_and_dots(const char *s, size_t n)
{
    bool star = false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '*')
            star = true;
        else if (s[i] != '.')
            return false;
    }
    return star;
}

/* "https://example.com" and "example.com:443" contain ':' and so count as IP
 * literals under pinhole/host.h; say what they really are instead. */
static bool looks_like_url_or_host_port(pc_loader *L, const pc_scalar *s, const char *name,
                                        size_t len)
{
    char q[PC_QUOTE_MAX];
    const char *scheme_end = len > 3 ? memchr(name, ':', len) : NULL;
    if (scheme_end && (size_t)(name + len - scheme_end) > 3 && memcmp(scheme_end, "://", 3) == 0) {
        pc_report(L, PC_E_HOST_SYNTAX, s->pos, "write only the host name, e.g. api.example.com",
                  "host '%s' is a URL", pc_quote(q, sizeof q, s->value, s->len));
        return true;
    }
    const char *colon = memchr(name, ':', len);
    if (!colon || memchr(colon + 1, ':', (size_t)(name + len - colon - 1)) || colon + 1 == name + len)
        return false;
    for (const char *p = colon + 1; p < name + len; p++)
        if (!ph_is_digit((unsigned char)*p))
            return false;
    bool has_letter = false;
    for (const char *p = name; p < colon; p++)
        has_letter |= ph_is_lower((unsigned char)*p) || ph_is_upper((unsigned char)*p);
    if (!has_letter)
        return false; /* "1.2.3.4:80" is an IP address: PC032 */
    char help[PC_QUOTE_MAX + 64];
    char qh[PC_QUOTE_MAX], qp[16];
    snprintf(help, sizeof help, s->value[0] == '*' ? "write host: \"%s\" and ports: [%s]"
                                                  : "write host: %s and ports: [%s]",
             pc_quote(qh, sizeof qh, s->value, (size_t)(colon - s->value)),
             pc_quote(qp, sizeof qp, colon + 1, (size_t)(name + len - colon - 1)));
    pc_report(L, PC_E_HOST_SYNTAX, s->pos, help, "host '%s' contains a port",
              pc_quote(q, sizeof q, s->value, s->len));
    return true;
}

bool pc_report_wildcard_dns(pc_loader *L, const pc_scalar *s, const char *name, size_t len)
{
    const ph_wildcard_dns_service *w = ph_wildcard_dns_find(name, len);
    if (w == NULL)
        return false;
    char q[PC_QUOTE_MAX];
    pc_report(L, PC_E_WILDCARD_DNS, s->pos,
              "name the destination by its own DNS name; no rule may name a wildcard-DNS service",
              "host '%s' is under %s, a wildcard-DNS service (%s; source: %s)",
              pc_quote_scalar(q, s), w->domain, ph_wildcard_dns_describe(w), w->source);
    return true;
}

bool pc_check_host(pc_loader *L, const pc_scalar *s, char **host, bool *wildcard)
{
    char q[PC_QUOTE_MAX]; /* quoted only when reported: this runs once per rule */
    *host = NULL;
    *wildcard = false;
    const char *wc_help = "write one exact host (api.example.com) or one wildcard label "
                          "over a domain (*.example.com)";

    if (s->len == 0 || pc_scalar_is_null(s)) {
        pc_report(L, PC_E_HOST_EMPTY, s->pos, "write the destination's name, e.g. api.example.com",
                  "host is empty");
        return false;
    }
    if (only_stars_and_dots(s->value, s->len)) {
        pc_report(L, PC_E_HOST_ALLOW_ALL, s->pos, wc_help,
                  "host '%s' would allow every destination: there is no open mode", pc_quote_scalar(q, s));
        return false;
    }
    if (s->len > RAW_HOST_MAX) {
        pc_report(L, PC_E_HOST_LENGTH, s->pos, NULL, "host is %zu bytes long (limit %d)", s->len,
                  PH_HOST_MAX);
        return false;
    }
    const char *name = s->value;
    size_t len = s->len;
    if (len >= 2 && name[0] == '*' && name[1] == '.') {
        *wildcard = true;
        name += 2;
        len -= 2;
    }
    if (memchr(name, '*', len) || (!*wildcard && s->value[0] == '*')) {
        pc_report(L, PC_E_WILDCARD_POSITION, s->pos, wc_help,
                  "misplaced '*' in '%s': a wildcard is '*.' followed by a domain and stands "
                  "for exactly one leftmost label", pc_quote_scalar(q, s));
        return false;
    }
    if (memchr(name, '\0', len)) {
        pc_report(L, PC_E_HOST_SYNTAX, s->pos, NULL, "host '%s' contains a NUL character", pc_quote_scalar(q, s));
        return false;
    }

    if (looks_like_url_or_host_port(L, s, name, len))
        return false;

    candidate c;
    make_candidate(name, len, &c);
    /* The common case, a name already canonical: ph_host_check passes, so
     * it is no IP literal either (the candidate is the name itself).
     * Anything else takes the checks below, in their order, for the exact
     * report. */
    bool canonical = c.len == len && memcmp(c.text, name, len) == 0 &&
                     ph_host_check(c.text, c.len, NULL) == PH_HOST_OK;
    if (!canonical &&
        (ph_host_is_ip_literal(name, len) ||
         (!c.unicode_failed && ph_host_is_ip_literal(c.text, c.len)))) {
        pc_report(L, PC_E_HOST_IP, s->pos, "name the destination by its DNS name",
                  "'%s' is an IP address: destinations are host names only", pc_quote_scalar(q, s));
        return false;
    }
    if (c.unicode_failed) {
        pc_report(L, PC_E_HOST_UNICODE, s->pos, NULL,
                  "host '%s' is not ASCII and has no valid A-label (IDNA2008)", pc_quote_scalar(q, s));
        return false;
    }
    size_t where = 0;
    ph_host_error e = canonical ? PH_HOST_OK : ph_host_check(c.text, c.len, &where);
    if (e == PH_HOST_SINGLE_LABEL && *wildcard) {
        pc_report(L, PC_E_WILDCARD_PUBLIC, s->pos, "list the exact hosts you need",
                  "wildcard '%s' covers a top-level domain", pc_quote_scalar(q, s));
        return false;
    }
    if (e != PH_HOST_OK) {
        pc_report(L, code_for(e), s->pos, NULL, "invalid host '%s': %s", pc_quote_scalar(q, s),
                  ph_host_error_string(e));
        return false;
    }
    /* Judged on the canonical spelling, before the spelling errors: fixing
     * the case or the trailing dot of "*.NIP.IO." would not make it valid. */
    if (pc_report_wildcard_dns(L, s, c.text, c.len))
        return false;
    /* Every name under *.B is at least "x." + B: past 251 bytes of base the
     * rule could never match, and a rule that matches nothing is a mistake. */
    if (*wildcard && c.len + 2 > PH_HOST_MAX) {
        pc_report(L, PC_E_HOST_LENGTH, s->pos, "shorten the domain after '*.' to at most 251 bytes",
                  "wildcard '%s' matches no name: the names under it are longer than %d bytes",
                  pc_quote_scalar(q, s), PH_HOST_MAX);
        return false;
    }
    const char *prefix = *wildcard ? "*." : "";
    if (c.len != len || memcmp(c.text, name, len) != 0) {
        char help[CAND_MAX + 32];
        snprintf(help, sizeof help, "write '%s%s'", prefix, c.text);
        if (c.had_unicode)
            pc_report(L, PC_E_HOST_UNICODE, s->pos, help,
                      "host '%s' is not ASCII: write its A-label (punycode)", pc_quote_scalar(q, s));
        else if (c.had_upper)
            pc_report(L, PC_E_HOST_UPPERCASE, s->pos, help, "host '%s' is not lowercase", pc_quote_scalar(q, s));
        else
            pc_report(L, PC_E_HOST_TRAILING_DOT, s->pos, help, "host '%s' ends with a dot", pc_quote_scalar(q, s));
        return false;
    }
    /* The same round trip as the URL parser's (guard/src/host_alabel.c), so
     * an allowlist can only name hosts a URL can reach. */
    size_t bad_at = 0;
    if (!ph_host_a_labels_valid(c.text, c.len, &bad_at)) {
        const char *bad = c.text + bad_at;
        const char *dot = memchr(bad, '.', c.len - bad_at);
        size_t bad_len = dot ? (size_t)(dot - bad) : c.len - bad_at;
        char ql[PC_QUOTE_MAX];
        pc_report(L, PC_E_HOST_PUNYCODE, s->pos, NULL,
                  "'%s' in host '%s' is not a valid IDNA A-label", pc_quote(ql, sizeof ql, bad, bad_len),
                  pc_quote_scalar(q, s));
        return false;
    }
    if (*wildcard) {
        const psl_ctx_t *psl = public_suffixes();
        if (!psl || psl_is_public_suffix2(psl, c.text, PSL_TYPE_ANY)) {
            pc_report(L, PC_E_WILDCARD_PUBLIC, s->pos,
                      "list the exact hosts you need, or a wildcard over a domain under it",
                      psl ? "wildcard '%s' covers a public suffix: anyone can register names under it"
                          : "wildcard '%s' refused: no public suffix list is available",
                      pc_quote_scalar(q, s));
            return false;
        }
    }
    *host = malloc(c.len + 3);
    if (!*host) {
        L->nomem = true;
        return false;
    }
    size_t plen = strlen(prefix);
    memcpy(*host, prefix, plen);
    memcpy(*host + plen, c.text, c.len + 1);
    return true;
}
