import type { NativeBinding } from '../../src/native/binding';
import { ModelRegistry } from '../../src/models/registry';

const fakeNative = (bf16Native: boolean) => ({ stats: () => ({ bf16Native }) }) as unknown as NativeBinding;

describe('ModelRegistry: matmulDtype', () => {
  let emit: jest.SpyInstance;
  beforeEach(() => {
    emit = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  });
  afterEach(() => emit.mockRestore());

  it('warns (OMNIRX_BF16_EMULATED) when bfloat16 is asked for on a CPU without AVX512_BF16', () => {
    new ModelRegistry(fakeNative(false), '/nonexistent', 'm', undefined, { matmulDtype: 'bfloat16' });
    expect(emit).toHaveBeenCalledTimes(1);
    expect(emit.mock.calls[0][0]).toMatch(/AVX512_BF16/);
    expect(emit.mock.calls[0][1]).toEqual({ code: 'OMNIRX_BF16_EMULATED' });
  });

  it('is silent for float32, for bfloat16 where the instruction exists, and where no DiT is loaded', () => {
    new ModelRegistry(fakeNative(false), '/nonexistent', 'm', undefined, { matmulDtype: 'float32' });
    new ModelRegistry(fakeNative(false), '/nonexistent', 'm', new Set(['vae', 'text_encoder']), { matmulDtype: 'bfloat16' });
    new ModelRegistry(fakeNative(false), '/nonexistent', 'm');
    new ModelRegistry(fakeNative(true), '/nonexistent', 'm', undefined, { matmulDtype: 'bfloat16' });
    expect(emit).not.toHaveBeenCalled();
  });
});
