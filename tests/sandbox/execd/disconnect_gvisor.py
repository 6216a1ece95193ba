#!/usr/bin/python3
"""execd.disconnect_gvisor - a client that disconnects mid-command gets its
command killed inside gVisor too: after the disconnect, the next command in
the same sandbox sees no process of the first (`ps` inside the sandbox; the
sandbox's processes are not host processes, so /proc of the host cannot
tell). Exit 77 when gvisor is not available (the daemon exits 69).

    disconnect_gvisor.py PINHOLE-EXECD"""
import sys
import tempfile
import time

import execd_testlib
from pinhole.execd import Client, ExecdError

execd = sys.argv[1]


with tempfile.TemporaryDirectory() as tmp:
    daemon, sock = execd_testlib.start_daemon(execd, tmp, "gvisor")
    a = Client.unix(sock)
    env = a.create("t1", "l1")
    a.send({"op": "environment.execute", "tenant": "t1", "environment": env,
            "argv": ["sh", "-c", "sleep 71.77 & sleep 71.78"]})
    b = Client.unix(sock)
    time.sleep(2)  # the command is running; now its client goes away
    a.close()
    out = b""
    for _ in range(100):  # the environment is busy until the kill lands
        try:
            out = b.execute("t1", env, ["ps"])["stdout"]
            break
        except ExecdError:
            time.sleep(0.1)
    b.close()
    rc = execd_testlib.stop_daemon(daemon)
    print(out.decode("utf-8", "replace"))
    if b"ps" not in out:
        print("FAIL: the second command did not run")
        sys.exit(1)
    if b"71.7" in out:
        print("FAIL: the disconnected client's command is still running")
        sys.exit(1)
    if rc != 0:
        print("FAIL: pinhole-execd exited", rc)
        sys.exit(1)
print("ok: killed")
