import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ServerContext } from '../../shared/context';
import { fromErrorEvent, HttpError } from '../../shared/errors';
import { VideoJob, type JobTable } from '../jobs';
import { streamSse } from '../sse';
import { coerceFormFields, httpFieldOf, parseBody, toVideoRequest, VideoCreateBodySchema } from '../../shared/video-request';
import { admitting, loadModel } from '../../shared/admission';
import { ERROR_CATALOGUE } from '../../../src/errors';

/** Query of `GET /v1/videos` (also documented in /openapi.json). */
export const ListQuerySchema = z.strictObject({
  limit: z.coerce.number({ error: 'limit must be an integer from 1 to 100' }).int().min(1).max(100).optional(),
  after: z.string().max(128).optional(),
  order: z.enum(['asc', 'desc']).optional(),
});
/** Query of `GET /v1/videos/{id}/content` (also documented in /openapi.json). */
export const ContentQuerySchema = z.strictObject({ variant: z.literal('video').optional() });

/**
 * Reads a multipart/form-data body into plain fields. A file part is accepted only as `input_reference` (read to
 * its end within the upload limits, so it can be rejected by name later).
 * @throws HttpError 400 for a duplicate field or a file under another name; the multipart plugin's 413 for limits.
 */
async function readForm(req: FastifyRequest): Promise<Record<string, unknown>> {
  try {
    return await readFormParts(req);
  } catch (err) {
    // The multipart parser's own failures (a body cut off before its closing boundary, a malformed part header)
    // carry no HTTP status: they are the client's malformed body, not a server error.
    const status = (err as { statusCode?: unknown })?.statusCode;
    if (err instanceof HttpError || typeof status === 'number') throw err;
    throw HttpError.of('invalid_body', `the multipart body could not be read: ${(err as Error)?.message ?? String(err)}`);
  }
}

async function readFormParts(req: FastifyRequest): Promise<Record<string, unknown>> {
  const fields: Record<string, string> = {};
  let reference: { filename: string; bytes: number } | undefined;
  for await (const part of req.parts()) {
    if (Object.prototype.hasOwnProperty.call(fields, part.fieldname) || (part.fieldname === 'input_reference' && reference !== undefined)) {
      throw HttpError.of('invalid_body', `field '${part.fieldname}' is given twice`, part.fieldname);
    }
    if (part.type === 'file') {
      const buf = await part.toBuffer();
      if (part.fieldname !== 'input_reference') throw HttpError.of('invalid_body', `unknown file field '${part.fieldname}'`, part.fieldname);
      reference = { filename: part.filename, bytes: buf.length };
    } else {
      fields[part.fieldname] = String(part.value);
    }
  }
  const out = coerceFormFields(fields);
  if (reference !== undefined) out.input_reference = reference;
  return out;
}

/** What the video job routes use besides the server's context. */
export interface VideoRouteContext extends ServerContext {
  /** The server's video jobs and their stored MP4s. */
  jobs: JobTable;
  /** Longest wait of `POST /v1/videos` for the engine to admit (or reject) a job before answering `queued`, ms. */
  admitWaitMs: number;
}

/**
 * Submits the queued jobs a durable job table kept from an earlier run (see `JobTable.toResume`) to the engine again,
 * their bodies parsed and mapped as `POST /v1/videos` does. A job whose body or model no longer passes fails with that
 * error (recorded like any failure). Called once the engine is up; does nothing while the server drains.
 */
export async function resumeQueuedJobs(ctx: VideoRouteContext): Promise<void> {
  for (const job of ctx.jobs.toResume()) {
    if (ctx.state.phase !== 'ready') return;
    try {
      const body = parseBody(VideoCreateBodySchema, job.request);
      const model = await loadModel(ctx, body.model);
      const { request } = toVideoRequest(body, job.id, model.spec.id, model.spec.defaults.fps);
      ctx.jobs.resume(job, ctx.engine().generate(request));
    } catch (err) {
      const e = err as { code?: unknown; message?: unknown };
      const code = typeof e.code === 'string' && (e.code in ERROR_CATALOGUE || err instanceof HttpError) ? e.code : 'OMNIRX_ERR_INTERNAL';
      ctx.jobs.failQueued(job, { code, message: `the job could not run again after the restart: ${typeof e.message === 'string' ? e.message : String(err)}` });
    }
  }
}

