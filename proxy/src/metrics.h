/* metrics.h - counters every worker adds to, and their Prometheus text. */
#ifndef PX_METRICS_H
#define PX_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

struct evbuffer;

void px_metrics_request(ph_reason reason);
void px_metrics_tunnel_open(void);
void px_metrics_tunnel_close(void);
void px_metrics_bytes(uint64_t up, uint64_t down);
void px_metrics_dns_latency(double seconds);
void px_metrics_reload(bool ok);
void px_metrics_accept_backoff(void);
/* A head parser ran (a head arriving in pieces is parsed a few times, not
 * once per piece: ph_h1_head_scan). */
void px_metrics_head_parse(void);
/* An admin connection refused over max_admin_connections. */
void px_metrics_admin_refused(void);
/* Appends the Prometheus text exposition to out, with the gauges other
 * modules keep: the client connections open (limits.h), the policy id in
 * force and its revocation list's live entries (reload.h). */
void px_metrics_render(struct evbuffer *out, long connections_active, const char *policy_id,
                       size_t revocations_live);

#endif
