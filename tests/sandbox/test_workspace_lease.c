/* test_workspace_lease.c - a file the sandbox holds a write lease on
 * (fcntl F_SETLEASE, which any owner of a file may take where the kernel is
 * shared: docker, fake) is refused at once by WorkspaceFiles, with the
 * stable code file_busy, instead of being retried in a busy loop: an open
 * that would break the lease fails with EWOULDBLOCK (O_NONBLOCK), the same
 * errno as openat2's "a rename raced the resolution", and the port retried
 * that without bound, spinning a service thread until the kernel broke the
 * lease (lease-break-time, 45 s) or for ever while the holder took it
 * again. */
#include "sandbox_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-int.h"

/* How long the read may take before the test calls it a hang: far more
 * than a refusal needs, far less than the kernel's lease-break-time. */
#define HANG_SECONDS 20

typedef struct reader {
    ph_workspace *ws;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    ph_status st;
    char message[sizeof(((ph_diag *)0)->message)];
} reader;

static void *read_held(void *arg)
{
    reader *r = arg;
    uint8_t *data = NULL;
    size_t len = 0;
    ph_diag diag = {0};
    ph_status st = ph_workspace_read(r->ws, "held", 100, &data, &len, &diag);
    free(data);
    pthread_mutex_lock(&r->mu);
    r->st = st;
    snprintf(r->message, sizeof r->message, "%s", diag.message);
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* A child (a process of its own: a lease is never broken by its holder)
 * that takes a write lease on path and keeps it, ignoring the break
 * signal. Returns its pid, or -1 when this kernel or file system gives no
 * lease. */
static pid_t hold_lease(const char *path)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGIO, SIG_IGN);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char ok = fd >= 0 && fcntl(fd, F_SETLEASE, F_WRLCK) == 0 ? 'y' : 'n';
        (void)!write(p[1], &ok, 1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 'n';
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    if (ok != 'y') {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

static void leased_file_is_refused_at_once(bool component_walk)
{
    char *dir = ph_test_mkdtemp();
    char path[600];
    snprintf(path, sizeof path, "%s/held", dir);
    assert_int_equal(ph_test_write_file(path, "leased", 6), 0);
    pid_t holder = hold_lease(path);
    if (holder < 0) {
        ph_test_rmtree(dir);
        free(dir);
        skip();
    }
    reader r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(ph_workspace_open(dir, &r.ws, NULL), PH_OK);
    ph_ws_force_component_walk = component_walk;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_held, &r), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += HANG_SECONDS;
    pthread_mutex_lock(&r.mu);
    while (!r.done && pthread_cond_timedwait(&r.cv, &r.mu, &until) == 0) {
    }
    bool returned = r.done;
    pthread_mutex_unlock(&r.mu);
    /* The lease goes with its holder, which lets a spinning read end. */
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    pthread_join(t, NULL);
    ph_ws_force_component_walk = false;
    if (!returned)
        fail_msg("reading a leased file did not return within %d s (a busy retry loop)",
                 HANG_SECONDS);
    if (r.st != PH_E_IO || strncmp(r.message, "file_busy: ", 11) != 0)
        fail_msg("a leased file: status %d, \"%s\"; want PH_E_IO and file_busy", r.st,
                 r.message);
    /* With the holder gone the same file reads as usual. */
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(ph_workspace_read(r.ws, "held", 100, &data, &len, NULL), PH_OK);
    assert_int_equal(len, 6);
    free(data);
    ph_workspace_close(&r.ws);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_openat2(void **state)
{
    (void)state;
    leased_file_is_refused_at_once(false);
}

static void test_component_walk(void **state)
{
    (void)state;
    leased_file_is_refused_at_once(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openat2),
        cmocka_unit_test(test_component_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
