import type { z } from 'zod';

import { validationErrorEvent } from '../../src/engine/events';
import { DEFAULT_LIMITS } from '../../src/request/limits';
import { OmniRequestSchema, createOmniRequestSchema, type OmniRequest, type OmniRequestInput } from '../../src/request/omni-request';

// ---------------------------------------------------------------------------
// helpers

/** Issues of a failed parse as `{ path: 'a.b', code }`; fails the test when the input was accepted. */
function issuesOf(input: unknown, schema: z.ZodType = OmniRequestSchema): { path: string; code: string }[] {
  const r = schema.safeParse(input);
  expect(r.success).toBe(false);
  if (r.success) return [];
  return r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), code: i.code }));
}

/** A minimal valid T2V request with `diffusion` overridden. */
function withDiffusion(diffusion: Record<string, unknown>): unknown {
  return { task: 'T2V', inputs: { prompt: 'x' }, diffusion };
}

/** Exact type equality (not mutual assignability), for compile-time assertions. */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only when `T` is `true`; the call itself does nothing. */
function assertType<T extends true>(witness?: T): void {
  void witness;
}

// ---------------------------------------------------------------------------
// valid requests

describe('OmniRequestSchema: valid requests', () => {
  it('fills the defaults of a minimal T2V request', () => {
    const r = OmniRequestSchema.safeParse({ task: 'T2V', inputs: { prompt: 'x' } });
    expect(r.success).toBe(true);
    expect(r.data).toEqual({
      task: 'T2V',
      inputs: { prompt: 'x', negativePrompt: '' },
      diffusion: {},
      outputs: { returnLatents: false },
      priority: 0,
    });
  });

  it('does not share default objects between parses', () => {
    const a = OmniRequestSchema.parse({ task: 'T2V', inputs: { prompt: 'x' } });
    (a.diffusion as { width?: number }).width = 512;
    (a.outputs as { returnLatents: boolean }).returnLatents = true;
    const b = OmniRequestSchema.parse({ task: 'T2V', inputs: { prompt: 'x' } });
    expect(b.diffusion).toEqual({});
    expect(b.outputs).toEqual({ returnLatents: false });
  });

  it('accepts a fully specified request and keeps every value', () => {
    const input = {
      requestId: 'r-1',
      model: 'omnirx-default',
      task: 'T2V',
      inputs: { prompt: 'a cat', negativePrompt: 'blurry' },
      diffusion: { width: 256, height: 128, numFrames: 17, fps: 16, numInferenceSteps: 20, guidanceScale: 5, flowShift: 3, seed: 0xffffffff },
      outputs: { modalities: ['video', 'latents'], returnLatents: true },
      priority: -100,
    };
    expect(OmniRequestSchema.parse(input)).toEqual(input);
  });

  it.each([
    ['width', 8],
    ['width', 1024],
    ['numFrames', 256],
    ['fps', 120],
    ['numInferenceSteps', 200],
    ['seed', 0],
    ['seed', 2 ** 32 - 1],
    ['guidanceScale', 0],
    ['guidanceScale', 50],
    ['guidanceScale', 7.5],
    ['flowShift', 0.01],
    ['flowShift', 100],
  ])('accepts the boundary value %s = %p', (field, value) => {
    expect(OmniRequestSchema.safeParse(withDiffusion({ [field]: value })).success).toBe(true);
  });

  it('accepts T2I with numFrames 1 (or absent) and rejects numFrames 2 at diffusion.numFrames', () => {
    expect(OmniRequestSchema.safeParse({ task: 'T2I', inputs: { prompt: 'x' }, diffusion: { numFrames: 1 } }).success).toBe(true);
    expect(OmniRequestSchema.safeParse({ task: 'T2I', inputs: { prompt: 'x' } }).success).toBe(true);
    expect(issuesOf({ task: 'T2I', inputs: { prompt: 'x' }, diffusion: { numFrames: 2 } })).toEqual([{ path: 'diffusion.numFrames', code: 'custom' }]);
    // T2V may ask for several frames.
    expect(OmniRequestSchema.safeParse({ task: 'T2V', inputs: { prompt: 'x' }, diffusion: { numFrames: 2 } }).success).toBe(true);
  });

  it('accepts a prompt of exactly maxPromptChars', () => {
    const prompt = 'p'.repeat(DEFAULT_LIMITS.maxPromptChars);
    expect(OmniRequestSchema.safeParse({ task: 'T2V', inputs: { prompt, negativePrompt: prompt } }).success).toBe(true);
  });
});

