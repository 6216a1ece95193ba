#!/usr/bin/python3
"""execd.crash_recovery_<mechanism> - pinhole-execd killed (SIGKILL) at many
moments of an environment.create and an environment.destroy: the next start
destroys everything the dead one left, whatever it had done (docs/execd.md,
"Recovery").

Each moment is a state the test waits for (the environment's directory, its
intent record naming an effect, the host id claim, the loop device, the
workspace mount, the bundle, runsc's state, the gofer and sandbox
processes, the cgroup, the answer; during destroy: the sandbox's processes
gone, the mount gone, the claim gone), plus a few moments taken at fixed
delays after the request was sent. After each kill and restart the test
requires, for what this test made only (its own state directory, its
environment ids): no environment directory, no id claim, no mount, no loop
device, no runsc process, no cgroup; and the restart's recovered_destroyed
line counts every environment directory the dead daemon had left, with
none left behind (docker: nor a container named after one of them). Exit
77 when the mechanism is not available here.

    crash_recovery.py PINHOLE-EXECD gvisor|docker|fake"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import execd_testlib
from execd_testlib import wait_for
from pinhole.execd import Client

execd, mechanism = sys.argv[1], sys.argv[2]


class Run:
    def __init__(self, tmp):
        self.tmp = tmp
        self.state = os.path.join(tmp, "state")
        self.ids_seen = set()
        self.kills = 0
        self.recovered = 0

    # ---- what this test's daemon may have made on the host ----

    def env_dirs(self):
        return sorted(os.path.basename(p) for p in glob.glob(os.path.join(self.state, "env-*")))

    def claims(self):
        """Host id claims naming an environment of this test: the claim
        directory is host-wide as root (PH_SANDBOX_ID_CLAIM_DIR), the state
        directory's otherwise; other services' claims are not ours."""
        out = []
        for d in ("/run/pinhole-sandbox/ids", os.path.join(self.state, "ids")):
            for p in glob.glob(os.path.join(d, "*")):
                try:
                    with open(p) as f:
                        owner = f.read()
                except OSError:
                    continue
                base = os.path.basename(p)
                if owner in self.ids_seen or (base.startswith(".claim-")
                                              and base[7:] in self.ids_seen):
                    out.append(base)
        return sorted(out)

    def intent(self, env):
        try:
            with open(os.path.join(self.state, env, "intent.json")) as f:
                return json.load(f).get("effects", [])
        except (OSError, ValueError):
            return None

    def mounts(self):
        with open("/proc/self/mountinfo") as f:
            return [l for l in f if self.state in l]

    def loops(self):
        out = []
        for p in glob.glob("/sys/block/loop*/loop/backing_file"):
            try:
                with open(p) as f:
                    if f.read().startswith(self.state):
                        out.append(p)
            except OSError:
                pass
        return out

    def procs(self, word=b""):
        """Processes working on an environment of this test's state (the
        daemon itself names only the state directory)."""
        needle = os.path.join(self.state, "env-").encode()
        out = []
        for p in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(p, "rb") as f:
                    args = f.read()
            except OSError:
                continue
            if needle in args and word in args:
                out.append(p)
        return out

    def cgroups(self):
        return [g for env in self.ids_seen
                for g in glob.glob("/sys/fs/cgroup/*/pinhole-" + env) +
                glob.glob("/sys/fs/cgroup/pinhole-" + env)]

    def containers(self):
        if mechanism != "docker":
            return []
        out = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"],
                             capture_output=True, text=True).stdout.split()
        return [n for n in out if n.startswith("pinhole-") and n[8:] in self.ids_seen]

    def leftovers(self):
        return {"environment directories": self.env_dirs(), "id claims": self.claims(),
                "mounts": self.mounts(), "loop devices": self.loops(),
                "processes": self.procs(), "cgroups": self.cgroups(),
                "containers": self.containers()}

    # ---- the daemon ----

    def start(self):
        self.daemon, self.sock = execd_testlib.start_daemon(execd, self.tmp, mechanism)

    def recovery_line(self):
        with open(os.path.join(self.tmp, "execd.log")) as f:  # this start's
            for line in f:
                if '"recovered_destroyed"' in line:
                    return json.loads(line)
        return None

    def kill_and_restart(self, label):
        self.daemon.send_signal(signal.SIGKILL)
        self.daemon.wait()
        self.kills += 1
        left = self.env_dirs()
        self.ids_seen.update(left)
        os.unlink(self.sock)  # the dead daemon's: the new one's appears when it listens
        self.start()  # listening means recovery is over
        rec = self.recovery_line()
        if rec is None or rec["destroyed"] != len(left) or rec["left"] != 0:
            raise SystemExit("FAIL at %s: the dead daemon left %s; the restart said %s"
                             % (label, left, rec))
        self.recovered += rec["destroyed"]
        # The loop device goes with its last user: wait for it, bounded.
        wait_for(lambda: not any(self.leftovers().values()) or None,
                 "no leftovers after %s: %s" % (label, self.leftovers()), deadline=20)
        print("ok: %-40s destroyed %d" % (label, rec["destroyed"]))

    def client(self):
        return Client.unix(self.sock)


def main():
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        r = Run(tmp)
        r.start()
        try:
            run(r)
        finally:
            if r.daemon.poll() is None:
                r.daemon.kill()
                r.daemon.wait()
            if r.env_dirs():  # a failure: leave the host as it was found
                os.unlink(r.sock)
                r.start()
                execd_testlib.stop_daemon(r.daemon)


def run(r):
    if True:

        def one_env():
            e = r.env_dirs()
            if e:
                r.ids_seen.update(e)
            return e[0] if e else None

        def has_effect(name):
            return lambda: (one_env() and name in (r.intent(one_env()) or [])) or None

        def env_path(*parts):
            return lambda: one_env() and os.path.exists(os.path.join(r.state, one_env(), *parts))

        moments = [
            ("create: environment directory", lambda: one_env()),
            ("create: intent record", lambda: one_env() and r.intent(one_env()) is not None),
            ("create: claim recorded", has_effect("id_claim")),
            ("create: id claimed", lambda: one_env() and r.claims()
             and any(c[0].isdigit() for c in r.claims())),
            ("create: workspace directory", env_path("workspace")),
        ]
        if mechanism != "fake":
            moments += [
                ("create: volume recorded", has_effect("volume")),
                ("create: loop device", lambda: r.loops()),
                ("create: workspace mounted", lambda: r.mounts()),
                ("create: mechanism recorded", has_effect("mechanism")),
            ]
        if mechanism == "gvisor":
            moments += [
                ("create: bundle written", env_path("gvisor", "bundle", "config.json")),
                ("create: runsc state", lambda: one_env() and glob.glob(
                    os.path.join(r.state, one_env(), "gvisor", "runsc", "*"))),
                ("create: runsc-gofer", lambda: r.procs(b"gofer")),
                ("create: runsc-sandbox", lambda: r.procs(b"boot")),
                ("create: cgroup", lambda: one_env() and r.cgroups()),
            ]
        moments += [("create: +%d ms" % ms, ms / 1000.0) for ms in (30, 120, 250, 400, 600)]
        moments += [("create: answered", "answered")]

        for label, moment in moments:
            c = r.client()
            c.send({"op": "environment.create", "tenant": "t1", "lease": "l1"})
            if moment == "answered":
                resp = c.recv()
                if resp.get("ok") is not True:
                    raise SystemExit("FAIL: create: %s" % resp)
                r.ids_seen.add(resp["environment"])
            elif isinstance(moment, float):
                time.sleep(moment)  # a moment by the clock, on purpose
            else:
                wait_for(moment, label)
            r.kill_and_restart(label)
            c.close()

        destroy_moments = [
            ("destroy: sent", None),
            ("destroy: sandbox processes gone", lambda: not r.procs() or None),
            ("destroy: workspace unmounted", lambda: not r.mounts() or None),
            ("destroy: claim released", lambda: not any(x[0].isdigit() for x in r.claims())
             or None),
        ]
        for label, moment in destroy_moments:
            c = r.client()
            env = c.create("t1", "l1")
            r.ids_seen.add(env)
            c.send({"op": "environment.destroy", "tenant": "t1", "environment": env})
            if moment is not None:
                wait_for(moment, label)
            r.kill_and_restart(label)
            c.close()

        rc = execd_testlib.stop_daemon(r.daemon)
        if rc != 0:
            raise SystemExit("FAIL: pinhole-execd exited %d" % rc)
        print("ok: %d kills, %d environments recovered, nothing left" % (r.kills, r.recovered))


main()
