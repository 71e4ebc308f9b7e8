import { createInProcessConnector } from './connectors/in-process';
import type { StageExecutorOptions, StageHosting, StageSink } from './stage-hosting';
import { StageHost } from './stage-host';

/**
 * Encode → Denoise → Decode in this process, linked by in-process connectors (no copy, no framing): each stage still
 * constructs only its own components and runs its own StepScheduler and cache pools, so tests exercise the stage
 * split, the payloads and the flow control without forking. Custom policies run here as the caller gave them.
 */
export function createInProcessStages(o: StageExecutorOptions, sink: StageSink): StageHosting {
  const s = o.topology.stages;
  const toEncode = createInProcessConnector({ credits: s.encode.credits, name: 'front → encode' });
  const toDenoise = createInProcessConnector({ credits: s.denoise.credits, name: 'encode → denoise' });
  const toDecode = createInProcessConnector({ credits: s.decode.credits, name: 'denoise → decode' });
  const results = createInProcessConnector({ credits: 4, name: 'decode → front' });
  const common = {
    native: o.native,
    families: o.catalog.families,
    modelsDir: o.catalog.modelsDir,
    defaultModel: o.catalog.defaultModel,
    policies: o.policies,
    tasks: o.tasks,
    world: o.world,
    budgets: o.budgets,
    onProgress: (ev: Parameters<StageSink['progress']>[0]) => sink.progress(ev),
  };
  const hosts = {
    encode: new StageHost({ ...common, role: 'encode', input: toEncode.receiver, output: toDenoise.sender, maxInFlight: s.encode.maxInFlight }),
    denoise: new StageHost({
      ...common,
      load: o.load,
      role: 'denoise',
      input: toDenoise.receiver,
      output: toDecode.sender,
      maxInFlight: s.denoise.maxInFlight,
    }),
    decode: new StageHost({ ...common, role: 'decode', input: toDecode.receiver, output: results.sender, maxInFlight: s.decode.maxInFlight }),
  };
  for (const h of Object.values(hosts)) void h.worker.start();
  return {
    toEncode: toEncode.sender,
    results: results.receiver,
    reportsDelivery: false,
    // The stages share this process: none can die or freeze apart from it.
    health: () => ({ status: 'ok' }),
    cancel: (id) => {
      for (const h of Object.values(hosts)) h.worker.cancel(id);
    },
    memory: async () => ({ encode: await hosts.encode.memory(), denoise: await hosts.denoise.memory(), decode: await hosts.decode.memory() }),
    close: async () => {
      await toEncode.sender.close();
      await results.receiver.close();
      for (const h of Object.values(hosts)) await h.close();
    },
  };
}
