#!/usr/bin/env node
// Writes llama.cpp's ids for each string of data/NAME.inp (parse_special on: NAME.out, off:
// NAME.no-parse-special.out), through the peer's node-llama-cpp 3.21.1 (llama.cpp v0.4.0, installed by
// ../shared/peer/install.sh).
//   node tests/tokenizer/data/make_vectors.mjs VOCAB.gguf NAME
// qwen35_marks: VOCAB = the fixtures' qwen3 vocabulary with tokenizer.ggml.pre set to "qwen35" (any GGUF
// editor; the test builds the same in memory). unicode_probe: the fixtures' qwen2-vocab.gguf.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { loadPeerLlama } from "../../../scripts/peer_llama.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const { llama } = await loadPeerLlama();
const model = await llama.loadModel({ modelPath: path.resolve(process.argv[2]), gpuLayers: 0, vocabOnly: true });
const sep = "\n__ggml_vocab_test__\n";
const name = process.argv[3];
const data = fs.readFileSync(path.join(here, name + ".inp"), "utf8");
const texts = data.split(sep).slice(0, -1);
for (const [special, out] of [[true, name + ".out"], [false, name + ".no-parse-special.out"]]) {
    const lines = texts.map((t) => Array.from(model.tokenize(t, special)).map((id) => " " + id).join(""));
    fs.writeFileSync(path.join(here, out), lines.join("\n") + "\n");
}
await model.dispose();
await llama.dispose();
