import { evalSession, type WORLD_EVAL_SESSIONS } from './world-clips';
import { OBJECT_COLORS } from './world-palette';

/** The room of every colour-pair prompt: the README's ("a white ball in a dark blue room with two yellow blocks"). */
const COLOR_PAIR_ROOM = 'dark blue';

/**
 * The colour-pair prompt set of `npm run eval:world -- --prompt-set color-pairs` (bench/eval-world.ts): one prompt per
 * ordered pair of the palette's object colours (OBJECT_COLORS, 7 colours: 42 pairs, agent ≠ block colour, as the
 * generator never gives both one colour), "a|an <agent> ball in a dark blue room with two <block> blocks", agent colour
 * major in the palette's order. It measures which agent colours T2V and world sessions lose beside which block colours
 * (docs/model-card.md, "Colour pairs"): the default and held-out sets cover 26 of the 42 pairs, 1–3 clips each in mixed rooms,
 * nouns and block counts, and 16 not at all.
 */
export const COLOR_PAIR_PROMPTS: readonly string[] = Object.keys(OBJECT_COLORS).flatMap((agent) =>
  Object.keys(OBJECT_COLORS)
    .filter((block) => block !== agent)
    .map((block) => `${/^[aeiou]/.test(agent) ? 'an' : 'a'} ${agent} ball in a ${COLOR_PAIR_ROOM} room with two ${block} blocks`),
);

/** The colour-pair set's T2V clips: every pair's prompt, clip i at seed 700 + i (700–741). */
export const T2V_COLOR_PAIR_SEED = 700;

/**
 * The colour-pair set's world sessions: every pair's prompt with the default set's session shape (24 frames, runs of 4
 * frames of the up-right-down-left cycle starting i mod 4 runs in), seeds 800–841.
 */
export const WORLD_COLOR_PAIR_SESSIONS: typeof WORLD_EVAL_SESSIONS = COLOR_PAIR_PROMPTS.map(evalSession(800));
