#!/usr/bin/env python3
"""Load generator for `minfer serve` (standard library only): concurrent streaming clients on
/v1/completions with token-id prompts, reporting aggregate generated tok/s, TTFT and inter-token latency.

Scenarios (all by default):
  concurrency  1, 4 and 8 clients, each streaming --requests requests (128-token prompts, 128 tokens out)
  admission    4 streaming clients while a 2,000-token prompt is admitted; their p99 inter-token latency
  prefix       two requests sharing a 1,000-token system prefix: TTFT of the second over the first

Usage: scripts/bench_server.py --url http://127.0.0.1:8080 [--scenario concurrency|admission|prefix|all]
       [--prompt-tokens 128] [--gen-tokens 128] [--requests 2] [--clients 1,4,8] [--text FILE] [--json]
Prompts are token ids drawn from [1000, 30000) with a per-request salt, so no two requests share a prefix
unless a scenario wants them to; with --text, about 4 characters per prompt token cut from FILE at a place
that depends on the salt (for a trained model with a small vocabulary, e.g. models/trained/heldout.txt).
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[k]


TEXT = None  # --text: prompts cut from a real text instead of ids (a trained model's own language)


def prompt_ids(n, salt):
    """A prompt of about n tokens: ids spread over a 30k vocabulary, or with --text about 4n characters of the
    text starting at a place that depends on salt (a trained model then continues real language)."""
    if TEXT is not None:
        start = (salt * 7919) % max(1, len(TEXT) - 4 * n)
        return TEXT[start:start + 4 * n]
    return [1000 + (i * 7919 + salt * 104729) % 29000 for i in range(n)]


class Result:
    def __init__(self):
        self.ttft = None
        self.gaps = []
        self.tokens = 0
        self.status = None
        self.error = None


def stream_completion(url, prompt, max_tokens, timeout=600):
    """One streaming request; returns a Result with TTFT (s), inter-chunk gaps (s) and completion tokens."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = json.dumps({
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True},
    })
    r = Result()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    r.status = resp.status
    if resp.status != 200:
        r.error = resp.read().decode(errors="replace")
        conn.close()
        return r
    last = None
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            line = frame.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                conn.close()
                return r
            msg = json.loads(data)
            if "error" in msg:
                r.error = msg["error"]
                continue
            if msg.get("usage") and not msg.get("choices"):
                r.tokens = msg["usage"].get("completion_tokens", 0)
                continue
            if not any(c.get("text") for c in msg.get("choices", [])):
                continue
            now = time.perf_counter()
            if r.ttft is None:
                r.ttft = now - t0
            elif last is not None:
                r.gaps.append(now - last)
            last = now
    conn.close()
    return r


def run_clients(url, n_clients, requests_per_client, prompt_tokens, gen_tokens, salt0):
    results = []
    lock = threading.Lock()

    def client(ci):
        for k in range(requests_per_client):
            res = stream_completion(url, prompt_ids(prompt_tokens, salt0 + ci * 1000 + k), gen_tokens)
            with lock:
                results.append(res)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return results, wall


def summarize(results, wall):
    bad = [r for r in results if r.status != 200 or r.error]
    tokens = sum(r.tokens for r in results)
    ttft = [r.ttft for r in results if r.ttft is not None]
    gaps = [g for r in results for g in r.gaps]
    return {
        "requests": len(results), "failed": len(bad), "tokens": tokens, "wall_s": round(wall, 3),
        "tok_s": round(tokens / wall, 2) if wall > 0 else 0.0,
        "ttft_p50_ms": round(1000 * percentile(ttft, 50), 1), "ttft_p99_ms": round(1000 * percentile(ttft, 99), 1),
        "itl_p50_ms": round(1000 * percentile(gaps, 50), 1), "itl_p99_ms": round(1000 * percentile(gaps, 99), 1),
    }


