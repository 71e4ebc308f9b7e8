/**
 * The executor contract, in process: the engine over the in-process executor and over Encode/Denoise/Decode stages
 * linked in this process give the same events and byte-identical artifacts for every contract request and session
 * (the stage processes' run of the same contract: executors-processes.test.ts).
 */
import type { TopologyInput } from '../../src/placement/topology';
import { contractModels, runContract, type ContractRecord } from './scenarios';

let modelsDir: string;
let reference: ContractRecord;

const run = (topology?: TopologyInput) => runContract(modelsDir, topology);

beforeAll(async () => {
  modelsDir = await contractModels();
  reference = await run();
});

describe('executor contract: in-process executor and in-process stages', () => {
  it('the reference run covers outputs, failures at the front and in the executor, and sessions', () => {
    const last = (id: string) => reference.requests[id].at(-1) as { type: string; code?: string; node?: string };
    expect(last('t2v').type).toBe('final');
    expect(last('t2i-unipc').type).toBe('final');
    expect(last('nan')).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_NON_FINITE', node: 'denoise' });
    expect(last('unknown-model')).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNKNOWN_MODEL' });
    expect(last('off-stride')).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_UNSUPPORTED_VALUE' });
    expect(last('bad-node-param')).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_INVALID_REQUEST' });
    expect(reference.sessions.prompt.filter((e) => (e as { type: string }).type === 'chunk')).toHaveLength(5);
  });

  it('in-process stages: the same events per request and session, and byte-identical artifacts', async () => {
    const staged = await run({ kind: 'disaggregated', connector: 'in-process' });
    expect(staged.requests).toEqual(reference.requests);
    expect(staged.sessions).toEqual(reference.sessions);
  });
});