// ---------------------------------------------------------------------------
// hostile numeric values

describe('OmniRequestSchema: hostile diffusion values', () => {
  // [field, value, expected zod 4 code] — every case must fail at `diffusion.<field>` only.
  const NUMBER_TYPE_ABUSE: [unknown, string][] = [
    [NaN, 'invalid_type'],
    [Infinity, 'invalid_type'],
    [-Infinity, 'invalid_type'],
    ['64', 'invalid_type'],
    [null, 'invalid_type'],
    [true, 'invalid_type'],
    [[64], 'invalid_type'],
    [{ valueOf: () => 64 }, 'invalid_type'],
    [BigInt(64), 'invalid_type'],
  ];
  const INT_FIELDS = ['width', 'height', 'numFrames', 'fps', 'numInferenceSteps', 'seed'] as const;
  const cases: [string, unknown, string][] = [
    // pixel sides: [8, 1024]
    ...(['width', 'height'] as const).flatMap((f): [string, unknown, string][] => [
      [f, -64, 'too_small'],
      [f, 0, 'too_small'],
      [f, 7, 'too_small'],
      [f, 1025, 'too_big'],
      [f, 1_000_000, 'too_big'],
      [f, 1e300, 'too_big'],
      [f, Number.MAX_SAFE_INTEGER + 2, 'too_big'],
    ]),
    ['numFrames', -1, 'too_small'],
    ['numFrames', 0, 'too_small'],
    ['numFrames', 257, 'too_big'],
    ['numFrames', 1e9, 'too_big'],
    ['fps', -30, 'too_small'],
    ['fps', 0, 'too_small'],
    ['fps', 121, 'too_big'],
    ['numInferenceSteps', -5, 'too_small'],
    ['numInferenceSteps', 0, 'too_small'],
    ['numInferenceSteps', 201, 'too_big'],
    ['numInferenceSteps', 1e12, 'too_big'],
    ['seed', -1, 'too_small'],
    ['seed', 2 ** 32, 'too_big'],
    ['seed', 2 ** 53, 'too_big'],
    // fractional integers are an invalid_type (expected int) in zod 4
    ...INT_FIELDS.map((f): [string, unknown, string] => [f, 16.5, 'invalid_type']),
    ...INT_FIELDS.map((f): [string, unknown, string] => [f, 1e-9, 'invalid_type']),
    ...[...INT_FIELDS, 'guidanceScale', 'flowShift'].flatMap((f) => NUMBER_TYPE_ABUSE.map(([v, code]): [string, unknown, string] => [f, v, code])),
    ['guidanceScale', -1, 'too_small'],
    ['guidanceScale', -1e-9, 'too_small'],
    ['guidanceScale', 51, 'too_big'],
    ['guidanceScale', 50.000001, 'too_big'],
    ['flowShift', 0, 'too_small'],
    ['flowShift', -1, 'too_small'],
    ['flowShift', 0.009, 'too_small'],
    ['flowShift', 100.5, 'too_big'],
  ];

  it.each(cases)('rejects %s = %p with %s', (field, value, code) => {
    const issues = issuesOf(withDiffusion({ [field]: value }));
    expect(issues.length).toBeGreaterThan(0);
    // 1e300 also trips zod's safe-integer check: two too_big issues, same path.
    for (const i of issues) expect(i).toEqual({ path: `diffusion.${field}`, code });
  });

  it.each<[unknown, string, string]>([
    [[0.5, 0.25], 'diffusion.guidanceInterval', 'custom'],
    [[-0.1, 0.5], 'diffusion.guidanceInterval.0', 'too_small'],
    [[0, 1.0000001], 'diffusion.guidanceInterval.1', 'too_big'],
    [[0, Number.NaN], 'diffusion.guidanceInterval.1', 'invalid_type'],
    [[0, Infinity], 'diffusion.guidanceInterval.1', 'invalid_type'],
    [['0', 0.5], 'diffusion.guidanceInterval.0', 'invalid_type'],
    [[0.25], 'diffusion.guidanceInterval', 'too_small'],
    [[0, 0.25, 1], 'diffusion.guidanceInterval', 'too_big'],
    [[], 'diffusion.guidanceInterval', 'too_small'],
    ['0,0.25', 'diffusion.guidanceInterval', 'invalid_type'],
    [{ start: 0, end: 0.25 }, 'diffusion.guidanceInterval', 'invalid_type'],
    [null, 'diffusion.guidanceInterval', 'invalid_type'],
  ])('rejects guidanceInterval %p at %s (%s)', (guidanceInterval, path, code) => {
    expect(issuesOf(withDiffusion({ guidanceInterval }))[0]).toEqual({ path, code });
  });

  it.each<[unknown, string]>([
    [-0.01, 'too_small'],
    [1.0001, 'too_big'],
    [Number.NaN, 'invalid_type'],
    [Infinity, 'invalid_type'],
    ['0.5', 'invalid_type'],
    [null, 'invalid_type'],
    [[0.5], 'invalid_type'],
  ])('rejects eta %p (%s)', (eta, code) => {
    expect(issuesOf(withDiffusion({ eta }))[0]).toEqual({ path: 'diffusion.eta', code });
  });

  it('accepts eta from 0 to 1 and keeps it; absent stays absent (the model decides)', () => {
    for (const eta of [0, 0.25, 1]) expect(OmniRequestSchema.parse(withDiffusion({ eta })).diffusion.eta).toBe(eta);
    expect(OmniRequestSchema.parse(withDiffusion({})).diffusion.eta).toBeUndefined();
  });

  it('accepts guidance intervals from empty to whole and keeps them', () => {
    for (const interval of [
      [0, 1],
      [0, 0.25],
      [0.5, 0.5],
      [1, 1],
      [0, 0],
    ]) {
      expect(OmniRequestSchema.parse(withDiffusion({ guidanceInterval: interval })).diffusion.guidanceInterval).toEqual(interval);
    }
  });

  it.each([
    [1.5, 'invalid_type'],
    [101, 'too_big'],
    [-101, 'too_small'],
    [NaN, 'invalid_type'],
    ['1', 'invalid_type'],
  ])('rejects priority %p with %s', (priority, code) => {
    expect(issuesOf({ task: 'T2V', inputs: { prompt: 'x' }, priority })).toEqual([{ path: 'priority', code }]);
  });

  it('accepts a seed of -0 as is (harmless: -0 === 0 and -0 >>> 0 is 0)', () => {
    const seed = OmniRequestSchema.parse(withDiffusion({ seed: -0 })).diffusion.seed;
    expect(seed === 0).toBe(true);
    expect(seed! >>> 0).toBe(0);
  });
});

