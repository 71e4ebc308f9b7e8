"""Weighted average of model directories' weights (a "model soup", Wortsman et al. 2022, "Model soups: averaging
weights of multiple fine-tuned models improves accuracy without increasing inference time", arXiv:2203.05482): runs
fine-tuned from one checkpoint lie in one basin, and the average of their weights can keep what each run learned.

Every tensor of ``transformer``, ``text_encoder`` and ``vae.safetensors`` becomes ``sum_i w_i * t_i``, summed in
float64 and stored in the inputs' dtype (float16 for the recipe's runs; a BF16 file is read widened, so stored F32).
Weights are finite, positive and sum to 1 (within 1e-9), so tensors every input holds alike come out the same bytes
(the recipe's second runs share stage 1's VAE). The inputs must be one architecture: the same tensor names, shapes
and dtypes in every file, the same ``model.json`` but for its ``description`` (so the same VAE latent statistics) and
the same ``tokenizer.json``. The output's ``model.json`` is the first input's, with a description naming each input's
run and weight; each file's metadata keeps the keys every input has with one value, plus ``average`` (the weights and
the inputs' directory names).

Used by recipe.py (¾ of the 1600-step second run + ¼ of the 3200-step one: docs/model-card.md, "Averaging second
runs"). Run alone: ``average_weights.py --out DIR --model A 0.75 --model B 0.25``. Exit status 2 with the field named
for bad input (nothing written), else 0.
"""
import argparse
import json
import math
import os
import re
import shutil
import struct
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from omnirx_reference import read_safetensors, write_safetensors  # noqa: E402

#: the weights files of a model directory
WEIGHT_FILES = ("transformer.safetensors", "text_encoder.safetensors", "vae.safetensors")
#: the run a description names, as train.py writes it (the same pattern train.py reads from an --init model)
RUN = re.compile(r"\(tools/train/train\.py, .*\)")
#: how far the weights' sum may be from 1
SUM_TOLERANCE = 1e-9


class AverageError(ValueError):
    """Inputs that cannot be averaged: the message names the directory, file, tensor or field."""


def average_tensors(inputs: Sequence[Tuple[Dict[str, np.ndarray], float]], where: str) -> Dict[str, np.ndarray]:
    """``{name: sum_i w_i * t_i[name]}`` over ``inputs`` (``[(tensors, w_i)]``), summed in float64 and cast back to
    the inputs' dtype; each tensor keeps its shape (any rank, e.g. a linear weight ``[out, in]``).

    :raises AverageError: when an input lacks a tensor of the first or has one it lacks, or a tensor's shape or dtype
        differs from the first input's (``where`` and the tensor are named)
    """
    first = inputs[0][0]
    for k, (tensors, _) in enumerate(inputs[1:], start=2):
        missing, extra = sorted(set(first) - set(tensors)), sorted(set(tensors) - set(first))
        if missing or extra:
            raise AverageError(f"{where}: input {k} " + (f"lacks tensor {missing[0]!r}" if missing else f"has tensor {extra[0]!r} that input 1 lacks"))
        for name, t in first.items():
            o = tensors[name]
            if o.shape != t.shape:
                raise AverageError(f"{where}: tensor {name!r} is {list(o.shape)} in input {k}, {list(t.shape)} in input 1")
            if o.dtype != t.dtype:
                raise AverageError(f"{where}: tensor {name!r} is {o.dtype} in input {k}, {t.dtype} in input 1")
    out: Dict[str, np.ndarray] = {}
    for name, t in first.items():
        acc = np.zeros(t.shape, np.float64)
        for tensors, w in inputs:
            acc += w * tensors[name].astype(np.float64)
        out[name] = acc.astype(t.dtype)
    return out


def check_weights(weights: Sequence[float]) -> None:
    """:raises AverageError: unless there are at least two weights, each finite and > 0, summing to 1 (± 1e-9)."""
    if len(weights) < 2:
        raise AverageError(f"--model: give at least two models to average, got {len(weights)}")
    for k, w in enumerate(weights, start=1):
        if not math.isfinite(w) or w <= 0:
            raise AverageError(f"--model: weight {k} must be finite and > 0, got {w}")
    if abs(sum(weights) - 1) > SUM_TOLERANCE:
        raise AverageError(f"--model: the weights must sum to 1, got {sum(weights):.12g}")


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise AverageError(f"{path}: cannot read it as JSON ({type(e).__name__}: {e})") from None
    if not isinstance(value, dict):
        raise AverageError(f"{path}: must hold a JSON object")
    return value


