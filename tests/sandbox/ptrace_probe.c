/* ptrace_probe.c - run inside a sandbox as a command: tries PTRACE_ATTACH
 * on PID 1 (the sandbox's init, pinhole-forwarder --init, which runs as the
 * command's uid) and prints "attach: ok" or "attach: <errno name>". Built
 * static: the sandbox's root filesystem holds no compiler or interpreter. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

int main(void)
{
    if (ptrace(PTRACE_ATTACH, 1, NULL, NULL) != 0) {
        printf("attach: %s\n", errno == EPERM ? "EPERM" : strerror(errno));
        return 0;
    }
    waitpid(1, NULL, __WALL);
    ptrace(PTRACE_DETACH, 1, NULL, NULL);
    printf("attach: ok\n");
    return 0;
}
