#!/usr/bin/env python3
"""Writes tests/parity/gemma3/refs.json: llama.cpp's (../shared/peer) log-softmax and greedy tokens on tiny
random-weight `gemma3` models (7 layers: 6 sliding-window layers with a window of 8 positions, global layer
5) that `minfer make-model` generates deterministically (preset, type, seed). Every prompt is longer than
the window, so the window cuts the local layers' attention at the compared positions.

    python3 tests/parity/gemma3/make_refs.py build/release/src/cli/minfer ../shared/peer/llamacpp-peer.mjs

What is recorded per model and prompt: tests/parity/peer_refs.py. The test
(tests/parity/gemma3_parity_test.cpp) regenerates each model in-test, checks its FNV-1a hash equals the
recorded one (a changed generator makes the fixture stale, loudly), and compares.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import peer_refs  # noqa: E402

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

if __name__ == "__main__":
    peer_refs.write_synthetic_family_refs("gemma3", CASES, PROMPTS, 16, sys.argv[1], sys.argv[2])
