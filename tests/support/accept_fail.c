/* accept_fail.c - an LD_PRELOAD shim for the proxy's accept backoff test
 * (tests/proxy/e2e_accept_backoff.sh): while the file named by
 * PH_ACCEPT_FAIL holds a port, accept4(2) and accept(2) on a socket bound to
 * that port fail with EMFILE, as when descriptors run out, without taking
 * the waiting connection; any other call goes to the real one. Each failure
 * is counted into the file PH_ACCEPT_FAIL.n (the total so far). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long g_failed;

/* Whether an accept on FD must fail: the trigger file names its port.
 * Counts the failure. Keeps errno. */
static int armed_for(int fd)
{
    const char *path = getenv("PH_ACCEPT_FAIL");
    if (path == NULL)
        return 0;
    int saved = errno;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fail = 0;
    char buf[32] = { 0 };
    int t = open(path, O_RDONLY | O_CLOEXEC);
    if (t >= 0) {
        ssize_t n = read(t, buf, sizeof buf - 1);
        close(t);
        if (n > 0 && getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET)
            fail = strtoul(buf, NULL, 10) == ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    if (fail) {
        pthread_mutex_lock(&g_mu);
        /* Written aside and renamed over: a reader never sees it empty. */
        char tmp[4096], name[4096];
        snprintf(tmp, sizeof tmp, "%s.n.tmp", path);
        snprintf(name, sizeof name, "%s.n", path);
        int c = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (c >= 0) {
            int k = snprintf(buf, sizeof buf, "%lu\n", ++g_failed);
            int ok = write(c, buf, (size_t)k) == k;
            close(c);
            if (ok)
                rename(tmp, name);
        }
        pthread_mutex_unlock(&g_mu);
    }
    errno = saved;
    return fail;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    if (armed_for(fd)) {
        errno = EMFILE;
        return -1;
    }
    int (*real)(int, struct sockaddr *, socklen_t *, int) =
        (int (*)(int, struct sockaddr *, socklen_t *, int))dlsym(RTLD_NEXT, "accept4");
    return real(fd, addr, len, flags);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    if (armed_for(fd)) {
        errno = EMFILE;
        return -1;
    }
    int (*real)(int, struct sockaddr *, socklen_t *) =
        (int (*)(int, struct sockaddr *, socklen_t *))dlsym(RTLD_NEXT, "accept");
    return real(fd, addr, len);
}