// ---------------------------------------------------------------------------
// hostile shapes

describe('OmniRequestSchema: hostile shapes', () => {
  it('rejects an unknown top-level key', () => {
    expect(issuesOf({ task: 'T2V', inputs: { prompt: 'x' }, steps: 10 })).toEqual([{ path: '', code: 'unrecognized_keys' }]);
  });

  it.each([
    ['inputs', { task: 'T2V', inputs: { prompt: 'x', image: 'data:...' } }],
    ['diffusion', withDiffusion({ num_inference_steps: 10 })],
    ['outputs', { task: 'T2V', inputs: { prompt: 'x' }, outputs: { format: 'gif' } }],
  ])('rejects an unknown key nested in %s', (where, input) => {
    expect(issuesOf(input)).toEqual([{ path: where, code: 'unrecognized_keys' }]);
  });

  it.each([['I2V'], ['t2v'], [' T2V'], [''], [0], [null], [['T2V']]])('rejects task %p', (task) => {
    expect(issuesOf({ task, inputs: { prompt: 'x' } })).toEqual([{ path: 'task', code: 'invalid_value' }]);
  });

  it('rejects a missing task', () => {
    expect(issuesOf({ inputs: { prompt: 'x' } })).toEqual([{ path: 'task', code: 'invalid_value' }]);
  });

  it('rejects a prompt longer than maxPromptChars (and a negative prompt too)', () => {
    const long = 'p'.repeat(DEFAULT_LIMITS.maxPromptChars + 1);
    expect(issuesOf({ task: 'T2V', inputs: { prompt: long } })).toEqual([{ path: 'inputs.prompt', code: 'too_big' }]);
    expect(issuesOf({ task: 'T2V', inputs: { prompt: 'x', negativePrompt: long } })).toEqual([{ path: 'inputs.negativePrompt', code: 'too_big' }]);
  });

  it.each([[42], [null], [['x']], [{ text: 'x' }], [undefined]])('rejects prompt %p that is not a string', (prompt) => {
    expect(issuesOf({ task: 'T2V', inputs: { prompt } })).toEqual([{ path: 'inputs.prompt', code: 'invalid_type' }]);
  });

  it('rejects a null negative prompt (only absence gets the default)', () => {
    expect(issuesOf({ task: 'T2V', inputs: { prompt: 'x', negativePrompt: null } })).toEqual([{ path: 'inputs.negativePrompt', code: 'invalid_type' }]);
  });

  it('rejects missing inputs, and inputs that are not an object', () => {
    expect(issuesOf({ task: 'T2V' })).toEqual([{ path: 'inputs', code: 'invalid_type' }]);
    expect(issuesOf({ task: 'T2V', inputs: 'x' })).toEqual([{ path: 'inputs', code: 'invalid_type' }]);
    expect(issuesOf({ task: 'T2V', inputs: ['x'] })).toEqual([{ path: 'inputs', code: 'invalid_type' }]);
    expect(issuesOf({ task: 'T2V', inputs: null })).toEqual([{ path: 'inputs', code: 'invalid_type' }]);
  });

  it('rejects null diffusion/outputs (only absence gets the default)', () => {
    expect(issuesOf(withDiffusion(null as never))).toEqual([{ path: 'diffusion', code: 'invalid_type' }]);
    expect(issuesOf({ task: 'T2V', inputs: { prompt: 'x' }, outputs: null })).toEqual([{ path: 'outputs', code: 'invalid_type' }]);
  });

  it.each([[[]], [[{ task: 'T2V', inputs: { prompt: 'x' } }]], [null], [undefined], ['{"task":"T2V"}'], [42], [true]])(
    'rejects a request that is not an object: %p',
    (input) => {
      expect(issuesOf(input)).toEqual([{ path: '', code: 'invalid_type' }]);
    },
  );

  it('rejects bad outputs.modalities', () => {
    const req = (modalities: unknown): unknown => ({ task: 'T2V', inputs: { prompt: 'x' }, outputs: { modalities } });
    expect(issuesOf(req([]))).toEqual([{ path: 'outputs.modalities', code: 'too_small' }]);
    expect(issuesOf(req(['video', 'image', 'latents', 'video']))).toEqual([{ path: 'outputs.modalities', code: 'too_big' }]);
    expect(issuesOf(req(['audio']))).toEqual([{ path: 'outputs.modalities.0', code: 'invalid_value' }]);
    // zod 4 still runs the array's length check on the string 'video' (5 chars > 3): two issues, same path.
    expect(issuesOf(req('video'))).toEqual([
      { path: 'outputs.modalities', code: 'invalid_type' },
      { path: 'outputs.modalities', code: 'too_big' },
    ]);
    expect(issuesOf(req(7))).toEqual([{ path: 'outputs.modalities', code: 'invalid_type' }]);
  });

  it('rejects a huge junk array in outputs.modalities with one issue, not one per element', () => {
    const issues = issuesOf({ task: 'T2V', inputs: { prompt: 'x' }, outputs: { modalities: new Array(100_000).fill('junk') } });
    expect(issues).toEqual([{ path: 'outputs.modalities', code: 'too_big' }]);
  });

  it.each([[''], ['x'.repeat(129)], [7]])('rejects requestId %p', (requestId) => {
    expect(issuesOf({ requestId, task: 'T2V', inputs: { prompt: 'x' } })).toEqual([
      { path: 'requestId', code: typeof requestId === 'string' ? (requestId === '' ? 'too_small' : 'too_big') : 'invalid_type' },
    ]);
  });

  it.each([[''], ['m'.repeat(129)], [null]])('rejects model %p', (model) => {
    expect(issuesOf({ model, task: 'T2V', inputs: { prompt: 'x' } })).toEqual([
      { path: 'model', code: typeof model === 'string' ? (model === '' ? 'too_small' : 'too_big') : 'invalid_type' },
    ]);
  });

  describe('prototype pollution', () => {
    afterEach(() => {
      expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
      expect((Object.prototype as Record<string, unknown>)['polluted']).toBeUndefined();
    });

    it.each([
      ['', '{"task":"T2V","inputs":{"prompt":"x"},"__proto__":{"polluted":true}}', '__proto__'],
      ['inputs', '{"task":"T2V","inputs":{"prompt":"x","__proto__":{"polluted":true}}}', '__proto__'],
      ['diffusion', '{"task":"T2V","inputs":{"prompt":"x"},"diffusion":{"__proto__":{"polluted":true}}}', '__proto__'],
      ['outputs', '{"task":"T2V","inputs":{"prompt":"x"},"outputs":{"__proto__":{"polluted":true}}}', '__proto__'],
      ['', '{"task":"T2V","inputs":{"prompt":"x"},"constructor":{"prototype":{"polluted":true}}}', 'constructor'],
      ['diffusion', '{"task":"T2V","inputs":{"prompt":"x"},"diffusion":{"constructor":{"prototype":{"polluted":true}}}}', 'constructor'],
    ])('rejects an own %p key from JSON.parse (at "%s")', (where, json, key) => {
      const input: unknown = JSON.parse(json);
      expect(Object.keys(input as object).length).toBeGreaterThan(0);
      const r = OmniRequestSchema.safeParse(input);
      expect(r.success).toBe(false);
      if (r.success) return;
      expect(r.error.issues).toHaveLength(1);
      expect(r.error.issues[0]).toMatchObject({ code: 'unrecognized_keys', path: where === '' ? [] : [where], keys: [key] });
    });

    it('does not pollute when an own __proto__ key sits next to valid fields only', () => {
      const input: unknown = JSON.parse('{"__proto__":{"polluted":true,"task":"T2V","inputs":{"prompt":"x"}}}');
      // The __proto__ own key does not supply `task`/`inputs`.
      expect(issuesOf(input)).toEqual([
        { path: 'task', code: 'invalid_value' },
        { path: 'inputs', code: 'invalid_type' },
        { path: '', code: 'unrecognized_keys' },
      ]);
    });

    it('copies inherited fields into a fresh plain object (programmatic callers only; JSON never inherits)', () => {
      const inherited = Object.create({ task: 'T2V', inputs: { prompt: 'x' } }) as object;
      const r = OmniRequestSchema.safeParse(inherited);
      expect(r.success).toBe(true);
      expect(Object.getPrototypeOf(r.data)).toBe(Object.prototype);
      expect(Object.keys(r.data!)).toEqual(expect.arrayContaining(['task', 'inputs']));
    });

    it('accepts a null-prototype object and returns a plain one', () => {
      const bare = Object.assign(Object.create(null) as object, { task: 'T2V', inputs: { prompt: 'x' } });
      const r = OmniRequestSchema.safeParse(bare);
      expect(r.success).toBe(true);
      expect(Object.getPrototypeOf(r.data)).toBe(Object.prototype);
    });
  });

  describe('size and depth', () => {
    function deep(levels: number): Record<string, unknown> {
      const root: Record<string, unknown> = {};
      let cur = root;
      for (let i = 0; i < levels; i++) {
        const next: Record<string, unknown> = {};
        cur['a'] = next;
        cur = next;
      }
      return root;
    }

    it('rejects deeply nested junk without recursing into it (100 000 levels would overflow the stack)', () => {
      const junk = deep(100_000);
      expect(issuesOf(withDiffusion({ width: junk }))).toEqual([{ path: 'diffusion.width', code: 'invalid_type' }]);
      expect(issuesOf({ task: 'T2V', inputs: { prompt: junk } })).toEqual([{ path: 'inputs.prompt', code: 'invalid_type' }]);
      expect(issuesOf({ task: 'T2V', inputs: { prompt: 'x' }, junk })).toEqual([{ path: '', code: 'unrecognized_keys' }]);
      expect(issuesOf(withDiffusion(junk))).toEqual([{ path: 'diffusion', code: 'unrecognized_keys' }]);
    });

    it('rejects a 10 MB prompt at inputs.prompt, without echoing it', () => {
      const prompt = 'x'.repeat(10 * 1024 * 1024);
      const r = OmniRequestSchema.safeParse({ task: 'T2V', inputs: { prompt } });
      expect(r.success).toBe(false);
      expect(r.error?.issues.map((i) => [i.path.join('.'), i.code])).toEqual([['inputs.prompt', 'too_big']]);
      // The error does not echo the prompt back.
      expect(JSON.stringify(r.error?.issues).length).toBeLessThan(1000);
    });
  });
});

