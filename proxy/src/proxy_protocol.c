/* proxy_protocol.c - the PROXY protocol v2 header reader
 * (proxy_protocol.h).
 *
 * The fixed 16 bytes say how long the rest is; nothing is decided before
 * the whole header is there but what the bytes so far already refuse (a
 * signature byte, the version, the command, the family, a length that
 * cannot hold the family's addresses or passes PH_PP_HEADER_MAX), so a
 * header trickled a byte at a time is refused at the first wrong byte and
 * costs time linear in its length per call. */
#include "proxy_protocol.h"

#include <netinet/in.h>
#include <string.h>

static const uint8_t SIG_V2[PH_PP_SIG_LEN] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                               0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };
static const char SIG_V1[] = "PROXY ";
#define SIG_V1_LEN (sizeof SIG_V1 - 1)

/* The fixed part's fields, by offset. */
#define OFF_VER_CMD 12
#define OFF_FAMILY 13
#define OFF_LEN 14

#define CMD_LOCAL 0x0
#define CMD_PROXY 0x1
#define FAM_UNSPEC 0x0
#define FAM_INET 0x1
#define FAM_INET6 0x2
#define TRANSPORT_UNSPEC 0x0
#define TRANSPORT_STREAM 0x1

/* Bytes of each family's address block: source and destination address,
 * source and destination port. */
#define ADDRS_INET (4 + 4 + 2 + 2)
#define ADDRS_INET6 (16 + 16 + 2 + 2)
#define TLV_FIXED 3 /* type, 16-bit length */

static ph_pp_result refuse(ph_pp_header *out, ph_reason reason, const char *msg, size_t off)
{
    out->reason = reason;
    out->message = msg;
    out->error_offset = off;
    return PH_PP_REFUSED;
}

static ph_pp_result more(ph_pp_header *out, size_t need)
{
    out->need = need;
    return PH_PP_INCOMPLETE;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

bool ph_pp_signature(const uint8_t *buf, size_t len)
{
    return (len >= PH_PP_SIG_LEN && memcmp(buf, SIG_V2, PH_PP_SIG_LEN) == 0) ||
           (len >= SIG_V1_LEN && memcmp(buf, SIG_V1, SIG_V1_LEN) == 0);
}

/* Checks the signature over the bytes there are: INCOMPLETE (more bytes
 * needed), or REFUSED at the first byte that differs. */
static ph_pp_result signature(const uint8_t *buf, size_t len, ph_pp_header *out)
{
    size_t n = min_size(len, PH_PP_SIG_LEN);
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == SIG_V2[i])
            continue;
        /* The text form of version 1, or its start ("P" may yet be a POST:
         * wait for the six bytes that tell). */
        size_t m = min_size(len, SIG_V1_LEN);
        if (memcmp(buf, SIG_V1, m) == 0)
            return m == SIG_V1_LEN
                       ? refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                                "a version 1 (text) PROXY header: only version 2 is accepted", 0)
                       : more(out, SIG_V1_LEN);
        return refuse(out, PH_REASON_PROXY_PROTOCOL_MISSING,
                      "not a PROXY protocol header (the v2 signature)", i);
    }
    return len < PH_PP_FIXED_LEN ? more(out, PH_PP_FIXED_LEN) : PH_PP_DONE;
}

/* The TLVs in buf[at..end): each one's length within what is left. */
static ph_pp_result tlvs(const uint8_t *buf, size_t at, size_t end, ph_pp_header *out)
{
    while (at < end) {
        if (end - at < TLV_FIXED)
            return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                          "bytes after the addresses that are not a whole TLV", at);
        size_t vlen = (size_t)buf[at + 1] << 8 | buf[at + 2];
        if (vlen > end - at - TLV_FIXED)
            return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                          "a TLV longer than the header holds", at + 1);
        at += TLV_FIXED + vlen;
    }
    return PH_PP_DONE;
}

static void client_inet(const uint8_t *a, ph_pp_header *out)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)&out->client;
    s4->sin_family = AF_INET;
    memcpy(&s4->sin_addr, a, 4);                 /* source address */
    memcpy(&s4->sin_port, a + 4 + 4, 2);         /* source port, network order */
    out->client_len = sizeof *s4;
}

static void client_inet6(const uint8_t *a, ph_pp_header *out)
{
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->client;
    s6->sin6_family = AF_INET6;
    memcpy(&s6->sin6_addr, a, 16);
    memcpy(&s6->sin6_port, a + 16 + 16, 2);
    out->client_len = sizeof *s6;
}

ph_pp_result ph_pp_parse(const uint8_t *buf, size_t len, ph_pp_header *out)
{
    memset(out, 0, sizeof *out);
    ph_pp_result st = signature(buf, len, out);
    if (st != PH_PP_DONE)
        return st;
    unsigned version = buf[OFF_VER_CMD] >> 4, cmd = buf[OFF_VER_CMD] & 0x0f;
    unsigned family = buf[OFF_FAMILY] >> 4, transport = buf[OFF_FAMILY] & 0x0f;
    size_t rest = (size_t)buf[OFF_LEN] << 8 | buf[OFF_LEN + 1];
    if (version != 2)
        return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED, "PROXY header version is not 2",
                      OFF_VER_CMD);
    if (cmd != CMD_LOCAL && cmd != CMD_PROXY)
        return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                      "PROXY header command is neither LOCAL nor PROXY", OFF_VER_CMD);
    if (rest > PH_PP_HEADER_MAX - PH_PP_FIXED_LEN)
        return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                      "PROXY header longer than 2048 bytes", OFF_LEN);
    size_t addrs = 0;
    if (cmd == CMD_PROXY) {
        /* LOCAL: the balancer speaks for itself; its block is skipped
         * whatever its family says (proxy-protocol.txt 2.2). */
        if (family == FAM_INET && transport == TRANSPORT_STREAM)
            addrs = ADDRS_INET;
        else if (family == FAM_INET6 && transport == TRANSPORT_STREAM)
            addrs = ADDRS_INET6;
        else if (family != FAM_UNSPEC || transport != TRANSPORT_UNSPEC)
            return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                          "PROXY header family is not UNSPEC, TCP over IPv4 or TCP over IPv6",
                          OFF_FAMILY);
        if (rest < addrs)
            return refuse(out, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                          "PROXY header length shorter than its addresses", OFF_LEN);
    }
    size_t total = PH_PP_FIXED_LEN + rest;
    if (len < total)
        return more(out, total);
    if (cmd == CMD_PROXY &&
        tlvs(buf, PH_PP_FIXED_LEN + addrs, total, out) != PH_PP_DONE)
        return PH_PP_REFUSED;
    out->len = total;
    out->local = cmd == CMD_LOCAL;
    if (addrs == ADDRS_INET)
        client_inet(buf + PH_PP_FIXED_LEN, out);
    else if (addrs == ADDRS_INET6)
        client_inet6(buf + PH_PP_FIXED_LEN, out);
    out->has_client = addrs != 0;
    return PH_PP_DONE;
}
