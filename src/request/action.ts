import { z } from 'zod';

/**
 * Action key names of the reference world-model family, in id order: id i is `ACTION_KEYS[i]`, id 0 = "none" (no
 * action). A model's `action.numKeys` may be smaller (it then accepts the first numKeys names) or larger (ids past
 * this list have no name and can only be given as `ChunkActions` ids).
 */
export const ACTION_KEYS = ['none', 'up', 'down', 'left', 'right'] as const;
export type ActionKey = (typeof ACTION_KEYS)[number];

/**
 * Largest magnitude of an action-vector component. The vector is a direction or velocity (gamepad axes are in
 * [-1, 1]); the bound keeps it far inside float32 range through the model's Linear projection and adaLN modulation, so
 * a huge value is refused where it arrives instead of overflowing inside a chunk and ending the session.
 */
export const ACTION_VECTOR_MAX_ABS = 1000;

const component = z.number().finite().min(-ACTION_VECTOR_MAX_ABS).max(ACTION_VECTOR_MAX_ABS);

/** One user-facing action for one frame: a named key and an optional continuous 2-vector (x, y), each in [-1000, 1000]. */
export const ActionSchema = z.strictObject({
  key: z.enum(ACTION_KEYS),
  vector: z.tuple([component, component]).optional(),
});
export type Action = z.infer<typeof ActionSchema>;
