/* test_limits.c - the keyed slot tables of proxy/src/limits.c (per lease,
 * per peer): a key holds at most its maximum, a release gives one back and
 * frees the key's slot at zero, keys that share a prefix or a window stay
 * apart, and a table filled with thousands of keys, emptied, fills again
 * (a freed slot is found free). The probe-window refusal against chosen
 * keys is e2e_peer_slots.sh's. */
#include "test_support.h"

#include <stdio.h>

#include "proxy_limits.h"

static void test_per_key_maximum(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        assert_true(px_limits_peer_acquire("ip 192.0.2.1", 3));
    assert_false(px_limits_peer_acquire("ip 192.0.2.1", 3));
    assert_true(px_limits_peer_acquire("ip 192.0.2.10", 3)); /* a longer key, apart */
    assert_true(px_limits_peer_acquire("ip 192.0.2.", 1));   /* a shorter one */
    assert_false(px_limits_peer_acquire("ip 192.0.2.", 1));
    px_limits_peer_release("ip 192.0.2.1");
    assert_true(px_limits_peer_acquire("ip 192.0.2.1", 3));
    assert_false(px_limits_peer_acquire("ip 192.0.2.1", 3));
    for (int i = 0; i < 3; i++)
        px_limits_peer_release("ip 192.0.2.1");
    px_limits_peer_release("ip 192.0.2.10");
    px_limits_peer_release("ip 192.0.2.");
    /* Released to zero: the key starts again from nothing. */
    assert_true(px_limits_peer_acquire("ip 192.0.2.1", 1));
    assert_false(px_limits_peer_acquire("ip 192.0.2.1", 1));
    px_limits_peer_release("ip 192.0.2.1");
    /* A release of a key never held changes nothing. */
    px_limits_peer_release("ip 203.0.113.9");
    assert_true(px_limits_peer_acquire("ip 203.0.113.9", 1));
    px_limits_peer_release("ip 203.0.113.9");
}

static void test_leases_are_tenant_and_lease(void **state)
{
    (void)state;
    assert_true(px_limits_lease_acquire("t1", "lease", 1));
    assert_false(px_limits_lease_acquire("t1", "lease", 1));
    assert_true(px_limits_lease_acquire("t2", "lease", 1));
    assert_true(px_limits_lease_acquire("t1", "lease2", 1));
    px_limits_lease_release("t1", "lease");
    px_limits_lease_release("t2", "lease");
    px_limits_lease_release("t1", "lease2");
    assert_true(px_limits_lease_acquire("t1", "lease", 1));
    px_limits_lease_release("t1", "lease");
}

/* 4,000 keys (half the table) at once, each at its maximum of 2, then all
 * released; twice, so the second fill meets only freed slots. */
static void test_fill_empty_fill(void **state)
{
    (void)state;
    enum { KEYS = 4000 };
    char key[32];
    for (int round = 0; round < 2; round++) {
        int refused = 0;
        for (int i = 0; i < KEYS; i++) {
            snprintf(key, sizeof key, "ip 10.%d.%d.1", i / 256, i % 256);
            refused += !px_limits_peer_head_acquire(key, 2);
            refused += !px_limits_peer_head_acquire(key, 2);
            assert_false(px_limits_peer_head_acquire(key, 2));
        }
        assert_int_equal(refused, 0);
        for (int i = 0; i < KEYS; i++) {
            snprintf(key, sizeof key, "ip 10.%d.%d.1", i / 256, i % 256);
            px_limits_peer_head_release(key);
            px_limits_peer_head_release(key);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_key_maximum),
        cmocka_unit_test(test_leases_are_tenant_and_lease),
        cmocka_unit_test(test_fill_empty_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
