"""
Gradient-enabled, batched forwards of the reference modules (tools/reference), for training. No second model
definition: every layer is the reference's; only the composition differs where the reference's inference entry points
are single-sample or ``torch.no_grad``:

* ``text_states``: ``T5EncoderModel.forward`` with Wan's zeroing of the rows past each prompt's length (as
  ``T5EncoderModel.encode``, batched).
* ``vae_moments`` / ``vae_decode_raw``: ``WanVaeEncoder``'s encoder + ``quant_conv`` (mean and log-variance, before
  the latent normalisation) and ``WanVaeDecoder``'s ``post_quant_conv`` + decoder (on un-normalised latents).
* ``dit_velocity``: ``ActionCausalWanModel`` with one timestep per (sample, frame) — the per-frame conditioning of
  ``forward_masked`` and the batching of ``forward_bidirectional`` — under either the block-causal mask of
  ``forward_masked`` (world rollout) or none (bidirectional T2V), with RoPE at given absolute frame positions
  (``causal_rope_apply``'s table for arbitrary, not only contiguous, positions); or, for teacher forcing, over a clip's
  clean frames followed by its noisy frames under ``teacher_forcing_mask`` (each noisy frame sees the clean history a
  world session commits, as the KV-cache rollout does).

``check_against_reference`` asserts these equal the reference's own entry points on a tiny seeded model.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Sequence, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
import action_reference as aref  # noqa: E402
import causal_reference as cref  # noqa: E402
import omnirx_reference as ref  # noqa: E402


def tokenize_batch(prompts: Sequence[str], words: Sequence[str], max_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Prompts → token ids [B, max_len] int64 (zero-padded) and lengths [B] int64, by the runtime's tokenizer
    (``ref.tokenize``)."""
    toks = [ref.tokenize(p, words, max_len) for p in prompts]
    return torch.from_numpy(np.stack([t[0] for t in toks])).long(), torch.tensor([t[1] for t in toks])


def text_states(t5: ref.T5EncoderModel, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """ids [B, L] int64, lengths [B] → hidden states [B, L, dModel] float32, rows ≥ length zero (Wan's padding)."""
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).to(torch.float32)
    return t5(ids, mask) * mask[..., None]


