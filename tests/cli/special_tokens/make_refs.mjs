#!/usr/bin/env node
// Records what llama.cpp feeds the model for the same text on each vocabulary kind, for
// tests/cli/special_tokens_test.cpp (run, serve, tokenize, perplexity and viz against these ids), through the
// peer's node-llama-cpp 3.21.1 (../shared/peer/install.sh installs it):
//   node tests/cli/special_tokens/make_refs.mjs OUT.json NAME=VOCAB.gguf ...
// Per vocabulary:
//   add_bos / add_eos  llama_vocab_get_add_bos / _eos (node-llama-cpp's shouldPrependBosToken / ...AppendEos...)
//   raw                llama_tokenize(text, add_special=true, parse_special=true): what llama-cli -no-cnv,
//                      llama-server's completions and /tokenize with add_special feed the model
//   plain              llama_tokenize(text, add_special=true, parse_special=false): llama-perplexity's ids
//   chat               the GGUF's chat template rendered by @huggingface/jinja (the Jinja engine node-llama-cpp
//                      ships) over `messages` with bos_token / eos_token, then llama.cpp's common/chat.cpp
//                      rule (a leading bos_token is dropped when add_bos, a trailing eos_token when add_eos:
//                      llama_tokenize adds them again), then llama_tokenize(add_special=true, parse_special=true)
// The add_special part is llama.cpp's: BOS first when add_bos, EOS last when add_eos (llama-vocab.cpp
// tokenize_impl); node-llama-cpp's tokenize is llama_tokenize(add_special=false), so it is applied here.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [outPath, ...vocabArgs] = process.argv.slice(2);
if (!outPath || vocabArgs.length === 0) {
    process.stderr.write("usage: make_refs.mjs OUT.json NAME=VOCAB.gguf ...\n");
    process.exit(2);
}
const home = process.env.LLAMACPP_PEER_HOME ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "llamacpp-peer");
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
process.env.NODE_LLAMA_CPP_GPU = "false";
const modules = path.join(home, "node_modules");
const lib = await import(pathToFileURL(path.join(modules, "node-llama-cpp", "dist", "index.js")).href);
const { Template } = await import(pathToFileURL(path.join(modules, "@huggingface", "jinja", "dist", "index.js")).href);
const version = JSON.parse(fs.readFileSync(path.join(modules, "node-llama-cpp", "package.json"), "utf8")).version;
const llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, logLevel: lib.LlamaLogLevel.error });

const text = "Hello, world! The 2 quick foxes<|im_end|><end_of_turn></s> jump.";
const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello, world!" }];
const out = { peer: `node-llama-cpp ${version}`, text, messages, vocabs: {} };
for (const arg of vocabArgs) {
    const [name, file] = arg.split("=");
    const model = await llama.loadModel({ modelPath: path.resolve(file), gpuLayers: 0, vocabOnly: true });
    const t = model.tokens;
    const addBos = t.bos != null && model._model.shouldPrependBosToken();
    const addEos = t.eos != null && model._model.shouldAppendEosToken();
    const special = (ids) => [...(addBos ? [t.bos] : []), ...ids, ...(addEos ? [t.eos] : [])];
    const tokenize = (s, parse) => Array.from(model._model.tokenize(s, parse));
    const entry = { file: path.basename(file), add_bos: addBos, add_eos: addEos, bos: t.bos ?? -1, eos: t.eos ?? -1,
        raw: special(tokenize(text, true)), plain: special(tokenize(text, false)) };
    const source = model.fileInfo?.metadata?.tokenizer?.chat_template;
    if (source) {
        const bosText = t.bosString ?? "", eosText = t.eosString ?? "";
        let rendered = new Template(source).render({ messages, add_generation_prompt: true,
            bos_token: bosText, eos_token: eosText });
        entry.rendered = rendered;
        if (addBos && bosText && rendered.startsWith(bosText)) rendered = rendered.slice(bosText.length);
        if (addEos && eosText && rendered.endsWith(eosText)) rendered = rendered.slice(0, -eosText.length);
        entry.chat = special(tokenize(rendered, true));
    }
    out.vocabs[name] = entry;
    await model.dispose();
}
fs.writeFileSync(outPath, JSON.stringify(out, null, 1) + "\n");
await llama.dispose();
