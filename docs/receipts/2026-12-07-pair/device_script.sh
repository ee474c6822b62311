#!/usr/bin/env bash
# One call, most needed first: flash-scaled 3 layers decode h (7d70736) against q (02c81b4); the hash on q; GEMV kernels of m (2343833) against x4 (several rows four dots at a time) and its decode; the e2m1 contract on q; a second round.
set -u
source scripts/device_env.sh
mkdir -p target && tar -C target -xJf .cache/devab/ab.tar.xz
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
/usr/bin/time -f "make-tiny %e s" target/ab/q/lockstep make-tiny /tmp/fs3 --preset flash-scaled --layers 3 2>&1 | tail -2 > "$OUT/make_tiny.txt"
cat "$OUT/make_tiny.txt"
bench() {
  timeout 70 target/ab/$1/lockstep bench forward --model /tmp/fs3 --reps 5 --prefill 512 --rows 4 > "$OUT/bench_$1_r$2.txt" 2>&1
  echo "$1 r$2: $(grep -E '^decode rows=1 context' $OUT/bench_$1_r$2.txt | cut -c40-110) | $(grep -E '^decode rows=1 per step' $OUT/bench_$1_r$2.txt | cut -c30-140) | $(grep -E '^decode rows=4 context' $OUT/bench_$1_r$2.txt | cut -c60-160)"
}
bench h 1; bench q 1
timeout 80 target/ab/q/lockstep contract --hash 2>&1 | grep -E "^(FAIL|SUMMARY|HASH)" > "$OUT/hash_q.txt"
cut -c1-300 "$OUT/hash_q.txt"
for s in m x4; do
  timeout 60 target/ab/$s/lockstep bench kernels --reps 7 > "$OUT/kernels_$s.txt" 2>&1
  echo "kernels $s: $(grep -E 'rows=(1|4) ' $OUT/kernels_$s.txt | awk '{printf "%s:%s:%s ", $1, $3, $5}')"
done
bench x4 1
timeout 110 target/ab/q/lockstep contract --only gemm_e2m1 --seed 42 2>&1 | grep -E "^(ok|FAIL|n/a|SUMMARY)|missed" > "$OUT/contract_gemm_e2m1_q.txt"
cut -c1-150 "$OUT/contract_gemm_e2m1_q.txt"
bench q 2; bench h 2; bench m 1
