#!/usr/bin/env python3
"""The quality table of docs/QUALITY.md: the trained target in F16 and six quantizations, on the held-out
text (models/trained/heldout.txt), n_ctx 512, all chunks.

For each type: `minfer quantize` from the F16 file, `minfer perplexity` (PPL; the F16 run writes the KLD base
file, the others report mean KLD and top-1 agreement against it), and llama.cpp's PPL computed from the
peer's per-token log-softmax with llama-perplexity's definitions (tests/parity/perplexity/make_refs.py),
through peer_nll.mjs, which loads the model once for all chunks.

    python3 scripts/train/quality.py build/release/src/cli/minfer ../shared/peer/llamacpp-peer.mjs [WORK_DIR] [PEER_TYPES]
PEER_TYPES (default: all, comma separated) limits the llama.cpp runs (184 chunks, a few minutes per type).
Prints the Markdown table rows and writes WORK_DIR/quality.json.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "parity", "perplexity"))
import make_refs  # noqa: E402  (peer helpers and llama-perplexity's formulas)

TYPES = ["f16", "q8_0", "q6_K", "q5_K_M", "q4_K_M", "q4_0", "q4_1"]
N_CTX = 512


def minfer_tokens(minfer, model, text_path):
    """The held-out text's ids as minfer tokenizes it (no special-token parsing, as llama-perplexity). The
    text (310 kB) is longer than one command-line argument may be, so the peer cannot be given it whole;
    main() checks that the peer tokenizes a 100 kB prefix identically."""
    with open(text_path, encoding="utf-8") as f:
        out = subprocess.run([minfer, "tokenize", "--ids", "--no-special", model, "-"], stdin=f, check=True,
                             capture_output=True, text=True)
    return json.loads(out.stdout)


def check_tokenizer_prefix(minfer, peer, model, text, work):
    prefix = text[:100000]
    path = os.path.join(work, "prefix.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(prefix)
    if minfer_tokens(minfer, model, path) != make_refs.peer_tokenize(peer, model, prefix):
        sys.exit("quality: minfer and llama.cpp tokenize the held-out text differently")
    print("tokenizer: minfer and llama.cpp agree on the held-out text's first 100,000 characters", flush=True)


def peer_nll(peer, model, tokens, work):
    """llama.cpp's NLL of every scored token: peer_nll.mjs (model loaded once) over all chunks, its first
    chunk checked against the peer's own `logits --all` (one process, full log-softmax rows)."""
    ids_path = os.path.join(work, "ids.json")
    with open(ids_path, "w") as f:
        json.dump(tokens, f)
    out = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer_nll.mjs"), model,
                          ids_path, str(N_CTX), "1"], check=True, capture_output=True, text=True)
    nll = json.loads(out.stdout)
    first = tokens[:N_CTX]
    lsm = make_refs.peer_logsoftmax(peer, model, first, work)
    want = [-lsm[j][first[j + 1]] for j in range(N_CTX // 2, N_CTX - 1)]
    worst = max(abs(a - b) for a, b in zip(nll, want))
    if worst > 1e-5:  # the peer stores log p in float32: 1e-6 relative at NLLs below 10
        sys.exit(f"quality: peer_nll.mjs and the peer's logits differ by {worst} on {model}'s first chunk")
    return nll


def main():
    minfer, peer = sys.argv[1], sys.argv[2]
    work = sys.argv[3] if len(sys.argv) > 3 else "build/quality"
    peer_types = [t for t in sys.argv[4].split(",") if t] if len(sys.argv) > 4 else TYPES
    os.makedirs(work, exist_ok=True)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    f16 = os.path.join(root, "models", "trained", "tinyqwen3-8m-f16.gguf")
    text_path = os.path.join(root, "models", "trained", "heldout.txt")
    text = open(text_path, encoding="utf-8").read()
    base = os.path.join(work, "f16.kld")
    if peer_types:
        check_tokenizer_prefix(minfer, peer, f16, text, work)
        tokens = minfer_tokens(minfer, f16, text_path)  # one vocabulary for every type: tokenized once
    rows = []
    for t in TYPES:
        model = f16 if t == "f16" else os.path.join(work, f"tinyqwen3-8m-{t}.gguf")
        if t != "f16":
            subprocess.run([minfer, "quantize", f16, model, "--type", t], check=True, capture_output=True)
        args = [minfer, "perplexity", model, "-f", text_path, "-c", str(N_CTX), "-t", "2", "-o", "json",
                "--kl-divergence-base", base]
        if t != "f16":
            args.append("--kl-divergence")
        got = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
        row = {"type": t, "size_mb": os.path.getsize(model) / 1e6}
        if t in peer_types:
            t0 = time.time()
            nll = peer_nll(peer, model, tokens, work)
            row["peer_ppl"], row["peer_unc"] = make_refs.ppl_estimate(nll)
            row["peer_seconds"] = time.time() - t0
        if t == "f16":
            row.update(ppl=got["ppl"], ppl_unc=got["ppl_uncertainty"], n_chunk=got["n_chunk"])
        else:
            st = got["statistics"]
            row.update(ppl=st["ppl"]["value"], ppl_unc=st["ppl"]["uncertainty"], kld=st["kld"]["mean"],
                       kld_unc=st["kld"]["uncertainty"], same_top=st["same_top_p"]["value"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    json.dump(rows, open(os.path.join(work, "quality.json"), "w"), indent=1)
    print("| type | file MB | PPL minfer | PPL llama.cpp | mean KLD vs F16 | same top-1 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        kld = f"{r['kld']:.5f} ± {r['kld_unc']:.5f}" if "kld" in r else "(base)"
        same = f"{100 * r['same_top']:.2f} %" if "same_top" in r else "(base)"
        peer_ppl = f"{r['peer_ppl']:.3f} ± {r['peer_unc']:.3f}" if "peer_ppl" in r else "not run"
        print(f"| {r['type']} | {r['size_mb']:.1f} | {r['ppl']:.3f} ± {r['ppl_unc']:.3f} | {peer_ppl} | {kld} | {same} |")


if __name__ == "__main__":
    main()
