#!/usr/bin/env python3
"""
Writes the fixtures of test/parity/causal.test.ts and test/parity/vae-encoder.test.ts into
test/fixtures/reference/causal/:

  vae_encoder.safetensors   seeded VAE encoder weights (diffusers AutoencoderKLWan encoder names + quant_conv) for the
                            tiny model's VAE config; the tiny model directory has decoder weights only
  fixtures.safetensors      inputs (seeded numpy) and reference outputs, float32
  fixtures.json             rollout configuration, per-frame sigma schedule, attended frames per chunk, diagnostics

from the tiny model in test/fixtures/reference/model (see tools/reference/README.md) and the reference modules in
tools/reference/causal_reference.py. Run with the interpreter that has torch + numpy:

  /usr/bin/python3 tools/reference/make_causal_fixtures.py [--model-dir DIR] [--out-dir DIR]

Deterministic: the same model directory gives byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import causal_reference as cref  # noqa: E402
import omnirx_reference as ref  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEED = 20260214

# Rollout: 5 chunks of 2 latent frames, 1 sink frame, a 3-frame window (not a multiple of the chunk, so a chunk can
# lose half of an older chunk). Committed frames before chunk k: 2k. The window first drops a frame before chunk 3
# (frames 1, 2 leave; chunk 3 sees 0 | 3 4 5), chunk 4 sees 0 | 5 6 7.
ROLLOUT = {"chunkFrames": 2, "sinkFrames": 1, "localWindowFrames": 3, "chunks": 5}
LATENT_CHUNK = (1, 4, 2, 4, 6)  # [1, C, chunkFrames, h, w] → grid (2, 2, 3), 6 tokens per frame
TEXT_LEN_REAL = 7  # context rows past this are zero (Wan's padding)
STEPS = 4
FRAME_SHIFTS = [2.0, 3.5]  # per-frame flow shift: frame j of a chunk follows its own σ schedule (per-frame timesteps)
VAE_VIDEOS = {"a": (1, 3, 4, 9, 12), "b": (1, 3, 2, 8, 10)}  # a: odd height (floor halving), 4 frames > kernel 3


def f32(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(t, dtype=np.float32))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def frame_sigmas() -> np.ndarray:
    """[chunkFrames, STEPS + 1]: Wan's shifted linspace per frame (its own shift), terminal 0."""
    rows = []
    for shift in FRAME_SHIFTS:
        u = np.linspace(1, 0, STEPS + 1)[:STEPS]
        rows.append(np.append(shift * u / (1 + (shift - 1) * u), 0.0))
    return np.array(rows, dtype=np.float64)


