import { z } from 'zod';
import { ActionSchema } from './action';
import { EtaSchema } from './eta';
import { invalidInput } from './invalid-input';
import { DEFAULT_LIMITS, type RequestLimits } from './limits';

/**
 * Builds the schema of `Engine.session(...)`'s input (an interactive world session, docs/design.md §8). Units: pixels,
 * frames per second (the PTS rate of the emitted frames), ms. The rollout shape (chunk frames, sink, window, steps per
 * chunk) comes from the deployment's `sessions` config, not from the caller.
 */
export function createSessionRequestSchema(limits: RequestLimits = DEFAULT_LIMITS) {
  const side = z.number().int().min(8).max(limits.maxSide);
  return z
    .strictObject({
      /** Caller-chosen id (events carry it as `requestId`); the engine makes one when absent. */
      sessionId: z.string().min(1).max(128).optional(),
      /** Registered model id; the engine's default model when absent. */
      model: z.string().min(1).max(128).optional(),
      prompt: z.string().max(limits.maxPromptChars),
      /** Image-to-world: the first frame, RGB24 `[height, width, 3]`, at the session's size. */
      image: z
        .strictObject({
          width: side,
          height: side,
          data: z.instanceof(Uint8Array),
        })
        .optional(),
      /** Video size; the model's defaults when absent. */
      width: side.optional(),
      height: side.optional(),
      /** PTS rate of the emitted frames (frames per second). Default 20. */
      fps: z.number().int().min(1).max(120).default(20),
      /** Seed of the session's noise, an unsigned 32-bit integer; random when absent (echoed in `admitted`). */
      seed: z.number().int().min(0).max(0xffffffff).optional(),
      /** Flow shift of the per-chunk schedule; the model's default when absent. */
      flowShift: z.number().min(0.01).max(100).optional(),
      /** Share of fresh noise re-noising each Euler step of every chunk, in [0, 1]; the model's `defaults.world.eta`, else 0, when absent. */
      eta: EtaSchema.optional(),
      /** The action before the first one arrives. Default none. */
      initialAction: ActionSchema.default({ key: 'none' }),
      /** Step-scheduler priority against other requests and sessions (larger first). Default 1: interactive work first. */
      priority: z.number().int().min(-100).max(100).default(1),
    })
    .superRefine((req, ctx) => {
      const img = req.image;
      if (img === undefined) return;
      if (img.data.length !== img.width * img.height * 3) {
        ctx.addIssue({
          code: 'custom',
          path: ['image', 'data'],
          message: `expected width · height · 3 = ${img.width * img.height * 3} bytes of RGB24, got ${img.data.length}`,
        });
      }
      for (const f of ['width', 'height'] as const) {
        if (req[f] !== undefined && req[f] !== img[f])
          ctx.addIssue({ code: 'custom', path: ['image', f], message: `the image ${f} ${img[f]} differs from the session ${f} ${req[f]}` });
      }
    });
}

export const SessionRequestSchema = createSessionRequestSchema();
export type SessionRequest = z.infer<typeof SessionRequestSchema>;
export type SessionRequestInput = z.input<typeof SessionRequestSchema>;

/**
 * An action fed to a session (e.g. from a WebRTC data channel): a key and optional 2-vector (`ActionSchema`), plus an
 * optional caller id echoed in the `chunk` event of the first chunk generated with it (to measure action-to-frame
 * latency).
 */
export const SessionActionSchema = ActionSchema.extend({ id: z.string().min(1).max(64).optional() });
export type SessionAction = z.infer<typeof SessionActionSchema>;

/**
 * Validates one action fed to a session.
 * @throws OmniError OMNIRX_ERR_INVALID_REQUEST whose `param` names the field (`action.key`, `action.vector.1`, …).
 */
export function parseSessionAction(input: unknown): SessionAction {
  const r = SessionActionSchema.safeParse(input);
  if (!r.success) throw invalidInput(r.error, 'action');
  return r.data;
}
