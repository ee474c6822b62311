#!/usr/bin/env bash
# Receipts on a GPU machine with a carried release binary: the tiny model on the CPU oracle and the GPU, stage by stage.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp
export LOCKSTEP_TOKENIZER=$PWD/.cache/tokenizer/tokenizer.json
B=./target/release/lockstep
P="The quick brown fox jumps over the lazy dog while the engine computes every bit the same way on every device."
$B devices 2>&1 | head -1
$B make-tiny /tmp/tiny --seed 7 | tail -1
$B diff --a cpu --b 0 --model /tmp/tiny --prompt "$P" --max-tokens 64 2>&1 | tail -2
for d in cpu 0; do
  echo "device $d greedy: $($B run --model /tmp/tiny --prompt "$P" --max-tokens 64 --device $d 2>&1 | tail -1)"
  echo "device $d sampled: $($B run --model /tmp/tiny --prompt "$P" --max-tokens 64 --temperature 1 --top-p 0.9 --seed 5 --device $d 2>&1 | tail -1)"
done
$B contract --hash 2>&1 | tail -2
