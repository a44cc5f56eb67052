#!/usr/bin/env bash
# README command 1: install what building and running needs, build the `minfer` binary (release) and the
# libraries it links, and generate text. Without a model argument it runs the committed trained model,
# models/trained/tinyqwen3-8m-q8_0.gguf (8.4M parameters, trained here for about an hour on two CPU cores by
# scripts/train/run.sh: see models/trained/README.md), through the model's own chat template. Works offline.
# Usage: scripts/demo.sh [model.gguf] [prompt]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --run
# Only the binary the demo runs (and the libraries it links): the tests and benchmarks are README command 2's.
bash scripts/build.sh release minfer >/dev/null
MINFER=build/release/src/cli/minfer
model="${1:-models/trained/tinyqwen3-8m-q8_0.gguf}"
prompt="${2:-Quote a verse from Psalms.}"
"$MINFER" "$model" "$prompt" -n 96 --seed 42
