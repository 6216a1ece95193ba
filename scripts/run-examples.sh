#!/bin/sh
# `make run`: the main job on examples/. For now: compile the example
# allowlist, show what it allows, and explain a few destinations.
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
