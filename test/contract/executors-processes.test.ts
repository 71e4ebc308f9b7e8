/**
 * The executor contract on stage processes (docs/design.md §4): the engine over Encode/Denoise/Decode processes linked
 * by shared memory and by TCP gives the same events and byte-identical artifacts as over the in-process executor, for
 * every contract request and session (scenarios.ts). Stage processes run compiled JS: dist/ from the test command's
 * build, or OMNIRX_STAGE_ENTRY.
 */
import * as path from 'node:path';
import { Engine } from '../../src/engine/engine';
import { builtinFamilies } from '../../src/families';
import { TopologySchema } from '../../src/placement/topology';
import { CONTRACT_SESSIONS, contractModels, runRequests, runSessions } from './scenarios';

const stageEntry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');
let modelsDir: string;
let reference: { requests: Record<string, unknown[]>; sessions: Record<string, unknown[]> };

async function run(topology?: Parameters<typeof TopologySchema.parse>[0]) {
  const engine = await Engine.create({
    families: builtinFamilies(),
    modelsDir,
    defaultModel: 'tiny-world',
    sessions: CONTRACT_SESSIONS,
    stageEntry,
    ...(topology ? { topology: TopologySchema.parse(topology) } : {}),
  });
  try {
    return { requests: await runRequests(engine), sessions: await runSessions(engine) };
  } finally {
    await engine.close();
  }
}

beforeAll(async () => {
  modelsDir = await contractModels();
  reference = await run();
});

describe('executor contract: stage processes', () => {
  it.each(['shm', 'tcp'] as const)('over %s: the same events per request and session, and byte-identical artifacts', async (connector) => {
    const staged = await run({ kind: 'disaggregated', connector });
    expect(staged.requests).toEqual(reference.requests);
    expect(staged.sessions).toEqual(reference.sessions);
  });
});
