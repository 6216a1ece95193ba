/* dnsmasq_fixture.h - test helper: a real DNS server (dnsmasq) on a free
 * loopback port with a fixed test zone, and a UDP "server" that never
 * answers. For the guard's end-to-end resolution tests. */
#ifndef PINHOLE_TEST_DNSMASQ_FIXTURE_H
#define PINHOLE_TEST_DNSMASQ_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include "pinhole/status.h"

/* The zone (all under the local-only domains "test" and "example"):
 *   allowed.test           A 93.184.215.14
 *   dual.test              A 93.184.215.14, AAAA 2606:2800:21f:cb07:6820:80da:af6b:8b2c
 *   private.test           A 10.0.0.5
 *   metadata.test          A 169.254.169.254
 *   mapped.test            AAAA ::ffff:10.0.0.1
 *   rebind.test            A 93.184.215.14, A 192.168.1.1
 *   empty.test             TXT only (no address: an empty answer)
 *   evil.example.test      A 93.184.215.14 (what a search domain "test" would reach)
 *   loop.test              A 127.0.0.1 (reachable only in loopback-exempt test builds)
 *   anything else          NXDOMAIN
 * Address answers carry TTL 60 (--local-ttl), so caches can keep them. */
typedef struct ph_dnsmasq {
    pid_t pid;        /* -1 when not running */
    char server[64];  /* "127.0.0.1:<port>" */
} ph_dnsmasq;

/* Whether dnsmasq is on PATH; prints a "SKIP: ..." line when not. A test
 * binary calls it in main() before running its cmocka group and exits 77
 * (ctest: Skipped) when it is false. */
bool ph_dnsmasq_installed(void);

/* Starts dnsmasq and waits until it answers. Returns true; any failure
 * (dnsmasq missing included) fails the test. */
bool ph_dnsmasq_start(ph_dnsmasq *d);
/* The same, also serving hosts_file (hosts format, names under "test") on
 * top of the zone; ph_dnsmasq_reload makes it read the file again. */
bool ph_dnsmasq_start_hosts(ph_dnsmasq *d, const char *hosts_file);
void ph_dnsmasq_stop(ph_dnsmasq *d);
/* Replaces the hosts file at path with text (atomically, by rename) and,
 * when d is running, makes dnsmasq read it again (SIGHUP): an answer that
 * changes between two queries. Returns at once. */
void ph_dnsmasq_set_hosts(ph_dnsmasq *d, const char *path, const char *text);
/* Waits (up to 2 s) until resolving name on d is refused with reason;
 * returns whether it was. */
bool ph_dnsmasq_wait_refused(const ph_dnsmasq *d, const char *name, ph_reason reason);

/* A bound UDP socket on 127.0.0.1 that nobody reads; server gets its
 * "127.0.0.1:<port>". Returns the fd. */
int ph_udp_blackhole(char server[64]);

#endif
