/* proxy_http.h - bench_proxy's plain-HTTP round (proxy_http.c): keep-alive
 * GETs of a 64-byte body through a forwarding proxy (absolute-form) against
 * the same GETs straight to the origin, in one run. */
#ifndef PINHOLE_BENCH_PROXY_HTTP_H
#define PINHOLE_BENCH_PROXY_HTTP_H

#include <sys/types.h>

/* Measures one proxy listening on 127.0.0.1:proxy_port against direct and
 * prints the figures: requests/s of `clients` keep-alive client threads
 * (best of 3 alternating 1 s rounds, with the connections each needed) and
 * the median request, one client, direct and proxied alternating; with
 * them the upstream connections the proxy opened and its CPU time per
 * request (process proxy_pid). The
 * proxy is asked for http://HOST:PORT/ where HOST is `host` and PORT the
 * origin's; `token` (NULL: none) goes in Proxy-Authorization: Bearer. The
 * first call starts the origin (a child process on a port the kernel
 * chose); bench_http_stop ends it. `name` and `host` are borrowed for the
 * call. Prints why when the origin cannot start or the proxy refuses. */
typedef struct bench_http_fig {
    double direct, proxied; /* requests/s of the best rounds; 0 when not measured */
    double cpu_us;          /* the proxy's CPU per request; -1 when not measured */
} bench_http_fig;

/* out (may be NULL) gets the figures printed, for a summary. */
void bench_http_compare(const char *name, int proxy_port, pid_t proxy_pid, const char *host,
                        const char *token, int clients, bench_http_fig *out);

/* Stops the origin, if one was started. */
void bench_http_stop(void);

#endif
