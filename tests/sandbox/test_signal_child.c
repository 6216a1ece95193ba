/* test_signal_child.c - ph_signal_child, the way pinhole-execd kills what a
 * pool thread started (xd_kill_children_of): the pid is read from
 * /proc/self/task/<tid>/children, and the thread that forked it may reap it
 * before the signal, its pid then free for any process. The signal goes
 * through a pidfd, sent only when the pid is still that thread's child once
 * the pidfd is open: a pid that now names another process is left alone. */
#include "test_support.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-int.h"

/* A child that leads its own session and waits to be killed. */
static pid_t sleeper(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)setsid();
        for (;;)
            pause();
    }
    return pid;
}

static void a_live_child_is_signalled(void **state)
{
    (void)state;
    pid_t pid = sleeper();
    bool leader = false;
    ph_status st;
    /* Its setsid() may not have run yet: leader is what the check saw. */
    while ((st = ph_signal_child(gettid(), pid, 0, &leader)) == PH_OK && !leader)
        usleep(1000);
    assert_int_equal(st, PH_OK);
    assert_int_equal(ph_signal_child(gettid(), pid, SIGKILL, &leader), PH_OK);
    assert_true(leader);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
}

/* The identity a caller read (pid is my child) gone stale: the child was
 * reaped, its pid now names a process that is not my child (here: the
 * child's own child, alive and reparented). Nothing is signalled. */
static void a_pid_that_names_another_process_is_not_signalled(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pid_t grandchild = fork();
        if (grandchild == 0)
            for (;;)
                pause();
        (void)!write(p[1], &grandchild, sizeof grandchild);
        _exit(0);
    }
    close(p[1]);
    pid_t other = -1;
    assert_int_equal(read(p[0], &other, sizeof other), (ssize_t)sizeof other);
    close(p[0]);
    int ofd = pidfd_open(other, 0);
    assert_true(ofd >= 0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    /* The reaped child: its pid is gone (or, reused, not my child). */
    assert_int_equal(ph_signal_child(gettid(), child, SIGKILL, NULL), PH_E_NOT_FOUND);
    /* A live process that is not my child. */
    bool leader = true;
    ph_status st = ph_signal_child(gettid(), other, SIGKILL, &leader);
    struct pollfd pf = {.fd = ofd, .events = POLLIN};
    int exited = poll(&pf, 1, 200);
    printf("  signal to pid %d, alive and not my child: status %s, it %s\n", (int)other,
           ph_strerror(st), exited == 0 ? "lives on" : "exited");
    assert_int_equal(st, PH_E_NOT_FOUND);
    assert_false(leader);
    assert_int_equal(exited, 0);
    assert_int_equal(pidfd_send_signal(ofd, SIGKILL, NULL, 0), 0);
    assert_int_equal(poll(&pf, 1, -1), 1);
    close(ofd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_live_child_is_signalled),
        cmocka_unit_test(a_pid_that_names_another_process_is_not_signalled),
    };
    return cmocka_run_group_tests_name("signal a child through a pidfd", tests, NULL, NULL);
}
