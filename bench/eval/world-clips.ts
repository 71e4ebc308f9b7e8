import { lastValueFrom, toArray } from 'rxjs';
import type { Engine } from '../../src/engine/engine';
import type { GuidanceInterval } from '../../src/request/guidance-interval';
import type { OmniEvent } from '../../src/request/omni-event';
import { ACTION_KEYS } from '../../src/request/action';
import type { SessionAction } from '../../src/request/session-request';
import type { WorldEvalClip } from './world-eval';
import type { WorldClipSettings } from './world-eval';
import { layoutWorldScene, renderWorldFrame, type AgentStart } from './world-first-frame';
import { WORLD_GEOMETRY } from './world-palette';

/** Seed of the first T2V prompt of `npm run eval:world`: prompt i runs at seed T2V_EVAL_SEED + i. */
export const T2V_EVAL_SEED = 100;

/** The T2V prompts of `npm run eval:world` (bench/eval-world.ts): 16 prompts of the generator's grammar, seeds 100–115. */
export const T2V_EVAL_PROMPTS: readonly string[] = [
  'a red ball in a dark blue room',
  'a yellow square in a gray room with two cyan blocks',
  'a white disc in a black room with a red block',
  'a green cube in a brown room',
  'a cyan ball in a dark green room with three orange blocks',
  'a magenta box in a dark blue room with a white block',
  'an orange dot in a gray room',
  'a red square in a black room with two green blocks',
  'a yellow ball in a brown room with a cyan block',
  'a white box in a dark green room',
  'a magenta dot in a black room with two yellow blocks',
  'a green square in a gray room with a red block',
  'an orange disc in a dark blue room with three white blocks',
  'a cyan cube in a brown room',
  'a red ball in a gray room with a green block',
  'a yellow disc in a dark blue room',
];

/**
 * The world sessions of `npm run eval:world` (bench/eval-world.ts): 16 prompts of the generator's grammar, 24 frames
 * each, directional runs of 4 frames starting `shift` (= i mod 4) runs into the cycle, seeds 200–215. 16 sessions,
 * not fewer: action following counts only frame pairs with the agent present in both, and 4 sessions gave the shipped
 * model 15 such pairs, too few to tell two models apart (docs/model-card.md).
 */
export const WORLD_EVAL_SESSIONS: ReadonlyArray<{ prompt: string; seed: number; frames: number; run: number; shift: number }> = [
  'a yellow ball in a dark green room',
  'a red cube in a gray room with a white block',
  'a cyan disc in a brown room with two magenta blocks',
  'a white ball in a dark blue room',
  'a green ball in a black room with a yellow block',
  'an orange cube in a dark blue room',
  'a magenta disc in a gray room with two cyan blocks',
  'a red ball in a brown room',
  'a white square in a dark green room with three red blocks',
  'a yellow dot in a black room',
  'a cyan ball in a gray room',
  'a red disc in a dark green room with a white block',
  'a white cube in a brown room with two green blocks',
  'a green dot in a dark blue room with a red block',
  'an orange ball in a black room',
  'a yellow box in a dark green room with two magenta blocks',
].map(evalSession(200));

/**
 * An evaluation set's world session i for `prompt`: 24 frames, directional runs of 4 frames starting i mod 4 runs into
 * the cycle, at seed `firstSeed` + i (a mapper over a set's prompts, in order).
 */
export function evalSession(firstSeed: number): (prompt: string, i: number) => { prompt: string; seed: number; frames: number; run: number; shift: number } {
  return (prompt, i) => ({ prompt, seed: firstSeed + i, frames: 24, run: 4, shift: i % 4 });
}

/** The directional keys world clips cycle through (up, right, down, left), `run` frames each. */
const CYCLE = ['up', 'right', 'down', 'left'] as const;

/** An `admitted` event's params as clip settings: without the seed (the tallies record it) and the priority. */
function admittedSettings(events: readonly OmniEvent[]): WorldClipSettings {
  const admitted = events.find((e) => e.type === 'admitted');
  if (admitted?.type !== 'admitted') throw new Error('the runtime sent no admitted event');
  const { seed: _seed, priority: _priority, ...settings } = admitted.params;
  return settings;
}

/** Splits an RGB24 video [F, H, W, 3] (uint8) into F frames [H, W, 3] (views, not copies). */
function splitFrames(frames: Uint8Array, n: number, width: number, height: number): Uint8Array[] {
  const s = width * height * 3;
  return Array.from({ length: n }, (_, f) => frames.subarray(f * s, (f + 1) * s));
}

/**
 * One T2V clip for the world evaluation: a text-to-video request (bidirectional sampling) at 64×64 with the model's
 * default steps, guidance scale, guidance interval and η (`guidanceScale`, `guidanceInterval` and `eta` override them),
 * `frames` frames, seed `seed`.
 * @throws Error when the request ends with an error event, without a video artifact or without an admitted event.
 */
