/* drain.h - the main loop's signals: drain, reload. */
#ifndef PX_DRAIN_H
#define PX_DRAIN_H

#include "config.h"
#include "worker.h"

struct event_base;

/* Installs SIGTERM/SIGINT (drain, then exit), SIGHUP (reload) on the main
 * loop; returns after the drain completed. The main loop keeps running
 * through the drain: the admin listener answers (/readyz 503 draining) and
 * SIGHUP still reloads (a key revoked then still ends draining tunnels);
 * the handlers stay installed until every worker ended, so no signal meets
 * its default action (SIGHUP's: terminate) while tunnels are open. */
int px_run_main_loop(struct event_base *base, px_worker *workers, int nworkers,
                     const px_config *cfg);

#endif
