/* pinhole-forwarder: the only way out of a sandbox with a network grant.
 *
 * Runs inside the sandbox (gVisor or a container), usually as its init
 * process. It listens on a loopback TCP address and relays every accepted
 * connection, byte for byte, to the pinhole-proxy unix socket that the
 * mechanism bind-mounts into the sandbox. The tier 2 proxy variables
 * (HTTP_PROXY=http://<grant>@127.0.0.1:<port> ...) point at it, so the proxy
 * still sees the grant and makes every decision; the forwarder decides
 * nothing.
 *
 * It links no library beyond libc and is built -static, so it runs in a root
 * filesystem holding nothing but busybox. One poll() loop, one fixed buffer
 * per direction per connection, a cap on connections; half-close is
 * propagated with shutdown(SHUT_WR) so request/response protocols that close
 * their sending side keep working.
 *
 * With --init it is also a well-behaved PID 1: it reaps orphans (so a
 * sandbox whose commands leave children does not fill its pids limit with
 * zombies), exits on SIGTERM/SIGINT, and on SIGUSR1 kills every other
 * process in the sandbox (kill(-1, SIGKILL) spares PID 1). That is how the
 * mechanism ends what a finished or timed-out command left behind without
 * tearing the sandbox down. It makes itself not dumpable: it runs as the
 * commands' uid, and a command that could ptrace it (PTRACE_ATTACH, or
 * /proc/1/mem) could plant a thread in PID 1 that outlives every command;
 * the kernel refuses both (EPERM) for a process that is not dumpable.
 *
 * With --run -- ARGV it is the parent of one command (runsc exec starts it):
 * it searches PATH of its own (exact) environment, reports a missing program
 * as a shell would (exit 127, 126 when not executable), waits for the
 * command, then kills every process the command left behind (all but PID 1
 * and itself), so each execute ends with an empty sandbox, as the fake
 * mechanism's PID namespace does. It exits with the command's code, or 128 +
 * the signal that killed it. It runs as the command's uid, so the command
 * can kill or stop it: the mechanism never takes its sweep on trust, and
 * asks the runtime (runsc ps, docker top) what is left once it has exited.
 *
 * Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime failure (cannot listen),
 * 2 usage error.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinhole/sockaddr.h"
#include "pinhole/version.h"

#define FWD_BUF_SIZE 65536
#define FWD_ROUNDS 16 /* read+send rounds per connection per wake-up */
#define FWD_DEFAULT_MAX_CONNS 64
#define FWD_MAX_CONNS_CAP 1024

/* One relayed connection. Direction d moves bytes read from fd[d] into buf[d]
 * and writes them to fd[1 - d]. Index 0 is the client, 1 the proxy. */
struct relay {
    int fd[2];
    char buf[2][FWD_BUF_SIZE];
    size_t len[2];  /* bytes in buf[d] not yet written */
    size_t off[2];  /* first unwritten byte in buf[d] */
    int eof[2];     /* fd[d] returned end of stream */
    int shut[2];    /* shutdown(fd[1 - d], SHUT_WR) done */
};

struct options {
    int init_mode;
    char **run_argv; /* --run: the command, NULL-terminated */
    const char *unset[8]; /* --run: variables the runtime added (docker: HOSTNAME) */
    int unset_count;
    int argv_hex;    /* --run: each argument is lowercase hex of its bytes */
    int have_listen;
    struct sockaddr_in listen_addr;
    const char *connect_path;
    unsigned max_conns;
};

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t sweep_requested;

static void on_sweep(int sig)
{
    (void)sig;
    sweep_requested = 1;
}

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void on_child(int sig)
{
    /* Only here so poll() returns EINTR; reaping happens in the loop. */
    (void)sig;
}

/* One JSON log line on stderr. msg and detail must not need escaping: they
 * are fixed strings from this file and strerror() texts. */
static void log_line(const char *level, const char *msg, const char *detail)
{
    fprintf(stderr, "{\"level\":\"%s\",\"component\":\"pinhole-forwarder\",\"msg\":\"%s\"%s%s%s}\n",
            level, msg, detail ? ",\"detail\":\"" : "", detail ? detail : "", detail ? "\"" : "");
}

