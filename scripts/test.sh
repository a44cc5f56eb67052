#!/usr/bin/env bash
# README command 2: install, build, run the whole test suite (unit + parity against ../shared/fixtures,
# plus short libFuzzer runs of the GGUF reader and the chat template engine). Ends with ctest's summary.
# Environment: FUZZ_SECONDS (default 30; 0 skips the fuzz run), MINFER_FIXTURES_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs="$(nproc)"

bash scripts/build.sh release

fuzz_seconds="${FUZZ_SECONDS:-30}"
if [ "$fuzz_seconds" != "0" ]; then
  # Only the fuzz targets: the rest of the tree is covered by the release build above.
  cmake --preset fuzz >/dev/null
  fuzz_log="$(mktemp)"
  cmake --build --preset fuzz --target fuzz_gguf fuzz_gguf_seeds fuzz_chat >"$fuzz_log" 2>&1 \
    || { tail -50 "$fuzz_log"; exit 1; }
  rm -f "$fuzz_log"
  corpus="$(mktemp -d)"
  build/fuzz/fuzz/fuzz_gguf_seeds "$corpus"
  echo "fuzz: gguf reader for ${fuzz_seconds}s"
  build/fuzz/fuzz/fuzz_gguf -max_total_time="$fuzz_seconds" -max_len=4096 -print_final_stats=0 "$corpus" \
    >"$corpus/fuzz.log" 2>&1 || { tail -50 "$corpus/fuzz.log"; exit 1; }
  grep -E "^Done|#[0-9]+.*DONE" "$corpus/fuzz.log" | tail -1 || true
  rm -rf "$corpus"

  # Chat template parser + renderer, seeded with the real templates; at most 10 s of CI time.
  chat_seconds=$(( fuzz_seconds < 10 ? fuzz_seconds : 10 ))
  corpus="$(mktemp -d)"
  cp "${MINFER_FIXTURES_DIR:-../shared/fixtures}"/chat/templates/*.jinja "$corpus/" 2>/dev/null \
    || printf '{%% for m in messages %%}{{ m.role }}{%% endfor %%}' >"$corpus/seed.jinja"
  echo "fuzz: chat templates for ${chat_seconds}s"
  build/fuzz/fuzz/fuzz_chat -max_total_time="$chat_seconds" -max_len=8192 -print_final_stats=0 "$corpus" \
    >"$corpus/fuzz.log" 2>&1 || { tail -50 "$corpus/fuzz.log"; exit 1; }
  grep -E "^Done|#[0-9]+.*DONE" "$corpus/fuzz.log" | tail -1 || true
  rm -rf "$corpus"
fi

# The official openai npm client for the server test (project-local; skipped without node/npm).
bash scripts/install_openai_client.sh || echo "test: openai npm client not installed; its test will be skipped"

ctest --preset release -j "$jobs"
