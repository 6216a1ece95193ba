#!/bin/sh
# run-proxy-example.sh BUILD_DIR - `make run` for pinhole-proxy: compile
# examples/allowlist.yaml, generate a development grant key, print a ready
# grant token and a curl command line that uses it, then serve in the
# foreground until Ctrl-C (SIGINT drains and exits 0).
set -eu
BUILD=${1:-build/dev}
cd "$(dirname "$0")/.."
OUT=$BUILD/examples/proxy
mkdir -p "$OUT"
POLICYC=$BUILD/policyc/policyc
PROXY=$BUILD/proxy/pinhole-proxy
GUARD=$BUILD/guard/tools/pinhole-guard

"$POLICYC" compile examples/allowlist.yaml -o "$OUT/allowlist.ptab" >/dev/null
# A fresh development key each run (mode 0600); never use it in production.
rm -f "$OUT/grant.key"
"$GUARD" keygen --kid dev --output "$OUT/grant.key"
LEASE=dev-lease
TOKEN=$("$GUARD" grant issue --keys "$OUT/grant.key" --tenant dev --lease "$LEASE" --list default --ttl 3600)

USER_OPT=""
if [ "$(id -u)" = 0 ]; then
    # As root the proxy drops privileges after binding; let that user read
    # the files it reopens on reload.
    chown nobody "$OUT" "$OUT/allowlist.ptab" "$OUT/grant.key"
    USER_OPT="--user nobody"
fi

cat <<MSG
==> pinhole-proxy on 127.0.0.1:3128 (admin: http://127.0.0.1:9128/metrics)
    table:  $OUT/allowlist.ptab (list "default" of examples/allowlist.yaml)
    grant:  tenant dev, lease $LEASE, list default, valid 1 hour
    token:  $TOKEN

  Try (allowed: api.github.com:443 is in the list):
    curl --proxy "http://$LEASE:$TOKEN@127.0.0.1:3128" https://api.github.com/zen
  Refused with 403 and Pinhole-Reason (not in the list):
    curl -sv --proxy "http://$LEASE:$TOKEN@127.0.0.1:3128" https://example.com/
  Or for any tool that honours it:
    export HTTPS_PROXY="http://$LEASE:$TOKEN@127.0.0.1:3128"

  Ctrl-C drains open tunnels and stops. One JSON line per connection follows.
MSG
# shellcheck disable=SC2086
exec "$PROXY" --config examples/proxy.yaml --table "$OUT/allowlist.ptab" \
    --grant-key "$OUT/grant.key" $USER_OPT