static void usage(FILE *out)
{
    fputs("usage: pinhole-forwarder [--init] [--listen 127.0.0.1:PORT --connect SOCKET]\n"
          "                         [--max-connections N]\n"
          "       pinhole-forwarder --run [--unset NAME]... [--argv-hex] -- PROGRAM [ARG...]\n"
          "\n"
          "Relays TCP connections accepted on a loopback address to a unix socket\n"
          "(the pinhole-proxy socket mounted into the sandbox), propagating half-close.\n"
          "\n"
          "  --listen ADDR:PORT      IPv4 loopback address to listen on (127.0.0.0/8)\n"
          "  --connect PATH          unix socket every connection is relayed to\n"
          "  --max-connections N     concurrent connections (default 64, at most 1024)\n"
          "  --init                  act as the sandbox's init: reap orphans, exit on\n"
          "                          SIGTERM, kill every other process on SIGUSR1\n"
          "  --run -- PROGRAM ARG... run one command, then kill what it left behind;\n"
          "                          exit with its code (127 not found, 128+N signal N);\n"
          "                          only under --init in a sandbox, never as root\n"
          "  --unset NAME            with --run: remove a variable the runtime added\n"
          "  --argv-hex              with --run: PROGRAM and each ARG are the lowercase\n"
          "                          hex of their bytes (the runtimes carry text only)\n"
          "  --help                  this text\n"
          "  --version               print the version\n"
          "\n"
          "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 runtime failure, 2 usage error;\n"
          "with --run, the command's.\n",
          out);
}

/* Parses "a.b.c.d:port" (ph_sockaddr_parse) into a loopback sockaddr.
 * Anything else (names, IPv6, non-loopback addresses, port 0) is refused:
 * the forwarder must never listen where another host could reach it. */
static int parse_listen(const char *text, struct sockaddr_in *out)
{
    ph_sockaddr sa;
    if (ph_sockaddr_parse(text, strlen(text), PH_SOCKADDR_PORT_REQUIRED, &sa, NULL) != PH_OK ||
        sa.ss.ss_family != AF_INET)
        return -1;
    memcpy(out, &sa.ss, sizeof *out);
    if (out->sin_port == 0 || (ntohl(out->sin_addr.s_addr) >> 24) != 127)
        return -1;
    return 0;
}

/* The forwarder links no library (it runs in a root filesystem with no
 * libc to load), so pinhole/hex.h's decoder is not available: this is its
 * lowercase-only rule, decoding s in place. */
static int hex_digit_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int hex_decode_in_place(char *s)
{
    size_t n = strlen(s);
    if (n % 2 != 0)
        return 0;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_digit_value(s[i]), lo = hex_digit_value(s[i + 1]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) /* NUL would cut the argument */
            return 0;
        s[i / 2] = (char)(hi << 4 | lo);
    }
    s[n / 2] = '\0';
    return 1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"connect", required_argument, NULL, 'c'},
        {"max-connections", required_argument, NULL, 'm'},
        {"init", no_argument, NULL, 'i'},
        {"run", no_argument, NULL, 'r'},
        {"unset", required_argument, NULL, 'u'},
        {"argv-hex", no_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->max_conns = FWD_DEFAULT_MAX_CONNS;
    int c;
    int run = 0;
    /* "+": stop at the first non-option, the command's argv is never parsed. */
    while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            if (parse_listen(optarg, &o->listen_addr) != 0) {
                log_line("error", "--listen needs an IPv4 loopback address and port", NULL);
                return 2;
            }
            o->have_listen = 1;
            break;
        case 'c':
            if (strlen(optarg) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
                log_line("error", "--connect path too long for a unix socket", NULL);
                return 2;
            }
            o->connect_path = optarg;
            break;
        case 'm': {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v == 0 || v > FWD_MAX_CONNS_CAP) {
                log_line("error", "--max-connections must be 1..1024", NULL);
                return 2;
            }
            o->max_conns = (unsigned)v;
            break;
        }
        case 'i':
            o->init_mode = 1;
            break;
        case 'r':
            run = 1;
            break;
        case 'u':
            if (o->unset_count >= 8 || strchr(optarg, '=') != NULL || optarg[0] == '\0') {
                log_line("error", "--unset takes a variable name, at most 8 times", NULL);
                return 2;
            }
            o->unset[o->unset_count++] = optarg;
            break;
        case 'x':
            o->argv_hex = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            puts("pinhole-forwarder " PH_VERSION_STRING);
            exit(0);
        default:
            usage(stderr);
            return 2;
        }
    }
    if (run) {
        if (optind >= argc || o->init_mode || o->have_listen || o->connect_path != NULL) {
            log_line("error", "--run takes a command after -- and no other option", NULL);
            return 2;
        }
        o->run_argv = &argv[optind];
        for (char **a = o->run_argv; o->argv_hex && *a; a++) {
            if (!hex_decode_in_place(*a)) {
                log_line("error", "--argv-hex: an argument is not lowercase hex", NULL);
                return 2;
            }
        }
        return 0;
    }
    if (o->argv_hex) {
        log_line("error", "--argv-hex goes with --run", NULL);
        return 2;
    }
    if (o->unset_count > 0) {
        log_line("error", "--unset goes with --run", NULL);
        return 2;
    }
    if (optind != argc || o->have_listen != (o->connect_path != NULL)) {
        usage(stderr);
        return 2;
    }
    if (!o->have_listen && !o->init_mode) {
        log_line("error", "nothing to do: give --listen and --connect, or --init", NULL);
        return 2;
    }
    return 0;
}

