#!/usr/bin/env bash
# On a Mac with an Apple GPU: adapters, the contract on Metal (WGSL reference and MSL variants), the tiny model's diff against the CPU oracle, and the hashes to compare with any other device.
set -euo pipefail
cd "$(dirname "$0")/.."
# DEVICE=metal-emu (or any adapter) runs the same steps elsewhere, giving the values a Mac must match.
if [ "$(uname -s)" != "Darwin" ] && [ -z "${DEVICE:-}" ]; then
  echo "mac_receipt.sh runs on macOS with an Apple GPU (this is $(uname -s)); elsewhere set DEVICE, e.g. DEVICE=metal-emu" >&2
  exit 2
fi
DEVICE=${DEVICE:-metal}
QUICK=${QUICK:+--quick}
OUT=${OUT:-target/mac-receipt-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
cargo build --release --locked
B=./target/release/lockstep
MODEL=${MODEL:-$OUT/tiny}
{ uname -a; sw_vers 2>/dev/null || true; git rev-parse HEAD; $B devices; } 2>&1 | tee "$OUT/devices.txt"
# The contract on Metal: every WGSL kernel passed through with the exactness header, every MSL variant beside its reference (gate 4: the same bits).
$B contract --device "$DEVICE" $QUICK --seed "${SEED:-42}" 2>&1 | tee "$OUT/contract.txt"
$B contract --device "$DEVICE" --hash 2>&1 | tail -n 3 | tee "$OUT/contract_hash.txt"
# The tiny model, text and an image, every stage against the CPU oracle.
$B make-tiny "$MODEL" --seed 7 > "$OUT/make_tiny.txt"
python3 scripts/noise_png.py "$OUT/picture.png"
$B diff --a cpu --b "$DEVICE" --model "$MODEL" --prompt "The quick brown fox jumps over the lazy dog" --max-tokens 3 --prefill-chunk 5 2>&1 | tee "$OUT/diff_text.txt"
$B diff --a cpu --b "$DEVICE" --model "$MODEL" --chat --prompt "What is in this picture?" --image "$OUT/picture.png" --max-tokens 2 --prefill-chunk 9 2>&1 | tee "$OUT/diff_image.txt"
# Token hashes, greedy and sampled, on Metal and on the CPU oracle: each pair must be equal, and equal to any other device's.
for device in "$DEVICE" cpu; do
  for t in 0 1; do
    sha=$($B run --model "$MODEL" --chat --prompt "What is in this picture?" --image "$OUT/picture.png" --max-tokens 6 --temperature "$t" --seed 9 --device "$device" 2>/dev/null | grep '^token_sha256=')
    echo "$device temperature=$t $sha" | tee -a "$OUT/token_sha.txt"
  done
done
echo "receipt in $OUT: compare contract_hash.txt and token_sha.txt with lavapipe, the H200 and metal-emu"
