"""The embedded default's training recipe (issue 8) as one command: three runs of train.py, the second and third
continued from the first, and the weighted average of the last two.

1. ``train.py --out OUT/stage1 --seed S`` with the text stage (500 steps), the text stage's attribute loss kept beside
   the DiT's (λ 0.1), a block weight of 10 in every DiT phase and every scene's agent starting at the world's spawn
   point (``--start spawn``, since 2026-12-07; the teacher-forcing phase's scenes start there anyway): the recipe's
   step counts (``RECIPE_STEPS``: VAE, base, two agent-weighted fine-tunes, a teacher-forcing phase). The block weight
   makes the DiT draw the blocks (the latent cells they cover weigh 11× in the loss); it costs action following. The
   spawn point lifted all three target figures of the recipe's output, two beyond their intervals
   (docs/model-card.md, "The spawn point in every phase").
2. ``train.py --out OUT/stage2 --init OUT/stage1 --seed S+2 --dit-steps 0 --finetune-steps 0
   --teacher-forcing-steps 1600``: the teacher-forcing phase again, on the same data (seed S + 2 + 0 phases + 1, as in
   stage 1), without the block weight or the attribute loss. Measured in docs/model-card.md ("Text encoder"): this
   last phase decides the trade; without the block weight it lifts prompt colour, action following and agent
   presence, and most of the blocks go (block count 0.459 → 0.117 after the spawn point).
3. ``OUT/stage2-long``: stage 2's command with ``--teacher-forcing-steps 3200``. Alone it gains world sessions and
   loses T2V's agent on npm start's prompt (docs/model-card.md, "The last phase's length, batches and seed").
4. ``average_weights.py --out OUT --model OUT/stage2 0.75 --model OUT/stage2-long 0.25``: ¾ of stage 2's weights with
   ¼ of stage 2-long's (a model soup; docs/model-card.md, "Averaging second runs"), which keeps most of what each
   run is better at.

OUT then holds the model directory the runtime loads (its model.json names the runs and weights); each run's log and
summary are in its own directory. Each run is a train.py command with the flags below, so any can be repeated or
resumed on its own; ``--resume`` continues whichever run was stopped (a finished run is kept when its ``repeat``
line has every option the recipe gives it; a run without a checkpoint starts from its beginning) and averages again.
``--precision`` goes to every run: bfloat16 by default, as the shipped weights were trained; float32 on a CPU without
AVX512_BF16, where torch emulates bf16 many times slower (other weights; ``--resume`` keeps only runs of the same one).
Wall time: 122.9 minutes as one command on 2 cores (2026-12-07), with tests run beside its VAE stage (20.0 minutes
against 8.3 alone); about 111 with nothing else running (stage 1 85.0 − 11.7, stage 2 12.8, stage 2-long 25.0, the
average seconds). It wrote the shipped files byte for byte (docs/model-card.md, "Command").

Exit status: 2 for a bad flag of its own or one a run or the average refuses (with its message); else that of the
first run that fails (128 + N for a run killed by signal N); else 0.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from typing import List, Optional, Tuple

from average_weights import AverageError, average_model_dirs

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train.py")

#: stage 1's flags beyond --out and --seed (the recipe's step counts are train.py's defaults)
STAGE1 = ["--text-steps", "500", "--text-encoder", "joint", "--text-aux-weight", "0.1", "--block-weight", "10",
          "--start", "spawn"]
#: stage 2's steps: one more teacher-forcing phase, as long as the recipe's; stage 2-long's: twice that
STAGE2_TEACHER_STEPS = 1600
STAGE2_LONG_TEACHER_STEPS = 3200
#: the average's weights of stage 2 and stage 2-long (docs/model-card.md, "Averaging second runs")
AVERAGE = (0.75, 0.25)
#: fine-tune phases of stage 1: stage 2's seed is S + this, so its teacher-forcing data seed is stage 1's
FINETUNE_PHASES = 2
#: the largest --seed: stage 2's teacher-forcing data seed S + FINETUNE_PHASES + 1 must stay a numpy seed (< 2**32)
SEED_MAX = 2**32 - 1 - (FINETUNE_PHASES + 1)
#: the largest --threads (torch takes an int; far above any CPU this recipe is meant for)
THREADS_MAX = 1024
#: --short: a few steps of every stage, to check the pipeline (the tests), not to train
SHORT1 = ["--vae-steps", "2", "--text-steps", "3", "--dit-steps", "2", "--finetune-steps", "1,1", "--teacher-forcing-steps", "2"]
SHORT2_TEACHER_STEPS, SHORT2_LONG_TEACHER_STEPS = 2, 4


def stage_commands(out: str, seed: int, threads: int, short: bool, precision: str = "bfloat16") -> List[Tuple[str, List[str]]]:
    """The recipe's runs writing under ``out``: per run, its output directory and train.py argument list (the
    script's path first, without the interpreter): stage 1, stage 2 and stage 2-long."""
    first = os.path.join(out, "stage1")
    # argparse keeps the last of a repeated flag: the short run's --text-steps 3 overrides the recipe's 500
    flags1 = STAGE1 + (SHORT1 if short else [])
    stage1 = [TRAIN, "--out", first, "--seed", str(seed), "--threads", str(threads), "--precision", precision, *flags1]

    def second(name: str, steps: int) -> Tuple[str, List[str]]:
        d = os.path.join(out, name)
        return d, [TRAIN, "--out", d, "--init", first, "--seed", str(seed + FINETUNE_PHASES), "--threads", str(threads),
                   "--precision", precision, "--dit-steps", "0", "--finetune-steps", "0", "--teacher-forcing-steps", str(steps)]

    return [(first, stage1),
            second("stage2", SHORT2_TEACHER_STEPS if short else STAGE2_TEACHER_STEPS),
            second("stage2-long", SHORT2_LONG_TEACHER_STEPS if short else STAGE2_LONG_TEACHER_STEPS)]


