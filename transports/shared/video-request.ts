import { z } from 'zod';
import { EtaSchema } from '../../src/request/eta';
import { GuidanceIntervalSchema, parseGuidanceIntervalText } from '../../src/request/guidance-interval';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { framesForSeconds } from '../../src/request/seconds';
import { HttpError } from './errors';

/** What a client sent in place of a number, for the error: a short quote of a string, else its JSON type. */
const sent = (input: unknown): string =>
  typeof input === 'string'
    ? JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input)
    : input === null
      ? 'null'
      : Array.isArray(input)
        ? 'an array'
        : `a ${typeof input}`;
/** A number field (JSON number, or a multipart field's decimal text); the error says what was sent instead. */
const number = () => z.number({ error: (iss) => (iss.input === undefined ? undefined : `expected a number, got ${sent(iss.input)}`) });
const int = number().int();
/** `seconds` as OpenAI sends it (a numeric string) or as a number. */
const seconds = z
  .union(
    [
      z.number(),
      z
        .string()
        .regex(/^\s*\d+(\.\d+)?\s*$/)
        .transform(Number),
    ],
    { error: 'seconds must be a number of seconds or a string of one, e.g. 4 or "4"' },
  )
  .pipe(z.number().positive('seconds must be positive').max(3600));
/** `size` as "WxH" in pixels. */
const size = z
  .string()
  .regex(/^[1-9]\d{0,4}x[1-9]\d{0,4}$/, 'size must be "WIDTHxHEIGHT" in pixels, e.g. "64x64"')
  .transform((s) => {
    const [w, h] = s.split('x').map(Number);
    return { width: w!, height: h! };
  });

/**
 * `prompt` of the HTTP requests and of every transport's start message (`/v1/stream` generate and session, `/v1/rtc`
 * start): required, non-empty and not only whitespace, as in OpenAI's API. The library
 * still takes an empty prompt (unconditional generation, `inputs.prompt: ""`); over HTTP an empty one is far more
 * often a client bug than a wish, so it is refused naming the field.
 */
export const PromptSchema = z
  .string()
  .min(1, 'prompt must not be empty')
  .max(100_000)
  .refine((p) => p.trim().length > 0, 'prompt must not be only whitespace');

/** Fields of `POST /v1/videos` (JSON, or multipart form fields after {@link coerceFormFields}). Unknown fields are rejected. */
export const VideoCreateBodySchema = z.strictObject({
  model: z.string().min(1).max(128).optional(),
  prompt: PromptSchema,
  seconds: seconds.optional(),
  size: size.optional(),
  /** Accepted so that it is rejected with a clear message: no served model does image-to-video. */
  input_reference: z.unknown().optional(),
  num_frames: int.optional(),
  fps: int.optional(),
  num_inference_steps: int.optional(),
  guidance_scale: number().optional(),
  /** Extension: [start, end) fractions of the denoise steps that run guidance (a form field: "start,end"). */
  guidance_interval: GuidanceIntervalSchema.optional(),
  /** Extension: share of fresh noise in each Euler step's re-noising, [0, 1] (0: deterministic Euler). */
  eta: EtaSchema.optional(),
  negative_prompt: z.string().max(100_000).optional(),
  seed: int.optional(),
  /** Extension: a preview (the first frame the step predicts) on the job's SSE stream every this many steps. */
  preview_every: int.optional(),
});
export type VideoCreateBody = z.infer<typeof VideoCreateBodySchema>;

/** Fields of `POST /v1/images/generations` (OpenAI's images API plus the diffusion knobs). */
export const ImageGenerateBodySchema = z.strictObject({
  model: z.string().min(1).max(128).optional(),
  prompt: PromptSchema,
  n: int.optional(),
  size: size.optional(),
  response_format: z.string().optional(),
  num_inference_steps: int.optional(),
  guidance_scale: number().optional(),
  /** Extension: [start, end) fractions of the denoise steps that run guidance. */
  guidance_interval: GuidanceIntervalSchema.optional(),
  /** Extension: share of fresh noise in each Euler step's re-noising, [0, 1]. */
  eta: EtaSchema.optional(),
  negative_prompt: z.string().max(100_000).optional(),
  seed: int.optional(),
});
export type ImageGenerateBody = z.infer<typeof ImageGenerateBodySchema>;

/** Form fields that carry numbers (multipart sends every value as text). */
const NUMERIC_FIELDS = new Set(['num_frames', 'fps', 'num_inference_steps', 'guidance_scale', 'eta', 'seed', 'preview_every']);

/**
 * Converts the numeric multipart fields from text to numbers when the whole text is a decimal number, and
 * `guidance_interval` from "start,end" (two decimal numbers) to a pair; anything else stays a string so the schema
 * rejects it naming the field (never a silent `NaN` or truncation).
 */
export function coerceFormFields(fields: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (k === 'guidance_interval') out[k] = parseGuidanceIntervalText(v) ?? v;
    else out[k] = NUMERIC_FIELDS.has(k) && /^\s*-?\d+(\.\d+)?([eE][-+]?\d+)?\s*$/.test(v) ? Number(v) : v;
  }
  return out;
}

