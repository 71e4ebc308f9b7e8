"""
Independent PyTorch reference for omnirx's block-causal Wan DiT (chunked autoregressive rollout with a KV cache)
and its VAE encoder. Written from the upstream definitions, not from omnirx's TypeScript plan code:

* Block-causal DiT: the CausVid / Self-Forcing ``CausalWanModel`` (``causal_model.py``): the same parameters as
  ``WanTransformer3DModel`` (diffusers names, loaded from the same safetensors), per-frame timesteps (time embedding
  and 6-way adaLN modulation per latent frame; the head modulation per frame too), RoPE on the ABSOLUTE frame index
  (``causal_rope_apply(..., start_frame)``), and a ``kv_cache`` dict per block holding the post-RoPE keys and values of
  committed frames. Two independent formulations are provided and checked against each other:

  - ``forward_cached``: one chunk attends to ``cat(cache[block].k, k_chunk)`` (CausVid's inference path); committing a
    chunk re-runs it at t = 0 and appends its K/V (Self-Forcing's ``context_noise = 0`` cache update), evicting by
    slicing ("shift"/roll as Self-Forcing does, not a ring).
  - ``forward_masked``: the whole sequence [clean committed chunks at t = 0, current chunk at its timesteps] with an
    explicit block-causal + sink + sliding-window additive mask (CausVid's teacher-forcing / block mask path).

  Attention pattern (both): a query in chunk c (frames c·C … c·C+C−1) sees every frame of chunk c, the sink frames
  f < S, and the last W committed non-sink frames before chunk c (frames max(S, c·C − W) … c·C − 1).
  In Self-Forcing's terms ``local_attn_size`` (which counts the current chunk) ≈ S + W + C and ``sink_size`` = S.

* VAE encoder: the diffusers ``AutoencoderKLWan`` encoder blocks (``WanCausalConv3d``, ``WanRMS_norm``,
  ``WanResidualBlock``, ``WanResample('downsample2d')`` = ``ZeroPad2d((0, 1, 0, 1))`` + ``Conv2d(3, stride 2)`` per
  frame, ``quant_conv``) in the simplified topology mirroring omnirx's decoder (see ``WanVaeEncoder``). Output:
  the latent mean normalised as (mean − latents_mean) / latents_std (WanPipeline / Wan ``scale``).

torch (1.13, CPU) and numpy only.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import omnirx_reference as ref  # noqa: E402

# ----------------------------------------------------------------------------------------------------------------
# Block-causal Wan DiT
# ----------------------------------------------------------------------------------------------------------------


def rope_freqs_at(freqs: torch.Tensor, grid: Tuple[int, int, int], start_frame: int) -> torch.Tensor:
    """Self-Forcing ``causal_rope_apply`` table: [f·h·w, D/2] complex multipliers, frame positions start_frame…"""
    f, h, w = grid
    c = freqs.shape[1]
    parts = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)
    return torch.cat(
        [
            parts[0][start_frame : start_frame + f].view(f, 1, 1, -1).expand(f, h, w, -1),
            parts[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
            parts[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
        ],
        dim=-1,
    ).reshape(f * h * w, -1)


def rope_apply_table(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """x [B, L, H, D] times the complex table [L, D/2] on adjacent pairs (in float64, as Wan's rope_apply)."""
    b, s, n, d = x.shape
    x_c = torch.view_as_complex(x.to(torch.float64).reshape(b, s, n, -1, 2))
    return torch.view_as_real(x_c * table.reshape(s, 1, -1)).flatten(3).to(x.dtype)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """q [B, Lq, H, D], k/v [B, Lk, H, D], optional additive mask [Lq, Lk] → [B, Lq, H·D]."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        logits = logits + mask
    return torch.matmul(torch.softmax(logits, dim=-1), v).transpose(1, 2).flatten(2, 3)


class CausalWanModel(ref.WanTransformer3DModel):
    """
    ``WanTransformer3DModel`` parameters with block-causal forwards. ``chunk_frames`` C latent frames per chunk,
    ``sink_frames`` S pinned first frames, ``window_frames`` W most recent committed non-sink frames. Requires a
    temporal patch of 1 (as Wan), so latent frame = token frame.
    """

    def __init__(self, cfg: dict, chunk_frames: int, sink_frames: int, window_frames: int):
        super().__init__(cfg)
        assert self.patch_size[0] == 1
        self.C, self.S, self.W = chunk_frames, sink_frames, window_frames

    # -- shared pieces -------------------------------------------------------------------------------------------

    def frame_conditioning(self, t_frames: Sequence[float], context: torch.Tensor, dtype: torch.dtype):
        """Per-frame time embedding: temb [F, d], timestep_proj [F, 6, d]; text states [1, Lt, d]."""
        freqs = ref.sinusoidal_embedding_1d(self.cfg["freqDim"], torch.tensor(list(t_frames), dtype=torch.float64)).to(dtype)
        temb, proj, ctx = self.condition_embedder(freqs, context)
        return temb, proj.unflatten(1, (6, -1)), ctx

    def attended_frames(self, start_frame: int) -> List[int]:
        """Committed frames a chunk starting at `start_frame` attends to (sink, then the window), ascending."""
        return [f for f in range(start_frame) if f < self.S or f >= max(self.S, start_frame - self.W)]

    def _qkv(self, block, x, e_tok, table):
        mods = (block.scale_shift_table.unsqueeze(1) + e_tok).unbind(2)  # 6 × [1, L, d]: table [1,1,6,d] + e [1,L,6,d]
        shift, scale = mods[0], mods[1]
        n = block.norm1(x) * (1 + scale) + shift
        a = block.attn1
        q = a.norm_q(a.to_q(n)).unflatten(2, (a.heads, -1))
        k = a.norm_k(a.to_k(n)).unflatten(2, (a.heads, -1))
        v = a.to_v(n).unflatten(2, (a.heads, -1))
        return mods, rope_apply_table(q, table), rope_apply_table(k, table), v

    def _rest(self, block, x, attn_out, mods, ctx):
        x = x + block.attn1.to_out[0](attn_out) * mods[2]
        x = x + block.attn2(block.norm2(x), context=ctx)
        n3 = block.norm3(x) * (1 + mods[4]) + mods[3]
        return x + block.ffn(n3) * mods[5]

    def _head(self, x, temb_tok, grid):
        shift, scale = (self.scale_shift_table.unsqueeze(1) + temb_tok.unsqueeze(2)).unbind(2)
        x = self.proj_out(self.norm_out(x) * (1 + scale) + shift)
        p_t, p_h, p_w = self.patch_size
        x = x.reshape(1, grid[0], grid[1], grid[2], p_t, p_h, p_w, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.flatten(6, 7).flatten(4, 5).flatten(2, 3)

    def _embed(self, latents, t_frames, context):
        _, _, frames, height, width = latents.shape
        grid = (frames, height // self.patch_size[1], width // self.patch_size[2])
        x = self.patch_embedding(latents).flatten(2).transpose(1, 2)
        temb, proj, ctx = self.frame_conditioning(t_frames, context, latents.dtype)
        tpf = grid[1] * grid[2]
        frame_of_token = torch.arange(frames).repeat_interleave(tpf)
        return x, grid, temb[frame_of_token][None], proj[frame_of_token][None], ctx

    # -- formulation 1: KV cache (CausVid / Self-Forcing inference) --------------------------------------------

    def new_cache(self) -> List[Dict[str, object]]:
        return [{"k": None, "v": None, "frames": []} for _ in self.blocks]

    @torch.no_grad()
    def forward_cached(self, latents: torch.Tensor, t_frames: Sequence[float], context: torch.Tensor, cache, start_frame: int, update: bool = False) -> torch.Tensor:
        """
        One chunk [1, C_in, C, h, w] at frame offset `start_frame`; attends to cache (sink + window) and itself.
        With update=True appends this chunk's K/V to every block's cache (then evicts), as a commit.
        """
        x, grid, temb_tok, e_tok, ctx = self._embed(latents, t_frames, context)
        table = rope_freqs_at(self.freqs, grid, start_frame)
        tpf = grid[1] * grid[2]
        for block, kv in zip(self.blocks, cache):
            mods, q, k, v = self._qkv(block, x, e_tok, table)
            if kv["k"] is None:
                k_all, v_all = k, v
            else:
                assert kv["frames"] == self.attended_frames(start_frame), (kv["frames"], start_frame)
                k_all, v_all = torch.cat([kv["k"], k], dim=1), torch.cat([kv["v"], v], dim=1)
            out = sdpa(q, k_all, v_all)
            if update:
                frames = list(kv["frames"]) + list(range(start_frame, start_frame + grid[0]))
                k_all_new = k if kv["k"] is None else torch.cat([kv["k"], k], dim=1)
                v_all_new = v if kv["v"] is None else torch.cat([kv["v"], v], dim=1)
                end = start_frame + grid[0]
                keep = [i for i, f in enumerate(frames) if f < self.S or f >= max(self.S, end - self.W)]
                idx = torch.tensor([i * tpf + j for i in keep for j in range(tpf)], dtype=torch.long)
                kv["k"], kv["v"], kv["frames"] = k_all_new[:, idx], v_all_new[:, idx], [frames[i] for i in keep]
            x = self._rest(block, x, out, mods, ctx)
        return self._head(x, temb_tok, grid)

    # -- formulation 2: explicit block mask over the full sequence ----------------------------------------------

    def block_mask(self, frames: int, tpf: int, dtype: torch.dtype) -> torch.Tensor:
        """Additive [L, L] mask: 0 where query frame fq may see key frame fk, −inf elsewhere."""
        allowed = torch.zeros(frames, frames, dtype=torch.bool)
        for fq in range(frames):
            start = (fq // self.C) * self.C
            for fk in range(frames):
                allowed[fq, fk] = (fk >= start and fk < start + self.C) or fk in self.attended_frames(start)
        allowed = allowed.repeat_interleave(tpf, 0).repeat_interleave(tpf, 1)
        mask = torch.zeros(allowed.shape, dtype=dtype)
        mask[~allowed] = float("-inf")
        return mask

    @torch.no_grad()
    def forward_masked(self, latents: torch.Tensor, t_frames: Sequence[float], context: torch.Tensor) -> torch.Tensor:
        """Whole sequence [1, C_in, F, h, w] (F a multiple of C) from frame 0 with the block-causal mask."""
        x, grid, temb_tok, e_tok, ctx = self._embed(latents, t_frames, context)
        table = rope_freqs_at(self.freqs, grid, 0)
        mask = self.block_mask(grid[0], grid[1] * grid[2], latents.dtype)
        for block in self.blocks:
            mods, q, k, v = self._qkv(block, x, e_tok, table)
            x = self._rest(block, x, sdpa(q, k, v, mask), mods, ctx)
        return self._head(x, temb_tok, grid)


def load_causal(model_dir: str, chunk_frames: int, sink_frames: int, window_frames: int, dtype=torch.float32) -> CausalWanModel:
    import json

    with open(os.path.join(model_dir, "model.json")) as f:
        spec = json.load(f)
    m = CausalWanModel(spec["transformer"], chunk_frames, sink_frames, window_frames)
    ref.load_module(m, os.path.join(model_dir, "transformer.safetensors"))
    # .double() casts floating parameters only (Module.to(dtype) would also cast the complex RoPE buffer)
    return (m.double() if dtype == torch.float64 else m).eval()


def euler_frames(x: torch.Tensor, v: torch.Tensor, sig: Sequence[float], sig_next: Sequence[float]) -> torch.Tensor:
    """Per-frame flow-matching Euler step on [1, C, F, h, w]: x_f + (σ_next,f − σ_f)·v_f."""
    d = torch.tensor([b - a for a, b in zip(sig, sig_next)], dtype=x.dtype).view(1, 1, -1, 1, 1)
    return x + d * v


@torch.no_grad()
def rollout(model: CausalWanModel, noises: Sequence[torch.Tensor], context: torch.Tensor, sigmas: np.ndarray, check_masked: bool = False):
    """
    Chunked autoregressive rollout: chunk k starts from noises[k]; step s uses per-frame σ = sigmas[j, s] for the
    chunk's frame j (t = σ·1000) and a per-frame Euler step; the final chunk is committed (t = 0). Returns
    (per-chunk velocities [steps], final latents, attended frames per chunk, max rel error masked vs cached).
    """
    cache = model.new_cache()
    C = model.C
    steps = sigmas.shape[1] - 1
    velocities, finals, attended = [], [], []
    committed: List[torch.Tensor] = []
    worst = 0.0
    for k, noise in enumerate(noises):
        start = k * C
        attended.append(model.attended_frames(start))
        x = noise.clone()
        vs = []
        for s in range(steps):
            t = [float(sigmas[j, s]) * 1000.0 for j in range(C)]
            v = model.forward_cached(x, t, context, cache, start)
            if check_masked:
                full = torch.cat(committed + [x], dim=2)
                vm = model.forward_masked(full, [0.0] * start + t, context)[:, :, start:]
                worst = max(worst, float((vm.double() - v.double()).abs().max() / v.double().abs().max()))
            vs.append(v)
            x = euler_frames(x, v, sigmas[:, s], sigmas[:, s + 1])
        model.forward_cached(x, [0.0] * C, context, cache, start, update=True)
        committed.append(x)
        velocities.append(vs)
        finals.append(x)
    return velocities, finals, attended, worst


# ----------------------------------------------------------------------------------------------------------------
# VAE encoder (diffusers AutoencoderKLWan encoder blocks, simplified topology)
# ----------------------------------------------------------------------------------------------------------------


class WanResampleDown2d(nn.Module):
    """``WanResample(mode='downsample2d')``: per frame, ZeroPad2d((0, 1, 0, 1)) then Conv2d 3×3 stride 2."""

    def __init__(self, dim: int):
        super().__init__()
        self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))

    def forward(self, x):
        b, c, t, h, w = x.shape
        x = self.resample(x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w))
        return x.view(b, t, x.size(1), x.size(2), x.size(3)).permute(0, 2, 1, 3, 4)


class WanDownBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, num_res_blocks: int, kt: int, downsample: bool):
        super().__init__()
        dims = [in_dim] + [out_dim] * num_res_blocks
        self.resnets = nn.ModuleList([ref.WanResidualBlock(dims[j], dims[j + 1], kt) for j in range(num_res_blocks)])
        self.downsamplers = nn.ModuleList([WanResampleDown2d(out_dim)]) if downsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
        return x


def encoder_channels(cfg: dict) -> List[int]:
    """Encoder widths from full resolution down: the decoder's `channels` reversed."""
    return list(reversed(cfg["channels"]))


class WanEncoder3d(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        ch, kt = encoder_channels(cfg), cfg["temporalKernel"]
        self.conv_in = ref.WanCausalConv3d(3, ch[0], (kt, 3, 3))
        ins = [ch[0]] + ch[:-1]
        self.down_blocks = nn.ModuleList([WanDownBlock(ins[i], ch[i], cfg["numResBlocks"], kt, i < len(ch) - 1) for i in range(len(ch))])
        self.mid_block = ref.WanMidBlock(ch[-1], kt)
        self.norm_out = ref.WanRMS_norm(ch[-1])
        self.conv_out = ref.WanCausalConv3d(ch[-1], 2 * cfg["zDim"], (kt, 3, 3))

    def forward(self, x):
        x = self.conv_in(x)
        for d in self.down_blocks:
            x = d(x)
        x = self.mid_block(x)
        return self.conv_out(F.silu(self.norm_out(x)))


class WanVaeEncoder(nn.Module):
    """
    ``encoder`` + ``quant_conv`` with diffusers ``AutoencoderKLWan`` names, mirroring omnirx's simplified decoder:
    no temporal downsampling (one latent frame per video frame), no mid-block attention, ``numResBlocks`` residual
    blocks per level (the first changes the width), downsamplers keep their width. Whole-sequence causal convolution
    (equal to Wan's 1 + 4k frame-chunked encode with its feature cache when nothing downsamples time).
    """

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        self.encoder = WanEncoder3d(cfg)
        self.quant_conv = ref.WanCausalConv3d(2 * cfg["zDim"], 2 * cfg["zDim"], (1, 1, 1))

    @torch.no_grad()
    def forward(self, video: torch.Tensor) -> torch.Tensor:
        """video [B, 3, F, H, W] in [−1, 1] → normalised latent mean [B, zDim, F, h, w]."""
        mu, _logvar = self.quant_conv(self.encoder(video)).chunk(2, dim=1)
        mean = torch.tensor(self.cfg["latentsMean"], dtype=video.dtype).view(1, -1, 1, 1, 1)
        std = torch.tensor(self.cfg["latentsStd"], dtype=video.dtype).view(1, -1, 1, 1, 1)
        # WanPipeline (encode side): (latents − latents_mean) · (1 / std)
        return (mu - mean) * (1.0 / std)


def vae_encoder_param_shapes(cfg: dict) -> Dict[str, Tuple[int, ...]]:
    """Names and shapes of WanVaeEncoder's state dict (what the fixture script seeds)."""
    return {k: tuple(v.shape) for k, v in WanVaeEncoder(cfg).state_dict().items()}
