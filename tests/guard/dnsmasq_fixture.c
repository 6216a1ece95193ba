/* dnsmasq_fixture.c - see dnsmasq_fixture.h. */
#include "test_support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dnsmasq_fixture.h"
#include "pinhole/resolve.h"

/* dnsmasq as the shell would find it (the proxy's e2e scripts run it from
 * PATH too); "" when PATH holds none. */
static char *dnsmasq_path(void)
{
    static char found[4096];
    static bool looked;
    if (looked)
        return found;
    looked = true;
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/sbin:/usr/bin:/sbin:/bin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        int len = snprintf(found, sizeof found, "%.*s/dnsmasq", (int)n, path);
        if (n > 0 && len < (int)sizeof found && access(found, X_OK) == 0)
            return found;
        path += n + (path[n] == ':');
    }
    found[0] = '\0';
    return found;
}
#define DNSMASQ (dnsmasq_path())

/* Binds a UDP socket on 127.0.0.1 (port 0: any); *bound gets the port. */
static int udp_socket(uint16_t port, uint16_t *bound)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    socklen_t len = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &len);
    if (bound != NULL)
        *bound = ntohs(sin.sin_port);
    return fd;
}

int ph_udp_blackhole(char server[64])
{
    uint16_t port = 0;
    int fd = udp_socket(0, &port);
    assert_true(fd >= 0);
    snprintf(server, 64, "127.0.0.1:%u", port);
    return fd;
}

/* A port free for both UDP and TCP on 127.0.0.1 right now (dnsmasq binds
 * both); 0 if the one picked is taken for TCP. */
static uint16_t pick_port(void)
{
    uint16_t port = 0;
    int u = udp_socket(0, &port);
    assert_true(u >= 0);
    int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = t >= 0 && bind(t, (struct sockaddr *)&sin, sizeof sin) == 0;
    if (t >= 0)
        close(t);
    close(u);
    return ok ? port : 0;
}

static pid_t spawn(uint16_t port, const char *hosts_file)
{
    char portarg[32], hostsarg[4200];
    snprintf(portarg, sizeof portarg, "--port=%u", port);
    /* Without a hosts file the argument repeats one already given. */
    if (hosts_file != NULL)
        snprintf(hostsarg, sizeof hostsarg, "--addn-hosts=%s", hosts_file);
    else
        snprintf(hostsarg, sizeof hostsarg, "--no-hosts");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *argv[] = {
            DNSMASQ, "--no-daemon", portarg, "--listen-address=127.0.0.1", "--bind-interfaces",
            "--no-resolv", "--no-hosts", "--conf-file=/dev/null", "--pid-file=", "--user=",
            "--local=/test/", "--local=/example/", "--log-facility=/dev/null",
            "--local-ttl=60", /* answers the resolver cache may keep */
            "--address=/allowed.test/93.184.215.14",
            "--host-record=dual.test,93.184.215.14,2606:2800:21f:cb07:6820:80da:af6b:8b2c",
            "--address=/private.test/10.0.0.5",
            "--address=/metadata.test/169.254.169.254",
            "--host-record=mapped.test,::ffff:10.0.0.1",
            "--host-record=rebind.test,93.184.215.14",
            "--host-record=rebind.test,192.168.1.1",
            "--txt-record=empty.test,nothing-here",
            "--address=/evil.example.test/93.184.215.14",
            "--address=/loop.test/127.0.0.1",
            hostsarg,
            NULL,
        };
        /* Dies with the test, even when the test crashes: an orphan would
         * hold the port and ctest's output pipe. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
            _exit(126);
        /* dnsmasq's start-up banner is noise in test logs. */
        if (freopen("/dev/null", "w", stdout) == NULL || freopen("/dev/null", "w", stderr) == NULL)
            _exit(126);
        execv(DNSMASQ, argv);
        _exit(127);
    }
    return pid;
}

bool ph_dnsmasq_installed(void)
{
    if (DNSMASQ[0] != '\0')
        return true;
    printf("SKIP: dnsmasq is not on PATH (install dnsmasq-base); the DNS end-to-end tests "
           "did not run\n");
    return false;
}

bool ph_dnsmasq_start(ph_dnsmasq *d) { return ph_dnsmasq_start_hosts(d, NULL); }

bool ph_dnsmasq_start_hosts(ph_dnsmasq *d, const char *hosts_file)
{
    d->pid = -1;
    if (DNSMASQ[0] == '\0')
        fail_msg("dnsmasq is not on PATH (check ph_dnsmasq_installed first)");
    /* Another process may take the port between the pick and dnsmasq's
     * bind (dnsmasq then exits with status 2): pick again. */
    for (int attempt = 0; attempt < 10; attempt++) {
        uint16_t port = pick_port();
        if (port == 0)
            continue;
        pid_t pid = spawn(port, hosts_file);
        snprintf(d->server, sizeof d->server, "127.0.0.1:%u", port);
        /* Ready when it answers a query from the zone (asking, rather than
         * probing its port, never races dnsmasq for the bind). */
        ph_resolver_config cfg = {.servers = d->server, .timeout_ms = 100};
        for (int i = 0; i < 300; i++) {
            struct timespec pause = {0, 10 * 1000 * 1000};
            if (i > 0)
                nanosleep(&pause, NULL); /* a refused query returns at once */
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
                    fail_msg("dnsmasq exited at start (status %d)", status);
                pid = -1;
                break;
            }
            ph_pinned_addrs a;
            if (ph_resolve_blocking(&cfg, "allowed.test", 80, &a, NULL, NULL) == PH_OK) {
                d->pid = pid;
                return true;
            }
        }
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("dnsmasq did not answer on %s", d->server);
        }
    }
    fail_msg("no free loopback port for dnsmasq after 10 attempts");
    return false;
}

void ph_dnsmasq_set_hosts(ph_dnsmasq *d, const char *path, const char *text)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    assert_int_equal(ph_test_write_file(tmp, text, strlen(text)), 0);
    assert_int_equal(rename(tmp, path), 0);
    if (d != NULL && d->pid > 0)
        kill(d->pid, SIGHUP);
}

bool ph_dnsmasq_wait_refused(const ph_dnsmasq *d, const char *name, ph_reason reason)
{
    ph_resolver_config cfg = {.servers = d->server, .timeout_ms = 500};
    for (int i = 0; i < 200; i++) {
        ph_pinned_addrs a;
        ph_reason why = PH_REASON_ALLOWED;
        if (ph_resolve_blocking(&cfg, name, 80, &a, &why, NULL) == PH_E_DENIED && why == reason)
            return true;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return false;
}

void ph_dnsmasq_stop(ph_dnsmasq *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
    }
    d->pid = -1;
}
