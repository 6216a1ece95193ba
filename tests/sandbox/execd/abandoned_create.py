#!/usr/bin/python3
"""execd.abandoned_create_<mechanism> - a worker that disconnects while its
environment.create runs never learns the environment's id, so the daemon
must not keep it: 10 creates, each on its own connection, abandoned at
different moments (at once, then every twentieth of a create's time, in
turn, until ten were abandoned before their answer came), while another connection of the same identity stays open (so the
owner-gone reaping of docs/execd.md does not apply). Once they settle
(health shows nothing queued or running), health must show 0 sandboxes and
nothing may be mounted under the daemon's state directory. Exit 77 when the
mechanism is not available here.

    abandoned_create.py PINHOLE-EXECD gvisor|docker|fake"""
import os
import socket
import sys
import tempfile
import time

import execd_testlib
from pinhole.execd import Client

execd, mechanism = sys.argv[1], sys.argv[2]


def mounts(state):
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if state in l]


with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
    state = os.path.join(tmp, "state")
    # One identity makes every create here: its fair share must not refuse
    # them (the test is about abandoned creates, not about the caps).
    daemon, sock = execd_testlib.start_daemon(execd, tmp, mechanism, [
        "--queue=32", "--max-requests-per-identity=36", "--max-sandboxes-per-identity=64"])
    try:
        watcher = Client.unix(sock)
        t0 = time.monotonic()
        watcher.destroy("t1", watcher.create("t1", "l"))
        took = time.monotonic() - t0
        # Creates abandoned at ten moments in turn (at once, then every
        # took/20), until ten were abandoned before their answer came: a busy
        # host makes some creates quicker than the first, and those answered
        # do not count (up to 30 creates in all).
        abandoned = 0
        for i in range(30):
            if abandoned == 10:
                break
            c = Client.unix(sock)
            c.send({"op": "environment.create", "tenant": "t1", "lease": "l%d" % i})
            time.sleep(took * (i % 10) / 20)
            # An answer already here was delivered: that environment is the
            # test's own to destroy (a slow host), not an abandoned one.
            try:
                c._sock.setblocking(False)
                c._sock.recv(1, socket.MSG_PEEK)
                c._sock.setblocking(True)
                answer = c.recv()
                if "environment" not in answer:
                    sys.exit("create %d answered %r" % (i, answer))
                watcher.destroy("t1", answer["environment"])
            except BlockingIOError:
                abandoned += 1
            c.close()
        # Settled: nothing queued or running and no sandbox; or, 15 s after
        # the work stopped, still some sandbox (then nothing would remove it).
        end, quiet_since = time.monotonic() + 120, None
        while True:
            h = watcher.call({"op": "health"})
            quiet = h["queued"] == 0 and h["executions"] == 0
            if quiet and h["sandboxes"] == 0:
                break
            quiet_since = (quiet_since or time.monotonic()) if quiet else None
            if time.monotonic() > end or (quiet_since and time.monotonic() - quiet_since > 15):
                break
            time.sleep(0.05)
        left = mounts(state)
        dirs = [n for n in os.listdir(state) if n.startswith("env-")]
        print("abandoned %d of 10 creates; then sandboxes %d, mounts %d, environment "
              "directories %d" % (abandoned, h["sandboxes"], len(left), len(dirs)))
        watcher.close()
        if h["sandboxes"] != 0 or left or dirs:
            sys.stdout.write("".join(l for l in open(os.path.join(tmp, "execd.log")) if "health" not in l))
            raise SystemExit("FAIL: abandoned creates left sandboxes behind")
    finally:
        rc = execd_testlib.stop_daemon(daemon)
    if rc != 0:
        raise SystemExit("FAIL: pinhole-execd exited %d" % rc)
    if abandoned < 5:
        raise SystemExit("FAIL: only %d creates were still running when abandoned" % abandoned)
    print("ok: %d abandoned creates, nothing kept" % abandoned)
