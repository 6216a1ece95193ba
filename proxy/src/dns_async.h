/* dns_async.h - the guard's resolver driver (pinhole/resolve.h) on a
 * worker's libevent loop. */
#ifndef PX_DNS_ASYNC_H
#define PX_DNS_ASYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "pinhole/resolve.h"
#include "pinhole/status.h"

struct event_base;
struct px_dns;

/* The answer is the guard's (pinhole/resolve.h): every address checked,
 * the query's port set, cached there. */
typedef void (*px_dns_cb)(const ph_resolve_answer *answer, void *arg);

ph_status px_dns_new(struct event_base *base, const px_config *cfg, struct px_dns **out,
                     ph_diag *diag);
void px_dns_free(struct px_dns **dns);
/* One query: the caller's storage, owned by dns_async.c and the guard
 * while live (rules at px_dns_resolve in dns_async.c and at struct
 * ph_resolve_query in guard/src/resolver.c). */
typedef struct px_dns_query {
    ph_resolve_query *q;
    px_dns_cb cb;
    void *arg;
} px_dns_query;

/* Resolves host (canonical, never an IP literal: the guard's parsers have
 * refused those) A and AAAA for port, the query in *pq (the caller's
 * storage, live until cb starts or px_dns_cancel, whichever comes first;
 * the caller may free it within cb). cb runs exactly once, always later,
 * from the worker's loop (never within this call, within c-ares or within
 * px_dns_cancel), unless the query is cancelled first. False (cb will not
 * run, *pq is not live): out of memory. */
bool px_dns_resolve(struct px_dns *dns, px_dns_query *pq, const char *host, uint16_t port,
                    px_dns_cb cb, void *arg);
/* Cancels a live query; its callback will not run. */
void px_dns_cancel(px_dns_query *pq);

#endif