def _read_weights(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    try:
        return read_safetensors(path)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, struct.error) as e:
        raise AverageError(f"{path}: cannot read it as safetensors ({type(e).__name__}: {e})") from None


def describe(spec: dict, runs: Sequence[Tuple[str, float]]) -> str:
    """The averaged model's description: the first input's text before its run, then ``: the weighted average (…) of
    w_1 × [RUN_1] and w_2 × [RUN_2] …``, each RUN the parenthesis train.py wrote (with the runs it continued) or the
    input's directory in parentheses."""
    text = str(spec.get("description", ""))
    m = RUN.search(text)
    head = text[: m.start()].rstrip() if m else ""
    parts = " and ".join(f"{w:g} × [{run}]" for run, w in runs)
    return f"{head + ': t' if head else 'T'}he weighted average of weights (Wortsman et al. 2022, model soups) of {parts}."


def average_model_dirs(out: str, models: Sequence[Tuple[str, float]]) -> None:
    """Writes to ``out`` the weighted average of the model directories ``models`` (``[(dir, weight)]``): the three
    safetensors files, ``model.json`` and ``tokenizer.json``. Everything is read and checked before ``out`` is made.

    :raises AverageError: for weights :func:`check_weights` refuses, an input missing a file or holding one that is
        not safetensors / JSON, tensors that differ in name, shape or dtype, ``model.json`` that differ in a field
        other than ``description``, or ``tokenizer.json`` that differ
    """
    check_weights([w for _, w in models])
    specs = [_read_json(os.path.join(d, "model.json")) for d, _ in models]
    for (d, _), spec in zip(models[1:], specs[1:]):
        for key in sorted(set(spec) | set(specs[0])):
            if key != "description" and spec.get(key) != specs[0].get(key):
                raise AverageError(f"{os.path.join(d, 'model.json')}: {key!r} differs from {os.path.join(models[0][0], 'model.json')}'s (one architecture and VAE are averaged)")
    tokenizers = [_read_json(os.path.join(d, "tokenizer.json")) for d, _ in models]
    for (d, _), tok in zip(models[1:], tokenizers[1:]):
        if tok != tokenizers[0]:
            raise AverageError(f"{os.path.join(d, 'tokenizer.json')}: differs from {os.path.join(models[0][0], 'tokenizer.json')}")
    files: Dict[str, Tuple[Dict[str, np.ndarray], Dict[str, str]]] = {}
    names = ", ".join(f"{w:g} {os.path.basename(os.path.normpath(d))}" for d, w in models)
    for f in WEIGHT_FILES:
        read = [_read_weights(os.path.join(d, f)) for d, _ in models]
        tensors = average_tensors([(t, w) for (t, _), (_, w) in zip(read, models)], f)
        metas = [m for _, m in read]
        common = {k: v for k, v in metas[0].items() if all(m.get(k) == v for m in metas[1:])}
        files[f] = (tensors, {**common, "generator": "omnirx tools/train/average_weights.py", "average": names})
    runs: List[Tuple[str, float]] = []
    for (d, w), spec in zip(models, specs):
        m = RUN.search(str(spec.get("description", "")))
        runs.append((m.group(0) if m else f"({d})", w))
    spec = {**specs[0], "description": describe(specs[0], runs)}
    os.makedirs(out, exist_ok=True)
    for f, (tensors, meta) in files.items():
        write_safetensors(os.path.join(out, f), tensors, meta)
    with open(os.path.join(out, "model.json"), "w") as fh:
        json.dump(spec, fh, indent=2)
    shutil.copyfile(os.path.join(models[0][0], "tokenizer.json"), os.path.join(out, "tokenizer.json"))


def main(argv: Sequence[str] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--model", nargs=2, action="append", metavar=("DIR", "WEIGHT"), required=True,
                    help="a model directory and its weight (repeat; the weights sum to 1)")
    a = ap.parse_args(argv)
    models: List[Tuple[str, float]] = []
    for k, (d, w) in enumerate(a.model, start=1):
        try:
            models.append((d, float(w)))
        except ValueError:
            ap.error(f"--model: weight {k} must be a number, got {w!r}")
    if not a.out:
        ap.error("--out must not be empty")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        ap.error(f"--out must be a directory; {a.out} is a file")
    try:
        average_model_dirs(a.out, models)
    except AverageError as e:
        ap.error(str(e))
    except OSError as e:
        ap.error(f"--out {a.out}: {e.strerror}")
    print(f"average_weights: {a.out} = {', '.join(f'{w:g} × {d}' for d, w in models)}")


if __name__ == "__main__":
    main()
