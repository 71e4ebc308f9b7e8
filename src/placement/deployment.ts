import type { Observable } from 'rxjs';
import { Engine, type EngineOptions } from '../engine/engine';
import { OmniError } from '../errors';
import { defaultModelsDir } from '../models/registry';
import { loadNative } from '../native/binding';
import { defaultWanT2VPolicies } from '../families/wan/pipeline';
import type { WorldSessionHandle } from '../engine/session';
import type { ModelSpec } from '../families/wan/model-spec';
import type { OmniEvent } from '../request/omni-event';
import type { SessionRequestInput } from '../request/session-request';
import type { OmniRequestInput, Task } from '../request/omni-request';
import { DEFAULT_LIMITS } from '../request/limits';
import type { DeployConfig } from './deploy-config';
import { createInProcessStages } from './in-process-stages';
import { StageDeployment } from './stage-deployment';
import { StageProcesses } from './stage-processes';

/**
 * A running deployment of either topology: what the transports serve (it satisfies the HTTP server's
 * `ServedEngine`). Model lookups give the spec; a disaggregated deployment reads it from `model.json` alone.
 */
export interface Deployment {
  readonly topology: 'monolithic' | 'disaggregated';
  /** Runs one request (cold, like `Engine.generate`). */
  generate(input: OmniRequestInput): Observable<OmniEvent>;
  /** Ids of the models in the models folder. */
  listModels(): string[];
  /** Requests waiting (for admission, or for the Encode stage) and running. */
  stats(): { queued: number; running: number };
  /** `get(id)` resolves model `id` (the default when undefined) or rejects with OMNIRX_ERR_UNKNOWN_MODEL. */
  readonly models: { get(id: string | undefined): Promise<{ spec: ModelSpec }>; readonly defaultModel: string; readonly modelsDir: string };
  /** Opens a world session (see `Engine.session` / `StageFront.session` for what it throws). */
  session(input: SessionRequestInput): Promise<WorldSessionHandle>;
  close(): Promise<void>;
}

/**
 * Starts what a deploy config describes: the monolithic `Engine` when `topology` is absent or monolithic, else the
 * Encode → Denoise → Decode stages (in this process for the `in-process` connector, stage processes for `shm`/`tcp`)
 * behind a `StageDeployment`. This is the one place that decides the topology; `createServer({ deploy })` and
 * `omnirx serve --config` go through it.
 * `extra` adds engine options the config does not carry; `stageEntry` overrides the compiled stage entry point.
 * @throws OmniError OMNIRX_ERR_CONFIG for policies other than the defaults with stage processes (a process builds
 *   its policies from the config alone); OMNIRX_ERR_STAGE_FAILED when a stage process fails to start.
 */
export async function openDeployment(config: DeployConfig, extra: EngineOptions & { stageEntry?: string } = {}): Promise<Deployment> {
  const t = config.topology;
  if (t === undefined || t.kind === 'monolithic') {
    const engine = await Engine.fromDeployConfig(config, extra);
    return {
      topology: 'monolithic',
      generate: (r) => engine.generate(r),
      listModels: () => engine.listModels(),
      stats: () => engine.stats(),
      models: engine.models,
      session: (input) => engine.session(input),
      close: () => engine.close(),
    };
  }
  if (t.connector !== 'in-process' && extra.policies !== undefined) {
    throw new OmniError('OMNIRX_ERR_CONFIG', 'stage processes run the default policies; custom policies need the monolithic or in-process topology', { param: 'topology.connector' });
  }
  const options = {
    native: extra.native ?? loadNative(),
    modelsDir: config.modelsDir ?? extra.modelsDir ?? defaultModelsDir(),
    defaultModel: config.defaultModel ?? extra.defaultModel ?? 'omnirx-default',
    matmulDtype: config.matmulDtype ?? extra.matmulDtype,
    policies: { ...defaultWanT2VPolicies(), ...extra.policies },
    limits: extra.limits ?? DEFAULT_LIMITS,
    tasks: config.tasks.filter((x): x is Task => x !== 'WORLD'),
    topology: t,
    sessions: config.sessions,
  };
  const stages = t.connector === 'in-process' ? createInProcessStages(options) : await StageProcesses.start({ ...options, entry: extra.stageEntry });
  return new StageDeployment(stages, config.tasks.includes('WORLD'));
}
