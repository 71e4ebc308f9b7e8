"""
Trains the embedded default model (issue 8) on the procedural world, in two stages (three with ``--text-steps``), with the reference modules of
tools/reference (no second model definition; see training_forward.py), and writes a complete model directory.

Stage ``vae`` — the conv VAE (``WanVaeEncoder`` + ``WanVaeDecoder``, 4× spatial, 16 latent channels) on single
frames: loss = MSE(decode(μ + σ·ε), x) + β·KL(N(μ, σ²) ‖ N(0, 1)) (Kingma & Welling 2014), x in [−1, 1]. The causal
convolutions' temporal taps other than the current frame are held at zero (zero init, gradients masked, no weight
decay): every frame of the world is determined by itself, so a per-frame VAE loses nothing, its latents of a frame do
not depend on the frames before (clips can be cut and re-joined freely for the DiT), and the runtime's streaming
decode is seamless by construction. Afterwards the per-channel mean/std of μ over held-out clips become ``latentsMean``/``latentsStd``
(the DiT sees (μ − mean)/std, as WanPipeline).

Stage ``text`` (optional, ``--text-steps N``; the recipe has none) — the T5-style text encoder learns the prompts'
scene attributes (room colour, agent colour and shape, block count and colour) for N steps (text_pretrain.py, which
says why). ``--text-encoder frozen`` then keeps it fixed through the DiT phases; ``joint`` (the default) trains it
through the DiT's loss, with no objective of its own, from random weights when there is no text stage.

Stage ``dit`` — the block-causal Wan DiT with per-frame action conditioning (``ActionCausalWanModel``) and the
text encoder (jointly, by default), with flow matching (rectified flow, Lipman et al. 2023 / Liu et al. 2023): x_σ = (1 − σ)·x₀ + σ·ε, target v = ε − x₀,
loss = mean over frames with σ > 0 of ‖v̂ − v‖². σ = shift·u / (1 + (shift − 1)·u), u ~ U(0, 1), shift 3 (the
sampler's flowShift). Per-frame independent noise levels (diffusion forcing, Chen et al. 2024), so one checkpoint
serves both samplers:

* causal batches (p = ``--causal-share``, default ``P_CAUSAL`` 0.6, 4 clips × 8 frames): the block-causal mask of world sessions (chunk 1, sink 1, window 6 latent
  frames); σ independent per frame, and with p = 0.5 a clean prefix (σ = 0, as committed frames); with p = 0.5 the
  clip is [frame 0 (the sink), frames g+1 … g+F−1] of a long rollout at their absolute RoPE positions (g ≤ ``MAX_GAP``),
  as a session sees its sink from far behind;
* bidirectional batches (2 clips × 16 frames, the runtime's T2V length): full attention as T2V sampling; one σ per
  clip (p = 0.5) or per frame;
* image batches (p = ``--image-share``, default 0; 32 scenes × 1 frame, the same token count): one-frame text-to-image,
  what a world session's first chunk is (no history), with 32 scenes and prompts per step against a clip batch's 2–4
  (joint image-video training, as Wan 2.1 and Imagen Video). The other batches keep the 60 / 40 split of the rest.
  Scenes are a function of the data index alone (not of the seed), as the clips' always were.
* teacher-forcing batches (only in the teacher-forcing phase, p = ``--teacher-forcing-share``; 2 clips × 8 frames):
  each clip's 8 clean frames followed by the same 8 frames noised, σ independent per frame, under
  training_forward.teacher_forcing_mask: the clean frames attend as the world session's committed KV cache does, and
  every noisy frame sees only the clean frames its chunk attends to (sink, window), so all 8 frames are trained as a
  rollout denoises them: from a clean history (Self Forcing's teacher forcing, Huang et al. 2025). In the causal
  batches above only the first noisy frame after a clean prefix has that history. Loss on the noisy frames only.
  With p = ``--error-recycling`` (default 0) a teacher-forcing batch's history is not the clean frames but the
  model's own one-step prediction of each of them (``recycled_history``), so the next frame is learnt from a history
  that holds the model's errors, as a session's committed frames do (error recycling, Stable Video Infinity, Li et
  al. 2025); the target stays the true frame. With ``--teacher-forcing-start spawn`` (the default) every scene of the
  phase, teacher-forcing or not, starts its agent at the world's spawn point (procedural_world.SPAWN, the room's
  centre) instead of a random free position, so a clip's first frame — what a world session's first chunk and a T2V
  clip draw from the prompt alone — shows the agent at the centre moved by the first action (one of five places) rather
  than anywhere free; the earlier phases keep random starts unless ``--start spawn`` (START).

Phases of stage ``dit`` (the shipped model's order, first made in three commands): a base phase with an
unweighted loss, then agent-weighted fine-tune phases (``--finetune-steps`` / ``--finetune-shares``, default two), each
from the previous phase's weights with a fresh AdamW, warm-up and cosine schedule and a new data seed (phase k: seed + k; the seed draws
the batch layouts, noise levels and dropout, while the scenes at a data index stay the same), and a last
agent-weighted teacher-forcing phase (``--teacher-forcing-steps``, the recipe's 1600; data seed S + fine-tune phases + 1)
from the weights rounded to float16 as they are written (so the same phase run with ``--init`` on a written model and
``--seed S + fine-tune phases`` gives the same tensors; model.json and the safetensors metadata name the runs). Agent weighting (``--agent-weight`` λ of the fine-tune, default
``AGENT_WEIGHT``; ``--base-agent-weight`` of the base phase, default 0): the agent (12×12 px since 2026-12-05, 8×8 before) covers 9–16 (8 px: 4–9) of
the 256 latent cells of a frame, so an unweighted loss is dominated by the static room and a model can reach a low loss while
drawing no agent (the first 100-minute run did exactly that). With λ > 0 each latent cell whose 4×4 pixel block meets
the agent's box grown by 2 px weighs 1 + λ in the frame's mean (the weighted mean, so the loss scale stays
comparable). Weighting from the first step draws the agent more often but follows actions far worse at equal steps
(docs/model-card.md), hence the unweighted base phase.

Speed (``--precision``, ``--reuse``): the DiT and text-encoder forward runs under torch's CPU autocast to bfloat16
(matrix products in bf16 on the CPU's AVX512_BF16 units; weights, AdamW state, the loss and its reduction stay float32),
and with ``--reuse N`` each encoded batch of clips serves N consecutive steps with fresh noise levels, noise and dropout
(default 1, a fresh batch per step: one-command runs with reuse 2 followed actions less often, docs/model-card.md).
Measured on 2 cores (2026-12-02): about 0.85 s per bf16 DiT step, against 3.4 s in float32 on the same machine
(1.3–1.7 s on earlier machines of this kind). On a CPU without AVX512_BF16 pass ``--precision float32``.

Conditioning dropout: the prompt becomes "" (the runtime's default negative prompt) with p = ``P_DROP_TEXT``, for
classifier-free guidance; all action keys become 0 ("none") with p = ``P_DROP_ACTION`` so a sampler without actions
(T2V) still moves the agent. The action vectors stay 0 (the world has no continuous action; the projection's bias is
trained).

Reproducible: torch and numpy are seeded, the data is a function of (seed, step, sample), and the step counts are
fixed before the learning-rate schedule leaves its warm-up: the recipe's (``RECIPE_STEPS``), given
(``--vae-steps``/``--dit-steps``/``--finetune-steps``), or derived from ``--budget-minutes`` by timing the first steps
(logged; ``repeat`` in train_summary.json passes them back to repeat a run exactly). ``--precision float32`` gives
the arithmetic of the script before bf16, except that a batch's clips are encoded in one VAE call since 2026-12-02
(latents < 1e-5 apart, so the bytes of runs made before then are not rewritten exactly).

``--init DIR`` continues from a model directory this script wrote (all four modules and the VAE statistics; the VAE
and text stages are skipped), through the same phases.

``--resume`` continues a stopped run in ``--out`` from its ``checkpoint.pt`` (checkpoint.py): written at the end of
every stage and phase but the last and every ``--checkpoint-minutes`` (default 10) inside a DiT phase, it holds the
weights, the optimizer, the step and every random stream, so with fixed step counts the resumed run writes the bytes
of the run never stopped. The command must repeat the run's flags (a different one is refused by name); a finished run
removes the file.

Usage (repository root, Debian's PyTorch):

    nice -n 10 /usr/bin/python3 tools/train/train.py --out DIR                                 # the defaults (~1.5 h; the shipped weights: recipe.py)
    nice -n 10 /usr/bin/python3 tools/train/train.py --out /tmp/omnirx-smoke --smoke          # ~2 min

Writes into --out: model.json ("weights": "trained"), tokenizer.json, text_encoder/transformer/vae.safetensors,
train_log.jsonl (one JSON object per step, stage "vae", "text", "dit", "finetune", "finetune2" or "teacher"; DiT steps also give data_s,
the batch's generation + VAE encoding), loss_curve.png and train_summary.json (its ``wall_s`` counts, for a resumed
run, the time of the work kept: the stopped run's up to its checkpoint and the resumed run's); checkpoint.pt while it
runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import default_model  # noqa: E402
import procedural_world as world  # noqa: E402
import training_forward as tf  # noqa: E402
from checkpoint import CheckpointError, RunCheckpoint, code_digests  # noqa: E402
from loss_plot import plot_losses  # noqa: E402
from text_pretrain import ATTRIBUTES, SEED_TEXT, attribute_batch_loss, attribute_heads, held_out_accuracy, pretrain_text_encoder  # noqa: E402
from training_forward import aref, cref, ref  # noqa: E402

VAE_BATCH, VAE_LR, VAE_BETA = 8, 1e-3, 1e-4
CAUSAL_FRAMES, CAUSAL_BATCH = 8, 4
"""Causal batches: 8 frames = a 1-frame chunk with the sink and the full 6-frame window before it."""
BIDIR_FRAMES, BIDIR_BATCH = 16, 2
"""Bidirectional batches: the runtime's default T2V length (16 frames), at the same token count per step."""
TEACHER_BATCH = 2
"""Teacher-forcing batches (``--teacher-forcing-share``): 2 clips of CAUSAL_FRAMES, each as its clean frames followed
by the same frames noised (training_forward.teacher_forcing_mask), the same token count as the other clip batches."""
IMAGE_BATCH = 32
"""Image batches (``--image-share``): 32 single frames of 32 scenes, the same token count as the clip batches."""
DIT_LR = 3e-4
"""Peak learning rate of the DiT phases (``--dit-lr``). 1e-3 reached a 22 % lower base-phase loss but, with the text
encoder trained jointly, lost the room colour in its single tokens and drew the prompt's colours far less often
(docs/model-card.md, "Learning rate"); 2e-3 rose above 3e-4's loss within 150 steps."""
CHUNK, SINK, WINDOW = 1, 1, 6
"""World-session defaults of the runtime (docs/sessions.md): 1-frame chunks, 1 sink frame, 6-frame window."""
SHIFT = 3.0
P_CAUSAL, P_DROP_TEXT, P_DROP_ACTION, MAX_GAP = 0.6, 0.1, 0.2, 100
WARMUP = 50
AGENT_WEIGHT = 10.0
"""Default λ of the agent weighting in the fine-tune phases (the 35-minute fine-tune of the first shipped model used it:
prompt colour 0.13 → 0.41)."""
FINETUNE_SHARES = (0.24, 0.28)
"""Fractions of the DiT time (budget mode) given to the agent-weighted fine-tune phases, as the shipped model's 1300
and 1500 of 5339 DiT steps (the base phase gets the rest)."""
REUSE = 1
"""DiT steps that share one encoded batch of clips. The recipe takes a fresh batch per step: one-command runs with 2
followed actions less often than the three float32 commands' weights, one without it as often (docs/model-card.md,
"One command" and "Image batches"; clip reuse and image batches not tested apart)."""
RECIPE_STEPS = {"vae": 3433, "dit": 2539, "finetune": (1300, 1500), "teacher": 1600}
"""Step counts of a run without ``--budget-minutes``: those of the shipped model (VAE, unweighted base phase, the two
agent-weighted fine-tune phases, the teacher-forcing phase). With the defaults (bf16 autocast, a fresh batch per step):
94.9 minutes on 2 cores up to the teacher-forcing phase, which took 23.8 more on a quiet machine, about 119 in all
(docs/model-card.md, "Recipe")."""
TEACHER_SHARE = 0.75
"""Default fraction of the teacher-forcing phase's batches (``--teacher-forcing-steps``) that are teacher-forcing clips;
the rest keep the other phases' mix (causal and bidirectional clips). At share 1 the phase drew the prompt's colours
less often (paired at 4 seeds, −0.068 against 0.75, with action following alike; docs/model-card.md, "Teacher
forcing")."""
TEACHER_LR = 1e-4
"""Default peak learning rate of the teacher-forcing phase (``--teacher-forcing-lr``): a third of the other phases'. At
3e-4 the phase drew the prompt's colours in T2V far less often (paired at 4 seeds, docs/model-card.md, "Teacher
forcing")."""
VAE_SHARE = 0.15
"""Fraction of the training budget given to the VAE stage; the rest goes to the DiT + text encoder."""
TEXT_STEPS = 0
TEXT_ENCODER = "joint"
"""The recipe's text encoder: no text-encoder stage, trained jointly through the DiT's loss. ``--text-steps 500
--text-encoder frozen`` (text_pretrain.py, about 100 s more) drew the prompt's colours more often in T2V but the agent
less often, and followed actions less often, in one run (docs/model-card.md, "Text encoder"), so it is an option."""
TEACHER_START = "spawn"
"""Default start of the agent in the teacher-forcing phase's scenes (``--teacher-forcing-start``): the world's spawn
point (procedural_world.SPAWN, the room's centre), while the earlier phases draw it at random. Against the same phase
from random starts, paired at 4 seeds, every figure is within its interval (exactly one agent +0.050 [−0.003, +0.107],
prompt colour +0.014, block count +0.021, action following −0.017): shipped for the agent, the weakest figure, on
a point gain not yet established, which lies in T2V's later frames (the first frame holds one agent no more often;
docs/model-card.md, "Spawn point")."""
START = "random"
"""Default start of the agent in the base and fine-tune phases' scenes (``--start``): a random free position, so the
model sees the agent drawn anywhere in a clip's first frame; ``spawn`` starts every scene of those phases at the
world's spawn point too, as the teacher-forcing phase's (TEACHER_START). The whole recipe with ``spawn`` (105 minutes; 2026-12-04, 8-px
world), paired at 4 seeds with the weights shipped then, followed actions more often (0.693, +0.208 [+0.094, +0.306]) but drew the
prompt's colours less often (0.531, −0.100 [−0.160, −0.037]), both established; with ``--text-steps 500 --text-encoder
frozen`` (100 minutes) it kept the colours within their interval (−0.046) and the action following (+0.167) but drew
the prompt's blocks far less often (block count 0.061, −0.132 [−0.220, −0.031]). So the default stays random
(docs/model-card.md, "Spawn point"). With the text stage, its attribute loss and a block weight of 10 (recipe.py's
first run), ``spawn`` lifted all three target figures of the recipe's output (action following +0.081, agent present
+0.075, both beyond their intervals; "Text encoder"), so recipe.py gives it since 2026-12-07."""
CHECKPOINT_MINUTES = 10.0
"""Default minutes between checkpoints inside a DiT phase (``--checkpoint-minutes``): a stopped recipe run loses at
most that much (about 800 DiT steps) besides the stage it was in if that was the VAE's or the text encoder's."""
RECYCLE_STREAM = 3
"""Key of the error-recycling streams (``--error-recycling``): numpy's [seed, 3] draws which batches and the σ, torch's
seed + 3 the noise, apart from the phase's own streams."""
SEED_VAE, SEED_DIT, SEED_STATS, SEED_IMAGE = 10_000_000, 20_000_000, 30_000_000, 40_000_000
"""Clip-seed ranges of the stages (disjoint, so the VAE statistics are measured on clips it was not trained on)."""


