import { ModelCatalog } from '../../src/pipeline/family/catalog';
import { ModelLoader } from '../../src/pipeline/family/loader';
import { FamilyRegistry } from '../../src/pipeline/family/registry';
import type { NativeBinding } from '../../src/native/binding';

const fakeNative = (bf16Native: boolean) => ({ stats: () => ({ bf16Native }) }) as unknown as NativeBinding;
const catalog = new ModelCatalog('/nonexistent', 'm', new FamilyRegistry([]));
const none = () => new Set<string>();

describe('ModelLoader: matmulDtype', () => {
  let emit: jest.SpyInstance;
  beforeEach(() => {
    emit = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  });
  afterEach(() => emit.mockRestore());

  it('warns (OMNIRX_BF16_EMULATED) when bfloat16 is asked for on a CPU without AVX512_BF16', () => {
    new ModelLoader(fakeNative(false), catalog, none, { matmulDtype: 'bfloat16' });
    expect(emit).toHaveBeenCalledTimes(1);
    expect(emit.mock.calls[0][0]).toMatch(/AVX512_BF16/);
    expect(emit.mock.calls[0][1]).toEqual({ code: 'OMNIRX_BF16_EMULATED' });
  });

  it('is silent for float32, for bfloat16 where the instruction exists, and when no dtype is asked for (stages that load no denoiser)', () => {
    new ModelLoader(fakeNative(false), catalog, none, { matmulDtype: 'float32' });
    new ModelLoader(fakeNative(false), catalog, none);
    new ModelLoader(fakeNative(true), catalog, none, { matmulDtype: 'bfloat16' });
    expect(emit).not.toHaveBeenCalled();
  });
});

describe('FamilyRegistry: what plain JavaScript can pass', () => {
  it('refuses a missing families list or an entry that is not a family, naming the field', () => {
    for (const bad of [undefined, null, {}, 3, [undefined], [{}], [{ name: 1 }]]) {
      expect(() => new FamilyRegistry(bad as never)).toThrow(expect.objectContaining({ code: 'OMNIRX_ERR_CONFIG', param: 'families' }));
    }
    expect(() => new FamilyRegistry(undefined as never)).toThrow(/builtinFamilies\(\)/);
  });
});
