#!/usr/bin/env bash
# The depth rule's cost bound (PART=forward or serve runs one half) on a GPU machine with a carried release binary, flash-scaled checkpoint: 1-row rounds with and without ring feeding (bench forward), then PAIRS alternated draft-off / depth-rule runs on one drafting server, PAIRS runs on a --no-drafts server, and long single streams where the rule probes.
set -u
source scripts/device_env.sh
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; } 2>&1 | tee "$OUT/devices.txt"
[ -f "$DIR/config.json" ] || $B make-tiny "$DIR" --preset flash-scaled 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
cp .cache/tokenizer/tokenizer*.json "$DIR/" 2>/dev/null
if [ "${PART:-all}" != serve ]; then
for d in none 5; do
  flag=(); [ "$d" = none ] || flag=(--drafts "$d")
  timeout "${BENCH_S:-150}" $B bench forward --model "$DIR" --reps "${REPS:-5}" --prefill 512 --context 512 --rows 4 "${flag[@]}" 2>&1 | grep -v XDG | tee "$OUT/bench_forward_$d.txt"
done
fi
[ "${PART:-all}" = forward ] && exit 0
serve() {
  $B serve --model "$DIR" --device gpu --port 8080 --parallel 4 --context 2048 --max-tokens 1024 "$@" > "$OUT/serve_$tag.log" 2>&1 &
  pid=$!
  for _ in $(seq 1200); do curl -sf localhost:8080/health > /dev/null && break; sleep 0.25; done
}
bench() {
  local name=$1; shift
  timeout 200 python3 scripts/bench_concurrent.py --url http://127.0.0.1:8080 --levels "${LEVELS:-1,4}" --temperatures 0,1 --max-tokens "${TOKENS:-128}" "$@" \
    | python3 -c "import json,sys; [print(json.dumps(dict(json.loads(l), run='$name'))) for l in sys.stdin]" >> "$OUT/bench.jsonl" 2>> "$OUT/bench.err"
  echo "$name exit $?" >> "$OUT/bench.err"
}
tag=drafting serve
bench head --alone --serial
for _ in $(seq "${PAIRS:-6}"); do bench off --draft-off; bench head; done
for _ in $(seq "${LONG:-3}"); do LEVELS=1 TOKENS=900 bench long_off --draft-off; LEVELS=1 TOKENS=900 bench long_head; done
kill -TERM $pid; wait $pid
tag=nodrafts serve --no-drafts
for _ in $(seq "${PAIRS:-6}"); do bench nodrafts; done
for _ in $(seq "${LONG:-3}"); do LEVELS=1 TOKENS=900 bench long_nodrafts; done
kill -TERM $pid; wait $pid
grep -h "^drafts:" "$OUT"/serve_*.log | tee "$OUT/pace.txt"
python3 - "$OUT/bench.jsonl" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
cells = {}
for line in open(sys.argv[1]):
    c = json.loads(line)
    cells.setdefault((c["run"], c["level"], c["temperature"]), []).append(c)
for (run, level, t), cs in sorted(cells.items()):
    rates = [c["per_stream_tok_s_median"] or 0 for c in cs]
    spec = [c["speculative"] for c in cs]
    print(run, "level", level, "T", t, "runs", len(cs), "median of medians", round(statistics.median(rates), 2),
          "spread", round(min(rates), 2), "-", round(max(rates), 2), "drafted", sum(s["drafted"] for s in spec),
          "accepted", sum(s["accepted"] for s in spec), "alone", [c["alone"] for c in cs if c["alone"]], "serial", [c["serial"] for c in cs if c["serial"]])
def med(run, level, t):
    return statistics.median(c["per_stream_tok_s_median"] or 0 for c in cells.get((run, level, t), [{"per_stream_tok_s_median": 0}]))
for head, bases in (("head", ("off", "nodrafts")), ("long_head", ("long_off", "long_nodrafts"))):
    for (run, level, t) in sorted(k for k in cells if k[0] == head):
        for base in bases:
            b = med(base, level, t)
            if b:
                print("ratio", head, "/", base, "level", level, "T", t, round(med(head, level, t) / b, 4))
PY
true
