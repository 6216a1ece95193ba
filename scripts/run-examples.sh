#!/bin/sh
# `make run`: the main job on examples/: check and compile the example
# allowlist, show what it allows, explain a few destinations, then serve it
# with pinhole-proxy.
set -eu
BUILD=${1:-build/dev}
cd "$(dirname "$0")/.."
OUT=$BUILD/examples
mkdir -p "$OUT"
P=$BUILD/policyc/policyc
echo "==> policyc check examples/allowlist.yaml"
$P check examples/allowlist.yaml
echo "==> policyc compile examples/allowlist.yaml -o $OUT/allowlist.ptab"
$P compile examples/allowlist.yaml -o "$OUT/allowlist.ptab"
echo "==> policyc dump $OUT/allowlist.ptab"
$P dump "$OUT/allowlist.ptab"
for dest in api.github.com:443 objects.githubusercontent.com:443 pipelines.actions.githubusercontent.com:443 \
            a.b.actions.githubusercontent.com:443 actions.githubusercontent.com:443 pypi.org:80 \
            169.254.169.254:80 evil.example:443; do
    echo "==> policyc explain $OUT/allowlist.ptab $dest"
    $P explain "$OUT/allowlist.ptab" "$dest" || true
done

# Then the proxy on the same allowlist, in the foreground until Ctrl-C.
# (PINHOLE_RUN_NO_PROXY=1 stops here, for scripted runs.)
if [ "${PINHOLE_RUN_NO_PROXY:-0}" != 1 ]; then
    exec sh scripts/run-proxy-example.sh "$BUILD"
fi
