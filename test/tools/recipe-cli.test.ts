/**
 * The embedded default's recipe as one command, tools/train/recipe.py (issue 8): three train.py runs, the second and
 * third a teacher-forcing phase continued from the first without its block weight and attribute loss, on the same data,
 * the third twice as long; the model is ¾ of the second's weights with ¼ of the third's. With `--short` (a few steps of
 * every stage) it checks what the recipe promises: the runtime loads its output, the runs carry the options
 * docs/model-card.md names and the later phases draw the first's data, the model is that average, a stopped recipe
 * resumed gives the bytes of one never stopped, and bad flags or a failing stage stop it by name. The full recipe is
 * measured in docs/model-card.md, not here. The runs train in float32 (`--precision float32`, passed on to every run):
 * on a CPU without AVX512_BF16 torch emulates the default bf16 autocast 10–20× slower, which took these tests past
 * their timeouts (test/tools/train-cli.test.ts checks bf16 itself).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { itRefuses } from '../helpers/cli-refusals';
import { CHECK_MODEL_DIR, PYTHON, readModelFile as weights, ROOT, runTrainScript, SAFETENSORS, scratchDir } from '../helpers/train-python';

const RECIPE = path.join(ROOT, 'tools', 'train', 'recipe.py');
const CHECK = CHECK_MODEL_DIR;
const FLOAT32 = ['--precision', 'float32'];
/** recipe.py in float32 (given first, so a test's own --precision counts). */
const recipe = (args: string[]) => runTrainScript('recipe.py', [...FLOAT32, ...args]);
const scratch = () => scratchDir('recipe');

function json(file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
}

function metadata(dir: string, file: string): Record<string, string> {
  return weights(dir, file).metadata;
}

function sameWeights(a: string, b: string): boolean {
  return SAFETENSORS.every((f) => readFileSync(path.join(a, f)).equals(readFileSync(path.join(b, f))));
}

