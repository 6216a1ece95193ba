/* dns_async.h - the guard's resolver driver (pinhole/resolve.h) on a
 * worker's libevent loop. */
#ifndef PX_DNS_ASYNC_H
#define PX_DNS_ASYNC_H

#include <stdint.h>

#include "config.h"
#include "pinhole/resolve.h"
#include "pinhole/status.h"

struct event_base;
struct px_dns;
struct px_dns_query;

/* The answer is the guard's (pinhole/resolve.h): every address checked,
 * the query's port set, cached there. */
typedef void (*px_dns_cb)(const ph_resolve_answer *answer, void *arg);

ph_status px_dns_new(struct event_base *base, const px_config *cfg, struct px_dns **out,
                     ph_diag *diag);
void px_dns_free(struct px_dns **dns);
/* Resolves host (canonical, never an IP literal: the guard's parsers have
 * refused those) A and AAAA for port. cb runs exactly once, always later,
 * from the worker's loop (never within this call, within c-ares or within
 * px_dns_cancel), unless the query is cancelled first. The query is owned
 * by dns_async.c and the guard (rules at struct px_dns_query and at
 * struct ph_resolve_query in guard/src/resolver.c):
 * the returned handle is valid until cb starts or px_dns_cancel, whichever
 * comes first; the caller forgets it in cb. NULL (cb will not run): out of
 * memory. */
struct px_dns_query *px_dns_resolve(struct px_dns *dns, const char *host, uint16_t port,
                                    px_dns_cb cb, void *arg);
/* Frees the query; its callback will not run. q must be a live handle (or
 * NULL). */
void px_dns_cancel(struct px_dns_query *q);

#endif
