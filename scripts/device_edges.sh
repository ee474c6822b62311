#!/usr/bin/env bash
# Edge-arithmetic receipts on a GPU machine with carried release binaries (target/release: this tree; target/ab/before: the arithmetic before the canonical flush): the probe and full contract, the hash, and the edge-values tiny model stage by stage on both.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp
export LOCKSTEP_TOKENIZER=$PWD/.cache/tokenizer/tokenizer.json
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
NEW=${NEW:-./target/release/lockstep}; OLD=${OLD:-./target/ab/before/lockstep}
P="The quick brown fox jumps over the lazy dog while the engine computes every bit the same way on every device."
{ $NEW devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$OUT/devices.txt"
$NEW contract --seed "${SEED:-42}" 2>&1 | grep -v XDG > "$OUT/contract.txt"; tail -1 "$OUT/contract.txt"; grep -v "^ok" "$OUT/contract.txt" | grep -v "^contract\|^SUMMARY" | head
$NEW contract --hash 2>&1 | grep -v XDG | tail -n 2 | tee "$OUT/contract_hash.txt"
$NEW make-tiny /tmp/edge --seed 7 --edge-values 2>&1 | tail -1
$NEW make-tiny /tmp/tiny --seed 7 2>&1 | tail -1
for side in before after; do
  B=$NEW; [ $side = before ] && B=$OLD
  for m in edge tiny; do
    echo "== $side $m: diff cpu vs 0"
    $B diff --a cpu --b 0 --model /tmp/$m --prompt "$P" --max-tokens "${TOKENS:-32}" 2>&1 | grep -v XDG | tail -3
    for d in cpu 0; do echo "$side $m device $d greedy: $($B run --model /tmp/$m --prompt "$P" --max-tokens "${TOKENS:-32}" --device $d 2>&1 | tail -1)"; done
  done
done 2>&1 | tee "$OUT/edge_diff.txt"
