import type { Observable } from 'rxjs';
import { Engine, type EngineOptions } from '../engine/engine';
import { OmniError } from '../errors';
import { defaultModelsDir } from '../models/registry';
import { loadNative } from '../native/binding';
import { defaultWanT2VPolicies } from '../pipeline/wan-t2v/pipeline';
import type { OmniEvent } from '../request/omni-event';
import type { OmniRequestInput, Task } from '../request/omni-request';
import { DEFAULT_LIMITS } from '../request/limits';
import type { DeployConfig } from './deploy-config';
import { createInProcessStages } from './in-process-stages';
import { StageProcesses } from './stage-processes';

/** A running deployment of either topology: requests in, event streams out. */
export interface Deployment {
  readonly topology: 'monolithic' | 'disaggregated';
  /** Runs one request (cold, like `Engine.generate`). */
  generate(input: OmniRequestInput): Observable<OmniEvent>;
  close(): Promise<void>;
}

/**
 * Starts what a deploy config describes: the monolithic `Engine` when `topology` is absent or monolithic, else the
 * Encode → Denoise → Decode stages (in this process for the `in-process` connector, stage processes for `shm`/`tcp`).
 * `extra` adds engine options the config does not carry; `stageEntry` overrides the compiled stage entry point.
 * @throws OmniError OMNIRX_ERR_CONFIG for policies other than the defaults with stage processes (a process builds
 *   its policies from the config alone); OMNIRX_ERR_STAGE_FAILED when a stage process fails to start.
 */
export async function openDeployment(config: DeployConfig, extra: EngineOptions & { stageEntry?: string } = {}): Promise<Deployment> {
  const t = config.topology;
  if (t === undefined || t.kind === 'monolithic') {
    const engine = await Engine.fromDeployConfig(config, extra);
    return { topology: 'monolithic', generate: (r) => engine.generate(r), close: () => engine.close() };
  }
  if (t.connector !== 'in-process' && extra.policies !== undefined) {
    throw new OmniError('OMNIRX_ERR_CONFIG', 'stage processes run the default policies; custom policies need the monolithic or in-process topology', { param: 'topology.connector' });
  }
  const options = {
    native: extra.native ?? loadNative(),
    modelsDir: config.modelsDir ?? extra.modelsDir ?? defaultModelsDir(),
    defaultModel: config.defaultModel ?? extra.defaultModel ?? 'omnirx-default',
    policies: { ...defaultWanT2VPolicies(), ...extra.policies },
    limits: extra.limits ?? DEFAULT_LIMITS,
    tasks: config.tasks.filter((x): x is Task => x !== 'WORLD'),
    topology: t,
    sessions: config.sessions,
  };
  const stages = t.connector === 'in-process' ? createInProcessStages(options) : await StageProcesses.start({ ...options, entry: extra.stageEntry });
  return { topology: 'disaggregated', generate: (r) => stages.front.generate(r), close: () => stages.close() };
}
