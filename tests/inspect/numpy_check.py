"""Loads every .npy file of a MINFER_DUMP_DIR dump with numpy and checks it against the dump's index.json
(shape, dtype, statistics) and, for one node, against raw float32 values the engine returned.
usage: numpy_check.py DUMP_DIR NODE_ID EXPECTED.f32   (exit 0: all agree)"""
import json
import os
import sys

import numpy as np

dump, node_id, expected_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
root = json.load(open(os.path.join(dump, "index.json")))
checked = 0
found = False
for step in root["steps"]:
    step_dir = os.path.join(dump, step["dir"])
    index = json.load(open(os.path.join(step_dir, "index.json")))
    for node in index["nodes"]:
        a = np.load(os.path.join(step_dir, node["file"]))
        assert list(a.shape) == node["shape"], (node["name"], a.shape, node["shape"])
        assert a.dtype == {"f32": np.float32, "i32": np.int32}[node["dtype"]], (node["name"], a.dtype)
        finite = a[np.isfinite(a)].astype(np.float64)
        s = node["stats"]
        assert int(np.isnan(a).sum()) == s["nan"] if a.dtype == np.float32 else True
        if finite.size:
            assert np.isclose(finite.min(), s["min"]) and np.isclose(finite.max(), s["max"]), node["name"]
            assert np.isclose(finite.mean(), s["mean"], atol=1e-6), (node["name"], finite.mean(), s["mean"])
            assert np.isclose(finite.std(), s["std"], atol=1e-6), (node["name"], finite.std(), s["std"])
        checked += 1
        if step["step"] == 0 and node["id"] == node_id:
            expected = np.fromfile(expected_path, dtype=np.float32)
            assert a.size == expected.size, (a.size, expected.size)
            assert np.array_equal(a.reshape(-1), expected), "dumped logits differ from the engine's"
            found = True
assert found, f"node {node_id} is not in step 0 of the dump"
print(f"numpy_check: {checked} arrays agree with index.json; node {node_id} equals the engine's values")
