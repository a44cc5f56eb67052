#!/usr/bin/env bash
# README command 1: install, build `release`, and generate text with minfer. Without a model argument it
# first writes a small RANDOM-WEIGHT model with minfer's own GGUF writer (works offline): every stage runs
# for real, but the text is noise.
# Usage: scripts/demo.sh [model.gguf] [prompt]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release >/dev/null
MINFER=build/release/src/cli/minfer
model="${1:-}"
prompt="${2:-Tell me a story about a llama.}"
if [ -z "$model" ]; then
  model=models/tiny-qwen2-random.gguf
  mkdir -p models
  [ -f "$model" ] || "$MINFER" make-model "$model" --preset tiny-qwen2
  echo "demo: $model has RANDOM weights; the text below is noise from a real pipeline"
fi
"$MINFER" "$model" "$prompt" -n 64 --seed 42
