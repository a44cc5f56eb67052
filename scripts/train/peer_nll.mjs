// llama.cpp's per-token NLL over n_ctx chunks, with llama-perplexity's scoring, in one process.
//
// The peer (../shared/peer/llamacpp-peer.mjs `logits --all`) starts node, llama.cpp and the model once per
// chunk and writes every position's full log-softmax: about 7 s a chunk, 20+ minutes a quantization type
// on the 184 chunks of the held-out text. This driver loads node-llama-cpp (the peer's installation and
// settings: prebuilt CPU binaries, no download, f16 KV cache, flash attention auto, one batch of up to 512)
// and the model once, and for each chunk evaluates it alone from an empty sequence, the way the peer's
// logits command does (controlledEvaluate, probabilities from the greedy chain = softmax(logits)), keeping
// only -log p(next token) at positions n_ctx/2 .. n_ctx-2, as llama-perplexity scores them.
// quality.py checks that it agrees with the one-process-per-chunk peer on the F16 model.
//
//   node scripts/train/peer_nll.mjs MODEL.gguf TOKENS.json N_CTX [THREADS]   -> JSON array of NLLs on stdout
import fs from "node:fs";
import path from "node:path";

import { loadPeerLlama } from "../peer_llama.mjs";

const [modelPath, tokensPath, nCtxArg, threadsArg] = process.argv.slice(2);
if (!modelPath || !tokensPath || !nCtxArg) {
    process.stderr.write("usage: peer_nll.mjs MODEL.gguf TOKENS.json N_CTX [THREADS]\n");
    process.exit(2);
}
const nCtx = Number(nCtxArg), threads = Number(threadsArg ?? 1);
const tokens = JSON.parse(fs.readFileSync(tokensPath, "utf8"));
const nChunk = Math.floor(tokens.length / nCtx);
if (!(nCtx >= 4) || nChunk < 1) {
    process.stderr.write(`peer_nll: need at least one chunk of ${nCtxArg} tokens, have ${tokens.length}\n`);
    process.exit(2);
}

const { llama } = await loadPeerLlama({ threads });
const model = await llama.loadModel({ modelPath: path.resolve(modelPath), gpuLayers: 0, useMmap: true });
const context = await model.createContext({ contextSize: nCtx + 1, batchSize: Math.min(nCtx, 512), sequences: 1,
    flashAttention: "auto", threads: { ideal: threads, min: threads } });
const seq = context.getSequence({ checkpoints: { interval: false } });

const want = { generateNext: { probabilities: true, token: true, options: { temperature: 0 } } };
const first = nCtx / 2 | 0;
const nll = [];
for (let c = 0; c < nChunk; ++c) {
    const chunk = tokens.slice(c * nCtx, (c + 1) * nCtx);
    await seq.clearHistory();  // each chunk alone, from an empty cache
    const out = await seq.controlledEvaluate(chunk.map((t, i) => (i >= first && i < nCtx - 1 ? [t, want] : t)));
    for (let j = first; j < nCtx - 1; ++j) {
        const p = out[j]?.next?.probabilities?.get(chunk[j + 1]);
        if (!(p > 0)) throw new Error(`chunk ${c} position ${j}: no probability for token ${chunk[j + 1]}`);
        nll.push(-Math.log(p));
    }
    if ((c + 1) % 20 === 0) process.stderr.write(`peer_nll: ${c + 1}/${nChunk} chunks\n`);
}
process.stdout.write(JSON.stringify(nll) + "\n");
await context.dispose(); await model.dispose(); await llama.dispose();
