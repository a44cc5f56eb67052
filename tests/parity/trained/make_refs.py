#!/usr/bin/env python3
"""Writes tests/parity/trained/refs.json: llama.cpp's (../shared/peer) log-softmax and greedy tokens on the
committed trained models (models/trained/, made by scripts/train/run.sh).

    python3 tests/parity/trained/make_refs.py ../shared/peer/llamacpp-peer.mjs

What is recorded per model and prompt: tests/parity/peer_refs.py (here 32 greedy tokens per prompt). The test
(tests/parity/trained_model_test.cpp) checks each committed file's FNV-1a hash against the recorded one (a
retrained model makes the fixture stale, loudly) and compares.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import peer_refs  # noqa: E402

FILES = ["tinyqwen3-8m-f16.gguf", "tinyqwen3-8m-q8_0.gguf", "tinyqwen3-draft-1m-q8_0.gguf"]
PROMPTS = [  # two raw continuations and one chat turn in the Qwen3 template's form
    "In the beginning God created",
    "And the LORD said unto Moses,",
    "<|im_start|>user\nQuote a verse from Psalms.<|im_end|>\n<|im_start|>assistant\n",
]


def main():
    p = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    models = os.path.join(here, "..", "..", "..", "models", "trained")
    refs = {"generator": "tests/parity/trained/make_refs.py", "peer": peer_refs.peer_info(p), "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name in FILES:
            path = os.path.join(models, name)
            h, size = peer_refs.fnv1a64(path)
            entry = {"file": f"models/trained/{name}", "fnv1a64": h, "bytes": size,
                     **peer_refs.record_model(p, path, PROMPTS, 32, tmp)}
            print(f"{name}: floor {entry['floor_batch_vs_tokenwise']:.3g}", file=sys.stderr)
            refs["models"].append(entry)
    peer_refs.write_refs(os.path.join(here, "refs.json"), refs)


if __name__ == "__main__":
    main()
