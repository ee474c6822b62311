#!/usr/bin/env bash
# A/B of carried release binaries' kernels on one GPU machine: `bench kernels` of each side in turn, then each side's GEMM contract on full shapes and the contract hash.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp RUST_BACKTRACE=0
SIDES=${SIDES:-"a b"}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$OUT/gpu.txt"
for side in $SIDES; do
  bin=target/ab/$side/lockstep
  echo "== $side bench kernels"
  $bin bench kernels --reps "${REPS:-9}" ${ONLY:+--only $ONLY} 2>&1 | grep -v XDG | tee "$OUT/bench_kernels_$side.txt"
done
for side in ${CONTRACT_SIDES:-}; do
  bin=target/ab/$side/lockstep
  echo "== $side contract"
  $bin contract --only "${CONTRACT_ONLY:-gemm}" --seed 42 2>&1 | grep -E "^(ok|FAIL|n/a|SUMMARY)" | tee "$OUT/contract_$side.txt"
  $bin contract --hash 2>&1 | tail -1 | tee "$OUT/contract_hash_$side.txt"
done
