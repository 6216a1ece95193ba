/* reload.h - the policy in force (table and keyring): one libpinhole
 * policy object, reloaded on SIGHUP or POST /reload. */
#ifndef PX_RELOAD_H
#define PX_RELOAD_H

#include "config.h"
#include "pinhole/guard.h"
#include "pinhole/status.h"
#include "pinhole/table.h"

/* Loads table and key for the first time (startup failures are fatal). */
ph_status px_policy_init(const px_config *cfg, ph_diag *diag);
/* ph_guard_reload_policy: a new table and keyring are put in force together
 * when either file changed; if either fails, neither changes (counted and
 * logged, the old pair keeps serving). On success runs the change hook
 * (below) when the table or the keys changed. */
ph_status px_policy_reload(ph_diag *diag);
/* hook(arg) runs on the reloading thread after every successful reload
 * (main registers one that asks each worker to recheck its tunnels). */
void px_policy_on_change(void (*hook)(void *arg), void *arg);
void px_policy_shutdown(void);

/* The policy object in force (borrowed; valid from px_policy_init to
 * px_policy_shutdown): decisions go to ph_decide_connect on it. */
ph_guard *px_policy(void);
/* The loaded policy id (hex), "" before the first load. */
void px_policy_id(char out[PH_TABLE_ID_HEX_LEN + 1]);

#endif
