# e2e_lib.sh - shared set-up of the proxy's end-to-end tests (sourced).
# Real parts: dnsmasq on a loopback port, openssl s_server, curl, the
# byte-checking peer, and the PINHOLE_TEST_LOOPBACK_UPSTREAM proxy build.
#
# Callers set PROXY (binary), POLICYC, GRANT (pinhole-guard), PEER before sourcing, and call
# e2e_start_dns, e2e_make_policy, e2e_start_proxy [extra options...].
#
# Ports come from the kernel: the proxy listens on port 0 and reports what it
# bound in its --ready-file; the TLS server on port 0 prints its port;
# dnsmasq, which cannot take port 0, gets a port the kernel just handed out
# and is started again with another if that one was taken meanwhile.
#
# Sanitizer builds report into $E2E_TMP/sanitizer.<pid> (ASAN_OPTIONS /
# UBSAN_OPTIONS below: stop at the first error, leaks count); e2e_finish
# stops every daemon first (leak reports are written at exit), then fails
# the test on any report.
set -u

# The test's files live in E2E_TMP, which tests hand to the proxy's user
# (chown nobody); it sits in a directory only we control, as a deployment's
# /run/pinhole-proxy does under /run: a directory of another user's directly
# in a shared one like /tmp could have been made by anyone, and a sandbox
# refuses a proxy socket there (docs/sandbox.md).
E2E_TOP=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-proxy-e2e.XXXXXX")
chmod 755 "$E2E_TOP"
E2E_TMP=$E2E_TOP/run
mkdir "$E2E_TMP"
E2E_PIDS=""
E2E_FAILS=0
E2E_DOMAIN=pinhole-e2e.test
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:log_path=$E2E_TMP/sanitizer"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$E2E_TMP/sanitizer"

# Stops every daemon started so far (SIGTERM, then waits: a sanitizer
# writes its leak report at exit).
e2e_stop_all() {
    for p in $E2E_PIDS; do kill "$p" 2>/dev/null; done
    for p in $E2E_PIDS; do wait "$p" 2>/dev/null; done
    E2E_PIDS=""
}

e2e_cleanup() {
    e2e_stop_all
    [ -n "${E2E_SANITIZER_CHECKED:-}" ] || e2e_check_sanitizer  # a script that exited early
    if [ "${E2E_KEEP:-0}" = 1 ] || [ "$E2E_FAILS" -ne 0 ]; then
        echo "# kept $E2E_TMP"; tail -n 20 "$E2E_TMP"/proxy.err 2>/dev/null
    else
        rm -rf "$E2E_TOP"
    fi
}
trap e2e_cleanup EXIT

# A loopback port the kernel hands out (bound to port 0, read back, released:
# free for TCP and UDP a moment ago), for servers that cannot listen on port 0
# themselves.
e2e_port() {
    /usr/bin/python3 -c '
import socket
while True:
    t = socket.socket(); t.bind(("127.0.0.1", 0)); port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port)); break
    except OSError:
        pass
    finally:
        u.close(); t.close()
print(port)'
}

ok()   { echo "ok - $*"; }
fail() { echo "FAIL - $*"; E2E_FAILS=$((E2E_FAILS + 1)); }
check() { # check NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: expected '$2', got '$3'"; fi
}

