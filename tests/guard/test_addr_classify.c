/* test_addr_classify.c - the denylist verdict on addresses: every block at
 * its boundaries (first, last, one outside each end) in both families, the
 * IPv4-embedding IPv6 forms, metadata endpoints, the sockaddr and text entry
 * points, the loopback test exemption, and the indexed lookup against a
 * naive reference on random addresses. */
#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "pinhole/addr.h"

static size_t addr_len(int family)
{
    return family == AF_INET ? 4 : 16;
}

static bool in_block(const ph_addr_block *b, int family, const uint8_t *a)
{
    if (b->family != family)
        return false;
    for (unsigned i = 0; i < b->prefix_len; i++) {
        unsigned bit_a = (a[i / 8] >> (7 - i % 8)) & 1, bit_b = (b->addr[i / 8] >> (7 - i % 8)) & 1;
        if (bit_a != bit_b)
            return false;
    }
    return true;
}

/* The reference: a linear scan for the longest containing prefix. */
static const ph_addr_block *reference(int family, const uint8_t *a)
{
    const ph_addr_block *best = NULL;
    for (size_t i = 0; i < ph_addr_block_count(); i++) {
        const ph_addr_block *b = ph_addr_block_at(i);
        if (in_block(b, family, a) && (best == NULL || b->prefix_len > best->prefix_len))
            best = b;
    }
    return best;
}

static bool exempt_in_this_build(const ph_addr_block *b)
{
    return ph_build_is_test_loopback() && b != NULL &&
           (strcmp(b->prefix, "127.0.0.0/8") == 0 || strcmp(b->prefix, "::1/128") == 0);
}

static ph_status classify(int family, const uint8_t *a, ph_addr_verdict *v)
{
    return family == AF_INET ? ph_addr_classify_v4(a, v) : ph_addr_classify_v6(a, v);
}

/* The classifier agrees with the reference on address a. */
static void expect_reference(int family, const uint8_t *a)
{
    ph_addr_verdict v;
    ph_status st = classify(family, a, &v);
    const ph_addr_block *want = reference(family, a);
    char text[INET6_ADDRSTRLEN];
    inet_ntop(family, a, text, sizeof text);
    if (want == NULL || exempt_in_this_build(want)) {
        if (st != PH_OK || v.reason != PH_REASON_ALLOWED || v.block != want ||
            v.loopback_exempt != (want != NULL))
            fail_msg("%s: expected allowed, got %s (%s)", text, ph_reason_code(v.reason),
                     v.block ? v.block->prefix : "-");
        return;
    }
    if (st != PH_E_DENIED || v.reason != PH_REASON_DENIED_ADDRESS || v.block != want ||
        v.loopback_exempt)
        fail_msg("%s: expected denied by %s, got %s (%s)", text, want->prefix,
                 ph_reason_code(v.reason), v.block ? v.block->prefix : "-");
}

/* Adds delta (+1 or -1) to a big-endian address; returns false on wrap. */
static bool step(uint8_t *a, size_t n, int delta)
{
    for (size_t i = n; i-- > 0;) {
        if (delta > 0 ? a[i]++ != 0xff : a[i]-- != 0x00)
            return true;
    }
    return false;
}

