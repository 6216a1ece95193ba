/* privdrop.c - after binding (ports below 1024 need root), run as an
 * unprivileged user, and prove root cannot come back. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "privdrop.h"

ph_status px_drop_privileges(const char *user, ph_diag *diag)
{
    if (geteuid() != 0)
        return PH_OK; /* nothing to drop */
    if (user == NULL || user[0] == '\0')
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "running as root: set --user to the account to run as");
    struct passwd *pw = getpwnam(user);
    if (pw == NULL)
        return ph_diag_set(diag, PH_E_NOT_FOUND, 0, "unknown user '%s'", user);
    if (pw->pw_uid == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "--user must not be root");
    if (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "dropping to '%s': %s", user, strerror(errno));
    if (setuid(0) == 0 || geteuid() == 0)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "root could be regained after dropping");
    return PH_OK;
}
