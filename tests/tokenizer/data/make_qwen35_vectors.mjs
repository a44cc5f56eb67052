#!/usr/bin/env node
// Regenerates qwen35_marks.*.out: llama.cpp's ids (node-llama-cpp 3.21.1 = llama.cpp v0.4.0, installed by
// ../shared/peer/install.sh) for each string of qwen35_marks.inp, with a copy of the fixtures' qwen3 vocabulary
// whose tokenizer.ggml.pre is "qwen35" (make it with any GGUF editor; the test builds the same in memory).
//   node tests/tokenizer/data/make_qwen35_vectors.mjs QWEN35_VOCAB.gguf
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const home = process.env.LLAMACPP_PEER_HOME ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "llamacpp-peer");
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
process.env.NODE_LLAMA_CPP_GPU = "false";
const lib = await import(pathToFileURL(path.join(home, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
const llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: lib.LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: path.resolve(process.argv[2]), gpuLayers: 0, vocabOnly: true });
const sep = "\n__ggml_vocab_test__\n";
const data = fs.readFileSync(path.join(here, "qwen35_marks.inp"), "utf8");
const texts = data.split(sep).slice(0, -1);
for (const [special, name] of [[true, "qwen35_marks.out"], [false, "qwen35_marks.no-parse-special.out"]]) {
    const lines = texts.map((t) => Array.from(model.tokenize(t, special)).map((id) => " " + id).join(""));
    fs.writeFileSync(path.join(here, name), lines.join("\n") + "\n");
}
await model.dispose();
await llama.dispose();