# Waits until a TCP port accepts (up to ~5 s).
e2e_wait_port() {
    for _ in $(seq 1 100); do
        (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "port $1 never opened" >&2
    return 1
}

# e2e_dnsmasq ARGS...: starts dnsmasq on 127.0.0.1 with ARGS (its records:
# --local=/name/, --host-record=..., --server=/name/...) on a port the kernel
# gave, picked again if dnsmasq lost it meanwhile. Returns once dnsmasq
# answers a query. Sets DNS_PORT (what e2e_start_proxy hands the proxy) and
# adds dnsmasq to E2E_PIDS; fails the script if it never answers.
e2e_dnsmasq() {
    local pid
    for _ in 1 2 3 4 5; do
        DNS_PORT=$(e2e_port)
        dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces \
            --listen-address=127.0.0.1 --port="$DNS_PORT" --pid-file= --user=root --group=root \
            "$@" 2>"$E2E_TMP/dnsmasq.err" &
        pid=$!
        for _ in $(seq 1 100); do
            if e2e_dns_answers "$DNS_PORT"; then E2E_PIDS="$E2E_PIDS $pid"; return 0; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    fail "dnsmasq did not start: $(cat "$E2E_TMP/dnsmasq.err")"
    e2e_finish
}

# True when a DNS server answers (anything, NXDOMAIN too) on 127.0.0.1:$1.
e2e_dns_answers() {
    /usr/bin/python3 - "$1" <<'PY' 2>/dev/null
import socket, sys
q = bytes.fromhex("12340100000100000000000005726561647904746573740000010001")  # ready.test A
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.2)
s.sendto(q, ("127.0.0.1", int(sys.argv[1])))
sys.exit(0 if s.recv(512)[:2] == q[:2] else 1)
PY
}

# The names of the test domain (e2e_dnsmasq with the fixed set).
e2e_start_dns() {
    SILENT_PORT=$(e2e_port)   # nothing listens: forwarded queries go unanswered
    e2e_dnsmasq --local=/$E2E_DOMAIN/ \
        --host-record=ok.$E2E_DOMAIN,127.0.0.1 \
        --host-record=tls.$E2E_DOMAIN,127.0.0.1 \
        --host-record=web.$E2E_DOMAIN,127.0.0.1 \
        --host-record=other.$E2E_DOMAIN,127.0.0.1 \
        --host-record=refused.$E2E_DOMAIN,127.0.0.1 \
        --host-record=blackhole.$E2E_DOMAIN,127.0.0.1 \
        --host-record=private.$E2E_DOMAIN,10.1.2.3 \
        --host-record=mixed.$E2E_DOMAIN,127.0.0.1,fd00::1 \
        --server=/slow.$E2E_DOMAIN/127.0.0.1#"$SILENT_PORT"
}

# A token for tenant t1: e2e_issue LEASE LIST [pinhole-guard grant issue options].
e2e_issue() {
    lease=$1 list=$2
    shift 2
    "$GRANT" grant issue --keys "$E2E_TMP/grant.key" --tenant t1 --lease "$lease" --list "$list" "$@"
}

# Compiles the test allowlist, makes a grant key and tokens:
#   TOKEN (list e2e), TOKEN_OTHER (list other), TOKEN_EXPIRED, TOKEN_FORGED.
e2e_make_policy() {
    "$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" \
        -o "$E2E_TMP/table.ptab" >/dev/null || { fail "policyc compile"; exit 1; }
    "$GRANT" keygen --kid e2e --output "$E2E_TMP/grant.key"
    "$GRANT" keygen --kid e2e --output "$E2E_TMP/forger.key"
    TOKEN=$(e2e_issue lease1 e2e)
    TOKEN_OTHER=$(e2e_issue lease2 other)
    now=$(date +%s)
    TOKEN_EXPIRED=$(e2e_issue lease3 e2e --not-before $((now - 7200)) --ttl 3600)
    TOKEN_FORGED=$("$GRANT" grant issue --keys "$E2E_TMP/forger.key" --tenant t1 --lease lease1 --list e2e)
}

# Tokens of two leases on list e2e, TOKEN_A (leaseA) and TOKEN_B (leaseB),
# and an empty revocation list REV (e2e_start_proxy --revocations "$REV").
e2e_two_leases() {
    TOKEN_A=$(e2e_issue leaseA e2e)
    TOKEN_B=$(e2e_issue leaseB e2e)
    REV=$E2E_TMP/revocations
    : >"$REV"
    chmod 644 "$REV"
}

# Waits for a proxy's ready file ($1) while its process ($2) lives.
e2e_wait_ready() {
    for _ in $(seq 1 200); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.025
    done
    return 1
}

