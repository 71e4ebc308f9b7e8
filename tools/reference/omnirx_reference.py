"""
Independent PyTorch reference for the model components omnirx ships.

Written from the upstream definitions, not from omnirx's TypeScript plan code:

* Text encoder: Hugging Face ``transformers`` ``T5EncoderModel`` (T5 v1.1: RMS ``T5LayerNorm`` without mean/bias,
  no 1/sqrt(d) attention scaling, bidirectional relative position bias computed by layer 0 and reused by every
  layer, gated-GELU (tanh) FFN ``DenseReluDense.wi_0/wi_1/wo``), plus Wan's wrapper that keeps the first
  ``length`` rows and pads with zeros (``wan/modules/t5.py`` ``T5EncoderModel.__call__``, diffusers
  ``WanPipeline._get_t5_prompt_embeds``).
* DiT: diffusers ``WanTransformer3DModel`` (released form: ``FP32LayerNorm`` + top-level ``scale_shift_table`` head)
  / Wan 2.1 ``wan/modules/model.py`` ``WanModel``: Conv3d patch embedding, sinusoidal time embedding → 6-way adaLN,
  q/k RMSNorm across heads, complex-number 3D RoPE (Wan ``rope_params`` / ``rope_apply``), cross-attention after an
  affine LayerNorm (``cross_attn_norm=True``), GELU-tanh FFN, modulated head, unpatchify.
* VAE decoder: the building blocks of diffusers ``AutoencoderKLWan`` / Wan 2.1 ``wan/modules/vae.py``
  (``WanCausalConv3d`` with causal ``F.pad``, ``WanRMS_norm`` = ``F.normalize`` · sqrt(C) · gamma,
  ``WanResidualBlock``, ``WanResample('upsample2d')`` = per-frame nearest-exact 2× + ``Conv2d``), assembled in the
  simplified topology omnirx uses (see ``WanVaeDecoder`` for the differences from the full Wan 2.1 VAE).
* Sampling: Wan's ``get_sampling_sigmas`` (linspace(1, 0, N+1)[:N], shifted) + terminal 0, the flow-matching Euler
  step of diffusers ``FlowMatchEulerDiscreteScheduler.step`` and classifier-free guidance as in Wan's
  ``text2video.py``. ``diffusers_flow_match_euler_sigmas`` reproduces diffusers' own ``set_timesteps`` for
  comparison (it is NOT the same schedule).

Only torch (tested with 1.13, CPU) and numpy are needed; safetensors files are read and written with json + numpy.
"""

from __future__ import annotations

import json
import math
import re
import struct
import unicodedata
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------------------------
# safetensors (https://github.com/huggingface/safetensors): u64 header length, JSON header, raw little-endian data
# ----------------------------------------------------------------------------------------------------------------

