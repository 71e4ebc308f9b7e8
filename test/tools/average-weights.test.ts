/**
 * tools/train/average_weights.py, the recipe's last step: the weighted average of model directories' weights (a model
 * soup, Wortsman et al. 2022). Checked against values computed by hand (float64 sum, rounded once to the stored
 * dtype), on tiny model directories written here with the runtime's own safetensors writer; and every input it must
 * refuse (weights, mismatched tensors, other architectures, damaged files) is refused by name with nothing written.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { serializeSafetensors, SafetensorsDtype } from '../../src/models/weights/safetensors';
import { itRefuses, Refusal } from '../helpers/cli-refusals';
import { readModelFile as read, runTrainScript, SAFETENSORS, scratchDir } from '../helpers/train-python';

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

/** A safetensors file from its header (an object, or raw text) and data bytes, as a hostile writer might make it. */
function rawSafetensors(header: unknown, data: Buffer = Buffer.alloc(0)): Buffer {
  const text = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(text.length));
  return Buffer.concat([length, text, data]);
}

/** Writes `model` as a model directory under a fresh scratch folder and returns its path. */
function modelDir(name: string, model: Model): string {
  const dir = path.join(scratchDir('average'), name);
  mkdirSync(dir);
  for (const file of ['transformer', 'text_encoder', 'vae'] as const) {
    const tensors = Object.fromEntries(Object.entries(model[file]).map(([k, t]) => [k, { shape: t.shape, data: Float32Array.from(t.data), dtype: t.dtype }]));
    writeFileSync(path.join(dir, `${file}.safetensors`), serializeSafetensors(tensors, model.meta));
  }
  writeFileSync(path.join(dir, 'model.json'), JSON.stringify(model.spec));
  writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(model.tokenizer));
  return dir;
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
      expect.arrayContaining([
        ['blocks.0.w', 'F16', [2, 3]],
        ['head.b', 'F32', [2]],
      ]),
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

  it('a model averaged with itself comes out the same, −0.0 included; BF16 inputs are stored F32 with their exact values', () => {
    const zero: Model = { ...A, transformer: { ...A.transformer, 'head.z': { shape: [2], data: [-0, 0], dtype: 'F32' } } };
    const a = modelDir('zero', zero);
    const out = path.join(scratchDir('average'), 'model');
    expect(average(['--out', out, '--model', a, '0.5', '--model', a, '0.5']).status).toBe(0);
    for (const f of SAFETENSORS) {
      const [got, want] = [read(out, f), read(a, f)];
      for (const { name } of want.entries) {
        const [x, y] = [Array.from(got.float32(name)), Array.from(want.float32(name))];
        expect(x.map((v, i) => Object.is(v, y[i]))).toEqual(y.map(() => true));
      }
    }
    expect(Object.is(read(out, 'transformer.safetensors').float32('head.z')[0], -0)).toBe(true);

    const half: Model = { ...A, vae: { 'decoder.conv.weight': { shape: [2], data: [1.5, -2], dtype: 'BF16' } } };
    const other: Model = { ...B, vae: { 'decoder.conv.weight': { shape: [2], data: [2.5, 2], dtype: 'BF16' } } };
    const bf = path.join(scratchDir('average'), 'model');
    expect(average(['--out', bf, '--model', modelDir('a', half), '0.75', '--model', modelDir('b', other), '0.25']).status).toBe(0);
    const vae = read(bf, 'vae.safetensors');
    expect(vae.entries.map((e) => e.dtype)).toEqual(['F32']);
    expect(Array.from(vae.float32('decoder.conv.weight'))).toEqual([1.75, -1]); // 1.125 + 0.625, −1.5 + 0.5
  });

  it("an average of an average names the inner one whole; a description without a run gives the input's directory", () => {
    const inner = path.join(scratchDir('average'), 'soup');
    expect(average(['--out', inner, '--model', modelDir('a', A), '0.75', '--model', modelDir('b', B), '0.25']).status).toBe(0);
    const plain = modelDir('plain', { ...B, spec: { ...B.spec, description: 'hand-made weights.' } });
    const out = path.join(scratchDir('average'), 'model');
    expect(average(['--out', out, '--model', inner, '0.5', '--model', plain, '0.5']).status).toBe(0);
    expect(JSON.parse(readFileSync(path.join(out, 'model.json'), 'utf8')).description).toBe(
      `Embedded default: tiny, trained on the procedural top-down world: the weighted average of weights (Wortsman et al. 2022, model soups) of 0.5 × [the weighted average of weights (Wortsman et al. 2022, model soups) of 0.75 × [${RUN_A}] and 0.25 × [${RUN_B}]] and 0.5 × [(${plain})].`,
    );
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
    expect(JSON.parse(readFileSync(path.join(out, 'model.json'), 'utf8')).description).toMatch(
      /of 0\.25 × \[\(tools\/train\/train\.py, seed 2, 3200 .*\] and 0\.5 × \[.*1600 .*\] and 0\.25 × \[.*3200 .*\]\.$/,
    );
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
  const nullKey = modelDir('null-key', { ...B, spec: { ...B.spec, extra: null } });
  const bf16 = modelDir('bf16', { ...B, vae: { 'decoder.conv.weight': { ...A.vae['decoder.conv.weight'], dtype: 'BF16' } } });
  // each replaces the second input's vae.safetensors; the entry is valid but for what the name says
  const f16 = (over: Record<string, unknown> = {}) => ({ 'decoder.conv.weight': { dtype: 'F16', shape: [2], data_offsets: [0, 4], ...over } });
  const four = Buffer.from([0x66, 0x2e, 0x00, 0x47]); // float16 0.1, 7
  const hostile: [string, Buffer, RegExp][] = [
    [
      'an F64 tensor',
      rawSafetensors(f16({ dtype: 'F64', data_offsets: [0, 16] }), Buffer.alloc(16)),
      /tensor 'decoder\.conv\.weight': dtype 'F64'; only F16, F32 and BF16 are averaged/,
    ],
    ['an I32 tensor', rawSafetensors(f16({ dtype: 'I32', data_offsets: [0, 8] }), Buffer.alloc(8)), /dtype 'I32'; only F16, F32 and BF16/],
    ['a header that is a list', rawSafetensors([1, 2]), /header at byte 8 must be a JSON object/],
    ['a header that is not JSON', rawSafetensors('{"a": '), /header at byte 8 is not JSON/],
    [
      'a tensor named twice',
      rawSafetensors(
        '{"decoder.conv.weight": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}, "decoder.conv.weight": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}',
        four,
      ),
      /key 'decoder\.conv\.weight' appears more than once/,
    ],
    ['metadata that is a list', rawSafetensors({ __metadata__: ['a'], ...f16() }, four), /"__metadata__" must be an object of strings/],
    ['a metadata value that is a number', rawSafetensors({ __metadata__: { seed: 2 }, ...f16() }, four), /"__metadata__" must be an object of strings/],
    ['negative offsets', rawSafetensors(f16({ data_offsets: [-8, -4] }), four), /data_offsets \[-8, -4\] must be \[begin, end\] with 0 <= begin <= end <= 4/],
    ['offsets past the data', rawSafetensors(f16({ data_offsets: [2, 6] }), four), /data_offsets \[2, 6\] must be .* <= 4 \(the data's length\)/],
    ['offsets reversed', rawSafetensors(f16({ data_offsets: [4, 0], shape: [0] }), four), /data_offsets \[4, 0\] must be/],
    ['a shape of -1', rawSafetensors(f16({ shape: [-1] }), four), /shape \[-1\] must be a list of non-negative integers/],
    ['a shape of 2.5', rawSafetensors(f16({ shape: [2.5] }), four), /shape \[2\.5\] must be a list of non-negative integers/],
    ["a byte length that is not its shape's", rawSafetensors(f16({ shape: [3] }), four), /data_offsets \[0, 4\] hold 4 bytes, its shape \[3\] in F16 6/],
    [
      'overlapping tensors',
      rawSafetensors({ ...f16(), 'decoder.extra': { dtype: 'F16', shape: [1], data_offsets: [2, 4] } }, four),
      /tensors 'decoder\.conv\.weight' and 'decoder\.extra' overlap at data byte 2/,
    ],
    ['a NaN', rawSafetensors(f16(), Buffer.from([0x66, 0x2e, 0x00, 0x7e])), /tensor 'decoder\.conv\.weight' holds NaN or ±inf/],
    ['an infinity', rawSafetensors(f16(), Buffer.from([0x66, 0x2e, 0x00, 0xfc])), /holds NaN or ±inf/],
  ];
  const hostileDirs: Record<string, string> = {};
  for (const [name, bytes] of hostile) {
    hostileDirs[name] = modelDir(name.replace(/[^a-z0-9]+/gi, '-'), B);
    writeFileSync(path.join(hostileDirs[name], 'vae.safetensors'), bytes);
  }

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
      [
        'an input with a tensor the first lacks',
        ['--model', a, '0.75', '--model', extra, '0.25'],
        /text_encoder\.safetensors: input 2 has tensor 'shared\.extra' that input 1 lacks/,
      ],
      [
        'a tensor of another shape',
        ['--model', a, '0.75', '--model', reshaped, '0.25'],
        /transformer\.safetensors: tensor 'blocks\.0\.w' is \[3, 2\] in input 2, \[2, 3\] in input 1/,
      ],
      [
        'a tensor of another dtype',
        ['--model', a, '0.75', '--model', widened, '0.25'],
        /transformer\.safetensors: tensor 'blocks\.0\.w' is F32 in input 2, F16 in input 1/,
      ],
      [
        'a tensor stored BF16 beside F16',
        ['--model', a, '0.75', '--model', bf16, '0.25'],
        /vae\.safetensors: tensor 'decoder\.conv\.weight' is BF16 in input 2, F16 in input 1/,
      ],
      [
        '--out one of the inputs',
        ['--model', a, '0.75', '--model', b, '0.25', '--out', `${a}/`],
        /--out .*\/a\/ is the input .*\/a; write the average elsewhere/,
      ],
      [
        "another VAE's latent statistics",
        ['--model', a, '0.75', '--model', otherVae, '0.25'],
        /other-vae\/model\.json: 'vae' differs from .*\/a\/model\.json's \(one architecture and VAE are averaged\)/,
      ],
      ['another tokenizer', ['--model', a, '0.75', '--model', otherWords, '0.25'], /other-words\/tokenizer\.json: differs from .*\/a\/tokenizer\.json/],
      [
        'a damaged safetensors file (text)',
        ['--model', a, '0.75', '--model', damaged, '0.25'],
        /damaged\/vae\.safetensors: header length \d+ \(byte 0\) runs past the file's 22 bytes/,
      ],
      [
        'a 3-byte safetensors file',
        ['--model', a, '0.75', '--model', short, '0.25'],
        /short\/text_encoder\.safetensors: 3 bytes, shorter than the 8-byte header length at byte 0/,
      ],
      ...hostile.map(
        ([name, , message]) => [`a safetensors file with ${name}`, ['--model', a, '0.75', '--model', hostileDirs[name], '0.25'], message] as Refusal,
      ),
      ['a model.json that is not JSON', ['--model', badJson, '0.75', '--model', a, '0.25'], /bad-json\/model\.json: not JSON \(/],
      ['a model.json that is no object', ['--model', a, '0.75', '--model', arrayJson, '0.25'], /array-json\/model\.json: must hold a JSON object/],
      ['a model.json with a key the first lacks, even null', ['--model', a, '0.75', '--model', nullKey, '0.25'], /null-key\/model\.json: 'extra' differs from/],
      [
        'a directory that does not exist',
        ['--model', a, '0.75', '--model', path.join(b, 'missing'), '0.25'],
        /missing\/model\.json: cannot read it \(No such file or directory\)/,
      ],
      ['an empty --out (the last --out counts)', ['--model', a, '0.75', '--model', b, '0.25', '--out', ''], /--out must not be empty/],
    ],
    ['--model', a, '0.75', '--model', b, '0.25'],
  );

  it('a write that fails (a directory where vae.safetensors goes): exit 1 naming it, and --out left as it was', () => {
    const out = path.join(scratchDir('average'), 'model');
    mkdirSync(path.join(out, 'vae.safetensors'), { recursive: true });
    const r = average(['--out', out, '--model', a, '0.75', '--model', b, '0.25']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/average_weights: writing .*model\/vae\.safetensors failed \(Is a directory\)/);
    expect(r.stderr).not.toMatch(/Traceback/);
    expect(readdirSync(out)).toEqual(['vae.safetensors']);
  });

  it('an --out that cannot be created: named, after every input was read', () => {
    const r = average(['--out', '/proc/omnirx-average/model', '--model', a, '0.75', '--model', b, '0.25']);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--out \/proc\/omnirx-average\/model: cannot create the directory \(No such file or directory\)/);
  });
});
