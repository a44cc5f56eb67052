#!/usr/bin/env bash
# README command 1: install, build `release`, and run minfer on a model. Without an argument it generates a
# small RANDOM-WEIGHT model with minfer's own GGUF writer (works offline) and runs it.
# Usage: scripts/demo.sh [model.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release >/dev/null
MINFER=build/release/src/cli/minfer
model="${1:-}"
if [ -z "$model" ]; then
  model=models/tiny-qwen2-random.gguf
  mkdir -p models
  [ -f "$model" ] || "$MINFER" make-model "$model" --preset tiny-qwen2
fi
"$MINFER" info "$model"