def lr_at(step: int, total: int, base: float) -> float:
    """Linear warm-up over WARMUP steps, then cosine decay to 0.1·base at `total` (before WARMUP it ignores `total`)."""
    if step < WARMUP:
        return base * (step + 1) / WARMUP
    p = min(1.0, (step - WARMUP) / max(1, total - WARMUP))
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def to_video(frames: np.ndarray) -> torch.Tensor:
    """uint8 [B, F, H, W, 3] → float32 [B, 3, F, H, W] in [−1, 1]."""
    return torch.from_numpy(frames).permute(0, 4, 1, 2, 3).float() / 127.5 - 1.0


def optimizer_step(opt: torch.optim.Optimizer, params: List[torch.Tensor], loss: torch.Tensor, lr: float) -> float:
    """One AdamW step of either stage at learning rate ``lr`` (times a parameter group's ``lr_scale``, if it has one):
    gradients of ``loss``, clipped to global norm 1."""
    for g in opt.param_groups:
        g["lr"] = lr * g.get("lr_scale", 1.0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return lr


def sample_sigma(rng: np.random.Generator, n: int) -> np.ndarray:
    """n shifted-uniform noise levels σ = s·u / (1 + (s − 1)·u), u ~ U(0, 1), s = SHIFT (float32)."""
    u = rng.random(n)
    return (SHIFT * u / (1 + (SHIFT - 1) * u)).astype(np.float32)


class Budget:
    """Step counts: fixed, or derived after `probe` timed steps from the seconds left for the stage."""

    def __init__(self, fixed: Optional[int], seconds: float, minimum: int, probe: int = 20):
        self.total, self.seconds, self.minimum, self.probe = fixed, seconds, minimum, probe
        self.t0: Optional[float] = None
        self.step_s: Optional[float] = None

    def tick(self, step: int, start: float) -> None:
        """Call after step `step` (0-based) finished; fixes the total after the probe (step 0 is warm-up, not timed)."""
        if step == 0:
            self.t0 = time.time()
        elif step == self.probe:
            self.step_s = (time.time() - self.t0) / self.probe
            if self.total is None:
                left = self.seconds - (time.time() - start)
                self.total = max(self.minimum, step + 1 + max(0, int(left / self.step_s)))
            assert self.total > step and step < WARMUP

    def done(self, step: int) -> bool:
        return self.total is not None and step >= self.total


def train_vae(cfg: dict, seed: int, budget: Budget, log) -> Tuple[cref.WanVaeEncoder, ref.WanVaeDecoder]:
    """Stage vae: encoder + decoder on VAE_BATCH single frames per step (see module docstring)."""
    torch.manual_seed(seed)
    enc, dec = cref.WanVaeEncoder(cfg), ref.WanVaeDecoder(cfg)
    for mod in (enc, dec):
        for m in mod.modules():
            if isinstance(m, ref.WanCausalConv3d) and m.weight.shape[2] > 1:
                current = torch.zeros_like(m.weight)
                current[:, :, -1] = 1.0
                with torch.no_grad():
                    m.weight.mul_(current)
                m.weight.register_hook(lambda g, keep=current: g * keep)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.AdamW(params, lr=VAE_LR, weight_decay=0.0)
    start, step = time.time(), 0
    while not budget.done(step):
        frames = np.stack([world.make_clip(SEED_VAE + step * VAE_BATCH + j, 1).frames for j in range(VAE_BATCH)])
        x = to_video(frames)
        mu, logvar = tf.vae_moments(enc, x)
        logvar = logvar.clamp(-30.0, 20.0)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        recon = torch.nn.functional.mse_loss(tf.vae_decode_raw(dec, z), x)
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).mean()
        loss = recon + VAE_BETA * kl
        lr = optimizer_step(opt, params, loss, lr_at(step, budget.total or 10**9, VAE_LR))
        log({"stage": "vae", "step": step, "loss": loss.item(), "recon_mse": recon.item(), "kl": kl.item(), "lr": lr, "elapsed_s": round(time.time() - start, 2)})
        budget.tick(step, start)
        step += 1
    return enc.eval(), dec.eval()


