#!/usr/bin/env bash
# ctest: headless Chromium (Debian's, through puppeteer-core) against `minfer viz` on a loopback ephemeral
# port with a tiny generated model. Skips (exit 77) only when node, Chromium or puppeteer-core cannot be
# found (scripts/setup.sh installs chromium, scripts/install_npm_tests.sh puppeteer-core; this test never
# downloads anything). Saves the screenshot as WORK_DIR/viz.png.
# Usage: browser_test.sh MINFER_BINARY PUPPETEER_DIR WORK_DIR
set -uo pipefail
minfer="$1"; pptr="$2"; work="$3"
if ! command -v node >/dev/null; then echo "SKIP: node not found"; exit 77; fi
chrome="${MINFER_CHROMIUM:-}"
for c in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do
  [ -z "$chrome" ] && [ -x "$c" ] && chrome="$c"
done
if [ -z "$chrome" ]; then echo "SKIP: Chromium not found (apt-get install chromium, or set MINFER_CHROMIUM)"; exit 77; fi
if [ ! -f "$pptr/node_modules/puppeteer-core/package.json" ]; then
  echo "SKIP: puppeteer-core not installed in $pptr (run scripts/install_npm_tests.sh)"; exit 77
fi
cp "$(dirname "$0")/browser/viz_page_test.mjs" "$pptr/"
mkdir -p "$work"
model="$work/browser-tiny.gguf"
"$minfer" make-model "$model" --preset tiny-qwen3 >/dev/null || exit 1
log="$work/viz.log"
"$minfer" viz "$model" --port 0 -t 1 >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's#.*minfer viz: http://127.0.0.1:\([0-9]*\)/.*#\1#p' "$log")"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then echo "minfer viz did not start:"; cat "$log"; kill "$pid" 2>/dev/null; exit 1; fi
MINFER_VIZ_URL="http://127.0.0.1:$port/" MINFER_CHROMIUM="$chrome" MINFER_SCREENSHOT="$work/viz.png" \
  timeout 180 node "$pptr/viz_page_test.mjs"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
if [ "$src" -ne 0 ]; then echo "minfer viz exited $src after SIGTERM"; cat "$log"; exit 1; fi
exit $rc
