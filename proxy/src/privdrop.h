/* privdrop.h - giving up root. */
#ifndef PX_PRIVDROP_H
#define PX_PRIVDROP_H

#include "pinhole/status.h"

/* When running as root and user is set: setgroups/setgid/setuid to it and
 * verify root cannot be regained. Root with no user set is refused. */
ph_status px_drop_privileges(const char *user, ph_diag *diag);

#endif
