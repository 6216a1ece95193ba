/* test_addr_embedded.c - every IPv6 form that embeds an IPv4 address is
 * denied in full, whatever the IPv4 address (private, metadata, public):
 * IPv4-mapped, IPv4-compatible, SIIT (::ffff:0:0:0/96), NAT64 well-known
 * (RFC 6052) and local-use (RFC 8215, every RFC 6052 prefix-length layout),
 * 6to4 (2002:V4::/48, incl. 2002:0a00::/24 for 10/8), Teredo with the IPv4
 * as server and as the obfuscated (bit-inverted) client address; each built
 * from bytes and also written as text, and random addresses anywhere inside
 * each prefix. */
#include "test_support.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/addr.h"

static const char *const v4_samples[] = {
    "10.0.0.1",    "10.255.255.255", "127.0.0.1",   "169.254.169.254", "172.16.0.1",
    "192.168.1.1", "100.64.0.1",     "100.100.100.200", "168.63.129.16", "0.1.2.3",
    "224.0.0.1",   "240.0.0.1",      "255.255.255.255", "192.0.0.170", "8.8.8.8",
    "1.1.1.1",     "93.184.215.14",
};

/* One embedding: a 16-byte template with the IPv4 address written at v4_at
 * (bit-inverted for Teredo's client), skipping byte 8 when u_octet (RFC 6052
 * section 2.2: bits 64..71 stay zero). Template bytes not overwritten are
 * arbitrary (subnet ids, flags, ports, interface ids). */
typedef struct embedding {
    const char *name;
    const char *block; /* the block that must deny it */
    uint8_t tmpl[16];
    size_t v4_at;
    bool inverted, u_octet;
} embedding;

#define NAT64L 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01, 0x12, 0x34 /* 64:ff9b:1:1234 */
#define TEREDO 0x20, 0x01, 0x00, 0x00, 0x41, 0x36, 0xe3, 0x78 /* server 65.54.227.120 */

static const embedding embeddings[] = {
    {"IPv4-mapped", "::ffff:0.0.0.0/96", {[10] = 0xff, [11] = 0xff}, 12, false, false},
    {"IPv4-compatible", "::/96", {0}, 12, false, false},
    {"SIIT IPv4-translated", "::ffff:0:0:0/96", {[8] = 0xff, [9] = 0xff}, 12, false, false},
    {"NAT64 well-known prefix", "64:ff9b::/96", {0x00, 0x64, 0xff, 0x9b}, 12, false, false},
    {"NAT64 local-use /48 layout", "64:ff9b:1::/48", {NAT64L}, 6, false, true},
    {"NAT64 local-use /56 layout", "64:ff9b:1::/48", {NAT64L}, 7, false, true},
    {"NAT64 local-use /64 layout", "64:ff9b:1::/48", {NAT64L}, 8, false, true},
    {"NAT64 local-use /96 layout", "64:ff9b:1::/48", {NAT64L}, 12, false, true},
    {"6to4", "2002::/16", {0x20, 0x02, [6] = 0xab, 0xcd, [15] = 0x01}, 2, false, false},
    {"Teredo server", "2001::/32", {0x20, 0x01, [8] = 0x80, 0x00, 0x63, 0xbf, 0xf7, 0xf7, 0xf7, 0xf7},
     4, false, false},
    {"Teredo obfuscated client", "2001::/32", {TEREDO, 0x80, 0x00, 0x63, 0xbf}, 12, true, false},
};

static void build(const embedding *e, const uint8_t v4[4], uint8_t a[16])
{
    memcpy(a, e->tmpl, 16);
    for (size_t i = e->v4_at, k = 0; k < 4; i++) {
        if (e->u_octet && i == 8)
            continue;
        a[i] = e->inverted ? (uint8_t)~v4[k] : v4[k];
        k++;
    }
}

static void test_every_embedding_of_every_ipv4_is_denied(void **state)
{
    (void)state;
    unsigned checked = 0;
    for (size_t e = 0; e < sizeof embeddings / sizeof *embeddings; e++) {
        for (size_t s = 0; s < sizeof v4_samples / sizeof *v4_samples; s++) {
            uint8_t v4[4], a[16];
            assert_int_equal(inet_pton(AF_INET, v4_samples[s], v4), 1);
            build(&embeddings[e], v4, a);
            ph_addr_verdict v;
            ph_status st = ph_addr_classify_v6(a, &v);
            char text[INET6_ADDRSTRLEN];
            inet_ntop(AF_INET6, a, text, sizeof text);
            if (st != PH_E_DENIED || v.block == NULL ||
                strcmp(v.block->prefix, embeddings[e].block) != 0)
                fail_msg("%s of %s (%s): expected denied by %s, got %s", embeddings[e].name,
                         v4_samples[s], text, embeddings[e].block,
                         v.block ? v.block->prefix : "allowed");
            assert_false(v.loopback_exempt);
            checked++;
        }
    }
    print_message("%u embedded addresses denied\n", checked);
}

/* The same, written as text the way an attacker's DNS answer or a log
 * shows them (dotted embedded IPv4 included). */
