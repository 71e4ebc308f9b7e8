/**
 * The executor contract on stage processes (docs/design.md §4): the engine over Encode/Denoise/Decode processes linked
 * by shared memory and by TCP gives the same events and byte-identical artifacts as over the in-process executor, for
 * every contract request and session (scenarios.ts). Stage processes run compiled JS: dist/ from the test command's
 * build, or OMNIRX_STAGE_ENTRY.
 */
import * as path from 'node:path';
import type { TopologyInput } from '../../src/placement/topology';
import { contractModels, runContract, type ContractRecord } from './scenarios';

const stageEntry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');
let modelsDir: string;
let reference: ContractRecord;

const run = (topology?: TopologyInput) => runContract(modelsDir, topology, stageEntry);

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
