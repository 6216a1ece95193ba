/* tls_hello.c - the ClientHello reader of a tunnel's inspection
 * (tls_hello.h).
 *
 * The hello is a handshake message that may be split over several records,
 * each with its 5-byte header, so the message is read through a cursor
 * that steps over record headers (checking each one) as it goes: the
 * message's own fields are read in order, each length checked against the
 * one enclosing it, and never copied but for the server name. The whole
 * input is read again on each call; the caller calls again only once `need`
 * bytes are there (the end of the record being read: the hello must end at
 * a record's end), so a hello trickled a byte at a time costs time linear
 * in its size times its records (at most PH_TLS_RECORDS_MAX).
 */
#include "tls_hello.h"

#include <string.h>

#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0x0000
/* encrypted_client_hello (RFC 9849: 0xfe0d; its drafts 08 to 12 took
 * 0xfe08 to 0xfe0c) and its predecessor encrypted_server_name (ESNI,
 * 0xffce): each carries a name the network does not see. */
#define EXT_ECH 0xfe0d
#define EXT_ECH_DRAFT_FIRST 0xfe08
#define EXT_ESNI 0xffce
#define NAME_HOST 0
#define LABEL_MAX 63

/* The cursor over the handshake bytes: p is the next input byte, rec_left
 * the bytes left in the current record. */
typedef struct rd {
    const uint8_t *buf;
    size_t len;
    size_t p;
    size_t rec_left;
    unsigned records;
    bool short_input;   /* ran out of input: INCOMPLETE */
    size_t need;        /* then: the input length worth calling again at */
    const char *err;    /* refused: why */
    size_t err_off;
} rd;

static bool fail(rd *r, const char *msg)
{
    if (r->err == NULL && !r->short_input) {
        r->err = msg;
        r->err_off = r->p < r->len ? r->p : r->len;
    }
    return false;
}

static bool out_of_input(rd *r, size_t need)
{
    if (r->err == NULL && !r->short_input) {
        r->short_input = true;
        r->need = need;
    }
    return false;
}

/* Steps into the next record when the current one is used up. */
static bool record(rd *r)
{
    if (r->rec_left > 0)
        return true;
    if (r->len - r->p < 5)
        return out_of_input(r, r->p + 5);
    const uint8_t *h = r->buf + r->p;
    size_t n = (size_t)h[3] << 8 | h[4];
    if (h[0] != PH_TLS_RECORD_HANDSHAKE)
        return fail(r, "not a TLS handshake record");
    if (h[1] != 3)
        return fail(r, "record version is not 3.x");
    if (n == 0 || n > PH_TLS_RECORD_MAX)
        return fail(r, "record length is 0 or over 2^14");
    if (++r->records > PH_TLS_RECORDS_MAX)
        return fail(r, "ClientHello split over too many records");
    r->p += 5;
    r->rec_left = n;
    return true;
}

/* Copies (to, when not NULL) or skips n bytes of the message. */
static bool take(rd *r, uint8_t *to, size_t n)
{
    while (n > 0) {
        if (!record(r))
            return false;
        size_t k = n < r->rec_left ? n : r->rec_left;
        if (r->len - r->p < k) {
            /* The record must arrive whole before anything changes. */
            return out_of_input(r, r->p + r->rec_left);
        }
        if (to != NULL) {
            memcpy(to, r->buf + r->p, k);
            to += k;
        }
        r->p += k;
        r->rec_left -= k;
        n -= k;
    }
    return true;
}

/* A big-endian number of `bytes` (1 to 3) bytes. */
static bool num(rd *r, size_t bytes, size_t *v)
{
    uint8_t b[3];
    const uint8_t *at = b;
    if (r->rec_left >= bytes && r->len - r->p >= bytes) {
        /* Inside the current record and the input (nearly always): read
         * where it is, as take would after the same checks. */
        at = r->buf + r->p;
        r->p += bytes;
        r->rec_left -= bytes;
    } else if (!take(r, b, bytes)) {
        return false;
    }
    *v = 0;
    for (size_t i = 0; i < bytes; i++)
        *v = *v << 8 | at[i];
    return true;
}

/* A length-prefixed vector: its length (prefix of `bytes` bytes) must be
 * within [lo, hi] and within *left, the bytes its enclosing block has
 * left (which loses the prefix and the vector). */
static bool vec(rd *r, size_t bytes, size_t lo, size_t hi, size_t *left, size_t *n,
                const char *what)
{
    if (*left < bytes)
        return fail(r, what);
    *left -= bytes;
    if (!num(r, bytes, n))
        return false;
    if (*n < lo || *n > hi || *n > *left)
        return fail(r, what);
    *left -= *n;
    return true;
}

/* An ASCII DNS name, no trailing dot (RFC 6066 section 3). */
static bool host_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > PH_TLS_NAME_MAX)
        return false;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
        if (++label > LABEL_MAX)
            return false;
    }
    return label > 0;
}

