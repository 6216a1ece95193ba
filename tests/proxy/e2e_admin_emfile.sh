#!/bin/bash
# e2e_admin_emfile.sh - the admin listener when descriptors run out
# (proxy/src/admin.c): idle admin connections take every descriptor; accept
# then fails with EMFILE, and the listener must pause rather than retry at
# once forever (a core at 100% and a warning line per retry on stderr). Once
# they close, the admin listener answers again.
# Usage: e2e_admin_emfile.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
E2E_PROXY_PREFIX="prlimit --nofile=96:96" e2e_start_proxy --workers 1

out=$(/usr/bin/python3 - "$ADMIN_PORT" "$PROXY_PID" <<'PY'
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
held = [socket.create_connection(("127.0.0.1", port), timeout=2) for _ in range(120)]
time.sleep(0.5)
c0 = cpu()
time.sleep(2)
used = cpu() - c0
for s in held:
    s.close()
print("%d" % (used * 100))
PY
)
[ "${out:-999}" -lt 50 ] && ok "EMFILE on the admin listener: ${out}% of a core over 2 s" ||
    fail "EMFILE on the admin listener: ${out:-?}% of a core over 2 s (a retry loop)"
warns=$(grep -c "Error from accept" "$E2E_TMP/proxy.err")
[ "$warns" -lt 100 ] && ok "$warns accept warnings" || fail "$warns accept warnings on stderr"
code=000
for _ in $(seq 1 50); do
    code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/healthz")
    [ "$code" = 200 ] && break
    sleep 0.1
done
check "admin answers once the connections closed" 200 "$code"
e2e_finish
