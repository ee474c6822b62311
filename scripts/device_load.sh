#!/usr/bin/env bash
# Conformance receipts on a GPU machine with a carried release binary: the contract hash, inspect on a flash-scaled checkpoint, the disk's read ceiling, and the load (time, bytes the loader read) by default and with --verify-weights full.
set -u
source scripts/device_env.sh
CONFIG=${CONFIG:-}
P="The quick brown fox jumps over the lazy dog while the engine computes every bit the same way on every device."
now() { date +%s%N; }
secs() { echo "$(( ($(now) - $1) / 1000000 ))" | sed -E 's/([0-9]{3})$/.\1/'; }
cold() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo "page cache dropped" || echo "page cache not dropped (not permitted here)"; }
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; free -g | head -2; df -h /tmp | tail -1; } 2>&1 | tee "$OUT/devices.txt"
if [ -n "${CONTRACT_S:-}" ]; then
  timeout "$CONTRACT_S" $B contract --hash --device gpu 2>&1 | grep -E 'HASH|SUMMARY|recorded' | tee "$OUT/contract_hash.txt"
  timeout "$CONTRACT_S" $B contract --seed 42 --device gpu --only index_topk 2>&1 | tail -2 | tee "$OUT/contract_index_topk.txt"
fi
if [ ! -f "$DIR/config.json" ]; then
  if [ -n "$CONFIG" ]; then $B make-tiny "$DIR" --config "$CONFIG"; else $B make-tiny "$DIR" --preset flash-scaled; fi 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
fi
cp .cache/tokenizer/tokenizer*.json "$DIR/" 2>/dev/null
$B inspect --model "$DIR" --no-values 2>&1 | tee "$OUT/inspect.txt"
{ cold; t=$(now); cat "$DIR"/*.safetensors > /dev/null; echo "disk ceiling: cat of every shard, cold: $(du -cb "$DIR"/*.safetensors | tail -1 | cut -f1) bytes in $(secs $t) s"; } 2>&1 | tee "$OUT/disk.txt"
# One serve start per mode: the weights line comes after the warm-up forward, before `ready`.
for mode in sampled full; do
  { cold; t=$(now)
    $B serve --model "$DIR" --device gpu --port 8080 --parallel 1 --context 4096 --prompt-cache-gib 1 --verify-weights $mode > "$OUT/serve_$mode.log" 2>&1 &
    pid=$!
    for _ in $(seq 2400); do grep -q '^ready on' "$OUT/serve_$mode.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
    echo "--verify-weights $mode: ready $(secs $t) s after the process started"
    grep -E '^weights:|^canonical' "$OUT/serve_$mode.log"
    kill -TERM $pid; wait $pid; echo "serve exit $?"; } 2>&1 | tee "$OUT/load_$mode.txt"
done
# The same one-token run by each binary from a cold cache: a scan before the upload (old) against checks in the upload (new).
for b in ${AB:-}; do
  { cold; t=$(now); ./target/release/$b run --model "$DIR" --prompt "$P" --max-tokens 1 --device gpu 2>&1 | grep -E 'token_sha|weights:|Error'; echo "$b run --max-tokens 1: $(secs $t) s"; } 2>&1 | tee -a "$OUT/ab_run.txt"
done
true
