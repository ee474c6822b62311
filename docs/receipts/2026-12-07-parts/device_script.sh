#!/usr/bin/env bash
# One call: flash-scaled 3 layers; decode A/B h (7d70736) against g (cc9e0d8: two parts a grouped GEMM, the shared expert's w1 and w3 in one); the e2m1 contract and the hash on g; a second round while time lasts.
set -u
source scripts/device_env.sh
mkdir -p target && tar -C target -xJf .cache/devab/ab.tar.xz
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
/usr/bin/time -f "make-tiny %e s" target/ab/g/lockstep make-tiny /tmp/fs3 --preset flash-scaled --layers 3 2>&1 | tail -2 > "$OUT/make_tiny.txt"
cat "$OUT/make_tiny.txt"
bench() {
  timeout 80 target/ab/$1/lockstep bench forward --model /tmp/fs3 --reps 7 --prefill 512 --rows 4 > "$OUT/bench_$1_r$2.txt" 2>&1
  echo "$1 r$2: $(grep -E '^decode rows=1 context' $OUT/bench_$1_r$2.txt | cut -c40-110) | $(grep -E '^decode rows=1 per step' $OUT/bench_$1_r$2.txt | cut -c30-140) | $(grep -E '^decode rows=4 context' $OUT/bench_$1_r$2.txt | cut -c60-160)"
}
bench h 1; bench g 1
timeout 130 target/ab/g/lockstep contract --only gemm_e2m1 --seed 42 2>&1 | grep -E "^(ok|FAIL|n/a|SUMMARY)|missed" > "$OUT/contract_gemm_e2m1_g.txt"
cut -c1-150 "$OUT/contract_gemm_e2m1_g.txt"
timeout 80 target/ab/g/lockstep contract --hash 2>&1 | grep -E "^(FAIL|SUMMARY|HASH)" > "$OUT/hash_g.txt"
cut -c1-300 "$OUT/hash_g.txt"
bench g 2; bench h 2; bench t 1
