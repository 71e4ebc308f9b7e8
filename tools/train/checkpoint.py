"""
Resumable runs of tools/train/train.py (``--resume``): the run's state written to ``OUT/checkpoint.pt`` at the end of
every stage and phase but the last and, inside a DiT phase, every ``--checkpoint-minutes`` (default 10), so a run
stopped by a signal, a crash or the end of a time slot continues from its last checkpoint. With fixed step counts (the
recipe's, or given by flag) the resumed run writes the same bytes as the run never stopped; in budget mode
(``--budget-minutes``, ``--smoke``) the counts fixed so far are kept and later phases take their share of the time
left, as any budget run's do.

What makes that exact: the stages before the checkpoint are skipped and their results (weights, latent statistics,
step counts) come from the file; the phase in progress gets back its modules (float32, as trained), its AdamW state,
its step, its learning-rate schedule's total and every random stream it draws from (torch's global generator, the
phase's noise generator and error-recycling generator, numpy's attribute-prompt and error-recycling streams). Its data
needs nothing: a DiT batch is a function of (seed, data index, use), so a phase is checkpointed only where the next
step starts a fresh data index (step a multiple of ``--reuse``). The log (``train_log.jsonl``) is cut back, at the
resumed run's first record, to the length it had at the checkpoint, so it holds each step once. Stages ``vae`` and
``text`` are checkpointed at their end only: a stop inside the VAE stage (``VAE_SHARE`` of a budget run, about 15 %
of the recipe's time) reruns it.

File layout: one ``torch.save`` of a flat ``{name: tensor}`` dict plus ``"meta"``, a JSON string (format, version,
the run's flags, completed stages, the phase in progress, log length, wall time), so ``torch.load(weights_only=True)``
reads it without running pickled code. Tensor names: ``module.<enc|dec|t5|dit|heads.K>.<parameter>``,
``opt.<index>.<key>`` (AdamW state per parameter index), ``rng.torch``, ``rng.gen`` and ``rng.recycle_gen`` (torch
generator states). The log is synced to disk first, then the checkpoint is written to a temporary file, synced and
renamed over the old one, so a kill or an OS crash while writing leaves the last complete checkpoint and a log at
least as long as it says. A finished run removes it; a new run (without ``--resume``) in the same directory removes a
stopped run's at its start. A resumed run must use the code the run started with: the meta records the SHA-256 of every
source file of the repository the run had loaded (``code_digests``: the training scripts, the reference model and the
spec they read), and ``--resume`` refuses a checkpoint whose files differ, naming the first, as it refuses other flags.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from typing import IO, Any, Dict, Iterable, Mapping, Optional

import torch

FORMAT, VERSION = "omnirx-train-checkpoint", 2  # 2: meta.code
FILE = "checkpoint.pt"


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed: missing, damaged, of another format or of a run with other flags or code."""


def code_digests(root: str, paths: Iterable[str]) -> Dict[str, str]:
    """``{path relative to root: SHA-256 hex digest}`` of the files ``paths`` that lie under ``root`` (others skipped),
    sorted by path: what a checkpoint records of the code that wrote it.

    :raises OSError: when one of those files cannot be read
    """
    root = os.path.realpath(root)
    out: Dict[str, str] = {}
    for p in paths:
        real = os.path.realpath(p)
        if os.path.commonpath([root, real]) != root:
            continue
        with open(real, "rb") as f:
            out[os.path.relpath(real, root).replace(os.sep, "/")] = hashlib.sha256(f.read()).hexdigest()
    return dict(sorted(out.items()))


def _json_flags(flags: Mapping[str, Any]) -> Dict[str, Any]:
    """The flags as they read back from JSON (tuples become lists), so a loaded run compares equal to a parsed one."""
    return json.loads(json.dumps(dict(flags)))


