#!/usr/bin/python3
"""execd.lock_after_a_stop - one daemon per state directory holds across a
clean stop: a daemon stopping removes <state>/execd.lock, the file it
locked, so a daemon that opened that file just before (B) gets its lock on
a file no longer in the directory once the stopping one (A) exits, while a
daemon started then (C) creates a new file and locks it. B must lock the
file the name holds (C's) and be refused, not serve the directory beside
C, whose recovery and B's would each destroy the other's sandboxes.

B's flock is held back by strace (delay_enter) so that A stops and C
starts between B's open and its flock, every time.

    lock_after_a_stop.py PINHOLE-EXECD"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if shutil.which("strace") is None:
    print("strace is not installed: skipped")
    sys.exit(77)

EXECD = sys.argv[1]
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def start(tmp, name, prefix=()):
    sock = os.path.join(tmp, name + ".sock")
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen(
        list(prefix) + [EXECD, "--socket=" + sock, "--state-dir=" + os.path.join(tmp, "state"),
                        "--allow-uid=%d" % os.getuid(), "--mechanism=fake",
                        "--mode=development"],
        env=ENV, stderr=log, stdout=subprocess.DEVNULL)
    return proc, sock


def wait_listening(proc, sock, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if os.path.exists(sock):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


with tempfile.TemporaryDirectory() as tmp:
    os.chmod(tmp, 0o755)
    lock = os.path.join(tmp, "state", "execd.lock")
    a, a_sock = start(tmp, "a")
    if not wait_listening(a, a_sock, 30):
        print("A did not listen")
        sys.exit(1)
    held = os.stat(lock).st_ino
    # B: every flock it makes waits 3 s before it is made.
    b, b_sock = start(tmp, "b", ["strace", "-f", "-qq", "-o", "/dev/null",
                                 "-e", "trace=flock", "-e", "inject=flock:delay_enter=3000000"])
    # B has opened A's lock file once it waits in its flock: its log is
    # empty, so wait for the open to be seen in /proc.
    end = time.monotonic() + 20
    opened = False
    b_pid = None
    while time.monotonic() < end and not opened and b.poll() is None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.readlink("/proc/%s/exe" % pid) != os.path.realpath(EXECD):
                    continue
                for fd in os.listdir("/proc/%s/fd" % pid):
                    try:
                        if os.stat("/proc/%s/fd/%s" % (pid, fd)).st_ino == held and \
                                int(pid) != a.pid:
                            opened = True
                            b_pid = int(pid)
                    except OSError:
                        pass
            except OSError:
                pass
        time.sleep(0.01)
    if not opened:
        b.kill()
        stop(a)
        print("B never opened the lock file")
        sys.exit(1)
    rc_a = stop(a)  # removes execd.lock, then exits: the lock goes with it
    c, c_sock = start(tmp, "c")
    c_up = wait_listening(c, c_sock, 30)
    b_up = wait_listening(b, b_sock, 30)
    if b_up:
        os.kill(b_pid, signal.SIGTERM)  # the daemon under strace, not strace
    rc_b = b.wait(timeout=30)
    rc_c = stop(c)
    with open(os.path.join(tmp, "b.log")) as f:
        b_log = f.read()
    print("A stopped: exit %d; C started after it: %s; B (its flock after A's stop): %s, exit %d"
          % (rc_a, "listening" if c_up else "not listening",
             "listening beside C" if b_up else "refused", rc_b))
    ok = rc_a == 0 and c_up and not b_up and rc_b == 78 and "state_dir_in_use" in b_log
    sys.exit(0 if ok else 1)
