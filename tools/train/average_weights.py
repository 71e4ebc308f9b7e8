"""Weighted average of model directories' weights (a "model soup", Wortsman et al. 2022, "Model soups: averaging
weights of multiple fine-tuned models improves accuracy without increasing inference time", arXiv:2203.05482): runs
fine-tuned from one checkpoint lie in one basin, and the average of their weights can keep what each run learned.

Every tensor of ``transformer``, ``text_encoder`` and ``vae.safetensors`` becomes ``sum_i w_i * t_i``, summed in
float64 in the inputs' order (starting from ``w_1 * t_1``, so −0.0 stays −0.0) and rounded once to the inputs' dtype:
F16 or F32 (a BF16 file is read widened and stored F32; other dtypes are refused). Weights are finite, > 0 and sum to
1 within 1e-9 (so thirds need nine digits), and at least two models are given (one directory may be given twice).
Tensors every input holds alike therefore come out the same bytes (the recipe's second runs share stage 1's VAE).

The inputs must be one architecture: the same tensor names, shapes and dtypes in every file, the same ``model.json``
but for its ``description`` (so the same VAE latent statistics) and the same ``tokenizer.json``. Each safetensors file
is checked as an input boundary: header length, a JSON object without repeated keys, string metadata, F16/F32/BF16
tensors whose offsets lie inside the data and do not overlap and whose byte length is their shape's, finite values.

The output's ``model.json`` is the first input's with a description naming each input's run and weight (the run is
the part train.py wrote, from its ``(tools/train/train.py, …`` to the end, or an averaged input's whole average; a
description without one contributes the input's directory); each file's metadata keeps the keys every input has with
one value, plus ``generator`` and ``average`` (the weights and the inputs' directory names); ``tokenizer.json`` is the
first input's. Files in ``--out`` are replaced (all written to temporary names first, then renamed); ``--out`` must not
be an input. Memory: one running sum per tensor plus one input file at a time.

Used by recipe.py (¾ of the 1600-step second run + ¼ of the 3200-step one: docs/model-card.md, "Averaging second
runs"). Run alone: ``average_weights.py --out DIR --model A 0.75 --model B 0.25``. Exit status 2 with the file, tensor
or field named for bad input, before anything is written; 1 when writing fails (named); else 0.
"""
import argparse
import errno
import json
import math
import os
import re
import shutil
import struct
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from omnirx_reference import write_safetensors  # noqa: E402

#: the weights files of a model directory
WEIGHT_FILES = ("transformer.safetensors", "text_encoder.safetensors", "vae.safetensors")
#: the run a description names, as train.py writes it (the pattern train.py reads from an --init model)
RUN = re.compile(r"\(tools/train/train\.py, ")
#: what this script writes before the runs it averages
AVERAGE_OF = "the weighted average of weights (Wortsman et al. 2022, model soups) of "
#: how far the weights' sum may be from 1
SUM_TOLERANCE = 1e-9
#: stored dtype -> (bytes per element, numpy dtype read, numpy dtype written)
DTYPES = {"F16": (2, np.float16, np.float16), "F32": (4, np.float32, np.float32), "BF16": (2, np.uint16, np.float32)}
#: the largest header a file may have (the reference implementation's cap, as the runtime's parser)
MAX_HEADER_BYTES = 100_000_000


class AverageError(ValueError):
    """Inputs that cannot be averaged: the message names the directory, file, tensor or field."""


