#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each, planted bugs first: bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
seconds=${1:-600}
shift || true
if [ -z "${LOCKSTEP_TOKENIZER:-}" ] && [ -f scripts/fetch_tokenizer.sh ]; then
  LOCKSTEP_TOKENIZER=$(bash scripts/fetch_tokenizer.sh | tail -n 1)
  export LOCKSTEP_TOKENIZER
fi
cargo build --release --locked --features testing
bin=target/fuzz-lockstep
cp target/release/lockstep "$bin"
# the next plain build makes target/release/lockstep a release build without the switches again
echo "== planted bugs (each run must find its own)"
"$bin" fuzz --planted --seconds 120 "$@"
echo "== $seconds s or 1,000,000 executions per target"
"$bin" fuzz --seconds "$seconds" --execs "${FUZZ_EXECS:-1000000}" --seed "${FUZZ_SEED:-$RANDOM}" ${FUZZ_SAVE:+--save "$FUZZ_SAVE"} "$@"
