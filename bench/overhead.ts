/**
 * Per-step overhead of the runtime-driven loop (Engine → graph runner → driveLoop → StepScheduler → denoise
 * stage) against a plain `for` loop calling the same native step (the same DiT forwards for cond and uncond, CFG
 * combine, Euler update; the request guides every step, `guidanceInterval: [0, 1]`, with deterministic Euler
 * steps, `eta: 0`, as the loop does) on the `tiny` config: issue 3's `tiny` DiT (dim 256, FFN 1024, 4 heads, 8 layers)
 * at 256 video tokens (4 latent frames of 8×8) and 32 text tokens. Both run the same number of steps, alternated
 * over several rounds; medians of the denoise time. Prints {"overhead_pct", "runtime_step_ms", "plain_step_ms",
 * "steps", "rounds"}. Run: npm run bench:overhead
 */
import { lastValueFrom, toArray } from 'rxjs';
import { Engine } from '../src/engine/engine';
import { applyClassifierFreeGuidance } from '../src/pipeline/guidance';
import { eulerStep, flowMatchSigmas } from '../src/pipeline/samplers/flow-match-euler';
import { createTensor } from '../src/native/binding';
import { Rng } from '../src/util/rng';
import { builtinFamilies } from '../src/families';
import { InProcessExecutor } from '../src/executor/in-process';
import type { WanT2VModel } from '../src/families/wan/model';
import { loadNative } from '../src/native/binding';

const STEPS = 20;
const ROUNDS = 7;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  const engine = await Engine.create({ families: builtinFamilies() });
  const request = {
    task: 'T2V' as const,
    inputs: { prompt: 'a red ball in a dark blue room' },
    diffusion: {
      seed: 3,
      numInferenceSteps: STEPS,
      numFrames: 4,
      width: 64,
      height: 64,
      guidanceScale: 5,
      guidanceInterval: [0, 1] as [number, number],
      eta: 0,
      flowShift: 3,
    },
  };
  const model = (await (engine.executor as InProcessExecutor).models.get(undefined)) as WanT2VModel;
  const dit = model.transformer();
  const te = model.textEncoder;
  const L = te.config.maxLength;
  const d = te.config.dModel;
  const cond = createTensor(loadNative(), [1, L, d]);
  const uncond = createTensor(loadNative(), [1, L, d]);
  await te.encode(model.tokenizer.encode(request.inputs.prompt, L), cond);
  await te.encode(model.tokenizer.encode('', L), uncond);
  const shape = { frames: 4, height: 16, width: 16, textLen: L };
  const n = 16 * 4 * 16 * 16;

  async function plain(): Promise<number> {
    const latents = new Float32Array(n);
    new Rng(3).fillNormal(latents);
    const vc = new Float32Array(n);
    const vu = new Float32Array(n);
    const c = Float32Array.from(cond.data);
    const u = Float32Array.from(uncond.data);
    const sigmas = flowMatchSigmas(STEPS, 3);
    const t0 = performance.now();
    for (let i = 0; i < STEPS; i++) {
      const t = sigmas[i] * 1000;
      await dit.forwardRows(shape, [{ latents, context: c, t, out: vc }]);
      await dit.forwardRows(shape, [{ latents, context: u, t, out: vu }]);
      applyClassifierFreeGuidance(vc, vu, 5);
      eulerStep(latents, vc, sigmas[i], sigmas[i + 1]);
    }
    return performance.now() - t0;
  }

  async function runtime(): Promise<number> {
    const events = await lastValueFrom(engine.generate(request).pipe(toArray()));
    const end = events.find((e) => e.type === 'node_end' && e.node === 'denoise');
    if (end === undefined || end.type !== 'node_end') throw new Error(`no denoise node_end: ${JSON.stringify(events[events.length - 1])}`);
    return end.ms;
  }

  await plain();
  await runtime();
  const p: number[] = [];
  const r: number[] = [];
  for (let k = 0; k < ROUNDS; k++) {
    p.push(await plain());
    r.push(await runtime());
  }
  const pm = median(p);
  const rm = median(r);
  console.log(
    JSON.stringify({
      overhead_pct: +((100 * (rm - pm)) / pm).toFixed(2),
      runtime_step_ms: +(rm / STEPS).toFixed(3),
      plain_step_ms: +(pm / STEPS).toFixed(3),
      steps: STEPS,
      rounds: ROUNDS,
    }),
  );
  cond.dispose();
  uncond.dispose();
  await engine.close();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