@torch.no_grad()
def latent_stats(enc: cref.WanVaeEncoder, clips: int = 32) -> Tuple[List[float], List[float]]:
    """Per-channel mean and std of the un-normalised latent mean μ over held-out clips (4 frames each)."""
    frames = np.stack([world.make_clip(SEED_STATS + i, 4).frames for i in range(clips)])
    mu, _ = tf.vae_moments(enc, to_video(frames))
    mu = mu.transpose(0, 1).reshape(mu.shape[1], -1).double()
    return mu.mean(1).tolist(), mu.std(1).clamp_min(1e-3).tolist()


class DitClips:
    """
    The encoded clips of one data index (``reuse`` consecutive DiT steps share them): normalised latents x₀
    [B, 16, F, 16, 16], agent cells and block cells [B, F, 16, 16], action keys [B, F] int64 and prompts, for a causal (B, F =
    CAUSAL_BATCH, CAUSAL_FRAMES; p = ``causal_share`` of the clip batches), bidirectional (BIDIR_BATCH, BIDIR_FRAMES), with p = ``image_share`` image
    (IMAGE_BATCH, 1) or with p = ``teacher_share`` teacher-forcing (TEACHER_BATCH, CAUSAL_FRAMES; the sink gap as
    causal) layout at RoPE frame positions ``positions``. ``rng`` (seeded by (seed, index)) has drawn the
    layout; its stream continues into the first use's noise levels and dropout, so ``reuse`` 1 is the data of the
    script before clips were shared, and ``image_share`` and ``teacher_share`` 0 draw nothing more (the data of the
    script before images).
    An image batch is one-frame text-to-image at RoPE position 0, as the first chunk of a world session (no history):
    32 scenes and prompts against a clip batch's 2–4, at the same token count (joint image-video training, as Wan 2.1
    and Imagen Video). The scenes depend on the data index only, not on ``seed``.
    """

    def __init__(self, index: int, seed: int, enc: cref.WanVaeEncoder, image_share: float = 0.0, teacher_share: float = 0.0, spawn: bool = False, causal_share: float = P_CAUSAL):
        self.rng = np.random.default_rng([seed, index])
        image = image_share > 0 and bool(self.rng.random() < image_share)
        teacher = not image and teacher_share > 0 and bool(self.rng.random() < teacher_share)
        self.causal = not image and (teacher or bool(self.rng.random() < causal_share))
        frames, batch = (1, IMAGE_BATCH) if image else (CAUSAL_FRAMES, TEACHER_BATCH) if teacher else (CAUSAL_FRAMES, CAUSAL_BATCH) if self.causal else (BIDIR_FRAMES, BIDIR_BATCH)
        self.mode = "image" if image else "teacher_forcing" if teacher else "causal" if self.causal else "bidirectional"
        gap = int(self.rng.integers(1, MAX_GAP + 1)) if self.causal and self.rng.random() < 0.5 else 0
        self.positions = [0] + list(range(gap + 1, gap + frames)) if gap else list(range(frames))
        first = SEED_IMAGE + index * IMAGE_BATCH if image else SEED_DIT + index * max(CAUSAL_BATCH, BIDIR_BATCH)
        self.clips = [world.make_clip(first + j, self.positions[-1] + 1, spawn) for j in range(batch)]
        # the VAE is per-frame: the selected frames encode alone, all clips in one encoder call (oneDNN's conv3d is
        # several times slower per clip at batch 1; the latents differ from per-clip calls by < 1e-5, summation order)
        self.latents = enc(to_video(np.stack([c.frames[self.positions] for c in self.clips])))
        self.masks = torch.from_numpy(np.stack([agent_cells(c.positions[self.positions]) for c in self.clips]))
        self.blocks = torch.from_numpy(np.stack([np.repeat(block_cells(c.scene.obstacles)[None], frames, 0) for c in self.clips]))


class DitBatch:
    """
    One DiT step's batch from shared clips: x₀ [B, 16, F, 16, 16], σ [B, F], keys [B, F] int64 (all 0 with p =
    P_DROP_ACTION), B prompts ("" with p = P_DROP_TEXT), agent and block cells, the attention mode and the F RoPE positions.
    Use ``use`` 0 of the clips draws from their own stream; later uses from one seeded by (seed, index, use).
    """

    def __init__(self, clips: DitClips, index: int, use: int, seed: int):
        rng = clips.rng if use == 0 else np.random.default_rng([seed, index, use])
        self.causal, self.positions, self.mode = clips.causal, clips.positions, clips.mode
        frames = len(clips.positions)
        keys, self.prompts, sig = [], [], []
        for clip in clips.clips:
            k = clip.actions[clips.positions].copy()
            keys.append(np.zeros_like(k) if rng.random() < P_DROP_ACTION else k)
            self.prompts.append("" if rng.random() < P_DROP_TEXT else clip.prompt)
            if self.causal:  # teacher forcing: the noisy copy's levels, never a clean prefix (its clean copy is the history)
                s = sample_sigma(rng, frames)
                if self.mode == "causal" and rng.random() < 0.5:
                    s[: int(rng.integers(1, frames))] = 0.0
            else:
                s = sample_sigma(rng, frames) if rng.random() < 0.5 else np.repeat(sample_sigma(rng, 1), frames)
            sig.append(s)
        self.x0 = clips.latents
        self.keys = torch.from_numpy(np.stack(keys)).long()
        self.sigma = torch.from_numpy(np.stack(sig))
        self.agent, self.blocks = clips.masks, clips.blocks


