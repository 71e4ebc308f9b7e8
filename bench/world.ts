/**
 * Interactive world sessions on the embedded default model (64×64, the deployment's default session settings: chunks
 * of 1 latent frame, 2 denoise steps per chunk, 1 sink frame, a 6-frame window).
 *
 * Session run: a consumer that takes every frame at once (it grants one credit per frame received, 2 frames in
 * flight) while actions arrive at random moments (every 120–280 ms, a new key each time, each with an id), each
 * followed by `flush()` as an interactive client does on a direction change (`--no-flush` to compare).
 *  - chunk_ms: time between consecutive chunk events (the production period of one chunk = C frames);
 *  - fps: frames per second over the run;
 *  - action_to_frame_ms: from `session.actions.next(action)` to the first chunk event generated with that action
 *    (its id is echoed in the chunk's `rollout.action`) leaving the session.
 *
 * Baseline in the same run: the same rollout (block-causal DiT + streaming VAE decode, same chunks, steps and η) driven
 * by a plain `for` loop calling `ChunkRollout` directly — no session, operators or step scheduler. The ratio
 * `chunk_ms_p50 / plain_chunk_ms_p50` is the session machinery's overhead.
 *
 * Prints one JSON line. Run: npm run build && npm run bench:world [-- --chunks 300] [-- --no-flush]
 *   [-- --matmul-dtype bfloat16] (the DiT's matrix products on bf16 operands, session and baseline alike)
 */
import { isMatmulDtype, MATMUL_DTYPES, type MatmulDtype } from '../src/native/plan-builder';
import { Engine } from '../src/engine/engine';
import type { SessionAction } from '../src/request/session-request';
import { RequestState } from '../src/pipeline/request-state';
import { encodePrompt } from '../src/families/wan/text-encode';
import { ChunkRollout } from '../src/families/wan/chunk-rollout';
import { SlabPool } from '../src/cache/slab-pool';
import { Rng } from '../src/util/rng';
import { builtinFamilies } from '../src/families';
import { InProcessExecutor } from '../src/executor/in-process';
import type { WanT2VModel } from '../src/families/wan/model';
import { loadNative } from '../src/native/binding';

const KEYS: Array<SessionAction['key']> = ['up', 'right', 'down', 'left', 'none'];
/** Flush on each direction change, as an interactive client does (`--no-flush`: let actions wait for the next chunk). */
const FLUSH = !process.argv.includes('--no-flush');

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

const round = (x: number) => Math.round(x * 100) / 100;

function argChunks(): number {
  const i = process.argv.indexOf('--chunks');
  const n = i >= 0 ? Number(process.argv[i + 1]) : 300;
  if (!Number.isInteger(n) || n < 20) throw new Error(`--chunks must be an integer ≥ 20, got ${process.argv[i + 1]}`);
  return n;
}

async function sessionRun(engine: Engine, chunks: number): Promise<{ chunkMs: number[]; fps: number; actionMs: number[]; frames: number }> {
  const session = await engine.session({ prompt: 'a red ball in a dark blue room', seed: 5 });
  const sent = new Map<string, number>();
  const actionMs: number[] = [];
  const chunkAt: number[] = [];
  let frames = 0;
  const rng = new Rng(9);
  let timer: NodeJS.Timeout | undefined;
  let n = 0;
  const nextAction = () => {
    timer = setTimeout(
      () => {
        const id = `a${n}`;
        sent.set(id, performance.now());
        session.actions.next({ key: KEYS[n % KEYS.length], id });
        if (FLUSH) session.flush(); // every action here is a direction change
        n++;
        nextAction();
      },
      120 + rng.uniform() * 160,
    );
  };
  await new Promise<void>((resolve, reject) => {
    session.events$.subscribe({
      next: (ev) => {
        if (ev.type === 'error') reject(new Error(`${ev.code}: ${ev.message}`));
        if (ev.type !== 'chunk') return;
        const now = performance.now();
        chunkAt.push(now);
        frames += ev.artifact.kind === 'video' ? ev.artifact.numFrames : 0;
        const id = ev.rollout?.action.id;
        if (id !== undefined && sent.has(id)) {
          actionMs.push(now - sent.get(id)!);
          sent.delete(id);
        }
        if (chunkAt.length === 10) nextAction(); // actions start once the plans are warm
        if (chunkAt.length >= chunks) {
          clearTimeout(timer);
          session.close();
          return;
        }
        session.credits.next(ev.artifact.kind === 'video' ? ev.artifact.numFrames : 1);
      },
      complete: () => resolve(),
    });
    session.credits.next(2);
  });
  await session.whenReleased();
  const warm = chunkAt.slice(10);
  const chunkMs = warm.slice(1).map((t, i) => t - warm[i]);
  const fps = ((warm.length - 1) * (frames / chunkAt.length)) / ((warm[warm.length - 1] - warm[0]) / 1000);
  return { chunkMs, fps, actionMs, frames };
}

