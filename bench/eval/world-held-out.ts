import { evalSession, type WORLD_EVAL_SESSIONS } from './world-clips';

/**
 * The held-out prompt set of `npm run eval:world -- --prompt-set held-out` (bench/eval-world.ts): 32 prompts of the
 * generator's grammar that the default set (T2V_EVAL_PROMPTS, WORLD_EVAL_SESSIONS) does not hold, so a change chosen
 * by its figures on the default set can be checked on prompts it was not chosen on (docs/model-card.md).
 *
 * Drawn by the generator, not by hand: the prompts that
 * `/usr/bin/python3 tools/train/procedural_world.py --out /tmp/w.png --clips 48 --frames 1 --seed 777000` prints, in
 * order, without repeats and without the default set's prompts; the first 16 are the T2V prompts, the next 16 the
 * world sessions' (test/eval/world-held-out.test.ts regenerates them). The training data draws scenes from the same
 * grammar, so "held out" means not in the default set, not unseen in training.
 */
export const HELD_OUT_PROMPTS: readonly string[] = [
  'a cyan ball in a gray room with two white blocks',
  'an orange cube in a gray room with a red block',
  'a magenta square in a black room with a green block',
  'a magenta disc in a brown room',
  'a cyan circle in a brown room with a yellow block',
  'a green circle in a brown room with a yellow block',
  'a green square in a gray room',
  'a green cube in a black room with two white blocks',
  'a green disc in a dark blue room with a magenta block',
  'a red disc in a gray room with a green block',
  'a green ball in a gray room with a yellow block',
  'a cyan ball in a dark blue room',
  'a white dot in a black room with an orange block',
  'a yellow cube in a black room with an orange block',
  'a green dot in a dark blue room',
  'a cyan cube in a dark blue room with a red block',
  'a magenta cube in a gray room',
  'a white disc in a black room with a yellow block',
  'a white cube in a dark blue room with two yellow blocks',
  'a white ball in a dark blue room with a red block',
  'a red dot in a black room with three orange blocks',
  'a yellow disc in a black room with three cyan blocks',
  'a magenta dot in a brown room',
  'a magenta cube in a dark green room with a white block',
  'a cyan cube in a black room with a white block',
  'a green cube in a black room with two magenta blocks',
  'a magenta circle in a dark green room with a red block',
  'an orange dot in a black room with a white block',
  'a cyan circle in a dark blue room with a white block',
  'a green dot in a black room with two magenta blocks',
  'a cyan square in a dark blue room',
  'a yellow square in a dark green room with two magenta blocks',
];

/** The held-out set's T2V prompts (the first 16 of HELD_OUT_PROMPTS), seeds 500–515. */
export const T2V_HELD_OUT_PROMPTS: readonly string[] = HELD_OUT_PROMPTS.slice(0, 16);

/**
 * The held-out set's world sessions (the last 16 of HELD_OUT_PROMPTS): as the default set's, 24 frames each,
 * directional runs of 4 frames starting `shift` (= i mod 4) runs into the cycle, seeds 600–615.
 */
export const WORLD_HELD_OUT_SESSIONS: typeof WORLD_EVAL_SESSIONS = HELD_OUT_PROMPTS.slice(16).map(evalSession(600));

/** The T2V clips' first seed in the held-out set (clip i: this + i). */
export const T2V_HELD_OUT_SEED = 500;
