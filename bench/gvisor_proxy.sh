#!/bin/bash
# gvisor_proxy.sh - bench_gvisor_proxy: what the sandbox's only way out costs.
#
# One run, one local upstream (proxy_e2e_peer serve, plain bytes behind a
# CONNECT tunnel), one pinhole-proxy (test-loopback build, the proxy's e2e
# set-up: dnsmasq, policyc, a grant from pinhole-guard). A download of
# MEGABYTES (default 100) MB is timed REPEAT times (default 3; medians):
#   a. on the host: proxy_e2e_peer client -> pinhole-proxy TCP listener;
#   b. inside a gvisor sandbox with a grant: the same client (copied into the
#      root filesystem) -> pinhole-forwarder on 127.0.0.1:3128 -> the proxy's
#      unix socket bind-mounted in;
#   diagnostics, same sandbox: the client on the proxy's socket directly (no
#      forwarder: gVisor's own cost), and busybox nc (small reads, once)
#      through the forwarder: what the reader's own syscalls cost under ptrace.
# The peer reads 64 KiB at a time and checks nothing but counts; the
# upstream's byte count is compared so an incomplete transfer is reported,
# not timed. Times inside the sandbox are net of a warm `true` execute
# (median of 5, same sandbox), which is what runsc exec itself costs.
# Prints MB/s and ratios vs (a); asserts nothing.
#
# Usage: gvisor_proxy.sh PROXY POLICYC GUARD PEER SANDBOX_CLI BUILD_ROOTFS [MEGABYTES [REPEAT]]
#        (the build wraps it as bench/bench_gvisor_proxy)
# Exit codes: 0 done, 1 a step failed, 2 usage, 77 no gvisor here.
for arg; do
    [ "$arg" = --help ] && { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0; }
done
[ $# -ge 6 ] || { echo "usage: $0 PROXY POLICYC GUARD PEER SANDBOX_CLI BUILD_ROOTFS [MEGABYTES [REPEAT]]" >&2; exit 2; }
# shellcheck disable=SC2034 # PROXY, POLICYC, GRANT: read by e2e_lib.sh
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4 SANDBOX=$5 BUILD_ROOTFS=$6 MB=${7:-100} REPEAT=${8:-3}
case "$MB$REPEAT" in *[!0-9]*) echo "MEGABYTES and REPEAT must be positive integers" >&2; exit 2 ;; esac
[ "$MB" -gt 0 ] && [ "$REPEAT" -gt 0 ] || { echo "MEGABYTES and REPEAT must be positive integers" >&2; exit 2; }
if [ "$(id -u)" != 0 ] || ! command -v runsc >/dev/null || ! [ -x /bin/busybox ] ||
   ! command -v dnsmasq >/dev/null; then
    echo "SKIP: needs root, runsc, busybox-static and dnsmasq"
    exit 77
fi
: "${PH_SOURCE_DIR:=$(cd "$(dirname "$0")/.." && pwd)}"
export PH_SOURCE_DIR
. "$PH_SOURCE_DIR/tests/proxy/e2e_lib.sh"
BYTES=$((MB * 1048576))

now() { date +%s.%N; }
rate() { awk -v mb="$MB" -v s="$1" 'BEGIN { printf "%.1f", (s > 0 ? mb / s : 0) }'; }

# The root filesystem: busybox plus the peer (and its libraries).
PATH="$(dirname "$PEER"):$PATH" PH_ROOTFS_HOST_TOOLS="dash $(basename "$PEER")" \
    "$BUILD_ROOTFS" "$E2E_TMP/rootfs" >/dev/null 2>&1 || { fail "building the root filesystem"; exit 1; }
export PINHOLE_GVISOR_ROOTFS="$E2E_TMP/rootfs"
PEER_IN=/usr/bin/$(basename "$PEER")

e2e_start_dns
e2e_make_policy
e2e_start_proxy --unix-socket "$E2E_TMP/proxy.sock" --unix-socket-mode 0666
UP_PORT=$(e2e_port 18000 18999)
"$PEER" serve "$UP_PORT" >"$E2E_TMP/upstream.out" & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$UP_PORT" || exit 1
TARGET="ok.$E2E_DOMAIN:$UP_PORT"

# The bytes the upstream sent on its latest connection.
upstream_sent() {
    for _ in $(seq 1 50); do
        [ "$(wc -l <"$E2E_TMP/upstream.out")" -gt "$1" ] && break
        sleep 0.1
    done
    tail -n 1 "$E2E_TMP/upstream.out" | awk '{print $5}'
}

