// minfer's /v1/embeddings against llama.cpp's embeddings (node-llama-cpp's embedding context, from the
// llamacpp-peer install) on the same GGUF and the same token ids. Env: MINFER_BASE_URL (http://host:port),
// MODEL (the GGUF the server runs), LLAMACPP_PEER_HOME (where ../shared/peer/install.sh put node_modules).
// Checks: every component within TOL of llama.cpp's (both L2-normalised, as llama-server returns them), and
// cosine similarity ranks the candidate sentences against the query in the same order on both sides.
// Exits non-zero with a message on the first mismatch.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const TOL = 2e-3;  // absolute, per component of a unit vector (6.3e-4 measured on AVX2, f32 weights, f16 KV)
const MIN_COSINE = 0.9999;

const base = process.env.MINFER_BASE_URL;
const modelPath = process.env.MODEL;
const home = process.env.LLAMACPP_PEER_HOME;

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

async function post(route, body) {
  const r = await fetch(base + route, { method: "POST", headers: { "content-type": "application/json" },
                                        body: JSON.stringify(body) });
  const j = await r.json();
  if (r.status !== 200) fail(`${route}: ${r.status} ${JSON.stringify(j)}`);
  return j;
}

function normalize(v) {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return v.map((x) => (n > 0 ? x / n : 0));
}
const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);

const query = "How do I bake sourdough bread at home?";
const candidates = [
  "Sourdough needs an active starter, flour, water and salt, and a long proof.",
  "The stock market closed higher on Tuesday after the rate decision.",
  "Preheat the oven with a Dutch oven inside before baking the loaf.",
  "Penguins live almost exclusively in the southern hemisphere.",
  "A compiler translates source code into machine instructions.",
];
const texts = [query, ...candidates];
const inputs = [];
for (const t of texts) inputs.push((await post("/tokenize", { content: t })).tokens);
// A few fixed token-id inputs too (a single token, a repeated one, a longer run).
inputs.push([42], [7, 7, 7, 7], Array.from({ length: 60 }, (_, i) => 3 + ((i * 37) % 250)));

const ours = (await post("/v1/embeddings", { input: inputs, encoding_format: "float" })).data.map((d) => d.embedding);

const entry = path.join(home, "node_modules", "node-llama-cpp", "dist", "index.js");
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
process.env.NODE_LLAMA_CPP_GPU = "false";
const lib = await import(pathToFileURL(entry).href);
const llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                                   progressLogs: false, logLevel: lib.LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: path.resolve(modelPath), gpuLayers: 0 });
const ctx = await model.createEmbeddingContext({ contextSize: 256, threads: 1 });
const peer = [];
for (const ids of inputs) peer.push(normalize(Array.from((await ctx.getEmbeddingFor(ids)).vector)));

let worst = 0, worstCos = 1;
for (let i = 0; i < inputs.length; ++i) {
  if (ours[i].length !== peer[i].length) fail(`input ${i}: ${ours[i].length} values, llama.cpp ${peer[i].length}`);
  const d = Math.max(...ours[i].map((x, j) => Math.abs(x - peer[i][j])));
  const c = cosine(ours[i], peer[i]);
  worst = Math.max(worst, d);
  worstCos = Math.min(worstCos, c);
  if (d > TOL || c < MIN_COSINE) fail(`input ${i}: max |diff| ${d}, cosine ${c} (tolerance ${TOL}, ${MIN_COSINE})`);
}
// Ranking of the candidates by cosine to the query. On a random-weight model this is a consistency check
// (the order means nothing semantically), not a quality check.
const rank = (vs) => candidates.map((_, i) => i).sort((a, b) => cosine(vs[0], vs[b + 1]) - cosine(vs[0], vs[a + 1]));
const ro = rank(ours), rp = rank(peer);
if (JSON.stringify(ro) !== JSON.stringify(rp)) fail(`ranking differs: minfer ${ro}, llama.cpp ${rp}`);
fs.writeSync(1, `OK: ${inputs.length} inputs, max |diff| ${worst.toExponential(2)}, min cosine ${worstCos.toFixed(7)}, ` +
  `ranking ${ro.join(",")} equal to llama.cpp's\n`);
await ctx.dispose();
await model.dispose();
