#!/usr/bin/env bash
# Packed-state receipts on a GPU machine from carried binaries (.cache/devab/ab.tar.xz): the contract of the kernels that changed on full shapes, the hash on the GPU and the CPU oracle, then decode at several contexts on a flash-scaled checkpoint with the state as allocated.
set -u
source scripts/device_env.sh
mkdir -p target && tar -C target -xJf .cache/devab/ab.tar.xz
bin=target/ab/${SIDE:-p}/lockstep
for k in ${CONTRACT_LIST:-pack_rows sparse_attention gemm}; do
  timeout "${CONTRACT_S:-150}" $bin contract --only "$k" --seed 42 2>&1 | grep -E "^(ok|FAIL|n/a|SUMMARY)" | tee "$OUT/contract_$k.txt"
done
timeout "${CONTRACT_S:-150}" $bin contract --hash 2>&1 | grep -E "^(SUMMARY|HASH)" | tee "$OUT/contract_hash_gpu.txt"
timeout "${CONTRACT_S:-150}" $bin contract --hash --device cpu 2>&1 | grep -E "^(SUMMARY|HASH)" | tee "$OUT/contract_hash_cpu.txt"
if [ -n "${CONTEXTS:-}" ]; then
  dir=/tmp/fs${LAYERS:-3}
  [ -f "$dir/config.json" ] || $bin make-tiny "$dir" --preset flash-scaled --layers "${LAYERS:-3}" 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
  timeout "${BENCH_S:-300}" $bin bench forward --model "$dir" --reps "${REPS:-3}" --prefill 2048 --context "$CONTEXTS" 2>&1 | grep -v XDG | tee "$OUT/bench_context.txt"
fi
true
