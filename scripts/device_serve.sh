#!/usr/bin/env bash
# Serving receipts on a GPU machine with a carried release binary: bench forward's decode figure, then the server on the flash-scaled checkpoint under the bench tools, in one call.
set -u
source scripts/device_env.sh
{ $B devices; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; } 2>&1 | tee "$OUT/devices.txt"
[ -f "$DIR/config.json" ] || $B make-tiny "$DIR" --preset flash-scaled 2>&1 | tail -1 | tee "$OUT/make_tiny.txt"
cp .cache/tokenizer/tokenizer*.json "$DIR/" 2>/dev/null
timeout "${CONTRACT_S:-200}" $B contract --hash --device gpu 2>&1 | grep -E 'HASH|pass|recorded' | tee "$OUT/contract_hash.txt"
timeout "${BENCH_S:-200}" $B bench forward --model "$DIR" --reps "${REPS:-5}" --prefill "${PREFILL:-512}" 2>&1 | grep -v XDG | tee "$OUT/bench_forward.txt"
$B serve --model "$DIR" --device gpu --port 8080 --parallel 4 --context 4096 --prompt-cache-gib 8 --max-tokens 64 > "$OUT/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do curl -sf localhost:8080/health > "$OUT/health.json" && break; sleep 0.5; done
U=http://127.0.0.1:8080
timeout 200 python3 scripts/bench_openai.py --url $U --reps 3 --max-tokens 64 --warmup 1 > "$OUT/bench_openai.jsonl" 2> "$OUT/bench_openai.err"
timeout 200 python3 scripts/bench_concurrent.py --url $U --levels 1,4 --temperatures 0,1 --alone --max-tokens 64 > "$OUT/bench_concurrent.jsonl" 2> "$OUT/bench_concurrent.err"; echo "bench_concurrent exit $?" >> "$OUT/bench_concurrent.jsonl"
timeout 200 python3 scripts/bench_cache.py --url $U --prompt-tokens 2048 --require-cold --require-reuse --max-tokens 8 > "$OUT/bench_cache.jsonl" 2> "$OUT/bench_cache.err"; echo "bench_cache exit $?" >> "$OUT/bench_cache.jsonl"
curl -s $U/metrics > "$OUT/metrics.txt"
kill -TERM $pid; wait $pid; echo "serve exit $?" >> "$OUT/serve.log"
cat "$OUT"/bench_*.jsonl
true
