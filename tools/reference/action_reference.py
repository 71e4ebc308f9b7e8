"""
Independent PyTorch reference for per-frame action conditioning of the Wan-style DiT family (world models that follow
a discrete key, e.g. none/up/down/left/right, plus an optional continuous action vector per latent frame).

Written from the model description, not from omnirx's TypeScript plan code:

* ``ActionEmbedder`` (``condition_embedder.action_embedder``): ``key_embedding`` = ``nn.Embedding(numKeys, dim)`` (key 0
  = "none") and, when ``vectorDim`` > 0, ``vector_proj`` = ``nn.Linear(vectorDim, dim)``; a_f = E[key_f] + W v_f + b.
* Injection (adaLN action conditioning, as action-conditioned world models that add the action embedding to the
  timestep embedding, e.g. Genie's / DIAMOND's conditioning through the normalisation layers): for latent frame f the
  time embedding becomes temb_f + a_f BEFORE ``time_proj``, so the 6-way block modulation silu(·) → time_proj and the
  head's shift/scale (scale_shift_table + temb_f) both see the action.
* ``ActionCausalWanModel``: the block-causal model of ``causal_reference.py`` (per-frame timesteps, KV cache and the
  explicit-mask formulation) with that injection; ``forward_bidirectional``: the bidirectional ``WanTransformer3DModel``
  with one timestep per sample and the modulation expanded per latent frame (diffusers' per-token timestep path of
  Wan 2.2 TI2V, ``temb`` [B, L, dim]) so each frame gets its own action.

``inject`` selects the injection for the sensitivity diagnostics: "adaln" (the model), "none" (actions ignored),
"after_proj" (a_f added to each of the 6 modulation chunks after ``time_proj``, head without actions).

torch (1.13, CPU) and numpy only.
"""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import causal_reference as cref  # noqa: E402
import omnirx_reference as ref  # noqa: E402


class ActionEmbedder(nn.Module):
    """keys [..., F] (int64) and vectors [..., F, vectorDim] → action embedding [..., F, dim]."""

    def __init__(self, dim: int, num_keys: int, vector_dim: int):
        super().__init__()
        self.key_embedding = nn.Embedding(num_keys, dim)
        self.vector_proj = nn.Linear(vector_dim, dim) if vector_dim > 0 else None

    def forward(self, keys: torch.Tensor, vectors: Optional[torch.Tensor]) -> torch.Tensor:
        a = self.key_embedding(keys)
        if self.vector_proj is not None:
            a = a + self.vector_proj(vectors.to(a.dtype))
        return a


class FrameActions:
    """Actions of a run of latent frames: keys [F] int64, vectors [F, vectorDim] (zeros when omitted)."""

    def __init__(self, keys: Sequence[int], vectors: Optional[np.ndarray], vector_dim: int):
        self.keys = torch.tensor(list(keys), dtype=torch.long)
        v = np.zeros((len(keys), vector_dim)) if vectors is None else np.asarray(vectors).reshape(len(keys), vector_dim)
        self.vectors = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))

    @staticmethod
    def cat(parts: Sequence["FrameActions"]) -> "FrameActions":
        """Frames of consecutive runs, in order: keys [ΣF], vectors [ΣF, vectorDim]."""
        return FrameActions._of(torch.cat([p.keys for p in parts]), torch.cat([p.vectors for p in parts]))

    @staticmethod
    def stack(rows: Sequence["FrameActions"]) -> "FrameActions":
        """One run per batch sample: keys [B, F], vectors [B, F, vectorDim]."""
        return FrameActions._of(torch.stack([p.keys for p in rows]), torch.stack([p.vectors for p in rows]))

    @staticmethod
    def _of(keys: torch.Tensor, vectors: torch.Tensor) -> "FrameActions":
        out = FrameActions.__new__(FrameActions)
        out.keys, out.vectors = keys, vectors
        return out


