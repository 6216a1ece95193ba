/*
 * fuzz/url.c - the strict URL / CONNECT authority parser (pinhole/url.h).
 *
 * Each input is parsed both as a URL and as a CONNECT authority. Invariants:
 *   - the status matches the reason (OK/allowed, DENIED/ip_literal,
 *     INVAL/parse_error) and a refusal leaves nothing dialable;
 *   - an input with whitespace, a control or non-ASCII byte or a backslash is
 *     never accepted;
 *   - an accepted host passes ph_host_check, every "xn--" label of it is a
 *     valid IDNA A-label, and it is the input's host bytes folded to
 *     lowercase; the path lies inside the input;
 *   - round trips: the canonical origin re-parses to the same scheme, host
 *     and port, and "host:port" re-parses as an authority to the same;
 *   - one parser: an accepted authority A gives the same host and port as
 *     the URL "http://A/", and the URL's host:port as an authority;
 *   - differential: libcurl's URL API (RFC 3986 style, default flags)
 *     extracts the same host (up to ASCII case) and port from every URL we
 *     accept (docs/url.md, "The differential campaign").
 */
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_alabel-int.h"
#include "pinhole/url.h"

#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

static void check_status(ph_status st, ph_reason reason)
{
    if (st == PH_OK)
        CHECK(reason == PH_REASON_ALLOWED);
    else if (st == PH_E_DENIED)
        CHECK(reason == PH_REASON_IP_LITERAL);
    else
        CHECK(st == PH_E_INVAL && reason == PH_REASON_PARSE_ERROR);
}

static bool has_forbidden_byte(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d[i] <= 0x20 || d[i] >= 0x7f || d[i] == '\\')
            return true;
    return false;
}

static void check_authority_round_trip(const char *host, uint16_t port)
{
    char hp[PH_HOST_PORT_MAX];
    size_t n = 0;
    CHECK(ph_format_host_port(host, port, hp, sizeof hp, &n) == PH_OK);
    CHECK(n == strlen(hp));
    ph_authority a;
    CHECK(ph_authority_parse(hp, n, &a, NULL) == PH_OK);
    CHECK(strcmp(a.host, host) == 0 && a.port == port);
}

/* libcurl reads the accepted url[0..size) (no NUL inside: refused) as
 * host:port too. */
static void check_curl_agrees(const uint8_t *data, size_t size, const ph_url *u)
{
    static char url[PH_URL_MAX_LEN + 1];
    memcpy(url, data, size);
    url[size] = '\0';
    CURLU *h = curl_url();
    CHECK(h != NULL);
    char *host = NULL, *port = NULL;
    CHECK(curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK);
    CHECK(curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK);
    CHECK(curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK);
    CHECK(strlen(host) == u->host_len);
    for (size_t i = 0; i < u->host_len; i++)
        CHECK(ph_ascii_lower((unsigned char)host[i]) == u->host[i]);
    char want[8];
    snprintf(want, sizeof want, "%u", (unsigned)u->port);
    CHECK(strcmp(port, want) == 0);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(h);
}

static void fuzz_url(const uint8_t *data, size_t size)
{
    ph_url u;
    ph_diag diag;
    memset(&diag, 0, sizeof diag);
    ph_status st = ph_url_parse((const char *)data, size, &u, &diag);
    check_status(st, u.reason);
    if (st != PH_OK) {
        CHECK(u.host[0] == '\0' && u.host_len == 0 && u.port == 0);
        CHECK(diag.offset <= size && diag.message[0] != '\0');
        return;
    }
    CHECK(!has_forbidden_byte(data, size));
    CHECK(u.scheme == PH_SCHEME_HTTP || u.scheme == PH_SCHEME_HTTPS);
    CHECK(u.host_len == strlen(u.host) && u.host_len > 0);
    CHECK(ph_host_check(u.host, u.host_len, NULL) == PH_HOST_OK);
    CHECK(ph_host_a_labels_valid(u.host, u.host_len, NULL));
    CHECK(u.port != 0);
    CHECK(u.port_explicit || u.port == ph_scheme_default_port(u.scheme));
    CHECK(u.path_offset <= size && u.path_len <= size - u.path_offset);
    CHECK(u.path_len == 0 || data[u.path_offset] == '/' || data[u.path_offset] == '?');
    /* the host is the input's bytes right after "scheme://", lowercased */
    size_t host_at = strlen(ph_scheme_name(u.scheme)) + 3;
    CHECK(host_at + u.host_len <= size);
    for (size_t i = 0; i < u.host_len; i++)
        CHECK(ph_ascii_lower(data[host_at + i]) == u.host[i]);
    check_curl_agrees(data, size, &u);

    char origin[PH_URL_ORIGIN_MAX];
    size_t n = 0;
    CHECK(ph_url_format_origin(&u, origin, sizeof origin, &n) == PH_OK);
    ph_url v;
    CHECK(ph_url_parse(origin, n, &v, NULL) == PH_OK);
    CHECK(v.scheme == u.scheme && v.port == u.port && strcmp(v.host, u.host) == 0);
    CHECK(v.path_len == 0);
    /* and the canonical form is a fixed point */
    char again[PH_URL_ORIGIN_MAX];
    CHECK(ph_url_format_origin(&v, again, sizeof again, NULL) == PH_OK);
    CHECK(strcmp(again, origin) == 0);
    check_authority_round_trip(u.host, u.port);
}

static void fuzz_authority(const uint8_t *data, size_t size)
{
    ph_authority a;
    ph_status st = ph_authority_parse((const char *)data, size, &a, NULL);
    check_status(st, a.reason);
    if (st != PH_OK) {
        CHECK(a.host[0] == '\0' && a.port == 0);
        return;
    }
    CHECK(!has_forbidden_byte(data, size));
    CHECK(a.host_len == strlen(a.host));
    CHECK(ph_host_check(a.host, a.host_len, NULL) == PH_HOST_OK);
    CHECK(ph_host_a_labels_valid(a.host, a.host_len, NULL));
    CHECK(a.port != 0);
    check_authority_round_trip(a.host, a.port);
    /* one parser: the same authority inside a URL means the same */
    char url[PH_AUTHORITY_MAX_LEN + 16];
    memcpy(url, "http://", 7);
    memcpy(url + 7, data, size);
    url[7 + size] = '/';
    ph_url u;
    CHECK(ph_url_parse(url, size + 8, &u, NULL) == PH_OK);
    CHECK(strcmp(u.host, a.host) == 0 && u.port == a.port && u.port_explicit);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_url(data, size);
    fuzz_authority(data, size);
    return 0;
}
