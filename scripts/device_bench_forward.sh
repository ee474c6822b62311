#!/usr/bin/env bash
# Receipts on a GPU machine with a carried release binary: the flash-scaled checkpoint, its forward benchmark with a kernel profile, the full-shape contract.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=./target/release/lockstep
DIR=${DIR:-/tmp/fs}
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; free -g | head -2; } 2>&1 | tee "$OUT/devices.txt"
[ -f "$DIR/config.json" ] || { /usr/bin/time -f "make-tiny %e s wall, %M KiB max rss" $B make-tiny "$DIR" --preset flash-scaled ${LAYERS:+--layers $LAYERS} 2>&1 | tail -2 | tee "$OUT/make_tiny.txt"; }
du -sh "$DIR" | tee -a "$OUT/make_tiny.txt"
timeout "${BENCH_S:-360}" $B bench forward --model "$DIR" --reps "${REPS:-5}" --prefill "${PREFILL:-512,2048}" --profile 2>&1 | grep -v XDG | tee "$OUT/bench_forward.txt"
[ -n "${CONTRACT_S:-}" ] && timeout "$CONTRACT_S" $B contract --seed 42 2>&1 | grep -v XDG | tee "$OUT/contract.txt"
true
