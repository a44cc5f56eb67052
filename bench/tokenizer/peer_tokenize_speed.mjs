#!/usr/bin/env node
// Times llama.cpp's tokenizer (through the peer's node-llama-cpp install, ../shared/peer) on a corpus file,
// for the side-by-side numbers in docs/PERFORMANCE.md. Loads the vocabulary only.
//   node bench/tokenizer/peer_tokenize_speed.mjs MODEL.gguf CORPUS.txt [--special] [--reps N] [--ids-out FILE]
// Prints one JSON line: bytes, tokens, per-rep seconds, best and mean MB/s. --ids-out writes the ids, one per
// line, for comparing with `minfer tokenize MODEL - --ids`.
import fs from "node:fs";
import path from "node:path";

import { loadPeerLlama } from "../../scripts/peer_llama.mjs";

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const opt = (name, def) => (args.includes(name) ? args[args.indexOf(name) + 1] : def);
const [modelPath, corpusPath] = args.filter((a, i) => !a.startsWith("--") && !(i > 0 && args[i - 1].startsWith("--") && args[i - 1] !== "--special"));
if (!modelPath || !corpusPath) {
    process.stderr.write("usage: peer_tokenize_speed.mjs MODEL.gguf CORPUS.txt [--special] [--reps N] [--ids-out FILE]\n");
    process.exit(2);
}
const { llama, home } = await loadPeerLlama();
const model = await llama.loadModel({ modelPath: path.resolve(modelPath), gpuLayers: 0, vocabOnly: true });
const text = fs.readFileSync(corpusPath, "utf8");
const bytes = Buffer.byteLength(text, "utf8");
const special = flag("--special");
const reps = Number(opt("--reps", "3"));

let ids = model.tokenize(text, special);  // warm-up
const seconds = [];
for (let r = 0; r < reps; ++r) {
    const t0 = process.hrtime.bigint();
    ids = model.tokenize(text, special);
    seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
if (opt("--ids-out", null)) fs.writeFileSync(opt("--ids-out"), Array.from(ids).join("\n") + "\n");
const mbps = seconds.map((s) => bytes / s / 1e6);
process.stdout.write(JSON.stringify({
    tokenizer: "llama.cpp (node-llama-cpp " + JSON.parse(fs.readFileSync(path.join(home, "node_modules", "node-llama-cpp", "package.json"), "utf8")).version + ")",
    model: path.basename(modelPath), bytes, tokens: ids.length, special, seconds,
    best_mbps: Math.max(...mbps), mean_mbps: mbps.reduce((a, b) => a + b, 0) / mbps.length,
}) + "\n");
await model.dispose();
await llama.dispose();