describe('recipe.py --short', () => {
  let out: string;
  beforeAll(() => {
    out = path.join(scratch(), 'model');
    const r = recipe(['--out', out, '--short', '--seed', '3']);
    if (r.status !== 0) throw new Error(`recipe.py failed (${r.status}): ${r.stderr}`);
  }, 300_000);

  it('writes a model directory of the default architecture that the runtime loads, whose description names the average of both later runs', () => {
    const r = spawnSync(process.execPath, [CHECK, out], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/OK \(trained, default architecture, every component loads\)/);
    const first =
      '\\(tools\\/train\\/train\\.py, seed 3, 2 VAE \\+ 2 DiT \\+ 1,1 fine-tune \\+ 2 teacher-forcing steps at share 0\\.75 from the spawn point; base and fine-tune scenes from the spawn point\\)';
    const later = (steps: number) =>
      `\\(tools\\/train\\/train\\.py, seed 5, 0 VAE \\+ 0 DiT \\+ 0 fine-tune \\+ ${steps} teacher-forcing steps at share 0\\.75 from the spawn point\\), continued from ${first}`;
    expect(String(json(path.join(out, 'model.json')).description)).toMatch(
      new RegExp(
        `trained on the procedural top-down world: the weighted average of weights \\(Wortsman et al\\. 2022, model soups\\) of 0\\.75 × \\[${later(2)}\\] and 0\\.25 × \\[${later(4)}\\]\\.$`,
      ),
    );
  });

  it('stage 1 trains with the text stage, the attribute loss, block weight 10 and every scene from the spawn point; stage 2 and stage 2-long without either, on the teacher-forcing data of stage 1', () => {
    const first = path.join(out, 'stage1');
    const s1 = json(path.join(first, 'train_summary.json'));
    expect(s1).toMatchObject({ block_weight: 10, start: 'spawn', text: { steps: 3, aux_weight: 0.1 } });
    for (const f of SAFETENSORS) {
      expect(metadata(first, f)).toMatchObject({
        seed: '3',
        text_steps: '3',
        text_encoder: 'joint',
        text_aux_weight: '0.1',
        block_weight: '10.0',
        teacher_forcing_steps: '2',
        start: 'spawn',
        precision: 'float32',
      });
    }
    for (const [name, steps] of [
      ['stage2', 2],
      ['stage2-long', 4],
    ] as const) {
      const dir = path.join(out, name);
      for (const f of SAFETENSORS) {
        const second = metadata(dir, f);
        expect(second).toMatchObject({
          seed: '5',
          dit_steps: '0',
          finetune_steps: '0',
          teacher_forcing_steps: String(steps),
          text_encoder: 'joint',
          precision: 'float32',
        });
        expect(second).not.toHaveProperty('block_weight');
        expect(second).not.toHaveProperty('text_aux_weight');
      }
      const s2 = json(path.join(dir, 'train_summary.json'));
      expect(s2).toMatchObject({ block_weight: 0, init: first, text: { steps: 0, aux_weight: 0 }, dit: { steps: 0 } });
      // the same data seed: the later phase repeats the first's batches without the block weight
      expect((s2.teacher as { seed: number }).seed).toBe((s1.teacher as { seed: number }).seed);
      const log = readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { stage: string }).stage);
      expect(log).toEqual(Array(steps).fill('teacher'));
      // a different model from stage 1's: the last phase trained on
      expect(readFileSync(path.join(dir, 'transformer.safetensors')).equals(readFileSync(path.join(first, 'transformer.safetensors')))).toBe(false);
    }
  });

  it('the model is ¾ stage 2 + ¼ stage 2-long, tensor by tensor (to float16 rounding), with the metadata both runs share', () => {
    for (const f of SAFETENSORS) {
      const [avg, a, b] = [out, path.join(out, 'stage2'), path.join(out, 'stage2-long')].map((d) => weights(d, f));
      expect(avg.entries.map((e) => [e.name, e.dtype, e.shape])).toEqual(a.entries.map((e) => [e.name, e.dtype, e.shape]));
      let worst = 0;
      for (const { name } of avg.entries) {
        const [x, y, z] = [avg.float32(name), a.float32(name), b.float32(name)];
        for (let i = 0; i < x.length; i++) {
          const want = 0.75 * y[i] + 0.25 * z[i];
          // half float16's spacing: 2**-11 relative, 2**-25 absolute among subnormals
          worst = Math.max(worst, Math.abs(x[i] - want) / Math.max(Math.abs(want) * 2 ** -11, 2 ** -25));
        }
      }
      expect(worst).toBeLessThanOrEqual(1);
      expect(metadata(out, f)).toMatchObject({ seed: '5', generator: 'omnirx tools/train/average_weights.py', average: '0.75 stage2, 0.25 stage2-long' });
      expect(metadata(out, f)).not.toHaveProperty('teacher_forcing_steps');
    }
    // the two runs differ, so the average is neither
    expect(sameWeights(path.join(out, 'stage2'), path.join(out, 'stage2-long'))).toBe(false);
    expect(sameWeights(out, path.join(out, 'stage2'))).toBe(false);
  });

  it('rerun, it writes the same bytes; with --resume after stage 2-long and the model were lost it keeps stages 1 and 2 and rewrites the same model', () => {
    const again = path.join(scratch(), 'model');
    expect(recipe(['--out', again, '--short', '--seed', '3']).status).toBe(0);
    expect(sameWeights(again, out)).toBe(true);
    const logs = ['stage1', 'stage2'].map((d) => readFileSync(path.join(again, d, 'train_log.jsonl')));
    rmSync(path.join(again, 'stage2-long'), { recursive: true });
    for (const f of SAFETENSORS) rmSync(path.join(again, f));
    const r = recipe(['--out', again, '--short', '--seed', '3', '--resume']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(
      /recipe: stage1 finished in .*stage1; kept\nrecipe: stage2 finished in .*stage2; kept\nrecipe: stage2-long: .*--out .*stage2-long --init .*stage1 /,
    );
    expect(['stage1', 'stage2'].map((d) => readFileSync(path.join(again, d, 'train_log.jsonl')))).toEqual(logs);
    expect(sameWeights(path.join(again, 'stage2-long'), path.join(out, 'stage2-long'))).toBe(true);
    expect(sameWeights(again, out)).toBe(true);
  }, 300_000);

  it('--resume over a finished stage 1 of other flags is refused by name, before any training (exit 2, nothing rewritten)', () => {
    const before = readFileSync(path.join(out, 'transformer.safetensors'));
    const r = recipe(['--out', out, '--short', '--seed', '4', '--resume']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      /--resume: .*stage1\/train_summary\.json: the finished run has --seed 3, this recipe 4 \(another --seed or --short\? use another --out\)/,
    );
    const full = recipe(['--out', out, '--seed', '3', '--resume']);
    expect(full.status).toBe(2);
    expect(full.stderr).toMatch(/the finished run has --text-steps 3, this recipe 500/);
    // without --precision the recipe's runs are bfloat16, not the float32 ones it finished
    const bf16 = runTrainScript('recipe.py', ['--out', out, '--short', '--seed', '3', '--resume']);
    expect(bf16.status).toBe(2);
    expect(bf16.stderr).toMatch(/the finished run has --precision float32, this recipe bfloat16/);
    expect(readFileSync(path.join(out, 'transformer.safetensors')).equals(before)).toBe(true);
  });

  it('killed inside stage 1 (after its text stage) and resumed, it writes the bytes of the recipe never stopped', async () => {
    const stopped = path.join(scratch(), 'model');
    await new Promise<void>((resolve, reject) => {
      // its own process group, so the kill reaches the train.py it runs as well
      const child = spawn(PYTHON, [RECIPE, ...FLOAT32, '--out', stopped, '--short', '--seed', '3'], { cwd: ROOT, stdio: 'ignore', detached: true });
      const log = path.join(stopped, 'stage1', 'train_log.jsonl');
      const poll = setInterval(() => {
        if (existsSync(log) && /"stage": "dit"/.test(readFileSync(log, 'utf8'))) process.kill(-child.pid!, 'SIGKILL');
      }, 20);
      child.on('exit', (code, signal) => {
        clearInterval(poll);
        if (signal === 'SIGKILL') resolve();
        else reject(new Error(`recipe.py ended by itself (exit ${code}) before stage 1 reached its DiT`));
      });
    });
    expect(existsSync(path.join(stopped, 'stage1', 'checkpoint.pt'))).toBe(true);
    expect(existsSync(path.join(stopped, 'model.json'))).toBe(false);
    const r = recipe(['--out', stopped, '--short', '--seed', '3', '--resume']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/recipe: stage1: .* --resume/);
    expect(sameWeights(stopped, out)).toBe(true);
    expect(sameWeights(path.join(stopped, 'stage1'), path.join(out, 'stage1'))).toBe(true);
  }, 300_000);

  it("--resume over runs that cannot be averaged (stage 2-long of another tokenizer): the average's refusal by name, exit 2, no model written", () => {
    // the last test of this block: it damages the shared run (a copy elsewhere would not resume, as its runs name their
    // --init directory)
    for (const f of [...SAFETENSORS, 'model.json']) rmSync(path.join(out, f));
    writeFileSync(path.join(out, 'stage2-long', 'tokenizer.json'), JSON.stringify({ type: 'word-bytes', words: ['a', 'ball'] }));
    const r = recipe(['--out', out, '--short', '--seed', '3', '--resume']);
    expect(r.status).toBe(2);
    expect(r.stdout).toMatch(/recipe: stage2-long finished in .*stage2-long; kept/);
    expect(r.stderr).toMatch(/recipe: average refused its input: .*stage2-long\/tokenizer\.json: differs from .*stage2\/tokenizer\.json/);
    expect(existsSync(path.join(out, 'model.json'))).toBe(false);
  });
});

