import type { MatmulDtype } from '../../native/plan-builder';
import type { ModelSpecBase } from './model-spec';

/**
 * A loaded model of some family, as the runtime above the families sees it: its spec, which components were
 * constructed, their weight bytes, and `dispose`. A family's pipeline stages see their own model type.
 */
export interface LoadedModel {
  readonly spec: ModelSpecBase;
  /** Names of the constructed components. */
  readonly loadedComponents: readonly string[];
  /** Native bytes of the loaded weights per component (0 for weights loaded lazily on first use). */
  readonly weightBytes: Readonly<Record<string, number>>;
  dispose(): void;
}

/** How a deployment loads every model. */
export interface ModelLoadOptions {
  /** Operand dtype of the denoisers' matrix products (linears, attention): 'float32' (default, reference parity) or 'bfloat16'. */
  matmulDtype?: MatmulDtype;
}
