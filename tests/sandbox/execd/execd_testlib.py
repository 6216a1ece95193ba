"""Shared by the Python execd tests: start a pinhole-execd on a private
socket and state directory from an environment built from nothing (the
daemon refuses a credential name in its own), and reach pinhole.execd from
the source tree."""
import os
import subprocess
import sys
import time

SRC = os.environ.get("PH_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(SRC, "guard", "python"))

MECHANISM_SETTINGS = ("PINHOLE_GVISOR_ROOTFS", "PINHOLE_FORWARDER", "PINHOLE_RUNSC",
                      "PINHOLE_RUNSC_DEBUG_LOG", "PINHOLE_DOCKER", "PINHOLE_SANDBOX_ID_RANGE")


def start_daemon(execd, tmp, mechanism="fake", extra=()):
    """(process, socket path); exits 77 when the mechanism is not available
    here (the daemon exits 69), 1 when it fails otherwise."""
    sock = os.path.join(tmp, "execd.sock")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    env.update({k: os.environ[k] for k in MECHANISM_SETTINGS if k in os.environ})
    log = open(os.path.join(tmp, "execd.log"), "w")
    proc = subprocess.Popen(
        [execd, "--socket=" + sock, "--state-dir=" + os.path.join(tmp, "state"),
         "--allow-uid=%d" % os.getuid(), "--mechanism=" + mechanism, "--mode=development"]
        + list(extra), env=env, stderr=log)
    for _ in range(400):
        if os.path.exists(sock):
            return proc, sock
        if proc.poll() is not None:
            if proc.returncode == 69:
                print("SKIP: mechanism %s is not available here" % mechanism)
                sys.exit(77)
            log.close()
            with open(os.path.join(tmp, "execd.log")) as f:
                print("pinhole-execd exited %d:\n%s" % (proc.returncode, f.read()[-2000:]))
            sys.exit(1)
        time.sleep(0.025)
    print("pinhole-execd did not listen")
    sys.exit(1)


def stop_daemon(proc):
    """SIGTERM; the exit status (0: every sandbox destroyed)."""
    proc.terminate()
    return proc.wait(timeout=60)


def wait_for(cond, what, deadline=60.0):
    """cond()'s first true value, polled every 2 ms; exits the test failing
    when there is none within deadline seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.002)
    raise SystemExit("FAIL: timed out waiting for %s" % what)


def parent_of(pid):
    """The parent pid of pid, from /proc; None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
