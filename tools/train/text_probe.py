"""
Linear probes of a text encoder's states: how well the five scene attributes of a prompt (text_pretrain.ATTRIBUTES)
can be read back from them by a linear classifier. A diagnostic of what the DiT's cross-attention can find in the text
states, used for docs/model-card.md ("Text encoder").

For each attribute and each read-out — the mean of the valid states, the first token's state, the last valid token's
state ([dModel] each) — a softmax classifier on standardised features is fitted (Adam, full batch, 300 steps) on 3000
prompts of the grammar and scored on 1000 others. A linear probe is the usual test of whether a representation holds
a property in a readable form (Alain & Bengio 2016, "Understanding intermediate layers using linear classifier
probes").

Usage (repository root, Debian's PyTorch):

    /usr/bin/python3 tools/train/text_probe.py models/omnirx-default [--seed 5]
    /usr/bin/python3 tools/train/text_probe.py --random

prints one JSON object {read-out: {attribute: held-out accuracy}}; ``--random`` probes a freshly initialised encoder of
the default architecture instead of a directory's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Sequence

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import default_model  # noqa: E402
import training_forward as tf  # noqa: E402
from text_pretrain import ATTRIBUTES, sample_prompts  # noqa: E402
from training_forward import ref  # noqa: E402

READOUTS = ("mean", "first", "last")


def readouts(t5: ref.T5EncoderModel, prompts: Sequence[str], words: Sequence[str], max_len: int) -> Dict[str, np.ndarray]:
    """Each read-out of the prompts' text states: {name: [N, dModel] float32}."""
    ids, lengths = tf.tokenize_batch(prompts, words, max_len)
    with torch.no_grad():
        h = tf.text_states(t5, ids, lengths).float()
    n = torch.arange(len(prompts))
    return {"mean": (h.sum(1) / lengths[:, None]).numpy(), "first": h[:, 0].numpy(), "last": h[n, lengths - 1].numpy()}


def probe_accuracy(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, classes: int) -> float:
    """Held-out accuracy of a softmax classifier fitted on standardised features x [N, D] for labels y [N] int64."""
    x, xt = torch.from_numpy(x_train), torch.from_numpy(x_test)
    mu, sd = x.mean(0), x.std(0) + 1e-6
    w = torch.zeros(x.shape[1], classes, requires_grad=True)
    b = torch.zeros(classes, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=0.05)
    y = torch.from_numpy(y_train)
    for _ in range(300):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(((x - mu) / sd) @ w + b, y).backward()
        opt.step()
    with torch.no_grad():
        pred = (((xt - mu) / sd) @ w + b).argmax(1).numpy()
    return float((pred == y_test).mean())


def main(argv: List[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Linear probes of a text encoder's states for the prompts' scene attributes.")
    ap.add_argument("model_dir", nargs="?", help="model directory with text_encoder.safetensors")
    ap.add_argument("--random", action="store_true", help="probe a freshly initialised encoder (torch seed 0) instead of a directory's")
    ap.add_argument("--seed", type=int, default=5, help="seed of the probe's prompts")
    a = ap.parse_args(argv)
    if (a.model_dir is None) == (not a.random):
        ap.error("give a model directory or --random (one of them)")
    spec, words = default_model.default_spec(), default_model.default_words()
    torch.manual_seed(0)
    t5 = ref.T5EncoderModel(spec["textEncoder"]).eval()
    if not a.random:
        path = os.path.join(a.model_dir, "text_encoder.safetensors")
        if not os.path.isfile(path):
            ap.error(f"{path}: no such file")
        ref.load_module(t5, path)
    rng = np.random.default_rng(a.seed)
    p_train, y_train = sample_prompts(rng, 3000)
    p_test, y_test = sample_prompts(rng, 1000)
    max_len = spec["textEncoder"]["maxLength"]
    r_train, r_test = readouts(t5, p_train, words, max_len), readouts(t5, p_test, words, max_len)
    out = {
        r: {name: round(probe_accuracy(r_train[r], y_train[:, i], r_test[r], y_test[:, i], k), 3) for i, (name, k) in enumerate(ATTRIBUTES)}
        for r in READOUTS
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
