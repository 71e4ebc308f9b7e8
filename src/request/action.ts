import { z } from 'zod';

/**
 * Action key names of the reference world-model family, in id order: id i is `ACTION_KEYS[i]`, id 0 = "none" (no
 * action). A model's `action.numKeys` may be smaller (it then accepts the first numKeys names) or larger (ids past
 * this list have no name and can only be given as `ChunkActions` ids).
 */
export const ACTION_KEYS = ['none', 'up', 'down', 'left', 'right'] as const;
export type ActionKey = (typeof ACTION_KEYS)[number];

/** One user-facing action for one frame: a named key and an optional continuous 2-vector (x, y), finite. */
export const ActionSchema = z.strictObject({
  key: z.enum(ACTION_KEYS),
  vector: z.tuple([z.number().finite(), z.number().finite()]).optional(),
});
export type Action = z.infer<typeof ActionSchema>;
