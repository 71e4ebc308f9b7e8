import { lastValueFrom } from 'rxjs';
import type { SlabSession } from '../../cache/slab-pool';
import { toRgb24 } from '../../models/vae/decoder';
import type { VaeDecodeStream } from '../../models/vae/decode-stream';
import { createTensor, type NativeTensor } from '../../native/binding';
import {
  AdmittedSessionSchema,
  ROLLOUT_NODE,
  type AdmittedSession,
  type SessionStageEnv,
  type SessionStageHandler,
  type StageProgress,
} from '../../pipeline/family/session';
import { RequestState } from '../../pipeline/request-state';
import {
  float32Elements,
  float32Tensor,
  PayloadError,
  SESSION_PAYLOAD,
  sessionPayload,
  type DiffusionStagePayload,
  type PayloadTensor,
  type StageRole,
} from '../../pipeline/stage-payload';
import { SessionActionSchema, type SessionAction } from '../../request/session-request';
import { ChunkRollout, type ChunkAttempt } from './chunk-rollout';
import type { WanT2VModel } from './model';
import { WAN_FAMILY } from './model-spec';
import { chunkActionsOf, imageChunkLatents, sessionLatentGrid } from './session';
import { encodePrompt } from './text-encode';

/**
 * World sessions across stages (docs/disaggregation.md): Encode encodes the prompt once; Denoise alone owns the session's
 * rollout — block-causal DiT, chunk KV, slab claim and the chunk counter (multi-chunk progress is authoritative
 * there); Decode owns the session's streaming VAE decoder state. Payloads carry `sessionId`; every stage
 * reacquires its local state by it. Per chunk:
 *
 *   front ─omnirx.session_chunk(action)→ Encode (passes on) → Denoise: steps → wan.latents_chunk → Decode → omnirx.session_frames → front
 *                                                            └─ commit of the chunk's K/V, overlapping its decode
 *
 * The action a chunk is generated with is the latest one Denoise has received (on a chunk request or a flush) when the
 * chunk starts. An `omnirx.session_flush(action)` is handled on arrival, ahead of the session's queued messages: while a
 * chunk is in its denoise steps, its attempt is dropped (never decoded, never sent) and the chunk starts again with
 * the flush's action — same noise, so the result equals a run that had the action from the start; otherwise it only
 * updates the latest action. The flush is consumed on Denoise; nothing travels on for it.
 *
 * The math is `ChunkRollout`'s own (`startChunk`, `denoiseStep`, `commitPending`) and the decode is the same
 * streaming decoder call as `ChunkRollout.decode`, so frames are bit-identical to a monolithic session.
 */
export const WAN_SESSION_PAYLOAD = {
  /** Encode → Denoise: the session and its prompt embeds (and image latents). */
  context: 'wan.session_context',
  /** Denoise → Decode: the session, once Denoise holds its rollout. */
  opened: 'wan.session_opened',
  /** Denoise → Decode: one chunk's clean latents. */
  latents: 'wan.latents_chunk',
} as const;

const WAN_TYPES = new Set<string>(Object.values(WAN_SESSION_PAYLOAD));
const CONTROL_TYPES = new Set<string>([SESSION_PAYLOAD.chunk, SESSION_PAYLOAD.flush, SESSION_PAYLOAD.close]);

function specOf(p: DiffusionStagePayload): AdmittedSession {
  const r = AdmittedSessionSchema.safeParse(p.metadata.session);
  if (!r.success)
    throw new PayloadError(`${p.payloadType}: metadata.session.${r.error.issues[0].path.join('.')}: ${r.error.issues[0].message}`, {
      param: 'metadata.session',
    });
  return r.data;
}

function actionOf(p: DiffusionStagePayload): SessionAction {
  const r = SessionActionSchema.safeParse(p.metadata.action);
  if (!r.success) throw new PayloadError(`${p.payloadType}: metadata.action: ${r.error.issues[0].message}`, { param: 'metadata.action' });
  return r.data;
}

/**
 * Stands in for the VAE stream of a `ChunkRollout` on the Denoise stage, where no VAE is loaded: `decode` only marks
 * the chunk as the one to commit (the rollout's own bookkeeping); the frames are decoded by the Decode stage.
 */