static int open_listener(const struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)addr, sizeof *addr) != 0 || listen(fd, 128) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Non-blocking connect to the proxy socket. A unix socket connect either
 * completes at once or fails (EAGAIN means the proxy's backlog is full):
 * there is no in-progress state to track. */
static int connect_upstream(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    if (connect(fd, (const struct sockaddr *)&sun, sizeof sun) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static void relay_close(struct relay **slot)
{
    struct relay *r = *slot;
    close(r->fd[0]);
    close(r->fd[1]);
    free(r);
    *slot = NULL;
}

/* Moves what it can in direction d. Returns -1 when the connection must be
 * torn down (an error on either side), 0 otherwise.
 *
 * Each wake-up runs up to FWD_ROUNDS read+send rounds on the non-blocking
 * sockets instead of one step per poll(): inside gVisor (ptrace platform)
 * every system call costs microseconds, and waiting for a second poll
 * before sending a chunk, and a third before reading the next, halved the
 * throughput of a bulk download against reading the proxy's socket
 * directly (bench_gvisor_proxy: 0.51 of it, 0.90 with the rounds; larger
 * buffers than 64 KiB did not help). A round stops at the first EAGAIN
 * (nothing to read, or the receiver is full: poll() waits for it). */
static int relay_step(struct relay *r, int d, short rev_in)
{
    int from = r->fd[d], to = r->fd[1 - d];
    int readable = (rev_in & (POLLIN | POLLHUP | POLLERR)) != 0;
    for (int round = 0; round < FWD_ROUNDS; round++) {
        if (r->len[d] == 0 && !r->eof[d]) {
            if (!readable)
                break;
            ssize_t n = read(from, r->buf[d], FWD_BUF_SIZE);
            if (n > 0) {
                r->len[d] = (size_t)n;
                r->off[d] = 0;
            } else if (n == 0) {
                r->eof[d] = 1;
            } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                break;
            } else {
                return -1;
            }
        }
        if (r->len[d] > 0) {
            ssize_t n = send(to, r->buf[d] + r->off[d], r->len[d], MSG_NOSIGNAL);
            if (n > 0) {
                r->off[d] += (size_t)n;
                r->len[d] -= (size_t)n;
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return -1;
            }
            if (r->len[d] > 0)
                break; /* the receiver is full: poll() says when it drains */
        }
        if (r->eof[d])
            break;
    }
    if (r->eof[d] && r->len[d] == 0 && !r->shut[d]) {
        /* Everything the sender wrote has been delivered: pass its close on. */
        if (shutdown(to, SHUT_WR) != 0 && errno != ENOTCONN)
            return -1;
        r->shut[d] = 1;
    }
    return 0;
}

static void reap_children(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

/* True when /proc lists a process other than this one and PID 1. */
static int others_alive(void)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    pid_t self = getpid();
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end == '\0' && pid > 1 && pid != (long)self)
            found = 1;
    }
    closedir(d);
    return found;
}

/* Kills everything but ourselves, again and again while a fork bomb keeps
 * adding processes, reaping the corpses (they are our children now). */
static void sweep_others(void)
{
    for (int round = 0; round < 1000; round++) {
        if (kill(-1, SIGKILL) != 0 && errno == ESRCH) {
            reap_children();
            if (!others_alive())
                return;
        }
        reap_children();
        if (!others_alive())
            return;
        usleep(1000);
    }
    log_line("error", "processes survived the sweep", NULL);
}

static void install_signals(int init_mode)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (init_mode) {
        sa.sa_handler = on_sweep;
        sigaction(SIGUSR1, &sa, NULL);
        sa.sa_handler = on_child;
        sa.sa_flags = SA_NOCLDSTOP;
        sigaction(SIGCHLD, &sa, NULL);
    }
}

/* The event loop: pfd[0] is the listener (or unused, fd -1), then two
 * entries per relay slot. */