/** Registers the video job routes: create, list, retrieve, content, events (SSE) and delete. */
export function registerVideoRoutes(app: FastifyInstance, ctx: VideoRouteContext): void {
  const jobOr404 = (id: string) => {
    const job = ctx.jobs.get(id);
    if (job === undefined) throw HttpError.of('not_found', `no video job '${id.slice(0, 128)}'`, 'id');
    return job;
  };

  app.post('/v1/videos', async (req, reply) => {
    admitting(ctx);
    const raw = req.isMultipart() ? await readForm(req) : req.body;
    const body = parseBody(VideoCreateBodySchema, raw);
    const model = await loadModel(ctx, body.model);
    const id = `video_${randomUUID().replace(/-/g, '')}`;
    const { request, framesFrom } = toVideoRequest(body, id, model.spec.id, model.spec.defaults.fps);
    // A durable table keeps the body as submitted, so the job can run again if the server restarts before it starts.
    const job = new VideoJob(id, model.spec.id, body.prompt, ctx.jobs.durable ? { request: raw } : {});
    // The request's logger carries its reqId: this line ties the job to the request that created it.
    req.log.info({ jobId: id, model: model.spec.id }, 'job created');
    const outcome = await ctx.jobs.start(job, ctx.engine().generate(request), ctx.admitWaitMs);
    if (outcome.kind === 'rejected') throw fromErrorEvent(outcome.error, (p) => httpFieldOf(p, framesFrom));
    return reply.send(job.toJSON());
  });

  app.get('/v1/videos', async (req) => {
    const q = parseBody(ListQuerySchema, req.query);
    let all = ctx.jobs.list();
    if (q.order === 'asc') all = all.reverse();
    if (q.after !== undefined) {
      const i = all.findIndex((j) => j.id === q.after);
      if (i < 0) throw HttpError.of('not_found', `no video job '${q.after}' to list after`, 'after');
      all = all.slice(i + 1);
    }
    const limit = q.limit ?? 20;
    const data = all.slice(0, limit).map((j) => j.toJSON());
    return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: all.length > limit };
  });

  app.get<{ Params: { id: string } }>('/v1/videos/:id', async (req) => jobOr404(req.params.id).toJSON());

  app.get<{ Params: { id: string } }>('/v1/videos/:id/content', async (req, reply) => {
    parseBody(ContentQuerySchema, req.query);
    const job = jobOr404(req.params.id);
    const file = ctx.jobs.store.get(job.id);
    if (job.status !== 'completed') {
      throw HttpError.of(
        'not_ready',
        job.status === 'failed'
          ? `video '${job.id}' failed (${job.error?.code ?? 'no code'}); it has no content`
          : `video '${job.id}' is ${job.status}; its content exists once it is completed`,
        'id',
      );
    }
    const gone = () => HttpError.of('gone', `the MP4 of video '${job.id}' is missing or damaged on the server's disk; create the job again`, 'id');
    if (file === undefined) throw gone();
    // Opened before answering: a file deleted or truncated behind the server's back is a clear 410, never a 500 naming
    // a path or a response cut short. An open file is read whole even if it is evicted meanwhile.
    const fh = await fsp.open(file.path, 'r').catch(() => undefined);
    if (fh === undefined) throw gone();
    const size = (await fh.stat().catch(() => undefined))?.size;
    if (size !== file.bytes) {
      await fh.close();
      req.log.warn({ jobId: job.id, expectedBytes: file.bytes, bytes: size ?? null }, 'stored MP4 damaged');
      throw gone();
    }
    return reply.type('video/mp4').header('content-length', file.bytes).send(fh.createReadStream());
  });

  app.get<{ Params: { id: string } }>('/v1/videos/:id/events', async (req, reply) => {
    streamSse(reply, jobOr404(req.params.id).events);
  });

  app.delete<{ Params: { id: string } }>('/v1/videos/:id', async (req) => {
    const id = req.params.id;
    if (!(await ctx.jobs.cancel(id))) throw HttpError.of('not_found', `no video job '${id.slice(0, 128)}'`, 'id');
    return { id, object: 'video.deleted', deleted: true };
  });
}