def seeded_encoder_weights(cfg: dict, rng: np.random.Generator) -> dict:
    """Normal(0, fan_in^-1/2) weights; biases N(0, 0.1) and gammas 1 + N(0, 0.2), so a bias/gain applied wrongly shows."""
    out = {}
    for name, shape in sorted(cref.vae_encoder_param_shapes(cfg).items()):
        n = int(np.prod(shape))
        if name.endswith(".gamma"):
            v = 1.0 + 0.2 * rng.standard_normal(n)
        elif name.endswith(".bias"):
            v = 0.1 * rng.standard_normal(n)
        else:
            v = rng.standard_normal(n) * float(np.prod(shape[1:])) ** -0.5
        out[name] = v.astype(np.float32).reshape(shape)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "test", "fixtures", "reference", "model"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "test", "fixtures", "reference", "causal"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.model_dir, "model.json")) as f:
        spec = json.load(f)
    tr, vae_cfg = spec["transformer"], spec["vae"]
    rng = np.random.default_rng(SEED)
    out: dict = {}
    diag: dict = {}
    C, S, W, K = ROLLOUT["chunkFrames"], ROLLOUT["sinkFrames"], ROLLOUT["localWindowFrames"], ROLLOUT["chunks"]

    # ---- block-causal DiT rollout ----------------------------------------------------------------------------
    model = cref.load_causal(args.model_dir, C, S, W)
    text_len = spec["textEncoder"]["maxLength"]
    context = np.zeros((1, text_len, tr["textDim"]), dtype=np.float32)
    context[0, :TEXT_LEN_REAL] = rng.standard_normal((TEXT_LEN_REAL, tr["textDim"]))
    context_t = torch.from_numpy(context)
    noises = [torch.from_numpy(rng.standard_normal(LATENT_CHUNK).astype(np.float32)) for _ in range(K)]
    sigmas = frame_sigmas()
    vel, finals, attended, masked_vs_cached = cref.rollout(model, noises, context_t, sigmas, check_masked=True)
    out["rollout.context"] = f32(context)
    for k in range(K):
        out[f"rollout.noise.{k}"] = f32(noises[k])
        out[f"rollout.latents.{k}"] = f32(finals[k])
        for s in range(STEPS):
            out[f"rollout.velocity.{k}.{s}"] = f32(vel[k][s])
    diag["rollout.masked_vs_cached.max_rel"] = masked_vs_cached
    assert masked_vs_cached < 1e-5, f"the two reference formulations disagree: {masked_vs_cached}"
    m64 = cref.load_causal(args.model_dir, C, S, W, torch.float64)
    vel64, fin64, _, _ = cref.rollout(m64, [n.double() for n in noises], context_t.double(), sigmas)
    diag["rollout.float32_vs_float64.final_latents_max_rel"] = max(rel_err(finals[k], fin64[k]) for k in range(K))
    diag["rollout.float32_vs_float64.velocity_max_rel"] = max(rel_err(vel[k][s], vel64[k][s]) for k in range(K) for s in range(STEPS))
    # how far plausible mistakes move the last chunk (all must be far above the test's 1e-4)
    def last_chunk(m, noise_list=noises):
        return cref.rollout(m, noise_list, context_t, sigmas)[1][-1]

    diag["sensitivity.window_never_drops.last_chunk_rel"] = rel_err(last_chunk(cref.load_causal(args.model_dir, C, S, 1000)), finals[-1])
    diag["sensitivity.no_sink.last_chunk_rel"] = rel_err(last_chunk(cref.load_causal(args.model_dir, C, 0, W)), finals[-1])
    orig = cref.rope_freqs_at
    cref.rope_freqs_at = lambda freqs, grid, start: orig(freqs, grid, 0)  # RoPE frame positions restarting per chunk
    try:
        diag["sensitivity.rope_positions_per_chunk.last_chunk_rel"] = rel_err(last_chunk(model), finals[-1])
    finally:
        cref.rope_freqs_at = orig

    # invariant: a first chunk with one timestep for all its frames is the bidirectional WanTransformer3DModel
    bidi = ref.load_module(ref.WanTransformer3DModel(tr), os.path.join(args.model_dir, "transformer.safetensors")).eval()
    t0 = 611.5
    v_bidi = bidi(noises[0], t0, context_t)
    v_causal = model.forward_cached(noises[0], [t0] * C, context_t, model.new_cache(), 0)
    diag["first_chunk.causal_vs_bidirectional.max_rel"] = rel_err(v_causal, v_bidi)
    assert diag["first_chunk.causal_vs_bidirectional.max_rel"] < 1e-5

    # ---- VAE encoder -----------------------------------------------------------------------------------------
    enc_weights = seeded_encoder_weights(vae_cfg, rng)
    enc_path = os.path.join(args.out_dir, "vae_encoder.safetensors")
    ref.write_safetensors(enc_path, enc_weights, {"generator": "tools/reference/make_causal_fixtures.py", "seed": str(SEED)})
    enc = ref.load_module(cref.WanVaeEncoder(vae_cfg), enc_path).eval()
    enc64 = ref.load_module(cref.WanVaeEncoder(vae_cfg), enc_path).double().eval()
    vae_meta = {}
    for name, shape in VAE_VIDEOS.items():
        video = torch.from_numpy(rng.uniform(-1, 1, shape).astype(np.float32))
        z = enc(video)
        out[f"vae_enc.{name}.video"] = f32(video)  # [1, 3, F, H, W] channels-first
        out[f"vae_enc.{name}.latents"] = f32(z)  # [1, zDim, F, h, w]
        vae_meta[name] = {"videoShape": list(shape), "latentShape": list(z.shape)}
        diag[f"vae_enc.{name}.float32_vs_float64"] = rel_err(z, enc64(video.double()))
        if name == "a":  # how far plausible mistakes move the latents (all must be far above the test's 1e-4)
            wrong = ref.load_module(cref.WanVaeEncoder(vae_cfg), enc_path).eval()
            for blk in wrong.encoder.down_blocks:
                if blk.downsamplers is not None:
                    blk.downsamplers[0].resample[0] = torch.nn.ZeroPad2d((1, 0, 1, 0))  # pad on the other side
            diag["sensitivity.vae_enc.pad_top_left_instead_of_bottom_right"] = rel_err(wrong(video), z)
            mu = ref.load_module(cref.WanVaeEncoder(vae_cfg), enc_path).eval()
            with torch.no_grad():
                raw = mu.quant_conv(mu.encoder(video)).chunk(2, dim=1)[0]
            diag["sensitivity.vae_enc.unnormalised_mean"] = rel_err(raw, z)

    meta = {
        "generator": "tools/reference/make_causal_fixtures.py",
        "torch": torch.__version__,
        "seed": SEED,
        "rollout": {
            **ROLLOUT,
            "latentChunkShape": list(LATENT_CHUNK),
            "steps": STEPS,
            "frameShifts": FRAME_SHIFTS,
            "sigmas": sigmas.tolist(),
            "timestepRule": "t = sigma * 1000 per frame; per-frame Euler x += (sigma_next - sigma) * v; commit at t = 0",
            "attendedFrames": attended,
            "textLen": text_len,
        },
        "vaeEncoder": vae_meta,
        "diagnostics": diag,
    }
    ref.write_safetensors(os.path.join(args.out_dir, "fixtures.safetensors"), out, {"generator": "tools/reference/make_causal_fixtures.py"})
    with open(os.path.join(args.out_dir, "fixtures.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    total = sum(v.size for v in out.values()) * 4
    print(f"wrote {len(out)} tensors ({total} bytes) + encoder weights to {args.out_dir}")
    print(f"  attended frames per chunk: {attended}")
    for k, v in sorted(diag.items()):
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
