#!/usr/bin/python3
"""Trains a Qwen3-architecture target and its draft together on the CPU (Debian's python3-torch 1.13).

Both models see the same batches, so one pass over the data trains the pair. The run is reproducible from
--seed (torch's CPU kernels are deterministic for a fixed thread count).

Writes, per model, a Hugging Face checkpoint OUT/<name>/ (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json) that `minfer convert` reads; and OUT/loss.png, OUT/train.log with the held-out
perplexity.

Usage: train.py --tokens TRAIN.u16 --heldout HELDOUT.u16 --tokenizer DIR --out DIR [--steps N] [--seed S]
"""
import argparse
import json
import math
import os
import shutil
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

# Shapes: every matrix width is a multiple of 256 so the K-quants (Q4_K ... Q6_K) apply to every tensor,
# as they do in a real model, instead of falling back to Q5_0/Q8_0.
TARGET = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
              num_key_value_heads=2, head_dim=64)
# The draft's width is below 256 (its Q8_0 file does not need the K-quants): at 128 wide its tied
# embedding is 1.05M of its 1.45M parameters.
DRAFT = dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32)
CTX = 512
ROPE_THETA = 10000.0
EPS = 1e-6


class RMSNorm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rope(x, cos, sin):
    # NEOX style (the halves rotate together), as Qwen's rotate_half and llama.cpp's qwen3 graph do.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["hidden_size"], c["head_dim"]
        self.nh, self.nkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], hd
        self.input_layernorm = RMSNorm(d)
        self.q_proj = torch.nn.Linear(d, self.nh * hd, bias=False)
        self.k_proj = torch.nn.Linear(d, self.nkv * hd, bias=False)
        self.v_proj = torch.nn.Linear(d, self.nkv * hd, bias=False)
        self.o_proj = torch.nn.Linear(self.nh * hd, d, bias=False)
        self.q_norm, self.k_norm = RMSNorm(hd), RMSNorm(hd)
        self.post_attention_layernorm = RMSNorm(d)
        f = c["intermediate_size"]
        self.gate_proj = torch.nn.Linear(d, f, bias=False)
        self.up_proj = torch.nn.Linear(d, f, bias=False)
        self.down_proj = torch.nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_norm(self.q_proj(h).view(b, t, self.nh, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(h).view(b, t, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.nkv, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, self.nh * self.hd)
        x = x + self.o_proj(y)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Qwen3(torch.nn.Module):
    def __init__(self, c, n_vocab):
        super().__init__()
        self.c = c
        self.embed_tokens = torch.nn.Embedding(n_vocab, c["hidden_size"])
        self.layers = torch.nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"])
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, c["head_dim"], 2).float() / c["head_dim"]))
        ang = torch.outer(torch.arange(CTX).float(), inv)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)
        for blk in self.layers:  # GPT-2's scaled init of the residual projections
            for p in (blk.o_proj.weight, blk.down_proj.weight):
                torch.nn.init.normal_(p, std=0.02 / math.sqrt(2 * len(self.layers)))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed_tokens(ids)
        mask = torch.full((t, t), float("-inf")).triu(1)
        cos, sin = self.cos[:t], self.sin[:t]
        for blk in self.layers:
            x = blk(x, cos, sin, mask)
        return self.norm(x) @ self.embed_tokens.weight.T  # tied output head, as Qwen3-0.6B

    def hf_state(self):
        """Tensor names as Hugging Face's Qwen3ForCausalLM stores them."""
        out = {"model.embed_tokens.weight": self.embed_tokens.weight, "model.norm.weight": self.norm.weight}
        for i, blk in enumerate(self.layers):
            p = f"model.layers.{i}."
            for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
                out[p + f"self_attn.{n}.weight"] = getattr(blk, n).weight
            for n in ("gate_proj", "up_proj", "down_proj"):
                out[p + f"mlp.{n}.weight"] = getattr(blk, n).weight
            out[p + "input_layernorm.weight"] = blk.input_layernorm.weight
            out[p + "post_attention_layernorm.weight"] = blk.post_attention_layernorm.weight
        return out


