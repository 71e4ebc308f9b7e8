import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../../src/engine/engine';
import { builtinFamilies } from '../../src/families';
import { loadNative } from '../../src/native/binding';
import type { StageExecutor } from '../../src/placement/stage-executor';
import type { StageProcesses } from '../../src/placement/stage-processes';
import { TopologySchema, type TopologyInput } from '../../src/placement/topology';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import type { Logger } from '../../src/util/logger';
import { createServer } from '../../transports/server';
import { makeModelsDir } from '../helpers/tiny-model';

// Supervision of stage processes (issue "Production serving", findings 1 and 2): a crash loop takes the pipeline down
// with a clear error instead of leaving work waiting forever, and a frozen stage process is detected and replaced.
const entry = process.env.OMNIRX_STAGE_ENTRY ?? path.resolve(__dirname, '../../dist/src/placement/stage-main.js');
const native = loadNative();
let modelsDir: string;

beforeAll(async () => {
  modelsDir = await makeModelsDir();
});

/** A logger that keeps every entry. */
function recordingLogger(): Logger & { entries: Array<{ level: string; fields: object; message: string }> } {
  const entries: Array<{ level: string; fields: object; message: string }> = [];
  const at = (level: string) => (fields: object, message: string) => void entries.push({ level, fields, message });
  return { entries, info: at('info'), warn: at('warn'), error: at('error') };
}

const start = (supervision: NonNullable<Extract<TopologyInput, { kind: 'disaggregated' }>['supervision']>, logger: Logger) =>
  Engine.create({
    families: builtinFamilies(),
    native,
    modelsDir,
    defaultModel: 'tiny',
    tasks: ['T2V', 'T2I'],
    topology: { kind: 'disaggregated', connector: 'shm', supervision },
    stageEntry: entry,
    logger,
  });
const processesOf = (e: Engine) => (e.executor as StageExecutor).hosting as StageProcesses;
const request = (seed: number): OmniRequestInput => ({
  model: 'tiny',
  task: 'T2V',
  inputs: { prompt: 'a red ball' },
  diffusion: { seed, width: 64, height: 64, numFrames: 9, numInferenceSteps: 2, guidanceScale: 1 },
});
const run = (e: Engine, r: OmniRequestInput) => lastValueFrom(e.generate(r).pipe(toArray()));
const last = (evs: OmniEvent[]) => evs[evs.length - 1];

/** Kills the `role` stage process with SIGKILL and waits until the pipeline has handled its exit. */
async function kill(e: Engine, role: 'encode' | 'denoise' | 'decode'): Promise<void> {
  const p = processesOf(e).process(role);
  const exited = new Promise((resolve) => p.once('exit', resolve));
  p.kill('SIGKILL');
  await exited;
  await processesOf(e).whenUp();
}

describe('stage supervision', () => {
  it('a crash loop (more restarts than the budget within the window) takes the pipeline down: work is refused at once, /ready and /health answer 503, it is logged', async () => {
    const logger = recordingLogger();
    const engine = await start({ maxRestarts: 2, windowMs: 60_000 }, logger);
    let app: FastifyInstance | undefined;
    try {
      await kill(engine, 'denoise');
      await kill(engine, 'decode');
      expect(engine.health()).toEqual({ status: 'ok' });
      expect(last(await run(engine, request(1))).type).toBe('final');
      await kill(engine, 'denoise');
      expect(engine.health()).toEqual({ status: 'down', reason: expect.stringContaining('more than 2 stage restarts within 60000 ms') });
      expect(processesOf(engine).restarts).toBe(2);
      // A request gets a clear error at once instead of waiting for a stage that never comes back.
      const t0 = performance.now();
      const evs = await run(engine, request(2));
      expect(performance.now() - t0).toBeLessThan(5000);
      expect(last(evs)).toMatchObject({ type: 'error', code: 'OMNIRX_ERR_STAGE_FAILED', message: expect.stringContaining('the pipeline is down') });
      expect(logger.entries).toContainEqual(expect.objectContaining({ level: 'error', message: expect.stringContaining('pipeline down') }));
      expect(logger.entries.filter((x) => x.level === 'warn' && x.message.includes('restarting'))).toHaveLength(2);

      app = await createServer({ engine });
      await app.omnirx.engineReady;
      const ready = await app.inject({ method: 'GET', url: '/ready' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json().error).toMatchObject({ code: 'OMNIRX_ERR_STAGE_FAILED', message: expect.stringContaining('crash loop') });
      expect((await app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(503);
      const video = await app.inject({ method: 'POST', url: '/v1/videos', payload: { model: 'tiny', prompt: 'a ball', num_frames: 5, size: '64x64' } });
      const image = await app.inject({ method: 'POST', url: '/v1/images/generations', payload: { model: 'tiny', prompt: 'a ball', size: '64x64' } });
      for (const r of [video, image]) {
        expect(r.statusCode).toBe(503);
        expect(r.json().error.code).toBe('OMNIRX_ERR_STAGE_FAILED');
      }
    } finally {
      if (app !== undefined) await app.close();
      else await engine.close();
    }
  });

  it('restarts spread wider than the window do not take the pipeline down', async () => {
    const engine = await start({ maxRestarts: 1, windowMs: 1000 }, recordingLogger());
    try {
      await kill(engine, 'decode');
      await new Promise((r) => setTimeout(r, 1100));
      await kill(engine, 'decode');
      expect(engine.health()).toEqual({ status: 'ok' });
      expect(processesOf(engine).restarts).toBe(2);
      expect(last(await run(engine, request(3))).type).toBe('final');
    } finally {
      await engine.close();
    }
  });

  it('a frozen (SIGSTOP) stage process is detected by its missed liveness pings, killed and restarted; its request fails, later ones succeed', async () => {
    const logger = recordingLogger();
    const engine = await start({ livenessIntervalMs: 200, livenessTimeoutMs: 1000 }, logger);
    try {
      const frozen = processesOf(engine).process('denoise');
      const held = new Promise<void>((resolve) => frozen.on('message', (m: { type: string }) => m.type === 'held' && resolve()));
      const running = run(engine, request(4));
      await held;
      frozen.kill('SIGSTOP');
      const t0 = performance.now();
      const evs = await running;
      // Detected after the timeout, well before any request deadline of a client.
      expect(performance.now() - t0).toBeLessThan(8000);
      expect(last(evs)).toMatchObject({
        type: 'error',
        code: 'OMNIRX_ERR_STAGE_FAILED',
        message: expect.stringContaining('denoise stage process exited (SIGKILL)'),
      });
      expect(logger.entries).toContainEqual(
        expect.objectContaining({
          level: 'error',
          message: 'stage process is not responding; killing it',
          fields: expect.objectContaining({ stage: 'denoise', pid: frozen.pid }),
        }),
      );
      await processesOf(engine).whenUp();
      expect(processesOf(engine).process('denoise').pid).not.toBe(frozen.pid);
      expect(engine.health()).toEqual({ status: 'ok' });
      expect(last(await run(engine, request(5))).type).toBe('final');
    } finally {
      await engine.close();
    }
  });

  it('the deploy config refuses a liveness timeout shorter than two intervals, naming the field', () => {
    const r = TopologySchema.safeParse({ kind: 'disaggregated', supervision: { livenessIntervalMs: 1000, livenessTimeoutMs: 1500 } });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]).toMatchObject({ path: ['supervision', 'livenessTimeoutMs'] });
  });
});
