import { z } from 'zod';
import { ACTION_DIRECTIONS, WORLD_GEOMETRY, parseWorldPrompt } from './world-palette';
import { detectFrame, moveBlocked, type FrameDetection } from './world-detector';

/**
 * The sampler settings a clip ran with, as the runtime reported them in its `admitted` event (its `params` without
 * the seed, which the record holds, and the priority), plus the eval's `matmulDtype`: e.g. `numInferenceSteps`,
 * `guidanceScale`, `flowShift` and `sampler` of a T2V request, `firstChunkSteps`, `stepsPerChunk` and the window of a
 * world session. Two runs are compared only at equal settings.
 */
export const WorldClipSettingsSchema = z
  .record(z.string().max(64), z.union([z.number(), z.string().max(64), z.boolean()]))
  .refine((r) => Object.keys(r).length <= 32, { message: 'more than 32 settings' });
export type WorldClipSettings = z.infer<typeof WorldClipSettingsSchema>;

/** One generated clip: its prompt, RGB24 frames [H, W, 3] and, for world rollouts, the action id each frame was generated with. */
export interface WorldEvalClip {
  prompt: string;
  width: number;
  height: number;
  frames: readonly Uint8Array[];
  /** actions[f] = action id (0 none … 4 right) of frame f; omitted for T2V clips (no action following measured). */
  actions?: readonly number[];
  /**
   * The sampler settings the runtime reported in the clip's `admitted` event (its params without seed and priority;
   * `WorldClipSettingsSchema` below); omitted for clips the runtime did not generate (fixtures).
   */
  settings?: Readonly<WorldClipSettings>;
}

/**
 * The quality figures of issue 8 (fractions in [0, 1]; action_follow_acc null when no frame pair qualified), plus
 * room_color_acc, the room half of prompt_color_acc on its own (how far a model gets that draws the room but not
 * the agent), and block_count_acc, whether the blocks the prompt names are drawn (null when no prompt names blocks).
 */
export interface WorldEvalResult {
  prompt_color_acc: number;
  room_color_acc: number;
  block_count_acc: number | null;
  action_follow_acc: number | null;
  /** Frame pairs action_follow_acc is over (directional action, agent present in both frames). */
  action_pairs: number;
  agent_present_rate: number;
  /**
   * Of consecutive T2V frame pairs with the agent present in both, the fraction in which it moved half a world step
   * or more (`movedBetween`): whether text-to-video moves the agent at all. Null without such a pair. Reported, not
   * one of issue 8's target figures.
   */
  t2v_motion_rate: number | null;
  /** T2V frame pairs t2v_motion_rate is over. */
  motion_pairs: number;
  frames: number;
}

/**
 * Whether the agent moved as action a says between two detections: the centroid displacement d must be within
 * STEP/2 (per axis) of the expected one, STEP pixels in a's direction, or 0 when the move is blocked in `prev`.
 */
export function followsAction(prev: FrameDetection, next: FrameDetection, a: number, blocked: boolean): boolean {
  const [dx, dy] = ACTION_DIRECTIONS[a];
  const s = WORLD_GEOMETRY.step;
  const ex = blocked ? 0 : dx * s,
    ey = blocked ? 0 : dy * s;
  const mx = next.centroid![0] - prev.centroid![0],
    my = next.centroid![1] - prev.centroid![1];
  return Math.abs(mx - ex) <= s / 2 && Math.abs(my - ey) <= s / 2;
}

/**
 * Whether the agent moved between two detections (both present): its centroid moved half a world step
 * (WORLD_GEOMETRY.step / 2 = 1.5 px) or more along either axis. The procedural world moves it a whole step a frame
 * unless the action is none or the move is blocked.
 */
export function movedBetween(prev: FrameDetection, next: FrameDetection): boolean {
  const half = WORLD_GEOMETRY.step / 2;
  return Math.abs(next.centroid![0] - prev.centroid![0]) >= half || Math.abs(next.centroid![1] - prev.centroid![1]) >= half;
}

/** One clip's counts behind the figures (the unit the evaluation's intervals resample). */
export interface WorldClipTally {
  frames: number;
  /** Frames with the prompt's room colour and a blob of the agent colour. */
  colorOk: number;
  /** Frames with the prompt's room colour. */
  roomOk: number;
  /** Frames of the clip if its prompt names blocks, else 0. */
  blockFrames: number;
  /** Of `blockFrames`, those with as many block components of the prompt's obstacle colour as it names. */
  blockOk: number;
  /** Frames with exactly one agent blob of plausible size. */
  present: number;
  /** Directional frame pairs with the agent present in both frames. */
  pairs: number;
  /** Of `pairs`, those whose displacement matches the action. */
  followed: number;
  /** T2V clips: consecutive frame pairs with the agent present in both (0 for world clips). */
  motionPairs: number;
  /** Of `motionPairs`, those in which the agent moved (`movedBetween`). */
  moved: number;
}

/**
 * Scores one generated clip with the colour-segmentation detector (bench/eval/world-detector.ts); the counts are
 * those of `evaluateWorld`.
 * @throws Error when the prompt is outside the world grammar (`parseWorldPrompt`)
 */
