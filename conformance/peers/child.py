"""The child process that runs a batch of problems through one peer library on one path.

    python -m lowp.conformance.peers.child JOB.pkl RESULT.pkl

The parent sets the path's environment (FBGEMM_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA) before this interpreter
starts, so the library reads it when it loads. JOB.pkl holds {'library', 'path', 'ops': {op: [problem, ...]},
'session_options': {...}}; RESULT.pkl receives {'outputs': {op: [array or error string]}, 'info': {...}}: the
library version, the CPU capability it reports, what a probe of the path computed, and for oneDNN the
implementations its verbose mode named. This module imports no lowp model: it only runs the library.
"""
from __future__ import annotations

import os
import pickle
import re
import sys
import tempfile
import traceback

import numpy as np


class _CaptureFd1:
    """Capture what C code writes to file descriptor 1 (oneDNN's verbose lines) into a string."""

    def __enter__(self):
        sys.stdout.flush()
        self.tmp = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(1)
        os.dup2(self.tmp.fileno(), 1)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)
        self.tmp.seek(0)
        self.text = self.tmp.read().decode(errors="replace")
        self.tmp.close()


# ---------------------------------------------------------------------------------------------------------------
# PyTorch

def _torch_setup(engine):
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(1)
    torch.backends.quantized.engine = engine
    return torch


def _torch_weight(torch, p):
    W = torch.from_numpy(np.ascontiguousarray(p["W"]))
    if p["per_channel"]:
        return torch._make_per_channel_quantized_tensor(W, torch.from_numpy(np.asarray(p["w_scale"], np.float64)),
                                                        torch.from_numpy(np.asarray(p["w_zp"], np.int64)), 0)
    return torch._make_per_tensor_quantized_tensor(W, float(p["w_scale"][0]), int(p["w_zp"][0]))


def _torch_prepack(torch, p):
    bias = None if p["bias"] is None else torch.from_numpy(np.ascontiguousarray(p["bias"]))
    return torch.ops.quantized.linear_prepack(_torch_weight(torch, p), bias)


def torch_linear(torch, p):
    packed = _torch_prepack(torch, p)
    Aq = torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.ascontiguousarray(p["A"])), p["x_scale"],
                                                 p["x_zp"])
    op = torch.ops.quantized.linear_relu if p["relu"] else torch.ops.quantized.linear
    return op(Aq, packed, p["y_scale"], p["y_zp"]).int_repr().numpy().copy()


def torch_linear_dynamic(torch, p):
    packed = _torch_prepack(torch, p)          # a fresh prepack per call: see docs/findings.md (onednn)
    op = torch.ops.quantized.linear_relu_dynamic if p["relu"] else torch.ops.quantized.linear_dynamic
    return op(torch.from_numpy(np.ascontiguousarray(p["X"])), packed, p["reduce_range"]).numpy().copy()


def _torch_probe(torch, engine):
    """seed 002's pair: A = [255, 255], W = [127, 127], scales 1, y_scale 256: 253 when the sum is exact (64770),
    128 when VPMADDUBSW saturates it (32767)."""
    p = {"A": np.array([[255, 255]], np.uint8), "W": np.array([[127, 127]], np.int8), "x_scale": 1.0, "x_zp": 0,
         "w_scale": np.array([1.0]), "w_zp": np.array([0]), "per_channel": False, "bias": None, "y_scale": 256.0,
         "y_zp": 0, "relu": False}
    got = int(torch_linear(torch, p)[0, 0])
    return {253: "exact (64770)", 128: "saturating (32767)"}.get(got, f"unexpected code {got}")


