#!/usr/bin/env bash
# Call B: x (1a6449a plus experiment knobs, off by default) at 5 layers, then under the live-pick knob with per-kernel profiles while time is left.
set -u
source scripts/device_env.sh
mkdir -p target && tar -C target -xJf .cache/devab/ab.tar.xz
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
key() {
  grep -E '^(ceiling|decode rows=1 context|decode rows=1 per step|decode rows=4 context|decode bandwidth rows=1)' "$1" | sed -E 's/ seqs=[0-9]+ reps=5: / /' | cut -c1-230
  grep -A6 -E '^profile decode rows=(1|4)' "$1" | grep -E 'gemm|profile' | cut -c1-80
}
bench() {
  local tag=$1 t=$2; shift 2
  env "$@" timeout $t target/ab/x/lockstep bench forward --model /tmp/fs --reps 5 --rows 4 $ARGS > "$OUT/b_$tag.txt" 2>&1
  echo "== $tag $* [$SECONDS s]"; key "$OUT/b_$tag.txt"
}
/usr/bin/time -f "make-tiny %e s" target/ab/x/lockstep make-tiny /tmp/fs --preset flash-scaled --layers 5 2>&1 | tail -n1
ARGS="--prefill 16" bench base5 80 A=1
ARGS="--prefill 16 --profile" bench live5 80 LOCKSTEP_X_LIVE=1
ARGS="--prefill 16" bench nopair5 70 LOCKSTEP_X_NOPAIR=1
