#!/usr/bin/env python3
"""
Writes the tiny action model and the fixtures of test/parity/action.test.ts:

  test/fixtures/reference/action-model/
    model.json                the tiny model's spec (test/fixtures/reference/model) with transformer.action =
                              {numKeys: 5, vectorDim: 2}; only the transformer's weights are in this directory
    transformer.safetensors   the tiny model's transformer weights + seeded action module weights
  test/fixtures/reference/action/
    fixtures.safetensors      inputs (seeded numpy) and reference outputs, float32
    fixtures.json             rollout configuration, per-chunk actions, sigma schedule, diagnostics

from the reference modules in tools/reference/action_reference.py. The existing tiny model and fixtures are not
touched. Run with the interpreter that has torch + numpy:

  /usr/bin/python3 tools/reference/make_action_fixtures.py [--base-model-dir DIR] [--model-dir DIR] [--out-dir DIR]

Deterministic: the same base model gives byte-identical files.
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
import action_reference as aref  # noqa: E402
import omnirx_reference as ref  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "test", "fixtures", "reference")
SEED = 20261201
ACTION = {"numKeys": 5, "vectorDim": 2}  # keys none, up, down, left, right; a 2-vector

# Rollout as make_causal_fixtures.py (5 chunks of 2 frames, sink 1, window 3, per-frame sigma schedules), with a
# different action per chunk: per-frame different keys inside chunks 1–3, non-zero vectors in chunks 0, 1 and 3,
# and chunk 4 all "none" with zero vectors (the test passes no actions for it: the default must equal key 0 + zeros).
ROLLOUT = {"chunkFrames": 2, "sinkFrames": 1, "localWindowFrames": 3, "chunks": 5}
LATENT_CHUNK = (1, 4, 2, 4, 6)
TEXT_LEN_REAL = 7
STEPS = 4
FRAME_SHIFTS = [2.0, 3.5]
CHUNK_ACTIONS = [
    {"keys": [1, 1], "vectors": [[0.5, -0.25], [0.5, -0.25]]},
    {"keys": [2, 4], "vectors": [[-1.0, 0.75], [0.3, 1.25]]},
    {"keys": [3, 0], "vectors": None},
    {"keys": [4, 2], "vectors": [[1.5, -0.5], [0.0, 0.0]]},
    {"keys": [0, 0], "vectors": None},
]
# Bidirectional forward: a batch of 2 samples with their own timestep, prompt and per-frame actions.
BIDI_LATENTS = (2, 4, 3, 4, 6)
BIDI_T = [737.25, 301.5]
BIDI_KEYS = [[1, 3, 0], [4, 2, 2]]


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


def write_action_model(base_dir: str, model_dir: str, rng: np.random.Generator) -> dict:
    """
    Copies the base transformer and adds the action module: key table N(0, 0.5²) (larger than the seeded runtime's
    0.02 so the fixture's actions move the output well above float32 noise), vector_proj N(0, 1/vectorDim), bias
    N(0, 0.1²) (non-zero so a dropped bias shows).
    """
    with open(os.path.join(base_dir, "model.json")) as f:
        spec = json.load(f)
    spec["id"] = "reference-tiny-action"
    spec["description"] = "Tiny seeded model with an action module (transformer only) for the action parity fixtures of tools/reference."
    spec["transformer"]["action"] = dict(ACTION)
    tensors, _ = ref.read_safetensors(os.path.join(base_dir, "transformer.safetensors"))
    for name, shape in aref.action_param_shapes(spec["transformer"]["dim"], ACTION["numKeys"], ACTION["vectorDim"]):
        if name.endswith("key_embedding.weight"):
            v = 0.5 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            v = 0.1 * rng.standard_normal(shape)
        else:
            v = rng.standard_normal(shape) * shape[1] ** -0.5
        tensors[name] = v.astype(np.float32)
    os.makedirs(model_dir, exist_ok=True)
    ref.write_safetensors(os.path.join(model_dir, "transformer.safetensors"), tensors, {"format": "pt", "generator": "tools/reference/make_action_fixtures.py", "seed": str(SEED)})
    with open(os.path.join(model_dir, "model.json"), "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    return spec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-model-dir", default=os.path.join(FIXTURES, "model"))
    ap.add_argument("--model-dir", default=os.path.join(FIXTURES, "action-model"))
    ap.add_argument("--out-dir", default=os.path.join(FIXTURES, "action"))
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(SEED)
    spec = write_action_model(args.base_model_dir, args.model_dir, rng)
    tr = spec["transformer"]
    V = ACTION["vectorDim"]
    os.makedirs(args.out_dir, exist_ok=True)
    out: dict = {}
    diag: dict = {}
    C, S, W, K = ROLLOUT["chunkFrames"], ROLLOUT["sinkFrames"], ROLLOUT["localWindowFrames"], ROLLOUT["chunks"]
    load = lambda dtype=torch.float32, inject="adaln": aref.load_action_model(args.model_dir, C, S, W, dtype, inject)  # noqa: E731

    # ---- block-causal rollout with per-chunk actions -----------------------------------------------------------
    model = load()
    text_len = spec["textEncoder"]["maxLength"]
    context = np.zeros((1, text_len, tr["textDim"]), dtype=np.float32)
    context[0, :TEXT_LEN_REAL] = rng.standard_normal((TEXT_LEN_REAL, tr["textDim"]))
    context_t = torch.from_numpy(context)
    noises = [torch.from_numpy(rng.standard_normal(LATENT_CHUNK).astype(np.float32)) for _ in range(K)]
    sigmas = frame_sigmas()
    actions = [aref.FrameActions(a["keys"], a["vectors"], V) for a in CHUNK_ACTIONS]
    vel, finals, attended, masked_vs_cached = aref.rollout(model, noises, context_t, sigmas, actions, check_masked=True)
    out["rollout.context"] = f32(context)
    for k in range(K):
        out[f"rollout.noise.{k}"] = f32(noises[k])
        out[f"rollout.latents.{k}"] = f32(finals[k])
        out[f"rollout.action_vectors.{k}"] = f32(actions[k].vectors)  # [C, vectorDim]
        for s in range(STEPS):
            out[f"rollout.velocity.{k}.{s}"] = f32(vel[k][s])
    diag["rollout.masked_vs_cached.max_rel"] = masked_vs_cached
    assert masked_vs_cached < 1e-5, f"the two reference formulations disagree: {masked_vs_cached}"
    vel64, fin64, _, _ = aref.rollout(load(torch.float64), [n.double() for n in noises], context_t.double(), sigmas, actions)
    diag["rollout.float32_vs_float64.final_latents_max_rel"] = max(rel_err(finals[k], fin64[k]) for k in range(K))
    diag["rollout.float32_vs_float64.velocity_max_rel"] = max(rel_err(vel[k][s], vel64[k][s]) for k in range(K) for s in range(STEPS))

    # sensitivity: how far an implementation that ignores actions, or injects them after time_proj, would be
    def worst(m, acts=actions):
        v2, f2, _, _ = aref.rollout(m, noises, context_t, sigmas, acts)
        return {
            "velocity_min_over_chunks_of_max_rel": min(max(rel_err(v2[k][s], vel[k][s]) for s in range(STEPS)) for k in range(K)),
            "first_step_velocity_chunk0_rel": rel_err(v2[0][0], vel[0][0]),
            "final_latents_max_rel": max(rel_err(f2[k], finals[k]) for k in range(K)),
        }

    for inject in ("none", "after_proj"):
        for k, v in worst(load(inject=inject)).items():
            diag[f"sensitivity.inject_{inject}.{k}"] = v
    no_vec = [aref.FrameActions(a["keys"], None, V) for a in CHUNK_ACTIONS]
    for k, v in worst(model, no_vec).items():
        diag[f"sensitivity.vectors_ignored.{k}"] = v
    # commit with "none" instead of the chunk's own action: moves later chunks through the cached K/V
    cache_none = [aref.FrameActions([0] * C, None, V) for _ in range(K)]
    m_commit = load()

    def rollout_commit_none():
        """The rollout with each chunk committed under "none" instead of the action it was denoised with."""
        cache = m_commit.new_cache()
        fin = []
        for k, noise in enumerate(noises):
            x = noise.clone()
            for s in range(STEPS):
                m_commit.actions = actions[k]
                v = m_commit.forward_cached(x, [float(sigmas[j, s]) * 1000.0 for j in range(C)], context_t, cache, k * C)
                x = aref.cref.euler_frames(x, v, sigmas[:, s], sigmas[:, s + 1])
            m_commit.actions = cache_none[k]
            m_commit.forward_cached(x, [0.0] * C, context_t, cache, k * C, update=True)
            fin.append(x)
        return fin

    fin_commit_none = rollout_commit_none()
    diag["sensitivity.commit_without_actions.final_latents_max_rel"] = max(rel_err(fin_commit_none[k], finals[k]) for k in range(K))

    # ---- bidirectional forward with per-frame actions (batch of 2) -------------------------------------------
    b_lat = torch.from_numpy(rng.standard_normal(BIDI_LATENTS).astype(np.float32))
    b_ctx = np.zeros((BIDI_LATENTS[0], text_len, tr["textDim"]), dtype=np.float32)
    b_ctx[0, :TEXT_LEN_REAL] = rng.standard_normal((TEXT_LEN_REAL, tr["textDim"]))
    b_ctx[1, :4] = rng.standard_normal((4, tr["textDim"]))
    b_vec = rng.standard_normal((BIDI_LATENTS[0], BIDI_LATENTS[2], V)).astype(np.float32)
    b_act = aref.FrameActions.stack([aref.FrameActions(BIDI_KEYS[b], b_vec[b], V) for b in range(BIDI_LATENTS[0])])
    b_ctx_t = torch.from_numpy(b_ctx)
    v_bidi = model.forward_bidirectional(b_lat, BIDI_T, b_ctx_t, b_act)
    out["bidi.latents"] = f32(b_lat)
    out["bidi.context"] = f32(b_ctx)
    out["bidi.action_vectors"] = f32(b_vec)  # [B, F, vectorDim]
    out["bidi.velocity"] = f32(v_bidi)
    m64 = load(torch.float64)
    b64 = aref.FrameActions.stack([aref.FrameActions(BIDI_KEYS[b], b_vec[b], V) for b in range(BIDI_LATENTS[0])])
    diag["bidi.float32_vs_float64.max_rel"] = rel_err(v_bidi, m64.forward_bidirectional(b_lat.double(), BIDI_T, b_ctx_t.double(), b64))
    for inject in ("none", "after_proj"):
        diag[f"sensitivity.bidi.inject_{inject}.velocity_rel"] = rel_err(load(inject=inject).forward_bidirectional(b_lat, BIDI_T, b_ctx_t, b_act), v_bidi)
    # one shared action row for all frames of a sample (per-sample instead of per-frame conditioning)
    first = aref.FrameActions.stack([aref.FrameActions([BIDI_KEYS[b][0]] * BIDI_LATENTS[2], np.repeat(b_vec[b][:1], BIDI_LATENTS[2], 0), V) for b in range(BIDI_LATENTS[0])])
    diag["sensitivity.bidi.per_sample_action.velocity_rel"] = rel_err(model.forward_bidirectional(b_lat, BIDI_T, b_ctx_t, first), v_bidi)
    # invariants: batch rows are independent; a first causal chunk at one timestep is the bidirectional model
    v_row1 = model.forward_bidirectional(b_lat[1:], BIDI_T[1:], b_ctx_t[1:], aref.FrameActions.stack([aref.FrameActions(BIDI_KEYS[1], b_vec[1], V)]))
    diag["bidi.row_alone_vs_batched.max_rel"] = rel_err(v_row1, v_bidi[1:])
    t0 = 611.5
    model.actions = actions[1]
    v_causal = model.forward_cached(noises[0], [t0] * C, context_t, model.new_cache(), 0)
    v_b = model.forward_bidirectional(noises[0], [t0], context_t, aref.FrameActions.stack([actions[1]]))
    diag["first_chunk.causal_vs_bidirectional.max_rel"] = rel_err(v_causal, v_b)
    assert diag["first_chunk.causal_vs_bidirectional.max_rel"] < 1e-5 and diag["bidi.row_alone_vs_batched.max_rel"] < 1e-5

    meta = {
        "generator": "tools/reference/make_action_fixtures.py",
        "torch": torch.__version__,
        "seed": SEED,
        "action": ACTION,
        "rollout": {
            **ROLLOUT,
            "latentChunkShape": list(LATENT_CHUNK),
            "steps": STEPS,
            "frameShifts": FRAME_SHIFTS,
            "sigmas": sigmas.tolist(),
            "timestepRule": "t = sigma * 1000 per frame; per-frame Euler x += (sigma_next - sigma) * v; commit at t = 0 with the chunk's actions",
            "attendedFrames": attended,
            "textLen": text_len,
            "actions": [{"keys": a["keys"], "hasVectors": a["vectors"] is not None} for a in CHUNK_ACTIONS],
        },
        "bidirectional": {"latentShape": list(BIDI_LATENTS), "t": BIDI_T, "keys": BIDI_KEYS, "textLen": text_len},
        "diagnostics": diag,
    }
    ref.write_safetensors(os.path.join(args.out_dir, "fixtures.safetensors"), out, {"generator": "tools/reference/make_action_fixtures.py"})
    with open(os.path.join(args.out_dir, "fixtures.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    total = sum(v.size for v in out.values()) * 4
    print(f"wrote {args.model_dir} and {len(out)} tensors ({total} bytes) to {args.out_dir}")
    for k, v in sorted(diag.items()):
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
