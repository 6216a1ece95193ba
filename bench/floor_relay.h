/* floor_relay.h - bench_proxy's latency floor (floor_relay.c): a minimal
 * CONNECT relay, blocking and thread-per-connection, that decides nothing;
 * its added latency beside pinhole-proxy's in the same run says how much
 * of pinhole's is any relay's (the wake-ups of the extra hop) and how much
 * is its own. */
#ifndef PINHOLE_BENCH_FLOOR_RELAY_H
#define PINHOLE_BENCH_FLOOR_RELAY_H

#include <sys/types.h>

/* Starts the relay in a child process listening on 127.0.0.1:*port (a
 * port the kernel chose); a CONNECT to any host and port P is relayed to
 * 127.0.0.1:P. Returns the child's pid (the caller kills it), or -1. */
pid_t bench_floor_relay_start(int *port);

#endif
