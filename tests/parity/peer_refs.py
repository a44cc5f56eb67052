"""llama.cpp's reference outputs on model files, through the peer (../shared/peer): the shared part of the
parity fixtures' make_refs.py scripts (tests/parity/llama, tests/parity/qwen3moe, tests/parity/trained), read
by tests/parity/synthetic_parity.h.

Per model file: its FNV-1a hash; per prompt the ids llama.cpp tokenizes (BOS/EOS as the GGUF asks, special
tokens parsed), the log-softmax of the last two prompt positions (one batch, -b 512), the greedy continuation,
the top-1/top-2 gap of every greedy step; and llama.cpp's own noise floor for the model: the max |difference|
between its one-batch and token-by-token (-b 1) log-softmax over the prompt and the continuation.
Settings: -t 1, f16 KV cache, flash attention auto (the peer's defaults).
"""
import array
import json
import os
import subprocess
import sys
import tempfile


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
    a = array.array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    meta = json.load(open(out + ".json"))
    nv = meta["n_vocab"]
    return [list(a[i * nv:(i + 1) * nv]) for i in range(len(a) // nv)]


def record_model(p, model, prompts, n_greedy, tmp):
    """llama.cpp's outputs on one model file: per prompt its ids, greedy continuation, top-1/top-2 gaps and
    the log-softmax of the last two prompt positions; and the model's batch vs token-by-token noise floor."""
    out, floor = {"prompts": []}, 0.0
    for text in prompts:
        g = peer(p, "greedy", model, "--prompt", text, "-n", str(n_greedy))
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
        out["prompts"].append({
            "text": text, "prompt_ids": ids, "greedy": toks, "gap_top1_top2": gaps,
            # the last two prompt positions (kept small; the greedy gaps cover the continuation)
            "first_position": max(0, len(ids) - 2),
            "logsoftmax": [[float(f"{x:.6g}") for x in r] for r in batch[max(0, len(ids) - 2):len(ids)]],
        })
    out["floor_batch_vs_tokenwise"] = float(f"{floor:.6g}")
    return out


def peer_info(p):
    info = peer(p, "info")
    return {k: info.get(k) for k in ("peer", "llama_cpp_release", "ggml_version", "build_commit", "cpu_variant")}


def write_refs(path, refs):
    with open(path, "w") as f:
        json.dump(refs, f, separators=(",", ":"))
        f.write("\n")


def write_synthetic_family_refs(family, cases, prompts, n_greedy, minfer, p):
    """tests/parity/FAMILY/refs.json for tiny random-weight models that `minfer make-model` generates
    deterministically from (preset, type, seed); the test regenerates each in-test and checks its hash."""
    refs = {"generator": f"tests/parity/{family}/make_refs.py", "peer": peer_info(p), "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for preset, qtype, seed in cases:
            model = os.path.join(tmp, f"{preset}-{qtype}.gguf")
            subprocess.run([minfer, "make-model", model, "--preset", preset, "--type", qtype, "--seed", str(seed)],
                           check=True, capture_output=True)
            h, size = fnv1a64(model)
            entry = {"preset": preset, "type": qtype, "seed": seed, "fnv1a64": h, "bytes": size,
                     **record_model(p, model, prompts, n_greedy, tmp)}
            print(f"{preset} {qtype}: floor {entry['floor_batch_vs_tokenwise']:.3g}", file=sys.stderr)
            refs["models"].append(entry)
    write_refs(os.path.join(os.path.dirname(os.path.abspath(__file__)), family, "refs.json"), refs)
