#!/usr/bin/env python3
"""Writes tests/parity/perplexity/refs.json: llama.cpp's perplexity and KL divergence on the shared fixture
models (../shared/fixtures/models) and tests/parity/perplexity/text.txt, computed from the llama.cpp peer's
per-token log-softmax (../shared/peer: `logits --tokens ... --all`), with llama-perplexity's definitions.

    python3 tests/parity/perplexity/make_refs.py ../shared/peer/llamacpp-peer.mjs [../shared/fixtures]
    python3 tests/parity/perplexity/make_refs.py --live build/release/src/cli/minfer ../shared/peer/llamacpp-peer.mjs

--live compares instead of recording: it generates a tiny random-weight model (f32) and its q8_0 with
`minfer make-model`, runs `minfer perplexity` on both (the f32 one writing a base file, the q8_0 one against
it) and checks PPL and KLD against the same computation from the peer, run now (tests/parity/perplexity/
live_peer_test.sh runs it under ctest when the peer is installed).

Definitions (tools/perplexity/perplexity.cpp in llama.cpp): the text is tokenized once as llama-perplexity
does (no special-token parsing, BOS only if the GGUF asks: these models do not); chunks of N_CTX tokens, each
evaluated alone from an empty cache in one batch (-b 512); the log-softmax of positions N_CTX/2 .. N_CTX-2
scores the next token. PPL = exp(mean NLL) with llama-perplexity's +/- estimate. KLD: the base model's
log-probabilities are encoded in llama-perplexity's 16 bits per token (scale, min, u16), and KLD, Δp and
top-token agreement of each other model are computed against those, exactly as its --kl-divergence does.
Settings: -t 1, f16 KV cache, flash attention auto (the peer's defaults).
Recorded per model: the NLL of every scored token, the running PPL per chunk, the final PPL and +/-, and for
the models compared with BASE the KLD statistics.
"""
import array
import json
import math
import os
import subprocess
import sys
import tempfile

N_CTX = 128
BASE = "qwen3-mini-f32"
MODELS = ["qwen3-mini-f32", "qwen3-mini-q8_0", "qwen3-mini-q4_0", "qwen2-mini-f32"]
COMPARED = ["qwen3-mini-q8_0", "qwen3-mini-q4_0"]  # KLD against BASE (same vocabulary)


def f32(x):
    return array.array("f", [x])[0]


