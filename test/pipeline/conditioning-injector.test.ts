import { OmniError } from '../../src/errors';
import { ACTION_KEYS, ActionSchema } from '../../src/request/action';
import { actionAdaLNInjector } from '../../src/pipeline/policies/conditioning-injector';

const MODEL = { numKeys: 5, vectorDim: 2 };

/** The OmniError `fn` throws (fails the test when it throws nothing or something else). */
function thrown(fn: () => unknown): OmniError {
  try {
    fn();
  } catch (e) {
    if (e instanceof OmniError) return e;
    throw e;
  }
  throw new Error('expected an OmniError');
}

describe('actionAdaLNInjector', () => {
  const inject = actionAdaLNInjector.chunkActions.bind(actionAdaLNInjector);

  it('is a conditioning policy', () => {
    expect(actionAdaLNInjector.slot).toBe('conditioning');
    expect(actionAdaLNInjector.name).toBe('action-adaln');
    expect(ACTION_KEYS).toEqual(['none', 'up', 'down', 'left', 'right']);
  });

  it('maps per-frame key names to ids and vectors to [C, 2] (zeros where a frame has none)', () => {
    const a = inject([{ key: 'up', vector: [0.5, -1] }, { key: 'right' }, { key: 'none', vector: [2, 3] }], 3, MODEL);
    expect(a?.keys).toEqual([1, 4, 0]);
    expect(Array.from(a?.vectors ?? [])).toEqual([0.5, -1, 0, 0, 2, 3]);
  });

  it('holds one action for every frame of the chunk, and omits vectors when no frame has one', () => {
    expect(inject({ key: 'left' }, 4, MODEL)).toEqual({ keys: [3, 3, 3, 3] });
    const a = inject({ key: 'down', vector: [1, 2] }, 2, MODEL);
    expect(a?.keys).toEqual([2, 2]);
    expect(Array.from(a?.vectors ?? [])).toEqual([1, 2, 1, 2]);
  });

  it('no actions are all "none" for an action model, and nothing for a model without one', () => {
    expect(inject(undefined, 3, MODEL)).toEqual({ keys: [0, 0, 0] });
    expect(inject(undefined, 3, undefined)).toBeUndefined();
  });

  it('rejects what the model cannot take, naming the frame', () => {
    const noModule = thrown(() => inject({ key: 'up' }, 2, undefined));
    expect(noModule.code).toBe('OMNIRX_ERR_UNSUPPORTED_VALUE');
    expect(noModule.message).toMatch(/no action module/);
    const length = thrown(() => inject([{ key: 'up' }], 2, MODEL));
    expect(length.code).toBe('OMNIRX_ERR_UNSUPPORTED_VALUE');
    expect(length.message).toMatch(/need 2 per-frame actions.*got 1/);
    const key = thrown(() => inject([{ key: 'up' }, { key: 'right' }], 2, { numKeys: 3, vectorDim: 2 }));
    expect(key.message).toMatch(/"right" at frame 1 .* 3 keys \(none, up, down\)/);
    const vec = thrown(() => inject([{ key: 'up' }, { key: 'up', vector: [1, 1] }], 2, { numKeys: 5, vectorDim: 0 }));
    expect(vec.code).toBe('OMNIRX_ERR_UNSUPPORTED_VALUE');
    expect(vec.message).toMatch(/frame 1 has a vector/);
  });

  it('rejects malformed actions as invalid requests with the frame as param', () => {
    const bad = thrown(() => inject([{ key: 'up' }, { key: 'jump' } as never], 2, MODEL));
    expect(bad.code).toBe('OMNIRX_ERR_INVALID_REQUEST');
    expect(bad.param).toBe('actions.1');
    const nan = thrown(() => inject([{ key: 'up', vector: [Number.NaN, 0] }, { key: 'up' }], 2, MODEL));
    expect(nan.param).toBe('actions.0');
    expect(ActionSchema.safeParse({ key: 'up', vector: [1, 2, 3] }).success).toBe(false);
    expect(ActionSchema.safeParse({ key: 'up', extra: 1 }).success).toBe(false);
  });
});
