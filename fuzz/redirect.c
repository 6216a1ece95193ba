/* redirect.c - fuzzes ph_url_resolve_reference (guard/src/redirect.c), the
 * Location resolution a worker follows redirects with. Input: a base URL
 * line, then the Location (a fixed base when the line is not an accepted
 * URL). Invariants:
 *   - a result is NUL-terminated, fits, and holds no byte a parser reads
 *     differently (whitespace, controls, DEL, non-ASCII, backslash);
 *   - a reference without a scheme and without "//" never leaves the
 *     base's origin: the result starts with the base's canonical origin
 *     followed by '/', and, when the URL parser accepts it, parses to the
 *     base's scheme, host and port;
 *   - a result is always resolved the same way again (absolute input);
 *   - libcurl's URL API, resolving the same Location against the same base
 *     (what libcurl itself would follow), finds the same scheme, host and
 *     port for every result the URL parser accepts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <strings.h>

#include "pinhole/redirect.h"

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        if (!(x))                                                                                 \
            abort();                                                                              \
    } while (0)

/* RFC 3986 scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" */
static bool has_scheme(const char *s)
{
    if (!((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z'))
        return false;
    size_t k = 1;
    while (((s[k] | 0x20) >= 'a' && (s[k] | 0x20) <= 'z') || (s[k] >= '0' && s[k] <= '9') ||
           s[k] == '+' || s[k] == '-' || s[k] == '.')
        k++;
    return s[k] == ':';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2 * PH_URL_MAX_LEN)
        return 0;
    char *in = malloc(size + 1);
    if (in == NULL)
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    char *nl = memchr(in, '\n', size);
    const char *base = "http://a.example/b/c/d;p?q", *loc = in;
    ph_url bu;
    if (nl != NULL) {
        *nl = '\0';
        if (ph_url_parse(in, strlen(in), &bu, NULL) == PH_OK)
            base = in;
        loc = nl + 1;
    }
    CHECK(ph_url_parse(base, strlen(base), &bu, NULL) == PH_OK);
    static char out[PH_URL_MAX_LEN + 1], again[PH_URL_MAX_LEN + 1];
    ph_status st = ph_url_resolve_reference(base, loc, out, sizeof out, NULL);
    if (st != PH_OK) {
        CHECK(out[0] == '\0');
        free(in);
        return 0;
    }
    size_t n = strnlen(out, sizeof out);
    CHECK(n < sizeof out && n > 0);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)out[i];
        CHECK(c > 0x20 && c < 0x7f && c != '\\');
    }
    if (!has_scheme(loc) && !(loc[0] == '/' && loc[1] == '/')) {
        char origin[PH_URL_ORIGIN_MAX];
        size_t olen = 0;
        CHECK(ph_url_format_origin(&bu, origin, sizeof origin, &olen) == PH_OK);
        CHECK(strncmp(out, origin, olen) == 0 && out[olen] == '/');
        ph_url ru;
        if (ph_url_parse(out, n, &ru, NULL) == PH_OK)
            CHECK(ru.scheme == bu.scheme && ru.port == bu.port && strcmp(ru.host, bu.host) == 0);
    }
    ph_url ou;
    if (ph_url_parse(out, n, &ou, NULL) == PH_OK) {
        CHECK(ph_url_resolve_reference(base, out, again, sizeof again, NULL) == PH_OK);
        CHECK(strcmp(again, out) == 0);
        CURLU *h = curl_url();
        char *scheme = NULL, *host = NULL, *port = NULL;
        if (h != NULL && curl_url_set(h, CURLUPART_URL, base, 0) == CURLUE_OK &&
            curl_url_set(h, CURLUPART_URL, loc, 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
            CHECK(strcasecmp(scheme, ph_scheme_name(ou.scheme)) == 0);
            CHECK(strcasecmp(host, ou.host) == 0);
            CHECK(strtoul(port, NULL, 10) == ou.port);
        }
        curl_free(scheme);
        curl_free(host);
        curl_free(port);
        curl_url_cleanup(h);
    }
    free(in);
    return 0;
}
