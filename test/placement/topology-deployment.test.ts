import * as path from 'node:path';
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { builtinFamilies } from '../../src/families';
import { parseDeployConfig } from '../../src/placement/deploy-config';
import { StageExecutor } from '../../src/placement/stage-executor';
import type { OmniEvent } from '../../src/request/omni-event';
import { makeModelsDir } from '../helpers/tiny-model';

// Stage processes run compiled JS: dist/ from `npm test`'s pretest, or OMNIRX_STAGE_ENTRY.
const stageEntry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');

const frames = (ev: OmniEvent[]): Buffer => {
  const last = ev[ev.length - 1];
  if (last.type !== 'final' || last.output.artifacts.video?.kind !== 'video') throw new Error(JSON.stringify(last));
  return Buffer.from(last.output.artifacts.video.frames);
};

describe('Engine.fromDeployConfig', () => {
  it('runs the topology the deploy config names, with identical outputs', async () => {
    const modelsDir = await makeModelsDir();
    const base = { schemaVersion: 1, modelsDir, defaultModel: 'tiny', tasks: ['T2V'] };
    const req = { task: 'T2V' as const, inputs: { prompt: 'a red ball' }, diffusion: { seed: 4 } };
    const out: Buffer[] = [];
    for (const topology of [
      undefined,
      { kind: 'monolithic' },
      { kind: 'disaggregated', connector: 'in-process' },
      { kind: 'disaggregated', connector: 'tcp' },
    ]) {
      const d = await Engine.fromDeployConfig(parseDeployConfig({ ...base, ...(topology ? { topology } : {}) }), { families: builtinFamilies(), stageEntry });
      try {
        expect(d.executor instanceof StageExecutor ? 'disaggregated' : 'monolithic').toBe(topology?.kind ?? 'monolithic');
        out.push(frames(await lastValueFrom(d.generate(req).pipe(toArray()))));
      } finally {
        await d.close();
      }
    }
    for (const f of out.slice(1)) expect(f.equals(out[0])).toBe(true);
  });

  it('matmulDtype reaches the DiT on every topology: bf16 frames agree across them and differ from float32', async () => {
    const modelsDir = await makeModelsDir();
    const base = { schemaVersion: 1, modelsDir, defaultModel: 'tiny', tasks: ['T2V'] };
    const req = { task: 'T2V' as const, inputs: { prompt: 'a red ball' }, diffusion: { seed: 4 } };
    const run = async (config: object): Promise<Buffer> => {
      const d = await Engine.fromDeployConfig(parseDeployConfig({ ...base, ...config }), { families: builtinFamilies(), stageEntry });
      try {
        return frames(await lastValueFrom(d.generate(req).pipe(toArray())));
      } finally {
        await d.close();
      }
    };
    const f32 = await run({});
    const bf = await run({ matmulDtype: 'bfloat16' });
    expect(bf.equals(f32)).toBe(false);
    for (const connector of ['in-process', 'tcp']) {
      expect((await run({ matmulDtype: 'bfloat16', topology: { kind: 'disaggregated', connector } })).equals(bf)).toBe(true);
    }
  });

  it('refuses custom policies with stage processes', async () => {
    const config = parseDeployConfig({ schemaVersion: 1, topology: { kind: 'disaggregated', connector: 'shm' } });
    await expect(Engine.fromDeployConfig(config, { families: builtinFamilies(), policies: {} })).rejects.toMatchObject({
      code: 'OMNIRX_ERR_CONFIG',
      param: 'topology.connector',
    });
  });
});
