/**
 * The training command, tools/train/train.py (issue 8), as a user runs it with Debian's PyTorch: its flags refuse bad
 * values by name before any training starts, a short run writes a model directory the runtime loads, the `repeat`
 * line of train_summary.json reproduces that run byte for byte, and `--init` continues from a directory it wrote while
 * refusing one it did not, the teacher-forcing phase run on a written model gives the weights of one command that ends
 * with it, and a run killed inside a phase and continued with `--resume` gives the weights of the run never stopped. Runs are a few steps of the default architecture (about 20 s each); the recipe itself is
 * measured in docs/model-card.md, not here. They train in float32 (`--precision float32`), except the short runs that
 * check the default precision, bfloat16 autocast: on a CPU without AVX512_BF16 torch emulates bf16 and a DiT step
 * takes 10–20× as long (about 42 s against 2 s on an AVX2-only AMD EPYC, 2 cores), which took the suite past an hour
 * and its runs past their timeouts.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseSafetensors } from '../../src/models/weights/safetensors';
import { itRefuses, Refusal } from '../helpers/cli-refusals';
import { makeModelsDir } from '../helpers/tiny-model';
import { CHECK_MODEL_DIR, PYTHON, ROOT, runTrainScript, SAFETENSORS, scratchDir } from '../helpers/train-python';

const TRAIN = path.join(ROOT, 'tools', 'train', 'train.py');
const CHECK = CHECK_MODEL_DIR;
/** Every run but those of the default precision trains in float32 (given first, so a test's own --precision counts). */
const FLOAT32 = ['--precision', 'float32'];
const train = (args: string[]) => runTrainScript('train.py', [...FLOAT32, ...args]);
const scratch = () => scratchDir('train');

/** The tensors of a safetensors file (names, dtypes, shapes and data bytes), without its `__metadata__`, which
 * records the run's step counts. */
function tensors(file: string): Array<[string, string, number[], Buffer]> {
  const bytes = readFileSync(file);
  return parseSafetensors(bytes, file).entries.map((e) => [e.name, e.dtype, e.shape, bytes.subarray(e.byteOffset, e.byteOffset + e.byteLength)]);
}

function summary(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(dir, 'train_summary.json'), 'utf8'));
}

