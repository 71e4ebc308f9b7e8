import { z } from 'zod';

/**
 * The response bodies of the HTTP routes as zod schemas: the source of the response shapes in `/openapi.json`
 * (request bodies come from the routes' own schemas in transports/shared/video-request.ts). Tests parse real
 * responses with them, so a field added to a response without being added here fails there.
 */

const int = z.number().int();

/** Every error response: `{"error": {type, message, param, code}}` (transports/shared/errors.ts). */
export const ErrorBodySchema = z
  .strictObject({
    error: z.strictObject({
      type: z
        .enum([
          'invalid_request_error',
          'authentication_error',
          'not_found_error',
          'conflict_error',
          'rate_limit_error',
          'server_error',
          'service_unavailable_error',
        ])
        .meta({ description: 'OpenAI-style class of the error, from the status' }),
      message: z.string().meta({ description: 'what went wrong, for people' }),
      param: z.string().nullable().meta({ description: 'the offending field (a dotted path for nested keys), or null' }),
      code: z.string().meta({ description: 'stable code: an engine OMNIRX_ERR_* code (docs/errors.md) or the transport\'s own (docs/http.md "Errors")' }),
    }),
  })
  .meta({ description: 'The body of every error response.' });

/** The job object (`VideoObject` in transports/http/jobs.ts): OpenAI's `Video` plus the values actually used. */
export const VideoObjectSchema = z
  .strictObject({
    id: z.string().meta({ description: 'video_<32 hex>' }),
    object: z.literal('video'),
    model: z.string(),
    status: z.enum(['queued', 'in_progress', 'completed', 'failed']),
    progress: z.number().min(0).max(100).meta({ description: 'percent of the denoise steps done (100 only when completed)' }),
    created_at: int.meta({ description: 'unix seconds' }),
    completed_at: int.nullable().meta({ description: 'unix seconds, or null while it runs' }),
    expires_at: z.null(),
    prompt: z.string(),
    remixed_from_video_id: z.null(),
    size: z.string().nullable().meta({ description: '"WxH", null until admitted' }),
    seconds: z.string().nullable().meta({ description: 'num_frames / fps as a string, null until admitted' }),
    error: z.strictObject({ code: z.string(), message: z.string() }).nullable(),
    num_frames: int.nullable(),
    fps: int.nullable(),
    num_inference_steps: int.nullable(),
    guidance_scale: z.number().nullable(),
    guidance_interval: z.tuple([z.number(), z.number()]).nullable().meta({ description: '[start, end) fractions of the steps that ran guidance' }),
    flow_shift: z.number().nullable(),
    sampler: z.string().nullable(),
    eta: z.number().nullable(),
    seed: int.nullable().meta({ description: 'the seed used (random when the request gave none)' }),
  })
  .meta({ description: "A video job: OpenAI's Video object plus the values used (null until the engine admits the job)." });

/** `GET /v1/videos`. */
export const VideoListSchema = z.strictObject({
  object: z.literal('list'),
  data: z.array(VideoObjectSchema).meta({ description: 'newest first unless order=asc' }),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
});

/** `DELETE /v1/videos/{id}`. */
export const VideoDeletedSchema = z.strictObject({ id: z.string(), object: z.literal('video.deleted'), deleted: z.literal(true) });

/** One model of `GET /v1/models`. */
export const ModelSchema = z.strictObject({
  id: z.string(),
  object: z.literal('model'),
  created: int.meta({ description: "the server's start, unix seconds" }),
  owned_by: z.literal('omnirx'),
});

/** `GET /v1/models`. */
export const ModelListSchema = z.strictObject({ object: z.literal('list'), data: z.array(ModelSchema) });

/** `POST /v1/images/generations`. */
export const ImagesResponseSchema = z.strictObject({
  created: int.meta({ description: 'unix seconds' }),
  data: z.array(z.strictObject({ b64_json: z.string().meta({ description: 'the image, a PNG in base64' }), revised_prompt: z.null() })).length(1),
});

/** `GET /health`. */
export const HealthSchema = z.strictObject({ status: z.literal('ok') });

/** `GET /ready`. */
export const ReadySchema = z.strictObject({
  status: z.literal('ready'),
  queued: int.meta({ description: 'requests waiting for admission' }),
  running: int.meta({ description: 'requests running' }),
  memoryBytes: int.optional().meta({ description: 'bytes admitted by the memory budget' }),
  sessions: int.optional().meta({ description: 'open world sessions' }),
});

/** Response schemas by their name in `components.schemas`. */
export const RESPONSE_SCHEMAS = {
  Error: ErrorBodySchema,
  VideoObject: VideoObjectSchema,
  VideoList: VideoListSchema,
  VideoDeleted: VideoDeletedSchema,
  Model: ModelSchema,
  ModelList: ModelListSchema,
  ImagesResponse: ImagesResponseSchema,
  Health: HealthSchema,
  Ready: ReadySchema,
} as const;
