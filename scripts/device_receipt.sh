#!/usr/bin/env bash
# Receipts on a GPU machine with a carried release binary: devices, the full contract, the hash, the kernel benchmark.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=./target/release/lockstep
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; git rev-parse HEAD 2>/dev/null; } 2>&1 | tee "$OUT/devices.txt"
$B contract --seed "${SEED:-42}" 2>&1 | grep -v XDG | tee "$OUT/contract.txt"
$B contract --hash 2>&1 | grep -v XDG | tail -n 3 | tee "$OUT/contract_hash.txt"
$B bench kernels --reps "${REPS:-20}" 2>&1 | grep -v XDG | tee "$OUT/bench.txt"
