#!/usr/bin/env python3
"""
Writes the sampler fixture of test/parity/samplers.test.ts:

  test/fixtures/reference/samplers.json

For a closed-form velocity "model" v(x, σ) = a·x + b·tanh(x) + σ·c + d (fixed seeded tensors a, b, c, d; no DiT) and a
fixed initial noise, it stores the full float64 trajectory [x₀, x₁, …, x_N] of

  * UniPC-2 bh2 (samplers_reference.FlowUniPCMultistep) for steps 4, 5, 10, 20 × shift 1, 3 on omnirx's schedule
    (σ_max = 1), plus Wan's own schedule (σ_max = float32(0.999)) and a `disable_corrector` run;
  * DMD few-step sampling (samplers_reference.dmd_sample) for [1000, 750, 500, 250] with shift 1 and 5 (Self-Forcing's
    warp) and a 2-step list, with the re-noising ε drawn here and stored (the test replays it as omnirx's rng);
  * Euler with η re-noising (samplers_reference.euler_eta_sample) at η 1, 0.6 and 0.3, its ε drawn and stored the same
    way (drawn after DMD's, so the earlier entries keep their values).

Every input (a, b, c, d, the noise, ε) is rounded to float32 first, so omnirx's float32 arrays hold exactly the values
the reference used. `diagnostics` records the float32-vs-float64 distance of the reference itself and how far plausible
mistakes (no corrector, bh1, order 1/3, Wan's σ_max, Euler, wrong re-noising σ, …) move the trajectories. Run with the
system interpreter that has torch + numpy:

  /usr/bin/python3 tools/reference/make_sampler_fixtures.py [--out PATH]

Deterministic: the same sources give a byte-identical file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, List

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import samplers_reference as ref  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEED = 20260317
SHAPE = (2, 3, 4)

UNIPC_CONFIGS: List[Dict] = [
    *({"name": f"unipc_steps{n}_shift{s}", "steps": n, "shift": float(s), "sigmaMax": 1.0, "disableCorrector": []} for s in (1, 3) for n in (4, 5, 10, 20)),
    {"name": "unipc_steps10_shift3_wan_sigma_max", "steps": 10, "shift": 3.0, "sigmaMax": ref.WAN_SIGMA_MAX, "disableCorrector": []},
    {"name": "unipc_steps10_shift3_disable_corrector", "steps": 10, "shift": 3.0, "sigmaMax": 1.0, "disableCorrector": [0, 3, 4]},
]
DMD_CONFIGS: List[Dict] = [
    {"name": "dmd_default_shift1", "timesteps": list(ref.DEFAULT_DMD_TIMESTEPS), "shift": 1.0},
    {"name": "dmd_default_shift5", "timesteps": list(ref.DEFAULT_DMD_TIMESTEPS), "shift": 5.0},
    {"name": "dmd_2step_shift3", "timesteps": [1000, 500], "shift": 3.0},
]
ETA_CONFIGS: List[Dict] = [
    {"name": "euler_eta1_steps4_shift3", "steps": 4, "shift": 3.0, "eta": 1.0},
    {"name": "euler_eta0.6_steps5_shift1", "steps": 5, "shift": 1.0, "eta": 0.6},
    {"name": "euler_eta0.3_steps10_shift3", "steps": 10, "shift": 3.0, "eta": 0.3},
]


def f32(a: np.ndarray) -> np.ndarray:
    """Rounds to float32 and returns float64 holding exactly those values."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def flat(t: torch.Tensor) -> List[float]:
    return [float(v) for v in t.detach().double().reshape(-1).tolist()]


def unipc_kwargs(cfg: Dict) -> Dict:
    return {"sigma_max": cfg["sigmaMax"], "disable_corrector": cfg["disableCorrector"]}


