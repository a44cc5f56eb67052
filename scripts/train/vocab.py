#!/usr/bin/python3
"""Cuts the real Qwen3 tokenizer to its first N_BASE tokens plus its added (special) tokens.

Qwen's BPE ids follow merge rank: ids 0..255 are the byte symbols and id 256+r is the result of merge r,
whose two parts have smaller ids. Keeping ids < N_BASE and the first N_BASE-256 merges therefore keeps
every merge whose three tokens survive (checked below), and any BPE tokenizer (minfer's, llama.cpp's,
Hugging Face's) tokenizes text with the cut vocabulary the same way. The added tokens are renumbered from
N_BASE in their original order.

Usage: vocab.py QWEN3_TOKENIZER_DIR OUT_DIR [N_BASE]
"""
import json
import os
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    n_base = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))

    model = tok["model"]
    vocab = {piece: i for piece, i in model["vocab"].items() if i < n_base}
    if sorted(vocab.values()) != list(range(n_base)):
        sys.exit("vocab: the source ids below N_BASE are not contiguous")
    merges = model["merges"][: n_base - 256]
    for r, m in enumerate(merges):
        left, right = m if isinstance(m, list) else m.split(" ", 1)
        if left not in vocab or right not in vocab or vocab.get(left + right) != 256 + r:
            sys.exit(f"vocab: merge {r} ({left!r} {right!r}) does not map to id {256 + r}")
    model["vocab"], model["merges"] = vocab, merges

    renumber = {}
    for k, added in enumerate(tok["added_tokens"]):
        renumber[added["id"]] = n_base + k
        added["id"] = n_base + k
    cfg["added_tokens_decoder"] = {str(renumber[int(i)]): v for i, v in cfg["added_tokens_decoder"].items()}

    os.makedirs(out, exist_ok=True)
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    json.dump(cfg, open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8"), ensure_ascii=False,
              indent=1)
    specials = {a["content"]: a["id"] for a in tok["added_tokens"]}
    print(json.dumps({"n_vocab": n_base + len(tok["added_tokens"]), "endoftext": specials["<|endoftext|>"],
                      "im_end": specials["<|im_end|>"]}))


if __name__ == "__main__":
    main()
