/*
 * addr_blocks.c - the fixed address denylist, as data (DESIGN section 4).
 *
 * Sources, as of 2026: the IANA IPv4 and IPv6 Special-Purpose Address
 * Registries (every entry, whatever its "globally reachable" flag), the IANA
 * IPv4 multicast space, the IANA IPv6 Address Space registry (everything
 * outside 2000::/3 is denied block by block so a denial still has a name),
 * the IPv4-embedding IPv6 prefixes (RFC 4291, 6052, 8215, 3056, 4380, 2765)
 * and cloud metadata endpoints. docs/denylist.md is checked against this
 * table by tests/guard/test_addr_docs.c; keep the two in step.
 *
 * Rules for editing: keep the order (IPv4 then IPv6, by address, then by
 * prefix length); the prefix text must be exactly what inet_ntop prints for
 * the address followed by "/len", and the address must have no host bits.
 * tests/guard/test_addr_table.c checks all three.
 */
#include <sys/socket.h>

#include "addr-int.h"

#define V4(a, b, c, d) {a, b, c, d}
/* Eight 16-bit groups, as written in IPv6 text. */
#define G(x) (uint8_t)((x) >> 8), (uint8_t)((x)&0xff)
#define V6(a, b, c, d, e, f, g, h) {G(a), G(b), G(c), G(d), G(e), G(f), G(g), G(h)}
#define B4(pfx, addr, len, nm, doc) {nm, doc, pfx, AF_INET, addr, len}
#define B6(pfx, addr, len, nm, doc) {nm, doc, pfx, AF_INET6, addr, len}