def recycled_history(
    dit: aref.ActionCausalWanModel, batch: DitBatch, ctx: torch.Tensor, rng: np.random.Generator, gen: torch.Generator
) -> torch.Tensor:
    """
    The history of a teacher-forcing ``batch`` as the model makes it: each clean frame of batch.x0 [B, 16, F, 16, 16]
    noised to its own σ (``sample_sigma`` of ``rng``, noise of ``gen``) and denoised in one step, x̂₀ = x_σ − σ·v̂, with
    v̂ the model's velocity given the clean frames before it (teacher forcing, the batch's actions, text states ``ctx``
    [B, Lt, textDim]); no gradient. A world session's last Euler step is such a one-step prediction (from σ = 0.75 at
    2 steps and flow shift 3), made from the model's own earlier frames, so its committed frames carry the model's
    errors; the teacher-forcing loss given this history teaches the next frame to correct them. A one-step form of
    error recycling (Stable Video Infinity, Li et al. 2025, arXiv 2510.09212: errors are injected into the history,
    the target stays the data), without its replay memory. Returns float32 [B, 16, F, 16, 16].
    """
    b, _, frames = batch.x0.shape[:3]
    sig = torch.from_numpy(np.stack([sample_sigma(rng, frames) for _ in range(b)]))
    s = sig[:, None, :, None, None]
    xs = (1 - s) * batch.x0 + s * torch.randn(batch.x0.shape, generator=gen)
    t_in = torch.cat([torch.zeros_like(sig), sig * 1000.0], dim=1)
    keys_in = batch.keys.repeat(1, 2)
    with torch.no_grad():
        v = tf.dit_velocity(dit, torch.cat([batch.x0, xs], dim=2), t_in, ctx.detach(), keys_in, torch.zeros(*keys_in.shape, 2), "teacher_forcing", list(batch.positions) * 2)
    return xs - s * v[:, :, frames:].float()


