/* Numeric socket addresses: one spelling in, one spelling out; names,
 * short IPv4 forms, zone ids, signs, spaces and leading zeros refused with
 * the offset of the bad part. */
#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#include "pinhole/sockaddr.h"

static void round_trip(const char *text, int family, unsigned port)
{
    ph_sockaddr a;
    char back[PH_SOCKADDR_TEXT_MAX];
    ph_diag d = {0};
    if (ph_sockaddr_parse(text, strlen(text), PH_SOCKADDR_PORT_REQUIRED, &a, &d) != PH_OK)
        fail_msg("%s refused: %s", text, d.message);
    assert_int_equal(a.ss.ss_family, family);
    assert_int_equal(a.len, family == AF_INET ? sizeof(struct sockaddr_in)
                                              : sizeof(struct sockaddr_in6));
    ph_sockaddr_text((struct sockaddr *)&a.ss, back, sizeof back);
    assert_string_equal(back, text);
    struct sockaddr_in s4;
    memcpy(&s4, &a.ss, sizeof s4); /* sin_port and sin6_port share their offset */
    assert_int_equal(ntohs(s4.sin_port), port);
}

static void test_valid(void **state)
{
    (void)state;
    round_trip("1.2.3.4:80", AF_INET, 80);
    round_trip("127.0.0.1:0", AF_INET, 0);
    round_trip("255.255.255.255:65535", AF_INET, 65535);
    round_trip("[::1]:8080", AF_INET6, 8080);
    round_trip("[2001:db8::1]:1", AF_INET6, 1);
    round_trip("[::ffff:10.0.0.1]:53", AF_INET6, 53);
    char text[PH_SOCKADDR_TEXT_MAX];
    ph_sockaddr a;
    /* Without a port: the default, when the caller gives one. */
    assert_int_equal(ph_sockaddr_parse("10.0.0.1", 8, 53, &a, NULL), PH_OK);
    ph_sockaddr_text((struct sockaddr *)&a.ss, text, sizeof text);
    assert_string_equal(text, "10.0.0.1:53");
    assert_int_equal(ph_sockaddr_parse("[::1]", 5, 53, &a, NULL), PH_OK);
    ph_sockaddr_addr_text((struct sockaddr *)&a.ss, text, sizeof text);
    assert_string_equal(text, "::1");
    /* Not NUL-terminated: only len bytes are read. */
    assert_int_equal(ph_sockaddr_parse("1.2.3.4:80,5.6.7.8", 10, -1, &a, NULL), PH_OK);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    ph_sockaddr_text((struct sockaddr *)&sun, text, sizeof text);
    assert_string_equal(text, "unix");
}

static void refused(const char *text, int default_port, size_t at, const char *what)
{
    ph_sockaddr a;
    memset(&a, 0xa5, sizeof a);
    ph_diag d = {0};
    if (ph_sockaddr_parse(text, strlen(text), default_port, &a, &d) != PH_E_INVAL)
        fail_msg("%s accepted", text);
    assert_int_equal(a.len, 0);
    assert_int_equal(a.ss.ss_family, 0);
    if (strstr(d.message, what) == NULL || d.offset != at)
        fail_msg("%s: \"%s\" at %zu, expected \"%s\" at %zu", text, d.message, d.offset, what,
                 at);
}

static void test_refused(void **state)
{
    (void)state;
    refused("", -1, 0, "expected ADDR:PORT");
    refused("1.2.3.4", -1, 7, "expected ADDR:PORT"); /* the port is required */
    refused(":80", -1, 0, "expected ADDR:PORT");
    refused("1.2.3.4:", -1, 8, "bad port");
    refused("1.2.3.4:+80", -1, 8, "bad port");
    refused("1.2.3.4: 80", -1, 8, "bad port");
    refused("1.2.3.4:080", -1, 8, "bad port");  /* one spelling */
    refused("1.2.3.4:65536", -1, 8, "bad port");
    refused("1.2.3.4:123456", -1, 8, "bad port");
    refused("1.2.3.4:80x", -1, 10, "bad port");
    refused("1.2.3.4:80:1", -1, 10, "bad port");
    refused("127.1:80", -1, 0, "numeric IPv4");   /* glibc's short forms are names here */
    refused("0x7f.0.0.1:80", -1, 0, "numeric IPv4");
    refused("localhost:80", -1, 0, "numeric IPv4");
    refused("::1:80", -1, 0, "expected ADDR:PORT"); /* IPv6 needs its brackets */
    refused("[::1", -1, 0, "bad IPv6 address");
    refused("[::1]80", -1, 5, "bad IPv6 address");
    refused("[fe80::1%eth0]:80", -1, 1, "bad IPv6 address");
    refused("[1.2.3.4]:80", -1, 1, "bad IPv6 address");
    refused("[]:80", -1, 1, "bad IPv6 address");
    refused("1.2.3.4", 65536, 7, "expected ADDR:PORT"); /* a default out of range */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
