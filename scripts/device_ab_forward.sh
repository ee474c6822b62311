#!/usr/bin/env bash
# A/B of carried release binaries on the flash-scaled checkpoint: prefill, decode rows=1 and rows=4 (device time beside wall time), each binary in turn, twice, on one GPU machine.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp
SIDES=${SIDES:-"a b"}; DIR=${DIR:-/tmp/fs}
first=target/ab/${SIDES%% *}/lockstep
[ -f "$DIR/config.json" ] || $first make-tiny "$DIR" --preset flash-scaled ${LAYERS:+--layers $LAYERS} 2>&1 | tail -1
for round in 1 2; do
  for side in $SIDES; do
    bin=target/ab/$side/lockstep
    echo "== $side round $round"
    $bin bench forward --model "$DIR" --reps "${REPS:-9}" --prefill "${PREFILL:-16}" --rows 4 2>&1 | grep -E "^(prefill tokens|decode rows=[14] )"
  done
done