def run_torch(job):
    engine = job["engine"]
    torch = _torch_setup(engine)
    info = {"torch": torch.__version__, "engine": torch.backends.quantized.engine,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "env": {k: os.environ.get(k) for k in ("FBGEMM_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA") if
                    os.environ.get(k)}}
    info["probe"] = _torch_probe(torch, engine)
    impls: dict[str, set] = {}
    outputs = {}
    runners = {"linear": torch_linear, "linear_dynamic": torch_linear_dynamic}
    for op, problems in job["ops"].items():
        res = []
        for i, p in enumerate(problems):
            try:
                if engine == "onednn" and i < 3:
                    with _CaptureFd1() as cap, torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                        res.append(runners[op](torch, p))
                    for impl in re.findall(r"primitive,exec,cpu,(\w+),([^,]+),", cap.text):
                        impls.setdefault(op, set()).add(f"{impl[0]}:{impl[1]}")
                else:
                    res.append(runners[op](torch, p))
            except Exception as e:  # a library error is a result too (the parent reports it)
                res.append(f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        outputs[op] = res
    if impls:
        info["onednn_implementations"] = {op: sorted(v) for op, v in impls.items()}
        try:
            info["onednn"] = torch.backends.mkldnn.version() if hasattr(torch.backends.mkldnn, "version") else None
        except Exception:
            pass
    return {"outputs": outputs, "info": info}


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime

def _onnx_model(op, p):
    from onnx import TensorProto, helper, numpy_helper

    def tensor(name, value):
        return numpy_helper.from_array(np.asarray(value), name)

    def vi(name, dtype, shape):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)

    if op == "MatMulInteger":
        K, N = p["B"].shape
        node = helper.make_node("MatMulInteger", ["A", "B", "a_zp", "b_zp"], ["Y"])
        inits = [tensor("B", p["B"]), tensor("a_zp", p["a_zp"]), tensor("b_zp", p["b_zp"])]
        ins, outs = [vi("A", p["A"].dtype, [None, K])], [helper.make_tensor_value_info("Y", TensorProto.INT32, [None, N])]
    elif op == "QLinearMatMul":
        K, N = p["B"].shape
        node = helper.make_node("QLinearMatMul", ["A", "a_scale", "a_zp", "B", "b_scale", "b_zp", "y_scale", "y_zp"],
                                ["Y"])
        inits = [tensor("a_scale", np.float32(p["a_scale"])), tensor("a_zp", p["a_zp"]), tensor("B", p["B"]),
                 tensor("b_scale", p["b_scale"]), tensor("b_zp", p["b_zp"]), tensor("y_scale", np.float32(p["y_scale"])),
                 tensor("y_zp", p["y_zp"])]
        ins, outs = [vi("A", p["A"].dtype, [None, K])], [vi("Y", p["y_dtype"], [None, N])]
    elif op == "ConvInteger":
        node = helper.make_node("ConvInteger", ["X", "W", "x_zp", "w_zp"], ["Y"], group=p["group"],
                                strides=list(p["strides"]), dilations=list(p["dilations"]),
                                pads=[p["pads"][0], p["pads"][1], p["pads"][2], p["pads"][3]],
                                kernel_shape=list(p["W"].shape[2:]))
        inits = [tensor("W", p["W"]), tensor("x_zp", p["x_zp"]), tensor("w_zp", p["w_zp"])]
        ins = [vi("X", p["X"].dtype, list(p["X"].shape))]
        outs = [helper.make_tensor_value_info("Y", TensorProto.INT32, None)]
    else:
        raise KeyError(op)
    graph = helper.make_graph([node], op, ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", int(p.get("opset", 21)))])
    model.ir_version = 10
    return model.SerializeToString()


def run_ort(job):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    for k, v in job.get("session_options", {}).items():
        so.add_session_config_entry(k, v)
    info = {"onnxruntime": ort.__version__, "session_options": job.get("session_options", {}),
            "providers": ["CPUExecutionProvider"]}
    try:
        import onnx
        info["onnx"] = onnx.__version__
    except ImportError:
        pass
    outputs = {}
    for op, problems in job["ops"].items():
        res = []
        for p in problems:
            try:
                sess = ort.InferenceSession(_onnx_model(op, p), so, providers=["CPUExecutionProvider"])
                if op == "ConvInteger":
                    res.append(sess.run(None, {"X": p["X"]})[0])
                else:
                    y = sess.run(None, {"A": p["A"]})[0]
                    y2 = sess.run(None, {"A": np.ascontiguousarray(p["A"][:p["m2"]])})[0]
                    res.append((y, y2))
            except Exception as e:
                res.append(f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        outputs[op] = res
    info.update(_ort_probes(ort, so))
    return {"outputs": outputs, "info": info}


def _ort_probes(ort, so) -> dict:
    """seed 002's pair through MatMulInteger, A = [255, 255] (u8) times B = [127, 127] (s8): 64770 exact, 32767 when
    MLAS's u8 x s8 kernel saturates the pair. 'probe': B a graph input, which no graph rewrite can touch, so it shows
    the kernel; 'probe_constant_weights': B a constant, as in the batches, which session.x64quantprecision may
    rewrite to u8 first."""
    from onnx import TensorProto, helper, numpy_helper
    A, B = np.array([[255, 255]], np.uint8), np.array([[127], [127]], np.int8)
    out = {}
    for key, constant in (("probe", False), ("probe_constant_weights", True)):
        node = helper.make_node("MatMulInteger", ["A", "B"], ["Y"])
        ins = [helper.make_tensor_value_info("A", TensorProto.UINT8, [1, 2])]
        if not constant:
            ins.append(helper.make_tensor_value_info("B", TensorProto.INT8, [2, 1]))
        graph = helper.make_graph([node], "probe", ins, [helper.make_tensor_value_info("Y", TensorProto.INT32, [1, 1])],
                                  [numpy_helper.from_array(B, "B")] if constant else [])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        model.ir_version = 10
        try:
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            got = int(sess.run(None, {"A": A} if constant else {"A": A, "B": B})[0][0, 0])
            out[key] = {64770: "exact (64770)", 32767: "saturating (32767)"}.get(got, f"unexpected {got}")
        except Exception as e:
            out[key] = f"error: {e}"
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_path, result_path = argv
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    try:
        result = run_ort(job) if job["library"] == "onnxruntime" else run_torch(job)
    except Exception:
        result = {"fatal": traceback.format_exc()}
    with open(result_path, "wb") as f:
        pickle.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
