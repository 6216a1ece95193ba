/* workspace_caps.c - how much of the host's disk workspaces may reserve:
 * a cap for the whole service (every environment of one state directory)
 * and one per tenant.
 *
 * On gvisor and docker a workspace's byte limit is allocated on the host at
 * create (workspace_volume.c), so without these caps one worker could hold
 * the state directory's filesystem down to the host floor with a few large
 * creates. Each environment's reservation is a record in its own directory
 * (<state>/<env-id>/reserved: "<bytes> <tenant>\n", written through
 * state_dir.c), and a create adds its record and its directory under an
 * exclusive lock on the state directory, after summing every record there:
 * the sum holds across threads and across processes sharing the directory
 * (pinhole-execd's services, the CLI). A refused create makes nothing: no
 * directory, no record, no image. The record goes with the environment's
 * directory at destroy (environment.c); a directory without a record (a
 * create that died between the two) reserves nothing, and nothing else
 * counts, so a crash never leaves a reservation behind.
 *
 * Defaults, when the configuration gives 0: half the size of the state
 * directory's filesystem for the service, a quarter of that per tenant,
 * read once when the service opens. */
#include "sandbox-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define RESERVED_NAME "reserved"
#define MIB (1024ull * 1024)

ph_status ph_ws_caps_init(int state_fd, uint64_t total_max, uint64_t tenant_max,
                          ph_ws_caps *caps, ph_diag *diag)
{
    if (total_max == 0 || tenant_max == 0) {
        struct statvfs v;
        if (fstatvfs(state_fd, &v) != 0)
            return ph_diag_set(diag, PH_E_IO, 0, "statvfs of the state directory: %s",
                               strerror(errno));
        uint64_t size = (uint64_t)v.f_blocks * v.f_frsize;
        if (total_max == 0)
            total_max = size / 2;
        if (tenant_max == 0)
            tenant_max = total_max / 4;
    }
    caps->total_max = total_max;
    caps->tenant_max = tenant_max;
    return PH_OK;
}

/* Sums the reservations of the state directory: every env-* directory's
 * record, the whole and tenant's. */
static ph_status sum_reserved(int state_fd, const char *tenant, uint64_t *total,
                              uint64_t *mine, ph_diag *diag)
{
    *total = *mine = 0;
    int fd = openat(state_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return ph_diag_set(diag, PH_E_IO, 0, "reading the state directory: %s", strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "env-", 4) != 0)
            continue;
        int env = -1;
        char *text = NULL;
        if (ph_state_opendir(state_fd, de->d_name, &env, NULL) != PH_OK)
            continue;
        if (ph_state_read(env, RESERVED_NAME, &text, NULL, NULL) == PH_OK) {
            unsigned long long bytes = 0;
            char owner[129] = "";
            if (sscanf(text, "%llu %128s", &bytes, owner) == 2) {
                *total += bytes;
                if (strcmp(owner, tenant) == 0)
                    *mine += bytes;
            }
        }
        free(text);
        close(env);
    }
    closedir(d);
    return PH_OK;
}

ph_status ph_ws_reserve_env_dir(int state_fd, const ph_ws_caps *caps, const char *id,
                                const char *tenant, uint64_t bytes, int *env_fd, ph_diag *diag)
{
    *env_fd = -1;
    if (bytes == 0)
        return ph_state_mkdir(state_fd, id, 0700, true, env_fd, diag);
    /* Two services of one process exclude each other too. */
    int lock = ph_state_lock_dir(state_fd);
    if (lock < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_reserve_lock_failed: %s",
                           strerror(errno));
    uint64_t total, mine;
    ph_status st = sum_reserved(state_fd, tenant, &total, &mine, diag);
    if (st == PH_OK && (bytes > caps->total_max || total > caps->total_max - bytes))
        st = ph_diag_set(diag, PH_E_LIMIT, 0,
                         "workspace_service_cap: the service's workspaces reserve %llu MiB; "
                         "%llu MiB more would pass its cap of %llu MiB",
                         (unsigned long long)(total / MIB), (unsigned long long)(bytes / MIB),
                         (unsigned long long)(caps->total_max / MIB));
    if (st == PH_OK && (bytes > caps->tenant_max || mine > caps->tenant_max - bytes))
        st = ph_diag_set(diag, PH_E_LIMIT, 0,
                         "workspace_tenant_cap: tenant %s's workspaces reserve %llu MiB; %llu "
                         "MiB more would pass the per-tenant cap of %llu MiB",
                         tenant, (unsigned long long)(mine / MIB),
                         (unsigned long long)(bytes / MIB),
                         (unsigned long long)(caps->tenant_max / MIB));
    if (st == PH_OK)
        st = ph_state_mkdir(state_fd, id, 0700, true, env_fd, diag);
    if (st == PH_OK) {
        char record[160];
        int n = snprintf(record, sizeof record, "%llu %s\n", (unsigned long long)bytes, tenant);
        st = ph_state_write(*env_fd, RESERVED_NAME, record, (size_t)n, 0600, diag);
        if (st != PH_OK) {
            close(*env_fd);
            *env_fd = -1;
            (void)unlinkat(state_fd, id, AT_REMOVEDIR);
        }
    }
    close(lock); /* releases the lock */
    return st;
}

void ph_ws_reserve_release(int env_fd)
{
    (void)unlinkat(env_fd, RESERVED_NAME, 0);
}
