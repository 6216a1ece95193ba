#!/bin/bash
# e2e_parity.sh - the guard and the proxy decide every input of the URL
# corpora alike (gate 8, DESIGN section 2): proxy_parity sends each input to
# a running proxy and asks libpinhole, both resolving through one dnsmasq.
# First the test-loopback pair (the proxy build and proxy_parity_loopback,
# whose guard exempts 127.0.0.0/8): the corpora's "ok" rows are allowed and
# tunnelled to a local upstream. Then the production pair (pinhole-proxy and
# proxy_parity on the default libpinhole): the same rows are denied_address.
# Usage: e2e_parity.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4 DEFAULT_PROXY=$5
. "$(dirname "$0")/e2e_lib.sh"
DATA=$PH_SOURCE_DIR/tests/proxy/data
DNS_TIMEOUT_MS=1000

for b in proxy_parity proxy_parity_loopback; do
    [ -x "$PH_BINARY_DIR/tests/proxy/$b" ] || { fail "$b is not built"; e2e_finish; }
done

# The upstream: one loopback address on which every port of the allowlist
# listens (accepting and closing), and a UDP socket that never answers (the
# DNS server behind slow.parity.test). The address is the first of
# 127.77.N.1 on which the kernel lets every bind succeed, so runs side by
# side never share one. Prints "ADDR UDP_PORT".
PORTS=$(sed -n 's/^ *ports: \[\(.*\)\]/\1/p' "$DATA/parity-allowlist.yaml" | tr -d ' ' | tr ',' '\n' |
    sort -un | paste -sd, -)
/usr/bin/python3 - "$PORTS" >"$E2E_TMP/upstream.out" 2>"$E2E_TMP/upstream.err" <<'PY' &
import select, socket, sys
ports = [int(p) for p in sys.argv[1].split(",")]
for n in range(256):
    addr, socks = "127.77.%d.1" % n, []
    try:
        for port in ports:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            socks.append(s)
            s.bind((addr, port))
            s.listen(128)
        break
    except OSError:
        for s in socks:
            s.close()
else:
    sys.exit("no loopback address with every port free")
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
print(addr, udp.getsockname()[1], flush=True)
while True:
    for s in select.select(socks, [], [])[0]:
        s.accept()[0].close()
PY
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 100); do [ -s "$E2E_TMP/upstream.out" ] && break; sleep 0.05; done
read -r UP_ADDR SILENT_UDP <"$E2E_TMP/upstream.out" ||
    { fail "upstream did not start: $(cat "$E2E_TMP/upstream.err")"; e2e_finish; }
ok "upstream on $UP_ADDR, ports $PORTS"

e2e_make_policy
"$POLICYC" compile "$DATA/parity-allowlist.yaml" -o "$E2E_TMP/table.ptab" >/dev/null ||
    { fail "policyc compile parity-allowlist.yaml"; e2e_finish; }
T_PARITY=$(e2e_issue lease-p parity)
T_ABSENT=$(e2e_issue lease-a no-such-list)

# What the production guard says of http://NAME/ with resolution (its
# denied_address detail names the address dnsmasq gave).
guard_says() {
    "$GRANT" check --table "$E2E_TMP/table.ptab" --list parity --resolve \
        --dns-server "127.0.0.1:$DNS_PORT" --dns-timeout 300 "http://$1/" 2>&1
}

# dnsmasq answering every allowlisted name with the upstream's address (the
# extra rows' names as their notes say); nothing else exists.
records=()
for h in $(sed -n 's/^ *- host: //p' "$DATA/parity-allowlist.yaml"); do
    case "$h" in
        nx.parity.test) ;;
        slow.parity.test) records+=("--server=/$h/127.0.0.1#$SILENT_UDP") ;;
        private.parity.test) records+=("--host-record=$h,10.1.2.3") ;;
        mixed.parity.test) records+=("--host-record=$h,$UP_ADDR" "--host-record=$h,169.254.169.254") ;;
        *) records+=("--host-record=$h,$UP_ADDR") ;;
    esac
done
e2e_dnsmasq --local=/#/ "${records[@]}"
guard_says xn--bcher-kva.example | grep -qF "$UP_ADDR" &&
    ok "dnsmasq answers the corpus names with the upstream's address" ||
    fail "dnsmasq: $(guard_says xn--bcher-kva.example)"

run_parity() { # name binary
    out=$("$PH_BINARY_DIR/tests/proxy/$2" "$E2E_TMP/table.ptab" "$PROXY_PORT" "127.0.0.1:$DNS_PORT" \
        "$DNS_TIMEOUT_MS" parity "$T_PARITY" no-such-list "$T_ABSENT")
    rc=$?
    printf '%s\n' "$out" | grep -E '^(MISMATCH|WRONG|MISSING)' | head -20
    printf '%s\n' "$out" | grep -E ' build: |^reasons:' | sed 's/^/# /'
    check "$1 ($(printf '%s\n' "$out" | grep ' build: ' | sed 's/^[^:]*: //'))" "0" "$rc"
}

e2e_start_proxy --dns-timeout-ms "$DNS_TIMEOUT_MS"
run_parity "guard/proxy parity, test-loopback build" proxy_parity_loopback
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

PROXY=$DEFAULT_PROXY
e2e_start_proxy --dns-timeout-ms "$DNS_TIMEOUT_MS"
run_parity "guard/proxy parity, production build" proxy_parity
e2e_finish
