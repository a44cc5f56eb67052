#!/usr/bin/env bash
# Runs one libFuzzer target of the `fuzz` preset for a bounded time, seeded with its committed corpus
# (fuzz/corpus/NAME) and with inputs taken from the fixtures. A crash, a leak, an input slower than
# FUZZ_TIMEOUT seconds or an out-of-memory fails the run (libFuzzer's exit status), and the input is left
# in build/fuzz/artifacts/. Used by scripts/test.sh (every target, FUZZ_SECONDS each).
#
# Usage: scripts/fuzz.sh [--grow] NAME SECONDS
#   NAME: gguf chat gbnf json_schema tokenizer chat_messages server_request safetensors
#   --grow   merge the inputs that found new coverage into fuzz/corpus/NAME (libFuzzer -merge=1 keeps the
#            corpus small); without it the run works in a temporary folder and the tree stays clean.
# Without --grow the run is reproducible: libFuzzer's seed is FUZZ_SEED (default 1), so a CI run explores
# what the same command explored here, and a finding replays. --grow draws a fresh seed (exploration).
# Expects build/fuzz built (cmake --preset fuzz && cmake --build --preset fuzz --target fuzz_NAME).
set -euo pipefail
cd "$(dirname "$0")/.."
grow=0
if [ "${1:-}" = "--grow" ]; then grow=1; shift; fi
name="$1"
seconds="$2"
fix="${MINFER_FIXTURES_DIR:-../shared/fixtures}"
bin="build/fuzz/fuzz/fuzz_$name"
[ -x "$bin" ] || { echo "fuzz: $bin not built" >&2; exit 1; }

work="$(mktemp -d)"
seeds="$(mktemp -d)"
trap 'rm -rf "$work" "$seeds"' EXIT
max_len=4096
case "$name" in
  gguf)
    build/fuzz/fuzz/fuzz_gguf_seeds "$seeds" ;;
  chat)
    max_len=8192
    cp "$fix"/chat/templates/*.jinja "$seeds/" 2>/dev/null || true ;;
  gbnf)
    cp tests/sampling/data/*.gbnf "$seeds/" ;;
  json_schema | server_request | safetensors)
    ;;  # the committed corpus holds the seeds (schemas of every kind; request bodies; small checkpoints)
  tokenizer)
    # Lines of the fixtures' tokenizer corpus, each prefixed by the flag byte (0: plain, 1: specials).
    if [ -f "$fix/tokenizer/corpus.inp" ]; then
      i=0
      while IFS= read -r line && [ $i -lt 64 ]; do
        printf '\001%s' "$line" >"$seeds/line$i"
        i=$((i + 1))
      done <"$fix/tokenizer/corpus.inp"
    fi ;;
  chat_messages)
    max_len=8192
    for f in "$fix"/chat/cases/*.json; do
      [ -e "$f" ] && cp "$f" "$seeds/$(basename "$f")"
    done ;;
  *) echo "fuzz: unknown target $name" >&2; exit 1 ;;
esac

corpus="fuzz/corpus/$name"
mkdir -p "$corpus" build/fuzz/artifacts
echo "fuzz: $name for ${seconds}s ($(find "$corpus" -type f | wc -l) corpus inputs)"
log="$work/fuzz.log"
mkdir -p "$work/found"
dict=()
if [ -f "fuzz/$name.dict" ]; then dict=(-dict="fuzz/$name.dict"); fi
seed=()
if [ "$grow" = "0" ]; then seed=(-seed="${FUZZ_SEED:-1}"); fi
if ! "$bin" "${dict[@]}" "${seed[@]}" -max_total_time="$seconds" -max_len="$max_len" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$name-" \
    "$work/found" "$corpus" "$seeds" >"$log" 2>&1; then
  tail -60 "$log"
  echo "fuzz: $name FAILED (input in build/fuzz/artifacts/)" >&2
  exit 1
fi
grep -E "^stat::number_of_executed_units|^Done" "$log" | tr '\n' ' ' || true
echo
if [ "$grow" = "1" ]; then
  "$bin" -merge=1 -max_len="$max_len" "$corpus" "$work/found" >"$work/merge.log" 2>&1 \
    || { tail -30 "$work/merge.log"; exit 1; }
  echo "fuzz: $name corpus now $(find "$corpus" -type f | wc -l) inputs"
fi