def scenario_concurrency(args):
    out = {}
    for n in args.clients:
        res, wall = run_clients(args.url, n, args.requests, args.prompt_tokens, args.gen_tokens, salt0=n * 100000)
        out[str(n)] = summarize(res, wall)
    if "1" in out and "4" in out:
        out["throughput_4_over_1"] = round(out["4"]["tok_s"] / out["1"]["tok_s"], 2) if out["1"]["tok_s"] else None
    return out


def scenario_admission(args):
    alone, wall = run_clients(args.url, 1, 1, args.prompt_tokens, args.gen_tokens, salt0=7000000)
    base = summarize(alone, wall)
    results = []
    lock = threading.Lock()

    def client(ci):
        res = stream_completion(args.url, prompt_ids(args.prompt_tokens, 8000000 + ci), args.gen_tokens)
        with lock:
            results.append(res)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(1.0)  # the streams are decoding now
    long_res = stream_completion(args.url, prompt_ids(2000, 9000000), 1)
    for t in threads:
        t.join()
    mixed = summarize(results, time.perf_counter() - t0)
    return {
        "one_client": base, "four_clients_with_2000_token_admission": mixed,
        "long_prompt_ttft_ms": round(1000 * (long_res.ttft or float("nan")), 1),
        "itl_p99_ratio": round(mixed["itl_p99_ms"] / base["itl_p99_ms"], 2) if base["itl_p99_ms"] else None,
    }


def scenario_prefix(args):
    system = prompt_ids(1000, 31337)
    first = stream_completion(args.url, system + prompt_ids(24, 1), 4)
    second = stream_completion(args.url, system + prompt_ids(24, 2), 4)
    return {
        "first_ttft_ms": round(1000 * (first.ttft or float("nan")), 1),
        "second_ttft_ms": round(1000 * (second.ttft or float("nan")), 1),
        "ratio": round(second.ttft / first.ttft, 3) if first.ttft and second.ttft else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--scenario", default="all", choices=["concurrency", "admission", "prefix", "all"])
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--requests", type=int, default=2, help="requests per client in the concurrency scenario")
    ap.add_argument("--clients", default="1,4,8", help="client counts of the concurrency scenario")
    ap.add_argument("--text", help="cut prompts from this text file instead of using synthetic ids")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",") if c]
    if args.text:
        global TEXT
        with open(args.text, encoding="utf-8") as f:
            TEXT = f.read()
    report = {}
    if args.scenario in ("concurrency", "all"):
        report["concurrency"] = scenario_concurrency(args)
    if args.scenario in ("admission", "all"):
        report["admission"] = scenario_admission(args)
    if args.scenario in ("prefix", "all"):
        report["prefix"] = scenario_prefix(args)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    if "concurrency" in report:
        print("| clients | requests | failed | gen tokens | tok/s | TTFT p50 / p99 ms | ITL p50 / p99 ms |")
        print("|---|---|---|---|---|---|---|")
        for n in map(str, args.clients):
            s = report["concurrency"][n]
            print(f"| {n} | {s['requests']} | {s['failed']} | {s['tokens']} | {s['tok_s']} | "
                  f"{s['ttft_p50_ms']} / {s['ttft_p99_ms']} | {s['itl_p50_ms']} / {s['itl_p99_ms']} |")
        if "throughput_4_over_1" in report["concurrency"]:
            print(f"aggregate throughput, 4 clients / 1 client: {report['concurrency']['throughput_4_over_1']}x")
    if "admission" in report:
        a = report["admission"]
        print(f"ITL p99: 1 client {a['one_client']['itl_p99_ms']} ms; 4 clients while a 2,000-token prompt is "
              f"admitted {a['four_clients_with_2000_token_admission']['itl_p99_ms']} ms "
              f"(ratio {a['itl_p99_ratio']}); the long prompt's TTFT {a['long_prompt_ttft_ms']} ms")
    if "prefix" in report:
        p = report["prefix"]
        print(f"1,000-token shared prefix: TTFT {p['first_ttft_ms']} ms first, {p['second_ttft_ms']} ms second "
              f"(ratio {p['ratio']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