static void test_every_block_at_its_boundaries(void **state)
{
    (void)state;
    unsigned checked = 0;
    for (size_t i = 0; i < ph_addr_block_count(); i++) {
        const ph_addr_block *b = ph_addr_block_at(i);
        size_t n = addr_len(b->family);
        uint8_t first[16] = {0}, last[16] = {0};
        memcpy(first, b->addr, n);
        memcpy(last, b->addr, n);
        for (unsigned bit = b->prefix_len; bit < n * 8; bit++)
            last[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
        /* first and last are inside: denied by this block or a nested one */
        const ph_addr_block *rf = reference(b->family, first), *rl = reference(b->family, last);
        assert_true(rf != NULL && in_block(b, b->family, first) &&
                    rf->prefix_len >= b->prefix_len);
        assert_true(rl != NULL && rl->prefix_len >= b->prefix_len);
        expect_reference(b->family, first);
        expect_reference(b->family, last);
        ph_addr_verdict v;
        if (!exempt_in_this_build(rf))
            assert_int_equal(classify(b->family, first, &v), PH_E_DENIED);
        if (!exempt_in_this_build(rl))
            assert_int_equal(classify(b->family, last, &v), PH_E_DENIED);
        /* one outside each end: never this block */
        if (step(first, n, -1)) {
            expect_reference(b->family, first);
            classify(b->family, first, &v);
            assert_ptr_not_equal(v.block, b);
        }
        if (step(last, n, +1)) {
            expect_reference(b->family, last);
            classify(b->family, last, &v);
            assert_ptr_not_equal(v.block, b);
        }
        checked++;
    }
    assert_int_equal(checked, ph_addr_block_count());
}

/* Hand-written expectations, independent of the table (the boundary test
 * above only proves the lookup matches the table). "" = allowed. */
static const struct {
    const char *addr, *block;
} expected[] = {
    {"8.8.8.8", ""}, {"1.1.1.1", ""}, {"9.255.255.255", ""}, {"10.0.0.0", "10.0.0.0/8"},
    {"10.255.255.255", "10.0.0.0/8"}, {"11.0.0.0", ""}, {"0.0.0.0", "0.0.0.0/32"},
    {"0.0.0.1", "0.0.0.0/8"}, {"0.255.255.255", "0.0.0.0/8"}, {"1.0.0.0", ""},
    {"100.63.255.255", ""}, {"100.64.0.0", "100.64.0.0/10"}, {"100.127.255.255", "100.64.0.0/10"},
    {"100.128.0.0", ""}, {"100.100.100.200", "100.100.100.200/32"},
    {"100.100.100.199", "100.64.0.0/10"}, {"126.255.255.255", ""},
    {"127.0.0.0", "127.0.0.0/8"}, {"127.0.0.1", "127.0.0.0/8"},
    {"127.255.255.255", "127.0.0.0/8"}, {"128.0.0.0", ""},
    {"168.63.129.15", ""}, {"168.63.129.16", "168.63.129.16/32"}, {"168.63.129.17", ""},
    {"169.253.255.255", ""}, {"169.254.0.0", "169.254.0.0/16"},
    {"169.254.169.254", "169.254.169.254/32"}, {"169.254.170.2", "169.254.170.2/32"},
    {"169.254.255.255", "169.254.0.0/16"}, {"169.255.0.0", ""}, {"172.15.255.255", ""},
    {"172.16.0.0", "172.16.0.0/12"}, {"172.31.255.255", "172.16.0.0/12"}, {"172.32.0.0", ""},
    {"191.255.255.255", ""}, {"192.0.0.0", "192.0.0.0/29"}, {"192.0.0.7", "192.0.0.0/29"},
    {"192.0.0.8", "192.0.0.8/32"}, {"192.0.0.9", "192.0.0.9/32"}, {"192.0.0.10", "192.0.0.10/32"},
    {"192.0.0.11", "192.0.0.0/24"}, {"192.0.0.170", "192.0.0.170/32"},
    {"192.0.0.255", "192.0.0.0/24"}, {"192.0.1.0", ""}, {"192.0.2.0", "192.0.2.0/24"},
    {"192.0.2.255", "192.0.2.0/24"}, {"192.0.3.0", ""}, {"192.31.196.1", "192.31.196.0/24"},
    {"192.52.193.1", "192.52.193.0/24"}, {"192.88.99.1", "192.88.99.0/24"},
    {"192.88.99.2", "192.88.99.2/32"}, {"192.167.255.255", ""},
    {"192.168.0.0", "192.168.0.0/16"}, {"192.168.255.255", "192.168.0.0/16"},
    {"192.169.0.0", ""}, {"192.175.48.0", "192.175.48.0/24"}, {"198.17.255.255", ""},
    {"198.18.0.0", "198.18.0.0/15"}, {"198.19.255.255", "198.18.0.0/15"}, {"198.20.0.0", ""},
    {"198.51.100.7", "198.51.100.0/24"}, {"203.0.113.9", "203.0.113.0/24"},
    {"223.255.255.255", ""}, {"224.0.0.0", "224.0.0.0/4"}, {"239.255.255.255", "224.0.0.0/4"},
    {"240.0.0.0", "240.0.0.0/4"}, {"255.255.255.254", "240.0.0.0/4"},
    {"255.255.255.255", "255.255.255.255/32"},
    /* IPv6: global unicast allowed, everything special or outside 2000::/3 denied */
    {"2001:4860:4860::8888", ""}, {"2606:4700:4700::1111", ""}, {"2000::", ""},
    {"3ffe::1", ""}, {"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "3fff::/20"},
    {"3fff:1000::", ""}, {"3fff::", "3fff::/20"},
    {"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "1000::/4"},
    {"4000::", "4000::/3"}, {"::", "::/128"}, {"::1", "::1/128"}, {"::2", "::/96"},
    {"::0.0.1.0", "::/96"}, {"::1:0:0", "::/8"},
    /* IPv4-embedding forms, of private and public IPv4 alike */
    {"::ffff:127.0.0.1", "::ffff:0.0.0.0/96"}, {"::ffff:8.8.8.8", "::ffff:0.0.0.0/96"},
    {"::ffff:169.254.169.254", "::ffff:0.0.0.0/96"}, {"::127.0.0.1", "::/96"},
    {"::8.8.8.8", "::/96"}, {"::ffff:0:a00:1", "::ffff:0:0:0/96"},
    {"::ffff:0:808:808", "::ffff:0:0:0/96"}, {"64:ff9b::a00:1", "64:ff9b::/96"},
    {"64:ff9b::808:808", "64:ff9b::/96"}, {"64:ff9b::1:0:0", "::/8"},
    {"64:ff9b:1::a00:1", "64:ff9b:1::/48"}, {"64:ff9b:1:ffff:ffff:ffff:808:808", "64:ff9b:1::/48"},
    {"2002:a00:1::", "2002::/16"}, {"2002:808:808::1", "2002::/16"},
    {"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2002::/16"}, {"2003::", ""},
    {"2001:0:4136:e378:8000:63bf:f5ff:fffe", "2001::/32"}, /* Teredo, client 10.0.0.1 */
    {"2001:0:4136:e378:8000:63bf:f7f7:f7f7", "2001::/32"}, /* Teredo, client 8.8.8.8 */
    {"2001:1::1", "2001:1::1/128"}, {"2001:1::4", "2001::/23"}, {"2001:2::", "2001:2::/48"},
    {"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "2001::/23"}, {"2001:200::", ""},
    {"2001:db8::1", "2001:db8::/32"}, {"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
    {"2001:db9::", ""}, {"2620:4f:8000::1", "2620:4f:8000::/48"},
    {"2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", ""}, {"2620:4f:8001::", ""},
    {"5f00::1", "5f00::/16"}, {"5eff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "4000::/3"},
    {"100::1", "100::/64"}, {"100:0:0:1::1", "100:0:0:1::/64"}, {"100:0:0:2::", "100::/8"},
    {"fc00::", "fc00::/7"}, {"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fc00::/7"},
    {"fd00:ec2::254", "fd00:ec2::254/128"}, {"fd00:ec2::253", "fc00::/7"},
    {"fe00::", "fe00::/9"}, {"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe00::/9"},
    {"fe80::1", "fe80::/10"}, {"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe80::/10"},
    {"fec0::1", "fec0::/10"}, {"ff02::1", "ff00::/8"},
    {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ff00::/8"},
    /* the newer and the single-address registry entries, each at its edges */
    {"192.0.0.169", "192.0.0.0/24"}, {"192.0.0.171", "192.0.0.171/32"},
    {"192.0.0.172", "192.0.0.0/24"}, {"2001:1::", "2001::/23"}, {"2001:1::2", "2001:1::2/128"},
    {"2001:1::3", "2001:1::3/128"}, {"2001:1::5", "2001::/23"},
    {"2620:4f:8000:ffff:ffff:ffff:ffff:ffff", "2620:4f:8000::/48"},
    {"5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "5f00::/16"}, {"5f01::", "4000::/3"},
    {"100::ffff:ffff:ffff:ffff", "100::/64"}, {"100:0:0:1:ffff:ffff:ffff:ffff", "100:0:0:1::/64"},
    {"100:0:0:1::", "100:0:0:1::/64"}, {"3fff:fff::", "3fff::/20"},
};

static void test_hand_written_expectations(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        ph_addr a;
        ph_addr_verdict v;
        ph_diag d = {0};
        ph_status st = ph_addr_parse_and_classify(expected[i].addr, &a, &v, &d);
        assert_int_not_equal(st, PH_E_INVAL);
        const char *got = v.block ? v.block->prefix : "";
        if (exempt_in_this_build(v.block)) {
            assert_int_equal(st, PH_OK);
            assert_true(v.loopback_exempt);
        } else if (expected[i].block[0] == '\0') {
            assert_int_equal(st, PH_OK);
        } else {
            assert_int_equal(st, PH_E_DENIED);
        }
        if (strcmp(got, expected[i].block) != 0)
            fail_msg("%s: expected block \"%s\", got \"%s\"", expected[i].addr,
                     expected[i].block, got);
    }
}

/* Known cloud metadata / credential endpoints are all denied, in every
 * family and embedding. */
static void test_metadata_endpoints_are_denied(void **state)
{
    (void)state;
    static const char *const endpoints[] = {
        "169.254.169.254",   /* AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean, Hetzner */
        "169.254.170.2",     /* AWS ECS task credentials */
        "169.254.170.23",    /* AWS EKS Pod Identity */
        "169.254.169.123",   /* AWS time sync */
        "169.254.169.253",   /* AWS VPC DNS */
        "169.254.0.23",      /* Tencent Cloud */
        "100.100.100.200",   /* Alibaba Cloud */
        "168.63.129.16",     /* Azure WireServer */
        "192.0.0.192",       /* Oracle Cloud (legacy) */
        "fd00:ec2::254",     /* AWS IMDS over IPv6 */
        "fd00:ec2::23",      /* AWS EKS Pod Identity over IPv6 */
        "fd20:ce::254",      /* Google Cloud metadata over IPv6 */
        "::ffff:169.254.169.254", "::169.254.169.254", "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a9fe:a9fe", "2002:a9fe:a9fe::", "::ffff:0:a9fe:a9fe",
    };
    for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++) {
        ph_addr_verdict v;
        if (ph_addr_parse_and_classify(endpoints[i], NULL, &v, NULL) != PH_E_DENIED)
            fail_msg("metadata endpoint %s is not denied", endpoints[i]);
        assert_non_null(v.block);
    }
}

static void test_sockaddr_entry_point(void **state)
{
    (void)state;
    ph_addr_verdict v;
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(443)};
    inet_pton(AF_INET, "10.1.2.3", &in.sin_addr);
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in, sizeof in, &v), PH_E_DENIED);
    assert_string_equal(v.block->prefix, "10.0.0.0/8");
    assert_string_equal(v.block->rfc, "RFC 1918");
    assert_string_equal(v.block->name, "Private-Use");
    inet_pton(AF_INET, "93.184.215.14", &in.sin_addr);
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in, sizeof in, &v), PH_OK);
    assert_null(v.block);
    /* the status alone is enough: out may be NULL */
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in, sizeof in, NULL), PH_OK);

    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(443)};
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr);
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in6, sizeof in6, &v), PH_E_DENIED);
    assert_string_equal(v.block->name, "IPv4-mapped Address");
    inet_pton(AF_INET6, "2606:2800:21f:cb07:6820:80da:af6b:8b2c", &in6.sin6_addr);
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in6, sizeof in6, &v), PH_OK);

    /* fail closed: wrong family, short length, NULL */
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    assert_int_equal(ph_addr_classify((struct sockaddr *)&un, sizeof un, &v), PH_E_INVAL);
    assert_int_equal(v.reason, PH_REASON_DENIED_ADDRESS);
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in6, sizeof in6 - 1, &v), PH_E_INVAL);
    assert_int_equal(v.reason, PH_REASON_DENIED_ADDRESS);
    assert_int_equal(ph_addr_classify((struct sockaddr *)&in, sizeof in - 1, &v), PH_E_INVAL);
    assert_int_equal(ph_addr_classify(NULL, 0, &v), PH_E_INVAL);
    assert_int_equal(v.reason, PH_REASON_DENIED_ADDRESS);
}

