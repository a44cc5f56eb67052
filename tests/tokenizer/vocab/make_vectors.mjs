#!/usr/bin/env node
// Records llama.cpp's tokenization of every corpus string for one vocab-only GGUF, through the peer's
// node-llama-cpp 3.21.1 (llama.cpp v0.4.0; ../shared/peer/install.sh installs it):
//   node tests/tokenizer/vocab/make_vectors.mjs VOCAB.gguf CORPUS.json OUT.json
// CORPUS.json: {"texts": [...]}. OUT.json: {"vocab", "peer", "items": [{"text", "ids", "ids_plain",
// "detok", "detok_plain", "detok_bos"}]} where
//   ids        = llama_tokenize(text, add_special=false, parse_special=true)
//   ids_plain  = llama_tokenize(text, add_special=false, parse_special=false)
//   detok      = llama_detokenize(ids, remove_special=false, unparse_special=true)
//   detok_plain= llama_detokenize(ids_plain, remove_special=false, unparse_special=false)
//   detok_bos  = llama_detokenize([BOS] + ids, remove_special=false, unparse_special=true)
// (node-llama-cpp's model.tokenize/detokenize call exactly these; see its AddonModel.cpp.)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [vocabPath, corpusPath, outPath] = process.argv.slice(2);
if (!outPath) {
    process.stderr.write("usage: make_vectors.mjs VOCAB.gguf CORPUS.json OUT.json\n");
    process.exit(2);
}
const home = process.env.LLAMACPP_PEER_HOME ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "llamacpp-peer");
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
process.env.NODE_LLAMA_CPP_GPU = "false";
const pkg = path.join(home, "node_modules", "node-llama-cpp");
const lib = await import(pathToFileURL(path.join(pkg, "dist", "index.js")).href);
const version = JSON.parse(fs.readFileSync(path.join(pkg, "package.json"), "utf8")).version;
const llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: lib.LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: path.resolve(vocabPath), gpuLayers: 0, vocabOnly: true });
const texts = JSON.parse(fs.readFileSync(corpusPath, "utf8")).texts;
const bos = model.tokens.bos;
const items = texts.map((text) => {
    const ids = Array.from(model._model.tokenize(text, true));
    const idsPlain = Array.from(model._model.tokenize(text, false));
    return {
        text, ids, ids_plain: idsPlain,
        detok: model._model.detokenize(Uint32Array.from(ids), true),
        detok_plain: model._model.detokenize(Uint32Array.from(idsPlain), false),
        detok_bos: bos == null ? null : model._model.detokenize(Uint32Array.from([bos, ...ids]), true),
    };
});
const out = { vocab: path.basename(vocabPath), peer: `node-llama-cpp ${version}`, bos, items };
fs.writeFileSync(outPath, JSON.stringify(out, null, 0).replace(/\},\{"text"/g, '},\n{"text"') + "\n");
await model.dispose();
await llama.dispose();
