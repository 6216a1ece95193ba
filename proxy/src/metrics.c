/* metrics.c - counters shared by every worker (relaxed atomics: a scrape may
 * see one counter a request ahead of another, never a torn value) and their
 * Prometheus text exposition. */
#include <stdatomic.h>
#include <stdio.h>

#include <event2/buffer.h>

#include "metrics.h"

static const double DNS_BUCKETS[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,   0.25,   0.5,   1,    2.5,   5 };
#define NBUCKETS (sizeof DNS_BUCKETS / sizeof DNS_BUCKETS[0])

static atomic_ulong g_requests[PH_REASON_COUNT_];
static atomic_long g_tunnels_active;
static atomic_ulong g_tunnels_total;
static atomic_ulong g_bytes_up, g_bytes_down;
static atomic_ulong g_dns_bucket[NBUCKETS + 1]; /* last: +Inf */
static atomic_ulong g_dns_count, g_dns_sum_us;
static atomic_ulong g_reloads_ok, g_reloads_failed;
static atomic_ulong g_accept_backoffs;
static atomic_ulong g_head_parses;
static atomic_ulong g_admin_refused;

void px_metrics_request(ph_reason reason)
{
    if ((unsigned)reason < PH_REASON_COUNT_)
        atomic_fetch_add_explicit(&g_requests[reason], 1, memory_order_relaxed);
}

void px_metrics_tunnel_open(void)
{
    atomic_fetch_add_explicit(&g_tunnels_active, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_tunnels_total, 1, memory_order_relaxed);
}

void px_metrics_tunnel_close(void)
{
    atomic_fetch_sub_explicit(&g_tunnels_active, 1, memory_order_relaxed);
}

void px_metrics_bytes(uint64_t up, uint64_t down)
{
    atomic_fetch_add_explicit(&g_bytes_up, up, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_bytes_down, down, memory_order_relaxed);
}

void px_metrics_dns_latency(double s)
{
    size_t i = 0;
    while (i < NBUCKETS && s > DNS_BUCKETS[i])
        i++;
    atomic_fetch_add_explicit(&g_dns_bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_dns_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_dns_sum_us, (unsigned long)(s * 1e6), memory_order_relaxed);
}

void px_metrics_reload(bool ok)
{
    atomic_fetch_add_explicit(ok ? &g_reloads_ok : &g_reloads_failed, 1, memory_order_relaxed);
}

void px_metrics_head_parse(void)
{
    atomic_fetch_add_explicit(&g_head_parses, 1, memory_order_relaxed);
}

void px_metrics_accept_backoff(void)
{
    atomic_fetch_add_explicit(&g_accept_backoffs, 1, memory_order_relaxed);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void px_metrics_admin_refused(void)
{
    atomic_fetch_add_explicit(&g_admin_refused, 1, memory_order_relaxed);
}

void px_metrics_render(struct evbuffer *o, long connections_active, const char *policy_id,
                       size_t revocations_live)
{
    evbuffer_add_printf(o, "# HELP pinhole_proxy_requests_total Requests (CONNECT and forwarded) by verdict and reason.\n"
                           "# TYPE pinhole_proxy_requests_total counter\n");
    for (int r = 0; r < PH_REASON_COUNT_; r++)
        evbuffer_add_printf(o, "pinhole_proxy_requests_total{verdict=\"%s\",reason=\"%s\"} %lu\n",
                            r == PH_REASON_ALLOWED ? "allowed" : "refused",
                            ph_reason_code((ph_reason)r), LOAD(g_requests[r]));
    evbuffer_add_printf(o,
                        "# HELP pinhole_proxy_tunnels_active Tunnels currently relaying.\n"
                        "# TYPE pinhole_proxy_tunnels_active gauge\n"
                        "pinhole_proxy_tunnels_active %ld\n"
                        "# HELP pinhole_proxy_tunnels_total Tunnels opened.\n"
                        "# TYPE pinhole_proxy_tunnels_total counter\n"
                        "pinhole_proxy_tunnels_total %lu\n"
                        "# HELP pinhole_proxy_connections_active Client connections open.\n"
                        "# TYPE pinhole_proxy_connections_active gauge\n"
                        "pinhole_proxy_connections_active %ld\n"
                        "# HELP pinhole_proxy_bytes_total Bytes relayed by closed tunnels"
                        " and ended forwarded requests.\n"
                        "# TYPE pinhole_proxy_bytes_total counter\n"
                        "pinhole_proxy_bytes_total{direction=\"upstream\"} %lu\n"
                        "pinhole_proxy_bytes_total{direction=\"downstream\"} %lu\n",
                        LOAD(g_tunnels_active), LOAD(g_tunnels_total), connections_active,
                        LOAD(g_bytes_up), LOAD(g_bytes_down));
    evbuffer_add_printf(o, "# HELP pinhole_proxy_dns_seconds Resolution latency (cache misses).\n"
                           "# TYPE pinhole_proxy_dns_seconds histogram\n");
    unsigned long cum = 0;
    for (size_t i = 0; i <= NBUCKETS; i++) {
        cum += LOAD(g_dns_bucket[i]);
        if (i < NBUCKETS)
            evbuffer_add_printf(o, "pinhole_proxy_dns_seconds_bucket{le=\"%g\"} %lu\n",
                                DNS_BUCKETS[i], cum);
        else
            evbuffer_add_printf(o, "pinhole_proxy_dns_seconds_bucket{le=\"+Inf\"} %lu\n", cum);
    }
    evbuffer_add_printf(o,
                        "pinhole_proxy_dns_seconds_sum %.6f\n"
                        "pinhole_proxy_dns_seconds_count %lu\n"
                        "# HELP pinhole_proxy_table_reloads_total Table reloads by result.\n"
                        "# TYPE pinhole_proxy_table_reloads_total counter\n"
                        "pinhole_proxy_table_reloads_total{result=\"ok\"} %lu\n"
                        "pinhole_proxy_table_reloads_total{result=\"failed\"} %lu\n"
                        "# HELP pinhole_proxy_accept_backoffs_total Pauses after EMFILE/ENFILE.\n"
                        "# TYPE pinhole_proxy_accept_backoffs_total counter\n"
                        "pinhole_proxy_accept_backoffs_total %lu\n"
                        "# HELP pinhole_proxy_admin_refused_total Admin connections refused"
                        " over max_admin_connections.\n"
                        "# TYPE pinhole_proxy_admin_refused_total counter\n"
                        "pinhole_proxy_admin_refused_total %lu\n"
                        "# HELP pinhole_proxy_head_parses_total Runs of the head parsers"
                        " (CONNECT, forwarded request and response heads).\n"
                        "# TYPE pinhole_proxy_head_parses_total counter\n"
                        "pinhole_proxy_head_parses_total %lu\n"
                        "# HELP pinhole_proxy_policy_info The loaded policy id.\n"
                        "# TYPE pinhole_proxy_policy_info gauge\n"
                        "pinhole_proxy_policy_info{policy_id=\"%s\"} 1\n"
                        "# HELP pinhole_proxy_revocations_entries Live entries of the revocation"
                        " list in force.\n"
                        "# TYPE pinhole_proxy_revocations_entries gauge\n"
                        "pinhole_proxy_revocations_entries %zu\n",
                        (double)LOAD(g_dns_sum_us) / 1e6, LOAD(g_dns_count), LOAD(g_reloads_ok),
                        LOAD(g_reloads_failed), LOAD(g_accept_backoffs), LOAD(g_admin_refused),
                        LOAD(g_head_parses), policy_id, revocations_live);
}
