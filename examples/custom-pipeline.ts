/**
 * A custom pipeline composed from stages and operators: a one-shot `Stage` makes a noisy 1-D signal from the request's
 * seed, a `LoopStage` smooths it one pass per step (the runtime, not the stage, owns the loop: each pass is one grant
 * of a `StepScheduler`), and a last `Stage` measures what is left of the noise. `buildPipeline` checks the graph
 * (typed edges, a topological order), `runGraph` runs it, and the events flow through RxJS operators — a custom one,
 * `progressEvery`, among them.
 *
 *   npm run build && node dist/examples/custom-pipeline.js
 */
import { lastValueFrom, map, tap, toArray } from 'rxjs';
import { StepScheduler } from 'omnirx';
import { buildPipeline, RequestState, runGraph, type LoopStage, type PipelineSpec, type Stage, type StepResult } from 'omnirx/pipeline';
import { progressEvery } from './progress-every';

const LENGTH = 256;
const PASSES = 12;

/** What every node of this pipeline sees. */
interface SignalContext {
  requestId: string;
  seed: number;
}

/** One slot per edge of the graph. */
class SignalState extends RequestState {
  clean?: Float32Array;
  noisy?: Float32Array;
  smoothed?: Float32Array;
}

/** A deterministic PRNG (mulberry32) so the same seed gives the same signal. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const addNoise: Stage<SignalContext, SignalState> = {
  name: 'add_noise',
  async forward(ctx, state) {
    const next = random(ctx.seed);
    state.clean = Float32Array.from({ length: LENGTH }, (_, i) => Math.sin((2 * Math.PI * i) / 64));
    state.noisy = state.clean.map((x) => x + (next() - 0.5));
  },
};

/** Loop state: the signal being smoothed and where the loop is. */
interface SmoothLoop {
  x: Float32Array;
  index: number;
}

const smooth: LoopStage<SignalContext, SignalState, SmoothLoop> = {
  name: 'smooth',
  cost: () => ({ model: 'example', phase: 'smooth', shape: String(LENGTH), guidance: 'single' }),
  remaining: (loop) => PASSES - loop.index,
  init: (_ctx, state) => ({ x: Float32Array.from(state.noisy!), index: 0 }),
  // ONE pass: a 3-tap moving average (edges kept).
  async step(_ctx, loop): Promise<StepResult> {
    const y = Float32Array.from(loop.x);
    for (let i = 1; i < LENGTH - 1; i++) y[i] = (loop.x[i - 1] + loop.x[i] + loop.x[i + 1]) / 3;
    loop.x = y;
    const index = loop.index++;
    return { done: loop.index === PASSES, progress: { index, total: PASSES, timestep: 0, sigma: 0 } };
  },
  finalize: (_ctx, loop, state) => {
    state.smoothed = loop.x;
  },
  release: () => undefined,
};

/** Root-mean-square distance of `a` from `b`. */
const rms = (a: Float32Array, b: Float32Array) => Math.sqrt(a.reduce((s, x, i) => s + (x - b[i]) ** 2, 0) / a.length);

const measure: Stage<SignalContext, SignalState> = {
  name: 'measure',
  async forward(_ctx, state) {
    const before = rms(state.noisy!, state.clean!);
    const after = rms(state.smoothed!, state.clean!);
    state.artifacts.error = { kind: 'latents', shape: [2], data: Float32Array.of(before, after) };
  },
};

const spec: PipelineSpec<SignalContext, SignalState> = {
  family: 'example-signal',
  components: {},
  requestInputs: { seed: 'seed' },
  nodes: [
    { name: 'add_noise', run: { kind: 'stage', stage: addNoise }, inputs: { seed: 'seed' }, outputs: { noisy: 'signal' }, components: [], tasks: ['T2I'] },
    {
      name: 'smooth',
      run: { kind: 'loop', stage: smooth as LoopStage<SignalContext, SignalState, unknown> },
      inputs: { noisy: 'signal' },
      outputs: { smoothed: 'signal' },
      components: [],
      tasks: ['T2I'],
    },
    { name: 'measure', run: { kind: 'stage', stage: measure }, inputs: { smoothed: 'signal' }, outputs: { error: 'number' }, components: [], tasks: ['T2I'] },
  ],
};

async function main(): Promise<void> {
  const pipeline = buildPipeline(spec, { tasks: ['T2I'] });
  const steps = new StepScheduler();
  const ctx: SignalContext = { requestId: 'signal-1', seed: 42 };
  const state = new SignalState();
  const events = await lastValueFrom(
    runGraph(pipeline.order, Object.keys(spec.requestInputs), ctx, state, { scheduler: steps, requestId: ctx.requestId, priority: 0 }, () => undefined).pipe(
      progressEvery(4),
      map((e) => (e.type === 'step' ? `${e.type} ${e.node} ${e.index + 1}/${e.total}` : `${e.type} ${'node' in e ? e.node : ''}`.trim())),
      tap((line) => console.log(line)),
      toArray(),
    ),
  );
  const error = state.artifacts.error;
  if (error?.kind !== 'latents') throw new Error('the measure node wrote no error');
  const [before, after] = error.data;
  console.log(`rms error: ${before.toFixed(3)} noisy → ${after.toFixed(3)} after ${PASSES} passes (${events.length} events shown)`);
  if (!(after < before / 2)) throw new Error('smoothing did not halve the error');
  state.release();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