def finished_run_problem(summary_file: str, cmd: List[str]) -> Optional[str]:
    """Why the finished run whose ``train_summary.json`` is ``summary_file`` is not the run of ``cmd`` (a stage's
    train.py arguments), or None if it is: every option ``cmd`` gives that changes the tensors must have the same
    value in the run's ``repeat`` line (numbers compared as numbers; the last of a repeated flag counts)."""
    try:
        with open(summary_file) as f:
            words = str(json.load(f)["repeat"]).split()
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{summary_file} is not a finished run's summary ({type(e).__name__}: {e})"
    ran = dict(zip(words[0::2], words[1::2]))
    given = {flag: value for flag, value in zip(cmd[1::2], cmd[2::2]) if flag not in ("--out", "--threads")}

    def same(x: str, y: str) -> bool:
        try:
            return float(x) == float(y)
        except ValueError:
            return x == y

    for flag, value in given.items():
        if flag not in ran or not same(ran[flag], value):
            return f"{summary_file}: the finished run has {flag} {ran.get(flag, '(not given)')}, this recipe {value} (another --seed or --short? use another --out)"
    return None


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="model directory to write (the first run's in OUT/stage1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resume", action="store_true", help="continue a stopped recipe in --out: a finished stage 1 is kept, a stopped run resumed from its checkpoint.pt")
    ap.add_argument("--short", action="store_true", help="a few steps of every stage (checks the pipeline; the weights are not trained)")
    ap.add_argument("--precision", choices=("bfloat16", "float32"), default="bfloat16",
                    help="train.py --precision of every run: bfloat16 (the recipe's, which made the shipped weights) or float32 "
                         "(a CPU without AVX512_BF16 emulates bf16 many times slower; the tests' --short runs use it)")
    a = ap.parse_args(argv)
    # numpy seeds are in [0, 2**32); stage 2 runs at S + 2 and its phase's data at S + 3
    if not 0 <= a.seed <= SEED_MAX:
        ap.error(f"--seed must be in [0, {SEED_MAX}] (numpy seeds are below 2**32, and the last phase's data seed is S + {FINETUNE_PHASES + 1}); got {a.seed}")
    if not 1 <= a.threads <= THREADS_MAX:
        ap.error(f"--threads must be in [1, {THREADS_MAX}]; got {a.threads}")
    if not a.out:
        ap.error("--out must not be empty")
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        ap.error(f"--out must be a directory; {a.out} is a file")
    try:  # before any training: a directory that cannot be made would otherwise fail only when stage 1 writes
        os.makedirs(a.out, exist_ok=True)
    except OSError as e:
        ap.error(f"--out {a.out}: cannot create the directory ({e.strerror})")
    t0 = time.time()
    runs = stage_commands(a.out, a.seed, a.threads, a.short, a.precision)
    for out, cmd in runs:
        name = os.path.basename(out)
        summary = os.path.join(out, "train_summary.json")
        if a.resume and os.path.isfile(summary) and not os.path.isfile(os.path.join(out, "checkpoint.pt")):
            problem = finished_run_problem(summary, cmd)
            if problem:
                ap.error(f"--resume: {problem}")
            print(f"recipe: {name} finished in {out}; kept", flush=True)
            continue
        if a.resume and os.path.isfile(os.path.join(out, "checkpoint.pt")):
            cmd = cmd + ["--resume"]
        print(f"recipe: {name}: {sys.executable} {' '.join(os.path.relpath(c) if c == TRAIN else c for c in cmd)}", flush=True)
        rc = subprocess.call([sys.executable, *cmd])
        if rc == 2:  # train.py refused its input (its message above): resuming would meet the same refusal
            print(f"recipe: {name} refused its input (exit 2)", file=sys.stderr)
            sys.exit(2)
        if rc != 0:  # a crash or a signal (subprocess gives -N for signal N; the shell's convention is 128 + N)
            code = 128 - rc if rc < 0 else rc
            print(f"recipe: {name} failed (exit {code}); rerun with --resume to continue", file=sys.stderr)
            sys.exit(code)
    models = [(out, w) for (out, _), w in zip(runs[1:], AVERAGE)]
    print(f"recipe: average: {', '.join(f'{w:g} × {d}' for d, w in models)} -> {a.out}", flush=True)
    try:
        average_model_dirs(a.out, models)
    except AverageError as e:
        print(f"recipe: average refused its input: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:
        print(f"recipe: writing the average failed: {e.filename2 or e.filename or a.out}: {e.strerror or e}; rerun with --resume to average again", file=sys.stderr)
        sys.exit(1)
    print(f"recipe: done in {(time.time() - t0) / 60:.1f} min; model in {a.out}", flush=True)


if __name__ == "__main__":
    main()