describe('recipe.py refuses bad input by name (exit 2), and stops at a stage that fails', () => {
  itRefuses(
    recipe,
    [
      ['a negative seed', ['--seed=-1'], /--seed must be in \[0, 4294967292\] .*; got -1/],
      [
        'a seed whose stage-2 data seed is no numpy seed (2**32 − 3)',
        ['--seed', '4294967293'],
        /--seed must be in \[0, 4294967292\] \(numpy seeds are below 2\*\*32, and the last phase's data seed is S \+ 3\); got 4294967293/,
      ],
      ['a seed of 2**70', ['--seed', '1180591620717411303424'], /--seed must be in \[0, 4294967292\]/],
      ['zero threads', ['--threads', '0'], /--threads must be in \[1, 1024\]; got 0/],
      ['10**20 threads', ['--threads', '100000000000000000000'], /--threads must be in \[1, 1024\]; got 100000000000000000000/],
      ['an empty --out (the last --out counts)', ['--out', ''], /--out must not be empty/],
      [
        'an --out that cannot be created',
        ['--out', '/proc/omnirx-recipe/model'],
        /--out \/proc\/omnirx-recipe\/model: cannot create the directory \(No such file or directory\)/,
      ],
      ['a seed that is not an integer', ['--seed', '1.5'], /argument --seed: invalid int value: '1\.5'/],
      ['a flag of train.py it does not pass on', ['--block-weight', '3'], /unrecognized arguments: --block-weight 3/],
      ['an unknown precision', ['--precision', 'float16'], /--precision: invalid choice: 'float16'/],
    ],
    ['--short'],
  );

  it("a damaged stage-1 checkpoint under --resume: train.py's refusal, the recipe's exit 2, and no stage 2", () => {
    const out = path.join(scratch(), 'model');
    const stage1 = path.join(out, 'stage1');
    mkdirSync(stage1, { recursive: true });
    writeFileSync(path.join(stage1, 'checkpoint.pt'), 'not a checkpoint');
    writeFileSync(path.join(stage1, 'train_log.jsonl'), '');
    const r = recipe(['--out', out, '--short', '--resume']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/train\.py: error: --resume: /);
    expect(r.stderr).toMatch(/recipe: stage1 refused its input \(exit 2\)/);
    expect(r.stderr).not.toMatch(/rerun with --resume/);
    expect(existsSync(path.join(out, 'model.json'))).toBe(false);
  });
});