static void test_embedded_forms_as_text(void **state)
{
    (void)state;
    static const struct {
        const char *text, *block;
    } cases[] = {
        {"::ffff:10.0.0.1", "::ffff:0.0.0.0/96"},
        {"::ffff:a00:1", "::ffff:0.0.0.0/96"},
        {"0:0:0:0:0:ffff:169.254.169.254", "::ffff:0.0.0.0/96"},
        {"::ffff:0:0", "::ffff:0.0.0.0/96"},
        {"::ffff:255.255.255.255", "::ffff:0.0.0.0/96"},
        {"::10.0.0.1", "::/96"},
        {"::0.0.0.2", "::/96"},
        {"::ffff:0:10.0.0.1", "::ffff:0:0:0/96"},
        {"::ffff:0:0:0", "::ffff:0:0:0/96"},
        {"::ffff:0:ffff:ffff", "::ffff:0:0:0/96"},
        {"::fffe:ffff:ffff:ffff", "::/8"},
        {"::1:0:0:0", "::/8"},
        {"64:ff9b::10.0.0.1", "64:ff9b::/96"},
        {"64:ff9b::192.168.0.1", "64:ff9b::/96"},
        {"64:ff9b::127.0.0.1", "64:ff9b::/96"},
        {"64:ff9b::169.254.169.254", "64:ff9b::/96"},
        {"64:ff9b::8.8.8.8", "64:ff9b::/96"},
        {"64:ff9b::ffff:ffff", "64:ff9b::/96"},
        {"64:ff9b:0:0:0:1::", "::/8"},
        {"64:ff9b:1::10.0.0.1", "64:ff9b:1::/48"},
        {"64:ff9b:1:a00:1::", "64:ff9b:1::/48"},
        {"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "64:ff9b:1::/48"},
        {"64:ff9b:2::", "::/8"},
        {"2002:a00::", "2002::/16"},                          /* 6to4 of 10.0.0.0/8: */
        {"2002:aff:ffff:ffff:ffff:ffff:ffff:ffff", "2002::/16"}, /* 2002:0a00::/24 */
        {"2002:7f00:1::1", "2002::/16"},
        {"2002:a9fe:a9fe::", "2002::/16"},
        {"2002:c0a8:101::", "2002::/16"},
        {"2002:ac10::", "2002::/16"},
        {"2002:808:808::", "2002::/16"},
        {"2001:0:4136:e378:8000:63bf:80ff:fffe", "2001::/32"}, /* client 127.0.0.1 */
        {"2001:0:4136:e378:8000:63bf:f5ff:fffe", "2001::/32"}, /* client 10.0.0.1 */
        {"2001:0:4136:e378:8000:63bf:5601:5601", "2001::/32"}, /* client 169.254.169.254 */
        {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32"}, /* RFC 4380's 192.0.2.45 */
        {"2001:0:a00:1::", "2001::/32"},                       /* server 10.0.0.1 */
        {"2001:0:a9fe:a9fe:0:ffff:ffff:ffff", "2001::/32"},    /* server metadata */
        {"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "2001::/32"},
        {"2001:1::", "2001::/23"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_addr_verdict v;
        ph_diag d = {0};
        ph_status st = ph_addr_parse_and_classify(cases[i].text, NULL, &v, &d);
        if (st != PH_E_DENIED || v.block == NULL || strcmp(v.block->prefix, cases[i].block) != 0)
            fail_msg("%s: expected denied by %s, got %s (%s)", cases[i].text, cases[i].block,
                     v.block ? v.block->prefix : "no block", d.message);
    }
}

/* Random addresses anywhere inside each embedding prefix are denied by it
 * (or by a more specific block inside it): the whole prefix, not only the
 * addresses whose embedded IPv4 is private. */
static void test_random_addresses_inside_each_prefix_are_denied(void **state)
{
    (void)state;
    static const char *const prefixes[] = {
        "::ffff:0.0.0.0/96", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96",
        "64:ff9b:1::/48", "2002::/16", "2001::/32",
    };
    unsigned seed = 4242;
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        const ph_addr_block *block = NULL;
        for (size_t i = 0; i < ph_addr_block_count(); i++)
            if (strcmp(ph_addr_block_at(i)->prefix, prefixes[p]) == 0)
                block = ph_addr_block_at(i);
        if (block == NULL)
            fail_msg("embedding prefix %s is not in the denylist", prefixes[p]);
        for (int round = 0; round < 5000; round++) {
            uint8_t a[16];
            for (int i = 0; i < 16; i++)
                a[i] = (uint8_t)(rand_r(&seed) >> 5);
            for (unsigned bit = 0; bit < block->prefix_len; bit++) {
                uint8_t m = (uint8_t)(0x80 >> (bit % 8));
                a[bit / 8] = (uint8_t)((a[bit / 8] & ~m) | (block->addr[bit / 8] & m));
            }
            ph_addr_verdict v;
            char text[INET6_ADDRSTRLEN];
            inet_ntop(AF_INET6, a, text, sizeof text);
            if (ph_addr_classify_v6(a, &v) != PH_E_DENIED || v.block == NULL ||
                v.block->prefix_len < block->prefix_len)
                fail_msg("%s inside %s is not denied by it (got %s)", text, prefixes[p],
                         v.block ? v.block->prefix : "allowed");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_embedding_of_every_ipv4_is_denied),
        cmocka_unit_test(test_embedded_forms_as_text),
        cmocka_unit_test(test_random_addresses_inside_each_prefix_are_denied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