async function plainRun(engine: Engine, chunks: number): Promise<number[]> {
  const model = (await (engine.executor as InProcessExecutor).models.get(undefined)) as WanT2VModel;
  const state = new RequestState();
  const context = await encodePrompt({ model, native: loadNative() }, state, 'a red ball in a dark blue room');
  const cfg = {
    chunkFrames: 1,
    sinkFrames: 1,
    localWindowFrames: 6,
    steps: 2,
    flowShift: model.spec.defaults.flowShift,
    eta: model.spec.defaults.world?.eta ?? 0,
    width: 64,
    height: 64,
    seed: 5,
  };
  const pool = new SlabPool({ slabBytes: ChunkRollout.slabBytes(model.spec, 1, 64, 64), slabs: 1024 });
  const rollout = ChunkRollout.create(
    loadNative(),
    model,
    cfg,
    context,
    pool.openSession('plain', { sinkChunks: 1, windowChunks: 7, layers: model.spec.transformer.numLayers }),
  );
  const times: number[] = [];
  try {
    let last = performance.now();
    for (let k = 0; k < chunks; k++) {
      await rollout.commitPending();
      const attempt = rollout.startChunk({ keys: [k % 5] }); // key ids 0–4 in turn
      for (let i = 0; i < cfg.steps; i++) await rollout.denoiseStep(attempt);
      await rollout.decode(attempt);
      const now = performance.now();
      if (k >= 10) times.push(now - last);
      last = now;
    }
  } finally {
    await rollout.settled();
    rollout.dispose();
    state.release();
  }
  return times;
}

function argMatmulDtype(): MatmulDtype {
  const i = process.argv.indexOf('--matmul-dtype');
  const v = i >= 0 ? process.argv[i + 1] : 'float32';
  if (!isMatmulDtype(v)) throw new Error(`--matmul-dtype must be one of ${MATMUL_DTYPES.join(', ')}; got ${JSON.stringify(v)}`);
  return v;
}

async function main(): Promise<void> {
  const chunks = argChunks();
  const matmulDtype = argMatmulDtype();
  const engine = await Engine.create({ families: builtinFamilies(), matmulDtype });
  try {
    const plain = await plainRun(engine, Math.min(chunks, 150));
    const s = await sessionRun(engine, chunks);
    const p50 = quantile(s.chunkMs, 0.5);
    const plainP50 = quantile(plain, 0.5);
    console.log(
      JSON.stringify({
        chunk_ms_p50: round(p50),
        chunk_ms_p95: round(quantile(s.chunkMs, 0.95)),
        fps: round(s.fps),
        action_to_frame_ms_p50: round(quantile(s.actionMs, 0.5)),
        action_to_frame_ms_p95: round(quantile(s.actionMs, 0.95)),
        actions: s.actionMs.length,
        frames: s.frames,
        flush: FLUSH,
        matmul_dtype: matmulDtype,
        baseline: 'plain for loop over ChunkRollout (no session, operators or scheduler)',
        plain_chunk_ms_p50: round(plainP50),
        session_vs_plain: round(p50 / plainP50),
      }),
    );
  } finally {
    await engine.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