// ---------------------------------------------------------------------------
// error event

describe('validationErrorEvent', () => {
  it('lists every issue of a multi-error request with dotted paths; param is the first path', () => {
    const r = OmniRequestSchema.safeParse({
      task: 'T2X',
      inputs: { prompt: 5 },
      diffusion: { width: -1, seed: 1.5, guidanceScale: NaN },
      outputs: { modalities: ['gif'] },
      extra: true,
    });
    expect(r.success).toBe(false);
    const event = validationErrorEvent('r1', r.error!);
    // Every issue, in zod's order, with the dotted path the transports echo as `param`; the first names the event.
    expect(event).toMatchObject({ type: 'error', requestId: 'r1', code: 'OMNIRX_ERR_INVALID_REQUEST', param: 'task' });
    expect(event.message.startsWith('task: ')).toBe(true);
    expect(event.issues?.map((i) => [i.path, i.code])).toEqual([
      ['task', 'invalid_value'],
      ['inputs.prompt', 'invalid_type'],
      ['diffusion.width', 'too_small'],
      ['diffusion.guidanceScale', 'invalid_type'],
      ['diffusion.seed', 'invalid_type'],
      ['outputs.modalities.0', 'invalid_value'],
      ['extra', 'unrecognized_keys'],
    ]);
    expect(event.issues?.find((i) => i.path === 'extra')?.message).toMatch(/"extra"/);
    expect(event.issues?.find((i) => i.path === 'diffusion.width')?.message).toMatch(/>=8/);
  });

  it('leaves param undefined for a root-level issue and names it (request) in the message', () => {
    const r = OmniRequestSchema.safeParse(null);
    const event = validationErrorEvent('r2', r.error!);
    expect(event.param).toBeUndefined();
    expect(event.message).toMatch(/^\(request\): /);
    expect(event.issues).toEqual([{ path: '', code: 'invalid_type', message: expect.any(String) }]);
  });

  it('reports the T2I frame rule next to other diffusion issues', () => {
    const r = OmniRequestSchema.safeParse({ task: 'T2I', inputs: { prompt: 'x' }, diffusion: { numFrames: 2, width: 4 } });
    const event = validationErrorEvent('r3', r.error!);
    expect(event.param).toBe('diffusion.width');
    expect(event.issues?.map((i) => `${i.path}:${i.code}`)).toEqual(['diffusion.width:too_small', 'diffusion.numFrames:custom']);
  });
});

