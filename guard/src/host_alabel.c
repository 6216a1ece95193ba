/*
 * host_alabel.c - IDN A-label validation (host_alabel-int.h).
 *
 * Why the URL parser needs it: an "xn--" label that is not valid Punycode, or
 * that decodes to something IDNA refuses ("xn--a", "xn--1ug" (a lone
 * zero-width joiner), "xn--xn--...", "xn---abc"), is refused by every WHATWG
 * URL parser while RFC 3986 parsers (curl) pass it through: two parsers, two
 * answers, so the URL is refused. policyc refuses the same labels in
 * allowlists with the same round trip, so such a host could never have
 * matched a rule anyway.
 *
 * libidn2 does the decoding and the checks (never hand-rolled). It only ever
 * sees labels that are already lowercase LDH ASCII starting with "xn--", so
 * its STD3 character deletion (STYLE.md) cannot change what we check.
 */
#include "host_alabel-int.h"

#include <idn2.h>
#include <string.h>

#include "pinhole/host.h"

static const int idn_flags = IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL;

static bool a_label_valid(const char *label, size_t len)
{
    char buf[PH_LABEL_MAX + 1];
    if (len > PH_LABEL_MAX)
        return false;
    memcpy(buf, label, len);
    buf[len] = '\0';
    char *u = NULL, *a = NULL;
    bool ok = idn2_to_unicode_8z8z(buf, &u, 0) == IDN2_OK &&
              idn2_to_ascii_8z(u, &a, idn_flags) == IDN2_OK && strcmp(a, buf) == 0;
    idn2_free(u);
    idn2_free(a);
    return ok;
}

bool ph_host_a_labels_valid(const char *host, size_t len, size_t *where)
{
    /* Most names have no '-' at all, so no "xn--" label: one memchr. */
    if (len == 0 || memchr(host, '-', len) == NULL)
        return true;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && host[i] != '.')
            continue;
        size_t n = i - start;
        if (n >= 4 && memcmp(host + start, "xn--", 4) == 0 && !a_label_valid(host + start, n)) {
            if (where)
                *where = start;
            return false;
        }
        start = i + 1;
    }
    return true;
}