# Starts the proxy in the background on ports the kernel chooses:
# PROXY_PORT, ADMIN_PORT, PROXY_PID. E2E_PROXY_PREFIX (e.g. "prlimit
# --nofile=64:64") runs it under a wrapper; E2E_PROXY_NAME (default proxy)
# names its files: $E2E_TMP/NAME.log (connections), NAME.err (events),
# NAME.ready.
# Every tunnel is inspected: a suite whose tunnels carry the peer's raw
# bytes (proxy_e2e_peer.c, not TLS) says `protocol: tcp` in its allowlist.
e2e_start_proxy() {
    # As root the proxy must drop privileges: run as nobody, owning its files
    # (reloads reopen the table and the 0600 key after the drop).
    E2E_USER_OPT=""
    if [ "$(id -u)" = 0 ]; then
        chown nobody "$E2E_TMP" "$E2E_TMP"/table.ptab "$E2E_TMP"/grant.key
        E2E_USER_OPT="--user nobody"
    fi
    n=${E2E_PROXY_NAME:-proxy}
    rm -f "$E2E_TMP/$n.ready"
    ${E2E_PROXY_PREFIX:-} "$PROXY" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
        --ready-file "$E2E_TMP/$n.ready" \
        --table "$E2E_TMP/table.ptab" --grant-key "$E2E_TMP/grant.key" \
        --dns-servers 127.0.0.1:"$DNS_PORT" --workers 2 $E2E_USER_OPT "$@" \
        >"$E2E_TMP/$n.log" 2>"$E2E_TMP/$n.err" &
    PROXY_PID=$!
    if e2e_wait_ready "$E2E_TMP/$n.ready" "$PROXY_PID"; then
        E2E_PIDS="$E2E_PIDS $PROXY_PID"
        PROXY_PORT=$(awk '$1=="listen"{n=split($2,a,":"); print a[n]; exit}' "$E2E_TMP/$n.ready")
        ADMIN_PORT=$(awk '$1=="admin"{n=split($2,a,":"); print a[n]; exit}' "$E2E_TMP/$n.ready")
        return 0
    fi
    kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
    fail "proxy did not start"; cat "$E2E_TMP/$n.err"; exit 1
}

# The byte-recording HTTP upstream of the forwarding tests
# (tests/proxy/e2e_forward_peer.py serve) on a port the kernel chose: sets
# UPEER (the peer's command, also its raw client) and UP (its port);
# $E2E_TMP/up holds what it received (recv.bin) and its connections (conns).
e2e_start_forward_peer() {
    UPEER="/usr/bin/python3 $PH_SOURCE_DIR/tests/proxy/e2e_forward_peer.py"
    e2e_start_upstream "$UPEER" up
}

# A test's Python upstream ("$1 serve DIR", DIR $E2E_TMP/$2, which gets its
# port file) on a port the kernel chose: sets UP (its port).
e2e_start_upstream() {
    mkdir -p "$E2E_TMP/$2"
    $1 serve "$E2E_TMP/$2" 2>"$E2E_TMP/$2.err" & E2E_PIDS="$E2E_PIDS $!"
    for _ in $(seq 1 200); do [ -s "$E2E_TMP/$2/port" ] && break; sleep 0.025; done
    UP=$(cat "$E2E_TMP/$2/port")
    [ -n "$UP" ] || { fail "upstream did not start"; e2e_finish; }
}

# A TLS server (openssl s_server -www, and any s_server options given) for
# ok.$E2E_DOMAIN on TLS_PORT (the kernel's choice: it prints "ACCEPT
# 127.0.0.1:PORT").
e2e_start_tls() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
        -subj "/CN=ok.$E2E_DOMAIN" -addext "subjectAltName=DNS:ok.$E2E_DOMAIN,DNS:tls.$E2E_DOMAIN" \
        -keyout "$E2E_TMP/tls.key" -out "$E2E_TMP/tls.crt" 2>/dev/null
    openssl s_server -accept 127.0.0.1:0 -cert "$E2E_TMP/tls.crt" \
        -key "$E2E_TMP/tls.key" -www "$@" </dev/null >"$E2E_TMP/tls.out" 2>/dev/null &
    E2E_PIDS="$E2E_PIDS $!"
    TLS_PORT=""
    for _ in $(seq 1 200); do
        TLS_PORT=$(awk '/^ACCEPT /{n=split($2,a,":"); print a[n]; exit}' "$E2E_TMP/tls.out")
        [ -n "$TLS_PORT" ] && break
        sleep 0.025
    done
    [ -n "$TLS_PORT" ] || { fail "openssl s_server did not start"; exit 1; }
    e2e_wait_port "$TLS_PORT"
}

