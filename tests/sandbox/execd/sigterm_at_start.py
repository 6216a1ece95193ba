#!/usr/bin/python3
"""execd.sigterm_at_start - a SIGTERM sent the moment the daemon's socket
appears (what a supervisor stopping a service just started does) stops it
cleanly, exit 0, every time: the signal waits for the loop that handles it
rather than killing the daemon half started.

    sigterm_at_start.py PINHOLE-EXECD"""
import os
import signal
import subprocess
import sys
import tempfile


ROUNDS = 100
killed = []
for i in range(ROUNDS):
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        sock = os.path.join(tmp, "execd.sock")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        with open(os.path.join(tmp, "execd.log"), "w") as log:
            proc = subprocess.Popen(
                [sys.argv[1], "--socket=" + sock, "--state-dir=" + os.path.join(tmp, "state"),
                 "--allow-uid=%d" % os.getuid(), "--mechanism=fake", "--mode=development"],
                env=env, stderr=log)
            # No sleep: the signal goes out as soon as the socket is there.
            while not os.path.exists(sock) and proc.poll() is None:
                pass
            if proc.poll() is not None:
                print("pinhole-execd exited %d before listening" % proc.returncode)
                sys.exit(1)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=60)
        if rc != 0:
            killed.append(rc)
print("%d of %d starts stopped by a SIGTERM at the socket's appearance did not exit 0 %s"
      % (len(killed), ROUNDS, killed))
sys.exit(1 if killed else 0)