// ---------------------------------------------------------------------------
// custom limits

describe('createOmniRequestSchema(limits)', () => {
  it('applies a lowered maxSteps', () => {
    const schema = createOmniRequestSchema({ ...DEFAULT_LIMITS, maxSteps: 10 });
    expect(schema.safeParse(withDiffusion({ numInferenceSteps: 10 })).success).toBe(true);
    expect(issuesOf(withDiffusion({ numInferenceSteps: 11 }), schema)).toEqual([{ path: 'diffusion.numInferenceSteps', code: 'too_big' }]);
    // The default schema is unaffected.
    expect(OmniRequestSchema.safeParse(withDiffusion({ numInferenceSteps: 11 })).success).toBe(true);
  });

  it('applies lowered maxSide, maxFrames and maxPromptChars', () => {
    const schema = createOmniRequestSchema({ ...DEFAULT_LIMITS, maxSide: 64, maxFrames: 5, maxPromptChars: 3 });
    expect(issuesOf(withDiffusion({ width: 65 }), schema)).toEqual([{ path: 'diffusion.width', code: 'too_big' }]);
    expect(issuesOf(withDiffusion({ height: 128 }), schema)).toEqual([{ path: 'diffusion.height', code: 'too_big' }]);
    expect(issuesOf(withDiffusion({ numFrames: 6 }), schema)).toEqual([{ path: 'diffusion.numFrames', code: 'too_big' }]);
    expect(issuesOf({ task: 'T2V', inputs: { prompt: 'abcd' } }, schema)).toEqual([{ path: 'inputs.prompt', code: 'too_big' }]);
    expect(schema.safeParse({ task: 'T2V', inputs: { prompt: 'abc' }, diffusion: { width: 64, numFrames: 5 } }).success).toBe(true);
  });

  it('uses DEFAULT_LIMITS when called without limits', () => {
    const schema = createOmniRequestSchema();
    expect(issuesOf(withDiffusion({ numInferenceSteps: DEFAULT_LIMITS.maxSteps + 1 }), schema)).toEqual([
      { path: 'diffusion.numInferenceSteps', code: 'too_big' },
    ]);
  });
});

