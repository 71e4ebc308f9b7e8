#!/usr/bin/env python3
"""
Writes the PyTorch reference fixtures of test/parity/reference.test.ts:

  test/fixtures/reference/fixtures.safetensors   inputs (seeded numpy) and reference outputs, float32
  test/fixtures/reference/fixtures.json          prompts, scalars, shapes and float64/float32 diagnostics

from the tiny model in test/fixtures/reference/model (written by tools/reference/write-tiny-model.ts; see
tools/reference/README.md). Run with the system interpreter that has torch + numpy:

  /usr/bin/python3 tools/reference/make_fixtures.py [--model-dir DIR] [--out-dir DIR]

Deterministic: the same model directory gives byte-identical fixture files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import omnirx_reference as ref  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

PROMPTS = {
    # 12-token limit: truncated (eos kept), no padding; unknown words and "è"/"!" fall back to UTF-8 bytes
    "prompt0": "A small red ball moving left in a blue room, très vite!",
    # padded: 4 real tokens (3 words + eos), 8 pads
    "prompt1": "a blue cube",
    # the negative prompt: eos only, 11 pads
    "negative": "",
}
DIT_T = 737.25  # a non-integer timestep (σ = 0.73725)
DIT_LATENT_SHAPE = (1, 4, 3, 6, 8)  # [B, C, F, h, w] → grid (3, 3, 4), 36 tokens
VAE_LATENT_SHAPE = (1, 4, 4, 5, 6)  # 4 frames (> temporal kernel 3), odd height
TRAJ = {"steps": 4, "shift": 2.0, "guidance": 3.0, "cond": "prompt0", "uncond": "negative"}
SEED = 20260102


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """max|a − b| / max|b|."""
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def f32(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(t, dtype=np.float32))


def ensure_model_dir(model_dir: str) -> None:
    if os.path.exists(os.path.join(model_dir, "model.json")):
        return
    script = os.path.join(ROOT, "dist", "tools", "reference", "write-tiny-model.js")
    if not os.path.exists(script):
        sys.exit(f"{model_dir} does not exist; run `npm run build && node dist/tools/reference/write-tiny-model.js {model_dir}` first")
    subprocess.run(["node", script, model_dir], check=True, cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "test", "fixtures", "reference", "model"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "test", "fixtures", "reference"))
    args = ap.parse_args()
    ensure_model_dir(args.model_dir)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    m = ref.ReferenceModel(args.model_dir)
    m1 = ref.ReferenceModel(args.model_dir, t5_layers=1, dit_layers=1)  # truncated models: taps after layer/block 0
    spec = m.spec
    te, tr = spec["textEncoder"], spec["transformer"]
    rng = np.random.default_rng(SEED)
    out: dict = {}
    meta: dict = {"prompts": {}, "diagnostics": {}}
    diag = meta["diagnostics"]

    # ---- text encoder --------------------------------------------------------------------------------------
    embeds = {}
    for name, text in PROMPTS.items():
        ids, length = m.tokenize(text)
        hidden = m.text_encoder.encode(ids, length)
        embeds[name] = hidden
        out[f"t5.{name}.ids"] = f32(ids)
        out[f"t5.{name}.hidden"] = f32(hidden[0])
        out[f"t5_1layer.{name}.hidden"] = f32(m1.text_encoder.encode(ids, length)[0])
        meta["prompts"][name] = {"text": text, "length": int(length)}
        # float64 run of the same module: how far float32 itself is from exact
        h64 = ref.ReferenceModel._load(ref.T5EncoderModel(te).double(), os.path.join(args.model_dir, "text_encoder.safetensors")).double().encode(ids, length)
        diag[f"t5.{name}.float32_vs_float64"] = rel_err(hidden, h64)
    L = te["maxLength"]
    out["t5.relative_buckets"] = f32(m.text_encoder.encoder.block[0].layer[0].SelfAttention.relative_buckets(L, L))

    # ---- DiT -----------------------------------------------------------------------------------------------
    latents = torch.from_numpy(rng.standard_normal(DIT_LATENT_SHAPE).astype(np.float32))
    context = embeds["prompt1"]
    taps: dict = {}
    velocity = m.transformer(latents, DIT_T, context, "wan", taps)
    out["dit.latents"] = f32(latents)
    out["dit.context"] = f32(context)
    out["dit.velocity"] = f32(velocity)
    out["dit.tap.patch_embedding"] = f32(taps["patch_embedding"][0])
    out["dit.tap.block0"] = f32(taps["block0"][0])
    out["dit_1layer.velocity"] = f32(m1.transformer(latents, DIT_T, context, "wan"))
    out["dit.timestep_freqs"] = f32(m.transformer.timestep_freqs(DIT_T, "wan")[0])
    out["dit.timestep_freqs_diffusers_f32"] = f32(m.transformer.timestep_freqs(DIT_T, "diffusers")[0])
    p_t, p_h, p_w = tr["patchSize"]
    grid = (DIT_LATENT_SHAPE[2] // p_t, DIT_LATENT_SHAPE[3] // p_h, DIT_LATENT_SHAPE[4] // p_w)
    table = ref.rope_grid_freqs(m.transformer.freqs, grid)
    out["dit.rope_cos"] = f32(table.real)
    out["dit.rope_sin"] = f32(table.imag)
    meta["dit"] = {"t": DIT_T, "latentShape": list(DIT_LATENT_SHAPE), "grid": list(grid), "context": "prompt1"}
    # timestep embedding: Wan 2.1 computes it in float64, diffusers in float32 — how much that alone moves v
    v_diffusers = m.transformer(latents, DIT_T, context, "diffusers")
    diag["dit.timestep_freqs.diffusers_f32_vs_wan_f64.max_abs"] = float((m.transformer.timestep_freqs(DIT_T, "diffusers") - m.transformer.timestep_freqs(DIT_T, "wan")).abs().max())
    diag["dit.velocity.diffusers_f32_timestep_vs_wan_f64_timestep"] = rel_err(v_diffusers, velocity)
    dit64 = ref.ReferenceModel._load(ref.WanTransformer3DModel(tr).double(), os.path.join(args.model_dir, "transformer.safetensors")).double()
    diag["dit.velocity.float32_vs_float64"] = rel_err(velocity, dit64(latents.double(), DIT_T, context.double(), "wan"))

    # ---- VAE decoder ---------------------------------------------------------------------------------------
    vae_latents = torch.from_numpy(rng.standard_normal(VAE_LATENT_SHAPE).astype(np.float32))
    video = m.vae(vae_latents)
    out["vae.latents"] = f32(vae_latents)
    out["vae.video"] = f32(video)  # [1, 3, F, H, W], unclamped
    meta["vae"] = {"latentShape": list(VAE_LATENT_SHAPE), "videoShape": list(video.shape), "layout": "[1, 3, F, H, W] channels-first, not clamped"}
    vae64 = ref.ReferenceModel._load(ref.WanVaeDecoder(spec["vae"]).double(), os.path.join(args.model_dir, "vae.safetensors")).double()
    diag["vae.video.float32_vs_float64"] = rel_err(video, vae64(vae_latents.double()))

    # ---- sampling trajectory -------------------------------------------------------------------------------
    noise = torch.from_numpy(rng.standard_normal(DIT_LATENT_SHAPE).astype(np.float32))
    sigmas, traj = ref.sample_trajectory(m.transformer, noise, embeds[TRAJ["cond"]], embeds[TRAJ["uncond"]], TRAJ["steps"], TRAJ["shift"], TRAJ["guidance"])
    out["traj.noise"] = f32(noise)
    out["traj.sigmas"] = f32(sigmas)
    for i, x in enumerate(traj[1:], start=1):
        out[f"traj.latents.{i}"] = f32(x)
    meta["trajectory"] = {**TRAJ, "latentShape": list(DIT_LATENT_SHAPE), "sigmas": [float(s) for s in sigmas], "timestepRule": "t = sigma * 1000 (float)"}
    _, traj64 = ref.sample_trajectory(dit64, noise.double(), embeds[TRAJ["cond"]].double(), embeds[TRAJ["uncond"]].double(), TRAJ["steps"], TRAJ["shift"], TRAJ["guidance"])
    diag["traj.final.float32_vs_float64"] = rel_err(traj[-1], traj64[-1])
    # Wan's own solvers feed integer timesteps (int64(σ·1000)) to the DiT; the same loop with truncated t:
    x = noise.clone()
    for i in range(TRAJ["steps"]):
        t = float(np.int64(sigmas[i] * 1000))
        v = ref.classifier_free_guidance(m.transformer(x, t, embeds[TRAJ["cond"]]), m.transformer(x, t, embeds[TRAJ["uncond"]]), TRAJ["guidance"])
        x = ref.euler_step(x, v, float(sigmas[i]), float(sigmas[i + 1]))
    diag["traj.final.int64_timesteps_vs_float_timesteps"] = rel_err(x, traj[-1])
    diag["sigmas.diffusers_FlowMatchEulerDiscreteScheduler"] = [float(s) for s in ref.diffusers_flow_match_euler_sigmas(TRAJ["steps"], TRAJ["shift"])]

    meta["generator"] = "tools/reference/make_fixtures.py"
    meta["torch"] = torch.__version__
    meta["seed"] = SEED
    os.makedirs(args.out_dir, exist_ok=True)
    ref.write_safetensors(os.path.join(args.out_dir, "fixtures.safetensors"), out, {"generator": "tools/reference/make_fixtures.py"})
    with open(os.path.join(args.out_dir, "fixtures.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    total = sum(v.size for v in out.values()) * 4
    print(f"wrote {len(out)} tensors ({total} bytes) to {args.out_dir}")
    for k, v in sorted(diag.items()):
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