def write_safetensors(path, tensors):
    """The safetensors format by hand (Debian 12 has no python3-safetensors): a little-endian u64 header
    length, a JSON header padded with spaces to 8 bytes, then the raw F32 tensors."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def save_checkpoint(model, out_dir, tokenizer_dir, n_vocab, specials):
    os.makedirs(out_dir, exist_ok=True)
    c = model.c
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **c, "vocab_size": n_vocab,
        "max_position_embeddings": CTX, "rope_theta": ROPE_THETA, "rms_norm_eps": EPS,
        "hidden_act": "silu", "attention_bias": False, "tie_word_embeddings": True, "torch_dtype": "float32",
        "bos_token_id": specials["endoftext"], "eos_token_id": specials["im_end"],
    }
    json.dump(config, open(os.path.join(out_dir, "config.json"), "w"), indent=1)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), model.hf_state())
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, f), os.path.join(out_dir, f))


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def heldout_ppl(model, tokens, windows=None):
    """exp of the mean next-token loss over non-overlapping CTX windows of the held-out stream (the first
    `windows` of them, or all). Every position of a window is scored; `minfer perplexity` scores each
    chunk's second half, as llama-perplexity does, so its figure is lower."""
    model.eval()
    total, count = 0.0, 0
    for s in list(range(0, len(tokens) - CTX - 1, CTX))[:windows]:
        x = torch.from_numpy(tokens[s:s + CTX + 1].astype(np.int64))[None]
        loss = F.cross_entropy(model(x[:, :-1])[0], x[0, 1:], reduction="sum")
        total, count = total + loss.item(), count + CTX
    model.train()
    return math.exp(total / count)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--specials", required=True, help="vocab.py's JSON output")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-every", type=int, default=200)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    specials = json.loads(open(args.specials).read())
    n_vocab = specials["n_vocab"]
    train = np.fromfile(args.tokens, dtype="<u2")
    held = np.fromfile(args.heldout, dtype="<u2")
    models = {"target": Qwen3(TARGET, n_vocab), "draft": Qwen3(DRAFT, n_vocab)}
    opts = {k: torch.optim.AdamW(m.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
            for k, m in models.items()}
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train.log"), "w")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    say(f"train tokens {len(train)}, held-out tokens {len(held)}, vocab {n_vocab}, ctx {CTX}, "
        f"batch {args.batch}x{CTX}, steps {args.steps}, lr {args.lr}, seed {args.seed}, threads {args.threads}")
    for k, m in models.items():
        say(f"{k}: {n_params(m)} parameters {m.c}")

    gen = np.random.default_rng(args.seed)
    warmup = max(1, args.steps // 20)
    curve = {k: [] for k in models}
    t0 = time.time()
    for step in range(1, args.steps + 1):
        # Cosine decay to a tenth of the peak after a linear warm-up.
        frac = step / warmup if step <= warmup else 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / (args.steps - warmup)))
        starts = gen.integers(0, len(train) - CTX - 1, size=args.batch)
        batch = torch.from_numpy(np.stack([train[s:s + CTX + 1] for s in starts]).astype(np.int64))
        for k, m in models.items():
            for g in opts[k].param_groups:
                g["lr"] = args.lr * frac
            loss = F.cross_entropy(m(batch[:, :-1]).reshape(-1, n_vocab), batch[:, 1:].reshape(-1))
            opts[k].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opts[k].step()
            curve[k].append(loss.item())
        if step % 10 == 0:
            el = time.time() - t0
            say(f"step {step} loss target {np.mean(curve['target'][-10:]):.3f} draft {np.mean(curve['draft'][-10:]):.3f} "
                f"{step * args.batch * CTX / el:.0f} tok/s {el:.0f} s")
        if step % args.eval_every == 0 and step != args.steps:
            say(f"step {step} held-out ppl (first 16 windows) target {heldout_ppl(models['target'], held, 16):.2f} "
                f"draft {heldout_ppl(models['draft'], held, 16):.2f}")
    say(f"trained {args.steps * args.batch * CTX} tokens in {time.time() - t0:.0f} s")
    say(f"held-out ppl (all {(len(held) - 1) // CTX} windows) target {heldout_ppl(models['target'], held):.2f} "
        f"draft {heldout_ppl(models['draft'], held):.2f}")

    for k, m in models.items():
        save_checkpoint(m, os.path.join(args.out, k), args.tokenizer, n_vocab, specials)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.figure(figsize=(7, 4))
    for k, v in curve.items():
        smooth = np.convolve(v, np.ones(20) / 20, mode="valid")
        plt.plot(np.arange(len(smooth)) + 20, smooth, label=f"{k} ({n_params(models[k]) / 1e6:.1f}M)")
    plt.xlabel("step")
    plt.ylabel("training loss (nats/token, 20-step mean)")
    plt.legend()
    plt.grid(alpha=0.3)
    plt.tight_layout()
    plt.savefig(os.path.join(args.out, "loss.png"), dpi=80)


if __name__ == "__main__":
    main()
