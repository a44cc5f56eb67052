#!/usr/bin/env python3
"""Writes tests/parity/gemma3/refs.json: llama.cpp's (../shared/peer) log-softmax and greedy tokens on tiny
random-weight `gemma3` models (7 layers: 6 sliding-window layers with a window of 8 positions, global layer
5) that `minfer make-model` generates deterministically (preset, type, seed). Every prompt is longer than
the window, so the window cuts the local layers' attention at the compared positions.

    python3 tests/parity/gemma3/make_refs.py build/release/src/cli/minfer ../shared/peer/llamacpp-peer.mjs

For each model and prompt it records: the prompt ids llama.cpp tokenizes (BOS/EOS as the GGUF asks, special
tokens parsed), the log-softmax of the last two prompt positions (one batch, -b 512), the greedy continuation
(16 tokens), the top-1/top-2 gap of every greedy step, and llama.cpp's own noise floor for the model: the
max |difference| between its one-batch and token-by-token (-b 1) log-softmax over the prompt and the
continuation. The test (tests/parity/gemma3_parity_test.cpp) regenerates each model in-test, checks its
FNV-1a hash equals the recorded one (a changed generator makes the fixture stale, loudly), and compares.
Settings: -t 1, f16 KV cache, flash attention auto (the peer's defaults).
"""
import json
import os
import subprocess
import sys
import tempfile

CASES = [  # (preset, type, seed)
    ("tiny-gemma3", "f32", 7),
    ("tiny-gemma3", "q8_0", 7),
    ("tiny-gemma3", "q4_0", 7),
    ("tiny-gemma3", "q4_K_M", 7),
    ("tiny-gemma3-softcap", "f32", 7),
]
PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nHello, world!<|im_end|>\n<|im_start|>assistant\n",
    "  int main() { return 0; }",
]
N_GREEDY = 16


def fnv1a64(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        data = f.read()
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}", len(data)


def peer(p, *args):
    out = subprocess.run(["node", p, *args, "-t", "1", "-o", "json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def logsoftmax(p, model, ids, batch, tmp):
    out = os.path.join(tmp, f"ls-{batch}.bin")
    subprocess.run(["node", p, "logits", model, "--tokens", ",".join(map(str, ids)), "--all", "-b", str(batch),
                    "-t", "1", "--out", out], check=True, capture_output=True)
    import array
    a = array.array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    meta = json.load(open(out + ".json"))
    nv = meta["n_vocab"]
    return [list(a[i * nv:(i + 1) * nv]) for i in range(len(a) // nv)]


def main():
    minfer, p = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    info = peer(p, "info")
    refs = {"generator": "tests/parity/gemma3/make_refs.py", "peer": {k: info.get(k) for k in
            ("peer", "llama_cpp_release", "ggml_version", "build_commit", "cpu_variant")}, "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for preset, qtype, seed in CASES:
            model = os.path.join(tmp, f"{preset}-{qtype}.gguf")
            subprocess.run([minfer, "make-model", model, "--preset", preset, "--type", qtype, "--seed", str(seed)],
                           check=True, capture_output=True)
            h, size = fnv1a64(model)
            entry = {"preset": preset, "type": qtype, "seed": seed, "fnv1a64": h, "bytes": size, "prompts": []}
            floor = 0.0
            for text in PROMPTS:
                g = peer(p, "greedy", model, "--prompt", text, "-n", str(N_GREEDY))
                ids, toks = g["prompt_tokens"], g["tokens"]
                seq = ids + toks[:-1]
                batch = logsoftmax(p, model, seq, 512, tmp)
                single = logsoftmax(p, model, seq, 1, tmp)
                for r1, r2 in zip(batch, single):
                    floor = max(floor, max(abs(x - y) for x, y in zip(r1, r2)))
                gaps = []
                for i in range(len(toks)):
                    row = sorted(batch[len(ids) - 1 + i], reverse=True)
                    gaps.append(round(row[0] - row[1], 6))
                entry["prompts"].append({
                    "text": text, "prompt_ids": ids, "greedy": toks, "gap_top1_top2": gaps,
                    # the last two prompt positions (kept small; the greedy gaps cover the continuation)
                    "first_position": max(0, len(ids) - 2),
                    "logsoftmax": [[float(f"{x:.6g}") for x in r] for r in batch[max(0, len(ids) - 2):len(ids)]],
                })
            entry["floor_batch_vs_tokenwise"] = float(f"{floor:.6g}")
            refs["models"].append(entry)
            print(f"{preset} {qtype}: floor {floor:.3g}", file=sys.stderr)
    with open(os.path.join(here, "refs.json"), "w") as f:
        json.dump(refs, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
