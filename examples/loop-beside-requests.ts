/**
 * A custom `LoopStage` scheduled beside the engine's own requests: the engine and the caller share one
 * `StepScheduler` (`EngineOptions.steps`), so the caller's loop steps and the engine's denoise steps are granted one at
 * a time from one queue — by priority, then least attained service — and interleave instead of waiting for each other.
 * The custom loop upscales the first image the engine produced (4×, nearest) and sharpens it, one unsharp-mask pass
 * per step, while the engine is still denoising a second image.
 *
 *   npm run build && node dist/examples/loop-beside-requests.js
 */
import { filter, firstValueFrom, lastValueFrom, share } from 'rxjs';
import { builtinFamilies, Engine, StepScheduler, type ImageArtifact, type OmniEvent } from 'omnirx';
import { RequestState, runGraph, type LoopStage, type NodeSpec } from 'omnirx/pipeline';

/** Sharpening passes: enough that the loop's total time is several of the request's denoise steps. */
const PASSES = 120;
/** Upscale factor (nearest neighbour) before sharpening. */
const SCALE = 4;

interface SharpenContext {
  requestId: string;
  image: ImageArtifact;
}

interface SharpenLoop {
  /** RGB `[H·SCALE, W·SCALE, 3]`. */
  pixels: Float32Array;
  index: number;
}

/** `image` upscaled by SCALE (nearest neighbour), as floats `[H·SCALE, W·SCALE, 3]`. */
function upscale(image: ImageArtifact): Float32Array {
  const W = image.width * SCALE;
  const out = new Float32Array(W * image.height * SCALE * 3);
  for (let r = 0; r < image.height * SCALE; r++) {
    for (let c = 0; c < W; c++) {
      const src = (Math.floor(r / SCALE) * image.width + Math.floor(c / SCALE)) * 3;
      out.set(image.pixels.subarray(src, src + 3), (r * W + c) * 3);
    }
  }
  return out;
}

/** One unsharp-mask pass per step: x + 0.5 · (x − blur₃ₓ₃(x)), per channel, edges kept. */
const sharpen: LoopStage<SharpenContext, RequestState, SharpenLoop> = {
  name: 'sharpen',
  cost: (ctx) => ({ model: 'example', phase: 'sharpen', shape: `${ctx.image.width * SCALE}x${ctx.image.height * SCALE}`, guidance: 'single' }),
  remaining: (loop) => PASSES - loop.index,
  init: (ctx) => ({ pixels: upscale(ctx.image), index: 0 }),
  async step(ctx, loop) {
    const W = ctx.image.width * SCALE;
    const H = ctx.image.height * SCALE;
    const x = loop.pixels;
    const y = Float32Array.from(x);
    for (let r = 1; r < H - 1; r++) {
      for (let c = 1; c < W - 1; c++) {
        for (let ch = 0; ch < 3; ch++) {
          let blur = 0;
          for (let dr = -1; dr <= 1; dr++) for (let dc = -1; dc <= 1; dc++) blur += x[((r + dr) * W + c + dc) * 3 + ch];
          const i = (r * W + c) * 3 + ch;
          y[i] = x[i] + 0.5 * (x[i] - blur / 9);
        }
      }
    }
    loop.pixels = y;
    const index = loop.index++;
    return { done: loop.index === PASSES, progress: { index, total: PASSES, timestep: 0, sigma: 0 } };
  },
  finalize(ctx, loop, state) {
    const pixels = new Uint8Array(loop.pixels.length);
    for (let i = 0; i < pixels.length; i++) pixels[i] = Math.min(255, Math.max(0, Math.round(loop.pixels[i])));
    state.artifacts.image = { kind: 'image', width: ctx.image.width * SCALE, height: ctx.image.height * SCALE, pixels };
  },
  release: () => undefined,
};

const node: NodeSpec<SharpenContext, RequestState> = {
  name: 'sharpen',
  run: { kind: 'loop', stage: sharpen as LoopStage<SharpenContext, RequestState, unknown> },
  inputs: {},
  outputs: { image: 'image' },
  components: [],
  tasks: ['T2I'],
};

const image = (events: OmniEvent): ImageArtifact => {
  if (events.type !== 'final' || events.output.artifacts.image?.kind !== 'image') throw new Error(`expected an image, got ${JSON.stringify(events)}`);
  return events.output.artifacts.image;
};

async function main(): Promise<void> {
  const steps = new StepScheduler();
  const grants: string[] = [];
  steps.decisions$.subscribe((d) => grants.push(...d.requestIds));
  const engine = await Engine.create({ families: builtinFamilies(), tasks: ['T2I'], steps });
  try {
    const request = (requestId: string, seed: number) => ({
      requestId,
      task: 'T2I' as const,
      inputs: { prompt: 'a white ball in a dark blue room' },
      diffusion: { seed, numInferenceSteps: 8 },
    });
    const first = image(await lastValueFrom(engine.generate(request('first', 1))));
    grants.length = 0;
    // The second request and the custom loop run at once, on the same scheduler: the loop starts once the request is
    // denoising, and from then on the least-served of the two goes next.
    const second$ = engine.generate(request('second', 2)).pipe(share());
    const second = lastValueFrom(second$);
    await firstValueFrom(second$.pipe(filter((e) => e.type === 'step')));
    const state = new RequestState();
    const loop = lastValueFrom(
      runGraph([node], [], { requestId: 'sharpen', image: first }, state, { scheduler: steps, requestId: 'sharpen', priority: 0 }, () => undefined).pipe(
        filter((e) => e.type === 'node_end'),
      ),
    );
    await Promise.all([second, loop]);
    const sharpened = state.artifacts.image as ImageArtifact;
    const runs = grants.map((id, i) => (i === 0 || id !== grants[i - 1] ? id : '')).filter(Boolean);
    console.log(`grants in order (runs of one owner): ${runs.join(' → ')}`);
    console.log(`the loop and the request took turns ${runs.length - 1} times; sharpened ${sharpened.width}×${sharpened.height} image`);
    if (sharpened.width !== first.width * SCALE || runs.length < 4) throw new Error('the custom loop did not run beside the request');
  } finally {
    await engine.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
