import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Subscription } from 'rxjs';
import type { OmniEvent } from '../../../src/request/omni-event';
import type { ServerContext } from '../../shared/context';
import { fromErrorEvent, HttpError } from '../../shared/errors';
import { encodePng } from '../../../src/media/png';
import { httpFieldOf, ImageGenerateBodySchema, parseBody, toImageRequest } from '../../shared/video-request';
import { admitting, loadModel } from '../../shared/admission';

/**
 * Registers `POST /v1/images/generations`: runs a T2I request to its end and answers OpenAI's images shape,
 * `{created, data: [{b64_json, revised_prompt: null}]}` with a PNG. A client that disconnects first cancels the
 * request (unsubscribe).
 */
export function registerImageRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.post('/v1/images/generations', async (req, reply) => {
    // OpenAI's image generations take JSON only (multipart is for edits and variations, which omnirx does not serve).
    if (req.isMultipart()) throw HttpError.of('unsupported_media_type', 'POST /v1/images/generations takes application/json; got multipart/form-data');
    admitting(ctx);
    const body = parseBody(ImageGenerateBodySchema, req.body);
    await loadModel(ctx, body.model);
    const request = toImageRequest(body, `image_${randomUUID().replace(/-/g, '')}`);
    const last = await new Promise<OmniEvent | undefined>((resolve) => {
      let end: OmniEvent | undefined;
      let sub: Subscription | undefined = undefined;
      const onClose = () => {
        if (!reply.raw.writableFinished) sub?.unsubscribe();
        resolve(undefined);
      };
      reply.raw.once('close', onClose);
      sub = ctx
        .engine()
        .generate(request)
        .subscribe({
          next: (ev) => {
            if (ev.type === 'final' || ev.type === 'error') end = ev;
          },
          complete: () => {
            reply.raw.off('close', onClose);
            resolve(end);
          },
        });
    });
    if (last === undefined) return reply; // the client went away; nothing to send
    if (last.type === 'error') {
      throw fromErrorEvent(last, (p) => (p === 'diffusion.numFrames' ? 'n' : httpFieldOf(p)));
    }
    const image = last.type === 'final' ? last.output.artifacts.image : undefined;
    if (image === undefined || image.kind !== 'image') throw HttpError.of('internal', 'the T2I request finished without an image artifact');
    return { created: Math.floor(Date.now() / 1000), data: [{ b64_json: encodePng(image).toString('base64'), revised_prompt: null }] };
  });
}