static int run(const struct options *o)
{
    int listener = -1;
    if (o->have_listen) {
        listener = open_listener(&o->listen_addr);
        if (listener < 0) {
            log_line("error", "cannot listen", strerror(errno));
            return 1;
        }
    }
    struct relay **slots = calloc(o->max_conns, sizeof *slots);
    struct pollfd *pfd = calloc(1 + 2 * (size_t)o->max_conns, sizeof *pfd);
    if (slots == NULL || pfd == NULL) {
        log_line("error", "out of memory", NULL);
        free(slots);
        free(pfd);
        if (listener >= 0)
            close(listener);
        return 1;
    }
    unsigned active = 0;
    while (!stop_requested) {
        if (o->init_mode) {
            if (sweep_requested) {
                sweep_requested = 0;
                if (getpid() == 1) /* only ever as the sandbox's init */
                    sweep_others();
            }
            reap_children();
        }
        pfd[0].fd = (listener >= 0 && active < o->max_conns) ? listener : -1;
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        for (unsigned i = 0; i < o->max_conns; i++) {
            struct pollfd *p = &pfd[1 + 2 * i];
            struct relay *r = slots[i];
            p[0].fd = p[1].fd = -1;
            p[0].events = p[1].events = 0;
            p[0].revents = p[1].revents = 0;
            if (r == NULL)
                continue;
            for (int d = 0; d < 2; d++) {
                if (r->len[d] == 0 && !r->eof[d])
                    p[d].events |= POLLIN;
                if (r->len[d] > 0)
                    p[1 - d].events |= POLLOUT;
            }
            p[0].fd = r->fd[0];
            p[1].fd = r->fd[1];
        }
        /* In init mode wake up now and then even when idle, to reap orphans
         * whose SIGCHLD arrived between the reap and the poll. */
        int n = poll(pfd, 1 + 2 * (nfds_t)o->max_conns, o->init_mode ? 1000 : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_line("error", "poll failed", strerror(errno));
            break;
        }
        if (pfd[0].revents & POLLIN) {
            int client = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (client >= 0) {
                int upstream = connect_upstream(o->connect_path);
                struct relay *r = upstream >= 0 ? calloc(1, sizeof *r) : NULL;
                unsigned i = 0;
                while (r != NULL && slots[i] != NULL)
                    i++;
                if (r == NULL) {
                    /* Closing the client at once is the only honest answer:
                     * the proxy is the one that explains refusals. */
                    log_line("warning", "cannot reach the proxy socket", strerror(errno));
                    if (upstream >= 0)
                        close(upstream);
                    close(client);
                } else {
                    r->fd[0] = client;
                    r->fd[1] = upstream;
                    slots[i] = r;
                    active++;
                }
            }
        }
        for (unsigned i = 0; i < o->max_conns; i++) {
            struct relay *r = slots[i];
            if (r == NULL)
                continue;
            const struct pollfd *p = &pfd[1 + 2 * i];
            int bad = relay_step(r, 0, p[0].revents) != 0 || relay_step(r, 1, p[1].revents) != 0;
            if (bad || (r->shut[0] && r->shut[1])) {
                relay_close(&slots[i]);
                active--;
            }
        }
    }
    for (unsigned i = 0; i < o->max_conns; i++)
        if (slots[i] != NULL)
            relay_close(&slots[i]);
    free(slots);
    free(pfd);
    if (listener >= 0)
        close(listener);
    return stop_requested ? 0 : 1;
}

/* True when PID 1 is this program in --init mode, i.e. we are inside a
 * Pinhole sandbox. The sweeps use kill(-1): on a host, as root, that would
 * kill every process of the machine, so they never run anywhere else. */
static int under_pinhole_init(void)
{
    char buf[512];
    int fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *base = strrchr(buf, '/');
    base = base ? base + 1 : buf;
    if (strcmp(base, "forwarder") != 0 && strcmp(base, "pinhole-forwarder") != 0)
        return 0;
    for (const char *arg = buf + strlen(buf) + 1; arg < buf + n; arg += strlen(arg) + 1)
        if (strcmp(arg, "--init") == 0)
            return 1;
    return 0;
}

/* --run: the command's parent inside the sandbox. */
static int run_command(char **argv, const char *const *unset, int unset_count)
{
    if (getpid() == 1 || geteuid() == 0 || !under_pinhole_init()) {
        log_line("error", "--run only works inside a sandbox whose init is pinhole-forwarder "
                          "--init, as a non-root user", NULL);
        return 2;
    }
    for (int i = 0; i < unset_count; i++)
        unsetenv(unset[i]);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "pinhole: cannot start %s: %s\n", argv[0], strerror(errno));
        return 126;
    }
    if (child == 0) {
        /* Its own session: a terminal-less job, like the fake mechanism's. */
        setsid();
        execvp(argv[0], argv);
        int err = errno;
        fprintf(stderr, "pinhole: %s: %s\n", argv[0],
                err == ENOENT ? "command not found" : strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    /* Signals for the command are not for us: runsc kill --all is the only
     * thing meant to end this process early. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            status = 1 << 8;
            break;
        }
    }
    sweep_others();
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc;
    if (o.run_argv != NULL)
        return run_command(o.run_argv, o.unset, o.unset_count);
    if (o.init_mode && prctl(PR_SET_DUMPABLE, 0) != 0) {
        log_line("error", "cannot make the init not dumpable", strerror(errno));
        return 1;
    }
    install_signals(o.init_mode);
    return run(&o);
}
