/* pinhole-idmap: the newuidmap and newgidmap runsc calls, for the gvisor
 * mechanism (docs/sandbox-gvisor.md, "Host identities").
 *
 * runsc 20221219 runs its sandbox process (the sentry) as host uid 65534
 * when its real uid is 0, and as its real uid otherwise
 * (runsc/sandbox/sandbox.go, createSandboxProcess). The mechanism therefore
 * runs `runsc create` with the environment's uid as its real uid and 0 as
 * its effective uid. With a real uid other than 0, runsc starts the gofer
 * in the user namespace the OCI spec asks for and has
 *     newuidmap PID ID HOSTID COUNT [ID HOSTID COUNT]...
 *     newgidmap PID ID HOSTID COUNT [ID HOSTID COUNT]...
 * write that namespace's maps (runsc/container/container.go,
 * createGoferProcess). Debian's shadow tools would refuse: the real uid is
 * a sandbox id with no account and no subordinate ids. The mechanism puts
 * this program first on runsc's PATH under those two names (symlinks in the
 * environment's state directory).
 *
 * It writes the map it is given to /proc/PID/uid_map (gid_map), in one
 * write(2) as the kernel requires, and does nothing else. It is not
 * set-uid: the kernel accepts the write only from a process with
 * CAP_SETUID (CAP_SETGID) over the namespace's parent, which runsc's
 * effective uid 0 gives it; anyone else gets EPERM.
 *
 * Run under its own name, it answers --version and --help only.
 *
 * Exit codes: 0 written (or --version, --help), 1 the kernel refused,
 * 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/version.h"

/* The mechanism's spec maps two single ids (0 and the environment's). */
#define MAX_EXTENTS 8

/* A decimal id: digits only (strtoul alone would take a sign or blanks),
 * at most 4294967295. */
static int parse_u32(const char *s, unsigned long *out)
{
    if (s[0] == '\0' || strlen(s) > 10)
        return -1;
    unsigned long v = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v > 4294967295ul)
        return -1;
    *out = v;
    return 0;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "pinhole-idmap: %s\n"
            "usage: newuidmap|newgidmap PID ID HOSTID COUNT [ID HOSTID COUNT]...\n"
            "(pinhole-idmap is run by runsc under those names)\n",
            msg);
    return 2;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    base = base != NULL ? base + 1 : argv[0];
    const char *file;
    if (strcmp(base, "newuidmap") == 0)
        file = "uid_map";
    else if (strcmp(base, "newgidmap") == 0)
        file = "gid_map";
    else if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        puts("pinhole-idmap " PH_VERSION_STRING);
        return 0;
    } else if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        puts("usage: newuidmap|newgidmap PID ID HOSTID COUNT [ID HOSTID COUNT]...\n"
             "pinhole-idmap is run by runsc under those names (docs/sandbox-gvisor.md)");
        return 0;
    } else
        return usage("must be run as newuidmap or newgidmap");
    if (argc < 5 || (argc - 2) % 3 != 0 || (argc - 2) / 3 > MAX_EXTENTS)
        return usage("expected PID and 1 to 8 triples ID HOSTID COUNT");
    unsigned long pid;
    if (parse_u32(argv[1], &pid) != 0 || pid == 0 || pid > 4194304)
        return usage("PID must be a process id");
    char map[MAX_EXTENTS * 33 + 1];
    size_t len = 0;
    for (int i = 2; i < argc; i += 3) {
        unsigned long id, host, count;
        if (parse_u32(argv[i], &id) != 0 || parse_u32(argv[i + 1], &host) != 0 ||
            parse_u32(argv[i + 2], &count) != 0 || count == 0)
            return usage("ID, HOSTID and COUNT must be decimal numbers, COUNT at least 1");
        len += (size_t)snprintf(map + len, sizeof map - len, "%lu %lu %lu\n", id, host, count);
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%lu/%s", pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        fprintf(stderr, "pinhole-idmap: %s: %s\n", path, strerror(errno));
        return 1;
    }
    ssize_t n = write(fd, map, len);
    int err = errno;
    close(fd);
    if (n != (ssize_t)len) {
        fprintf(stderr, "pinhole-idmap: writing %s: %s\n", path, n < 0 ? strerror(err) : "short");
        return 1;
    }
    return 0;
}
