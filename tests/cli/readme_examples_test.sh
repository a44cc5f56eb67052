#!/usr/bin/env bash
# ctest: every README block marked `<!-- readme-test: offline -->` runs as written, one line at a time, in
# an empty folder with `minfer` on PATH and every network endpoint pointed at a closed loopback port.
# Usage: readme_examples_test.sh README.md MINFER_BINARY WORK_DIR
set -uo pipefail
readme="$1"; bin="$2"; work="$3"
rm -rf "$work" && mkdir -p "$work/bin" && cd "$work" || exit 1
ln -s "$bin" bin/minfer
export PATH="$work/bin:$PATH" MINFER_CACHE="$work/cache"
export HF_ENDPOINT="http://127.0.0.1:9" MINFER_OLLAMA_REGISTRY="http://127.0.0.1:9"
awk '/<!-- readme-test: offline -->/ { armed = 1; next }
     armed && /^```sh/ { inside = 1; next }
     inside && /^```/ { inside = 0; armed = 0; next }
     inside { print }' "$readme" >commands.txt
n=$(grep -cv '^[[:space:]]*\(#.*\)\?$' commands.txt)
if [ "$n" -lt 5 ]; then echo "FAIL: only $n offline commands found in $readme"; exit 1; fi
while IFS= read -r line; do
  case "$line" in '' | '#'*) continue ;; esac
  echo "+ $line"
  if ! timeout 120 bash -c "$line" </dev/null >out.txt 2>err.txt; then
    echo "FAIL: the README command above exited non-zero"; cat out.txt err.txt; exit 1
  fi
done <commands.txt
echo "PASS: $n README commands ran as written"