/**
 * Parses a body with `schema`. @throws HttpError 400 `invalid_body` naming the first offending field (an unknown
 * field by its own name).
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw HttpError.of('invalid_body', 'the request body must be a JSON object');
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.code === 'unrecognized_keys' ? issue.keys[0] : issue.path.map(String).join('.');
  const what = issue.code === 'unrecognized_keys' ? `unknown field '${field}'` : `${field || '(body)'}: ${issue.message}`;
  throw HttpError.of('invalid_body', what, field || null);
}

/** Request paths of the engine's validation errors → the HTTP field that set them. */
const FIELD_OF_PATH: Record<string, string> = {
  model: 'model',
  'inputs.prompt': 'prompt',
  'inputs.negativePrompt': 'negative_prompt',
  'diffusion.width': 'size',
  'diffusion.height': 'size',
  'diffusion.numFrames': 'num_frames',
  'diffusion.fps': 'fps',
  'diffusion.numInferenceSteps': 'num_inference_steps',
  'diffusion.guidanceScale': 'guidance_scale',
  'diffusion.guidanceInterval': 'guidance_interval',
  'diffusion.eta': 'eta',
  'diffusion.seed': 'seed',
  'outputs.previewEvery': 'preview_every',
  diffusion: 'size',
};

/**
 * Maps an engine error's `param` (a request path) to the HTTP field name. `framesFrom` names the field the frame
 * count came from (`num_frames`, or `seconds` when it was derived from seconds × fps).
 */
export function httpFieldOf(path: string | undefined, framesFrom: 'num_frames' | 'seconds' = 'num_frames'): string | null {
  if (path === undefined) return null;
  const f = FIELD_OF_PATH[path] ?? path;
  return f === 'num_frames' ? framesFrom : f;
}

/** An OmniRequest built from a video body, and where its frame count came from. */
export interface MappedVideoRequest {
  request: OmniRequestInput;
  framesFrom: 'num_frames' | 'seconds';
}

/**
 * Maps a parsed `POST /v1/videos` body to a T2V OmniRequest. An explicit `num_frames` wins over `seconds × fps`;
 * `seconds` alone gives `seconds × fps` frames (fps: the body's, else `defaultFps`, the model's).
 * @throws HttpError 400 when `input_reference` is present (no served model does I2V) or `seconds × fps` is not a
 *   whole number of frames — never rounded.
 */
export function toVideoRequest(body: VideoCreateBody, requestId: string, modelId: string, defaultFps: number): MappedVideoRequest {
  if (body.input_reference !== undefined) {
    throw HttpError.engine(
      'OMNIRX_ERR_UNSUPPORTED_VALUE',
      `model '${modelId}' cannot do image-to-video (I2V): input_reference is not supported by any model this server runs`,
      'input_reference',
    );
  }
  let numFrames = body.num_frames;
  let framesFrom: MappedVideoRequest['framesFrom'] = 'num_frames';
  if (numFrames === undefined && body.seconds !== undefined) {
    try {
      numFrames = framesForSeconds(body.seconds, body.fps ?? defaultFps);
    } catch (e) {
      throw HttpError.engine('OMNIRX_ERR_UNSUPPORTED_VALUE', (e as Error).message, 'seconds');
    }
    framesFrom = 'seconds';
  }
  const diffusion: NonNullable<OmniRequestInput['diffusion']> = {};
  if (body.size !== undefined) Object.assign(diffusion, body.size);
  if (numFrames !== undefined) diffusion.numFrames = numFrames;
  if (body.fps !== undefined) diffusion.fps = body.fps;
  if (body.num_inference_steps !== undefined) diffusion.numInferenceSteps = body.num_inference_steps;
  if (body.guidance_scale !== undefined) diffusion.guidanceScale = body.guidance_scale;
  if (body.guidance_interval !== undefined) diffusion.guidanceInterval = body.guidance_interval;
  if (body.eta !== undefined) diffusion.eta = body.eta;
  if (body.seed !== undefined) diffusion.seed = body.seed;
  const inputs = body.negative_prompt === undefined ? { prompt: body.prompt } : { prompt: body.prompt, negativePrompt: body.negative_prompt };
  const outputs = body.preview_every === undefined ? {} : { outputs: { previewEvery: body.preview_every } };
  return { request: { requestId, model: modelId, task: 'T2V', inputs, diffusion, ...outputs }, framesFrom };
}

/**
 * Maps a parsed `POST /v1/images/generations` body to a T2I OmniRequest.
 * @throws HttpError 400 for `n` other than 1 or a `response_format` other than `b64_json`.
 */
export function toImageRequest(body: ImageGenerateBody, requestId: string): OmniRequestInput {
  if (body.n !== undefined && body.n !== 1) throw HttpError.engine('OMNIRX_ERR_UNSUPPORTED_VALUE', `n must be 1 (one image per request); got ${body.n}`, 'n');
  if (body.response_format !== undefined && body.response_format !== 'b64_json') {
    throw HttpError.engine(
      'OMNIRX_ERR_UNSUPPORTED_VALUE',
      `response_format must be "b64_json" (this server hosts no image URLs); got "${body.response_format.slice(0, 40)}"`,
      'response_format',
    );
  }
  const diffusion: NonNullable<OmniRequestInput['diffusion']> = { numFrames: 1 };
  if (body.size !== undefined) Object.assign(diffusion, body.size);
  if (body.num_inference_steps !== undefined) diffusion.numInferenceSteps = body.num_inference_steps;
  if (body.guidance_scale !== undefined) diffusion.guidanceScale = body.guidance_scale;
  if (body.guidance_interval !== undefined) diffusion.guidanceInterval = body.guidance_interval;
  if (body.eta !== undefined) diffusion.eta = body.eta;
  if (body.seed !== undefined) diffusion.seed = body.seed;
  const inputs = body.negative_prompt === undefined ? { prompt: body.prompt } : { prompt: body.prompt, negativePrompt: body.negative_prompt };
  return { requestId, ...(body.model === undefined ? {} : { model: body.model }), task: 'T2I', inputs, diffusion };
}
