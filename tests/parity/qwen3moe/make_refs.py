#!/usr/bin/env python3
"""Writes tests/parity/qwen3moe/refs.json: llama.cpp's (../shared/peer) log-softmax and greedy tokens on tiny
random-weight `qwen3moe` models (8 experts, 2 per token) that `minfer make-model` generates deterministically
(preset, type, seed).

    python3 tests/parity/qwen3moe/make_refs.py build/release/src/cli/minfer ../shared/peer/llamacpp-peer.mjs

What is recorded per model and prompt: tests/parity/peer_refs.py. The test
(tests/parity/qwen3moe_parity_test.cpp) regenerates each model in-test, checks its FNV-1a hash equals the
recorded one (a changed generator makes the fixture stale, loudly), and compares.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import peer_refs  # noqa: E402

CASES = [  # (preset, type, seed)
    ("tiny-qwen3moe", "f32", 7),
    ("tiny-qwen3moe", "q8_0", 7),
    ("tiny-qwen3moe", "q4_0", 7),
    ("tiny-qwen3moe", "q4_K_M", 5),  # see README.md for the seed
]
PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nHello, world!<|im_end|>\n<|im_start|>assistant\n",
    "  int main() { return 0; }",
]

if __name__ == "__main__":
    peer_refs.write_synthetic_family_refs("qwen3moe", CASES, PROMPTS, 16, sys.argv[1], sys.argv[2])
