#!/usr/bin/env bash
# Drafts on a GPU machine with a carried release binary: the flash-scaled checkpoint served drafting and with --no-drafts, each under bench_concurrent (equality with alone and undrafted runs, speculative counts, tok/s).
set -u
source scripts/device_env.sh
[ -f "$DIR/config.json" ] || $B make-tiny "$DIR" --preset flash-scaled 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
cp .cache/tokenizer/tokenizer*.json "$DIR/" 2>/dev/null
for mode in drafts no-drafts; do
  flag=""; [ $mode = no-drafts ] && flag=--no-drafts
  $B serve --model "$DIR" --device gpu --port 8080 --parallel 4 --context 4096 --max-tokens 128 $flag > "$OUT/serve_$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do curl -sf localhost:8080/health > /dev/null && break; sleep 0.25; done
  extra=""; [ $mode = drafts ] && extra="--alone --serial"
  timeout 200 python3 scripts/bench_concurrent.py --url http://127.0.0.1:8080 --levels 1,4 --temperatures 0,1 --max-tokens 128 $extra > "$OUT/bench_$mode.jsonl" 2> "$OUT/bench_$mode.err"; echo "bench exit $?" >> "$OUT/bench_$mode.err"
  kill -TERM $pid; wait $pid
  python3 - "$OUT/bench_$mode.jsonl" "$mode" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    print(sys.argv[2], "level", c["level"], "T", c["temperature"], "aggregate tok/s", round(c["aggregate_tok_s"] or 0, 1), "median stream tok/s", round(c["per_stream_tok_s_median"] or 0, 1), "speculative", c["speculative"], "alone", c["alone"], "serial", c["serial"])
PY
done
true