class ActionCausalWanModel(cref.CausalWanModel):
    """``CausalWanModel`` + ``condition_embedder.action_embedder``; set ``self.actions`` (one per frame of the call)."""

    def __init__(self, cfg: dict, chunk_frames: int, sink_frames: int, window_frames: int, inject: str = "adaln"):
        super().__init__(cfg, chunk_frames, sink_frames, window_frames)
        act = cfg["action"]
        self.condition_embedder.action_embedder = ActionEmbedder(cfg["dim"], act["numKeys"], act["vectorDim"])
        self.inject = inject
        self.actions: Optional[FrameActions] = None

    def conditioning(self, freqs: torch.Tensor, actions: FrameActions, context: torch.Tensor):
        """freqs [..., freqDim], actions for [..., F] → temb [..., F, d] (action included), proj [..., F, 6, d], text."""
        ce = self.condition_embedder
        dt = ce.time_embedder.linear_1.weight.dtype
        temb = ce.time_embedder(freqs.to(dt))
        a = ce.action_embedder(actions.keys, actions.vectors.to(dt))
        if temb.dim() == a.dim() - 1:  # one timestep per sample: repeat over its frames
            temb = temb.unsqueeze(-2).expand(a.shape)
        if self.inject == "adaln":
            temb = temb + a
        proj = ce.time_proj(F.silu(temb))
        if self.inject == "after_proj":
            proj = proj + a.repeat(*([1] * (a.dim() - 1)), 6)  # [a, a, a, a, a, a] along the 6·d axis
        return temb, proj.unflatten(-1, (6, -1)), ce.text_embedder(context)

    def frame_conditioning(self, t_frames: Sequence[float], context: torch.Tensor, dtype: torch.dtype):
        assert self.actions is not None and len(self.actions.keys) == len(t_frames)
        freqs = ref.sinusoidal_embedding_1d(self.cfg["freqDim"], torch.tensor(list(t_frames), dtype=torch.float64))
        return self.conditioning(freqs, self.actions, context)

    @torch.no_grad()
    def forward_bidirectional(self, latents: torch.Tensor, t: Sequence[float], context: torch.Tensor, actions: FrameActions) -> torch.Tensor:
        """latents [B, C_in, F, H, W], t[b] (σ·1000), context [B, Lt, textDim], actions keys [B, F] → velocity."""
        b, _, frames, height, width = latents.shape
        grid = (frames, height // self.patch_size[1], width // self.patch_size[2])
        tpf = grid[1] * grid[2]
        x = self.patch_embedding(latents).flatten(2).transpose(1, 2)  # [B, L, d], tokens in (f, h, w) order
        freqs = ref.sinusoidal_embedding_1d(self.cfg["freqDim"], torch.tensor(list(t), dtype=torch.float64))  # [B, freqDim]
        temb, proj, ctx = self.conditioning(freqs, actions, context)  # [B, F, d], [B, F, 6, d]
        e_tok, temb_tok = proj.repeat_interleave(tpf, dim=1), temb.repeat_interleave(tpf, dim=1)
        table = cref.rope_freqs_at(self.freqs, grid, 0)
        for block in self.blocks:
            mods, q, k, v = self._qkv(block, x, e_tok, table)
            x = self._rest(block, x, cref.sdpa(q, k, v), mods, ctx)
        shift, scale = (self.scale_shift_table.unsqueeze(1) + temb_tok.unsqueeze(2)).unbind(2)
        x = self.proj_out(self.norm_out(x) * (1 + scale) + shift)
        p_t, p_h, p_w = self.patch_size
        x = x.reshape(b, grid[0], grid[1], grid[2], p_t, p_h, p_w, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.flatten(6, 7).flatten(4, 5).flatten(2, 3)


def load_action_model(model_dir: str, chunk_frames: int, sink_frames: int, window_frames: int, dtype=torch.float32, inject: str = "adaln") -> ActionCausalWanModel:
    with open(os.path.join(model_dir, "model.json")) as f:
        spec = json.load(f)
    m = ActionCausalWanModel(spec["transformer"], chunk_frames, sink_frames, window_frames, inject)
    ref.load_module(m, os.path.join(model_dir, "transformer.safetensors"))
    return (m.double() if dtype == torch.float64 else m).eval()


@torch.no_grad()
def rollout(model: ActionCausalWanModel, noises: Sequence[torch.Tensor], context: torch.Tensor, sigmas: np.ndarray, actions: Sequence[FrameActions], check_masked: bool = False):
    """
    ``causal_reference.rollout`` with chunk k's actions ``actions[k]`` for its denoise steps and its commit (the
    committed K/V are computed with the action the chunk was generated with). Returns (velocities, finals, attended,
    max rel error of the masked formulation vs the cached one).
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
            model.actions = actions[k]
            v = model.forward_cached(x, t, context, cache, start)
            if check_masked:
                model.actions = FrameActions.cat(list(actions[: k + 1]))
                vm = model.forward_masked(torch.cat(committed + [x], dim=2), [0.0] * start + t, context)[:, :, start:]
                worst = max(worst, float((vm.double() - v.double()).abs().max() / v.double().abs().max()))
            vs.append(v)
            x = cref.euler_frames(x, v, sigmas[:, s], sigmas[:, s + 1])
        model.actions = actions[k]
        model.forward_cached(x, [0.0] * C, context, cache, start, update=True)
        committed.append(x)
        velocities.append(vs)
        finals.append(x)
    model.actions = None
    return velocities, finals, attended, worst


def action_param_shapes(dim: int, num_keys: int, vector_dim: int) -> List[Tuple[str, Tuple[int, ...]]]:
    """Names and shapes of the action module's parameters (as in the model's state dict)."""
    sd = ActionEmbedder(dim, num_keys, vector_dim).state_dict()
    return [(f"condition_embedder.action_embedder.{k}", tuple(v.shape)) for k, v in sd.items()]
