/**
 * tools/train/average_weights.py, the recipe's last step: the weighted average of model directories' weights (a model
 * soup, Wortsman et al. 2022). Checked against values computed by hand (float64 sum, rounded once to the stored
 * dtype), on tiny model directories written here with the runtime's own safetensors writer; and every input it must
 * refuse (weights, mismatched tensors, other architectures, damaged files) is refused by name with nothing written.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { parseSafetensors, serializeSafetensors, SafetensorsDtype } from '../../src/models/weights/safetensors';
import { itRefuses } from '../helpers/cli-refusals';
import { runTrainScript, SAFETENSORS, scratchDir } from '../helpers/train-python';

const average = (args: string[]) => runTrainScript('average_weights.py', args);

type Tensors = Record<string, { shape: number[]; data: number[]; dtype: SafetensorsDtype }>;
interface Model {
  transformer: Tensors;
  text_encoder: Tensors;
  vae: Tensors;
  meta: Record<string, string>;
  spec: Record<string, unknown>;
  tokenizer: Record<string, unknown>;
}

const RUN_A = '(tools/train/train.py, seed 2, 1600 teacher-forcing steps), continued from (tools/train/train.py, seed 0)';
const RUN_B = '(tools/train/train.py, seed 2, 3200 teacher-forcing steps), continued from (tools/train/train.py, seed 0)';
const SPEC = { id: 'tiny', weights: 'trained', vae: { zDim: 2, latentsMean: [0.5, -1], latentsStd: [1, 2] } };
const TOKENIZER = { type: 'word-bytes', words: ['a', 'ball'] };
// 2**-11: a quarter of float16's spacing at 0.75, so 0.75 * 1 + 0.25 * 2**-11 rounds back to 0.75
const TINY = 2 ** -11;

const A: Model = {
  transformer: {
    'blocks.0.w': { shape: [2, 3], data: [1, 2, -4, 0.5, 1, 3], dtype: 'F16' },
    'head.b': { shape: [2], data: [1, 1], dtype: 'F32' },
  },
  text_encoder: { 'shared.weight': { shape: [1, 1], data: [1], dtype: 'F16' } },
  vae: { 'decoder.conv.weight': { shape: [2], data: [0.1, 7], dtype: 'F16' } },
  meta: { generator: 'omnirx tools/train/train.py', seed: '2', teacher_forcing_steps: '1600' },
  spec: { ...SPEC, description: `Embedded default: tiny, trained on the procedural top-down world ${RUN_A}.` },
  tokenizer: TOKENIZER,
};
const B: Model = {
  ...A,
  transformer: {
    'blocks.0.w': { shape: [2, 3], data: [5, 6, 0, 2.5, TINY, -1], dtype: 'F16' },
    'head.b': { shape: [2], data: [3, -3], dtype: 'F32' },
  },
  text_encoder: { 'shared.weight': { shape: [1, 1], data: [2], dtype: 'F16' } },
  meta: { ...A.meta, teacher_forcing_steps: '3200' },
  spec: { ...SPEC, description: `Embedded default: tiny, trained on the procedural top-down world ${RUN_B}.` },
};

/** Writes `model` as a model directory under a fresh scratch folder and returns its path. */
function modelDir(name: string, model: Model): string {
  const dir = path.join(scratchDir('average'), name);
  mkdirSync(dir);
  for (const file of ['transformer', 'text_encoder', 'vae'] as const) {
    const tensors = Object.fromEntries(
      Object.entries(model[file]).map(([k, t]) => [k, { shape: t.shape, data: Float32Array.from(t.data), dtype: t.dtype }]),
    );
    writeFileSync(path.join(dir, `${file}.safetensors`), serializeSafetensors(tensors, model.meta));
  }
  writeFileSync(path.join(dir, 'model.json'), JSON.stringify(model.spec));
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(model.tokenizer));
  return dir;
}

function read(dir: string, file: string) {
  return parseSafetensors(readFileSync(path.join(dir, file)), file);
}

