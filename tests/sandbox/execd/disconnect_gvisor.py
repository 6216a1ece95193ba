#!/usr/bin/python3
"""execd.disconnect_gvisor - a client that disconnects mid-command gets its
command killed inside gVisor too: after the disconnect, the next command in
the same sandbox sees no process of the first (`ps` inside the sandbox; the
sandbox's processes are not host processes, so /proc of the host cannot
tell). Exit 77 when gvisor is not available (the daemon exits 69).

    disconnect_gvisor.py PINHOLE-EXECD"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

execd = sys.argv[1]


def send(s, o):
    b = json.dumps(o).encode()
    s.sendall(struct.pack(">I", len(b)) + b)


def recv(s):
    h = b""
    while len(h) < 4:
        h += s.recv(4 - len(h))
    n = struct.unpack(">I", h)[0]
    d = b""
    while len(d) < n:
        d += s.recv(n - len(d))
    return json.loads(d)


def call(s, o):
    send(s, o)
    return recv(s)


passed = {k: os.environ[k] for k in ("PINHOLE_GVISOR_ROOTFS", "PINHOLE_FORWARDER", "PINHOLE_RUNSC")
          if k in os.environ}
with tempfile.TemporaryDirectory() as tmp:
    sock = os.path.join(tmp, "execd.sock")
    log = open(os.path.join(tmp, "execd.log"), "w")
    daemon = subprocess.Popen(
        [execd, "--socket=" + sock, "--state-dir=" + os.path.join(tmp, "state"),
         "--allow-uid=%d" % os.getuid(), "--mechanism=gvisor", "--mode=development"],
        env=dict(PATH="/usr/sbin:/usr/bin:/sbin:/bin", **passed), stderr=log)
    for _ in range(400):
        if os.path.exists(sock):
            break
        if daemon.poll() is not None:
            if daemon.returncode == 69:
                print("SKIP: gvisor is not available here")
                sys.exit(77)
            print("pinhole-execd exited", daemon.returncode)
            sys.exit(1)
        time.sleep(0.025)
    a = socket.socket(socket.AF_UNIX)
    a.connect(sock)
    call(a, {"op": "hello"})
    env = call(a, {"op": "environment.create", "tenant": "t1", "lease": "l1"})["environment"]
    send(a, {"op": "environment.execute", "tenant": "t1", "environment": env,
             "argv": ["sh", "-c", "sleep 71.77 & sleep 71.78"]})
    b = socket.socket(socket.AF_UNIX)
    b.connect(sock)
    call(b, {"op": "hello"})
    ps = {"op": "environment.execute", "tenant": "t1", "environment": env, "argv": ["ps"]}
    time.sleep(2)  # the command is running; now its client goes away
    a.close()
    out = ""
    for _ in range(100):  # the environment is busy until the kill lands
        r = call(b, ps)
        if r.get("ok"):
            out = r["result"].get("stdout", "")
            break
        time.sleep(0.1)
    b.close()
    daemon.terminate()
    rc = daemon.wait(timeout=60)
    print(out)
    if "ps" not in out:
        print("FAIL: the second command did not run")
        sys.exit(1)
    if "71.7" in out:
        print("FAIL: the disconnected client's command is still running")
        sys.exit(1)
    if rc != 0:
        print("FAIL: pinhole-execd exited", rc)
        sys.exit(1)
print("ok: killed")
