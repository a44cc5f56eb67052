#!/usr/bin/env python3
"""Writes tests/parity/quantize_families/refs.json: what llama-quantize writes for tiny random-weight f32
models of every family minfer runs beyond Qwen dense (`llama`, `gemma3`, `qwen3moe`), tensor for tensor.

    /usr/bin/python3 tests/parity/quantize_families/make_refs.py build/release/src/cli/minfer

llama-quantize itself is not installed; its whole work is one library call, `llama_model_quantize`, which
the peer's prebuilt libllama exports (../shared/peer, node-llama-cpp 3.21.1, the same llama.cpp build the
logit references come from). This script calls it through ctypes with llama-quantize's default parameters
(`llama_model_quantize_default_params()`), setting only the thread count and the file type, as
`llama-quantize IN OUT TYPE 2` does. Each f32 model is made by `minfer make-model` from (preset, seed);
the test (tests/parity/quantize_families_test.cpp) makes it again in-test, checks its FNV-1a hash, runs
`minfer quantize`'s library call and compares every tensor's type and sha256 with what is recorded here.

Recorded per output file: the sha256 and size of the whole file, general.file_type,
general.quantization_version, the metadata keys in file order, and per tensor (in llama-quantize's file
order) name, type and sha256 of the data bytes.
"""
import ctypes
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import peer_refs  # noqa: E402

PEER_HOME = os.environ.get("LLAMACPP_PEER_HOME", os.path.expanduser("~/.cache/llamacpp-peer"))
BINS = os.path.join(PEER_HOME, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64")

MODELS = [  # (preset, seed): what each exercises is in README.md
    ("tiny-llama", 7),
    ("tiny-llama-kquant", 7),
    ("tiny-gemma3", 7),
    ("tiny-gemma3-softcap", 7),
    ("tiny-qwen3moe", 7),
]
# minfer quantize --type name -> llama_ftype (llama.h)
FTYPES = {
    "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9,
    "q4_K_S": 14, "q4_K_M": 15, "q5_K_S": 16, "q5_K_M": 17, "q6_K": 18,
}
# ggml_type id -> (name as minfer spells it, block size, bytes per block)
GGML_TYPES = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20), 6: ("q5_0", 32, 22),
    7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 10: ("q2_K", 256, 84), 11: ("q3_K", 256, 110),
    12: ("q4_K", 256, 144), 13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210), 30: ("bf16", 1, 2),
}


class QuantizeParams(ctypes.Structure):
    """llama_model_quantize_params of this build: llama.h's fields (nthread, ftype, output_tensor_type,
    token_embedding_type, six bools, four pointers: 56 bytes), and 8 more bytes that this build's
    llama_model_quantize_default_params also writes (its disassembly stores 64 bytes). Only nthread and
    ftype are changed; the rest keep the library's own defaults, so an unknown tail field is harmless."""
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int32),
                ("output_tensor_type", ctypes.c_int32), ("token_embedding_type", ctypes.c_int32),
                ("allow_requantize", ctypes.c_bool), ("quantize_output_tensor", ctypes.c_bool),
                ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool), ("keep_split", ctypes.c_bool),
                ("dry_run", ctypes.c_bool), ("imatrix", ctypes.c_void_p), ("kv_overrides", ctypes.c_void_p),
                ("tt_overrides", ctypes.c_void_p), ("prune_layers", ctypes.c_void_p),
                ("tail", ctypes.c_uint8 * 8)]


def load_llama():
    lib = ctypes.CDLL(os.path.join(BINS, "libllama.v0.4.0.so"), mode=ctypes.RTLD_GLOBAL)
    lib.llama_backend_init.restype = None
    lib.llama_model_quantize_default_params.restype = QuantizeParams
    lib.llama_model_quantize.restype = ctypes.c_uint32
    lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(QuantizeParams)]
    lib.llama_backend_init()
    p = lib.llama_model_quantize_default_params()
    # llama-quantize's documented defaults: a wrong layout would show here first
    assert (p.nthread, p.quantize_output_tensor, p.allow_requantize, p.only_copy, p.pure) == (0, True, False,
                                                                                             False, False), p
    assert not (p.imatrix or p.kv_overrides or p.tt_overrides or p.prune_layers)
    return lib


def quantize(lib, src, dst, ftype):
    p = lib.llama_model_quantize_default_params()
    p.nthread = 2
    p.ftype = ftype
    rc = lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src}, ftype {ftype}) returned {rc}")


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.take("Q")
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s

    def value(self, t):
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in scalar:
            return self.take(scalar[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"GGUF value type {t}")


def read_gguf(path):
    """(metadata as an ordered list of (key, value type, value), tensors as (name, ggml type, ne, bytes))."""
    data = open(path, "rb").read()
    r = Reader(data)
    assert r.take("I") == 0x46554747 and r.take("I") == 3, path
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    kv = []
    for _ in range(n_kv):
        key, t = r.string(), r.take("I")
        kv.append((key, t, r.value(t)))
    infos = []
    for _ in range(n_tensors):
        name, nd = r.string(), r.take("I")
        ne = [r.take("Q") for _ in range(nd)]
        infos.append((name, r.take("I"), ne, r.take("Q")))
    align = dict((k, v) for k, _, v in kv).get("general.alignment", 32)
    base = (r.p + align - 1) // align * align
    tensors = []
    for name, t, ne, off in infos:
        _, bs, bb = GGML_TYPES[t]
        n = 1
        for x in ne:
            n *= x
        size = n // bs * bb
        tensors.append((name, t, ne, data[base + off:base + off + size]))
    return kv, tensors


def main(minfer):
    lib = load_llama()
    refs = {"generator": "tests/parity/quantize_families/make_refs.py", "peer": peer_refs.peer_info(
        os.path.join(HERE, "../../../../shared/peer/llamacpp-peer.mjs")), "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for preset, seed in MODELS:
            src = os.path.join(tmp, f"{preset}-f32.gguf")
            subprocess.run([minfer, "make-model", src, "--preset", preset, "--type", "f32", "--seed", str(seed)],
                           check=True, capture_output=True)
            h, size = peer_refs.fnv1a64(src)
            model = {"preset": preset, "seed": seed, "fnv1a64": h, "bytes": size, "outputs": {}}
            for name, ftype in FTYPES.items():
                dst = os.path.join(tmp, f"{preset}-{name}.gguf")
                quantize(lib, src, dst, ftype)
                kv, tensors = read_gguf(dst)
                meta = {k: v for k, _, v in kv}
                whole = open(dst, "rb").read()
                model["outputs"][name] = {
                    "sha256": hashlib.sha256(whole).hexdigest(), "bytes": len(whole),
                    "general.file_type": meta["general.file_type"],
                    "general.quantization_version": meta.get("general.quantization_version"),
                    "metadata_keys": [k for k, _, _ in kv],
                    "tensors": [[n, GGML_TYPES[t][0], hashlib.sha256(b).hexdigest()] for n, t, _, b in tensors],
                }
                os.remove(dst)
                print(f"{preset} {name}: {len(tensors)} tensors", file=sys.stderr)
            refs["models"].append(model)
    peer_refs.write_refs(os.path.join(HERE, "refs.json"), refs)


if __name__ == "__main__":
    main(sys.argv[1])
