#!/usr/bin/env bash
# Counts the parity cases that ran (lines the parity tests append to $MINFER_PARITY_LOG, see
# tests/common/fixtures.h) per kind, against what the fixtures folder holds, counted here independently
# of the test code. A parity tier that ran fewer cases than the fixtures hold (stale list, placeholder,
# filter, missing or empty fixtures) is a failure when MINFER_FIXTURES_REQUIRED=1, a warning otherwise.
# Usage: scripts/parity_counts.sh PARITY_LOG   (fixtures: $MINFER_FIXTURES_DIR, default ../shared/fixtures)
set -euo pipefail
cd "$(dirname "$0")/.."
log="$1"
fix="${MINFER_FIXTURES_DIR:-../shared/fixtures}"
required="${MINFER_FIXTURES_REQUIRED:-0}"

count() { # count FILES... (globs that matched nothing stay literal and are not counted)
  local n=0 f
  for f in "$@"; do [ -e "$f" ] && n=$((n + 1)); done
  echo "$n"
}

declare -A want
want[logits]=$(count "$fix"/models/refs/*/*/)
want[quantize]=$(( $(count "$fix"/models/*.gguf) - $(count "$fix"/models/*-f32.gguf) ))
want[tokenizer]=$(( $(count "$fix"/tokenizer/corpus.*.out) \
  + $(count "$fix"/tokenizer/ggml-vocab-*.out) * $(count "$fix"/tokenizer/*-vocab.gguf) ))
want[chat]=$(count "$fix"/chat/cases/*.json)

status=0
line="parity cases run:"
for kind in logits quantize tokenizer chat; do
  ran=0
  if [ -s "$log" ]; then ran=$(grep "^$kind " "$log" | sort -u | wc -l); fi
  line+=" $kind ${ran}/${want[$kind]}"
  if [ "${want[$kind]}" -eq 0 ] || [ "$ran" -lt "${want[$kind]}" ]; then status=1; fi
done
echo "$line"
if [ "$status" -ne 0 ]; then
  if [ "$required" = "1" ]; then
    echo "parity: MINFER_FIXTURES_REQUIRED=1 and fewer parity cases ran than $fix holds" >&2
    exit 1
  fi
  echo "parity: WARNING: not every fixture case ran (fixtures: $fix; set MINFER_FIXTURES_REQUIRED=1 to fail)" >&2
fi
