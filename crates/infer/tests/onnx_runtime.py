"""Run an exported SignFlow ONNX model in onnxruntime, as the tests do.

usage: onnx_runtime.py MODEL.onnx IN_DIR OUT_DIR

Checks the file with onnx's checker (full check, shape inference included), feeds every graph
input from IN_DIR/<input name>.npy and writes every output to OUT_DIR/<output name>.npy as f32.
"""
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort

model, src, dst = map(pathlib.Path, sys.argv[1:4])
onnx.checker.check_model(onnx.load(str(model)), full_check=True)
session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
feeds = {}
for i in session.get_inputs():
    array = np.load(src / f"{i.name}.npy")
    feeds[i.name] = array.astype(np.int64 if i.type == "tensor(int64)" else np.float32)
for output, value in zip(session.get_outputs(), session.run(None, feeds)):
    np.save(dst / f"{output.name}.npy", value.astype(np.float32))
print(f"onnxruntime {ort.__version__}: {model.name} ran on {len(feeds)} inputs")