static void test_text_entry_point(void **state)
{
    (void)state;
    ph_addr a;
    ph_addr_verdict v;
    ph_diag d = {0};
    assert_int_equal(ph_addr_parse_and_classify("[2001:db8::1]", &a, &v, &d), PH_E_DENIED);
    assert_int_equal(a.family, AF_INET6);
    assert_int_equal(ph_addr_parse_and_classify("203.0.113.5", &a, &v, &d), PH_E_DENIED);
    assert_int_equal(a.family, AF_INET);
    assert_int_equal(a.bytes[3], 5);
    static const char *const not_addresses[] = {
        "", "127.1", "0x7f.0.0.1", "2130706433", "example.com", "1.2.3.4 ", " 1.2.3.4",
        "fe80::1%eth0", "[fe80::1%25eth0]", "[1.2.3.4", "1.2.3.4]", "[]", "::1::", "1.2.3.4/8",
        "01.2.3.4",
    };
    for (size_t i = 0; i < sizeof not_addresses / sizeof *not_addresses; i++) {
        memset(&d, 0, sizeof d);
        if (ph_addr_parse_and_classify(not_addresses[i], &a, &v, &d) != PH_E_INVAL)
            fail_msg("\"%s\" accepted as an address", not_addresses[i]);
        assert_int_equal(v.reason, PH_REASON_DENIED_ADDRESS);
        assert_true(d.message[0] != '\0');
    }
    assert_int_equal(ph_addr_parse_and_classify(NULL, NULL, NULL, NULL), PH_E_INVAL);
}

