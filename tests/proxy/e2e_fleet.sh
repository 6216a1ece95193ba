#!/bin/bash
# e2e_fleet.sh - three pinhole-proxy behind HAProxy (Debian's, run here as
# an unprivileged foreground process with a config this test writes), which
# sends each a PROXY protocol v2 header (send-proxy-v2); every port from the
# kernel, clients on 127.0.0.2 and 127.0.0.3:
#   1. tunnels through the balancer spread across the three (round robin),
#      each logged with the client's address, not the balancer's;
#   2. the per-peer head cap (2 per instance) holds per client through the
#      balancer: one client holding its cap on all three is refused
#      (503 peer_head_limit_exceeded), the other is still served;
#   3. a new table rolled out one instance at a time (SIGHUP), with
#      `policyc fleet-status` after each step saying which instance serves
#      which policy id (exit 1) until all agree (exit 0), and a
#      `fleet-status --wait` started before the roll-out returning 0 once
#      the last one reloaded.
# Each step waits on the state it checks (the proxies' /metrics), never on
# time.
# Usage: e2e_fleet.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$HAPROXY" ] || { echo "SKIP: haproxy is not installed (scripts/deps.sh)"; exit 77; }

e2e_start_dns
e2e_make_policy
e2e_start_tls
D=$E2E_DOMAIN

# ---- the fleet ---------------------------------------------------------------
PORTS=() ADMINS=() PIDS=() URLS=()
for i in 1 2 3; do
    cp "$E2E_TMP/table.ptab" "$E2E_TMP/p$i.ptab"
    chown nobody "$E2E_TMP/p$i.ptab" 2>/dev/null
    E2E_PROXY_NAME=p$i e2e_start_proxy --workers 1 --table "$E2E_TMP/p$i.ptab" \
        --proxy-protocol 127.0.0.1 --max-head-connections-per-peer 2
    PORTS+=("$PROXY_PORT") ADMINS+=("$ADMIN_PORT") PIDS+=("$PROXY_PID")
    URLS+=("http://127.0.0.1:$ADMIN_PORT")
done
wait_metric_of() { # wait_metric_of ADMIN_PORT NAME VALUE: e2e_wait_metric on that instance
    ADMIN_PORT=$1 e2e_wait_metric "$2" "$3"
}

# HAProxy on a port the kernel handed out (picked again if lost meanwhile).
start_haproxy() {
    for _ in 1 2 3 4 5; do
        LB_PORT=$(e2e_port)
        cat >"$E2E_TMP/haproxy.cfg" <<CFG
global
    maxconn 256
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend fleet
    bind 127.0.0.1:$LB_PORT
    default_backend proxies
backend proxies
    balance roundrobin
    server p1 127.0.0.1:${PORTS[0]} send-proxy-v2
    server p2 127.0.0.1:${PORTS[1]} send-proxy-v2
    server p3 127.0.0.1:${PORTS[2]} send-proxy-v2
CFG
        chmod 644 "$E2E_TMP/haproxy.cfg"
        # From /: haproxy goes back to its starting directory, which nobody
        # may not be allowed to enter (a build tree under a 0700 directory).
        (cd / && exec setpriv --reuid=nobody --regid=nogroup --clear-groups \
            "$HAPROXY" -db -f "$E2E_TMP/haproxy.cfg") >"$E2E_TMP/haproxy.out" 2>&1 &
        LB_PID=$!
        for _ in $(seq 1 100); do
            if (exec 3<>/dev/tcp/127.0.0.1/"$LB_PORT") 2>/dev/null; then
                E2E_PIDS="$E2E_PIDS $LB_PID"; return 0
            fi
            kill -0 "$LB_PID" 2>/dev/null || break
            sleep 0.05
        done
        kill "$LB_PID" 2>/dev/null; wait "$LB_PID" 2>/dev/null
    done
    fail "haproxy did not start: $(cat "$E2E_TMP/haproxy.out")"; e2e_finish
}
start_haproxy
echo "# haproxy on 127.0.0.1:$LB_PORT, proxies on ${PORTS[*]} (admin ${ADMINS[*]})"
# The readiness probe's connection (HAProxy sent its header on, then the
# probe closed) ends as client_closed; wait until none is open.
for a in "${ADMINS[@]}"; do wait_metric_of "$a" pinhole_proxy_connections_active 0 >/dev/null; done

# ---- 1. tunnels spread across the three ---------------------------------------
lb_curl() { # lb_curl SOURCE: a tunnel to the TLS server through the balancer
    curl -sS -o /dev/null -w '%{http_code}' --max-time 20 --interface "$1" \
        --cacert "$E2E_TMP/tls.crt" --proxy "http://lease1:$TOKEN@127.0.0.1:$LB_PORT" \
        "https://ok.$D:$TLS_PORT/" 2>&1
}
codes=""
for _ in 1 2 3 4 5 6; do codes="$codes $(lb_curl 127.0.0.2)"; done
check "six tunnels through the balancer" " 200 200 200 200 200 200" "$codes"
spread=""
for a in "${ADMINS[@]}"; do spread="$spread $(wait_metric_of "$a" pinhole_proxy_tunnels_total 2)"; done
check "tunnels per instance (round robin)" " 2 2 2" "$spread"
peers=$(cat "$E2E_TMP"/p[123].log | grep -F '"reason":"allowed"' |
    /usr/bin/python3 -c 'import json,sys; print(" ".join(sorted({json.loads(l)["peer"].rsplit(":",1)[0] for l in sys.stdin})))')
