#!/usr/bin/env bash
# The vision tower on a GPU machine with a carried release binary: the new vision kernels' contract, then the tower and aligner at the release's widths (make-tiny --preset flash-scaled-vision) for a 1024x701 image (51 x 74 patches).
set -u
DIR=${DIR:-/tmp/fsv}
source scripts/device_env.sh
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$OUT/devices.txt"
for k in bias_add gelu unfold_cells rope_halves vit_attention; do $B contract --only "$k" 2>&1 | grep -v XDG; done | tee "$OUT/contract.txt"
[ -f "$DIR/config.json" ] || $B make-tiny "$DIR" --preset flash-scaled-vision 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
timeout 300 $B bench vision --model "$DIR" --grid 51x74 --reps "${REPS:-5}" 2>&1 | grep -v XDG | tee "$OUT/bench_vision.txt"
