"""
Stage ``text`` of tools/train/train.py (``--text-steps``; not in the recipe): the T5-style text encoder learns the
procedural world's scene attributes from its prompts before the DiT trains, and with ``--text-encoder frozen`` then
stays frozen (as Wan 2.1 keeps its pretrained umT5 frozen). Measured in one full run: docs/model-card.md, "Text
encoder".

Why: trained jointly through the DiT's loss from random weights, the encoder of the weights shipped on 2026-12-02 kept
the room colour (a linear probe on its mean-pooled states, text_probe.py: 1.0 on held-out prompts) but lost which
colour belongs to the agent and which to the blocks (0.73 and 0.72; per token 0.46–0.59), while the same architecture
at its random initialisation separates all five attributes (≥ 0.997 per token). The room dominates the loss; the attributes that
decide the agent fade from the text states.

Objective: the mean of a prompt's valid final states [dModel] predicts its five attributes through one linear head per
attribute (cross-entropy averaged over the attributes), so the states carry the whole scene, agent and blocks apart.
The heads are discarded after the DiT, unless ``--text-aux-weight λ`` keeps the objective beside the DiT's loss in the
phases that train the encoder jointly (λ times the attribute loss of a fresh batch of BATCH prompts per DiT step,
the heads trained on with the encoder), so the encoder cannot give up the binding the DiT's loss lets it lose: the
auxiliary-loss route named in docs/model-card.md, "Text encoder". (Asking every token to predict all five learned far slower: 0.69 agent colour per token
after 300 steps, against 0.96 pooled after 400.) Prompts come from the grammar of
procedural_world (``Scene.prompt``), with the attribute distribution of ``sample_scene`` (obstacle placement aside).
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import torch

import procedural_world as world
import training_forward as tf
from training_forward import ref

ROOMS, COLORS, NOUNS = list(world.ROOM_COLORS), list(world.OBJECT_COLORS), list(world.AGENT_SHAPES)
ATTRIBUTES = (("room", len(ROOMS)), ("agent_color", len(COLORS)), ("agent_shape", 2), ("blocks", 4), ("block_color", len(COLORS) + 1))
"""Predicted attributes and their class counts: room colour, agent colour, agent shape (disc/square), number of blocks
(0–3), block colour (0: none, else 1 + index in OBJECT_COLORS)."""
BATCH, LR, SEED_TEXT = 64, 1e-3, 50_000_000


def sample_prompts(rng: np.random.Generator, n: int) -> Tuple[List[str], np.ndarray]:
    """n prompts of the grammar and their attribute labels [n, 5] int64 (ATTRIBUTES' order)."""
    prompts, labels = [], []
    for _ in range(n):
        room = ROOMS[int(rng.integers(len(ROOMS)))]
        others = list(COLORS)
        agent = others.pop(int(rng.integers(len(others))))
        noun = NOUNS[int(rng.integers(len(NOUNS)))]
        k = int(rng.integers(0, 4))
        block = others[int(rng.integers(len(others)))] if k else None
        scene = world.Scene(room, agent, noun, block, [(0, 0, 0, 0)] * k)  # only len(obstacles) enters the prompt
        prompts.append(scene.prompt)
        labels.append([ROOMS.index(room), COLORS.index(agent), int(world.AGENT_SHAPES[noun] == "square"), k, 0 if block is None else 1 + COLORS.index(block)])
    return prompts, np.array(labels, dtype=np.int64)


def attribute_logits(t5: ref.T5EncoderModel, heads: Sequence[torch.nn.Linear], prompts: Sequence[str], words: Sequence[str], max_len: int) -> List[torch.Tensor]:
    """Per-attribute logits [B, classes] of each prompt's mean valid text state."""
    ids, lengths = tf.tokenize_batch(prompts, words, max_len)
    ids = ids[:, : int(lengths.max())]  # padding past the longest prompt is masked anyway
    pooled = tf.text_states(t5, ids, lengths).sum(1) / lengths[:, None].float()  # rows past the length are zero
    return [head(pooled) for head in heads]


def attribute_loss(logits: Sequence[torch.Tensor], labels: torch.Tensor) -> Tuple[torch.Tensor, List[float]]:
    """Cross-entropy against the labels [B, 5] int64, averaged over the attributes; and per attribute the fraction of
    prompts predicted right."""
    losses = [torch.nn.functional.cross_entropy(lg, labels[:, a]) for a, lg in enumerate(logits)]
    accs = [float((lg.argmax(-1) == labels[:, a]).float().mean().item()) for a, lg in enumerate(logits)]
    return torch.stack(losses).mean(), accs


def attribute_batch_loss(t5: ref.T5EncoderModel, heads: Sequence[torch.nn.Linear], rng: np.random.Generator, words: Sequence[str], max_len: int) -> Tuple[torch.Tensor, List[float]]:
    """attribute_loss of BATCH fresh prompts drawn from ``rng`` (sample_prompts): the scalar loss (with its graph) and
    the batch's accuracy per attribute."""
    prompts, labels = sample_prompts(rng, BATCH)
    return attribute_loss(attribute_logits(t5, heads, prompts, words, max_len), torch.from_numpy(labels))


def attribute_heads(d: int, seed: int) -> List[torch.nn.Linear]:
    """One linear head [d → classes] per attribute of ATTRIBUTES, initialised after seeding torch with seed + SEED_TEXT."""
    torch.manual_seed(seed + SEED_TEXT)
    return [torch.nn.Linear(d, k) for _, k in ATTRIBUTES]


def held_out_accuracy(t5: ref.T5EncoderModel, heads: Sequence[torch.nn.Linear], words: Sequence[str], max_len: int, seed: int) -> List[float]:
    """Per-attribute accuracy (ATTRIBUTES' order, rounded to 4 places) of ``heads`` over ``t5``'s mean states on 512
    held-out prompts, the same prompts for a seed; no gradient, the modules' modes unchanged."""
    prompts, labels = sample_prompts(np.random.default_rng([seed, SEED_TEXT, 1]), 512)
    with torch.no_grad():
        _, accs = attribute_loss(attribute_logits(t5, heads, prompts, words, max_len), torch.from_numpy(labels))
    return [round(a, 4) for a in accs]


def pretrain_text_encoder(t5: ref.T5EncoderModel, heads: Sequence[torch.nn.Linear], words: Sequence[str], max_len: int, steps: int, seed: int, log) -> List[float]:
    """Trains ``t5`` and ``heads`` (attribute_heads) in place for ``steps`` AdamW steps (batch BATCH prompts, lr LR,
    20-step warm-up, no decay) on the attribute objective (module docstring); logs stage "text" with the loss and the
    batch's mean accuracy per step. Returns held_out_accuracy; the encoder is left in eval mode."""
    params = list(t5.parameters()) + [p for h in heads for p in h.parameters()]
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.99), weight_decay=0.0)
    rng = np.random.default_rng([seed, SEED_TEXT])
    t5.train()
    for step in range(steps):
        loss, accs = attribute_batch_loss(t5, heads, rng, words, max_len)
        for g in opt.param_groups:
            g["lr"] = LR * min(1.0, (step + 1) / 20)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        log({"stage": "text", "step": step, "loss": loss.item(), "acc": round(float(np.mean(accs)), 4)})
    t5.eval()
    return held_out_accuracy(t5, heads, words, max_len, seed)