describe('average_weights.py', () => {
  it('¾ A + ¼ B: each tensor summed in float64 and rounded once to its dtype, identical tensors kept bit for bit', () => {
    const a = modelDir('stage2', A);
    const b = modelDir('stage2-long', B);
    const out = path.join(scratchDir('average'), 'model');
    const r = average(['--out', out, '--model', a, '0.75', '--model', b, '0.25']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const t = read(out, 'transformer.safetensors');
    // by hand: 0.75 + 1.25, 1.5 + 1.5, −3 + 0, 0.375 + 0.625, 0.75 + 2**-13 (rounds to 0.75 in float16), 2.25 − 0.25
    expect(Array.from(t.float32('blocks.0.w'))).toEqual([2, 3, -3, 1, 0.75, 2]);
    expect(Array.from(t.float32('head.b'))).toEqual([1.5, 0]);
    expect(t.entries.map((e) => [e.name, e.dtype, e.shape])).toEqual(
      expect.arrayContaining([['blocks.0.w', 'F16', [2, 3]], ['head.b', 'F32', [2]]]),
    );
    expect(Array.from(read(out, 'text_encoder.safetensors').float32('shared.weight'))).toEqual([1.25]);
    // the VAE both inputs share comes out the same: float16(0.1) twice, 7 twice
    expect(read(out, 'vae.safetensors').float32('decoder.conv.weight')).toEqual(read(a, 'vae.safetensors').float32('decoder.conv.weight'));
    for (const f of SAFETENSORS) {
      // the keys both inputs agree on, the steps they differ in dropped, and what was averaged
      expect(read(out, f).metadata).toEqual({ generator: 'omnirx tools/train/average_weights.py', seed: '2', average: '0.75 stage2, 0.25 stage2-long' });
    }
    const spec = JSON.parse(readFileSync(path.join(out, 'model.json'), 'utf8'));
    expect(spec).toEqual({
      ...SPEC,
      description: `Embedded default: tiny, trained on the procedural top-down world: the weighted average of weights (Wortsman et al. 2022, model soups) of 0.75 × [${RUN_A}] and 0.25 × [${RUN_B}].`,
    });
    expect(readFileSync(path.join(out, 'tokenizer.json')).equals(readFileSync(path.join(a, 'tokenizer.json')))).toBe(true);
  });

  it('three inputs, in any order: ¼ B + ½ A + ¼ B is ½ A + ½ B, rounded once (a tie goes to the even float16)', () => {
    const a = modelDir('a', A);
    const b = modelDir('b', B);
    const out = path.join(scratchDir('average'), 'model');
    expect(average(['--out', out, '--model', b, '0.25', '--model', a, '0.5', '--model', b, '0.25']).status).toBe(0);
    // 0.5 A + 0.5 B by hand: 3, 4, −2, 1.5, 1. The fifth is 0.5 + 2**-12 exactly in float64, half float16's spacing
    // above 0.5: the tie rounds to the even 0.5 (summing in float16, 0.25 * 2**-11 would already be lost, also 0.5 —
    // so the stage-by-stage rounding is told apart by the first test's 0.75 + 2**-13, not here)
    expect(Array.from(read(out, 'transformer.safetensors').float32('blocks.0.w'))).toEqual([3, 4, -2, 1.5, 0.5, 1]);
    // the description follows the inputs' order
    expect(JSON.parse(readFileSync(path.join(out, 'model.json'), 'utf8')).description).toMatch(/of 0\.25 × \[\(tools\/train\/train\.py, seed 2, 3200 .*\] and 0\.5 × \[.*1600 .*\] and 0\.25 × \[.*3200 .*\]\.$/);
  });
});

describe('average_weights.py refuses bad input by name (exit 2, nothing written)', () => {
  const a = modelDir('a', A);
  const b = modelDir('b', B);
  const { 'head.b': _dropped, ...withoutBias } = B.transformer;
  const lacking = modelDir('lacking', { ...B, transformer: withoutBias });
  const extra = modelDir('extra', { ...B, text_encoder: { ...B.text_encoder, 'shared.extra': { shape: [1], data: [0], dtype: 'F16' } } });
  const reshaped = modelDir('reshaped', { ...B, transformer: { ...B.transformer, 'blocks.0.w': { ...B.transformer['blocks.0.w'], shape: [3, 2] } } });
  const widened = modelDir('widened', { ...B, transformer: { ...B.transformer, 'blocks.0.w': { ...B.transformer['blocks.0.w'], dtype: 'F32' } } });
  const otherVae = modelDir('other-vae', { ...B, spec: { ...B.spec, vae: { ...SPEC.vae, latentsStd: [1, 3] } } });
  const otherWords = modelDir('other-words', { ...B, tokenizer: { ...TOKENIZER, words: ['a', 'cube'] } });
  const damaged = modelDir('damaged', B);
  writeFileSync(path.join(damaged, 'vae.safetensors'), 'not a safetensors file');
  const short = modelDir('short', B);
  writeFileSync(path.join(short, 'text_encoder.safetensors'), Buffer.from([1, 2, 3]));
  const badJson = modelDir('bad-json', B);
  writeFileSync(path.join(badJson, 'model.json'), '{"id": ');
  const arrayJson = modelDir('array-json', B);
  writeFileSync(path.join(arrayJson, 'model.json'), '[1, 2]');

  itRefuses(
    average,
    [
      ['no --model', [], /the following arguments are required: --model/],
      ['one model', ['--model', a, '1'], /--model: give at least two models to average, got 1/],
      ['weights summing to 1.25', ['--model', a, '0.75', '--model', b, '0.5'], /--model: the weights must sum to 1, got 1\.25/],
      ['a negative weight', ['--model', a, '1.5', '--model', b, '-0.5'], /--model: weight 2 must be finite and > 0, got -0\.5/],
      ['a zero weight', ['--model', a, '1', '--model', b, '0'], /--model: weight 2 must be finite and > 0, got 0\.0/],
      ['a NaN weight', ['--model', a, 'nan', '--model', b, '0.5'], /--model: weight 1 must be finite and > 0, got nan/],
      ['an infinite weight', ['--model', a, 'inf', '--model', b, '0.25'], /--model: weight 1 must be finite and > 0, got inf/],
      ['a weight that is no number', ['--model', a, 'three-quarters', '--model', b, '0.25'], /--model: weight 1 must be a number, got 'three-quarters'/],
      ['--model without its weight', ['--model', a], /argument --model: expected 2 arguments/],
      ['an input lacking a tensor', ['--model', a, '0.75', '--model', lacking, '0.25'], /transformer\.safetensors: input 2 lacks tensor 'head\.b'/],
      ['an input with a tensor the first lacks', ['--model', a, '0.75', '--model', extra, '0.25'], /text_encoder\.safetensors: input 2 has tensor 'shared\.extra' that input 1 lacks/],
      ['a tensor of another shape', ['--model', a, '0.75', '--model', reshaped, '0.25'], /transformer\.safetensors: tensor 'blocks\.0\.w' is \[3, 2\] in input 2, \[2, 3\] in input 1/],
      ['a tensor of another dtype', ['--model', a, '0.75', '--model', widened, '0.25'], /transformer\.safetensors: tensor 'blocks\.0\.w' is float32 in input 2, float16 in input 1/],
      ["another VAE's latent statistics", ['--model', a, '0.75', '--model', otherVae, '0.25'], /other-vae\/model\.json: 'vae' differs from .*\/a\/model\.json's \(one architecture and VAE are averaged\)/],
      ['another tokenizer', ['--model', a, '0.75', '--model', otherWords, '0.25'], /other-words\/tokenizer\.json: differs from .*\/a\/tokenizer\.json/],
      ['a damaged safetensors file', ['--model', a, '0.75', '--model', damaged, '0.25'], /damaged\/vae\.safetensors: cannot read it as safetensors/],
      ['a 3-byte safetensors file', ['--model', a, '0.75', '--model', short, '0.25'], /short\/text_encoder\.safetensors: cannot read it as safetensors \(error: /],
      ['a model.json that is not JSON', ['--model', badJson, '0.75', '--model', a, '0.25'], /bad-json\/model\.json: cannot read it as JSON \(JSONDecodeError/],
      ['a model.json that is no object', ['--model', a, '0.75', '--model', arrayJson, '0.25'], /array-json\/model\.json: must hold a JSON object/],
      ['a directory that does not exist', ['--model', a, '0.75', '--model', path.join(b, 'missing'), '0.25'], /missing\/model\.json: cannot read it as JSON \(FileNotFoundError/],
      ['an empty --out (the last --out counts)', ['--model', a, '0.75', '--model', b, '0.25', '--out', ''], /--out must not be empty/],
    ],
    ['--model', a, '0.75', '--model', b, '0.25'],
  );

  it('an --out that cannot be created: named, after every input was read', () => {
    const r = average(['--out', '/proc/omnirx-average/model', '--model', a, '0.75', '--model', b, '0.25']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--out \/proc\/omnirx-average\/model: No such file or directory/);
  });
});