_NP_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def read_safetensors(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """Returns ({name: array}, metadata). BF16 is widened to float32."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    tensors: Dict[str, np.ndarray] = {}
    meta = header.pop("__metadata__", {}) or {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[base + begin : base + end]
        shape = tuple(entry["shape"])
        if entry["dtype"] == "BF16":
            u16 = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u16.view(np.float32).reshape(shape)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(_NP_DTYPES[entry["dtype"]]).newbyteorder("<")).reshape(shape)
        tensors[name] = arr.copy()
    return tensors, meta


def write_safetensors(path: str, tensors: Dict[str, np.ndarray], metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes float32/float16/int32 arrays (sorted by name, 8-byte aligned header) as a safetensors file."""
    names = sorted(tensors)
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    blobs: List[bytes] = []
    offset = 0
    for name in names:
        arr = np.ascontiguousarray(tensors[name])
        if arr.dtype == np.float32:
            dtype = "F32"
        elif arr.dtype == np.float16:
            dtype = "F16"
        elif arr.dtype == np.int32:
            dtype = "I32"
        else:
            raise TypeError(f"{name}: unsupported dtype {arr.dtype}")
        blob = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for blob in blobs:
            f.write(blob)


def load_state_dict(path: str) -> Dict[str, torch.Tensor]:
    tensors, _ = read_safetensors(path)
    return {k: torch.from_numpy(v) for k, v in tensors.items()}


def load_module(module: nn.Module, path: str, reshape: bool = True) -> nn.Module:
    """Loads a safetensors file into `module` (strict: every parameter present, nothing left over)."""
    sd = load_state_dict(path)
    own = module.state_dict()
    missing = [k for k in own if k not in sd]
    extra = [k for k in sd if k not in own]
    if missing or extra:
        raise KeyError(f"{path}: missing {missing[:5]}, unexpected {extra[:5]}")
    for k, v in own.items():
        if tuple(sd[k].shape) != tuple(v.shape):
            if not reshape or sd[k].numel() != v.numel():
                raise ValueError(f"{path}: {k} has shape {tuple(sd[k].shape)}, module expects {tuple(v.shape)}")
            sd[k] = sd[k].reshape(v.shape)
    module.load_state_dict(sd, strict=True)
    return module


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer (omnirx's word-bytes format; documented in src/models/t5/tokenizer.ts): 0 pad, 1 eos, 2 unk,
# 3..258 UTF-8 bytes, then the words.
# ----------------------------------------------------------------------------------------------------------------

PAD_ID, EOS_ID, BYTE_BASE, WORD_BASE = 0, 1, 3, 259


def tokenize(text: str, words: Sequence[str], max_length: int) -> Tuple[np.ndarray, int]:
    index: Dict[str, int] = {}
    for i, w in enumerate(words):
        index.setdefault(w, WORD_BASE + i)
    ids: List[int] = []
    for piece in re.findall(r"[a-z0-9]+|[^\sa-z0-9]", unicodedata.normalize("NFKC", text).lower()):
        if piece in index:
            ids.append(index[piece])
        else:
            ids.extend(BYTE_BASE + b for b in piece.encode("utf-8"))
    body = ids[: max_length - 1] + [EOS_ID]
    out = np.full(max_length, PAD_ID, dtype=np.int32)
    out[: len(body)] = body
    return out, len(body)


# ----------------------------------------------------------------------------------------------------------------
# T5 encoder (HF transformers modeling_t5, T5 v1.1 / "gated-gelu")
# ----------------------------------------------------------------------------------------------------------------


class T5LayerNorm(nn.Module):
    """RMS norm without mean subtraction or bias; variance in float32."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = _up(x).pow(2).mean(-1, keepdim=True)  # HF: x.to(torch.float32)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * x


class T5Attention(nn.Module):
    def __init__(self, cfg: dict, has_relative_attention_bias: bool):
        super().__init__()
        self.d_model = cfg["dModel"]
        self.key_value_proj_dim = cfg["dKv"]
        self.n_heads = cfg["numHeads"]
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.num_buckets = cfg["relativeAttentionNumBuckets"]
        self.max_distance = cfg["relativeAttentionMaxDistance"]
        self.has_relative_attention_bias = has_relative_attention_bias
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.num_buckets, self.n_heads)

    @staticmethod
    def _relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
        """Verbatim logic of HF ``T5Attention._relative_position_bucket`` (float32 log, truncation by .to(long))."""
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def relative_buckets(self, query_length: int, key_length: int) -> torch.Tensor:
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position  # (query_length, key_length)
        return self._relative_position_bucket(relative_position, bidirectional=True, num_buckets=self.num_buckets, max_distance=self.max_distance)

    def compute_bias(self, query_length: int, key_length: int) -> torch.Tensor:
        values = self.relative_attention_bias(self.relative_buckets(query_length, key_length))  # (q, k, heads)
        return values.permute([2, 0, 1]).unsqueeze(0)  # (1, heads, q, k)

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor, position_bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        b, L, _ = hidden_states.shape

        def shape(x: torch.Tensor) -> torch.Tensor:
            return x.view(b, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        q, k, v = shape(self.q(hidden_states)), shape(self.k(hidden_states)), shape(self.v(hidden_states))
        scores = torch.matmul(q, k.transpose(3, 2))  # T5: no 1/sqrt(d) scaling
        if position_bias is None:
            position_bias = self.compute_bias(L, L) + mask  # mask: (b, 1, 1, L) extended attention mask
        scores = scores + position_bias
        attn_weights = F.softmax(_up(scores), dim=-1).type_as(scores)
        out = torch.matmul(attn_weights, v).transpose(1, 2).contiguous().view(b, -1, self.inner_dim)
        return self.o(out), position_bias


class T5LayerSelfAttention(nn.Module):
    def __init__(self, cfg: dict, has_relative_attention_bias: bool):
        super().__init__()
        self.SelfAttention = T5Attention(cfg, has_relative_attention_bias)
        self.layer_norm = T5LayerNorm(cfg["dModel"], cfg["eps"])

    def forward(self, x, mask, position_bias=None):
        y, position_bias = self.SelfAttention(self.layer_norm(x), mask, position_bias)
        return x + y, position_bias


class T5DenseGatedActDense(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.wi_0 = nn.Linear(cfg["dModel"], cfg["dFf"], bias=False)
        self.wi_1 = nn.Linear(cfg["dModel"], cfg["dFf"], bias=False)
        self.wo = nn.Linear(cfg["dFf"], cfg["dModel"], bias=False)

    def forward(self, x):
        # T5 v1.1 "gated-gelu": act = gelu_new (tanh approximation)
        return self.wo(F.gelu(self.wi_0(x), approximate="tanh") * self.wi_1(x))


class T5LayerFF(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.DenseReluDense = T5DenseGatedActDense(cfg)
        self.layer_norm = T5LayerNorm(cfg["dModel"], cfg["eps"])

    def forward(self, x):
        return x + self.DenseReluDense(self.layer_norm(x))


class T5Block(nn.Module):
    def __init__(self, cfg: dict, has_relative_attention_bias: bool):
        super().__init__()
        self.layer = nn.ModuleList([T5LayerSelfAttention(cfg, has_relative_attention_bias), T5LayerFF(cfg)])

    def forward(self, x, mask, position_bias=None):
        x, position_bias = self.layer[0](x, mask, position_bias)
        return self.layer[1](x), position_bias


class T5Stack(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.block = nn.ModuleList([T5Block(cfg, has_relative_attention_bias=(i == 0)) for i in range(cfg["numLayers"])])
        self.final_layer_norm = T5LayerNorm(cfg["dModel"], cfg["eps"])


class T5EncoderModel(nn.Module):
    """HF ``T5EncoderModel`` parameter layout (``shared``, ``encoder.block.{i}.layer.{0,1}``, ``encoder.final_layer_norm``)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        self.shared = nn.Embedding(cfg["vocabSize"], cfg["dModel"])
        self.encoder = T5Stack(cfg)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, taps: Optional[dict] = None) -> torch.Tensor:
        h = self.shared(input_ids)
        # get_extended_attention_mask: (1 - mask) * finfo.min, broadcast over heads and queries
        ext = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        position_bias = None
        for i, block in enumerate(self.encoder.block):
            h, position_bias = block(h, ext, position_bias)
            if taps is not None:
                taps[f"block{i}"] = h
        return self.encoder.final_layer_norm(h)

    @torch.no_grad()
    def encode(self, ids: np.ndarray, length: int) -> torch.Tensor:
        """Wan-style text embedding [1, L, d]: encoder output with the rows past `length` set to zero."""
        input_ids = torch.from_numpy(ids.astype(np.int64))[None]
        mask = (torch.arange(ids.shape[0]) < length).long()[None]
        out = self.forward(input_ids, mask)
        out[:, length:] = 0  # u[:seq_len], then zero-padded back to text_len
        return out


# ----------------------------------------------------------------------------------------------------------------
# Wan DiT (diffusers WanTransformer3DModel / Wan 2.1 WanModel)
# ----------------------------------------------------------------------------------------------------------------


def sinusoidal_embedding_1d(dim: int, position: torch.Tensor) -> torch.Tensor:
    """Wan 2.1 ``sinusoidal_embedding_1d``: float64, [cos | sin] with ω_i = 10000^(−i/half)."""
    assert dim % 2 == 0
    half = dim // 2
    position = position.type(torch.float64)
    sinusoid = torch.outer(position, torch.pow(10000, -torch.arange(half).to(position).div(half)))
    return torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)


