#!/bin/bash
# e2e_forward_stream.sh - forwarded exchanges compared byte for byte with the
# same exchanges made straight to the upstream, under seeded randomness
# (e2e_forward_stream.py): pipelined requests of random sizes and framings
# (Content-Length, chunked, ended by the upstream's close; bodies both
# ways), written in random pieces with pauses, answered in random pieces
# with pauses, and read back by a slow client on a small receive buffer,
# through a proxy whose buffers are small (backpressure both ways).
# Usage: e2e_forward_stream.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"
STREAM="/usr/bin/python3 $PH_SOURCE_DIR/tests/proxy/e2e_forward_stream.py"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --buffer-bytes 16384
D=$E2E_DOMAIN
e2e_start_upstream "$STREAM" st

for seed in ${STREAM_SEEDS:-1 2 3}; do
    direct=$($STREAM client "$UP" - "" "$seed" 6)
    check "seed $seed: straight to the upstream" "ok" "${direct%% *}"
    check "seed $seed: through the proxy, the same" "$direct" \
        "$($STREAM client "$PROXY_PORT" "$TOKEN" "http://ok.$D:$UP" "$seed" 6)"
done
e2e_finish