def _no_repeats(pairs: List[Tuple[str, object]]) -> dict:
    """A JSON object's ``object_pairs_hook`` that refuses a key given twice (json keeps the last, silently)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise AverageError(f"key {k!r} appears more than once")
        out[k] = v
    return out


def read_weights(path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str], Dict[str, str]]:
    """One safetensors file, checked: ``({name: array}, {name: stored dtype}, metadata)``. F16 arrays come back
    float16, F32 float32, BF16 widened to float32; each with its header shape (e.g. a linear weight ``[out, in]``).

    :raises AverageError: naming ``path`` and the byte offset or tensor, when the file cannot be read, is shorter than
        its header, its header is not a JSON object of tensor entries (repeated keys included), its metadata is not
        an object of strings, a tensor's dtype is not F16/F32/BF16, its shape not non-negative integers, its offsets
        outside the data, overlapping another's or not its shape's byte length, or it holds NaN or ±inf
    """
    def fail(detail: str) -> AverageError:
        return AverageError(f"{path}: {detail}")

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise fail(f"cannot read it ({e.strerror})") from None
    if len(data) < 8:
        raise fail(f"{len(data)} bytes, shorter than the 8-byte header length at byte 0")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(len(data) - 8, MAX_HEADER_BYTES):
        raise fail(f"header length {n} (byte 0) runs past the file's {len(data)} bytes or the {MAX_HEADER_BYTES}-byte cap")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"), object_pairs_hook=_no_repeats)
    except (UnicodeDecodeError, ValueError) as e:  # AverageError (a repeated key) is a ValueError too
        raise fail(f"header at byte 8 is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise fail("header at byte 8 must be a JSON object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise fail('"__metadata__" must be an object of strings')
    base, size = 8 + n, len(data) - 8 - n
    tensors: Dict[str, np.ndarray] = {}
    dtypes: Dict[str, str] = {}
    spans: List[Tuple[int, int, str]] = []
    for name, entry in header.items():
        if not isinstance(entry, dict):
            raise fail(f"tensor {name!r}: its entry must be an object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPES:
            raise fail(f"tensor {name!r}: dtype {dtype!r}; only F16, F32 and BF16 are averaged")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise fail(f"tensor {name!r}: shape {shape!r} must be a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1] <= size):
            raise fail(f"tensor {name!r}: data_offsets {offsets!r} must be [begin, end] with 0 <= begin <= end <= {size} (the data's length)")
        width, read_as, stored_as = DTYPES[dtype]
        if offsets[1] - offsets[0] != math.prod(shape) * width:
            raise fail(f"tensor {name!r}: data_offsets {offsets} hold {offsets[1] - offsets[0]} bytes, its shape {shape} in {dtype} {math.prod(shape) * width}")
        spans.append((offsets[0], offsets[1], name))
        raw = np.frombuffer(data[base + offsets[0] : base + offsets[1]], dtype=np.dtype(read_as).newbyteorder("<"))
        arr = (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else raw.astype(stored_as)
        if not np.isfinite(arr).all():
            raise fail(f"tensor {name!r} holds NaN or ±inf")
        tensors[name], dtypes[name] = arr.reshape(shape), dtype
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:]):
        if begin < end:
            raise fail(f"tensors {a!r} and {b!r} overlap at data byte {begin}")
    return tensors, dtypes, meta


def check_weights(weights: Sequence[float]) -> None:
    """:raises AverageError: unless there are at least two weights, each finite and > 0, summing to 1 (± 1e-9)."""
    if len(weights) < 2:
        raise AverageError(f"--model: give at least two models to average, got {len(weights)}")
    for k, w in enumerate(weights, start=1):
        if not math.isfinite(w) or w <= 0:
            raise AverageError(f"--model: weight {k} must be finite and > 0, got {w}")
    if abs(math.fsum(weights) - 1) > SUM_TOLERANCE:
        raise AverageError(f"--model: the weights must sum to 1, got {math.fsum(weights):.12g}")


def average_file(paths: Sequence[str], weights: Sequence[float], name: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """``({tensor: sum_i w_i * t_i}, metadata every input shares)`` of one weights file over its copies ``paths``,
    read one at a time into a float64 running sum, rounded once to each tensor's stored dtype (BF16 → float32).

    :raises AverageError: for a file :func:`read_weights` refuses, or an input whose tensor names, shapes or stored
        dtypes differ from the first input's (``name`` and the tensor are named)
    """
    acc: Dict[str, np.ndarray] = {}
    first: Dict[str, Tuple[str, Tuple[int, ...]]] = {}
    common: Dict[str, str] = {}
    for k, (path, w) in enumerate(zip(paths, weights), start=1):
        tensors, dtypes, meta = read_weights(path)
        if k == 1:
            first = {t: (dtypes[t], a.shape) for t, a in tensors.items()}
            common = dict(meta)
            acc = {t: w * a.astype(np.float64) for t, a in tensors.items()}
            continue
        missing, extra = sorted(set(first) - set(tensors)), sorted(set(tensors) - set(first))
        if missing or extra:
            raise AverageError(f"{name}: input {k} " + (f"lacks tensor {missing[0]!r}" if missing else f"has tensor {extra[0]!r} that input 1 lacks"))
        for t, a in tensors.items():
            dtype, shape = first[t]
            if a.shape != shape:
                raise AverageError(f"{name}: tensor {t!r} is {list(a.shape)} in input {k}, {list(shape)} in input 1")
            if dtypes[t] != dtype:
                raise AverageError(f"{name}: tensor {t!r} is {dtypes[t]} in input {k}, {dtype} in input 1")
            acc[t] += w * a.astype(np.float64)
        common = {key: v for key, v in common.items() if meta.get(key) == v}
    stored = {t: DTYPES[dtype][2] for t, (dtype, _) in first.items()}
    return {t: a.astype(stored[t]) for t, a in acc.items()}, common


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            value = json.load(f)
    except OSError as e:
        raise AverageError(f"{path}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raise AverageError(f"{path}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise AverageError(f"{path}: must hold a JSON object")
    return value


def split_description(text: str) -> Tuple[str, Optional[str]]:
    """``(head, run)`` of a model's description: the run is an averaged model's whole average, else train.py's
    ``(tools/train/train.py, …`` to the end (its ``continued from (…)`` included), without the final period; None when
    the description names neither."""
    i = text.find(": " + AVERAGE_OF)
    if i >= 0:
        return text[:i], text[i + 2 :].rstrip().rstrip(".")
    m = RUN.search(text)
    if m:
        return text[: m.start()].rstrip(), text[m.start() :].rstrip().rstrip(".")
    return text.rstrip().rstrip("."), None


def describe(spec: dict, runs: Sequence[Tuple[str, float]]) -> str:
    """The averaged model's description: the first input's head (its text before its run), then ``: the weighted
    average of weights (…) of w_1 × [RUN_1] and w_2 × [RUN_2] …``."""
    head, _ = split_description(str(spec.get("description", "")))
    parts = " and ".join(f"{w:g} × [{run}]" for run, w in runs)
    return f"{head}: {AVERAGE_OF}{parts}." if head else f"{AVERAGE_OF[0].upper()}{AVERAGE_OF[1:]}{parts}."


def _write_all(out: str, writers: Dict[str, Callable[[str], None]]) -> None:
    """Writes every file ``{name: write(tmp_path)}`` of ``out`` to a temporary name first and renames them into place
    only when all were written, so a failed write (a full disk, a directory in the way) leaves ``out`` as it was."""
    tmps = {name: os.path.join(out, f".{name}.tmp-{os.getpid()}") for name in writers}
    for name in writers:  # a directory in the way would fail a rename after the writes went through
        if os.path.isdir(os.path.join(out, name)):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.path.join(out, name))
    try:
        for name, write in writers.items():
            write(tmps[name])
        for name, tmp in tmps.items():
            os.replace(tmp, os.path.join(out, name))
    finally:
        for tmp in tmps.values():
            if os.path.isfile(tmp):
                os.remove(tmp)


def average_model_dirs(out: str, models: Sequence[Tuple[str, float]]) -> None:
    """Writes to ``out`` the weighted average of the model directories ``models`` (``[(dir, weight)]``): the three
    safetensors files, ``model.json`` and ``tokenizer.json``. Everything is read and checked before ``out`` is made.

    :raises AverageError: for weights :func:`check_weights` refuses, ``out`` being one of the inputs or a directory
        that cannot be made, an input missing a file or holding one :func:`read_weights` or JSON refuses, tensors that
        differ in name, shape or dtype, ``model.json`` that differ in a field other than ``description``, or
        ``tokenizer.json`` that differ
    :raises OSError: when a file in ``out`` cannot be written (``out`` is left as it was)
    """
    check_weights([w for _, w in models])
    for d, _ in models:
        if os.path.realpath(d) == os.path.realpath(out):
            raise AverageError(f"--out {out} is the input {d}; write the average elsewhere")
    specs = [_read_json(os.path.join(d, "model.json")) for d, _ in models]
    for (d, _), spec in zip(models[1:], specs[1:]):
        for key in sorted(set(spec) | set(specs[0])):
            if key != "description" and ((key in spec) != (key in specs[0]) or spec.get(key) != specs[0].get(key)):
                raise AverageError(f"{os.path.join(d, 'model.json')}: {key!r} differs from {os.path.join(models[0][0], 'model.json')}'s (one architecture and VAE are averaged)")
    tokenizers = [_read_json(os.path.join(d, "tokenizer.json")) for d, _ in models]
    for (d, _), tok in zip(models[1:], tokenizers[1:]):
        if tok != tokenizers[0]:
            raise AverageError(f"{os.path.join(d, 'tokenizer.json')}: differs from {os.path.join(models[0][0], 'tokenizer.json')}")
    names = ", ".join(f"{w:g} {os.path.basename(os.path.normpath(d))}" for d, w in models)
    files: Dict[str, Tuple[Dict[str, np.ndarray], Dict[str, str]]] = {}
    for f in WEIGHT_FILES:
        tensors, common = average_file([os.path.join(d, f) for d, _ in models], [w for _, w in models], f)
        files[f] = (tensors, {**common, "generator": "omnirx tools/train/average_weights.py", "average": names})
    runs = []
    for (d, w), spec in zip(models, specs):
        _, run = split_description(str(spec.get("description", "")))
        runs.append((run or f"({d})", w))
    spec = {**specs[0], "description": describe(specs[0], runs)}
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise AverageError(f"--out {out}: cannot create the directory ({e.strerror})") from None

    def write_spec(tmp: str) -> None:
        with open(tmp, "w") as fh:
            json.dump(spec, fh, indent=2)

    writers: Dict[str, Callable[[str], None]] = {
        f: (lambda tmp, t=tensors, m=meta: write_safetensors(tmp, t, m)) for f, (tensors, meta) in files.items()
    }
    writers["model.json"] = write_spec
    writers["tokenizer.json"] = lambda tmp: shutil.copyfile(os.path.join(models[0][0], "tokenizer.json"), tmp)
    _write_all(out, writers)


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: average_weights.py --out DIR --model OUT/stage2 0.75 --model OUT/stage2-long 0.25. At least two "
        "--model; weights finite, > 0, summing to 1 within 1e-9. Files already in DIR are replaced. Exit 2 for bad input "
        "(nothing written), 1 when writing fails.",
    )
    ap.add_argument("--out", required=True, help="model directory to write (not one of the inputs)")
    ap.add_argument("--model", nargs=2, action="append", metavar=("DIR", "WEIGHT"), required=True,
                    help="a model directory and its weight (repeat: --model A 0.75 --model B 0.25)")
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
        print(f"average_weights: writing {e.filename2 or e.filename or a.out} failed ({e.strerror or e})", file=sys.stderr)
        sys.exit(1)
    print(f"average_weights: {a.out} = {', '.join(f'{w:g} × {d}' for d, w in models)}")


if __name__ == "__main__":
    main()