# curl through the proxy; prints "<proxy CONNECT status> <Pinhole-Reason>".
# $1: userinfo ("lease:token" or "" for none), $2: host:port.
e2e_curl() {
    auth=$1 dest=$2
    if [ -n "$auth" ]; then purl="http://$auth@127.0.0.1:$PROXY_PORT"; else purl="http://127.0.0.1:$PROXY_PORT"; fi
    out=$(curl -sS -o /dev/null --max-time 20 --cacert "$E2E_TMP/tls.crt" \
        --proxy "$purl" -D - "https://$dest/" 2>/dev/null | tr -d '\r')
    code=$(printf '%s\n' "$out" | awk '/^HTTP\//{print $2; exit}')
    reason=$(printf '%s\n' "$out" | awk -F': ' 'tolower($1)=="pinhole-reason"{print $2; exit}')
    final=$(printf '%s\n' "$out" | awk '/^HTTP\//{c=$2} END{print c}')
    echo "${code:-none} ${reason:--} ${final:-none}"
}

# Sends raw bytes to the proxy and prints the status line's code.
e2e_raw() {
    printf "$1" | timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; head -c 12 <&3" \
        2>/dev/null | awk '{print $2}'
}

# The percent of a core PID used over one second: its CPU time (utime +
# stime, /proc/PID/stat fields 14 and 15, in clock ticks) before and after,
# over the wall time between (prints an integer; a spinning loop shows ~100).
e2e_cpu_pct() { # PID
    c0=$(awk '{print $14 + $15}' "/proc/$1/stat"); t0=$(date +%s.%N)
    sleep 1
    c1=$(awk '{print $14 + $15}' "/proc/$1/stat"); t1=$(date +%s.%N)
    echo "($c1 - $c0) * 100 / $(getconf CLK_TCK) / ($t1 - $t0)" | bc
}

e2e_metric() { # value of the metric line starting with $1
    curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk -v k="$1" 'index($0, k" ")==1{print $2}'
}

# e2e_wait_metric NAME VALUE: polls the admin /metrics until NAME equals VALUE
# (up to ~5 s; waiting on the proxy's own count, not a guessed sleep).
# Prints the last value seen, for the caller's check.
e2e_wait_metric() {
    local v=""
    for _ in $(seq 1 100); do
        v=$(e2e_metric "$1")
        [ "$v" = "$2" ] && break
        sleep 0.05
    done
    echo "$v"
}

# e2e_log_lines EXPR [LOG]: how many JSON lines of the connection log LOG
# (default $E2E_TMP/proxy.log) the Python expression EXPR holds for, each
# parsed line as r.
e2e_log_lines() {
    /usr/bin/python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    n += bool(eval(sys.argv[2]))
print(n)' "${2:-$E2E_TMP/proxy.log}" "$1"
}

# Fails on any sanitizer report (a file $E2E_TMP/sanitizer.<pid>, or a
# report that went to a daemon's stderr). Call after the daemons exited.
e2e_check_sanitizer() {
    for f in "$E2E_TMP"/sanitizer.*; do
        [ -s "$f" ] || continue
        fail "sanitizer report in $(basename "$f"): $(grep -m3 -E "ERROR|runtime error|SUMMARY" "$f" | tr '\n' ' ')"
    done
    if grep -qsE "ERROR: [A-Za-z]*Sanitizer|runtime error:" "$E2E_TMP"/*.err "$E2E_TMP"/*.log; then
        fail "sanitizer report: $(grep -hsE "Sanitizer|runtime error" "$E2E_TMP"/*.err "$E2E_TMP"/*.log | head -3)"
    fi
}

e2e_finish() {
    e2e_stop_all
    e2e_check_sanitizer
    E2E_SANITIZER_CHECKED=1
    if [ "$E2E_FAILS" -ne 0 ]; then echo "$E2E_FAILS failure(s)"; exit 1; fi
    echo "all passed"
}