/* Exactly 127.0.0.0/8 and ::1 are exempt in a test-loopback build, nothing
 * else (not the mapped or compatible spellings, not 0.0.0.0). */
static void test_loopback_exemption_is_exact(void **state)
{
    (void)state;
    ph_addr_verdict v;
    bool test_build = ph_build_is_test_loopback();
    print_message("PINHOLE_TEST_LOOPBACK_UPSTREAM build: %s\n", test_build ? "yes" : "no");
    for (const char *const *p = (const char *const[]){"127.0.0.1", "127.255.255.255", "::1", NULL};
         *p; p++) {
        ph_status st = ph_addr_parse_and_classify(*p, NULL, &v, NULL);
        assert_int_equal(st, test_build ? PH_OK : PH_E_DENIED);
        assert_int_equal(v.loopback_exempt, test_build);
        assert_non_null(v.block);
    }
    for (const char *const *p = (const char *const[]){"::ffff:127.0.0.1", "::127.0.0.1",
                                                      "0.0.0.0", "::", "64:ff9b::7f00:1",
                                                      "2002:7f00:1::", "126.255.255.255x", NULL};
         *p; p++) {
        ph_status st = ph_addr_parse_and_classify(*p, NULL, &v, NULL);
        assert_int_not_equal(st, PH_OK);
        assert_false(v.loopback_exempt);
    }
}