# The median of REPEAT timings printed by "$@" (one per call), or
# "incomplete" when any was.
median_of() {
    local out=""
    for _ in $(seq 1 "$REPEAT"); do out="$out $("$@")"; done
    case "$out" in *incomplete*) echo incomplete; return ;; esac
    printf '%s\n' $out | sort -n | sed -n "$(( (REPEAT + 1) / 2 ))p"
}

# a. host client through the proxy alone.
host_once() {
    local lines t0 s
    lines=$(wc -l <"$E2E_TMP/upstream.out")
    t0=$(now)
    "$PEER" client "127.0.0.1:$PROXY_PORT" "$TARGET" "Bearer $TOKEN" 0 "$BYTES" >/dev/null 2>"$E2E_TMP/host.err"
    s=$(echo "$(now) - $t0" | bc)
    if [ "$(upstream_sent "$lines")" = "$BYTES" ]; then echo "$s"; else echo incomplete; fi
}
host_s=$(median_of host_once)

# The service's state directory must be its own (root, 0700, no ancestor
# another user controls): not inside $E2E_TMP, which the proxy's user owns.
STATE_TOP=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-sandbox-bench.XXXXXX")
STATE="$STATE_TOP/state"
trap 'e2e_cleanup; rm -rf "$STATE_TOP"' EXIT
SB() { "$SANDBOX" --mechanism gvisor --mode production --state-dir "$STATE" "$@"; }
ID=$(SB create --tenant t1 --lease lease1 --grant "$TOKEN" \
        --proxy-socket "$E2E_TMP/proxy.sock" --proxy-port 3128) || { fail "create"; exit 1; }

# What an execute costs with nothing to do: subtracted from the timings below.
floor=$(for _ in 1 2 3 4 5; do
            t0=$(now); SB exec "$ID" -- true >/dev/null; echo "$(now) - $t0" | bc
        done | sort -n | sed -n 3p)

# Times one download inside the sandbox; prints net seconds or "incomplete".
inside() { # tag command...
    local tag=$1 lines t0 s
    shift
    lines=$(wc -l <"$E2E_TMP/upstream.out")
    t0=$(now)
    SB exec --timeout 600 "$ID" -- "$@" >/dev/null 2>"$E2E_TMP/$tag.err"
    s=$(echo "$(now) - $t0 - $floor" | bc)
    if [ "$(upstream_sent "$lines")" = "$BYTES" ]; then echo "$s"; else echo incomplete; fi
}
peer_s=$(median_of inside peer "$PEER_IN" client 127.0.0.1:3128 "$TARGET" "Bearer $TOKEN" 0 "$BYTES")
# The same reader on the proxy's socket itself (no forwarder): what is left
# is gVisor's own cost (sentry socket I/O under ptrace).
sock_s=$(median_of inside sock "$PEER_IN" client /run/pinhole/proxy.sock "$TARGET" "Bearer $TOKEN" 0 "$BYTES")
# nc sends the request itself, then the upstream's 9-byte header (size,
# big-endian, and flags 0), written as octal escapes for dash's printf.
hdr=$(printf '%016x00' "$BYTES" | sed 's/../& /g' | xargs -n1 | while read -r b; do printf '\\%03o' "$((16#$b))"; done)
nc_s=$(inside nc sh -c "{ printf 'CONNECT $TARGET HTTP/1.1\r\nHost: $TARGET\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\n'; \
    sleep 0.2; printf '$hdr'; } | nc 127.0.0.1 3128 >/dev/null")
SB destroy "$ID" >/dev/null || fail "destroy"

row() { # label seconds [tag]
    if [ "$2" = incomplete ]; then
        printf '  %-58s incomplete\n' "$1"
        fail "$1: transfer incomplete: $(head -c 200 "$E2E_TMP/${3:-none}.err" 2>/dev/null)"
    else
        printf '  %-58s %7s MB/s (%6.2f s)  ratio to (a) %.3f\n' "$1" "$(rate "$2")" "$2" \
            "$(awk -v a="$host_s" -v b="$2" 'BEGIN { printf "%.4f", a / b }')"
    fi
}
echo "download of $MB MB from one local upstream through pinhole-proxy, median of $REPEAT" \
     "(nc: 1 run; gVisor rows net of a $(printf '%.0f' "$(echo "$floor * 1000" | bc)") ms runsc exec floor):"
row "(a) host: peer client -> proxy alone" "$host_s" host
row "(b) gVisor: peer client -> forwarder -> proxy" "$peer_s" peer
row "    gVisor: peer client -> proxy socket (no forwarder)" "$sock_s" sock
row "    gVisor: busybox nc -> forwarder -> proxy" "$nc_s" nc
e2e_finish >/dev/null