def agent_cells(centres: np.ndarray, grid: int = 16, stride: int = 4, margin: int = 2) -> np.ndarray:
    """[F, grid, grid] float32: 1 where a latent cell's stride×stride pixel block meets the agent's box (centre ± AGENT/2)
    grown by ``margin`` px, for agent centres [F, 2] (x, y) in pixels; else 0."""
    out = np.zeros((len(centres), grid, grid), np.float32)
    h = world.AGENT // 2 + margin
    for f, (x, y) in enumerate(centres):
        c0, c1 = max(0, (int(x) - h) // stride), min(grid - 1, (int(x) + h - 1) // stride)
        r0, r1 = max(0, (int(y) - h) // stride), min(grid - 1, (int(y) + h - 1) // stride)
        out[f, r0 : r1 + 1, c0 : c1 + 1] = 1.0
    return out


def block_cells(rects: Sequence[Tuple[int, int, int, int]], grid: int = 16, stride: int = 4) -> np.ndarray:
    """[grid, grid] float32: 1 where a latent cell's stride×stride pixel block meets one of the obstacle rectangles
    (x0, y0, x1, y1) in pixels, exclusive (procedural_world.Scene.obstacles); else 0. Obstacles are static, so one mask
    serves every frame of a clip."""
    out = np.zeros((grid, grid), np.float32)
    for x0, y0, x1, y1 in rects:
        out[y0 // stride : min(grid, (y1 - 1) // stride + 1), x0 // stride : min(grid, (x1 - 1) // stride + 1)] = 1.0
    return out


def new_dit(spec: dict, seed: int) -> Tuple[ref.T5EncoderModel, aref.ActionCausalWanModel]:
    """Freshly initialised text encoder and action DiT of the spec (torch seeded with seed + 1)."""
    torch.manual_seed(seed + 1)
    return ref.T5EncoderModel(spec["textEncoder"]), aref.ActionCausalWanModel(spec["transformer"], CHUNK, SINK, WINDOW)


def train_dit(
    spec: dict,
    words: List[str],
    enc: cref.WanVaeEncoder,
    modules: Tuple[ref.T5EncoderModel, aref.ActionCausalWanModel],
    seed: int,
    budget: Budget,
    log,
    agent_weight: float,
    stage: str = "dit",
    reuse: int = 1,
    bf16: bool = False,
    image_share: float = 0.0,
    train_text: bool = True,
    lr: float = DIT_LR,
    teacher_share: float = 0.0,
    recycle: float = 0.0,
    spawn: bool = False,
    text_lr: Optional[float] = None,
    text_heads: Sequence[torch.nn.Module] = (),
    text_aux_weight: float = 0.0,
    ckpt: Optional[RunCheckpoint] = None,
    block_weight: float = 0.0,
    causal_share: float = P_CAUSAL,
) -> Tuple[ref.T5EncoderModel, aref.ActionCausalWanModel]:
    """Stage dit: DiT + text encoder ``modules`` (trained in place) with flow matching and diffusion forcing (see module
    docstring), a fresh AdamW and learning-rate schedule over the budget's steps, data of ``seed``. Each encoded batch
    of clips serves ``reuse`` consecutive steps (fresh σ, noise and dropout each); ``image_share`` of the batches are
    single frames and ``teacher_share`` teacher-forcing clips (DitClips; each noisy frame denoised from the clean frames
    before it, the loss on the noisy copy only). ``bf16``: the forward runs under
    torch's CPU autocast to bfloat16 (matrix products in bf16, weights, optimizer and loss in float32). ``train_text``
    False: the text encoder stays frozen (eval mode, no gradient, not in the optimizer). ``lr``: the peak learning rate of
    the schedule (lr_at). ``recycle``: the fraction of teacher-forcing batches whose history is the model's own one-step
    prediction (``recycled_history``), drawn from streams of their own (seeded by ``seed``), so the batches, noise and
    dropout are those of the same phase without it. ``spawn``: every scene starts the agent at the world's spawn point
    (procedural_world.SPAWN) instead of a random free position. ``text_lr``: the text encoder's peak learning rate when it
    is trained (None: ``lr``), on the same warm-up and schedule; AdamW is elementwise, so two groups at one rate step as
    one group does. ``text_aux_weight`` λ > 0 (with ``train_text``): each step's loss adds λ times the attribute loss
    of BATCH fresh grammar prompts through ``text_heads`` (text_pretrain.attribute_batch_loss; the heads join the text
    encoder's group), drawn from a stream of their own, so the phase's batches, noise and dropout are those without it;
    logged as ``attr_loss`` beside the DiT's ``loss``. ``block_weight``: the loss weight of a latent cell the blocks
    cover is 1 + block_weight (added to the agent's 1 + agent_weight where both meet), so the blocks, 2–7 % of a
    frame, weigh in the loss as the agent does in the fine-tunes. ``causal_share``: the fraction of the clip batches (not image or
    teacher-forcing ones) that are causal, the rest bidirectional (DitClips). ``ckpt``: the run's checkpoint (checkpoint.py): the phase goes
    on from the state it holds for ``stage``, if any, and writes one whenever it is due at a step that starts a fresh
    data index (the step's batch is then a function of the step alone); the schedule's total must be known by then,
    so in budget mode none is written before the probe has fixed it."""
    t5, dit = modules
    t5.train(train_text), dit.train()
    aux = train_text and text_aux_weight > 0
    heads_params = [p for h in text_heads for p in h.parameters()] if aux else []
    text_params = list(t5.parameters()) + heads_params if train_text else []
    params = text_params + list(dit.parameters())
    groups = [{"params": text_params, "lr_scale": (lr if text_lr is None else text_lr) / lr}] if text_params else []
    opt = torch.optim.AdamW(groups + [{"params": list(dit.parameters())}], lr=lr, betas=(0.9, 0.99), weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed + 2)
    recycle_rng, recycle_gen = np.random.default_rng([seed, RECYCLE_STREAM]), torch.Generator().manual_seed(seed + RECYCLE_STREAM)
    aux_rng = np.random.default_rng([seed, SEED_TEXT, 2])
    max_len = spec["textEncoder"]["maxLength"]
    start, step, clips = time.time(), 0, None
    resumed = ckpt.progress(stage) if ckpt is not None else None
    if resumed is not None:  # its fields were checked with the checkpoint (resume_problem)
        st = resumed["state"]
        step, budget.total, budget.step_s, start = st["step"], st["total"], st["step_s"], time.time() - st["elapsed_s"]
        budget.t0 = None if st["t0_ago"] is None else time.time() - st["t0_ago"]
        try:
            opt.load_state_dict(resumed["opt"])
            for group in opt.param_groups:  # load_state_dict takes a tensor of any shape: a wrong one fails only at opt.step
                for p in group["params"]:
                    for key, v in opt.state.get(p, {}).items():
                        if key != "step" and v.shape != p.shape:
                            raise ValueError(f"AdamW {key} of shape {tuple(v.shape)} for a parameter of shape {tuple(p.shape)}")
            gen.set_state(resumed["gens"]["gen"])
            recycle_gen.set_state(resumed["gens"]["recycle_gen"])
            aux_rng.bit_generator.state, recycle_rng.bit_generator.state = st["aux_rng"], st["recycle_rng"]
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{ckpt.path}: the state of phase {stage} does not fit it ({type(e).__name__}: {str(e)[:300]})") from None
    while not budget.done(step):
        if ckpt is not None and step > 0 and step % reuse == 0 and budget.total is not None and ckpt.due():
            state = {"step": step, "total": budget.total, "step_s": budget.step_s, "elapsed_s": time.time() - start,
                     "t0_ago": None if budget.t0 is None else time.time() - budget.t0,
                     "aux_rng": aux_rng.bit_generator.state, "recycle_rng": recycle_rng.bit_generator.state}
            ckpt.save_progress(stage, state, opt, {"gen": gen, "recycle_gen": recycle_gen})
        t_step = time.time()
        index, use = divmod(step, reuse)
        if use == 0:
            clips = DitClips(index, seed, enc, image_share, teacher_share, spawn, causal_share)
        b = DitBatch(clips, index, use, seed)
        data_s = time.time() - t_step
        ids, lengths = tf.tokenize_batch(b.prompts, words, max_len)
        eps = torch.randn(b.x0.shape, generator=gen)
        s = b.sigma[:, None, :, None, None]
        xt = (1 - s) * b.x0 + s * eps
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            with torch.set_grad_enabled(train_text):
                ctx = tf.text_states(t5, ids, lengths)
            if b.mode == "teacher_forcing":  # [clean frames, noisy frames]; the velocity of the noisy ones
                n = len(b.positions)
                history = recycled_history(dit, b, ctx, recycle_rng, recycle_gen) if recycle and recycle_rng.random() < recycle else b.x0
                t_in = torch.cat([torch.zeros_like(b.sigma), b.sigma * 1000.0], dim=1)
                keys_in = b.keys.repeat(1, 2)
                v = tf.dit_velocity(dit, torch.cat([history, xt], dim=2), t_in, ctx, keys_in, torch.zeros(*keys_in.shape, 2), "teacher_forcing", list(b.positions) * 2)[:, :, n:]
            else:
                v = tf.dit_velocity(dit, xt, b.sigma * 1000.0, ctx, b.keys, torch.zeros(*b.keys.shape, 2), "causal" if b.causal else "full", b.positions)
        v = v.float()
        w = (b.sigma > 0).float()
        cell_w = 1.0 + agent_weight * b.agent[:, None]  # [B, 1, F, h, w]
        if block_weight:  # 0 leaves the weights (and the run) exactly as without it
            cell_w = cell_w + block_weight * b.blocks[:, None]
        per_frame = (((v - (eps - b.x0)) ** 2) * cell_w).sum(dim=(1, 3, 4)) / (cell_w.sum(dim=(1, 3, 4)) * v.shape[1])  # [B, F]
        loss = (per_frame * w).sum() / w.sum().clamp_min(1.0)
        attr_loss = attribute_batch_loss(t5, text_heads, aux_rng, words, max_len)[0] if aux else None
        lr_now = optimizer_step(opt, params, loss if attr_loss is None else loss + text_aux_weight * attr_loss, lr_at(step, budget.total or 10**9, lr))
        own_text_lr = {"text_lr": opt.param_groups[0]["lr"]} if text_lr is not None and text_params else {}
        attr = {"attr_loss": attr_loss.item()} if attr_loss is not None else {}
        log({"stage": stage, "step": step, "loss": loss.item(), **attr, "mode": b.mode, "lr": lr_now, **own_text_lr, "data_s": round(data_s, 2), "step_s": round(time.time() - t_step, 2), "elapsed_s": round(time.time() - start, 2)})
        budget.tick(step, start)
        step += 1
    return t5.eval(), dit.eval()


def f16(module: torch.nn.Module) -> Dict[str, np.ndarray]:
    """A module's state dict as float16 numpy arrays (names as the module, i.e. the runtime's; the runtime widens F16 to
    float32 on load). Float16 storage keeps the shipped weights under issue 8's 20 MB; the trained values are all far
    inside float16's range (largest |w| is printed in train_summary.json)."""
    return {k: v.detach().float().numpy().astype(np.float16) for k, v in module.state_dict().items()}


def write_model(out: str, spec: dict, words: List[str], t5, dit, enc, dec, meta: Dict[str, str]) -> None:
    """model.json, tokenizer.json and the three safetensors with the runtime's parameter names (see module docstring)."""
    ref.write_safetensors(os.path.join(out, "text_encoder.safetensors"), f16(t5), meta)
    ref.write_safetensors(os.path.join(out, "transformer.safetensors"), f16(dit), meta)
    ref.write_safetensors(os.path.join(out, "vae.safetensors"), {**f16(dec), **f16(enc)}, meta)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump({"type": "word-bytes", "words": words}, f, indent=1)
    with open(os.path.join(out, "model.json"), "w") as f:
        json.dump(spec, f, indent=2)


def counts(text: str) -> List[int]:
    """argparse type of ``--finetune-steps``: comma-separated step counts ≥ 0 ("0" alone: no fine-tune phase)."""
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1300,1500; got {text!r}") from None
    if any(n < 0 for n in out):
        raise argparse.ArgumentTypeError(f"step counts must not be negative; got {text!r}")
    if len(out) > 1 and 0 in out:
        raise argparse.ArgumentTypeError(f"a fine-tune phase of 0 steps; give 0 alone for no fine-tune; got {text!r}")
    return [] if out == [0] else out


def shares(text: str) -> Tuple[float, ...]:
    """argparse type of ``--finetune-shares``: comma-separated fractions in (0, 1)."""
    try:
        out = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated fractions such as 0.24,0.28; got {text!r}") from None
    if not all(0.0 < x < 1.0 for x in out):
        raise argparse.ArgumentTypeError(f"each share must be in (0, 1); got {text!r}")
    return out


def phase_plan(steps: Optional[List[int]], phase_shares: Sequence[float]) -> List[Tuple[str, Optional[int], float]]:
    """The fine-tune phases as (log stage name "finetune", "finetune2", …; fixed steps or None; share of the DiT time):
    one phase per share when ``steps`` is None, else one per count (their shares then only reserve time in budget mode:
    ``phase_shares`` when there is one per count, else their sum split evenly)."""
    if steps is None:
        fixed, split = [None] * len(phase_shares), list(phase_shares)
    else:
        fixed = steps
        split = list(phase_shares) if len(phase_shares) == len(steps) else [sum(phase_shares) / max(1, len(steps))] * len(steps)
    return [("finetune" if k == 0 else f"finetune{k + 1}", n, share) for k, (n, share) in enumerate(zip(fixed, split))]


INIT_FILES = ("model.json", "tokenizer.json", "text_encoder.safetensors", "transformer.safetensors", "vae.safetensors")


def check_init(directory: str, spec: dict) -> Optional[str]:
    """Why ``directory`` cannot be continued from (``--init``), or None: a file of INIT_FILES is missing, model.json is
    not a JSON object, its text encoder, transformer or VAE architecture differs from ``spec``'s (the key is named), or
    its VAE ``latentsMean``/``latentsStd`` are not zDim finite numbers (std > 0). Mirrors, for the training side,
    part of what tools/train/check-model-dir.ts checks in the runtime (which needs the TypeScript build)."""
    missing = [f for f in INIT_FILES if not os.path.isfile(os.path.join(directory, f))]
    if missing:
        return f"not a model directory this script wrote (missing {', '.join(missing)})"
    try:
        with open(os.path.join(directory, "model.json"), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError) as e:
        return f"model.json is not readable JSON ({e})"
    if not isinstance(found, dict):
        return "model.json is not a JSON object"
    for part in ("textEncoder", "transformer", "vae"):
        if not isinstance(found.get(part), dict):
            return f"model.json has no {part} object"
        problem = part_problem(found[part], spec, part, f"model.json {part}")
        if problem:
            return problem
    return None


def part_problem(got: object, spec: dict, part: str, where: str) -> Optional[str]:
    """Why ``got``, a model.json's ``part`` ("textEncoder", "transformer" or "vae") found at ``where``, is not of
    ``spec``'s architecture (the key is named), or for "vae" why its ``latentsMean``/``latentsStd`` are not zDim finite
    numbers (std > 0); None when it is."""
    if not isinstance(got, dict):
        return f"{where} is not an object"
    for key, want in spec[part].items():
        if key in ("latentsMean", "latentsStd"):
            continue  # trained statistics, not architecture
        if got.get(key) != want:
            return f"{where}.{key} is {got.get(key)!r}, the default architecture has {want!r}"
    if part == "vae":
        for key in ("latentsMean", "latentsStd"):
            xs = got.get(key)
            ok = isinstance(xs, list) and len(xs) == spec["vae"]["zDim"] and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in xs)
            if not ok or (key == "latentsStd" and min(xs) <= 0):
                return f"{where}.{key} must be {spec['vae']['zDim']} finite numbers" + (" > 0" if key == "latentsStd" else "")
    return None


def resume_problem(stages: Dict[str, Any], current: Optional[Dict[str, Any]], plan: Sequence[str], spec: dict) -> Optional[str]:
    """Why a checkpoint's completed ``stages`` and phase in progress ``current`` (checkpoint.RunCheckpoint, whose
    layout it has checked) do not fit a run of stages ``plan`` or lack what the run reads back from them (named by
    field), or None."""
    def number(x: Any, optional: bool = False) -> bool:
        return (optional and x is None) or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0)

    names = list(stages)
    if names != list(plan[: len(names)]):
        return f"meta.stages {names} is not the start of this run's stages {list(plan)}"
    if current is not None and (len(names) >= len(plan) or current["stage"] != plan[len(names)]):
        return f"meta.current.stage {current['stage']!r} is not the stage this run does after {names[-1]!r}"
    for name, meta in stages.items():
        if name == "text":
            acc = meta.get("held_out_acc")
            if not (acc is None or (isinstance(acc, list) and len(acc) == len(ATTRIBUTES) and all(number(x) and x <= 1 for x in acc))):
                return f"meta.stages.text.held_out_acc must be null or {len(ATTRIBUTES)} accuracies in [0, 1]"
            continue
        b = meta.get("budget")
        if not (isinstance(b, dict) and isinstance(b.get("total"), int) and not isinstance(b["total"], bool) and b["total"] >= 0 and number(b.get("step_s"), optional=True)):
            return f"meta.stages.{name}.budget must be {{total: integer ≥ 0, step_s: number ≥ 0 or null}}"
        if name == "vae":
            if not number(meta.get("wall_s")):
                return "meta.stages.vae.wall_s must be a finite number ≥ 0"
            problem = part_problem(meta.get("spec"), spec, "vae", "meta.stages.vae.spec")
            if problem:
                return problem
    if current is not None:
        st = current["state"]
        for key, optional in (("step_s", True), ("elapsed_s", False), ("t0_ago", True)):
            if not number(st.get(key), optional):
                return f"meta.current.state.{key} must be a finite number ≥ 0" + (" or null" if optional else "")
        for key in ("aux_rng", "recycle_rng"):
            if not isinstance(st.get(key), dict):
                return f"meta.current.state.{key} must be a numpy bit-generator state (an object)"
    return None


def run_code() -> Dict[str, str]:
    """SHA-256 digests (checkpoint.code_digests) of the repository's files this run executes or reads: every module
    loaded from under the repository root (this script, tools/train/*, tools/reference/*) and the spec source that
    default_model parses."""
    files = [m.__file__ for m in list(sys.modules.values()) if isinstance(getattr(m, "__file__", None), str)]
    return code_digests(default_model.ROOT, [*files, default_model.DEFAULT_SPEC_TS])


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description="Train the embedded default model on the procedural world.")
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--budget-minutes", type=float, help="derive the step counts not given from this wall time (split VAE_SHARE / rest) instead of the recipe's RECIPE_STEPS")
    ap.add_argument("--smoke", action="store_true", help="1.5-minute budget, for tests")
    ap.add_argument("--vae-steps", type=int, help="fixed VAE steps (overrides the budget)")
    ap.add_argument("--dit-steps", type=int, help="fixed DiT steps (overrides the budget)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--finetune-steps", type=counts, help="fixed steps of each agent-weighted fine-tune phase, comma-separated, e.g. 1300,1500 (overrides the budget; 0: no fine-tune)")
    ap.add_argument("--finetune-shares", type=shares, default=FINETUNE_SHARES, help="fractions of the DiT time given to the fine-tune phases, comma-separated (budget mode)")
    ap.add_argument("--agent-weight", type=float, default=AGENT_WEIGHT, help="extra loss weight λ of the latent cells around the agent in the fine-tune phases")
    ap.add_argument("--base-agent-weight", type=float, default=0.0, help="λ of the base DiT phase")
    ap.add_argument("--block-weight", type=float, default=0.0, help="extra loss weight of the latent cells the blocks (obstacles) cover, in every DiT phase (0: none)")
    ap.add_argument("--causal-share", type=float, default=P_CAUSAL, help="fraction of the clip batches (other than image and teacher-forcing ones) that are causal, in every DiT phase; the rest are bidirectional")
    ap.add_argument("--reuse", type=int, default=REUSE, help="DiT steps that share one encoded batch of clips")
    ap.add_argument("--precision", choices=("bfloat16", "float32"), default="bfloat16", help="DiT forward under bf16 autocast, or float32 throughout")
    ap.add_argument("--image-share", type=float, default=0.0, help="fraction of DiT batches that are single frames of IMAGE_BATCH scenes (joint image-video training)")
    ap.add_argument("--teacher-forcing-steps", dest="teacher_steps", type=int, help="steps of a last, agent-weighted teacher-forcing phase, from the weights rounded to float16 as written (default: the recipe's; 0 in budget mode)")
    ap.add_argument("--teacher-forcing-lr", dest="teacher_lr", type=float, default=TEACHER_LR, help="peak learning rate of the teacher-forcing phase (warm-up, then cosine to a tenth)")
    ap.add_argument("--teacher-forcing-share", dest="teacher_share", type=float, default=TEACHER_SHARE, help="fraction of that phase's batches that are teacher-forcing clips (each noisy frame denoised from the clean frames before it)")
    ap.add_argument("--teacher-forcing-start", dest="teacher_start", choices=("spawn", "random"), default=TEACHER_START, help="where that phase's scenes start the agent: at the world's spawn point (the room's centre) or at a random free position, as the other phases")
    ap.add_argument("--start", choices=("spawn", "random"), default=START, help="where the base and fine-tune phases' scenes start the agent: at the world's spawn point (the room's centre) or at a random free position")
    ap.add_argument("--error-recycling", type=float, default=0.0, help="fraction of the teacher-forcing batches whose history is the model's own one-step prediction of the clean frames (error recycling)")
    ap.add_argument("--dit-lr", type=float, default=DIT_LR, help="peak learning rate of every DiT phase (warm-up, then cosine to a tenth)")
    ap.add_argument("--text-lr", type=float, help="peak learning rate of the jointly trained text encoder in the base and fine-tune phases (default: --dit-lr; the teacher-forcing phase trains both at --teacher-forcing-lr)")
    ap.add_argument("--text-steps", type=int, default=TEXT_STEPS, help="steps of the text-encoder stage on the prompts' scene attributes before the DiT (0: none; skipped with --init)")
    ap.add_argument("--text-encoder", choices=("frozen", "joint"), default=TEXT_ENCODER, help="during the DiT phases: keep the text encoder frozen, or train it jointly through the DiT's loss")
    ap.add_argument("--text-aux-weight", type=float, default=0.0, help="weight λ of the text stage's attribute loss kept beside the DiT's loss in the phases that train the text encoder jointly (0: none; the heads come from the text stage, or fresh without one)")
    ap.add_argument("--init", help="model directory to continue from (skips the VAE and text stages)")
    ap.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint.pt (the same flags): the weights are those of the run never stopped")
    ap.add_argument("--checkpoint-minutes", type=float, default=CHECKPOINT_MINUTES, help="minutes between the checkpoints written inside a DiT phase (each stage and phase also writes one at its end; 0: at every step that starts a fresh batch)")
    a = ap.parse_args(argv)
    if not 0.0 <= a.image_share < 1.0:
        ap.error(f"--image-share must be in [0, 1); got {a.image_share}")
    if not 0.0 <= a.teacher_share <= 1.0:
        ap.error(f"--teacher-forcing-share must be in [0, 1]; got {a.teacher_share}")
    if not 0.0 <= a.causal_share <= 1.0:
        ap.error(f"--causal-share must be in [0, 1]; got {a.causal_share}")
    if not 0.0 <= a.error_recycling <= 1.0:
        ap.error(f"--error-recycling must be in [0, 1]; got {a.error_recycling}")
    if a.reuse < 1:
        ap.error(f"--reuse must be at least 1; got {a.reuse}")
    if sum(a.finetune_shares) >= 1.0:
        ap.error(f"--finetune-shares must leave the base phase a part of the DiT time (sum < 1); got {a.finetune_shares}")
    # at or below float32's smallest normal number a rate is subnormal (or 0) in the float32 optimizer: no training
    lr_floor = float(np.finfo(np.float32).tiny)
    if not (math.isfinite(a.dit_lr) and lr_floor < a.dit_lr < 1.0):
        ap.error(f"--dit-lr must be in (0, 1) and above float32's smallest normal number {lr_floor:.3g}; got {a.dit_lr}")
    if a.text_lr is not None and not (math.isfinite(a.text_lr) and lr_floor < a.text_lr < 1.0):
        ap.error(f"--text-lr must be in (0, 1) and above float32's smallest normal number {lr_floor:.3g}; got {a.text_lr}")
    if a.text_lr is not None and a.text_encoder != "joint":
        ap.error("--text-lr needs --text-encoder joint (a frozen encoder has no learning rate)")
    if not (math.isfinite(a.teacher_lr) and lr_floor < a.teacher_lr < 1.0):
        ap.error(f"--teacher-forcing-lr must be in (0, 1) and above float32's smallest normal number {lr_floor:.3g}; got {a.teacher_lr}")
    if not (math.isfinite(a.block_weight) and a.block_weight >= 0):
        ap.error(f"--block-weight must be a finite number ≥ 0; got {a.block_weight}")
    if not (math.isfinite(a.text_aux_weight) and a.text_aux_weight >= 0):
        ap.error(f"--text-aux-weight must be a finite number ≥ 0; got {a.text_aux_weight}")
    if a.text_aux_weight and a.text_encoder != "joint":
        ap.error("--text-aux-weight needs --text-encoder joint (a frozen encoder learns nothing from it)")
    if a.text_steps < 0:
        ap.error(f"--text-steps must not be negative; got {a.text_steps}")
    if not (math.isfinite(a.checkpoint_minutes) and a.checkpoint_minutes >= 0):
        ap.error(f"--checkpoint-minutes must be a finite number ≥ 0; got {a.checkpoint_minutes}")
    if a.vae_steps is not None and a.vae_steps < 0:
        ap.error(f"--vae-steps must not be negative; got {a.vae_steps}")
    if a.dit_steps is not None and a.dit_steps < (0 if a.init is not None else 1):
        ap.error(f"--dit-steps must be at least 1 (0 only with --init); got {a.dit_steps}")
    if a.teacher_steps is not None and a.teacher_steps < 0:
        ap.error(f"--teacher-forcing-steps must not be negative; got {a.teacher_steps}")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        ap.error(f"--out must be a directory; {a.out} is a file")
    if a.init is not None:
        init_problem = check_init(a.init, default_model.default_spec())
        if init_problem:
            ap.error(f"--init {a.init}: {init_problem}")
    minutes = 1.5 if a.smoke else a.budget_minutes
    recipe = minutes is None
    if recipe:  # fixed step counts, so the run is the same on any machine of this kind
        minutes = 0.0
        a.vae_steps = RECIPE_STEPS["vae"] if a.vae_steps is None else a.vae_steps
        a.dit_steps = RECIPE_STEPS["dit"] if a.dit_steps is None else a.dit_steps
        a.finetune_steps = list(RECIPE_STEPS["finetune"]) if a.finetune_steps is None else a.finetune_steps
        a.teacher_steps = RECIPE_STEPS["teacher"] if a.teacher_steps is None else a.teacher_steps
    elif not (math.isfinite(minutes) and minutes > 0):
        ap.error(f"--budget-minutes must be a positive number; got {minutes}")
    phases = phase_plan(a.finetune_steps, a.finetune_shares)
    teacher_steps = a.teacher_steps or 0
    if a.error_recycling and not teacher_steps:
        ap.error(f"--error-recycling {a.error_recycling} needs a teacher-forcing phase; --teacher-forcing-steps is 0")
    # every option that changes the tensors is a flag a resumed run must repeat; where it writes, and how often, is not
    run_flags = {k: v for k, v in vars(a).items() if k not in ("out", "resume", "checkpoint_minutes")}
    flag_names = {act.dest: act.option_strings[0] for act in ap._actions if act.option_strings}
    try:
        ck = RunCheckpoint(a.out, run_flags, run_code(), 60 * a.checkpoint_minutes, a.resume, flag_names)
    except CheckpointError as e:
        ap.error(f"--resume: {e}")
    plan = ["vae", "text", "dit", *(name for name, _, _ in phases), *(["teacher"] if teacher_steps else [])]
    problem = resume_problem(ck.stages, ck.current, plan, default_model.default_spec()) if ck.resuming else None
    if problem:
        ap.error(f"--resume: {ck.path}: {problem}")
    log_path = os.path.join(a.out, "train_log.jsonl")
    if ck.resuming and (not os.path.isfile(log_path) or os.path.getsize(log_path) < ck.log_bytes):
        ap.error(f"--resume: {log_path} is shorter than the {ck.log_bytes} bytes the checkpoint logged (or missing): not the log of that run")
    if not a.resume:
        ck.remove()  # a stopped run's checkpoint in --out is not this run's: --resume must not find it
    torch.set_num_threads(a.threads)
    np.random.seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    t_start = ck.started()
    checks = tf.check_against_reference()
    spec, words = default_model.default_spec(), default_model.default_words()
    series: Dict[str, List[Tuple[int, float]]] = {"vae": [], "text": [], "dit": [], **{name: [] for name, _, _ in phases}, "teacher": []}
    if ck.resuming:  # the log as the checkpoint saw it (the file is cut back at the first new record: ck.before_log)
        print(f"resuming {ck.path}: {ck.describe()}", flush=True)
        with open(log_path, "rb") as f:
            kept = f.read(ck.log_bytes)
        try:
            lines = kept.decode("utf-8").splitlines()
        except UnicodeDecodeError as e:
            ap.error(f"--resume: {log_path} is not UTF-8 text (byte {e.start})")
        for n, line in enumerate(lines, start=1):
            try:
                rec = json.loads(line)
                series[rec["stage"]].append((rec["step"], rec["loss"]))
            except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
                ap.error(f"--resume: {log_path} line {n} is not a step record of this run: {line[:80]!r}")
    with open(log_path, "a" if ck.resuming else "w") as logf:
        ck.attach_log(logf)

        def log(rec: dict) -> None:
            ck.before_log()
            logf.write(json.dumps(rec) + "\n")
            logf.flush()
            series[rec["stage"]].append((rec["step"], rec["loss"]))
            if rec["step"] % 25 == 0:
                print(json.dumps(rec), flush=True)

        def budget_meta(b: Budget) -> dict:
            return {"total": b.total, "step_s": b.step_s}

        def budget_of(meta: dict) -> Budget:
            b = Budget(meta["total"], 0.0, minimum=0)
            b.step_s = meta["step_s"]
            return b

        earlier: Optional[re.Match] = None
        if a.init is not None:
            with open(os.path.join(a.init, "model.json")) as f:
                init_spec = json.load(f)
            # what the weights went through before: the parenthesis this script wrote into the --init model's description
            earlier = re.search(r"\(tools/train/train\.py, .*\)", str(init_spec.get("description", "")))
        done = ck.begin("vae")
        if done is not None:  # the checkpoint's VAE and statistics (its weights come back in ck.skipped)
            spec["vae"], vae_budget, t_vae = done["spec"], budget_of(done["budget"]), done["wall_s"]
            enc, dec = cref.WanVaeEncoder(spec["vae"]), ref.WanVaeDecoder(spec["vae"])
            enc, dec = enc.eval(), dec.eval()
        elif a.init is None:
            vae_budget = Budget(a.vae_steps, 60 * minutes * VAE_SHARE, minimum=5)
            enc, dec = train_vae(spec["vae"], a.seed, vae_budget, log)
            spec["vae"]["latentsMean"], spec["vae"]["latentsStd"] = latent_stats(enc)
        else:
            vae_budget = Budget(0, 0.0, minimum=0)
            spec["vae"] = init_spec["vae"]
            enc, dec = cref.WanVaeEncoder(spec["vae"]), ref.WanVaeDecoder(spec["vae"])
            vae_file = os.path.join(a.init, "vae.safetensors")
            for mod in (enc, dec):
                own = set(mod.state_dict())
                mod.load_state_dict({k: v for k, v in ref.load_state_dict(vae_file).items() if k in own}, strict=True)
            enc, dec = enc.eval(), dec.eval()
        enc.cfg = dec.cfg = spec["vae"]
        ck.track(enc=enc, dec=dec)
        if done is None:
            t_vae = time.time() - t_start
            ck.finish("vae", {"spec": spec["vae"], "budget": budget_meta(vae_budget), "wall_s": t_vae})
        else:
            ck.skipped("vae")
        modules = new_dit(spec, a.seed)
        text_steps, text_acc, heads = 0 if a.init is not None else a.text_steps, None, []
        max_len = spec["textEncoder"]["maxLength"]
        if text_steps or a.text_aux_weight:
            heads = attribute_heads(spec["textEncoder"]["dModel"], a.seed)
        ck.track(t5=modules[0], dit=modules[1], **{f"heads.{k}": h for k, h in enumerate(heads)})
        done = ck.begin("text")
        if done is not None:
            text_acc = done["held_out_acc"]
            ck.skipped("text")
        else:
            if a.init is not None:
                ref.load_module(modules[0], os.path.join(a.init, "text_encoder.safetensors"))
                ref.load_module(modules[1], os.path.join(a.init, "transformer.safetensors"))
            elif text_steps:
                text_acc = pretrain_text_encoder(modules[0], heads, words, max_len, text_steps, a.seed, log)
            ck.finish("text", {"held_out_acc": text_acc})
        aux = {"text_heads": heads, "text_aux_weight": a.text_aux_weight, "ckpt": ck, "block_weight": a.block_weight, "causal_share": a.causal_share}
        train_text = a.text_encoder == "joint"
        bf16 = a.precision == "bfloat16"
        share_left = sum(share for _, _, share in phases)
        done = ck.begin("dit")
        if done is not None:
            dit_budget = budget_of(done["budget"])
            ck.skipped("dit")
        else:
            dit_budget = Budget(a.dit_steps, (60 * minutes - (time.time() - t_start)) * (1 - share_left), minimum=5)
            modules = train_dit(spec, words, enc, modules, a.seed, dit_budget, log, a.base_agent_weight, "dit", a.reuse, bf16, a.image_share, train_text, a.dit_lr, spawn=a.start == "spawn", text_lr=a.text_lr, **aux)
            ck.finish("dit", {"budget": budget_meta(dit_budget)})
        ft_budgets: List[Budget] = []
        for k, (name, steps, share) in enumerate(phases, start=1):
            done = ck.begin(name)
            if done is not None:
                ft_budgets.append(budget_of(done["budget"]))
                share_left -= share
                ck.skipped(name)
                continue
            # budget mode: this phase's part of the time still left, in proportion to the shares of the phases left
            ft_budgets.append(Budget(steps, (60 * minutes - (time.time() - t_start)) * share / share_left, minimum=0))
            share_left -= share
            modules = train_dit(spec, words, enc, modules, a.seed + k, ft_budgets[-1], log, a.agent_weight, name, a.reuse, bf16, a.image_share, train_text, a.dit_lr, spawn=a.start == "spawn", text_lr=a.text_lr, **aux)
            ck.finish(name, {"budget": budget_meta(ft_budgets[-1])})
        if teacher_steps and ck.begin("teacher") is None:
            # from the weights (and the VAE that encodes its clips) as written, in float16: a model written without
            # this phase and continued with --init M --dit-steps 0 --finetune-steps 0 --seed S+len(phases) takes the same
            # phase (data seed S + len(phases) + 1) from the same weights: the same tensors (a phase resumed from a
            # checkpoint inside it was rounded before it)
            if ck.progress("teacher") is None:
                for module in (*modules, enc, dec):
                    for v in module.state_dict().values():
                        v.copy_(v.half().float())
            k = len(phases) + 1
            modules = train_dit(spec, words, enc, modules, a.seed + k, Budget(teacher_steps, 0.0, minimum=0), log, a.agent_weight, "teacher", a.reuse, bf16, a.image_share, train_text, a.teacher_lr, a.teacher_share, a.error_recycling, a.teacher_start == "spawn", **aux)
        t5, dit = modules
    ft_steps = ",".join(str(b.total) for b in ft_budgets)
    spec["weights"] = "trained"
    spec["description"] = (
        f"Embedded default: Wan-2.1-style DiT (dim {spec['transformer']['dim']}, {spec['transformer']['numLayers']} layers, 5-key + "
        f"2-vector per-frame action module), T5-style text encoder ({spec['textEncoder']['numLayers']} layers), causal conv VAE (4x spatial, 16 latent channels), trained on the procedural top-down world "
        f"(tools/train/train.py, seed {a.seed}, {vae_budget.total} VAE + {dit_budget.total} DiT + {ft_steps or 0} fine-tune + {teacher_steps} teacher-forcing steps"
        + (f" at share {a.teacher_share:g}" if teacher_steps else "")
        + (" from the spawn point" if teacher_steps and a.teacher_start == "spawn" else "")
        + (f" with error recycling {a.error_recycling:g}" if teacher_steps and a.error_recycling else "")
        + ("; base and fine-tune scenes from the spawn point" if a.start == "spawn" else "")
        + ")"
        + (f", continued from {earlier.group(0)}" if earlier else "")
        + "."
    )
    # every option that changes the tensors, by flag name: the weights' metadata (so a file says how it was made; the
    # --init model's own run is in its model.json) and the summary's repeat line
    options = {
        "seed": a.seed, "vae-steps": vae_budget.total, "dit-steps": dit_budget.total, "finetune-steps": ft_steps or 0,
        "teacher-forcing-steps": teacher_steps, "teacher-forcing-share": a.teacher_share, "teacher-forcing-lr": a.teacher_lr,
        "teacher-forcing-start": a.teacher_start, **({"start": a.start} if a.start != START else {}), "dit-lr": a.dit_lr,
        "agent-weight": a.agent_weight, "base-agent-weight": a.base_agent_weight, "reuse": a.reuse, "precision": a.precision,
        "image-share": a.image_share, "text-steps": text_steps, "text-encoder": a.text_encoder,
    }
    if a.error_recycling:  # named only when used: files made without it keep the metadata they were written with
        options["error-recycling"] = a.error_recycling
    if a.text_lr is not None:  # likewise
        options["text-lr"] = a.text_lr
    if a.text_aux_weight:  # likewise
        options["text-aux-weight"] = a.text_aux_weight
    if a.block_weight:  # likewise
        options["block-weight"] = a.block_weight
    if a.causal_share != P_CAUSAL:  # likewise
        options["causal-share"] = a.causal_share
    meta = {"format": "pt", "generator": "omnirx tools/train/train.py", **{k.replace("-", "_"): str(v) for k, v in options.items()}}
    write_model(a.out, spec, words, t5, dit, enc, dec, meta)
    plot_losses(os.path.join(a.out, "loss_curve.png"), series)

    def tail(name: str) -> float:
        xs = [l for _, l in series[name][-20:]]
        return float(np.mean(xs))

    summary = {
        "seed": a.seed,
        "budget_minutes": None if recipe else minutes,
        "wall_s": round(time.time() - t_start, 1),
        "vae": {"steps": vae_budget.total, "step_s": vae_budget.step_s, "wall_s": round(t_vae, 1), "loss_first": series["vae"][0][1] if series["vae"] else None, "loss_last20": tail("vae") if series["vae"] else None},
        "init": a.init,
        "agent_weight": a.agent_weight,
        "base_agent_weight": a.base_agent_weight,
        "block_weight": a.block_weight,
        "causal_share": a.causal_share,
        "precision": a.precision,
        "dit_lr": a.dit_lr,
        "text_lr": None if a.text_encoder != "joint" else a.dit_lr if a.text_lr is None else a.text_lr,  # None: frozen
        "reuse": a.reuse,
        "image_share": a.image_share,
        "start": a.start,
        "teacher": {"seed": a.seed + len(phases) + 1, "steps": teacher_steps, "share": a.teacher_share, "lr": a.teacher_lr, "start": a.teacher_start, "error_recycling": a.error_recycling, "loss_first": series["teacher"][0][1], "loss_last20": tail("teacher")} if teacher_steps else None,
        "text": {"steps": text_steps, "loss_last20": tail("text") if series["text"] else None, "held_out_acc": dict(zip([n for n, _ in ATTRIBUTES], text_acc)) if text_acc else None, "during_dit": a.text_encoder, "aux_weight": a.text_aux_weight,
                 # the heads' held-out accuracy on the encoder as written: how much of the binding the DiT phases kept
                 "held_out_acc_after_dit": dict(zip([n for n, _ in ATTRIBUTES], held_out_accuracy(t5, heads, words, max_len, a.seed))) if a.text_aux_weight else None},
        "dit": {"steps": dit_budget.total, "step_s": dit_budget.step_s, "loss_first": series["dit"][0][1] if series["dit"] else None, "loss_last20": tail("dit") if series["dit"] else None},
        "finetune": [
            {"stage": name, "seed": a.seed + k, "steps": b.total, "step_s": b.step_s, "loss_first": series[name][0][1], "loss_last20": tail(name)}
            for k, ((name, _, _), b) in enumerate(zip(phases, ft_budgets), start=1)
            if series[name]
        ],
        "reference_checks": checks,
        "max_abs_weight": max(float(v.abs().max()) for m in (t5, dit, enc, dec) for v in m.state_dict().values()),
        "repeat": " ".join(f"--{k} {v}" for k, v in options.items()) + (f" --init {a.init}" if a.init else ""),
    }
    with open(os.path.join(a.out, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    ck.remove()  # the run is written: nothing left to resume
    print(json.dumps(summary))


if __name__ == "__main__":
    try:
        main()
    except CheckpointError as e:  # found while restoring (weights or optimizer state that do not fit): a bad input, not a crash
        print(f"train.py: error: --resume: {e}", file=sys.stderr)
        sys.exit(2)
