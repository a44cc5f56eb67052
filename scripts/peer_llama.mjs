// node-llama-cpp from the peer's installation (../shared/peer/install.sh puts it in LLAMACPP_PEER_HOME,
// default ~/.cache/llamacpp-peer), set up as the peer sets it up: prebuilt CPU binaries only, never a
// download or a source build. Shared by the scripts that call llama.cpp directly rather than through
// llamacpp-peer.mjs (peer_nll.mjs, the tokenizer vectors and the tokenizer speed bench).
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

export async function loadPeerLlama({ threads } = {}) {
    const home = process.env.LLAMACPP_PEER_HOME ||
        path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache"), "llamacpp-peer");
    process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
    process.env.NODE_LLAMA_CPP_GPU = "false";
    const lib = await import(pathToFileURL(path.join(home, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
    const llama = await lib.getLlama({ gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
        progressLogs: false, logLevel: lib.LlamaLogLevel.error, ...(threads ? { maxThreads: threads } : {}) });
    return { lib, llama, home };
}