export async function t2vClip(
  engine: Engine,
  o: { model?: string; prompt: string; seed: number; frames: number; guidanceScale?: number; guidanceInterval?: GuidanceInterval; eta?: number },
): Promise<WorldEvalClip> {
  const diffusion = {
    seed: o.seed,
    numFrames: o.frames,
    width: 64,
    height: 64,
    ...(o.guidanceScale !== undefined ? { guidanceScale: o.guidanceScale } : {}),
    ...(o.guidanceInterval !== undefined ? { guidanceInterval: o.guidanceInterval } : {}),
    ...(o.eta !== undefined ? { eta: o.eta } : {}),
  };
  const events = await lastValueFrom(
    engine.generate({ ...(o.model ? { model: o.model } : {}), task: 'T2V', inputs: { prompt: o.prompt }, diffusion }).pipe(toArray()),
  );
  const fin = events.find((e) => e.type === 'final');
  if (fin === undefined || fin.type !== 'final') throw new Error(`T2V failed: ${JSON.stringify(events.filter((e) => e.type === 'error'))}`);
  const v = fin.output.artifacts.video;
  if (v?.kind !== 'video') throw new Error('T2V returned no video');
  return {
    prompt: o.prompt,
    width: v.width,
    height: v.height,
    frames: splitFrames(v.frames, v.numFrames, v.width, v.height),
    settings: admittedSettings(events),
  };
}

/**
 * One world-session clip: a block-causal chunk-by-chunk rollout (the deployment's session settings) of `frames`
 * frames, driven by directional runs of `run` frames (up, right, down, left, starting `shift` runs into the cycle).
 * Each chunk's action is the one the session reports in its chunk event (`rollout.action`), so `actions[f]` is the
 * action frame f was generated with. With `image` (RGB24, the session's size) the session is image-to-world: frame 0
 * is that image, action none (docs/sessions.md), and the rollout continues from it. `eta` overrides the model's η.
 * @throws Error on a session error event, or when the session sent no admitted event.
 */
export async function worldClip(
  engine: Engine,
  o: {
    model?: string;
    prompt: string;
    seed: number;
    frames: number;
    run: number;
    shift: number;
    eta?: number;
    image?: { width: number; height: number; data: Uint8Array<ArrayBuffer> };
  },
): Promise<WorldEvalClip> {
  const session = await engine.session({
    ...(o.model ? { model: o.model } : {}),
    prompt: o.prompt,
    seed: o.seed,
    ...(o.eta !== undefined ? { eta: o.eta } : {}),
    ...(o.image ? { image: o.image } : {}),
  });
  const frames: Uint8Array[] = [];
  const actions: number[] = [];
  const admitted: OmniEvent[] = [];
  let width = 0,
    height = 0;
  const keyAt = (f: number): SessionAction['key'] => CYCLE[(Math.floor(f / o.run) + o.shift) % CYCLE.length];
  await new Promise<void>((resolve, reject) => {
    session.events$.subscribe({
      next: (ev) => {
        if (ev.type === 'error') reject(new Error(`${ev.code}: ${ev.message}`));
        if (ev.type === 'admitted') admitted.push(ev);
        if (ev.type !== 'chunk' || ev.artifact.kind !== 'video') return;
        const a = ev.artifact;
        width = a.width;
        height = a.height;
        for (const fr of splitFrames(a.frames, a.numFrames, a.width, a.height)) {
          frames.push(Uint8Array.from(fr));
          actions.push(ACTION_KEYS.indexOf(ev.rollout!.action.key as (typeof ACTION_KEYS)[number]));
        }
        if (frames.length >= o.frames) {
          session.close();
          return;
        }
        session.actions.next({ key: keyAt(frames.length) }); // the next chunk samples it when it starts
        session.credits.next(a.numFrames);
      },
      complete: () => resolve(),
    });
    session.actions.next({ key: keyAt(0) });
    session.credits.next(1);
  });
  await session.whenReleased();
  return { prompt: o.prompt, width, height, frames: frames.slice(0, o.frames), actions: actions.slice(0, o.frames), settings: admittedSettings(admitted) };
}

/**
 * A world session started from a frame of the world with the session's prompt laid out and the agent at `start`
 * (`layoutWorldScene`, seeded by the session's seed; image-to-world), as `worldClip` runs it, without that given frame
 * (`frames` − 1 frames and actions) and with the start in its settings (`firstFrame`), so a comparison of two starts
 * names it.
 * @throws Error as `worldClip`, or when the prompt is outside the world grammar
 */
export async function worldClipFromFrame(engine: Engine, s: Parameters<typeof worldClip>[1], start: AgentStart): Promise<WorldEvalClip> {
  const { size } = WORLD_GEOMETRY;
  const image = { width: size, height: size, data: renderWorldFrame(layoutWorldScene(s.prompt, s.seed, start)) };
  const clip = await worldClip(engine, { ...s, image });
  return { ...clip, frames: clip.frames.slice(1), actions: clip.actions?.slice(1), settings: { ...clip.settings, firstFrame: start } };
}