/* The server_name extension's body: exactly one host_name entry. */
static bool server_name(rd *r, size_t ext_len, ph_tls_hello *out)
{
    size_t left = ext_len, list, n, type;
    if (!vec(r, 2, 1, 0xffff, &left, &list, "server_name list length is wrong") )
        return false;
    if (left != 0)
        return fail(r, "server_name list does not fill its extension");
    if (list < 3)
        return fail(r, "server_name entry truncated");
    if (!num(r, 1, &type))
        return false;
    list -= 1;
    if (type != NAME_HOST)
        return fail(r, "server_name type is not host_name");
    if (!vec(r, 2, 1, PH_TLS_NAME_MAX, &list, &n, "server name length is wrong"))
        return false;
    if (list != 0)
        return fail(r, "several server names in one extension");
    if (!take(r, (uint8_t *)out->sni, n))
        return false;
    out->sni[n] = '\0';
    if (!host_name_ok(out->sni, n))
        return fail(r, "server name is not an ASCII DNS name without a trailing dot");
    out->sni_len = n;
    out->has_sni = true;
    return true;
}

/* The extension types seen so far (RFC 8446 4.2: each type once): a
 * 65536-bit set in 256 pages of 256 bits, a page cleared when a type in it
 * is first seen. A real hello's types fall in a handful of pages (those
 * under 256, GREASE, 0xfe0d, 0xff01): clearing the whole set for each hello
 * was 8 KiB of stores, most of a hello's parse, and of the level-1 cache. */
typedef struct ext_set {
    uint8_t used[32];       /* page p is cleared: bit p */
    uint8_t bits[256][32];
} ext_set;

/* Marks type as seen; false when it was already. */
static bool ext_first(ext_set *s, size_t type)
{
    size_t page = type >> 8 & 0xff, bit = type & 0xff;
    uint8_t pm = (uint8_t)(1u << (page & 7)), bm = (uint8_t)(1u << (bit & 7));
    if (!(s->used[page >> 3] & pm)) {
        s->used[page >> 3] |= pm;
        memset(s->bits[page], 0, sizeof s->bits[page]);
    }
    if (s->bits[page][bit >> 3] & bm)
        return false;
    s->bits[page][bit >> 3] |= bm;
    return true;
}

/* The ClientHello's body, body bytes long (RFC 8446 section 4.1.2). */
static bool client_hello(rd *r, size_t body, ph_tls_hello *out)
{
    size_t left = body, v, n;
    if (left < 34)
        return fail(r, "ClientHello shorter than its fixed fields");
    if (!num(r, 2, &v))
        return false;
    if (v >> 8 != 3)
        return fail(r, "ClientHello version is not 3.x");
    if (!take(r, NULL, 32)) /* random */
        return false;
    left -= 34;
    if (!vec(r, 1, 0, 32, &left, &n, "session id length is wrong") || !take(r, NULL, n))
        return false;
    if (!vec(r, 2, 2, 0xfffe, &left, &n, "cipher suite list length is wrong"))
        return false;
    if (n % 2 != 0)
        return fail(r, "cipher suite list length is odd");
    if (!take(r, NULL, n))
        return false;
    if (!vec(r, 1, 1, 0xff, &left, &n, "compression method list length is wrong") ||
        !take(r, NULL, n))
        return false;
    if (left == 0)
        return true; /* no extensions */
    size_t exts;
    if (!vec(r, 2, 0, 0xffff, &left, &exts, "extension block length is wrong"))
        return false;
    if (left != 0)
        return fail(r, "bytes after the extensions");
    ext_set seen; /* only its used pages are written (ext_first) */
    memset(seen.used, 0, sizeof seen.used);
    while (exts > 0) {
        size_t type, len;
        if (exts < 4)
            return fail(r, "extension header truncated");
        if (!num(r, 2, &type))
            return false;
        exts -= 2;
        if (!vec(r, 2, 0, 0xffff, &exts, &len, "extension length exceeds its block"))
            return false;
        if (!ext_first(&seen, type))
            return fail(r, "an extension type present twice");
        if (type == EXT_SERVER_NAME) {
            if (!server_name(r, len, out))
                return false;
            continue;
        }
        if ((type >= EXT_ECH_DRAFT_FIRST && type <= EXT_ECH) || type == EXT_ESNI)
            out->has_ech = true;
        if (!take(r, NULL, len))
            return false;
    }
    return true;
}

ph_tls_result ph_tls_hello_parse(const uint8_t *buf, size_t len, ph_tls_hello *out)
{
    memset(out, 0, sizeof *out);
    rd r = { .buf = buf, .len = len };
    size_t type, body;
    if (num(&r, 1, &type)) {
        if (type != HS_CLIENT_HELLO)
            fail(&r, "first handshake message is not a ClientHello");
        else if (num(&r, 3, &body)) {
            if (body > PH_TLS_HELLO_MAX)
                fail(&r, "ClientHello over its size limit");
            else if (client_hello(&r, body, out) && r.rec_left != 0)
                fail(&r, "bytes of another message after the ClientHello in its record");
        }
    }
    if (r.err != NULL) {
        memset(out, 0, sizeof *out);
        out->reason = PH_REASON_TLS_MALFORMED;
        out->message = r.err;
        out->error_offset = r.err_off;
        return PH_TLS_REFUSED;
    }
    if (r.short_input) {
        memset(out, 0, sizeof *out);
        out->need = r.need;
        return PH_TLS_INCOMPLETE;
    }
    out->end = r.p;
    return PH_TLS_DONE;
}