def vae_moments(enc: cref.WanVaeEncoder, video: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """video [B, 3, F, H, W] in [−1, 1] → (mean, logvar) [B, zDim, F, H/4, W/4], un-normalised."""
    mu, logvar = enc.quant_conv(enc.encoder(video)).chunk(2, dim=1)
    return mu, logvar


def vae_decode_raw(dec: ref.WanVaeDecoder, z: torch.Tensor) -> torch.Tensor:
    """Un-normalised latents [B, zDim, F, h, w] → video [B, 3, F, 4h, 4w] (unclamped)."""
    return dec.decoder(dec.post_quant_conv(z))


def rope_table(freqs: torch.Tensor, positions: Sequence[int], grid: Tuple[int, int, int]) -> torch.Tensor:
    """[f·h·w, D/2] complex RoPE multipliers with frame f at absolute position positions[f] (cref.rope_freqs_at)."""
    f, h, w = grid
    c = freqs.shape[1]
    parts = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)
    pos = torch.tensor(list(positions), dtype=torch.long)
    return torch.cat(
        [
            parts[0][pos].view(f, 1, 1, -1).expand(f, h, w, -1),
            parts[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
            parts[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
        ],
        dim=-1,
    ).reshape(f * h * w, -1)


def teacher_forcing_mask(m: aref.ActionCausalWanModel, frames: int, tpf: int, dtype: torch.dtype) -> torch.Tensor:
    """
    Additive [2F·tpf, 2F·tpf] mask (0 allowed, −inf not) over a sequence of F clean frames followed by the same F
    frames noised, ``tpf`` tokens per frame. Clean frame f sees what ``block_mask`` allows (the keys a world session
    commits to its KV cache at t = 0); noisy frame f sees the noisy frames of its own chunk and the clean frames that
    chunk attends to (sink, then window: ``attended_frames``), so every noisy frame is denoised from a clean history,
    as in a chunk-by-chunk rollout. This is the teacher-forcing training of autoregressive video diffusion (the
    teacher-forcing baseline of Self Forcing, Huang et al. 2025; CausVid, Yin et al. 2025).
    """
    allowed = torch.zeros(2 * frames, 2 * frames, dtype=torch.bool)
    allowed[:frames, :frames] = m.block_mask(frames, 1, torch.float32) == 0
    for fq in range(frames):
        start = (fq // m.C) * m.C
        allowed[frames + fq, frames + start : frames + min(frames, start + m.C)] = True
        allowed[frames + fq, m.attended_frames(start)] = True
    allowed = allowed.repeat_interleave(tpf, 0).repeat_interleave(tpf, 1)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask[~allowed] = float("-inf")
    return mask


ATTENTION = ("causal", "full", "teacher_forcing")
"""Attention of ``dit_velocity``: the block-causal mask, none (bidirectional), or ``teacher_forcing_mask``."""


def dit_velocity(
    m: aref.ActionCausalWanModel,
    latents: torch.Tensor,
    t: torch.Tensor,
    context: torch.Tensor,
    keys: torch.Tensor,
    vectors: torch.Tensor,
    attention: str,
    positions: Optional[Sequence[int]] = None,
) -> torch.Tensor:
    """
    latents [B, C_in, F, H, W]; t [B, F] timesteps (σ·1000); context [B, Lt, textDim]; keys [B, F] int64; vectors
    [B, F, vectorDim]; attention (ATTENTION): "causal", the model's block mask (chunk C, sink S, window W over the
    clip's frame indices), "full", or "teacher_forcing", where F = 2F' is F' clean frames then the same F' noised
    (``teacher_forcing_mask``; t, keys, vectors and positions given for all F); positions: the F absolute RoPE frame
    positions (default 0…F−1) → velocity [B, C_out, F, H, W]. Raises ValueError for another attention.
    """
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {ATTENTION}; got {attention!r}")
    b, _, frames, height, width = latents.shape
    grid = (frames, height // m.patch_size[1], width // m.patch_size[2])
    tpf = grid[1] * grid[2]
    x = m.patch_embedding(latents).flatten(2).transpose(1, 2)
    freqs = ref.sinusoidal_embedding_1d(m.cfg["freqDim"], t.reshape(-1).to(torch.float64)).view(b, frames, -1)
    temb, proj, ctx = m.conditioning(freqs, aref.FrameActions._of(keys, vectors), context)  # [B, F, d], [B, F, 6, d]
    e_tok, temb_tok = proj.repeat_interleave(tpf, dim=1), temb.repeat_interleave(tpf, dim=1)
    table = rope_table(m.freqs, range(frames) if positions is None else positions, grid)
    if attention == "teacher_forcing":
        if frames % 2:
            raise ValueError(f"teacher forcing needs the clean and the noisy frames (an even count); got {frames}")
        # under CPU autocast the mask takes the logits' dtype (bf16 holds 0 and −inf exactly): a float32 mask would
        # promote the [B, H, L, L] logits to float32, about 3× slower at this length (L = 1024); the causal mask keeps
        # float32, as the recipe's runs had it
        dtype = torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else latents.dtype
        mask = teacher_forcing_mask(m, frames // 2, tpf, dtype)
    else:
        mask = m.block_mask(frames, tpf, latents.dtype) if attention == "causal" else None
    for block in m.blocks:
        mods, q, k, v = m._qkv(block, x, e_tok, table)
        x = m._rest(block, x, cref.sdpa(q, k, v, mask), mods, ctx)
    shift, scale = (m.scale_shift_table.unsqueeze(1) + temb_tok.unsqueeze(2)).unbind(2)
    x = m.proj_out(m.norm_out(x) * (1 + scale) + shift)
    p_t, p_h, p_w = m.patch_size
    x = x.reshape(b, grid[0], grid[1], grid[2], p_t, p_h, p_w, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
    return x.flatten(6, 7).flatten(4, 5).flatten(2, 3)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@torch.no_grad()
def check_against_reference(tol: float = 1e-5) -> dict:
    """Relative errors of the training forwards vs the reference's entry points on a tiny seeded model; raises above tol."""
    torch.manual_seed(0)
    cfg = {"patchSize": [1, 2, 2], "inChannels": 4, "outChannels": 4, "dim": 32, "ffnDim": 64, "numHeads": 2, "numLayers": 2, "textDim": 24, "freqDim": 16, "eps": 1e-6, "ropeTheta": 10000, "action": {"numKeys": 5, "vectorDim": 2}}
    m = aref.ActionCausalWanModel(cfg, 1, 1, 2).eval()
    for p in m.parameters():
        p.add_(0.05 * torch.randn_like(p))
    lat, ctx = torch.randn(2, 4, 4, 4, 6), torch.randn(2, 5, 24)
    keys, vecs = torch.tensor([[1, 2, 0, 4], [3, 3, 1, 0]]), torch.randn(2, 4, 2)
    t = torch.tensor([[900.0, 500.0, 250.0, 0.0], [10.0, 999.0, 400.0, 700.0]])
    errs = {}
    m.actions = aref.FrameActions._of(keys[0], vecs[0])
    errs["causal_vs_forward_masked"] = _rel(dit_velocity(m, lat[:1], t[:1], ctx[:1], keys[:1], vecs[:1], "causal"), m.forward_masked(lat[:1], t[0].tolist(), ctx[:1]))
    tb = torch.tensor([[600.0] * 4, [30.0] * 4])
    acts = aref.FrameActions._of(keys, vecs)
    errs["bidirectional_vs_forward_bidirectional"] = _rel(dit_velocity(m, lat, tb, ctx, keys, vecs, "full"), m.forward_bidirectional(lat, [600.0, 30.0], ctx, acts))
    # teacher forcing over 5 frames (sink 1, window 2: frame 4 sees 0, 2, 3, not 1): noisy frame i against
    # forward_masked over [clean 0 … i−1, noisy i]
    clean, noisy = torch.randn(1, 4, 5, 4, 6), torch.randn(1, 4, 5, 4, 6)
    t5 = torch.tensor([[950.0, 20.0, 640.0, 300.0, 810.0]])
    k5, v5 = torch.tensor([[2, 0, 4, 1, 3]]), torch.randn(1, 5, 2)
    tf_out = dit_velocity(m, torch.cat([clean, noisy], dim=2), torch.cat([torch.zeros(1, 5), t5], dim=1), ctx[:1], k5.repeat(1, 2), v5.repeat(1, 2, 1), "teacher_forcing", list(range(5)) * 2)
    worst = 0.0
    for i in range(5):
        m.actions = aref.FrameActions._of(k5[0, : i + 1], v5[0, : i + 1])
        want = m.forward_masked(torch.cat([clean[:, :, :i], noisy[:, :, i : i + 1]], dim=2), [0.0] * i + [float(t5[0, i])], ctx[:1])
        worst = max(worst, _rel(tf_out[:, :, 5 + i], want[:, :, i]))
    errs["teacher_forcing_vs_forward_masked"] = worst
    errs["rope_table_vs_rope_freqs_at"] = _rel(torch.view_as_real(rope_table(m.freqs, range(3, 7), (4, 2, 3))), torch.view_as_real(cref.rope_freqs_at(m.freqs, (4, 2, 3), 3)))
    bad = {k: v for k, v in errs.items() if not v <= tol}
    if bad:
        raise AssertionError(f"training forward differs from the reference: {bad}")
    return errs


if __name__ == "__main__":
    print(check_against_reference())
