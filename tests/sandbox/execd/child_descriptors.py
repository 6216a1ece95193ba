#!/usr/bin/python3
"""execd.child_descriptors_<mechanism> - no process the daemon starts holds
its state directory's lock or one of its listening sockets (unix and TCP):
those would keep a restarted daemon out, or take its clients, for as long
as they run (docs/execd.md, "One daemon per state directory").

While a command runs, every process descended from the daemon and every
process working on its state directory (gvisor: the runsc client, gofer and
sandbox, which runsc reparents; fake: the namespace init, which never
execs, and the command) has its /proc/PID/fd listed; none may name the
lock file's inode or a listening socket of the daemon. Exit 77 when the
mechanism is not available here.

    child_descriptors.py PINHOLE-EXECD gvisor|fake"""
import os
import sys
import tempfile
import time

import execd_testlib
from pinhole.execd import Client

execd, mechanism = sys.argv[1], sys.argv[2]


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def listening_inodes():
    """Socket inodes of every listening unix and TCP socket on the host."""
    out = set()
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            x = line.split()
            if len(x) >= 7 and int(x[3], 16) & 0x10000:  # __SO_ACCEPTCON
                out.add(x[6])
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.readlines()[1:]:
                x = line.split()
                if len(x) >= 10 and x[3] == "0A":  # LISTEN
                    out.add(x[9])
    return out


def descriptors(pid):
    """{fd: (dev, ino) or "socket:[n]"}"""
    out = {}
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return out
    for fd in fds:
        path = "/proc/%d/fd/%s" % (pid, fd)
        try:
            link = os.readlink(path)
            st = os.stat(path)
        except OSError:
            continue
        out[fd] = link if link.startswith("socket:") else (st.st_dev, st.st_ino)
    return out


with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
    daemon, sock = execd_testlib.start_daemon(execd, tmp, mechanism,
                                              ["--metrics-listen=127.0.0.1:0"])
    state = os.path.join(tmp, "state")
    lock_st = os.stat(os.path.join(state, "execd.lock"))
    lock = (lock_st.st_dev, lock_st.st_ino)
    listening = listening_inodes()
    own = descriptors(daemon.pid)
    guarded = {v for v in own.values() if v == lock or
               (isinstance(v, str) and v[8:-1] in listening)}
    if lock not in guarded or sum(isinstance(v, str) for v in guarded) < 2:
        print("FAIL: the daemon's lock and listening sockets not found: %s" % own)
        sys.exit(1)
    c = Client.unix(sock)
    env = c.create("t1", "l1")
    c.send({"op": "environment.execute", "tenant": "t1", "environment": env,
            "argv": ["sleep", "5.4321"]})

    def children():
        mine = {daemon.pid}
        for _ in range(8):  # descendants, a generation at a time
            mine |= {p for p in pids() if execd_testlib.parent_of(p) in mine}
        needle = state.encode()
        return (mine | {p for p in pids() if needle in cmdline(p)}) - {daemon.pid}

    def running():
        kids = children()
        names = b" ".join(cmdline(p) for p in kids)
        if mechanism == "fake":
            return kids if b"5.4321" in names else None
        return kids if b"gofer" in names and b"boot" in names and b"exec" in names else None

    end = time.monotonic() + 60
    kids = None
    while kids is None and time.monotonic() < end:
        kids = running()
        time.sleep(0.02)
    if kids is None:
        print("FAIL: the command's processes never appeared: %s" % children())
        sys.exit(1)
    leaks = []
    for p in sorted(kids):
        fds = descriptors(p)
        name = cmdline(p).split(b"\0")[0].decode(errors="replace")
        bad = sorted(fd for fd, v in fds.items() if v in guarded)
        print("pid %d %-40s %d descriptors%s" % (p, name[-40:], len(fds),
                                                 ", holds the daemon's " + ",".join(bad)
                                                 if bad else ""))
        if bad:
            leaks.append(p)
    resp = c.recv()
    c.close()
    rc = execd_testlib.stop_daemon(daemon)
    print("%d processes of the daemon listed; holding its lock or a listening socket: %d; "
          "the command: %s; daemon exit %d"
          % (len(kids), len(leaks), "ok" if resp.get("ok") else resp, rc))
    sys.exit(0 if not leaks and resp.get("ok") and rc == 0 else 1)