export function tallyWorldClip(clip: WorldEvalClip): WorldClipTally {
  const scene = parseWorldPrompt(clip.prompt);
  if (scene === undefined) throw new Error(`world eval: prompt outside the world grammar: "${clip.prompt}"`);
  const t: WorldClipTally = { frames: 0, colorOk: 0, roomOk: 0, blockFrames: 0, blockOk: 0, present: 0, pairs: 0, followed: 0, motionPairs: 0, moved: 0 };
  let prev: FrameDetection | undefined;
  clip.frames.forEach((rgb, f) => {
    const det = detectFrame(rgb, clip.width, clip.height, scene);
    t.frames++;
    if (det.roomColor === scene.room) t.roomOk++;
    if (det.roomColor === scene.room && det.agentComponents > 0) t.colorOk++;
    if (scene.obstacleCount !== undefined) {
      t.blockFrames++;
      if (det.blockComponents === scene.obstacleCount) t.blockOk++;
    }
    if (det.present) t.present++;
    const a = clip.actions?.[f];
    if (a !== undefined && a > 0 && prev !== undefined && prev.present && det.present) {
      t.pairs++;
      if (followsAction(prev, det, a, moveBlocked(prev, clip.width, clip.height, scene, a))) t.followed++;
    }
    if (clip.actions === undefined && prev !== undefined && prev.present && det.present) {
      t.motionPairs++;
      if (movedBetween(prev, det)) t.moved++;
    }
    prev = det;
  });
  return t;
}

/** The figures of `evaluateWorld` from clips' counts, pooled over frames, block frames and pairs, unrounded (the intervals' statistic). */
export function worldRatios(tallies: readonly WorldClipTally[]): WorldEvalResult {
  const sum = (k: keyof WorldClipTally): number => tallies.reduce((n, t) => n + t[k], 0);
  const frames = sum('frames'),
    pairs = sum('pairs'),
    blockFrames = sum('blockFrames'),
    motionPairs = sum('motionPairs');
  return {
    prompt_color_acc: sum('colorOk') / Math.max(1, frames),
    room_color_acc: sum('roomOk') / Math.max(1, frames),
    block_count_acc: blockFrames ? sum('blockOk') / blockFrames : null,
    action_follow_acc: pairs ? sum('followed') / pairs : null,
    action_pairs: pairs,
    agent_present_rate: sum('present') / Math.max(1, frames),
    t2v_motion_rate: motionPairs ? sum('moved') / motionPairs : null,
    motion_pairs: motionPairs,
    frames,
  };
}

/** The figures of `evaluateWorld` from clips' counts (`worldRatios` rounded to 4 decimals). */
export function worldFigures(tallies: readonly WorldClipTally[]): WorldEvalResult {
  const f = worldRatios(tallies);
  const r = (x: number) => Math.round(x * 1e4) / 1e4;
  const rn = (x: number | null) => (x === null ? null : r(x));
  return {
    ...f,
    prompt_color_acc: r(f.prompt_color_acc),
    room_color_acc: r(f.room_color_acc),
    block_count_acc: rn(f.block_count_acc),
    action_follow_acc: rn(f.action_follow_acc),
    agent_present_rate: r(f.agent_present_rate),
    t2v_motion_rate: rn(f.t2v_motion_rate),
  };
}

/**
 * Scores generated clips with the colour-segmentation detector (bench/eval/world-detector.ts):
 *  - prompt_color_acc: frames whose dominant floor colour is the prompt's room colour and that hold a blob of the
 *    prompt's agent colour (4-connected, at least a quarter of the agent's area);
 *  - room_color_acc: frames whose dominant floor colour is the prompt's room colour;
 *  - block_count_acc: over the frames of clips whose prompt names blocks ("with a|an|two|three <colour> block(s)"),
 *    those with as many 4-connected components of the prompt's obstacle colour of at least a quarter of a block's area
 *    (WORLD_GEOMETRY.block² / 4 = 25 px) as the prompt names (a/an 1, two 2, three 3): a missing, extra or merged
 *    block fails the frame (the generator keeps blocks apart, so theirs never merge); null when no prompt names
 *    blocks. Reported, not one of issue 8's target figures;
 *  - agent_present_rate: frames with exactly one agent blob of plausible size (not vanished, not duplicated);
 *  - action_follow_acc: over consecutive frames (f−1, f) of world clips whose action a_f is a direction (1–4) and where
 *    the agent is present in both, the fraction whose displacement matches a_f (`followsAction`; a blocked move must
 *    stay put). "none" frames are not scored: the model is trained with action dropout, so "none" also means "no
 *    action given" (T2V), under which the agent may keep moving. `action_pairs` is the number of such pairs: the
 *    figure's sample size; its uncertainty is larger than a binomial one over pairs, as a clip's pairs succeed or
 *    fail together (bench/eval/world-intervals.ts);
 *  - t2v_motion_rate: over consecutive frames of T2V clips (no actions) with the agent present in both, the fraction
 *    in which it moved half a world step or more (`movedBetween`); `motion_pairs` is its sample size. T2V is trained
 *    on clips driven by random actions (10 % none), so a model that keeps the agent still scores near 0 here while
 *    every other figure may be high. Reported, not a target figure.
 * Prompts outside the grammar (`parseWorldPrompt`) are an error.
 */
export function evaluateWorld(clips: readonly WorldEvalClip[]): WorldEvalResult {
  return worldFigures(clips.map(tallyWorldClip));
}
