#!/usr/bin/env bash
# Call A: flash-scaled 3 layers, h (7d70736) against c (HEAD) with per-kernel profiles at rows=1 and rows=4, prefill 2048; the hash and the e4m3/bf16 full-shape contracts on c.
set -u
source scripts/device_env.sh
mkdir -p target && tar -C target -xJf .cache/devab/ab.tar.xz
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
/usr/bin/time -f "make-tiny %e s" target/ab/c/lockstep make-tiny /tmp/fs3 --preset flash-scaled --layers 3 2>&1 | tail -n2
bench() {
  timeout 170 target/ab/$1/lockstep bench forward --model /tmp/fs3 --reps 5 --prefill 512,2048 --rows 4 $3 > "$OUT/bench_$1_$2.txt" 2>&1
  grep -E '^(decode rows=1 context|decode rows=1 per step|decode rows=4 context|prefill tokens=2048 work|ceiling)' "$OUT/bench_$1_$2.txt" | cut -c1-260
  grep -A12 -E '^profile decode rows=(1|4)' "$OUT/bench_$1_$2.txt" | cut -c1-90
}
bench c p --profile; bench h p --profile
timeout 90 target/ab/c/lockstep contract --hash 2>&1 | grep -E "^(FAIL|SUMMARY|HASH)" | cut -c1-400
for k in gemm_e4m3 gemm_bf16; do
  timeout 100 target/ab/c/lockstep contract --only $k --seed 42 2>&1 | grep -E "^(FAIL|SUMMARY)|missed" | cut -c1-200
done
bench c 2 ""; bench h 2 ""