describe('train.py refuses bad flags by name, before training (exit 2, nothing written)', () => {
  const cases: Refusal[] = [
    ['image share of 1', ['--image-share', '1'], /--image-share must be in \[0, 1\); got 1\.0/],
    ['image share NaN', ['--image-share', 'nan'], /--image-share must be in \[0, 1\); got nan/],
    ['negative image share', ['--image-share=-0.1'], /--image-share must be in \[0, 1\)/],
    ['reuse 0', ['--reuse', '0'], /--reuse must be at least 1; got 0/],
    ['a zero fine-tune phase among others', ['--finetune-steps', '1300,0'], /--finetune-steps: .*a fine-tune phase of 0 steps/],
    ['negative fine-tune steps', ['--finetune-steps=-5'], /--finetune-steps: .*must not be negative/],
    ['non-integer fine-tune steps', ['--finetune-steps', '1e3'], /--finetune-steps: .*expected comma-separated integers/],
    ['fine-tune shares leaving no base phase', ['--finetune-shares', '0.5,0.5'], /--finetune-shares must leave the base phase/],
    ['a fine-tune share outside (0, 1)', ['--finetune-shares', '1.5'], /--finetune-shares: .*each share must be in \(0, 1\)/],
    ['negative VAE steps', ['--vae-steps=-1'], /--vae-steps must not be negative; got -1/],
    ['zero DiT steps without --init', ['--dit-steps', '0'], /--dit-steps must be at least 1 \(0 only with --init\); got 0/],
    ['negative teacher-forcing steps', ['--teacher-forcing-steps=-1'], /--teacher-forcing-steps must not be negative; got -1/],
    ['teacher-forcing share above 1', ['--teacher-forcing-share', '1.5'], /--teacher-forcing-share must be in \[0, 1\]; got 1\.5/],
    ['teacher-forcing share NaN', ['--teacher-forcing-share', 'nan'], /--teacher-forcing-share must be in \[0, 1\]; got nan/],
    [
      'teacher-forcing learning rate 0',
      ['--teacher-forcing-lr', '0'],
      /--teacher-forcing-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 0\.0/,
    ],
    [
      'teacher-forcing learning rate inf',
      ['--teacher-forcing-lr', 'inf'],
      /--teacher-forcing-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got inf/,
    ],
    [
      'an unknown teacher-forcing start',
      ['--teacher-forcing-start', 'centre'],
      /--teacher-forcing-start: invalid choice: 'centre' \(choose from '?spawn'?, '?random'?\)/,
    ],
    ['an unknown start', ['--start', 'corner'], /--start: invalid choice: 'corner' \(choose from '?spawn'?, '?random'?\)/],
    ['error recycling above 1', ['--error-recycling', '1.5'], /--error-recycling must be in \[0, 1\]; got 1\.5/],
    ['error recycling NaN', ['--error-recycling', 'nan'], /--error-recycling must be in \[0, 1\]; got nan/],
    ['negative error recycling', ['--error-recycling=-0.5'], /--error-recycling must be in \[0, 1\]; got -0\.5/],
    [
      'error recycling without a teacher-forcing phase',
      ['--teacher-forcing-steps', '0', '--error-recycling', '0.5'],
      /--error-recycling 0\.5 needs a teacher-forcing phase; --teacher-forcing-steps is 0/,
    ],
    ['budget NaN', ['--budget-minutes', 'nan'], /--budget-minutes must be a positive number; got nan/],
    ['budget 0', ['--budget-minutes', '0'], /--budget-minutes must be a positive number; got 0/],
    ['unknown precision', ['--precision', 'float16'], /--precision: invalid choice: 'float16'/],
    ['DiT learning rate 0', ['--dit-lr', '0'], /--dit-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 0\.0/],
    ['DiT learning rate NaN', ['--dit-lr', 'nan'], /--dit-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got nan/],
    ['a subnormal DiT learning rate', ['--dit-lr', '1e-40'], /--dit-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 1e-40/],
    [
      'a subnormal teacher-forcing learning rate',
      ['--teacher-forcing-lr', '5e-324'],
      /--teacher-forcing-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 5e-324/,
    ],
    [
      'DiT learning rate -inf (written with =, as argparse reads -inf alone as a flag)',
      ['--dit-lr=-inf'],
      /--dit-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got -inf/,
    ],
    ['DiT learning rate of 1', ['--dit-lr', '1'], /--dit-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 1\.0/],
    ['text-encoder learning rate 0', ['--text-lr', '0'], /--text-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 0\.0/],
    ['text-encoder learning rate NaN', ['--text-lr', 'nan'], /--text-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got nan/],
    ['text-encoder learning rate of 2', ['--text-lr', '2'], /--text-lr must be in \(0, 1\) and above float32's smallest normal number 1\.18e-38; got 2\.0/],
    [
      'a text-encoder learning rate for a frozen encoder',
      ['--text-lr', '1e-4', '--text-encoder', 'frozen'],
      /--text-lr needs --text-encoder joint \(a frozen encoder has no learning rate\)/,
    ],
    ['negative text-encoder steps', ['--text-steps=-1'], /--text-steps must not be negative; got -1/],
    ['a negative block weight', ['--block-weight=-1'], /--block-weight must be a finite number ≥ 0; got -1\.0/],
    ['a block weight of NaN', ['--block-weight', 'nan'], /--block-weight must be a finite number ≥ 0; got nan/],
    ['a block weight of inf', ['--block-weight', 'inf'], /--block-weight must be a finite number ≥ 0; got inf/],
    ['a causal share above 1', ['--causal-share', '1.5'], /--causal-share must be in \[0, 1\]; got 1\.5/],
    ['a causal share of NaN', ['--causal-share', 'nan'], /--causal-share must be in \[0, 1\]; got nan/],
    ['a negative causal share', ['--causal-share=-0.1'], /--causal-share must be in \[0, 1\]; got -0\.1/],
    ['a negative attribute-loss weight', ['--text-aux-weight=-0.5'], /--text-aux-weight must be a finite number ≥ 0; got -0\.5/],
    ['an attribute-loss weight of NaN', ['--text-aux-weight', 'nan'], /--text-aux-weight must be a finite number ≥ 0; got nan/],
    ['an attribute-loss weight of inf', ['--text-aux-weight', 'inf'], /--text-aux-weight must be a finite number ≥ 0; got inf/],
    [
      'an attribute-loss weight for a frozen encoder',
      ['--text-aux-weight', '0.1', '--text-encoder', 'frozen'],
      /--text-aux-weight needs --text-encoder joint \(a frozen encoder learns nothing from it\)/,
    ],
    ['unknown text-encoder mode', ['--text-encoder', 'trained'], /--text-encoder: invalid choice: 'trained'/],
    [
      'an --init directory that does not exist',
      ['--init', '/nonexistent/omnirx'],
      /--init \/nonexistent\/omnirx: not a model directory this script wrote \(missing model\.json/,
    ],
    ['a negative checkpoint interval', ['--checkpoint-minutes=-1'], /--checkpoint-minutes must be a finite number ≥ 0; got -1\.0/],
    ['a checkpoint interval of NaN', ['--checkpoint-minutes', 'nan'], /--checkpoint-minutes must be a finite number ≥ 0; got nan/],
    ['--resume where no run has written a checkpoint', ['--resume'], /--resume: no checkpoint to resume: .*model\/checkpoint\.pt does not exist/],
  ];
  itRefuses(train, cases, ['--smoke']);

  it('an --init directory of another architecture (the seeded tiny model), naming the key that differs', async () => {
    const tiny = path.join(await makeModelsDir(), 'tiny');
    const r = train(['--out', path.join(scratch(), 'model'), '--init', tiny]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--init .*tiny: model\.json textEncoder\.\w+ is .*, the default architecture has /);
  });
});

describe('the default precision, bfloat16 autocast', () => {
  // one VAE and one DiT step per run: where torch emulates bf16 (no AVX512_BF16) the DiT step alone takes about a
  // minute on 2 cores, so the test allows each run train.py's 300 s and itself 15 minutes
  const run = ['--seed', '3', '--vae-steps', '1', '--text-steps', '0', '--dit-steps', '1', '--finetune-steps', '0', '--teacher-forcing-steps', '0'];
  const bf16 = (out: string, args: string[]) => runTrainScript('train.py', ['--out', out, ...args]);

  it('trains the DiT and text encoder under it (other weights than float32, the same VAE), records it in the metadata, summary and repeat line, writes a model the runtime loads, and the repeat line gives the same bytes', () => {
    const dir = path.join(scratch(), 'bf16');
    const r = bf16(dir, run);
    if (r.status !== 0) throw new Error(`train.py failed (${r.status}): ${r.stderr}`);
    expect(summary(dir)).toMatchObject({ precision: 'bfloat16', dit: { steps: 1 } });
    expect(String(summary(dir).repeat)).toMatch(/ --precision bfloat16 /);
    for (const f of SAFETENSORS) expect(parseSafetensors(readFileSync(path.join(dir, f)), f).metadata).toMatchObject({ precision: 'bfloat16' });
    const log = readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { stage: string; loss: number });
    expect(log.map((l) => l.stage)).toEqual(['vae', 'dit']);
    for (const l of log) expect(Number.isFinite(l.loss)).toBe(true);
    const check = spawnSync(process.execPath, [CHECK, dir], { encoding: 'utf8' });
    expect(check.stdout).toMatch(/OK \(trained, default architecture, every component loads\)/);

    const f32 = path.join(scratch(), 'f32');
    expect(train(['--out', f32, ...run]).status).toBe(0);
    // the tensors' bytes (the metadata names the precision, so the files differ anyway)
    const same = (f: string) => {
      const [a, b] = [tensors(path.join(dir, f)), tensors(path.join(f32, f))];
      return a.length === b.length && a.every(([name, , , data], i) => name === b[i][0] && data.equals(b[i][3]));
    };
    expect([same('vae.safetensors'), same('transformer.safetensors'), same('text_encoder.safetensors')]).toEqual([true, false, false]);

    const again = path.join(scratch(), 'again');
    expect(bf16(again, String(summary(dir).repeat).split(' ')).status).toBe(0);
    for (const f of SAFETENSORS) expect(readFileSync(path.join(again, f)).equals(readFileSync(path.join(dir, f)))).toBe(true);
  }, 900_000);
});

describe('a short training run', () => {
  // --reuse 2, a frozen text encoder after a text stage and another DiT learning rate (not the recipe's defaults), so the
  // second DiT step takes the shared batch's second use and the repeat line carries those options; a teacher-forcing
  // phase of 2 steps at share 0.9 and a learning rate of its own ends it
  const common = [
    '--text-encoder',
    'frozen',
    '--image-share',
    '0.5',
    '--reuse',
    '2',
    '--dit-lr',
    '0.0005',
    '--teacher-forcing-share',
    '0.9',
    '--teacher-forcing-lr',
    '0.0002',
  ];
  const flags = [
    '--seed',
    '3',
    '--vae-steps',
    '2',
    '--text-steps',
    '3',
    '--dit-steps',
    '2',
    '--finetune-steps',
    '1,1',
    '--teacher-forcing-steps',
    '2',
    ...common,
  ];
  let first: string;
  beforeAll(() => {
    first = path.join(scratch(), 'first');
    const r = train(['--out', first, ...flags]);
    if (r.status !== 0) throw new Error(`train.py failed (${r.status}): ${r.stderr}`);
  }, 300_000);

  it('writes a model directory of the default architecture that the runtime loads (tools/train/check-model-dir)', () => {
    const r = spawnSync(process.execPath, [CHECK, first], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/OK \(trained, default architecture, every component loads\)/);
    expect(r.status).toBe(0);
  });

  it('logs every step of each stage and phase in order, and its summary holds the flags it ran with', () => {
    const log = readFileSync(path.join(first, 'train_log.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { stage: string; step: number; loss: number; mode?: string; lr?: number });
    expect(log.map((r) => `${r.stage}:${r.step}`)).toEqual([
      'vae:0',
      'vae:1',
      'text:0',
      'text:1',
      'text:2',
      'dit:0',
      'dit:1',
      'finetune:0',
      'finetune2:0',
      'teacher:0',
      'teacher:1',
    ]);
    for (const r of log) expect(Number.isFinite(r.loss)).toBe(true);
    const dit = log.filter((r) => r.stage !== 'vae' && r.stage !== 'text');
    for (const r of dit.filter((r) => r.stage !== 'teacher')) expect(['causal', 'bidirectional', 'image']).toContain(r.mode);
    // the teacher phase's first batch (share 0.9) is teacher forcing, and its second step reuses it (--reuse 2)
    expect(dit.filter((r) => r.stage === 'teacher').map((r) => r.mode)).toEqual(['teacher_forcing', 'teacher_forcing']);
    // every DiT phase warms up to its peak (--dit-lr; the teacher phase's --teacher-forcing-lr) over 50 steps: step k runs at lr·(k + 1)/50
    expect(dit.map((r) => r.lr)).toEqual(
      [0.0005 / 50, (0.0005 * 2) / 50, 0.0005 / 50, 0.0005 / 50, 0.0002 / 50, (0.0002 * 2) / 50].map((x) => expect.closeTo(x, 12)),
    );
    const s = summary(first);
    expect(s).toMatchObject({
      seed: 3,
      image_share: 0.5,
      reuse: 2,
      precision: 'float32',
      dit_lr: 0.0005,
      text_lr: null,
      vae: { steps: 2 },
      text: { steps: 3, during_dit: 'frozen' },
      dit: { steps: 2 },
    });
    const acc = (s.text as { held_out_acc: Record<string, number> }).held_out_acc;
    expect(Object.keys(acc)).toEqual(['room', 'agent_color', 'agent_shape', 'blocks', 'block_color']);
    for (const v of Object.values(acc)) expect(v >= 0 && v <= 1).toBe(true);
    expect((s.finetune as Array<{ seed: number; steps: number }>).map((p) => [p.seed, p.steps])).toEqual([
      [4, 1],
      [5, 1],
    ]);
    expect(s.teacher).toMatchObject({ seed: 6, steps: 2, share: 0.9, lr: 0.0002, start: 'spawn' });
    // each weights file's metadata names every option that changed its tensors, as they were given
    for (const f of SAFETENSORS) {
      expect(parseSafetensors(readFileSync(path.join(first, f)), f).metadata).toEqual({
        format: 'pt',
        generator: 'omnirx tools/train/train.py',
        seed: '3',
        vae_steps: '2',
        dit_steps: '2',
        finetune_steps: '1,1',
        teacher_forcing_steps: '2',
        teacher_forcing_share: '0.9',
        teacher_forcing_lr: '0.0002',
        teacher_forcing_start: 'spawn',
        dit_lr: '0.0005',
        agent_weight: '10.0',
        base_agent_weight: '0.0',
        reuse: '2',
        precision: 'float32',
        image_share: '0.5',
        text_steps: '3',
        text_encoder: 'frozen',
      });
    }
  });

  it("its summary's repeat line reproduces the same weights byte for byte", () => {
    const again = path.join(scratch(), 'again');
    const repeat = String(summary(first).repeat).split(' ');
    const r = train(['--out', again, ...repeat]);
    expect(r.status).toBe(0);
    for (const f of SAFETENSORS) expect(readFileSync(path.join(again, f)).equals(readFileSync(path.join(first, f)))).toBe(true);
  }, 300_000);

  /** Names of the tensors of `file` whose bytes differ from those of the same name in `before` (same names asserted). */
  function changed(file: string, before: string): string[] {
    const old = new Map(tensors(before).map(([name, , , data]) => [name, data]));
    const now = tensors(file);
    expect(now.map(([name]) => name)).toEqual([...old.keys()]);
    return now.filter(([name, , , data]) => !data.equals(old.get(name)!)).map(([name]) => name);
  }

  /** Runs the short phase `phase` once per entry of `flags`, each into a fresh directory with that entry's flags added
   * (every run must succeed); returns the directories by the same keys. */
  function variants<K extends string>(phase: string[], flags: Record<K, string[]>): Record<K, string> {
    const dirs = {} as Record<K, string>;
    for (const key of Object.keys(flags) as K[]) {
      dirs[key] = path.join(scratch(), key);
      expect(train(['--out', dirs[key], ...phase, ...flags[key]]).status).toBe(0);
    }
    return dirs;
  }

  it('--init continues from it: the VAE and a frozen text encoder are carried over unchanged, the DiT trains on', () => {
    const next = path.join(scratch(), 'next');
    const r = train(['--out', next, '--init', first, '--dit-steps', '1', '--finetune-steps', '0', '--teacher-forcing-steps', '0', '--text-encoder', 'frozen']);
    expect(r.status).toBe(0);
    const vae = tensors(path.join(next, 'vae.safetensors'));
    expect(vae.length).toBeGreaterThan(0);
    expect(vae).toEqual(tensors(path.join(first, 'vae.safetensors')));
    expect(changed(path.join(next, 'text_encoder.safetensors'), path.join(first, 'text_encoder.safetensors'))).toEqual([]);
    expect(changed(path.join(next, 'transformer.safetensors'), path.join(first, 'transformer.safetensors')).length).toBeGreaterThan(0);
    expect(summary(next)).toMatchObject({ init: first, vae: { steps: 0 }, text: { steps: 0, held_out_acc: null }, dit: { steps: 1 }, finetune: [] });
  }, 300_000);

  it('the teacher-forcing phase run with --init on the model written without it gives the same weights byte for byte', () => {
    const without = path.join(scratch(), 'without');
    const base = flags.slice(0, flags.indexOf('--teacher-forcing-steps'));
    expect(train(['--out', without, ...base, '--teacher-forcing-steps', '0', ...common]).status).toBe(0);
    expect(summary(without).teacher).toBeNull();
    // the phase's data seed is S + (phases before it) + 1: 3 + 2 + 1 in one command, (3 + 2) + 0 + 1 continued
    const continued = path.join(scratch(), 'continued');
    const r = train([
      '--out',
      continued,
      '--init',
      without,
      '--seed',
      '5',
      '--dit-steps',
      '0',
      '--finetune-steps',
      '0',
      '--teacher-forcing-steps',
      '2',
      ...common,
    ]);
    expect(r.status).toBe(0);
    expect(summary(continued)).toMatchObject({ dit: { steps: 0, loss_first: null }, teacher: { seed: 6, steps: 2 } });
    // model.json says what the weights went through: this run, continued from what the --init model's run did
    const description = (dir: string) => (JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8')) as { description: string }).description;
    expect(description(continued)).toMatch(
      /\(tools\/train\/train\.py, seed 5, 0 VAE \+ 0 DiT \+ 0 fine-tune \+ 2 teacher-forcing steps at share 0\.9 from the spawn point\), continued from \(tools\/train\/train\.py, seed 3, 2 VAE \+ 2 DiT \+ 1,1 fine-tune \+ 0 teacher-forcing steps\)\.$/,
    );
    expect(description(first)).toMatch(
      /\(tools\/train\/train\.py, seed 3, 2 VAE \+ 2 DiT \+ 1,1 fine-tune \+ 2 teacher-forcing steps at share 0\.9 from the spawn point\)\.$/,
    );
    for (const f of SAFETENSORS) expect(changed(path.join(continued, f), path.join(first, f))).toEqual([]);
    expect(changed(path.join(continued, 'transformer.safetensors'), path.join(without, 'transformer.safetensors')).length).toBeGreaterThan(0);
  }, 600_000);

  it("--error-recycling trains the teacher-forcing phase from the model's own history; at 0 it is the phase without it, byte for byte", () => {
    const phase = ['--init', first, '--seed', '5', '--dit-steps', '0', '--finetune-steps', '0', '--teacher-forcing-steps', '2', '--teacher-forcing-share', '1'];
    const dirs = variants(phase, { plain: [], zero: ['--error-recycling', '0'], recycled: ['--error-recycling', '1'] });
    // at 0 nothing is drawn from the phase's own streams and the files, metadata included, are those of the phase without the flag
    for (const f of SAFETENSORS) expect(readFileSync(path.join(dirs.zero, f)).equals(readFileSync(path.join(dirs.plain, f)))).toBe(true);
    const meta = (dir: string) => parseSafetensors(readFileSync(path.join(dir, 'transformer.safetensors')), dir).metadata;
    expect(meta(dirs.plain)).not.toHaveProperty('error_recycling');
    expect(meta(dirs.recycled)).toMatchObject({ error_recycling: '1.0', teacher_forcing_share: '1.0' });
    const losses = (dir: string) =>
      readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { mode: string; loss: number });
    // the same batches (modes, step count), but a history of the model's own predictions: another loss from the first step
    const [plain, recycled] = [losses(dirs.plain), losses(dirs.recycled)];
    expect(recycled.map((r) => r.mode)).toEqual(plain.map((r) => r.mode));
    expect(recycled.map((r) => r.mode)).toEqual(['teacher_forcing', 'teacher_forcing']);
    expect(recycled[0].loss).not.toBe(plain[0].loss);
    for (const r of recycled) expect(Number.isFinite(r.loss)).toBe(true);
    expect(changed(path.join(dirs.recycled, 'transformer.safetensors'), path.join(dirs.plain, 'transformer.safetensors')).length).toBeGreaterThan(0);
    expect(summary(dirs.recycled)).toMatchObject({ teacher: { seed: 6, steps: 2, share: 1, error_recycling: 1 } });
    expect(String(summary(dirs.recycled).repeat)).toMatch(/ --error-recycling 1\.0 --init /);
    const description = JSON.parse(readFileSync(path.join(dirs.recycled, 'model.json'), 'utf8')).description as string;
    expect(description).toMatch(/2 teacher-forcing steps at share 1 from the spawn point with error recycling 1\), continued from /);
  }, 300_000);

  /** Runs a short phase (`phase`) into two fresh directories, the second with `flag` added, and checks what an agent
   * start changes: the same batch layouts, but the agent elsewhere in the clips, so another loss from the first step
   * and other weights. Returns the two directories, their transformers' metadata and model.json descriptions. */
  function startsApart(phase: string[], flag: string[]) {
    const dirs = { plain: path.join(scratch(), 'plain'), flagged: path.join(scratch(), 'flagged') };
    expect(train(['--out', dirs.plain, ...phase]).status).toBe(0);
    expect(train(['--out', dirs.flagged, ...phase, ...flag]).status).toBe(0);
    const log = (dir: string) =>
      readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { mode: string; loss: number });
    expect(log(dirs.flagged).map((r) => r.mode)).toEqual(log(dirs.plain).map((r) => r.mode));
    expect(log(dirs.flagged)[0].loss).not.toBe(log(dirs.plain)[0].loss);
    expect(changed(path.join(dirs.flagged, 'transformer.safetensors'), path.join(dirs.plain, 'transformer.safetensors')).length).toBeGreaterThan(0);
    const meta = (dir: string) => parseSafetensors(readFileSync(path.join(dir, 'transformer.safetensors')), dir).metadata;
    const description = (dir: string) => JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8')).description as string;
    return { ...dirs, meta, description };
  }

  it('--teacher-forcing-start random trains the phase on the same batches from random starts: other weights, named in the metadata and description', () => {
    const phase = ['--init', first, '--seed', '5', '--dit-steps', '0', '--finetune-steps', '0', '--teacher-forcing-steps', '2', '--teacher-forcing-share', '1'];
    const { plain: spawn, flagged: random, meta, description } = startsApart(phase, ['--teacher-forcing-start', 'random']);
    expect(meta(random)).toMatchObject({ teacher_forcing_start: 'random' });
    expect(meta(spawn)).toMatchObject({ teacher_forcing_start: 'spawn' });
    expect(summary(random)).toMatchObject({ teacher: { start: 'random' } });
    expect(String(summary(random).repeat)).toMatch(/ --teacher-forcing-start random /);
    expect(description(random)).toMatch(/2 teacher-forcing steps at share 1\), continued from /);
    expect(description(spawn)).toMatch(/2 teacher-forcing steps at share 1 from the spawn point\), continued from /);
  }, 300_000);

  it('--start spawn trains the base phase on the same batches from the spawn point: other weights, named in the metadata, summary, repeat line and description', () => {
    const phase = ['--init', first, '--seed', '5', '--dit-steps', '2', '--finetune-steps', '0', '--teacher-forcing-steps', '0'];
    const { plain: random, flagged: spawn, meta, description } = startsApart(phase, ['--start', 'spawn']);
    // named only when not the default, so weights made before the flag keep their metadata
    expect(meta(spawn)).toMatchObject({ start: 'spawn' });
    expect(meta(random)).not.toHaveProperty('start');
    expect(summary(spawn)).toMatchObject({ start: 'spawn' });
    expect(summary(random)).toMatchObject({ start: 'random' });
    expect(String(summary(spawn).repeat)).toMatch(/ --teacher-forcing-start spawn --start spawn --dit-lr /);
    expect(description(spawn)).toMatch(/2 DiT \+ 0 fine-tune \+ 0 teacher-forcing steps; base and fine-tune scenes from the spawn point\), continued from /);
    expect(description(random)).toMatch(/2 DiT \+ 0 fine-tune \+ 0 teacher-forcing steps\), continued from /);
  }, 300_000);

  it('by default (--text-encoder joint) the text encoder trains through the DiT loss as well', () => {
    const next = path.join(scratch(), 'joint');
    const r = train(['--out', next, '--init', first, '--dit-steps', '1', '--finetune-steps', '0', '--teacher-forcing-steps', '0']);
    expect(r.status).toBe(0);
    expect(changed(path.join(next, 'text_encoder.safetensors'), path.join(first, 'text_encoder.safetensors')).length).toBeGreaterThan(0);
    expect(summary(next)).toMatchObject({ text: { during_dit: 'joint' } });
  }, 300_000);

  it('--text-lr gives the jointly trained text encoder a peak rate of its own in the base and fine-tune phases; at --dit-lr it writes the same tensors as without it', () => {
    const phase = ['--init', first, '--seed', '5', '--dit-steps', '2', '--finetune-steps', '1', '--teacher-forcing-steps', '2', '--dit-lr', '0.0005'];
    const dirs = variants(phase, { plain: [], same: ['--text-lr', '0.0005'], own: ['--text-lr', '0.0001'] });
    for (const f of SAFETENSORS) expect(changed(path.join(dirs.same, f), path.join(dirs.plain, f))).toEqual([]);
    // step k of a phase warms up to lr·(k + 1)/50; the teacher phase trains both at --teacher-forcing-lr (1e-4), unlogged
    const log = readFileSync(path.join(dirs.own, 'train_log.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { stage: string; lr: number; text_lr?: number });
    expect(log.map((r) => [r.stage, r.lr, r.text_lr])).toEqual([
      ['dit', expect.closeTo(0.0005 / 50, 12), expect.closeTo(0.0001 / 50, 12)],
      ['dit', expect.closeTo((0.0005 * 2) / 50, 12), expect.closeTo((0.0001 * 2) / 50, 12)],
      ['finetune', expect.closeTo(0.0005 / 50, 12), expect.closeTo(0.0001 / 50, 12)],
      ['teacher', expect.closeTo(0.0001 / 50, 12), undefined],
      ['teacher', expect.closeTo((0.0001 * 2) / 50, 12), undefined],
    ]);
    expect(changed(path.join(dirs.own, 'text_encoder.safetensors'), path.join(dirs.plain, 'text_encoder.safetensors')).length).toBeGreaterThan(0);
    // named only when given, so weights made before the flag keep their metadata
    const meta = (dir: string) => parseSafetensors(readFileSync(path.join(dir, 'transformer.safetensors')), dir).metadata;
    expect(meta(dirs.own)).toMatchObject({ dit_lr: '0.0005', text_lr: '0.0001' });
    expect(meta(dirs.plain)).not.toHaveProperty('text_lr');
    expect(summary(dirs.own)).toMatchObject({ dit_lr: 0.0005, text_lr: 0.0001 });
    expect(summary(dirs.plain)).toMatchObject({ text_lr: 0.0005 });
    expect(String(summary(dirs.own).repeat)).toMatch(/ --text-lr 0\.0001 --init /);
  }, 300_000);

  it('--text-aux-weight keeps the attribute loss beside the DiT loss: the same batches and first DiT loss, an attribute loss logged each step, other text-encoder tensors, named where the run is recorded', () => {
    const phase = ['--init', first, '--seed', '5', '--dit-steps', '2', '--finetune-steps', '1', '--teacher-forcing-steps', '1'];
    const dirs = variants(phase, { plain: [], aux: ['--text-aux-weight', '0.5'] });
    type Rec = { stage: string; loss: number; mode: string; attr_loss?: number };
    const log = (dir: string) =>
      readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Rec);
    const [plain, aux] = [log(dirs.plain), log(dirs.aux)];
    expect(aux.map((r) => [r.stage, r.mode])).toEqual(plain.map((r) => [r.stage, r.mode]));
    // before any update the DiT loss is the same: the attribute batches come from a stream of their own
    expect(aux[0].loss).toBe(plain[0].loss);
    expect(plain.every((r) => r.attr_loss === undefined)).toBe(true);
    // fresh heads (no text stage with --init) over 5 attributes: about the mean of ln(class count), 1.6
    expect(aux.map((r) => r.attr_loss)).toEqual(aux.map(() => expect.any(Number)));
    expect(aux[0].attr_loss).toBeGreaterThan(0.8);
    expect(aux[0].attr_loss).toBeLessThan(3);
    expect(changed(path.join(dirs.aux, 'text_encoder.safetensors'), path.join(dirs.plain, 'text_encoder.safetensors')).length).toBeGreaterThan(0);
    const meta = (dir: string) => parseSafetensors(readFileSync(path.join(dir, 'transformer.safetensors')), dir).metadata;
    expect(meta(dirs.aux)).toMatchObject({ text_aux_weight: '0.5' });
    expect(meta(dirs.plain)).not.toHaveProperty('text_aux_weight');
    expect(String(summary(dirs.aux).repeat)).toMatch(/ --text-aux-weight 0\.5 --init /);
    const text = (dir: string) => summary(dir).text as { aux_weight: number; held_out_acc_after_dit: Record<string, number> | null };
    expect(text(dirs.plain)).toMatchObject({ aux_weight: 0, held_out_acc_after_dit: null });
    expect(text(dirs.aux).aux_weight).toBe(0.5);
    expect(Object.keys(text(dirs.aux).held_out_acc_after_dit ?? {})).toEqual(['room', 'agent_color', 'agent_shape', 'blocks', 'block_color']);
    for (const v of Object.values(text(dirs.aux).held_out_acc_after_dit ?? {})) expect(v).toBeGreaterThanOrEqual(0);
  }, 300_000);

  it('--block-weight weighs the cells the blocks cover in the loss of every DiT phase: the same batches, other losses and weights, named where the run is recorded; at 0 it is the run without it, byte for byte', () => {
    const phase = ['--init', first, '--seed', '5', '--dit-steps', '2', '--finetune-steps', '1', '--teacher-forcing-steps', '1'];
    const dirs = variants(phase, { plain: [], zero: ['--block-weight', '0'], blocks: ['--block-weight', '5'] });
    for (const f of SAFETENSORS) expect(changed(path.join(dirs.zero, f), path.join(dirs.plain, f))).toEqual([]);
    type Rec = { stage: string; loss: number; mode: string };
    const log = (dir: string) =>
      readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Rec);
    const [plain, blocks] = [log(dirs.plain), log(dirs.blocks)];
    expect(blocks.map((r) => [r.stage, r.mode])).toEqual(plain.map((r) => [r.stage, r.mode]));
    // before any update the prediction is the same; the loss differs because the block cells weigh more
    expect(blocks[0].loss).not.toBe(plain[0].loss);
    expect(changed(path.join(dirs.blocks, 'transformer.safetensors'), path.join(dirs.plain, 'transformer.safetensors')).length).toBeGreaterThan(0);
    const meta = (dir: string) => parseSafetensors(readFileSync(path.join(dir, 'transformer.safetensors')), dir).metadata;
    expect(meta(dirs.blocks)).toMatchObject({ block_weight: '5.0' });
    expect(meta(dirs.plain)).not.toHaveProperty('block_weight');
    expect(summary(dirs.blocks)).toMatchObject({ block_weight: 5 });
    expect(summary(dirs.plain)).toMatchObject({ block_weight: 0 });
    expect(String(summary(dirs.blocks).repeat)).toMatch(/ --block-weight 5\.0 --init /);
  }, 300_000);

  it('--causal-share sets the causal fraction of the clip batches in every DiT phase: 1 all causal, 0 all bidirectional (teacher-forcing batches kept), named where the run is recorded; at 0.6 it is the run without it, byte for byte', () => {
    const phase = [
      '--init',
      first,
      '--seed',
      '5',
      '--dit-steps',
      '4',
      '--finetune-steps',
      '2',
      '--teacher-forcing-steps',
      '4',
      '--teacher-forcing-share',
      '0.5',
    ];
    const dirs = variants(phase, { plain: [], same: ['--causal-share', '0.6'], causal: ['--causal-share', '1'], bidir: ['--causal-share', '0'] });
    for (const f of SAFETENSORS) expect(changed(path.join(dirs.same, f), path.join(dirs.plain, f))).toEqual([]);
    type Rec = { stage: string; mode: string };
    const modes = (dir: string) =>
      readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as Rec).mode);
    const [plain, causal, bidir] = [modes(dirs.plain), modes(dirs.causal), modes(dirs.bidir)];
    // the share draw takes the same place in the data stream, so only the clip batches' kind changes
    const tf = plain.map((m) => m === 'teacher_forcing');
    expect(tf.filter(Boolean).length).toBeGreaterThan(0);
    expect(causal.map((m) => m === 'teacher_forcing')).toEqual(tf);
    expect(bidir.map((m) => m === 'teacher_forcing')).toEqual(tf);
    expect(causal.filter((_, i) => !tf[i])).toEqual(Array(tf.filter((t) => !t).length).fill('causal'));
    expect(bidir.filter((_, i) => !tf[i])).toEqual(Array(tf.filter((t) => !t).length).fill('bidirectional'));
    const meta = (dir: string) => parseSafetensors(readFileSync(path.join(dir, 'transformer.safetensors')), dir).metadata;
    expect(meta(dirs.bidir)).toMatchObject({ causal_share: '0.0' });
    expect(meta(dirs.plain)).not.toHaveProperty('causal_share');
    expect(summary(dirs.bidir)).toMatchObject({ causal_share: 0 });
    expect(summary(dirs.plain)).toMatchObject({ causal_share: 0.6 });
    expect(String(summary(dirs.causal).repeat)).toMatch(/ --causal-share 1\.0 --init /);
  }, 300_000);

  /** Starts train.py into `out` and SIGKILLs it once its log holds a record matching `marker`; resolves when it is gone.
   * Rejects if the run ends on its own first (the test would then not have stopped it). */
  function killWhenLogged(out: string, args: string[], marker: RegExp): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(PYTHON, [TRAIN, ...FLOAT32, '--out', out, ...args], { cwd: ROOT, stdio: 'ignore' });
      const log = path.join(out, 'train_log.jsonl');
      const poll = setInterval(() => {
        if (existsSync(log) && marker.test(readFileSync(log, 'utf8'))) child.kill('SIGKILL');
      }, 20);
      child.on('exit', (code, signal) => {
        clearInterval(poll);
        if (signal === 'SIGKILL') resolve();
        else reject(new Error(`train.py ended by itself (exit ${code}) before the log showed ${marker}`));
      });
    });
  }

  /** Rewrites the checkpoint in `dir` with one hand edit (Python over the loaded dict `r` and its parsed meta `m`). */
  function editCheckpoint(dir: string, edit: string): void {
    const file = path.join(dir, 'checkpoint.pt');
    const code = `import json, sys, torch\nr = torch.load(sys.argv[1], weights_only=True)\nm = json.loads(r['meta'])\n${edit}\nr['meta'] = json.dumps(m)\ntorch.save(r, sys.argv[1])`;
    const p = spawnSync(PYTHON, ['-c', code, file], { encoding: 'utf8' });
    if (p.status !== 0) throw new Error(p.stderr);
  }

  it('a run killed inside the base phase, resumed, killed inside the teacher-forcing phase and resumed again writes the weights and log of the run never stopped; --resume refuses other flags and damaged or edited checkpoints, leaving the log as it was', async () => {
    // 6 base-phase and 6 teacher-forcing steps at --reuse 2: with --checkpoint-minutes 0 a checkpoint at every even
    // step, so a kill after step 3 of either leaves one inside it (the teacher phase's from float16-rounded weights,
    // with error recycling drawing from its own streams)
    const run = [
      '--seed',
      '3',
      '--vae-steps',
      '2',
      '--text-steps',
      '3',
      '--dit-steps',
      '6',
      '--finetune-steps',
      '3,1',
      '--teacher-forcing-steps',
      '6',
      '--reuse',
      '2',
      '--text-aux-weight',
      '0.2',
      '--teacher-forcing-share',
      '0.9',
      '--error-recycling',
      '0.5',
    ];
    const whole = path.join(scratch(), 'whole');
    expect(train(['--out', whole, ...run]).status).toBe(0);
    expect(readdirSync(whole)).not.toContain('checkpoint.pt'); // a finished run removes it
    const stopped = path.join(scratch(), 'stopped');
    await killWhenLogged(stopped, [...run, '--checkpoint-minutes', '0'], /"stage": "dit", "step": 3,/);
    expect(readdirSync(stopped)).toContain('checkpoint.pt');
    expect(readdirSync(stopped)).not.toContain('model.json');
    // the checkpoint names the code that wrote it: the digests of the files the run loaded, the spec it parsed among them
    const meta = spawnSync(
      PYTHON,
      ['-c', "import sys, torch; print(torch.load(sys.argv[1], weights_only=True)['meta'])", path.join(stopped, 'checkpoint.pt')],
      { encoding: 'utf8' },
    );
    const code = JSON.parse(meta.stdout).code as Record<string, string>;
    for (const file of ['tools/train/train.py', 'tools/train/procedural_world.py', 'tools/reference/omnirx_reference.py', 'src/families/wan/default-spec.ts']) {
      expect(code[file]).toBe(
        createHash('sha256')
          .update(readFileSync(path.join(ROOT, file)))
          .digest('hex'),
      );
    }
    const log = () => readFileSync(path.join(stopped, 'train_log.jsonl'));
    const logAtKill = log();

    // refused before anything is run, the log untouched: other flags, a damaged file, hand edits
    const other = train(['--out', stopped, ...run, '--seed', '4', '--resume']);
    expect(other.status).toBe(2);
    expect(other.stderr).toMatch(/--resume: --seed: the checkpoint's run had --seed 3, this command 4/);
    const damaged = scratch();
    copyFileSync(path.join(stopped, 'train_log.jsonl'), path.join(damaged, 'train_log.jsonl'));
    writeFileSync(path.join(damaged, 'checkpoint.pt'), readFileSync(path.join(stopped, 'checkpoint.pt')).subarray(0, 4096));
    const bad = train(['--out', damaged, ...run, '--resume']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--resume: .*checkpoint\.pt: not a readable checkpoint: damaged, or not written by this script/);
    expect(bad.stderr).not.toMatch(/weights_only/);
    const edits: Array<[string, RegExp]> = [
      ["for k in [k for k in r if k.startswith('module.dit.')]: del r[k]", /no weights for dit \(module\.dit\.\*\), which the run had made by then/],
      ["m['current']['stage'] = 'finetune9'", /meta\.current\.stage 'finetune9' is not the stage this run does after 'text'/],
      ["m['stages']['vae']['budget'] = {}", /meta\.stages\.vae\.budget must be \{total: integer ≥ 0, step_s: number ≥ 0 or null\}/],
      ["m['stages']['vae']['spec']['zDim'] = 8", /meta\.stages\.vae\.spec\.zDim is 8, the default architecture has 16/],
      ["r['opt.0.exp_avg'] = torch.zeros(7)", /the state of phase dit does not fit it \(ValueError: AdamW exp_avg of shape \(7,\) for a parameter of shape/],
      ["m['current']['state']['elapsed_s'] = float('nan')", /meta\.current\.state\.elapsed_s must be a finite number ≥ 0/],
      // the code that wrote it: a source file changed, one no longer loaded, one not loaded then, no record at all
      [
        "m['code']['tools/train/procedural_world.py'] = '0' * 64",
        /tools\/train\/procedural_world\.py has changed since the checkpoint was written \(SHA-256 000000000000… then, [0-9a-f]{12}… now\); --resume continues a run with the code it started with/,
      ],
      ["m['code']['tools/train/gone.py'] = '0' * 64", /tools\/train\/gone\.py, which the checkpoint's run loaded, is not loaded by this one/],
      ["del m['code']['tools/reference/omnirx_reference.py']", /tools\/reference\/omnirx_reference\.py is loaded by this run but was not by the checkpoint's/],
      ["del m['code']", /checkpoint\.pt: meta\.code is missing/],
    ];
    for (const [edit, message] of edits) {
      const copy = scratch();
      for (const f of readdirSync(stopped)) copyFileSync(path.join(stopped, f), path.join(copy, f));
      editCheckpoint(copy, edit);
      const r = train(['--out', copy, ...run, '--resume']);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/Traceback/);
      expect(r.status).toBe(2);
      expect(readFileSync(path.join(copy, 'train_log.jsonl')).equals(logAtKill)).toBe(true);
    }
    expect(log().equals(logAtKill)).toBe(true);

    // resumed inside the base phase, at a step that starts a fresh batch, and stopped again inside the teacher phase
    await killWhenLogged(stopped, [...run, '--checkpoint-minutes', '0', '--resume'], /"stage": "teacher", "step": 3,/);
    const resumed = train(['--out', stopped, ...run, '--resume']);
    expect(resumed.stderr).not.toMatch(/Traceback/);
    expect(resumed.status).toBe(0);
    expect(resumed.stdout).toMatch(/resuming .*checkpoint\.pt: vae, text, dit, finetune, finetune2 done; teacher from step [24]\n/);
    for (const f of SAFETENSORS) expect(readFileSync(path.join(stopped, f)).equals(readFileSync(path.join(whole, f)))).toBe(true);
    // the log holds every step once, with the losses of the run never stopped
    const steps = (dir: string) =>
      readFileSync(path.join(dir, 'train_log.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => {
          const r = JSON.parse(l) as { stage: string; step: number; loss: number; attr_loss?: number };
          return [r.stage, r.step, r.loss, r.attr_loss];
        });
    expect(steps(stopped)).toEqual(steps(whole));
    // the summary's losses come from the whole log (the stopped runs' part replayed)
    const losses = (dir: string) => ['dit', 'teacher'].map((k) => summary(dir)[k] as { steps: number; loss_first: number; loss_last20: number });
    expect(losses(stopped)).toEqual(losses(whole));
    expect(readdirSync(stopped)).not.toContain('checkpoint.pt');
  }, 900_000);

  it('a new run without --resume in the directory of a stopped one removes its checkpoint at the start', async () => {
    const dir = path.join(scratch(), 'again');
    await killWhenLogged(
      dir,
      ['--vae-steps', '2', '--text-steps', '0', '--dit-steps', '40', '--finetune-steps', '0', '--teacher-forcing-steps', '0', '--checkpoint-minutes', '0'],
      /"stage": "dit", "step": 3,/,
    );
    expect(readdirSync(dir)).toContain('checkpoint.pt');
    // another run started there removes it at once, before its VAE stage ends (so --resume cannot take it for its own)
    // (the stopped run logged VAE steps 0 and 1 only: step 5 is this run's)
    await killWhenLogged(
      dir,
      ['--vae-steps', '40', '--text-steps', '0', '--dit-steps', '2', '--finetune-steps', '0', '--teacher-forcing-steps', '0'],
      /"stage": "vae", "step": 5,/,
    );
    expect(readdirSync(dir)).not.toContain('checkpoint.pt');
    const r = train([
      '--out',
      dir,
      '--vae-steps',
      '40',
      '--text-steps',
      '0',
      '--dit-steps',
      '2',
      '--finetune-steps',
      '0',
      '--teacher-forcing-steps',
      '0',
      '--resume',
    ]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--resume: no checkpoint to resume/);
  }, 300_000);

  it('--init refuses a copy whose model.json is damaged, naming what is wrong', () => {
    const cases: Array<[(spec: Record<string, any>) => unknown, RegExp]> = [
      [(s) => ({ ...s, transformer: { ...s.transformer, numLayers: 7 } }), /model\.json transformer\.numLayers is 7, the default architecture has 6/],
      [(s) => ({ ...s, vae: { ...s.vae, latentsStd: s.vae.latentsStd.map(() => 0) } }), /model\.json vae\.latentsStd must be 16 finite numbers > 0/],
      [(s) => ({ ...s, vae: { ...s.vae, latentsMean: [1, 2] } }), /model\.json vae\.latentsMean must be 16 finite numbers/],
      [(s) => ({ ...s, textEncoder: null }), /model\.json has no textEncoder object/],
      [() => [], /model\.json is not a JSON object/],
    ];
    const spec = JSON.parse(readFileSync(path.join(first, 'model.json'), 'utf8'));
    for (const [damage, message] of cases) {
      const copy = scratch();
      for (const f of readdirSync(first)) copyFileSync(path.join(first, f), path.join(copy, f));
      writeFileSync(path.join(copy, 'model.json'), JSON.stringify(damage(spec)));
      const r = train(['--out', path.join(scratch(), 'model'), '--init', copy]);
      expect(r.stderr).toMatch(message);
      expect(r.status).toBe(2);
    }
    const truncated = scratch();
    for (const f of readdirSync(first)) copyFileSync(path.join(first, f), path.join(truncated, f));
    writeFileSync(path.join(truncated, 'model.json'), '{"textEncoder": {');
    const r = train(['--out', path.join(scratch(), 'model'), '--init', truncated]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/model\.json is not readable JSON/);
  });
});
