#!/usr/bin/env bash
# Decode receipts on a GPU machine from carried binaries (.cache/devab/ab.tar.xz: target/ab/SIDE/lockstep): flash-scaled checkpoints of each LAYERS count in turn, bench forward of each side on each (dispatches, waits and host work per step beside device time), then the last side's profile at PROFILE_PREFILL tokens (with TRACE, its decode step dispatch by dispatch) and decode at each CONTEXT length (by each of CONTEXT_SIDES, default the last side), with KERNELS each side's `bench kernels` first, with CONTRACT its full-shape contract of CONTRACT_ONLY, with HASH the contract hash.
set -u
source scripts/device_env.sh
mkdir -p target && tar -C target -xJf .cache/devab/ab.tar.xz
SIDES=${SIDES:-"f n"}; last=${SIDES##* }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$OUT/gpu.txt"
for side in ${KERNELS:+$SIDES}; do
  timeout "${BENCH_S:-150}" target/ab/$side/lockstep bench kernels --reps 5 --only "$KERNELS" 2>&1 | grep -v XDG > "$OUT/kernels_$side.txt"
done
for layers in ${LAYERS_LIST:-3}; do
  dir=/tmp/fs$layers
  [ -f "$dir/config.json" ] || { rm -rf /tmp/fs[0-9]*; /usr/bin/time -f "make-tiny %e s" target/ab/$last/lockstep make-tiny "$dir" --preset flash-scaled --layers "$layers" 2>&1 | tail -2 | tee -a "$OUT/make_tiny.txt"; }
  for side in ${BENCH_SIDES:-$SIDES}; do
    echo "== $side layers $layers"
    timeout "${BENCH_S:-150}" target/ab/$side/lockstep bench forward --model "$dir" --reps "${REPS:-7}" --prefill "${PREFILL:-2048}" --rows 4 2>&1 | grep -v XDG | tee "$OUT/bench_${side}_L$layers.txt"
  done
  if [ -n "${PROFILE:-}" ]; then
    timeout "${BENCH_S:-150}" target/ab/$last/lockstep bench forward --model "$dir" --reps 3 --prefill "${PROFILE_PREFILL:-512}" --rows 4 --profile ${TRACE:+--trace} 2>&1 | grep -v XDG > "$OUT/profile_${last}_L$layers.txt"
  fi
  for side in ${CONTEXT:+${CONTEXT_SIDES:-$last}}; do
    timeout "${CONTEXT_S:-300}" target/ab/$side/lockstep bench forward --model "$dir" --reps 3 --prefill 512 --context "$CONTEXT" 2>&1 | grep -v XDG > "$OUT/context_${side}_L$layers.txt"
  done
done
if [ -n "${CONTRACT:-}" ]; then
  timeout "${CONTRACT_S:-200}" target/ab/$last/lockstep contract --only "${CONTRACT_ONLY:-gemm}" --seed 42 2>&1 | grep -E "^(ok|FAIL|n/a|SUMMARY)" | tee "$OUT/contract_${CONTRACT_ONLY:-gemm}_$last.txt"
fi
if [ -n "${HASH:-}" ]; then
  timeout "${CONTRACT_S:-200}" target/ab/$last/lockstep contract --hash 2>&1 | grep -E "^(SUMMARY|HASH)" | tee "$OUT/contract_hash_$last.txt"
fi
true