const ph_addr_block ph_addr_blocks[] = {
    /* ---- IPv4 ---- */
    B4("0.0.0.0/8", V4(0, 0, 0, 0), 8, "This network", "RFC 791"),
    B4("0.0.0.0/32", V4(0, 0, 0, 0), 32, "This host on this network", "RFC 1122"),
    B4("10.0.0.0/8", V4(10, 0, 0, 0), 8, "Private-Use", "RFC 1918"),
    B4("100.64.0.0/10", V4(100, 64, 0, 0), 10, "Shared Address Space (CGN)", "RFC 6598"),
    B4("100.100.100.200/32", V4(100, 100, 100, 200), 32,
       "Alibaba Cloud instance metadata endpoint", "Alibaba Cloud ECS documentation"),
    B4("127.0.0.0/8", V4(127, 0, 0, 0), 8, "Loopback", "RFC 1122"),
    B4("168.63.129.16/32", V4(168, 63, 129, 16), 32,
       "Azure platform endpoint (WireServer, host DNS and health probes)",
       "Microsoft Azure documentation"),
    B4("169.254.0.0/16", V4(169, 254, 0, 0), 16, "Link Local", "RFC 3927"),
    B4("169.254.0.23/32", V4(169, 254, 0, 23), 32, "Tencent Cloud instance metadata endpoint",
       "Tencent Cloud CVM documentation"),
    B4("169.254.169.254/32", V4(169, 254, 169, 254), 32,
       "Cloud instance metadata endpoint (AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean, ...)",
       "vendor documentation (inside RFC 3927 space)"),
    B4("169.254.170.2/32", V4(169, 254, 170, 2), 32,
       "AWS ECS task metadata and credentials endpoint", "AWS ECS documentation"),
    B4("169.254.170.23/32", V4(169, 254, 170, 23), 32,
       "AWS EKS Pod Identity credentials endpoint", "AWS EKS documentation"),
    B4("172.16.0.0/12", V4(172, 16, 0, 0), 12, "Private-Use", "RFC 1918"),
    B4("192.0.0.0/24", V4(192, 0, 0, 0), 24, "IETF Protocol Assignments", "RFC 6890"),
    B4("192.0.0.0/29", V4(192, 0, 0, 0), 29, "IPv4 Service Continuity Prefix", "RFC 7335"),
    B4("192.0.0.8/32", V4(192, 0, 0, 8), 32, "IPv4 dummy address", "RFC 7600"),
    B4("192.0.0.9/32", V4(192, 0, 0, 9), 32, "Port Control Protocol Anycast", "RFC 7723"),
    B4("192.0.0.10/32", V4(192, 0, 0, 10), 32,
       "Traversal Using Relays around NAT Anycast", "RFC 8155"),
    B4("192.0.0.170/32", V4(192, 0, 0, 170), 32, "NAT64/DNS64 Discovery", "RFC 8880"),
    B4("192.0.0.171/32", V4(192, 0, 0, 171), 32, "NAT64/DNS64 Discovery", "RFC 8880"),
    B4("192.0.0.192/32", V4(192, 0, 0, 192), 32,
       "Oracle Cloud legacy instance metadata endpoint", "Oracle Cloud documentation"),
    B4("192.0.2.0/24", V4(192, 0, 2, 0), 24, "Documentation (TEST-NET-1)", "RFC 5737"),
    B4("192.31.196.0/24", V4(192, 31, 196, 0), 24, "AS112-v4", "RFC 7535"),
    B4("192.52.193.0/24", V4(192, 52, 193, 0), 24, "AMT", "RFC 7450"),
    B4("192.88.99.0/24", V4(192, 88, 99, 0), 24, "Deprecated (6to4 Relay Anycast)", "RFC 7526"),
    B4("192.88.99.2/32", V4(192, 88, 99, 2), 32, "6a44-relay anycast address", "RFC 6751"),
    B4("192.168.0.0/16", V4(192, 168, 0, 0), 16, "Private-Use", "RFC 1918"),
    B4("192.175.48.0/24", V4(192, 175, 48, 0), 24, "Direct Delegation AS112 Service",
       "RFC 7534"),
    B4("198.18.0.0/15", V4(198, 18, 0, 0), 15, "Benchmarking", "RFC 2544"),
    B4("198.51.100.0/24", V4(198, 51, 100, 0), 24, "Documentation (TEST-NET-2)", "RFC 5737"),
    B4("203.0.113.0/24", V4(203, 0, 113, 0), 24, "Documentation (TEST-NET-3)", "RFC 5737"),
    B4("224.0.0.0/4", V4(224, 0, 0, 0), 4, "Multicast", "RFC 5771"),
    B4("240.0.0.0/4", V4(240, 0, 0, 0), 4, "Reserved", "RFC 1112"),
    B4("255.255.255.255/32", V4(255, 255, 255, 255), 32, "Limited Broadcast", "RFC 919"),

    /* ---- IPv6 ---- */
    B6("::/8", V6(0, 0, 0, 0, 0, 0, 0, 0), 8, "Reserved by IETF", "RFC 4291"),
    B6("::/96", V6(0, 0, 0, 0, 0, 0, 0, 0), 96, "IPv4-compatible Address (deprecated)",
       "RFC 4291"),
    B6("::/128", V6(0, 0, 0, 0, 0, 0, 0, 0), 128, "Unspecified Address", "RFC 4291"),
    B6("::1/128", V6(0, 0, 0, 0, 0, 0, 0, 1), 128, "Loopback Address", "RFC 4291"),
    B6("::ffff:0.0.0.0/96", V6(0, 0, 0, 0, 0, 0xffff, 0, 0), 96, "IPv4-mapped Address",
       "RFC 4291"),
    B6("::ffff:0:0:0/96", V6(0, 0, 0, 0, 0xffff, 0, 0, 0), 96,
       "IPv4-translated Address (SIIT)", "RFC 2765"),
    B6("64:ff9b::/96", V6(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96,
       "IPv4-IPv6 Translation (NAT64 well-known prefix)", "RFC 6052"),
    B6("64:ff9b:1::/48", V6(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48,
       "IPv4-IPv6 Translation (NAT64 local-use prefix)", "RFC 8215"),
    B6("100::/8", V6(0x100, 0, 0, 0, 0, 0, 0, 0), 8, "Reserved by IETF", "RFC 4291"),
    B6("100::/64", V6(0x100, 0, 0, 0, 0, 0, 0, 0), 64, "Discard-Only Address Block",
       "RFC 6666"),
    B6("100:0:0:1::/64", V6(0x100, 0, 0, 1, 0, 0, 0, 0), 64, "Dummy IPv6 Prefix", "RFC 9780"),
    B6("200::/7", V6(0x200, 0, 0, 0, 0, 0, 0, 0), 7, "Reserved by IETF (formerly NSAP)",
       "RFC 4048"),
    B6("400::/6", V6(0x400, 0, 0, 0, 0, 0, 0, 0), 6, "Reserved by IETF", "RFC 4291"),
    B6("800::/5", V6(0x800, 0, 0, 0, 0, 0, 0, 0), 5, "Reserved by IETF", "RFC 4291"),
    B6("1000::/4", V6(0x1000, 0, 0, 0, 0, 0, 0, 0), 4, "Reserved by IETF", "RFC 4291"),
    B6("2001::/23", V6(0x2001, 0, 0, 0, 0, 0, 0, 0), 23, "IETF Protocol Assignments",
       "RFC 2928"),
    B6("2001::/32", V6(0x2001, 0, 0, 0, 0, 0, 0, 0), 32, "TEREDO", "RFC 4380"),
    B6("2001:1::1/128", V6(0x2001, 1, 0, 0, 0, 0, 0, 1), 128, "Port Control Protocol Anycast",
       "RFC 7723"),
    B6("2001:1::2/128", V6(0x2001, 1, 0, 0, 0, 0, 0, 2), 128,
       "Traversal Using Relays around NAT Anycast", "RFC 8155"),
    B6("2001:1::3/128", V6(0x2001, 1, 0, 0, 0, 0, 0, 3), 128,
       "DNS-SD Service Registration Protocol Anycast", "RFC 9665"),
    B6("2001:2::/48", V6(0x2001, 2, 0, 0, 0, 0, 0, 0), 48, "Benchmarking", "RFC 5180"),
    B6("2001:3::/32", V6(0x2001, 3, 0, 0, 0, 0, 0, 0), 32, "AMT", "RFC 7450"),
    B6("2001:4:112::/48", V6(0x2001, 4, 0x112, 0, 0, 0, 0, 0), 48, "AS112-v6", "RFC 7535"),
    B6("2001:10::/28", V6(0x2001, 0x10, 0, 0, 0, 0, 0, 0), 28, "Deprecated (previously ORCHID)",
       "RFC 4843"),
    B6("2001:20::/28", V6(0x2001, 0x20, 0, 0, 0, 0, 0, 0), 28, "ORCHIDv2", "RFC 7343"),
    B6("2001:30::/28", V6(0x2001, 0x30, 0, 0, 0, 0, 0, 0), 28,
       "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374"),
    B6("2001:db8::/32", V6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, "Documentation", "RFC 3849"),
    B6("2002::/16", V6(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, "6to4", "RFC 3056"),
    B6("2620:4f:8000::/48", V6(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0), 48,
       "Direct Delegation AS112 Service", "RFC 7534"),
    B6("3fff::/20", V6(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, "Documentation", "RFC 9637"),
    B6("4000::/3", V6(0x4000, 0, 0, 0, 0, 0, 0, 0), 3, "Reserved by IETF", "RFC 4291"),
    B6("5f00::/16", V6(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16, "Segment Routing (SRv6) SIDs",
       "RFC 9602"),
    B6("6000::/3", V6(0x6000, 0, 0, 0, 0, 0, 0, 0), 3, "Reserved by IETF", "RFC 4291"),
    B6("8000::/3", V6(0x8000, 0, 0, 0, 0, 0, 0, 0), 3, "Reserved by IETF", "RFC 4291"),
    B6("a000::/3", V6(0xa000, 0, 0, 0, 0, 0, 0, 0), 3, "Reserved by IETF", "RFC 4291"),
    B6("c000::/3", V6(0xc000, 0, 0, 0, 0, 0, 0, 0), 3, "Reserved by IETF", "RFC 4291"),
    B6("e000::/4", V6(0xe000, 0, 0, 0, 0, 0, 0, 0), 4, "Reserved by IETF", "RFC 4291"),
    B6("f000::/5", V6(0xf000, 0, 0, 0, 0, 0, 0, 0), 5, "Reserved by IETF", "RFC 4291"),
    B6("f800::/6", V6(0xf800, 0, 0, 0, 0, 0, 0, 0), 6, "Reserved by IETF", "RFC 4291"),
    B6("fc00::/7", V6(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, "Unique-Local", "RFC 4193"),
    B6("fd00:ec2::23/128", V6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23), 128,
       "AWS EKS Pod Identity credentials endpoint (IPv6)", "AWS EKS documentation"),
    B6("fd00:ec2::254/128", V6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), 128,
       "AWS instance metadata endpoint (IPv6)", "AWS EC2 documentation"),
    B6("fd20:ce::254/128", V6(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254), 128,
       "Google Cloud metadata server (IPv6)", "Google Cloud documentation"),
    B6("fe00::/9", V6(0xfe00, 0, 0, 0, 0, 0, 0, 0), 9, "Reserved by IETF", "RFC 4291"),
    B6("fe80::/10", V6(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "Link-Local Unicast", "RFC 4291"),
    B6("fec0::/10", V6(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "Site-Local (deprecated)", "RFC 3879"),
    B6("ff00::/8", V6(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "Multicast", "RFC 4291"),
};

const size_t ph_addr_blocks_len = sizeof ph_addr_blocks / sizeof ph_addr_blocks[0];
