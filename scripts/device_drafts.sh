#!/usr/bin/env bash
# Drafts on a GPU machine with a carried release binary, flash-scaled checkpoint: verify-window and draft-pass cost against 1-row rounds (bench forward --drafts), one drafting server under bench_concurrent with draft off, the draft head under the depth rule (alternated, with alone and serial checks) and drafts forced to full and half acceptance, then an --always-draft server for the random checkpoint's own acceptance.
set -u
source scripts/device_env.sh
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$OUT/devices.txt"
[ -f "$DIR/config.json" ] || $B make-tiny "$DIR" --preset flash-scaled 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
cp .cache/tokenizer/tokenizer*.json "$DIR/" 2>/dev/null
timeout "${BENCH_S:-150}" $B bench forward --model "$DIR" --reps "${REPS:-5}" --prefill 512 --context 512 --rows 4 --drafts 5 2>&1 | grep -v XDG | tee "$OUT/bench_forward.txt"
$B serve --model "$DIR" --device gpu --port 8080 --parallel 4 --context 2048 --max-tokens 256 > "$OUT/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do curl -sf localhost:8080/health > /dev/null && break; sleep 0.25; done
bench() {
  local name=$1; shift
  timeout 150 python3 scripts/bench_concurrent.py --url http://127.0.0.1:8080 --levels 1,4 --temperatures 0,1 --max-tokens "${TOKENS:-64}" "$@" >> "$OUT/bench.jsonl" 2>> "$OUT/bench.err"
  echo "$name exit $?" >> "$OUT/bench.err"
}
bench off --draft-off
bench head --alone --serial
bench off --draft-off
bench head
bench forced1 --forced-acceptance 1
bench forced05 --forced-acceptance 0.5
kill -TERM $pid; wait $pid
grep "^drafts:" "$OUT/serve.log" | tee "$OUT/pace.txt"
$B serve --model "$DIR" --device gpu --port 8080 --parallel 4 --context 2048 --max-tokens 256 --always-draft > "$OUT/serve_always.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do curl -sf localhost:8080/health > /dev/null && break; sleep 0.25; done
bench always
kill -TERM $pid; wait $pid
python3 - "$OUT/bench.jsonl" <<'PY' | tee "$OUT/summary.txt"
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    print("drafts", c["drafts"], "level", c["level"], "T", c["temperature"], "aggregate tok/s", round(c["aggregate_tok_s"] or 0, 2),
          "median stream tok/s", round(c["per_stream_tok_s_median"] or 0, 2), "speculative", c["speculative"], "alone", c["alone"], "serial", c["serial"])
PY
true
