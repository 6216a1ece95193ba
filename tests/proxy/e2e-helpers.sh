# e2e-helpers.sh - sourced after e2e_lib.sh by the end-to-end scripts that
# need these (not named e2e_*.sh: e2e.cmake registers those as tests).

# wait_metric NAME VALUE: polls the admin /metrics until NAME equals VALUE
# (up to ~5 s; waiting on the proxy's own count, not a guessed sleep).
# Prints the last value seen, for the caller's check.
wait_metric() {
    local v=""
    for _ in $(seq 1 100); do
        v=$(e2e_metric "$1")
        [ "$v" = "$2" ] && break
        sleep 0.05
    done
    echo "$v"
}

# dnsmasq_local ARGS...: for scripts with DNS names of their own
# (e2e_start_dns has a fixed set), starts dnsmasq on 127.0.0.1 with ARGS (its
# records: --host-record=..., --server=/name/...); every other name is NXDOMAIN. The
# port is one the kernel gave for UDP that was free for TCP too (dnsmasq
# binds both), picked again if dnsmasq lost it meanwhile. Returns once
# dnsmasq answers. Sets DNS_PORT (what e2e_start_proxy hands the proxy) and
# adds dnsmasq to E2E_PIDS; fails the script if it never answers.
dnsmasq_local() {
    local pid
    for _ in 1 2 3 4 5; do
        DNS_PORT=$(/usr/bin/python3 -c '
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
t = socket.socket(); t.bind(("127.0.0.1", u.getsockname()[1])); print(u.getsockname()[1])')
        dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces \
            --listen-address=127.0.0.1 --port="$DNS_PORT" --pid-file= --user=root --group=root \
            --local=/#/ "$@" 2>"$E2E_TMP/dnsmasq.err" &
        pid=$!
        for _ in $(seq 1 100); do
            if dnsmasq_answers "$DNS_PORT"; then E2E_PIDS="$E2E_PIDS $pid"; return 0; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    fail "dnsmasq did not start: $(cat "$E2E_TMP/dnsmasq.err")"
    e2e_finish
}

# True when a DNS server answers (anything, NXDOMAIN too) on 127.0.0.1:$1.
dnsmasq_answers() {
    /usr/bin/python3 - "$1" <<'PY' 2>/dev/null
import socket, sys
q = bytes.fromhex("12340100000100000000000005726561647904746573740000010001")  # ready.test A
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.2)
s.sendto(q, ("127.0.0.1", int(sys.argv[1])))
sys.exit(0 if s.recv(512)[:2] == q[:2] else 1)
PY
}