def peer_tokenize(p, model, text):
    out = subprocess.run(["node", p, "tokenize", model, "--text", text, "-o", "json"], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def peer_logsoftmax(p, model, ids, tmp):
    out = os.path.join(tmp, "ls.bin")
    subprocess.run(["node", p, "logits", model, "--tokens", ",".join(map(str, ids)), "--all", "-b", "512", "-t", "1",
                    "--out", out], check=True, capture_output=True)
    a = array.array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    nv = json.load(open(out + ".json"))["n_vocab"]
    return [a[i * nv:(i + 1) * nv] for i in range(len(a) // nv)]


def scored_rows(p, model, tokens, n_chunk, tmp, n_ctx=N_CTX):
    """Per chunk: the log-softmax rows of positions first..n_ctx-2 and the tokens they predict."""
    first = n_ctx // 2
    out = []
    for c in range(n_chunk):
        chunk = tokens[c * n_ctx:(c + 1) * n_ctx]
        rows = peer_logsoftmax(p, model, chunk, tmp)
        out.append([(rows[j], chunk[j + 1]) for j in range(first, n_ctx - 1)])
    return out


def mean_unc(s, s2, n):  # llama-perplexity's mean_and_uncertainty
    if n < 1:
        return 0.0, 0.0
    f = s / n
    df = s2 / n - f * f
    return f, (math.sqrt(df / (n - 1)) if df > 0 and n > 10 else 0.0)


def ppl_estimate(nlls):
    n = len(nlls)
    m = sum(nlls) / n
    v = sum(x * x for x in nlls) / n - m * m
    return math.exp(m), (math.sqrt(v / (n - 1)) * math.exp(m) if v > 0 else 0.0)


def encode(row):
    """llama-perplexity's 16-bit encoding of one log-softmax row: (scale, min_log_prob, q[])."""
    mx = max(row)
    mn = max(min(row), mx - 16)
    scale = f32((mx - mn) / 65535)
    q = [int(round((x - mn) / scale)) if x > mn and scale else 0 for x in row]  # round() is half-even
    return scale, f32(mn), q


def kld_stats(base, other):
    s = dict(nll=0.0, nll2=0.0, nb=0.0, nb2=0.0, nnb=0.0, kld=0.0, kld2=0.0, dp=0.0, dp2=0.0, dp4=0.0, same=0, n=0)
    klds, dps = [], []
    for bchunk, ochunk in zip(base, other):
        for (brow, tok), (orow, tok2) in zip(bchunk, ochunk):
            assert tok == tok2
            scale, mlp, q = encode(brow)
            nll = -orow[tok]
            nb = -(scale * q[tok] + mlp)
            plb = [scale * v + mlp for v in q]
            k = sum(math.exp(b) * (b - o) for b, o in zip(plb, orow) if b > -16)
            imax = max(range(len(orow)), key=lambda i: (orow[i], -i))
            imax_b = max(range(len(plb)), key=lambda i: (plb[i], -i))
            dp = math.exp(-nll) - math.exp(-nb)
            s["nll"] += nll; s["nll2"] += nll * nll; s["nb"] += nb; s["nb2"] += nb * nb; s["nnb"] += nll * nb
            s["kld"] += k; s["kld2"] += k * k; s["dp"] += dp; s["dp2"] += dp * dp; s["dp4"] += dp ** 4
            s["same"] += imax == imax_b; s["n"] += 1
            klds.append(k); dps.append(dp)
    n = s["n"]
    lp, lpu = mean_unc(s["nll"], s["nll2"], n)
    lb, lbu = mean_unc(s["nb"], s["nb2"], n)
    cov = (s["nnb"] / n - (s["nll"] / n) * (s["nb"] / n)) / (n - 1)
    kld, kldu = mean_unc(s["kld"], s["kld2"], n)
    mse, mseu = mean_unc(s["dp2"], s["dp4"], n)
    klds.sort()

    def pct(v, f):
        x = f * (len(v) - 1)
        i = int(x)
        x -= i
        return (1 - x) * v[i] + x * v[min(i + 1, len(v) - 1)]

    same = s["same"] / n
    med = 0.5 * (klds[n // 2] + klds[n // 2 - 1]) if n % 2 == 0 else klds[n // 2]
    return {"count": n, "ppl": math.exp(lp), "ppl_base": math.exp(lb),
            "ln_ppl_ratio": lp - lb, "ln_ppl_ratio_unc": math.sqrt(max(0.0, lpu * lpu + lbu * lbu - 2 * cov)),
            "kld_mean": kld, "kld_unc": kldu, "kld_median": med, "kld_p99": pct(klds, 0.99), "kld_max": klds[-1],
            "rms_p_diff": math.sqrt(mse), "same_top_p": same}


def live(minfer, p):
    """Live comparison on a generated tiny model; returns the process exit code."""
    here = os.path.dirname(os.path.abspath(__file__))
    text_path = os.path.join(here, "text.txt")
    text = open(text_path, encoding="utf-8").read()
    n_ctx, n_chunk = 64, 4
    failures = []

    def check(what, got, want, tol):
        ok = abs(got - want) <= tol
        print(f"{what}: minfer {got:.6g} llama.cpp {want:.6g} diff {got - want:.3g} (tolerance {tol})")
        if not ok:
            failures.append(what)

    def minfer_json(*args):
        out = subprocess.run([minfer, "perplexity", *args, "-t", "1", "-o", "json"], check=True,
                             capture_output=True, text=True)
        return json.loads(out.stdout)

    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for kind in ("f32", "q8_0"):
            models[kind] = os.path.join(tmp, f"live-{kind}.gguf")
            subprocess.run([minfer, "make-model", models[kind], "--preset", "tiny-qwen3", "--type", kind, "--seed",
                            "25"], check=True, capture_output=True)
        tokens = peer_tokenize(p, models["f32"], text)
        base_rows = scored_rows(p, models["f32"], tokens, n_chunk, tmp, n_ctx)
        q_rows = scored_rows(p, models["q8_0"], tokens, n_chunk, tmp, n_ctx)
        base_kld = os.path.join(tmp, "base.kld")
        # -b n_ctx: one chunk per forward, like the peer's one-batch evaluation of each chunk.
        got = minfer_json(models["f32"], "-f", text_path, "-c", str(n_ctx), "--chunks", str(n_chunk), "-b",
                          str(n_ctx), "--kl-divergence-base", base_kld)
        want, _ = ppl_estimate([-row[tok] for chunk in base_rows for row, tok in chunk])
        # Tolerances: the logits tolerances of tests/parity/perplexity_parity_test.cpp (0.05 f32, 0.5 quantized).
        check("ln PPL f32", math.log(got["ppl"]), math.log(want), 0.05)
        k = minfer_json(models["q8_0"], "-f", text_path, "--kl-divergence-base", base_kld, "--kl-divergence")
        ref = kld_stats(base_rows, q_rows)
        st = k["statistics"]
        check("ln PPL q8_0", math.log(st["ppl"]["value"]), math.log(ref["ppl"]), 0.5)
        check("mean KLD q8_0 vs f32", st["kld"]["mean"], ref["kld_mean"], 0.55)
        check("same top p", st["same_top_p"]["value"], ref["same_top_p"], 0.05)
    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    print("PASS: minfer perplexity equals llama.cpp's (live peer)")
    return 0


def main():
    if sys.argv[1] == "--live":
        sys.exit(live(sys.argv[2], sys.argv[3]))
    p = sys.argv[1]
    fixtures = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(p), "..", "fixtures")
    here = os.path.dirname(os.path.abspath(__file__))
    text = open(os.path.join(here, "text.txt"), encoding="utf-8").read()
    info = json.loads(subprocess.run(["node", p, "info", "-o", "json"], check=True, capture_output=True,
                                     text=True).stdout)
    refs = {"generator": "tests/parity/perplexity/make_refs.py", "text": "tests/parity/perplexity/text.txt",
            "n_ctx": N_CTX, "base": BASE,
            "peer": {k: info.get(k) for k in ("peer", "llama_cpp_release", "ggml_version", "build_commit",
                                               "cpu_variant")},
            "models": []}
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            model = os.path.join(fixtures, "models", name + ".gguf")
            tokens = peer_tokenize(p, model, text)
            n_chunk = len(tokens) // N_CTX
            assert len(tokens) >= 2 * N_CTX
            rows[name] = scored_rows(p, model, tokens, n_chunk, tmp)
            nlls, running, acc = [], [], []
            for chunk in rows[name]:
                for row, tok in chunk:
                    nlls.append(-row[tok])
                running.append(math.exp(sum(nlls) / len(nlls)))
            ppl, unc = ppl_estimate(nlls)
            entry = {"model": name, "tokens": tokens, "n_chunk": n_chunk, "ppl": ppl, "ppl_uncertainty": unc,
                     "running_ppl": running, "nll": [float(f"{x:.6g}") for x in nlls]}
            if name in COMPARED:
                entry["kld_vs_base"] = kld_stats(rows[BASE], rows[name])
            refs["models"].append(entry)
            print(f"{name}: PPL {ppl:.4f} +/- {unc:.5f}" +
                  (f", KLD {entry['kld_vs_base']['kld_mean']:.6f}" if "kld_vs_base" in entry else ""),
                  file=sys.stderr)
    with open(os.path.join(here, "refs.json"), "w") as f:
        json.dump(refs, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
