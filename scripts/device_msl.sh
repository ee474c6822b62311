#!/usr/bin/env bash
# The MSL receipts on the H200 machine with a carried release binary: the contract hash on Vulkan, on metal-emu and on the CPU oracle; the tiny model on metal-emu against the CPU oracle; token hashes on every device; the full contract on metal-emu.
set -u
source scripts/device_env.sh
{ $B devices; nvidia-smi --query-gpu=name,driver_version --format=csv; echo "commit ${COMMIT:-unknown}"; g++ --version | head -n 1; echo "cores $(nproc)"; } 2>&1 | tee "$OUT/devices.txt"
for d in ${HASHES-gpu cpu metal-emu}; do
  echo "== $d: $($B contract --device "$d" --hash 2>&1 | grep -E '^(SUMMARY|HASH)' | tr '\n' ' ')"
done 2>&1 | tee "$OUT/hashes.txt"
T=/tmp/tiny
$B make-tiny "$T" --seed 7 > /dev/null
python3 scripts/noise_png.py /tmp/picture.png
{
  $B diff --a cpu --b metal-emu --model "$T" --prompt "The quick brown fox jumps over the lazy dog" --max-tokens 3 --prefill-chunk 5 2>&1 | tail -n 2
  $B diff --a cpu --b metal-emu --model "$T" --chat --prompt "What is in this picture?" --image /tmp/picture.png --max-tokens 2 --prefill-chunk 9 2>&1 | tail -n 2
  for d in cpu gpu metal-emu; do
    for t in 0 1; do
      echo "$d temperature=$t $($B run --model "$T" --chat --prompt "What is in this picture?" --image /tmp/picture.png --max-tokens 6 --temperature "$t" --seed 9 --device "$d" 2>/dev/null | grep '^token_sha256=')"
    done
  done
} 2>&1 | tee "$OUT/tiny.txt"
timeout "${FULL_S:-330}" $B contract --device metal-emu ${ONLY:+--only "$ONLY"} --seed "${SEED:-42}" > "$OUT/contract_metal_emu.txt" 2>&1
echo "full contract on metal-emu: exit $?" | tee -a "$OUT/contract_metal_emu.txt"
grep -v XDG "$OUT/contract_metal_emu.txt" | grep -E 'msl|SUMMARY|exit' | tail -n 12
