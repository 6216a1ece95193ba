#!/usr/bin/python3
"""execd.restart_after_a_kill - a daemon killed while one of its threads is
starting a command leaves a child between fork (here clone) and exec, which
holds copies of every descriptor the daemon had: the state directory's
lock, the --socket's listener, the --metrics-listen port. A start made then
waits for them to be released (waiting_for_release, up to 3 s) and serves;
it used to take the child for another daemon and be refused at once (exit
78 state_dir_in_use or socket_in_use, 71 for the port), which under the
systemd unit (RestartPreventExitStatus=78) leaves the service down.

strace holds the child there, deterministically: the close_range it makes
first after the clone (fake mechanism) waits until the test ends strace
(killed, it detaches it), once the restarted daemon has either logged that it
waits or exited. Three rounds: a restart as a supervisor makes it (same
state directory, socket and port), then the socket alone (another state
directory), then the port alone.

    restart_after_a_kill.py PINHOLE-EXECD"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import execd_testlib
from execd_testlib import wait_for
from pinhole.execd import Client

if shutil.which("strace") is None:
    print("strace is not installed: skipped")
    sys.exit(77)

EXECD = sys.argv[1]
REAL = os.path.realpath(EXECD)
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def start(tmp, name, state, sock, port=None, prefix=()):
    log = os.path.join(tmp, name + ".log")
    args = [EXECD, "--socket=" + sock, "--state-dir=" + state, "--allow-uid=%d" % os.getuid(),
            "--mechanism=fake", "--mode=development"]
    if port is not None:
        args.append("--metrics-listen=127.0.0.1:%d" % port)
    proc = subprocess.Popen(list(prefix) + args, env=ENV, stderr=open(log, "w"),
                            stdout=subprocess.DEVNULL)
    return proc, log


def events(log):
    with open(log) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def event(log, name):
    return next((e for e in events(log) if e.get("event") == name), None)


def holders(target):
    """Pids other than the daemon's with a descriptor on target's inode."""
    st = os.stat(target)
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                s = os.stat("/proc/%s/fd/%s" % (pid, fd))
                if (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino):
                    out.add(int(pid))
        except OSError:
            pass
    return out


def one_round(tmp, kind):
    """A daemon under strace is killed while its command's child is held
    before exec; a daemon started then (kind: restart, socket or port) must
    serve. Returns a line for the report."""
    state_a = os.path.join(tmp, kind + "-a-state")
    sock_a = os.path.join(tmp, kind + "-a.sock")
    tracer, log_a = start(tmp, kind + "-a", state_a, sock_a, port=0,
                          prefix=["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=close_range",
                                  "-e", "inject=close_range:delay_enter=60000000"])
    listening = wait_for(lambda: event(log_a, "listening_metrics") if event(log_a, "listening")
                         else None, "the first daemon listening")
    port = listening["port"]
    daemon = wait_for(lambda: next((int(p) for p in filter(str.isdigit, os.listdir("/proc"))
                                    if execd_testlib.parent_of(int(p)) == tracer.pid), None),
                      "the daemon under strace")
    lock = os.path.join(state_a, "execd.lock")
    with Client.unix(sock_a) as c:
        env = c.create("t1", "l1")
        c.send({"op": "environment.execute", "tenant": "t1", "environment": env,
                "argv": ["true"]})
        child = wait_for(lambda: holders(lock) - {daemon}, "a child holding the lock")
        os.kill(daemon, signal.SIGKILL)
        wait_for(lambda: not os.path.exists("/proc/%d" % daemon), "the killed daemon reaped")
    held = holders(lock)
    if not held:
        raise SystemExit("FAIL: the child %s was not held before exec" % child)
    if kind == "restart":
        proc, log = start(tmp, kind + "-b", state_a, sock_a, port)
    elif kind == "socket":
        proc, log = start(tmp, kind + "-b", os.path.join(tmp, kind + "-b-state"), sock_a)
    else:
        proc, log = start(tmp, kind + "-b", os.path.join(tmp, kind + "-b-state"),
                          os.path.join(tmp, kind + "-b.sock"), port)
    started = time.monotonic()
    wait_for(lambda: proc.poll() is not None or event(log, "waiting_for_release"),
             "the restart waiting or exiting")
    still_held = held <= holders(lock)
    tracer.kill()  # its tracees are detached: the child goes on to exec
    wait_for(lambda: proc.poll() is not None or event(log, "listening"),
             "the restart listening or exiting")
    ms = (time.monotonic() - started) * 1000
    waited = event(log, "waiting_for_release")
    with open(log) as f:
        lines = f.read().splitlines()
    refused = next((e["event"] for e in events(log) if e.get("level") == "error"),
                   lines[-1] if lines else None)
    line = ("%-8s killed daemon's child %s held %s; the start made then: %s after %.0f ms%s"
            % (kind, sorted(held), "the lock, socket and port" if still_held else "(released)",
               "listening" if proc.poll() is None else "exit %d (%s)" % (proc.returncode, refused),
               ms, ", waited for %s" % waited["what"] if waited else ""))
    ok = proc.poll() is None and waited is not None and still_held
    if proc.poll() is None:
        ok = execd_testlib.stop_daemon(proc) == 0 and ok
    tracer.wait()
    return ok, line


with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
    os.chmod(tmp, 0o755)
    results = [one_round(tmp, kind) for kind in ("restart", "socket", "port")]
    for ok, line in results:
        print(("ok:   " if ok else "FAIL: ") + line)
    sys.exit(0 if all(ok for ok, _ in results) else 1)
