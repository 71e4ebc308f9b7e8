#!/usr/bin/env python3
"""
How much plausible implementation mistakes move the parity fixtures' outputs: each mutation is applied to the
reference (code or weights), the affected output is recomputed and compared with the unmutated one as
max|mutated − ref| / max|ref|. Every value must be well above the 1e-4 component tolerance of
test/parity/reference.test.ts for the test to catch that mistake. Prints a table; writes nothing.

  /usr/bin/python3 tools/reference/sensitivity.py
"""

from __future__ import annotations

import copy
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import omnirx_reference as ref  # noqa: E402
from make_fixtures import DIT_LATENT_SHAPE, DIT_T, PROMPTS, ROOT, SEED, TRAJ, VAE_LATENT_SHAPE, rel_err  # noqa: E402

MODEL_DIR = os.path.join(ROOT, "test", "fixtures", "reference", "model")


def main() -> None:
    torch.set_num_threads(1)
    m = ref.ReferenceModel(MODEL_DIR)
    rng = np.random.default_rng(SEED)
    embeds = {n: m.text_encoder.encode(*m.tokenize(t)) for n, t in PROMPTS.items()}
    latents = torch.from_numpy(rng.standard_normal(DIT_LATENT_SHAPE).astype(np.float32))
    vae_latents = torch.from_numpy(rng.standard_normal(VAE_LATENT_SHAPE).astype(np.float32))
    noise = torch.from_numpy(rng.standard_normal(DIT_LATENT_SHAPE).astype(np.float32))
    ctx = embeds["prompt1"]
    v0 = m.transformer(latents, DIT_T, ctx)
    y0 = m.vae(vae_latents)
    _, traj0 = ref.sample_trajectory(m.transformer, noise, embeds["prompt0"], embeds["negative"], TRAJ["steps"], TRAJ["shift"], TRAJ["guidance"])
    results: dict = {}

    def dit_with(mutate) -> float:
        d = copy.deepcopy(m.transformer)
        with torch.no_grad():
            mutate(d)
        return rel_err(d(latents, DIT_T, ctx), v0)

    def vae_with(mutate) -> float:
        v = copy.deepcopy(m.vae)
        with torch.no_grad():
            mutate(v)
        return rel_err(v(vae_latents), y0)

    def t5_with(mutate, name="prompt1") -> float:
        t = copy.deepcopy(m.text_encoder)
        with torch.no_grad():
            mutate(t)
        return rel_err(t.encode(*m.tokenize(PROMPTS[name])), embeds[name])

    # ---- text encoder
    def scale_q(t):
        for b in t.encoder.block:
            b.layer[0].SelfAttention.q.weight /= t.cfg["dKv"] ** 0.5

    results["t5: 1/sqrt(dKv) attention scaling"] = t5_with(scale_q)

    def no_mask(t):
        orig = t.forward
        t.forward = lambda ids, mask, taps=None: orig(ids, torch.ones_like(mask), taps)

    results["t5: padding not masked"] = t5_with(no_mask)

    def per_layer_zero_bias(t):
        orig = ref.T5Block.forward
        state = {"i": 0}

        def fwd(self, x, mask, position_bias=None):  # layers > 0 without position bias (only the mask)
            state["i"] += 1
            return orig(self, x, mask, None if state["i"] == 1 else mask)

        for b in t.encoder.block:
            b.forward = fwd.__get__(b)

    results["t5: bias of layer 0 not reused by later layers"] = t5_with(per_layer_zero_bias)
    results["t5: layer norm weights = 1"] = t5_with(lambda t: [p.fill_(1.0) for n, p in t.named_parameters() if "layer_norm" in n])
    results["t5: relu instead of gelu-tanh gate"] = t5_with(lambda t: [setattr(b.layer[1].DenseReluDense, "forward", (lambda mod: (lambda x: mod.wo(torch.relu(mod.wi_0(x)) * mod.wi_1(x))))(b.layer[1].DenseReluDense)) for b in t.encoder.block])

    # ---- DiT
    orig_rope = ref.rope_apply
    for name, fn in [
        ("dit: RoPE on halves (rotate_half) instead of adjacent pairs", rotate_half_apply),
        ("dit: RoPE with the h and w positions swapped", lambda x, g, fr: rope_with(x, g, (8, 4, 4), (0, 2, 1))),
        ("dit: RoPE split 4/6/6 instead of 8/4/4", lambda x, g, fr: rope_with(x, g, (4, 6, 6), (0, 1, 2))),
    ]:
        ref.rope_apply = fn
        results[name] = rel_err(m.transformer(latents, DIT_T, ctx), v0)
        ref.rope_apply = orig_rope

    orig_tf = ref.WanTransformer3DModel.timestep_freqs
    ref.WanTransformer3DModel.timestep_freqs = lambda self, t, mode="wan": torch.cat(orig_tf(self, t, mode).chunk(2, dim=1)[::-1], dim=1)
    results["dit: timestep features [sin | cos] (flip_sin_to_cos=False)"] = rel_err(m.transformer(latents, DIT_T, ctx), v0)
    ref.WanTransformer3DModel.timestep_freqs = orig_tf

    def swap_chunks(d, a, b):
        dim = d.cfg["dim"]
        tp = d.condition_embedder.time_proj
        for p in (tp.weight, tp.bias):
            ca, cb = p[a * dim : (a + 1) * dim].clone(), p[b * dim : (b + 1) * dim].clone()
            p[a * dim : (a + 1) * dim], p[b * dim : (b + 1) * dim] = cb, ca
        for blk in d.blocks:
            t = blk.scale_shift_table
            ra, rb = t[:, a].clone(), t[:, b].clone()
            t[:, a], t[:, b] = rb, ra

    results["dit: shift/scale chunks swapped (self-attn)"] = dit_with(lambda d: swap_chunks(d, 0, 1))
    results["dit: gate chunks of attn/ffn swapped"] = dit_with(lambda d: swap_chunks(d, 2, 5))
    results["dit: biases all zero"] = dit_with(lambda d: [p.zero_() for n, p in d.named_parameters() if n.endswith(".bias")])
    results["dit: cross-attn norm2 without affine"] = dit_with(lambda d: [(b.norm2.weight.fill_(1.0), b.norm2.bias.zero_()) for b in d.blocks])
    results["dit: q/k RMSNorm weights = 1"] = dit_with(lambda d: [p.fill_(1.0) for n, p in d.named_parameters() if "norm_q" in n or "norm_k" in n])
    results["dit: head modulation from silu(temb)"] = dit_with(lambda d: setattr(d.condition_embedder, "forward", (lambda ce: (lambda tf, e: (lambda r: (torch.nn.functional.silu(r[0]), r[1], r[2]))(ref.WanTimeTextEmbedding.forward(ce, tf, e))))(d.condition_embedder)))
    vt = v0.reshape(1, 4, 3, 3, 2, 4, 2).transpose(4, 6).reshape(v0.shape)  # (ph, pw) swapped inside each patch
    results["dit: unpatchify with ph/pw swapped"] = rel_err(vt, v0)

    # ---- VAE
    def symmetric_time_pad(v):
        for mod in v.modules():
            if isinstance(mod, ref.WanCausalConv3d) and mod.kernel_size[0] > 1:
                p = list(mod._padding)
                p[4], p[5] = (mod.kernel_size[0] - 1) // 2, (mod.kernel_size[0] - 1) // 2
                mod._padding = tuple(p)

    results["vae: non-causal (symmetric) temporal padding"] = vae_with(symmetric_time_pad)
    results["vae: gammas = 1"] = vae_with(lambda v: [p.fill_(1.0) for n, p in v.named_parameters() if n.endswith("gamma")])
    results["vae: RMS norm without sqrt(C)"] = vae_with(lambda v: [setattr(mod, "scale", 1.0) for mod in v.modules() if isinstance(mod, ref.WanRMS_norm)])
    orig_vae_cfg = copy.deepcopy(m.vae.cfg)
    results["vae: latents (z - mean) / std instead of z * std + mean"] = vae_with(lambda v: setattr(v, "cfg", {**orig_vae_cfg, "latentsStd": [1 / s for s in orig_vae_cfg["latentsStd"]], "latentsMean": [-mu / s for mu, s in zip(orig_vae_cfg["latentsMean"], orig_vae_cfg["latentsStd"])]}))
    results["vae: conv kernel flipped in time"] = vae_with(lambda v: [mod.weight.copy_(mod.weight.flip(2)) for mod in v.modules() if isinstance(mod, ref.WanCausalConv3d) and mod.kernel_size[0] > 1])

    # ---- sampling
    def traj_err(sigmas=None, guidance=TRAJ["guidance"], swap=False, tmode="wan") -> float:
        s = ref.flow_match_sigmas(TRAJ["steps"], TRAJ["shift"]) if sigmas is None else sigmas
        x = noise.clone()
        c, u = (embeds["negative"], embeds["prompt0"]) if swap else (embeds["prompt0"], embeds["negative"])
        for i in range(TRAJ["steps"]):
            v = ref.classifier_free_guidance(m.transformer(x, float(s[i]) * 1000, c, tmode), m.transformer(x, float(s[i]) * 1000, u, tmode), guidance)
            x = ref.euler_step(x, v, float(s[i]), float(s[i + 1]))
        return rel_err(x, traj0[-1])

    results["sampling: diffusers FlowMatchEuler set_timesteps sigmas"] = traj_err(sigmas=ref.diffusers_flow_match_euler_sigmas(TRAJ["steps"], TRAJ["shift"]))
    results["sampling: cond/uncond swapped"] = traj_err(swap=True)
    results["sampling: unshifted sigmas"] = traj_err(sigmas=ref.flow_match_sigmas(TRAJ["steps"], 1.0))
    results["sampling: diffusers float32 timestep features (not a bug)"] = traj_err(tmode="diffusers")

    width = max(len(k) for k in results)
    for k, v in results.items():
        flag = "" if v > 1e-3 else ("   <-- within 1e-3" if v > 1e-4 else "   <-- within tolerance")
        print(f"{k.ljust(width)}  {v:.3e}{flag}")