function latentsOnlyStream(grid: readonly number[]): VaeDecodeStream {
  const stream = {
    latentShape: [1, ...grid],
    outputShape: [1, 1, 1, 3],
    bytes: 0,
    decode: async () => undefined,
    reset: () => undefined,
    dispose: () => undefined,
  };
  return stream as unknown as VaeDecodeStream;
}

interface DenoiseSession {
  id: string;
  spec: AdmittedSession;
  model: WanT2VModel;
  rollout: ChunkRollout;
  context: NativeTensor;
  slabs: SlabSession;
  /** Chunks produced: the authoritative progress of the session. */
  next: number;
  /** The latest action received (chunk request or flush): a chunk (or a flushed chunk's new attempt) starts with it. */
  latest: SessionAction;
  /** Whether a chunk is in its denoise steps (only then does a flush drop its attempt). */
  denoising: boolean;
  /** A flush arrived during the denoise steps: the next step starts a new attempt of the chunk. */
  flushed: boolean;
  /** Image-to-world: the clean latents of chunk 0 `[z, C, h, w]`, until chunk 0 is produced. */
  image?: Float32Array;
  chain: Promise<unknown>;
}

interface DecodeSession {
  spec: AdmittedSession;
  stream: VaeDecodeStream;
  latents: NativeTensor;
  rgb: NativeTensor;
  chain: Promise<unknown>;
}

/**
 * The session side of one stage. `claims(p)` says whether a payload is a session payload; `handle` runs it and
 * puts what it produces through `emit` (awaited: credit flow control applies). Messages of one session run in
 * arrival order; sessions run concurrently.
 */
export class WanSessionStage implements SessionStageHandler {
  private readonly denoising = new Map<string, DenoiseSession>();
  private readonly decoding = new Map<string, DecodeSession>();

  constructor(private readonly env: SessionStageEnv) {}

  /** The Wan model `id` with this stage's components. */
  private model(id: string): Promise<WanT2VModel> {
    return this.env.model(id) as Promise<WanT2VModel>;
  }

  /**
   * Encode: an open of a Wan session, and every chunk, flush and close (passed on: Encode holds no session state, so a
   * restarted Encode keeps passing them). Denoise: its own payloads, and a session's control messages (a close of a
   * session it no longer holds is passed on to free Decode's state). Decode: its own payloads and closes of sessions it holds.
   */
  claims(p: DiffusionStagePayload): boolean {
    const sid = p.sessionId;
    if (sid === undefined) return false;
    switch (this.env.role) {
      case 'encode':
        return (
          (p.payloadType === SESSION_PAYLOAD.open && (p.metadata.session as { family?: unknown } | undefined)?.family === WAN_FAMILY) ||
          CONTROL_TYPES.has(p.payloadType)
        );
      case 'denoise':
        return WAN_TYPES.has(p.payloadType) || p.payloadType === SESSION_PAYLOAD.close || (CONTROL_TYPES.has(p.payloadType) && this.denoising.has(sid));
      case 'decode':
        return WAN_TYPES.has(p.payloadType) || (p.payloadType === SESSION_PAYLOAD.close && this.decoding.has(sid));
    }
  }

