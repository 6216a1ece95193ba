# http_clients_lib.sh - shared set-up of the real-client plain-HTTP tests
# (sourced; it sources e2e_lib.sh): the proxy's e2e set-up, the
# file-serving origin (http_origin.py) and the proxy URLs the clients are
# given. Callers set PROXY, POLICYC, GRANT, PEER as for e2e_lib.sh.
. "$PH_SOURCE_DIR/tests/proxy/e2e_lib.sh"

# e2e_http_setup [proxy options]: dnsmasq, the policy and grants, the proxy;
# D is the test domain, $E2E_TMP/www the origin's (empty) root.
e2e_http_setup() {
    e2e_start_dns
    e2e_make_policy
    e2e_start_proxy "$@"
    D=$E2E_DOMAIN
    mkdir -p "$E2E_TMP/www"
}

# e2e_start_origin ROOT: serves ROOT over HTTP on a port the kernel chose
# (ORIGIN_PORT); every request the origin got is a JSON line in
# $E2E_TMP/origin.log.
e2e_start_origin() {
    rm -f "$E2E_TMP/origin.ready"
    /usr/bin/python3 "$PH_SOURCE_DIR/tests/proxy/http_origin.py" "$1" "$E2E_TMP/origin.ready" \
        "$E2E_TMP/origin.log" 2>"$E2E_TMP/origin.err" &
    local pid=$!
    if ! e2e_wait_ready "$E2E_TMP/origin.ready" "$pid"; then
        fail "origin did not start: $(cat "$E2E_TMP/origin.err")"; exit 1
    fi
    E2E_PIDS="$E2E_PIDS $pid"
    ORIGIN_PORT=$(cat "$E2E_TMP/origin.ready")
}

# The proxy URL with the grant in its userinfo, as the sandbox's tier-2
# environment writes it (lease:token@127.0.0.1:port).
e2e_proxy_url() { echo "http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"; }

# Fails when a request the origin received still carried the grant
# (Proxy-Authorization is the proxy's, removed before forwarding) or was in
# absolute-form; prints the request count.
e2e_origin_clean() { # NAME
    local out
    out=$(/usr/bin/python3 - "$E2E_TMP/origin.log" <<'PY'
import json, sys
bad, n = [], 0
for line in open(sys.argv[1]):
    e = json.loads(line); n += 1
    names = [k.lower() for k, _ in e["headers"]]
    if "proxy-authorization" in names or "proxy-connection" in names:
        bad.append("proxy header reached the origin: " + e["request"])
    if not e["request"].split(" ")[1].startswith("/"):
        bad.append("not origin-form: " + e["request"])
if n == 0:
    bad.append("the origin received no request")
print("; ".join(bad) if bad else "clean %d" % n)
PY
)
    case "$out" in
        clean*) ok "$1: the origin saw no grant and only origin-form (${out#clean } requests)" ;;
        *) fail "$1: $out" ;;
    esac
}