/* The indexed lookup matches the naive reference on many addresses: random
 * ones, random ones inside 2000::/3, and random ones near every block. */
static void test_lookup_matches_reference_on_random_addresses(void **state)
{
    (void)state;
    unsigned seed = 12345;
    uint8_t a[16];
    for (int round = 0; round < 200000; round++) {
        for (int i = 0; i < 16; i++)
            a[i] = (uint8_t)(rand_r(&seed) >> 7);
        switch (round % 4) {
        case 0:
            expect_reference(AF_INET, a);
            break;
        case 1:
            expect_reference(AF_INET6, a);
            break;
        case 2:
            a[0] = (uint8_t)(0x20 | (a[0] & 0x1f));
            expect_reference(AF_INET6, a);
            break;
        default: {
            /* near a block: copy its prefix, keep random host bits */
            const ph_addr_block *b = ph_addr_block_at((size_t)round / 4 % ph_addr_block_count());
            size_t keep = b->prefix_len / 8;
            memcpy(a, b->addr, keep);
            expect_reference(b->family, a);
        }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_block_at_its_boundaries),
        cmocka_unit_test(test_hand_written_expectations),
        cmocka_unit_test(test_metadata_endpoints_are_denied),
        cmocka_unit_test(test_sockaddr_entry_point),
        cmocka_unit_test(test_text_entry_point),
        cmocka_unit_test(test_loopback_exemption_is_exact),
        cmocka_unit_test(test_lookup_matches_reference_on_random_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