def _meta_problem(meta: Dict[str, Any], tensors: Mapping[str, torch.Tensor]) -> Optional[str]:
    """What is wrong with a checkpoint's meta (named by field), or None."""
    def count(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    stages = meta.get("stages")
    if not isinstance(stages, dict) or not all(isinstance(v, dict) for v in stages.values()):
        return "meta.stages must be an object of objects (stage: what it recorded)"
    if not stages:
        return "meta.stages is empty (a checkpoint is first written at the end of the VAE stage)"
    wall = meta.get("wall_s")
    if not (isinstance(wall, (int, float)) and not isinstance(wall, bool) and math.isfinite(wall) and wall >= 0):
        return f"meta.wall_s must be a finite number ≥ 0; got {wall!r}"
    if not count(meta.get("log_bytes")):
        return f"meta.log_bytes must be an integer ≥ 0; got {meta.get('log_bytes')!r}"
    cur = meta.get("current", "missing")
    if cur is None:
        return None
    if not isinstance(cur, dict) or not isinstance(cur.get("stage"), str) or not isinstance(cur.get("state"), dict) or not isinstance(cur.get("param_groups"), list):
        return "meta.current must be null or an object with stage, state and param_groups"
    if cur["stage"] in stages:
        return f"meta.current.stage {cur['stage']!r} is also among the completed stages"
    state = cur["state"]
    for key in ("step", "total"):
        if not count(state.get(key)):
            return f"meta.current.state.{key} must be an integer ≥ 0; got {state.get(key)!r}"
    if state["step"] > state["total"]:
        return f"meta.current.state.step {state['step']} is past the phase's total {state['total']}"
    for name in ("rng.gen", "rng.recycle_gen"):
        if name not in tensors:
            return f"a checkpoint taken inside a phase needs the tensor {name}"
    return None


class RunCheckpoint:
    """
    The checkpoint of one run in directory ``out``. ``flags``: every option that changes the run's tensors (the parsed
    arguments without ``--out``, ``--resume`` and ``--checkpoint-minutes``); ``code``: the digests of the run's source
    files (``code_digests``); ``every_s``: seconds between checkpoints
    inside a DiT phase (0: at every step that starts a fresh data index). With ``resume`` the file is read and checked
    now; ``flag_names`` maps an argument's name to its flag for messages.

    The run registers its modules as it makes them (``track``), its log file (``attach_log``) and its start
    (``started``), then brackets each stage with ``begin(stage)`` and ``finish(stage, meta)``. On a resumed run
    ``begin`` returns the meta of a stage the checkpoint completed (the caller skips it and calls ``skipped``); the
    weights and torch's generator come back at the point the checkpoint was taken (the end of its last completed stage,
    or the start of the phase it was taken in, which asks ``progress(stage)`` for its step, optimizer and streams).

    :raises CheckpointError: with ``resume``, for a missing or unreadable file (naming it), one of another format or
        version, or one whose run had other flags or other code (naming the first flag or file that differs)
    """

    def __init__(self, out: str, flags: Mapping[str, Any], code: Mapping[str, str], every_s: float, resume: bool, flag_names: Mapping[str, str]):
        self.path = os.path.join(out, FILE)
        self.flags = _json_flags(flags)
        self.code = dict(code)
        self.every_s = every_s
        self.stages: Dict[str, Dict[str, Any]] = {}
        self.wall_before = 0.0  # seconds the run had taken up to the checkpoint it resumes from
        self.log_bytes = 0  # length of train_log.jsonl at that checkpoint
        self.modules: Dict[str, torch.nn.Module] = {}
        self._log: Optional[IO[str]] = None
        self._cut_pending = False
        self._t_start = time.time()
        self._tensors: Optional[Dict[str, torch.Tensor]] = None
        self._current: Optional[Dict[str, Any]] = None
        self._restored = False
        self._last_save = time.time()
        if resume:
            self._load(flag_names)

    def _load(self, flag_names: Mapping[str, str]) -> None:
        if not os.path.isfile(self.path):
            raise CheckpointError(f"no checkpoint to resume: {self.path} does not exist (a run writes it at the end of its VAE stage)")
        try:
            raw = torch.load(self.path, weights_only=True)
        except Exception as e:  # noqa: BLE001 — torch raises several kinds for a damaged file; all mean the same here
            # torch's own message may suggest loading without weights_only, which would run the file's code: not said
            raise CheckpointError(f"{self.path}: not a readable checkpoint: damaged, or not written by this script ({type(e).__name__})") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("meta"), str):
            raise CheckpointError(f"{self.path}: not a checkpoint of tools/train/train.py (no meta)")
        try:
            meta = json.loads(raw["meta"])
        except (json.JSONDecodeError, RecursionError) as e:
            raise CheckpointError(f"{self.path}: meta is not JSON ({type(e).__name__})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise CheckpointError(f"{self.path}: format is {meta.get('format') if isinstance(meta, dict) else None!r}, not {FORMAT!r}")
        if meta.get("version") != VERSION:
            raise CheckpointError(f"{self.path}: version {meta.get('version')!r}; this script reads version {VERSION}")
        theirs = meta.get("flags")
        if not isinstance(theirs, dict):
            raise CheckpointError(f"{self.path}: meta.flags is missing")
        for key in sorted(set(theirs) | set(self.flags)):
            if theirs.get(key) != self.flags.get(key):
                name = flag_names.get(key, key)
                raise CheckpointError(f"{name}: the checkpoint's run had {name} {theirs.get(key)!r}, this command {self.flags.get(key)!r}; --resume continues a run with the flags it started with")
        code = meta.get("code")
        if not isinstance(code, dict):
            raise CheckpointError(f"{self.path}: meta.code is missing")
        for path in sorted(set(code) | set(self.code)):
            then, now = code.get(path), self.code.get(path)
            if then != now:
                what = (f"{path}, which the checkpoint's run loaded, is not loaded by this one" if now is None
                        else f"{path} is loaded by this run but was not by the checkpoint's" if then is None
                        else f"{path} has changed since the checkpoint was written (SHA-256 {str(then)[:12]}… then, {now[:12]}… now)")
                raise CheckpointError(f"{what}; --resume continues a run with the code it started with (its weights are then those of the run never stopped)")
        tensors = {k: v for k, v in raw.items() if k != "meta"}
        if "rng.torch" not in tensors or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in tensors.items()):
            raise CheckpointError(f"{self.path}: its entries other than meta must be tensors named by strings, rng.torch among them")
        problem = _meta_problem(meta, tensors)
        if problem:
            raise CheckpointError(f"{self.path}: {problem}")
        self.stages = dict(meta["stages"])
        self.wall_before = float(meta["wall_s"])
        self.log_bytes = int(meta["log_bytes"])
        self._current = meta["current"]
        self._tensors = tensors

    @property
    def resuming(self) -> bool:
        """Whether this run continues from a checkpoint."""
        return self._tensors is not None

    @property
    def current(self) -> Optional[Dict[str, Any]]:
        """The phase the checkpoint was taken in (``stage``, ``state``, ``param_groups``), or None (taken at a stage's end)."""
        return self._current

    def describe(self) -> str:
        """Where a resumed run goes on from, e.g. "vae, text done; dit from step 800"."""
        done = ", ".join(self.stages) + " done"
        return done + (f"; {self._current['stage']} from step {self._current['state']['step']}" if self._current else "")

    def started(self) -> float:
        """The run's start as ``time.time()`` would have read it, counting the time before the checkpoint resumed from."""
        self._t_start = time.time() - self.wall_before
        return self._t_start

    def attach_log(self, log: IO[str]) -> None:
        """The run's train_log.jsonl, open for appending, whose length each checkpoint records. On a resumed run it is
        cut back to the checkpoint's length at the first ``before_log``, so a refusal found while restoring leaves it as
        it was."""
        self._log = log
        self._cut_pending = self.resuming

    def before_log(self) -> None:
        """Call before writing a record to the log (cuts a resumed run's log back once, see ``attach_log``)."""
        if self._cut_pending and self._log is not None:
            self._log.truncate(self.log_bytes)
            self._log.seek(0, os.SEEK_END)
            self._cut_pending = False

    def track(self, **modules: torch.nn.Module) -> None:
        """Registers modules (by name: enc, dec, t5, dit, heads.K) whose weights every checkpoint holds."""
        self.modules.update(modules)

    def begin(self, stage: str) -> Optional[Dict[str, Any]]:
        """
        Before ``stage``: the meta ``finish`` recorded for it when the checkpoint completed it (skip the stage, then call
        ``skipped``), else None (run it). For the phase the checkpoint was taken in, it first loads the checkpoint's
        weights into the tracked modules and torch's global generator state (``progress`` has the rest).

        :raises CheckpointError: when the checkpoint lacks weights for a tracked module or they do not fit it
        """
        if stage in self.stages:
            return self.stages[stage]
        if self._current is not None and self._current["stage"] == stage:
            self._restore()
        return None

    def skipped(self, stage: str) -> None:
        """After the caller rebuilt what a completed ``stage`` made (modules tracked): when the checkpoint was taken at
        this stage's end, loads its weights into the tracked modules (all made by then; later ones are not tracked yet) and
        torch's global generator state, so the run goes on from exactly there."""
        if self._current is None and self.stages and stage == list(self.stages)[-1]:
            self._restore()

    def _restore(self) -> None:
        assert self._tensors is not None and not self._restored
        for name, module in self.modules.items():
            prefix = f"module.{name}."
            own = {k[len(prefix):]: v for k, v in self._tensors.items() if k.startswith(prefix)}
            if not own:
                raise CheckpointError(f"{self.path}: no weights for {name} (module.{name}.*), which the run had made by then")
            try:
                module.load_state_dict(own, strict=True)
            except RuntimeError as e:
                detail = [ln.strip() for ln in str(e).splitlines()[1:] if ln.strip()][:1] or [str(e)]
                raise CheckpointError(f"{self.path}: module.{name} does not fit this script's {name}: {detail[0][:300]}") from None
        try:
            torch.set_rng_state(self._tensors["rng.torch"])
        except (RuntimeError, TypeError) as e:
            raise CheckpointError(f"{self.path}: rng.torch is not a torch generator state ({type(e).__name__})") from None
        self._restored = True

    def progress(self, stage: str) -> Optional[Dict[str, Any]]:
        """The state of ``stage`` as the checkpoint left it mid-phase, or None when it starts afresh: ``state`` (what
        ``save_progress`` was given), ``opt`` (an AdamW ``state_dict``) and ``gens`` (torch generator states by name)."""
        if self._current is None or self._current["stage"] != stage:
            return None
        t = self._tensors or {}
        per_param: Dict[int, Dict[str, torch.Tensor]] = {}
        try:
            for k, v in t.items():
                if k.startswith("opt."):
                    _, index, key = k.split(".", 2)
                    per_param.setdefault(int(index), {})[key] = v
            groups = [{**g, "betas": tuple(g["betas"])} for g in self._current["param_groups"]]
        except (ValueError, TypeError, KeyError) as e:
            raise CheckpointError(f"{self.path}: the optimizer state is malformed (opt.<index>.<key> tensors, param_groups with betas): {type(e).__name__}: {e}") from None
        gens = {k[len("rng."):]: v for k, v in t.items() if k.startswith("rng.") and k != "rng.torch"}
        return {"state": self._current["state"], "opt": {"state": per_param, "param_groups": groups}, "gens": gens}

    def finish(self, stage: str, meta: Dict[str, Any]) -> None:
        """After ``stage``: records its ``meta`` (JSON-able) and writes the checkpoint."""
        self.stages[stage] = meta
        self._write(None, {})

    def due(self) -> bool:
        """Whether ``every_s`` has passed since the last write."""
        return time.time() - self._last_save >= self.every_s

    def save_progress(self, stage: str, state: Dict[str, Any], opt: torch.optim.Optimizer, gens: Mapping[str, torch.Generator]) -> None:
        """Mid-phase: writes the checkpoint with ``stage`` in progress: ``state`` (JSON-able: step, schedule total,
        numpy stream states, the phase's elapsed time), the AdamW state of ``opt`` and the torch generators ``gens``."""
        sd = opt.state_dict()
        tensors = {f"opt.{i}.{k}": v for i, s in sd["state"].items() for k, v in s.items()}
        tensors.update({f"rng.{name}": g.get_state() for name, g in gens.items()})
        self._write({"stage": stage, "state": state, "param_groups": sd["param_groups"]}, tensors)

    def _write(self, current: Optional[Dict[str, Any]], extra: Dict[str, torch.Tensor]) -> None:
        log_bytes = 0
        if self._log is not None:  # on disk before the checkpoint that counts it (an OS crash keeps both or the older)
            self._log.flush()
            os.fsync(self._log.fileno())
            log_bytes = self.log_bytes if self._cut_pending else self._log.tell()
        meta = {
            "format": FORMAT, "version": VERSION, "flags": self.flags, "code": self.code, "stages": self.stages, "current": current,
            "log_bytes": log_bytes, "wall_s": time.time() - self._t_start,
        }
        data: Dict[str, Any] = {"meta": json.dumps(meta)}
        for name, module in self.modules.items():
            data.update({f"module.{name}.{k}": v.detach().clone() for k, v in module.state_dict().items()})
        data["rng.torch"] = torch.get_rng_state()
        data.update(extra)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            torch.save(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        directory = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself
        finally:
            os.close(directory)
        self._last_save = time.time()

    def remove(self) -> None:
        """Deletes the checkpoint (the run has written its model)."""
        for p in (self.path, self.path + ".tmp"):
            if os.path.exists(p):
                os.remove(p)