// ---------------------------------------------------------------------------
// inferred types (checked by the compiler; ts-jest fails the suite on a type error)

describe('inferred types', () => {
  it('OmniRequest has the defaults applied; OmniRequestInput has them optional', () => {
    assertType<Equals<OmniRequest['task'], 'T2V' | 'T2I'>>();
    assertType<Equals<OmniRequest['inputs']['prompt'], string>>();
    assertType<Equals<OmniRequest['inputs']['negativePrompt'], string>>();
    assertType<Equals<OmniRequest['outputs']['returnLatents'], boolean>>();
    assertType<Equals<OmniRequest['priority'], number>>();
    assertType<Equals<OmniRequest['diffusion']['width'], number | undefined>>();
    assertType<Equals<OmniRequest['outputs']['modalities'], ('video' | 'image' | 'latents')[] | undefined>>();
    assertType<Equals<OmniRequest['requestId'], string | undefined>>();
    assertType<Equals<undefined extends OmniRequest['diffusion'] ? true : false, false>>();
    assertType<Equals<undefined extends OmniRequest['outputs'] ? true : false, false>>();

    assertType<Equals<OmniRequestInput['task'], 'T2V' | 'T2I'>>();
    assertType<Equals<OmniRequestInput['inputs']['negativePrompt'], string | undefined>>();
    assertType<Equals<OmniRequestInput['priority'], number | undefined>>();
    assertType<Equals<undefined extends OmniRequestInput['diffusion'] ? true : false, true>>();
    assertType<Equals<undefined extends OmniRequestInput['outputs'] ? true : false, true>>();

    const task: OmniRequest['task'] = 'T2V';
    const minimal: OmniRequestInput = { task, inputs: { prompt: 'x' } };
    // @ts-expect-error: a validated request always carries negativePrompt, diffusion, outputs and priority.
    const notValidated: OmniRequest = { task: 'T2V', inputs: { prompt: 'x' } };
    // @ts-expect-error: only declared tasks.
    const badTask: OmniRequestInput['task'] = 'I2V';
    // @ts-expect-error: numbers, not strings.
    const badWidth: OmniRequestInput = { task: 'T2V', inputs: { prompt: 'x' }, diffusion: { width: '64' } };
    // @ts-expect-error: strict objects reject unknown keys in literals too.
    const extraKey: OmniRequestInput = { task: 'T2V', inputs: { prompt: 'x' }, steps: 4 };
    expect([minimal, notValidated, badTask, badWidth, extraKey]).toHaveLength(5);
  });
});
