import { parseDeployConfig } from '../../src/placement/deploy-config';
import { TopologySchema } from '../../src/placement/topology';

describe('deploy config topology', () => {
  it('is absent (monolithic) by default and leaves the other fields unchanged', () => {
    const c = parseDeployConfig({ schemaVersion: 1 });
    expect(c.topology).toBeUndefined();
    expect(c.tasks).toEqual(['T2V', 'T2I', 'WORLD']);
  });

  it('accepts monolithic, and fills the defaults of a disaggregated topology', () => {
    expect(parseDeployConfig({ schemaVersion: 1, topology: { kind: 'monolithic' } }).topology).toEqual({ kind: 'monolithic' });
    expect(parseDeployConfig({ schemaVersion: 1, topology: { kind: 'disaggregated' } }).topology).toEqual({
      kind: 'disaggregated',
      connector: 'shm',
      stages: { encode: { credits: 2 }, denoise: { credits: 2 }, decode: { credits: 2 } },
      supervision: { maxRestarts: 5, windowMs: 60_000, livenessIntervalMs: 1000, livenessTimeoutMs: 10_000 },
    });
    const t = TopologySchema.parse({ kind: 'disaggregated', connector: 'tcp', stages: { denoise: { maxInFlight: 8, credits: 3 } } });
    expect(t).toEqual({
      kind: 'disaggregated',
      connector: 'tcp',
      stages: { encode: { credits: 2 }, denoise: { maxInFlight: 8, credits: 3 }, decode: { credits: 2 } },
      supervision: { maxRestarts: 5, windowMs: 60_000, livenessIntervalMs: 1000, livenessTimeoutMs: 10_000 },
    });
  });

  it.each([
    [{ kind: 'pipelined' }, 'topology.kind'],
    [{ kind: 'disaggregated', connector: 'rdma' }, 'topology.connector'],
    [{ kind: 'disaggregated', stages: { encode: { credits: 0 } } }, 'topology.stages.encode.credits'],
    [{ kind: 'disaggregated', stages: { denoise: { maxInFlight: 65 } } }, 'topology.stages.denoise.maxInFlight'],
    [{ kind: 'disaggregated', supervision: { maxRestarts: -1 } }, 'topology.supervision.maxRestarts'],
    [{ kind: 'disaggregated', supervision: { windowMs: 10 } }, 'topology.supervision.windowMs'],
    [{ kind: 'disaggregated', supervision: { restart: 5 } }, 'topology.supervision'],
    [{ kind: 'disaggregated', stages: { denoise: { maxInFlight: 1.5 } } }, 'topology.stages.denoise.maxInFlight'],
    [{ kind: 'disaggregated', stages: { vocoder: {} } }, 'topology.stages'],
    [{ kind: 'monolithic', connector: 'shm' }, 'topology'],
    ['disaggregated', 'topology'],
    [null, 'topology'],
  ])('rejects %j naming %s', (topology, param) => {
    let err: unknown;
    try {
      parseDeployConfig({ schemaVersion: 1, topology });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'OMNIRX_ERR_CONFIG', param });
  });

  it('refuses a __proto__ key inside stages without polluting prototypes', () => {
    expect(() => parseDeployConfig(JSON.parse('{"schemaVersion":1,"topology":{"kind":"disaggregated","stages":{"__proto__":{"credits":1}}}}'))).toThrow(
      expect.objectContaining({ code: 'OMNIRX_ERR_CONFIG' }),
    );
    expect(({} as Record<string, unknown>).credits).toBeUndefined();
  });
});