  /**
   * Runs one session payload; reports the denoise steps of its chunks through `report` (`step` events of node
   * `chunk_rollout`, requestId = the session's id).
   * @throws PayloadError for a malformed payload or an unknown session; model and native errors of the session.
   */
  async handle(p: DiffusionStagePayload, emit: (out: DiffusionStagePayload) => Promise<void>, report: (ev: StageProgress) => void): Promise<void> {
    const sid = p.sessionId;
    if (sid === undefined) throw new PayloadError(`${p.payloadType}: sessionId is missing`, { param: 'sessionId' });
    const { role } = this.env;
    const pass = (source: StageRole, target: StageRole) => emit({ ...p, sourceStage: source, targetStage: target });
    if (role === 'encode') {
      if (p.payloadType !== SESSION_PAYLOAD.open) return pass('encode', 'denoise');
      const spec = specOf(p);
      const model = await this.model(spec.model);
      const state = new RequestState();
      try {
        const embeds = await encodePrompt({ model, native: this.env.native, featureCache: this.env.caches.features }, state, spec.prompt);
        const ctx: Record<string, PayloadTensor> = { prompt_embeds: float32Tensor(embeds.data.slice(), embeds.shape) };
        const image = p.tensors.image;
        if (image !== undefined) {
          if (image.dtype !== 'uint8' || image.shape.join() !== [spec.height, spec.width, 3].join())
            throw new PayloadError(`${p.payloadType}: image must be uint8 [${spec.height}, ${spec.width}, 3]`, { param: 'tensors.image' });
          // Image-to-world: chunk 0 is the encoded image repeated over the chunk's C frames (as `WorldSession` does).
          const frame = await model.vaeEncoder.encodeImage(image.bytes, spec.width, spec.height);
          const grid = sessionLatentGrid(model.spec, spec);
          ctx.image_latents = float32Tensor(imageChunkLatents(frame, grid), grid);
        }
        return await emit(sessionPayload(sid, p.requestId, 'encode', 'denoise', WAN_SESSION_PAYLOAD.context, { session: spec }, ctx));
      } finally {
        state.release();
      }
    }
    if (role === 'denoise') return this.denoise(sid, p, emit, pass, report);
    return this.decode(sid, p, emit);
  }

