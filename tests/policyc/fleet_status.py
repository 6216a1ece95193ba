"""fleet_status.py - policyc fleet-status against HTTP servers that answer
/metrics as pinhole-proxy's admin listener does, each on a port the kernel
chose, each told what to answer: exit 0 only when every endpoint answered
one policy id (the expected one with --expect); 1 when they disagree, one is
down, answers no id, an error status or a redirect (never followed), or
serves another than --expect; 2 for usage errors. --wait polls until the
fleet converged: the test changes what the laggards serve once they were
asked (their request count, not a sleep) and the command then exits 0,
having printed the table before and after. Proxy variables are ignored.
Usage: fleet_status.py POLICYC"""
import http.server
import os
import subprocess
import sys
import threading
import time

POLICYC = sys.argv[1]
A = "a" * 64
B = "0123456789abcdef" * 4
FAILS = []


def metrics(pid):
    return ("# HELP pinhole_proxy_policy_info The loaded policy id.\n"
            "# TYPE pinhole_proxy_policy_info gauge\n"
            'pinhole_proxy_policy_info{policy_id="%s"} 1\n'
            "pinhole_proxy_tunnels_active 0\n" % pid).encode()


class Server:
    def __init__(self, answer):
        self.answer = answer  # a policy id, or "404", "302", "none"
        self.asked = 0
        owner = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                owner.asked += 1
                a = owner.answer
                if self.path != "/metrics" or a == "404":
                    self.send_response(404); self.end_headers(); return
                if a == "302":
                    self.send_response(302)
                    self.send_header("Location", "http://127.0.0.1:%d/metrics" % good.port)
                    self.end_headers(); return
                body = b"pinhole_proxy_tunnels_active 0\n" if a == "none" else metrics(a)
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def run(*args, env=None):
    p = subprocess.run([POLICYC, "fleet-status", *args], capture_output=True, text=True,
                       timeout=60, env=env)
    return p.returncode, p.stdout + p.stderr


def check(name, cond, detail=""):
    print(("ok - " if cond else "FAIL - ") + name + ("" if cond else ": " + detail))
    if not cond:
        FAILS.append(name)


s1, s2, s3 = Server(A), Server(A), Server(A)
good = s1
closed = Server(A)
closed.httpd.shutdown(); closed.httpd.server_close()

rc, out = run("--help")
check("--help", rc == 0 and "Exit status" in out, out)
for args in ([], ["ftp://127.0.0.1/"], ["--wait", "x", s1.url], ["--wait", "-1", s1.url],
             ["--expect", "/nonexistent.ptab", s1.url], ["--bogus", s1.url]):
    rc, out = run(*args)
    check("usage error %s: exit 2" % args, rc == 2, "%d %s" % (rc, out))

rc, out = run(s1.url, s2.url + "/", s3.url + "/metrics")
check("three agree: exit 0", rc == 0, out)
check("each line names its policy", out.count(A) == 4 and "converged: 3 of 3 serve policy " + A in out, out)
rc, out = run("--expect", A, s1.url, s2.url, s3.url)
check("--expect the served id: exit 0", rc == 0, out)
rc, out = run("--expect", B, s1.url, s2.url, s3.url)
check("--expect another id: exit 1", rc == 1 and "expected " + B in out, out)

s3.answer = B
rc, out = run(s1.url, s2.url, s3.url)
check("two policies: exit 1", rc == 1 and "not converged: 2 policies among 3 proxies" in out, out)
check("the odd one named", "%s  %s" % (s3.url, B) in out, out)
s3.answer = A

rc, out = run(s1.url, closed.url)
check("one unreachable: exit 1", rc == 1 and "unreachable" in out and "1 without an answer" in out, out)
for answer, text in (("none", "no pinhole_proxy_policy_info"), ("404", "HTTP 404"),
                     ("302", "HTTP 302")):
    s2.answer = answer
    asked = s1.asked
    rc, out = run(s1.url, s2.url)
    check("an endpoint answering %s: exit 1" % answer, rc == 1 and text in out, out)
    check("a redirect is not followed" if answer == "302" else "asked once (%s)" % answer,
          s1.asked == asked + 1, "%d asks" % (s1.asked - asked))
s2.answer = A

env = dict(os.environ, http_proxy="http://127.0.0.1:%d" % closed.port,
           HTTP_PROXY="http://127.0.0.1:%d" % closed.port, ALL_PROXY="http://127.0.0.1:9")
rc, out = run(s1.url, s2.url, env=env)
check("proxy variables are ignored", rc == 0, out)

# --wait: s3 lags behind the others, which serve B, the expected policy.
s1.answer, s2.answer, s3.answer = B, B, A
asked = s3.asked
p = subprocess.Popen([POLICYC, "fleet-status", "--wait", "40", "--expect", B, s1.url, s2.url,
                      s3.url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for _ in range(400):
    if s3.asked >= asked + 2 or p.poll() is not None:
        break
    time.sleep(0.05)
check("--wait asks again while not converged", p.poll() is None and s3.asked >= asked + 2,
      "asked %d" % (s3.asked - asked))
s3.answer = B
out, _ = p.communicate(timeout=45)
check("--wait: exit 0 once converged", p.returncode == 0, out)
check("--wait: the table before and after", "not converged" in out and
      out.rstrip().endswith("converged: 3 of 3 serve policy " + B)
      and out.count("not converged") == 1, out)
rc, out = run("--wait", "1", "--expect", A, s1.url)
check("--wait: exit 1 at the deadline", rc == 1, out)

print("%d failure(s)" % len(FAILS) if FAILS else "all passed")
sys.exit(1 if FAILS else 0)
