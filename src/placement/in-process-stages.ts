import type { NativeBinding } from '../native/binding';
import { buildPipeline } from '../pipeline/spec';
import { wanT2VPipelineSpec, type WanT2VPolicies } from '../families/wan/pipeline';
import type { RequestLimits } from '../request/limits';
import type { Task } from '../request/omni-request';
import { createInProcessConnector } from './connectors/in-process';
import { specOnlyRegistry } from './spec-registry';
import { StageFront } from './stage-front';
import { StageHost, type StageMemory } from './stage-host';
import type { StageRole } from '../pipeline/stage-payload';
import type { StageProgress } from './stage-progress';
import type { SessionConfig } from '../pipeline/session-config';
import type { DisaggregatedTopology } from './topology';
import type { MatmulDtype } from '../native/plan-builder';

export interface StagePipelineOptions {
  native: NativeBinding;
  modelsDir: string;
  defaultModel: string;
  /** Matrix-product dtype of the Denoise stage's DiT (deploy config `matmulDtype`). Default float32. */
  matmulDtype?: MatmulDtype;
  policies: WanT2VPolicies;
  limits: RequestLimits;
  tasks: readonly Task[];
  topology: DisaggregatedTopology;
  /** World-session settings (deploy config `sessions`). */
  sessions?: SessionConfig;
}

/** A disaggregated pipeline: `front.generate` runs requests through the stages; `close` stops everything. */
export interface StagePipeline {
  readonly front: StageFront;
  /** The weight bytes each stage holds. */
  memory(): Promise<Record<StageRole, StageMemory>>;
  close(): Promise<void>;
}

/**
 * Encode → Denoise → Decode in this process, linked by in-process connectors (no copy, no framing): each stage
 * still constructs only its own components and runs its own StepScheduler, so tests exercise the stage split,
 * the payloads and the flow control without forking.
 */
export function createInProcessStages(o: StagePipelineOptions): StagePipeline {
  const s = o.topology.stages;
  const toEncode = createInProcessConnector({ credits: s.encode.credits, name: 'front → encode' });
  const toDenoise = createInProcessConnector({ credits: s.denoise.credits, name: 'encode → denoise' });
  const toDecode = createInProcessConnector({ credits: s.decode.credits, name: 'denoise → decode' });
  const results = createInProcessConnector({ credits: 4, name: 'decode → front' });
  const common = { native: o.native, modelsDir: o.modelsDir, defaultModel: o.defaultModel, policies: o.policies, tasks: o.tasks };
  // Progress goes straight to the front (the front is created below, before any payload flows).
  const progress = { onProgress: (ev: StageProgress) => front.progress(ev) };
  const hosts = {
    encode: new StageHost({ ...common, ...progress, role: 'encode', input: toEncode.receiver, output: toDenoise.sender, maxInFlight: s.encode.maxInFlight }),
    denoise: new StageHost({ ...common, ...progress, matmulDtype: o.matmulDtype, role: 'denoise', input: toDenoise.receiver, output: toDecode.sender, maxInFlight: s.denoise.maxInFlight }),
    decode: new StageHost({ ...common, ...progress, role: 'decode', input: toDecode.receiver, output: results.sender, maxInFlight: s.decode.maxInFlight }),
  };
  for (const h of Object.values(hosts)) void h.worker.start();
  const front = new StageFront({
    models: specOnlyRegistry(o.native, o.modelsDir, o.defaultModel),
    pipeline: buildPipeline(wanT2VPipelineSpec(o.policies), { tasks: o.tasks }),
    policies: o.policies,
    limits: o.limits,
    toEncode: toEncode.sender,
    results: results.receiver,
    sessions: o.sessions,
    onCancel: (id) => {
      for (const h of Object.values(hosts)) h.worker.cancel(id);
    },
  });
  return {
    front,
    memory: async () => ({ encode: await hosts.encode.memory(), denoise: await hosts.denoise.memory(), decode: await hosts.decode.memory() }),
    close: async () => {
      await front.close();
      for (const h of Object.values(hosts)) await h.close();
    },
  };
}