check "every tunnel logged with the client's address" "127.0.0.2" "$peers"

# ---- 2. the per-peer head cap per client, through the balancer ---------------
out=$(/usr/bin/python3 - "$LB_PORT" "ok.$D" "$TOKEN" "${ADMINS[@]}" <<'PY'
import socket, sys, time, urllib.request
lb, host, token, admins = int(sys.argv[1]), sys.argv[2], sys.argv[3], [int(a) for a in sys.argv[4:]]

def active(a):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % a, timeout=5).read().decode()
    return [l.split()[1] for l in text.splitlines() if l.startswith("pinhole_proxy_connections_active ")][0]

def conn(src):
    s = socket.socket(); s.bind((src, 0)); s.connect(("127.0.0.1", lb)); s.settimeout(20)
    return s

def answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(4096)
        if not d:
            break
        data += d
    s.close()
    lines = data.split(b"\r\n")
    reason = [l.split(b": ", 1)[1].decode() for l in lines if l.lower().startswith(b"pinhole-reason:")]
    return "%s %s" % (lines[0].split()[1].decode() if data else "closed", reason[0] if reason else "-")

# 127.0.0.2 holds its cap (2) on each of the three: six heads left incomplete.
held = []
for _ in range(6):
    s = conn("127.0.0.2"); s.sendall(b"CONNECT " + host.encode()); held.append(s)
for _ in range(400):
    if [active(a) for a in admins] == ["2", "2", "2"]:
        break
    time.sleep(0.025)
print("held", " ".join(active(a) for a in admins))
req = ("CONNECT %s:1 HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n" % (host, token)).encode()
s = conn("127.0.0.2"); s.sendall(req); print("capped", answer(s))
s = conn("127.0.0.3"); s.sendall(req); print("other", answer(s))
for s in held:
    s.close()
PY
)
echo "$out"
got() { printf '%s\n' "$out" | awk -v k="$1" '$1==k{$1=""; sub(/^ /, ""); print; exit}'; }
check "127.0.0.2 holds two heads on each instance" "2 2 2" "$(got held)"
check "127.0.0.2 at its cap is refused" "503 peer_head_limit_exceeded" "$(got capped)"
check "127.0.0.3 is still served" "403 port_not_allowed" "$(got other)"
capped_peer=$(cat "$E2E_TMP"/p[123].log | grep -F '"reason":"peer_head_limit_exceeded"' |
    /usr/bin/python3 -c 'import json,sys; print(" ".join(json.loads(l)["peer"].rsplit(":",1)[0] for l in sys.stdin))')
check "the refusal is logged with the client's address" "127.0.0.2" "$capped_peer"
for a in "${ADMINS[@]}"; do wait_metric_of "$a" pinhole_proxy_connections_active 0 >/dev/null; done

# ---- 3. a new table, one instance at a time ----------------------------------
ID1=$("$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" -o "$E2E_TMP/t1.ptab" 2>/dev/null |
    sed -n 's/.*policy id \([0-9a-f]*\).*/\1/p')
{ cat "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml"
  printf '  rollout:\n    rules:\n      - host: rollout.%s\n        ports: [443]\n' "$D"
} >"$E2E_TMP/allowlist2.yaml"
ID2=$("$POLICYC" compile "$E2E_TMP/allowlist2.yaml" -o "$E2E_TMP/t2.ptab" 2>/dev/null |
    sed -n 's/.*policy id \([0-9a-f]*\).*/\1/p')
echo "# policy $ID1 -> $ID2"
"$POLICYC" fleet-status --expect "$ID1" "${URLS[@]}"
check "fleet-status before the roll-out: converged on the first table" "0" "$?"
"$POLICYC" fleet-status --wait 90 --expect "$E2E_TMP/t2.ptab" "${URLS[@]}" >"$E2E_TMP/wait.out" 2>&1 &
WAIT_PID=$!
for i in 0 1 2; do
    cp "$E2E_TMP/t2.ptab" "$E2E_TMP/p$((i + 1)).ptab.new"
    chown nobody "$E2E_TMP/p$((i + 1)).ptab.new" 2>/dev/null
    mv "$E2E_TMP/p$((i + 1)).ptab.new" "$E2E_TMP/p$((i + 1)).ptab"
    kill -HUP "${PIDS[$i]}"
    v=$(wait_metric_of "${ADMINS[$i]}" "pinhole_proxy_policy_info{policy_id=\"$ID2\"}" 1)
    check "p$((i + 1)) reloaded the new table" "1" "$v"
    echo "# fleet-status after p$((i + 1)):"
    "$POLICYC" fleet-status "${URLS[@]}" | sed 's/^/#   /'
    rc=${PIPESTATUS[0]}
    if [ "$i" -lt 2 ]; then
        check "fleet-status after p$((i + 1)): not converged" "1" "$rc"
    else
        check "fleet-status after p$((i + 1)): converged" "0" "$rc"
    fi
done
wait "$WAIT_PID"
check "fleet-status --wait returned once all agreed" "0" "$?"
sed 's/^/# --wait: /' "$E2E_TMP/wait.out"
check "--wait saw the fleet disagree, then agree" "yes" \
    "$(grep -q '^not converged' "$E2E_TMP/wait.out" && tail -1 "$E2E_TMP/wait.out" | grep -q "^converged: 3 of 3 serve policy $ID2" && echo yes)"
check "a tunnel through the balancer after the roll-out" "200" "$(lb_curl 127.0.0.3)"
e2e_finish