  private async denoise(
    sid: string,
    p: DiffusionStagePayload,
    emit: (out: DiffusionStagePayload) => Promise<void>,
    pass: (s: StageRole, t: StageRole) => Promise<void>,
    report: (ev: StageProgress) => void,
  ): Promise<void> {
    if (p.payloadType === WAN_SESSION_PAYLOAD.context) {
      if (this.denoising.has(sid)) throw new PayloadError(`session '${sid}' is already open on the denoise stage`, { param: 'sessionId' });
      const spec = specOf(p);
      const model = await this.model(spec.model);
      const te = model.spec.textEncoder;
      const t = p.tensors.prompt_embeds;
      const shape = [1, te.maxLength, te.dModel];
      if (t === undefined || t.dtype !== 'float32' || t.shape.join() !== shape.join())
        throw new PayloadError(`${p.payloadType}: prompt_embeds must be float32 [${shape.join(', ')}]`, { param: 'tensors.prompt_embeds' });
      const context = createTensor(this.env.native, shape, float32Elements(t));
      const pool = this.env.caches.chunkKv(ChunkRollout.slabBytes(model.spec, spec.chunkFrames, spec.width, spec.height));
      const slabs = pool.openSession(sid, {
        sinkChunks: spec.sinkFrames / spec.chunkFrames,
        windowChunks: spec.localWindowFrames / spec.chunkFrames + 1,
        layers: model.spec.transformer.numLayers,
      });
      const grid = sessionLatentGrid(model.spec, spec);
      let rollout: ChunkRollout;
      try {
        const dit = model.causalTransformer({
          chunkFrames: spec.chunkFrames,
          sinkFrames: spec.sinkFrames,
          localWindowFrames: spec.localWindowFrames,
          height: grid[2],
          width: grid[3],
          textLen: te.maxLength,
        });
        rollout = new ChunkRollout(this.env.native, { ...spec }, dit, latentsOnlyStream(grid), context, slabs);
      } catch (e) {
        slabs.release();
        context.dispose();
        throw e;
      }
      const img = p.tensors.image_latents;
      if (img !== undefined && (img.dtype !== 'float32' || img.shape.join() !== grid.join())) {
        rollout.dispose();
        context.dispose();
        throw new PayloadError(`${p.payloadType}: image_latents must be float32 [${grid.join(', ')}]`, { param: 'tensors.image_latents' });
      }
      const image = img === undefined ? undefined : float32Elements(img).slice();
      this.denoising.set(sid, {
        id: sid,
        spec,
        model,
        rollout,
        context,
        slabs,
        next: 0,
        latest: { key: 'none' },
        denoising: false,
        flushed: false,
        image,
        chain: Promise.resolve(),
      });
      return emit(sessionPayload(sid, p.requestId, 'denoise', 'decode', WAN_SESSION_PAYLOAD.opened, { session: spec }));
    }
    const s = this.denoising.get(sid);
    // A close for a session this stage no longer holds (it restarted) still frees the session's decoder state.
    if (s === undefined && p.payloadType === SESSION_PAYLOAD.close) return pass('denoise', 'decode');
    if (s === undefined) throw new PayloadError(`session '${sid}' is not open on the denoise stage`, { param: 'sessionId' });
    if (p.payloadType === SESSION_PAYLOAD.chunk || p.payloadType === SESSION_PAYLOAD.flush) s.latest = actionOf(p);
    if (p.payloadType === SESSION_PAYLOAD.flush) {
      if (s.denoising) s.flushed = true;
      return;
    }
    const run = s.chain.then(async () => {
      if (p.payloadType === SESSION_PAYLOAD.close) {
        this.denoising.delete(sid);
        await s.rollout.settled();
        s.rollout.dispose();
        s.context.dispose();
        this.env.steps.forget(sid);
        return pass('denoise', 'decode');
      }
      if (p.payloadType !== SESSION_PAYLOAD.chunk) throw new PayloadError(`the denoise stage takes no ${p.payloadType} payload`, { param: 'payloadType' });
      const shape = s.rollout.latentShape.join('x');
      const grant = <T>(phase: string, fn: () => Promise<T>) =>
        lastValueFrom(
          this.env.steps.step<T>({
            requestId: sid,
            priority: s.spec.priority,
            cost: { model: `${s.model.spec.id}/transformer`, phase, shape, guidance: 'single' },
            run: fn,
          }),
        );
      if (s.image !== undefined && s.next === 0) {
        // Chunk 0 of an image session: the encoded image, no denoising, action none.
        const attempt = s.rollout.startCleanChunk(s.image);
        s.image = undefined;
        const chunk = s.next++;
        await s.rollout.decode(attempt);
        await emit(
          sessionPayload(
            sid,
            p.requestId,
            'denoise',
            'decode',
            WAN_SESSION_PAYLOAD.latents,
            { chunk, firstFrame: chunk * s.spec.chunkFrames, action: { key: 'none' } },
            { latents: float32Tensor(attempt.latents, s.rollout.latentShape) },
          ),
        );
        return grant('world-commit', () => s.rollout.commitPending());
      }
      const chunk = s.next++;
      const { attempt, action } = await this.denoiseChunk(s, chunk, grant, report);
      await s.rollout.decode(attempt); // marks the chunk to commit; the frames are the Decode stage's
      const meta = { chunk, firstFrame: chunk * s.spec.chunkFrames, action };
      await emit(
        sessionPayload(sid, p.requestId, 'denoise', 'decode', WAN_SESSION_PAYLOAD.latents, meta, {
          latents: float32Tensor(attempt.latents, s.rollout.latentShape),
        }),
      );
      // The chunk's K/V commit overlaps its decode on the Decode stage.
      await grant('world-commit', () => s.rollout.commitPending());
    });
    s.chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Runs the denoise steps of chunk `chunk`, starting it with the latest action; a flush during the steps drops the
   * attempt and starts the chunk again (same noise) with the flush's action. Resolves with the attempt that ran all
   * its steps and the action it was generated with.
   * @throws OmniError from the injector (an action the model cannot take) or the rollout.
   */
  private async denoiseChunk(
    s: DenoiseSession,
    chunk: number,
    grant: <T>(phase: string, fn: () => Promise<T>) => Promise<T>,
    report: (ev: StageProgress) => void,
  ): Promise<{ attempt: ChunkAttempt; action: SessionAction }> {
    let attempt: ChunkAttempt | undefined;
    let action = s.latest;
    s.denoising = true;
    s.flushed = false;
    try {
      while (attempt === undefined || s.flushed || attempt.index < attempt.total) {
        const { r, ms } = await grant('world-denoise', async () => {
          if (attempt === undefined || s.flushed) {
            s.flushed = false;
            action = s.latest;
            attempt = s.rollout.startChunk(this.chunkActions(s, action), chunk);
          }
          const t0 = performance.now();
          return { r: await s.rollout.denoiseStep(attempt), ms: performance.now() - t0 };
        });
        // A step whose attempt a flush dropped while it ran is not reported (as the monolithic session drops it).
        if (!s.flushed) report({ type: 'step', requestId: s.id, node: ROLLOUT_NODE, index: r.index, total: r.total, timestep: r.timestep, sigma: r.sigma, ms });
      }
      return { attempt, action };
    } finally {
      s.denoising = false;
    }
  }

  /** The model's actions for one chunk holding `action` on every frame (see `chunkActionsOf`). */
  private chunkActions(s: DenoiseSession, action: SessionAction) {
    return chunkActionsOf(this.env.conditioning, action, s.spec.chunkFrames, s.model.spec.transformer.action);
  }

  private async decode(sid: string, p: DiffusionStagePayload, emit: (out: DiffusionStagePayload) => Promise<void>): Promise<void> {
    if (p.payloadType === WAN_SESSION_PAYLOAD.opened) {
      if (this.decoding.has(sid)) throw new PayloadError(`session '${sid}' is already open on the decode stage`, { param: 'sessionId' });
      const spec = specOf(p);
      const model = await this.model(spec.model);
      const grid = sessionLatentGrid(model.spec, spec);
      const stream = model.vae.createStream({ frames: grid[1], height: grid[2], width: grid[3] });
      const latents = createTensor(this.env.native, [...stream.latentShape]);
      const rgb = createTensor(this.env.native, [...stream.outputShape]);
      this.decoding.set(sid, { spec, stream, latents, rgb, chain: Promise.resolve() });
      return emit(sessionPayload(sid, p.requestId, 'decode', 'decode', SESSION_PAYLOAD.ready, { session: spec }));
    }
    const s = this.decoding.get(sid);
    if (s === undefined) throw new PayloadError(`session '${sid}' is not open on the decode stage`, { param: 'sessionId' });
    const run = s.chain.then(async () => {
      if (p.payloadType === SESSION_PAYLOAD.close) {
        this.decoding.delete(sid);
        s.stream.dispose();
        s.latents.dispose();
        s.rgb.dispose();
        return emit(sessionPayload(sid, p.requestId, 'decode', 'decode', SESSION_PAYLOAD.closed, {}));
      }
      if (p.payloadType !== WAN_SESSION_PAYLOAD.latents) throw new PayloadError(`the decode stage takes no ${p.payloadType} payload`, { param: 'payloadType' });
      const t = p.tensors.latents;
      if (t === undefined || t.dtype !== 'float32' || t.shape.length !== 4 || t.bytes.length !== s.latents.numel * 4) {
        throw new PayloadError(`${p.payloadType}: latents must be float32 [${s.stream.latentShape.slice(1).join(', ')}]`, { param: 'tensors.latents' });
      }
      s.latents.data.set(float32Elements(t));
      await s.stream.decode(s.latents, s.rgb);
      const frames = toRgb24(s.rgb.data);
      const { chunkFrames: C, height: H, width: W } = s.spec;
      await emit(
        sessionPayload(
          sid,
          p.requestId,
          'decode',
          'decode',
          SESSION_PAYLOAD.frames,
          { chunk: p.metadata.chunk ?? null, firstFrame: p.metadata.firstFrame ?? null, action: p.metadata.action ?? null },
          { frames: { dtype: 'uint8', shape: [C, H, W, 3], bytes: frames } },
        ),
      );
    });
    s.chain = run.catch(() => undefined);
    return run;
  }

  stats(): { open: number; chunkKvSlabs: number } {
    return { open: this.denoising.size + this.decoding.size, chunkKvSlabs: this.env.caches.stats().chunkKv?.used ?? 0 };
  }

  /** Frees every session's state (stage shutdown). */
  async close(): Promise<void> {
    for (const s of this.denoising.values()) {
      await s.rollout.settled();
      s.rollout.dispose();
      s.context.dispose();
    }
    this.denoising.clear();
    for (const s of this.decoding.values()) {
      s.stream.dispose();
      s.latents.dispose();
      s.rgb.dispose();
    }
    this.decoding.clear();
  }
}