def to_json(obj, indent: int = 0) -> str:
    """JSON with one line per list of numbers (one trajectory state per line), sorted keys."""
    pad = "  " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad}  {json.dumps(k)}: {to_json(obj[k], indent + 1)}' for k in sorted(obj)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and all(isinstance(v, list) or isinstance(v, dict) for v in obj):
        return "[\n" + ",\n".join(f"{pad}  {to_json(v, indent + 1)}" for v in obj) + "\n" + pad + "]"
    if isinstance(obj, float) and not math.isfinite(obj):
        return json.dumps(str(obj))
    return json.dumps(obj)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "test", "fixtures", "reference", "samplers.json"))
    args = parser.parse_args()

    torch.set_num_threads(1)
    g = np.random.default_rng(SEED)
    n = int(np.prod(SHAPE))
    consts = {
        "a": f32(g.uniform(-0.6, 0.6, n)),
        "b": f32(g.uniform(-0.5, 0.5, n)),
        "c": f32(g.standard_normal(n) * 0.5),
        "d": f32(g.standard_normal(n) * 0.5),
    }
    noise = f32(g.standard_normal(n))

    def model_of(dtype: torch.dtype):
        t = {k: torch.tensor(v, dtype=dtype).reshape(SHAPE) for k, v in consts.items()}
        return ref.closed_form_velocity(t["a"], t["b"], t["c"], t["d"])

    model64, model32 = model_of(torch.float64), model_of(torch.float32)
    noise64 = torch.tensor(noise, dtype=torch.float64).reshape(SHAPE)
    noise32 = noise64.float()

    meta: Dict = {
        "generator": "tools/reference/make_sampler_fixtures.py (reference: tools/reference/samplers_reference.py)",
        "shape": list(SHAPE),
        "model": {"formula": "v(x, sigma) = a*x + b*tanh(x) + sigma*c + d (elementwise)", **{k: v.tolist() for k, v in consts.items()}},
        "noise": noise.tolist(),
        "unipc": [],
        "dmd": [],
        "euler_eta": [],
        "diagnostics": {"float32_vs_float64": {}, "sensitivity": {}, "sigma1_limit": {}},
    }
    diag = meta["diagnostics"]
    sens = diag["sensitivity"]

    # ---------------------------------------------------------------------------------------------------- UniPC
    for cfg in UNIPC_CONFIGS:
        sigmas = ref.unipc_sigmas(cfg["steps"], cfg["shift"], cfg["sigmaMax"])
        traj = ref.unipc_sample(model64, noise64, cfg["steps"], cfg["shift"], **unipc_kwargs(cfg))
        assert all(bool(torch.isfinite(x).all()) for x in traj), cfg["name"]
        traj32 = ref.unipc_sample(model32, noise32, cfg["steps"], cfg["shift"], **unipc_kwargs(cfg))
        diag["float32_vs_float64"][cfg["name"]] = ref.max_traj_rel_err(traj32, traj)
        meta["unipc"].append({**cfg, "sigmas": sigmas.tolist(), "trajectory": [flat(x) for x in traj]})

        if cfg["disableCorrector"]:
            continue
        steps, shift = cfg["steps"], cfg["shift"]
        base = unipc_kwargs(cfg)
        variants = {
            "no_corrector": dict(base, disable_corrector=list(range(steps))),
            "order1": dict(base, solver_order=1),
        }
        if steps >= 5:  # with 4 steps, warm-up + lower_order_final leave no room for order 3
            variants["order3"] = dict(base, solver_order=3)
        if cfg["sigmaMax"] == 1.0:
            variants["wan_sigma_max_0.999"] = dict(base, sigma_max=ref.WAN_SIGMA_MAX)
        else:
            variants["bh1"] = dict(base, solver_type="bh1")  # bh1 has B(h) = −h → ∞ at σ₀ = 1, so only here
            variants["sigma_max_1"] = dict(base, sigma_max=1.0)
        out = {}
        for name, kw in variants.items():
            out[name] = ref.max_traj_rel_err(ref.unipc_sample(model64, noise64, steps, shift, **kw), traj)
        # flow-matching Euler on the same schedule
        x = noise64.clone()
        euler = [x.clone()]
        for i in range(steps):
            x = x + (float(sigmas[i + 1]) - float(sigmas[i])) * model64(x, float(sigmas[i]))
            euler.append(x.clone())
        out["euler"] = ref.max_traj_rel_err(euler, traj)
        sens[cfg["name"]] = out
        if cfg["sigmaMax"] == 1.0:
            # σ₀ = 1 (λ₀ = −inf): upstream's plain linalg.solve gives NaN; the limit is approached like 1/|λ₀|
            upstream = ref.unipc_sample(model64, noise64, steps, shift, inf_limit="solve")
            diag["sigma1_limit"][cfg["name"]] = {
                "upstream_linalg_solve_is_finite": all(bool(torch.isfinite(x).all()) for x in upstream),
                **{f"sigma_max_1-{e:g}_vs_limit": ref.max_traj_rel_err(ref.unipc_sample(model64, noise64, steps, shift, sigma_max=1 - e), traj) for e in (1e-3, 1e-9, 1e-15)},
            }

    # ------------------------------------------------------------------------------------------------------ DMD
    for cfg in DMD_CONFIGS:
        k = len(cfg["timesteps"])
        eps = [f32(g.standard_normal(n)) for _ in range(k - 1)]
        sigmas = ref.dmd_sigmas(cfg["timesteps"], cfg["shift"])
        eps64 = [torch.tensor(e, dtype=torch.float64).reshape(SHAPE) for e in eps]
        traj = ref.dmd_sample(model64, noise64, cfg["timesteps"], cfg["shift"], eps64)
        traj32 = ref.dmd_sample(model32, noise32, cfg["timesteps"], cfg["shift"], [e.float() for e in eps64])
        diag["float32_vs_float64"][cfg["name"]] = ref.max_traj_rel_err(traj32, traj)
        meta["dmd"].append({**cfg, "sigmas": sigmas.tolist(), "renoise": [e.tolist() for e in eps], "trajectory": [flat(x) for x in traj]})

        out = {}
        # re-noise with the current σ instead of the next one
        x = noise64.clone()
        wrong = [x.clone()]
        for i, s in enumerate(sigmas):
            x0 = x - float(s) * model64(x, float(s))
            x = (1 - float(s)) * x0 + float(s) * eps64[i] if i < k - 1 else x0
            wrong.append(x.clone())
        out["renoise_with_current_sigma"] = ref.max_traj_rel_err(wrong, traj)
        # deterministic Euler between the listed sigmas instead of x0 + re-noising
        x = noise64.clone()
        euler = [x.clone()]
        for i, s in enumerate(sigmas):
            nxt = float(sigmas[i + 1]) if i < k - 1 else 0.0
            x = x + (nxt - float(s)) * model64(x, float(s))
            euler.append(x.clone())
        out["euler_instead_of_renoise"] = ref.max_traj_rel_err(euler, traj)
        if cfg["shift"] != 1.0:
            other = ref.dmd_sample(model64, noise64, cfg["timesteps"], 1.0, eps64)
            out["shift_ignored"] = ref.max_traj_rel_err(other, traj)
        sens[cfg["name"]] = out

    # ------------------------------------------------------------------------------------------- Euler with η
    for cfg in ETA_CONFIGS:
        steps, shift, eta = cfg["steps"], cfg["shift"], cfg["eta"]
        eps = [f32(g.standard_normal(n)) for _ in range(steps - 1)]
        eps64 = [torch.tensor(e, dtype=torch.float64).reshape(SHAPE) for e in eps]
        sigmas = ref.unipc_sigmas(steps, shift)
        traj = ref.euler_eta_sample(model64, noise64, steps, shift, eta, eps64)
        traj32 = ref.euler_eta_sample(model32, noise32, steps, shift, eta, [e.float() for e in eps64])
        diag["float32_vs_float64"][cfg["name"]] = ref.max_traj_rel_err(traj32, traj)
        meta["euler_eta"].append({**cfg, "sigmas": sigmas.tolist(), "renoise": [e.tolist() for e in eps], "trajectory": [flat(x) for x in traj]})
        zeros = [torch.zeros_like(e) for e in eps64]
        sens[cfg["name"]] = {
            "eta_ignored": ref.max_traj_rel_err(ref.euler_eta_sample(model64, noise64, steps, shift, 0.0, zeros), traj),
            "other_eta": ref.max_traj_rel_err(ref.euler_eta_sample(model64, noise64, steps, shift, eta / 2, eps64), traj),
            "renoise_shifted_one_step": ref.max_traj_rel_err(ref.euler_eta_sample(model64, noise64, steps, shift, eta, eps64[1:] + eps64[:1]), traj),
        }

    # Self-Forcing's warp_denoising_step (float32 table lookup) vs the closed-form shift
    warp = ref.self_forcing_warp(ref.DEFAULT_DMD_TIMESTEPS, 5.0)
    diag["self_forcing_warp_vs_shift5_max_abs"] = float(np.abs(warp - ref.dmd_sigmas(ref.DEFAULT_DMD_TIMESTEPS, 5.0)).max())
    diag["wan_sigma_max"] = ref.WAN_SIGMA_MAX

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(to_json(meta) + "\n")
    print(f"wrote {os.path.relpath(args.out, ROOT)} ({os.path.getsize(args.out)} bytes)")
    print("float32 vs float64 (max rel over states):", max(diag["float32_vs_float64"].values()))
    smallest = min((v, f"{c}.{k}") for c, d in sens.items() for k, v in d.items())
    print("smallest sensitivity:", smallest)


if __name__ == "__main__":
    main()
