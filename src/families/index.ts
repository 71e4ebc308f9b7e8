/**
 * Model families (docs/design.md §7): the registration API a family is written against, and the families this package
 * ships. The engine, executors, placement, transports and CLI never import a family; the package root registers
 * `builtinFamilies()`, and a user passes their own beside them (`Engine.create({ families: [...builtinFamilies(), mine] })`).
 */
import type { ModelFamily } from '../pipeline/family/family';
import { family as wanFamily } from './wan';

export {
  defineFamily,
  type FamilyDefinition,
  type FamilySessions,
  type FamilyStages,
  type ModelFamily,
  type PhaseHandoff,
  type RequestContext,
  type RequestWork,
  type ResolveEnv,
  type StagePhase,
} from '../pipeline/family/family';
export { FamilyRegistry } from '../pipeline/family/registry';
export { ModelCatalog, defaultModelsDir, type CatalogEntry } from '../pipeline/family/catalog';
export { loadFamilyModule } from '../pipeline/family/module';
export type { LoadedModel, ModelLoadOptions } from '../pipeline/family/model';
export type { NativeBinding, NativeTensor } from '../native/binding';
export { DiffusionDefaultsSchema, ModelSpecBaseSchema, type DiffusionDefaults, type ModelSpecBase } from '../pipeline/family/model-spec';
export {
  AdmittedSessionSchema,
  ROLLOUT_NODE,
  type AdmittedSession,
  type ResolvedSessionParams,
  type SessionEnv,
  type SessionExecutionEvent,
  type SessionImage,
  type SessionRollout,
  type SessionStageEnv,
  type SessionStageHandler,
  type StageProgress,
} from '../pipeline/family/session';
export { resolveDiffusionParams, type DiffusionGeometry } from '../pipeline/resolve';
export { wanFamily };

/** The families this package ships: Wan (`wan-t2v`). A fresh array each call. */
export function builtinFamilies(): ModelFamily[] {
  return [wanFamily];
}
