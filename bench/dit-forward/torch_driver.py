"""
PyTorch side of bench/dit-forward.ts (run it through torch-env.sh, which applies FACTS.md's best setup).

Loads the project's PyTorch reference DiT (tools/reference/omnirx_reference.py, diffusers WanTransformer3DModel
parameter names) with the seeded weights the Node driver wrote, runs it on the shared inputs, writes its outputs
for the numerical check, exports the model to ONNX (opset 16) for the onnxruntime side if that file is missing,
warms up, and then serves timing requests on stdin:

    run N   → runs N forwards, answers {"times_ms": [...]} (one line, stdout)
    quit    → exits

Everything else goes to stderr. The first stdout line is {"ready": true, ...} or {"error": "..."}.
With --gemm N it only times torch.mm at N×N×N (OpenBLAS SGEMM under the same setup) and prints {"gemm_gflops": x}.

What is timed is `BenchDiT`: the reference model as written, with two changes that leave the maths alone but make
it exportable (and no slower, so the baseline is not handicapped):
  * the sinusoidal timestep features are an input (the reference computes them from a Python float, which ONNX
    tracing would freeze into a constant); both sides use the same float64-computed features, rounded to float32;
  * RoPE uses real cos/sin tables in float32 (x_even·cos − x_odd·sin, x_even·sin + x_odd·cos) instead of Wan's
    complex128 `rope_apply`; ONNX has no complex type. The tables come from the reference's own complex table.
The unmodified reference (complex128 RoPE, timestep from t) is also run once: its output is the ground truth all
three engines are compared against, and its time is reported on the ready line for information.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))

try:
    import numpy as np
    import torch

    import omnirx_reference as ref
except Exception as e:  # no torch/numpy in this Python: one JSON line the Node driver can show
    sys.stdout.write(json.dumps({"error": f"cannot import torch/numpy/omnirx_reference with {sys.executable}: {type(e).__name__}: {e}"}) + "\n")
    sys.exit(1)


def log(msg: str) -> None:
    print(f"[torch] {msg}", file=sys.stderr, flush=True)


def reply(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class RealRope:
    """Drop-in for ``ref.rope_apply``: float32 cos/sin tables per grid, built from the reference's complex table."""

    def __init__(self) -> None:
        self.tables = {}

    def __call__(self, x: torch.Tensor, grid, freqs: torch.Tensor) -> torch.Tensor:
        key = tuple(int(g) for g in grid)  # ints (shapes are traced values during ONNX export)
        if key not in self.tables:
            f = ref.rope_grid_freqs(freqs, key)  # complex128 [L, D/2]
            self.tables[key] = (f.real.float().reshape(f.shape[0], 1, -1).contiguous(), f.imag.float().reshape(f.shape[0], 1, -1).contiguous())
        cos, sin = self.tables[key]
        b, s, n, d = x.shape
        xp = x.reshape(b, s, n, d // 2, 2)
        xr, xi = xp[..., 0], xp[..., 1]
        return torch.stack([xr * cos - xi * sin, xr * sin + xi * cos], dim=-1).reshape(b, s, n, d)


class BenchDiT(torch.nn.Module):
    """The reference DiT with the timestep features as an input (see the module docstring)."""

    def __init__(self, model: ref.WanTransformer3DModel):
        super().__init__()
        self.model = model
        self._tfreq = None
        model.timestep_freqs = self._timestep_freqs  # instance attribute shadows the method

    def _timestep_freqs(self, t, mode="wan"):
        return self._tfreq

    def forward(self, latents: torch.Tensor, timestep: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        self._tfreq = timestep
        try:
            return self.model(latents, 0.0, context)
        finally:
            self._tfreq = None


def _unflatten_as_reshape(self: torch.Tensor, dim: int, sizes) -> torch.Tensor:
    """``Tensor.unflatten`` as a reshape: torch 1.13 cannot export ``aten::unflatten`` to ONNX (same result)."""
    dim = dim % self.dim()
    shape = list(self.shape)
    return self.reshape(shape[:dim] + list(sizes) + shape[dim + 1 :])


def export_onnx(bench: torch.nn.Module, args, path: str) -> None:
    import warnings

    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)  # shapes are fixed per export
    original = torch.Tensor.unflatten
    torch.Tensor.unflatten = _unflatten_as_reshape  # only while tracing; the timed eager model uses the real op
    # The complex128 RoPE table buffer would be traced as a constant (ONNX has no complex type); RealRope has already
    # cached the float32 tables for this grid, so the traced model does not read it.
    freqs = bench.model.freqs
    bench.model.freqs = torch.zeros(1)
    try:
        with torch.no_grad():
            torch.onnx.export(
                bench,
                args,
                path,
                opset_version=16,
                input_names=["latents", "timestep", "context"],
                output_names=["velocity"],
                do_constant_folding=True,
            )
    finally:
        torch.Tensor.unflatten = original
        bench.model.freqs = freqs


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    if a.shape != b.shape or not np.all(np.isfinite(a)):
        return math.inf
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--gemm", type=int, default=0, help="only time torch.mm at N×N×N (float32) and print {\"gemm_gflops\": x}")
    p.add_argument("--config", help="WanDiTConfig as JSON")
    p.add_argument("--weights")
    p.add_argument("--inputs", help="safetensors with latents [1,C,F,H,W], timestep [1,freqDim], context [1,Lt,textDim]; metadata t")
    p.add_argument("--outputs", help="where to write reference/torch outputs (safetensors)")
    p.add_argument("--onnx", default="", help="ONNX path to export to if it does not exist yet ('' = no export)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    if a.gemm:
        n = a.gemm
        x, w = torch.randn(n, n), torch.randn(n, n)
        y = torch.empty(n, n)
        for _ in range(3):
            torch.mm(x, w.t(), out=y)
        times = []
        for _ in range(15):
            t0 = time.perf_counter()
            torch.mm(x, w.t(), out=y)  # x · wᵀ, the nn.Linear layout omnirx's linear uses
            times.append(time.perf_counter() - t0)
        reply({"gemm_gflops": 2 * n**3 / sorted(times)[len(times) // 2] / 1e9, "n": n, "threads": torch.get_num_threads()})
        return
    if not (a.config and a.weights and a.inputs and a.outputs):
        p.error("--config, --weights, --inputs and --outputs are required")
    cfg = json.loads(a.config)
    info = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_capability": next((l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines() if "CPU capability usage" in l), "?"),
        "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_WAIT_POLICY", "ATEN_CPU_CAPABILITY", "LD_LIBRARY_PATH", "GLIBC_TUNABLES")},
    }
    log(f"torch {info['torch']}, {info['threads']} threads, cpu capability {info['cpu_capability']}")

    model = ref.WanTransformer3DModel(cfg)
    ref.load_module(model, a.weights)
    model.eval()
    tensors, meta = ref.read_safetensors(a.inputs)
    latents = torch.from_numpy(tensors["latents"])
    tfreq = torch.from_numpy(tensors["timestep"])
    context = torch.from_numpy(tensors["context"])
    t = float(meta["t"])
    info["timestep_features_abs_err"] = float((model.timestep_freqs(t, "wan") - tfreq).abs().max())

    with torch.inference_mode():
        # Ground truth: the reference exactly as written (complex128 RoPE, timestep features from t).
        t0 = time.perf_counter()
        reference = model(latents, t, context)
        t1 = time.perf_counter()
        reference = model(latents, t, context)
        info["reference_as_written_ms"] = (time.perf_counter() - t1) * 1e3
        info["reference_first_ms"] = (t1 - t0) * 1e3

        ref.rope_apply = RealRope()  # module global used by WanAttention.forward
        bench = BenchDiT(model).eval()
        out = bench(latents, tfreq, context)
    info["torch_vs_reference_rel_err"] = rel_err(out.numpy(), reference.numpy())
    ref.write_safetensors(a.outputs, {"reference": reference.numpy().astype(np.float32), "torch": out.numpy().astype(np.float32)})

    if a.onnx and not os.path.exists(a.onnx):
        t0 = time.perf_counter()
        tmp = a.onnx + f".{os.getpid()}.tmp"
        export_onnx(bench, (latents, tfreq, context), tmp)
        os.replace(tmp, a.onnx)
        info["onnx_export_s"] = time.perf_counter() - t0
        log(f"exported {a.onnx} in {info['onnx_export_s']:.1f} s")

    with torch.inference_mode():
        for _ in range(a.warmup):
            bench(latents, tfreq, context)

    reply({"ready": True, **info})

    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "run":
            n = int(cmd[1]) if len(cmd) > 1 else 1
            times = []
            with torch.inference_mode():
                for _ in range(n):
                    t0 = time.perf_counter()
                    bench(latents, tfreq, context)
                    times.append((time.perf_counter() - t0) * 1e3)
            reply({"times_ms": times})
        else:
            reply({"error": f"unknown command {cmd[0]!r}"})


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report setup failures as one line the Node driver can show
        import traceback

        traceback.print_exc(file=sys.stderr)
        reply({"error": f"{type(e).__name__}: {e}"})
        sys.exit(1)