def rotate_half_apply(x, grid, freqs):
    """GPT-NeoX / Llama-style rotation of (x[:D/2], x[D/2:]) pairs instead of Wan's adjacent (x[2i], x[2i+1])."""
    b, s, n, hd = x.shape
    f = ref.rope_grid_freqs(freqs, grid).reshape(s, 1, -1)
    x1, x2 = x[..., : hd // 2].double(), x[..., hd // 2 :].double()
    return torch.cat([x1 * f.real - x2 * f.imag, x1 * f.imag + x2 * f.real], -1).float()


def rope_with(x, grid, dims, axes):
    """Wan rope_apply with axis parts of real widths `dims`, part k rotated by the position along grid axis axes[k]."""
    f, h, w = grid
    pos = torch.stack(torch.meshgrid(torch.arange(f), torch.arange(h), torch.arange(w), indexing="ij"), -1).reshape(-1, 3)
    angles = [torch.outer(pos[:, a].double(), 1.0 / torch.pow(10000, torch.arange(0, d, 2).double() / d)) for d, a in zip(dims, axes)]
    ang = torch.cat(angles, dim=1)
    tab = torch.polar(torch.ones_like(ang), ang).reshape(f * h * w, 1, -1)
    x_c = torch.view_as_complex(x.double().reshape(*x.shape[:3], -1, 2))
    return torch.view_as_real(x_c * tab).flatten(3).float()


if __name__ == "__main__":
    main()