def diffusers_timestep_embedding(timesteps: torch.Tensor, embedding_dim: int, flip_sin_to_cos: bool = True, downscale_freq_shift: float = 0, scale: float = 1, max_period: int = 10000) -> torch.Tensor:
    """diffusers ``get_timestep_embedding`` (float32), as used by ``Timesteps(freq_dim, True, 0)`` in WanTransformer3DModel."""
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32)
    exponent = exponent / (half_dim - downscale_freq_shift)
    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
    if embedding_dim % 2 == 1:
        emb = F.pad(emb, (0, 1, 0, 0))
    return emb


def _up(x: torch.Tensor) -> torch.Tensor:
    """Upstream's ``x.float()`` (upcast half types to float32) that leaves float64 alone, for float64 diagnostic runs."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def rope_params(max_seq_len: int, dim: int, theta: float = 10000) -> torch.Tensor:
    """Wan 2.1 ``rope_params``: complex128 table [max_seq_len, dim/2] of e^{i·pos·θ^(−2j/dim)}."""
    assert dim % 2 == 0
    freqs = torch.outer(torch.arange(max_seq_len), 1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float64).div(dim)))
    return torch.polar(torch.ones_like(freqs), freqs)


def wan_rope_freqs(head_dim: int, theta: float, max_seq_len: int = 1024) -> torch.Tensor:
    d = head_dim
    return torch.cat([rope_params(max_seq_len, d - 4 * (d // 6), theta), rope_params(max_seq_len, 2 * (d // 6), theta), rope_params(max_seq_len, 2 * (d // 6), theta)], dim=1)


def rope_grid_freqs(freqs: torch.Tensor, grid: Tuple[int, int, int]) -> torch.Tensor:
    """The per-token complex multipliers [f·h·w, D/2] of Wan's ``rope_apply`` (tokens in (f, h, w) order)."""
    f, h, w = grid
    c = freqs.shape[1]
    parts = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)
    return torch.cat(
        [
            parts[0][:f].view(f, 1, 1, -1).expand(f, h, w, -1),
            parts[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
            parts[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
        ],
        dim=-1,
    ).reshape(f * h * w, -1)


def rope_apply(x: torch.Tensor, grid: Tuple[int, int, int], freqs: torch.Tensor) -> torch.Tensor:
    """Wan 2.1 ``rope_apply`` for x [B, L, heads, D]: adjacent pairs as complex numbers (float64), times the table."""
    b, s, n, d = x.shape
    freqs_i = rope_grid_freqs(freqs, grid).reshape(s, 1, -1)
    x_c = torch.view_as_complex(x.to(torch.float64).reshape(b, s, n, -1, 2))
    return torch.view_as_real(x_c * freqs_i).flatten(3).to(_up(x).dtype)  # Wan: .float()


class RMSNorm(nn.Module):
    """``torch.nn.RMSNorm`` / Wan ``WanRMSNorm`` (torch 1.13 has no nn.RMSNorm): x·rsqrt(mean(x²)+eps)·weight."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = _up(x)
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, x):
        return F.layer_norm(_up(x), self.normalized_shape, None if self.weight is None else _up(self.weight), None if self.bias is None else _up(self.bias), self.eps).to(x.dtype)


class WanAttention(nn.Module):
    def __init__(self, dim: int, heads: int, eps: float):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim), nn.Dropout(0.0)])
        self.norm_q = RMSNorm(dim, eps)  # qk_norm="rms_norm_across_heads"
        self.norm_k = RMSNorm(dim, eps)

    def forward(self, x, context=None, rope: Optional[Tuple[Tuple[int, int, int], torch.Tensor]] = None):
        context = x if context is None else context
        q = self.norm_q(self.to_q(x)).unflatten(2, (self.heads, -1))  # [B, L, H, D]
        k = self.norm_k(self.to_k(context)).unflatten(2, (self.heads, -1))
        v = self.to_v(context).unflatten(2, (self.heads, -1))
        if rope is not None:
            q = rope_apply(q, rope[0], rope[1])
            k = rope_apply(k, rope[0], rope[1])
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, L, D]
        # F.scaled_dot_product_attention (torch ≥ 2.0) written out: softmax(q kᵀ / sqrt(D)) v
        attn = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1]), dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).flatten(2, 3)
        return self.to_out[1](self.to_out[0](out))


class GELUTanhProj(nn.Module):
    """diffusers ``GELU(dim, inner, approximate='tanh')`` (the ``ffn.net.0`` of FeedForward 'gelu-approximate')."""

    def __init__(self, dim_in: int, dim_out: int):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out)

    def forward(self, x):
        return F.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    def __init__(self, dim: int, inner_dim: int):
        super().__init__()
        self.net = nn.ModuleList([GELUTanhProj(dim, inner_dim), nn.Dropout(0.0), nn.Linear(inner_dim, dim)])

    def forward(self, x):
        for m in self.net:
            x = m(x)
        return x


class WanTransformerBlock(nn.Module):
    def __init__(self, dim: int, ffn_dim: int, heads: int, eps: float):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = WanAttention(dim, heads, eps)
        self.attn2 = WanAttention(dim, heads, eps)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True)  # cross_attn_norm=True (Wan 2.1)
        self.ffn = FeedForward(dim, ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim**0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rope):
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (self.scale_shift_table + _up(temb)).chunk(6, dim=1)
        norm_hidden_states = (self.norm1(_up(hidden_states)) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, rope=rope)
        hidden_states = (_up(hidden_states) + attn_output * gate_msa).type_as(hidden_states)
        norm_hidden_states = self.norm2(_up(hidden_states)).type_as(hidden_states)
        hidden_states = hidden_states + self.attn2(norm_hidden_states, context=encoder_hidden_states)
        norm_hidden_states = (self.norm3(_up(hidden_states)) * (1 + c_scale_msa) + c_shift_msa).type_as(hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        return (_up(hidden_states) + _up(ff_output) * c_gate_msa).type_as(hidden_states)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels: int, dim: int):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features: int, hidden: int):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden)
        self.linear_2 = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.linear_2(F.gelu(self.linear_1(x), approximate="tanh"))


class WanTimeTextEmbedding(nn.Module):
    def __init__(self, dim: int, freq_dim: int, text_dim: int):
        super().__init__()
        self.freq_dim = freq_dim
        self.time_embedder = TimestepEmbedding(freq_dim, dim)
        self.time_proj = nn.Linear(dim, 6 * dim)
        self.text_embedder = PixArtAlphaTextProjection(text_dim, dim)

    def forward(self, timestep_freqs: torch.Tensor, encoder_hidden_states: torch.Tensor):
        # diffusers: the sinusoidal features are cast to the time embedder's dtype
        temb = self.time_embedder(timestep_freqs.to(self.time_embedder.linear_1.weight.dtype))
        timestep_proj = self.time_proj(F.silu(temb))
        return temb, timestep_proj, self.text_embedder(encoder_hidden_states)


class WanTransformer3DModel(nn.Module):
    """Text-to-video Wan DiT with diffusers parameter names. ``forward`` takes channels-first latents [B, C, F, H, W]."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        d, heads = cfg["dim"], cfg["numHeads"]
        self.patch_size = tuple(cfg["patchSize"])
        self.patch_embedding = nn.Conv3d(cfg["inChannels"], d, kernel_size=self.patch_size, stride=self.patch_size)
        self.condition_embedder = WanTimeTextEmbedding(d, cfg["freqDim"], cfg["textDim"])
        self.blocks = nn.ModuleList([WanTransformerBlock(d, cfg["ffnDim"], heads, cfg["eps"]) for _ in range(cfg["numLayers"])])
        self.norm_out = FP32LayerNorm(d, cfg["eps"], elementwise_affine=False)
        self.proj_out = nn.Linear(d, cfg["outChannels"] * math.prod(self.patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, d) / d**0.5)
        self.register_buffer("freqs", wan_rope_freqs(d // heads, cfg["ropeTheta"]), persistent=False)

    def timestep_freqs(self, t: float, mode: str = "wan") -> torch.Tensor:
        """[1, freqDim] sinusoidal embedding of timestep t: 'wan' = float64 (Wan 2.1), 'diffusers' = float32."""
        if mode == "wan":
            return sinusoidal_embedding_1d(self.cfg["freqDim"], torch.tensor([t], dtype=torch.float64)).float()  # Wan: .float()
        if mode == "diffusers":
            return diffusers_timestep_embedding(torch.tensor([t], dtype=torch.float32), self.cfg["freqDim"])
        raise ValueError(mode)

    @torch.no_grad()
    def forward(self, hidden_states: torch.Tensor, t: float, encoder_hidden_states: torch.Tensor, timestep_mode: str = "wan", taps: Optional[dict] = None) -> torch.Tensor:
        b, _, frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        grid = (frames // p_t, height // p_h, width // p_w)
        x = self.patch_embedding(hidden_states).flatten(2).transpose(1, 2)  # [B, L, dim], tokens in (f, h, w) order
        if taps is not None:
            taps["patch_embedding"] = x
        temb, timestep_proj, context = self.condition_embedder(self.timestep_freqs(t, timestep_mode), encoder_hidden_states)
        timestep_proj = timestep_proj.unflatten(1, (6, -1))
        if taps is not None:
            taps["temb"] = temb
            taps["context"] = context
        for i, block in enumerate(self.blocks):
            x = block(x, context, timestep_proj, (grid, self.freqs))
            if taps is not None:
                taps[f"block{i}"] = x
        shift, scale = (self.scale_shift_table + temb.unsqueeze(1)).chunk(2, dim=1)
        x = (self.norm_out(_up(x)) * (1 + scale) + shift).type_as(x)
        x = self.proj_out(x)
        x = x.reshape(b, grid[0], grid[1], grid[2], p_t, p_h, p_w, -1).permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.flatten(6, 7).flatten(4, 5).flatten(2, 3)


# ----------------------------------------------------------------------------------------------------------------
# Wan VAE decoder (diffusers AutoencoderKLWan building blocks)
# ----------------------------------------------------------------------------------------------------------------


class WanCausalConv3d(nn.Conv3d):
    """Conv3d with causal time padding: kt−1 zero frames before frame 0, none after; 'same' spatial padding."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Tuple[int, int, int]):
        kt, kh, kw = kernel_size
        super().__init__(in_channels, out_channels, kernel_size, padding=0)
        # Wan: padding=(p_t, p_h, p_w) → F.pad (p_w, p_w, p_h, p_h, 2·p_t, 0); for odd kt, 2·p_t = kt − 1.
        self._padding = (kw // 2, kw // 2, kh // 2, kh // 2, kt - 1, 0)

    def forward(self, x):
        return super().forward(F.pad(x, self._padding))


class WanRMS_norm(nn.Module):
    def __init__(self, dim: int, images: bool = False):
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones((dim, 1, 1) if images else (dim, 1, 1, 1)))

    def forward(self, x):
        return F.normalize(x, dim=1) * self.scale * self.gamma  # F.normalize eps = 1e-12


class WanResidualBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, kt: int):
        super().__init__()
        self.norm1 = WanRMS_norm(in_dim)
        self.conv1 = WanCausalConv3d(in_dim, out_dim, (kt, 3, 3))
        self.norm2 = WanRMS_norm(out_dim)
        self.conv2 = WanCausalConv3d(out_dim, out_dim, (kt, 3, 3))
        self.conv_shortcut = WanCausalConv3d(in_dim, out_dim, (1, 1, 1)) if in_dim != out_dim else nn.Identity()

    def forward(self, x):
        h = self.conv_shortcut(x)
        x = self.conv1(F.silu(self.norm1(x)))
        x = self.conv2(F.silu(self.norm2(x)))  # (dropout 0)
        return x + h


class WanResample2d(nn.Module):
    """``WanResample(mode='upsample2d')``: per frame, nearest-exact 2× then Conv2d 3×3 (padding 1)."""

    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.resample = nn.Sequential(nn.Upsample(scale_factor=(2.0, 2.0), mode="nearest-exact"), nn.Conv2d(dim, out_dim, 3, padding=1))

    def forward(self, x):
        b, c, t, h, w = x.shape
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.resample(x)
        return x.view(b, t, x.size(1), x.size(2), x.size(3)).permute(0, 2, 1, 3, 4)


class WanMidBlock(nn.Module):
    def __init__(self, dim: int, kt: int):
        super().__init__()
        self.resnets = nn.ModuleList([WanResidualBlock(dim, dim, kt)])

    def forward(self, x):
        return self.resnets[0](x)


class WanUpBlock(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, num_res_blocks: int, kt: int, upsample: bool):
        super().__init__()
        dims = [in_dim] + [out_dim] * num_res_blocks
        self.resnets = nn.ModuleList([WanResidualBlock(dims[j], dims[j + 1], kt) for j in range(num_res_blocks)])
        self.upsamplers = nn.ModuleList([WanResample2d(out_dim, out_dim)]) if upsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x)
        return x


class WanDecoder3d(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        ch, kt = cfg["channels"], cfg["temporalKernel"]
        self.conv_in = WanCausalConv3d(cfg["zDim"], ch[0], (kt, 3, 3))
        self.mid_block = WanMidBlock(ch[0], kt)
        ins = [ch[0]] + list(ch[:-1])
        self.up_blocks = nn.ModuleList([WanUpBlock(ins[i], ch[i], cfg["numResBlocks"], kt, i < len(ch) - 1) for i in range(len(ch))])
        self.norm_out = WanRMS_norm(ch[-1])
        self.conv_out = WanCausalConv3d(ch[-1], 3, (kt, 3, 3))

    def forward(self, x):
        x = self.mid_block(self.conv_in(x))
        for up in self.up_blocks:
            x = up(x)
        return self.conv_out(F.silu(self.norm_out(x)))


class WanVaeDecoder(nn.Module):
    """
    ``post_quant_conv`` + decoder with diffusers ``AutoencoderKLWan`` names, in omnirx's simplified topology. Versus the
    full Wan 2.1 VAE: no temporal upsampling (one latent frame per video frame), no attention block in the mid block
    (only ``mid_block.resnets.0``), ``numResBlocks`` residual blocks per level (Wan: num_res_blocks + 1), upsamplers
    keep their width (Wan's upsample2d halves it; the next level's first residual block changes width instead).
    Whole-sequence causal convolution, which equals Wan's chunked decode with its 2-frame feature cache.
    """

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        self.post_quant_conv = WanCausalConv3d(cfg["zDim"], cfg["zDim"], (1, 1, 1))
        self.decoder = WanDecoder3d(cfg)

    @torch.no_grad()
    def forward(self, latents: torch.Tensor, clamp: bool = False) -> torch.Tensor:
        """latents [B, zDim, F, h, w] (as the DiT produces them) → video [B, 3, F, h·s, w·s]."""
        mean = torch.tensor(self.cfg["latentsMean"], dtype=latents.dtype).view(1, -1, 1, 1, 1)
        std = torch.tensor(self.cfg["latentsStd"], dtype=latents.dtype).view(1, -1, 1, 1, 1)
        # WanPipeline: latents_std = 1 / std; latents = latents / latents_std + latents_mean
        z = latents / (1.0 / std) + mean
        out = self.decoder(self.post_quant_conv(z))
        return out.clamp(-1.0, 1.0) if clamp else out  # AutoencoderKLWan._decode clamps; omnirx clamps in toRgb24


# ----------------------------------------------------------------------------------------------------------------
# Flow matching: sigma schedule, Euler step, classifier-free guidance
# ----------------------------------------------------------------------------------------------------------------


def flow_match_sigmas(steps: int, shift: float) -> np.ndarray:
    """Wan 2.1 ``get_sampling_sigmas`` (float64) followed by the terminal 0: N + 1 values."""
    sigma = np.linspace(1, 0, steps + 1)[:steps]
    sigma = shift * sigma / (1 + (shift - 1) * sigma)
    return np.append(sigma, 0.0)


def diffusers_flow_match_euler_sigmas(steps: int, shift: float, num_train_timesteps: int = 1000) -> np.ndarray:
    """diffusers ``FlowMatchEulerDiscreteScheduler(shift=shift).set_timesteps(steps)`` sigmas (float32), for comparison."""
    ts = np.linspace(1, num_train_timesteps, num_train_timesteps, dtype=np.float32)[::-1].copy()
    s = torch.from_numpy(ts) / num_train_timesteps
    s = shift * s / (1 + (shift - 1) * s)
    sigma_max, sigma_min = s[0].item(), s[-1].item()
    timesteps = np.linspace(sigma_max * num_train_timesteps, sigma_min * num_train_timesteps, steps)
    sigmas = timesteps / num_train_timesteps
    sigmas = shift * sigmas / (1 + (shift - 1) * sigmas)
    return np.append(sigmas.astype(np.float32), np.float32(0.0))


def euler_step(sample: torch.Tensor, model_output: torch.Tensor, sigma: float, sigma_next: float) -> torch.Tensor:
    """``FlowMatchEulerDiscreteScheduler.step``: prev = sample + (σ_next − σ)·v (float32)."""
    return (_up(sample) + (sigma_next - sigma) * model_output).to(model_output.dtype)


def classifier_free_guidance(cond: torch.Tensor, uncond: torch.Tensor, scale: float) -> torch.Tensor:
    """Wan ``text2video.py``: noise_pred_uncond + guide_scale · (noise_pred_cond − noise_pred_uncond)."""
    return uncond + scale * (cond - uncond)


@torch.no_grad()
def sample_trajectory(dit: WanTransformer3DModel, noise: torch.Tensor, context: torch.Tensor, negative: torch.Tensor, steps: int, shift: float, guidance: float, timestep_mode: str = "wan") -> Tuple[np.ndarray, List[torch.Tensor]]:
    """Flow-matching Euler sampling with two-forward CFG; the DiT sees t = σ·1000 (float). Returns (sigmas, [x₀ … x_N])."""
    sigmas = flow_match_sigmas(steps, shift)
    x = noise.clone()
    traj = [x.clone()]
    for i in range(steps):
        t = float(sigmas[i]) * 1000.0
        v_cond = dit(x, t, context, timestep_mode)
        v_uncond = dit(x, t, negative, timestep_mode)
        v = classifier_free_guidance(v_cond, v_uncond, guidance)
        x = euler_step(x, v, float(sigmas[i]), float(sigmas[i + 1]))
        traj.append(x.clone())
    return sigmas, traj


# ----------------------------------------------------------------------------------------------------------------
# Loading an omnirx model directory
# ----------------------------------------------------------------------------------------------------------------


class ReferenceModel:
    def __init__(self, model_dir: str, t5_layers: Optional[int] = None, dit_layers: Optional[int] = None):
        import os

        with open(os.path.join(model_dir, "model.json")) as f:
            self.spec = json.load(f)
        with open(os.path.join(model_dir, "tokenizer.json")) as f:
            self.words = json.load(f)["words"]
        te = dict(self.spec["textEncoder"])
        tr = dict(self.spec["transformer"])
        if t5_layers is not None:
            te["numLayers"] = t5_layers
        if dit_layers is not None:
            tr["numLayers"] = dit_layers
        self.text_encoder = self._load(T5EncoderModel(te), os.path.join(model_dir, "text_encoder.safetensors"))
        self.transformer = self._load(WanTransformer3DModel(tr), os.path.join(model_dir, "transformer.safetensors"))
        self.vae = self._load(WanVaeDecoder(self.spec["vae"]), os.path.join(model_dir, "vae.safetensors"))

    @staticmethod
    def _load(module: nn.Module, path: str) -> nn.Module:
        sd = load_state_dict(path)
        own = module.state_dict()
        # a model truncated to fewer layers takes the subset of the file it names
        load_module_subset = {k: sd[k].reshape(v.shape) for k, v in own.items()}
        unexpected_layers = [k for k in sd if k not in own and not re.search(r"(block|blocks)\.\d+\.", k)]
        if unexpected_layers:
            raise KeyError(f"{path}: unexpected tensors {unexpected_layers[:5]}")
        module.load_state_dict(load_module_subset, strict=True)
        return module.eval()

    def tokenize(self, text: str) -> Tuple[np.ndarray, int]:
        return tokenize(text, self.words, self.spec["textEncoder"]["maxLength"])
