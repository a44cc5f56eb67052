#!/usr/bin/env bash
# Soak test for `minfer serve` (not part of ctest): N mixed requests over loopback (normal, streamed,
# malformed, disconnecting, over-long prompt, over --max-body), checking every status, /health at the end,
# and that the server's RSS after the run is within 5% of its RSS after the first 10% of requests.
# Usage: scripts/soak_server.sh [MODEL.gguf] [N=10000] [CONCURRENCY=8]   (default model: a tiny generated one)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
minfer="${MINFER_BIN:-$root/build/release/src/cli/minfer}"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
model="${1:-}"
if [ -z "$model" ]; then model="$work/tiny.gguf"; "$minfer" make-model "$model" --preset tiny-qwen3 >/dev/null; fi
n="${2:-10000}"; conc="${3:-8}"
"$minfer" serve "$model" --port 0 -t 1 -c 1024 --n-slots 4 --queue-depth 64 --max-body 64k --alias soak >"$work/log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$work/log")"; [ -n "$port" ] && break; sleep 0.1
done
[ -n "$port" ] || { cat "$work/log"; exit 1; }
python3 - "$port" "$pid" "$n" "$conc" <<'PY'
import http.client, json, socket, sys, threading, time, random
port, pid, n, conc = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1])
kinds = ["normal", "stream", "malformed", "disconnect", "overlong", "overbody", "badfield", "normal"]
expect = {"normal": 200, "stream": 200, "malformed": 400, "disconnect": None, "overlong": 400, "overbody": 413, "badfield": 400}
lock = threading.Lock(); counts = {}; bad = []; done = [0]; rss_first = [None]
def one(i):
    kind = kinds[i % len(kinds)]
    msg = {"messages": [{"role": "user", "content": f"request {i}"}], "max_tokens": 4 + i % 5, "temperature": 0.7, "seed": i}
    if kind == "stream": msg["stream"] = True
    body = json.dumps(msg)
    if kind == "malformed": body = body[: len(body) // 2]
    if kind == "overlong": msg["messages"][0]["content"] = "word " * 2000; body = json.dumps(msg)
    if kind == "overbody": body = json.dumps({"messages": [{"role": "user", "content": "x" * 70000}]})
    if kind == "badfield": msg["temperature"] = 9; body = json.dumps(msg)
    if kind == "disconnect":
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        req = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
        s.sendall(req.encode())
        if i % 2: s.recv(1)
        s.close(); status = None
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            c.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse(); data = r.read(); status = r.status
            if status == 200 and kind == "stream" and not data.endswith(b"data: [DONE]\n\n"): status = -1
            if status != 200 and status != 503:
                err = json.loads(data)["error"]; assert "message" in err and "type" in err
        except Exception as e:
            status = f"exception {e!r}"
        finally:
            c.close()
    with lock:
        counts[(kind, status)] = counts.get((kind, status), 0) + 1
        if expect[kind] is not None and status != expect[kind] and status != 503: bad.append((i, kind, status))
        done[0] += 1
        if done[0] == n // 10: rss_first[0] = rss_kib()
it = iter(range(n))
def worker():
    while True:
        with lock:
            i = next(it, None)
        if i is None: return
        one(i)
t0 = time.time()
threads = [threading.Thread(target=worker) for _ in range(conc)]
for t in threads: t.start()
for t in threads: t.join()
time.sleep(1.0)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10); c.request("GET", "/health"); h = c.getresponse(); h.read()
rss_end = rss_kib()
growth = (rss_end - rss_first[0]) / rss_first[0] * 100
print(f"soak: {n} requests in {time.time()-t0:.0f} s, concurrency {conc}")
for k in sorted(counts, key=str): print(f"  {k[0]:<10} -> {k[1]}: {counts[k]}")
print(f"  wrong statuses: {len(bad)} {bad[:5]}")
print(f"  /health after: {h.status}")
print(f"  RSS after {n//10}: {rss_first[0]} KiB, after {n}: {rss_end} KiB ({growth:+.2f}%)")
ok = not bad and h.status == 200 and abs(growth) <= 5.0
print("soak: PASS" if ok else "soak: FAIL")
sys.exit(0 if ok else 1)
PY
rc=$?
kill -TERM "$pid"; wait "$pid"; src=$?
echo "soak: server exit status after SIGTERM: $src"
exit $(( rc != 0 || src != 0 ))
