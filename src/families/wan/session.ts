import { randomInt } from 'node:crypto';
import { concat, concatMap, defer, ignoreElements, map, range, tap, type Observable } from 'rxjs';
import type { SlabSession } from '../../cache/slab-pool';
import { OmniError } from '../../errors';
import type { ActionModuleConfig, ChunkActions } from '../../models/action-module';
import type { FamilySessions } from '../../pipeline/family/family';
import type { AdmittedSession, ResolvedSessionParams, SessionEnv, SessionExecutionEvent, SessionImage, SessionRollout } from '../../pipeline/family/session';
import type { ConditioningInjector } from '../../pipeline/policies/conditioning-injector';
import { RequestState } from '../../pipeline/request-state';
import type { StepCost } from '../../pipeline/step-grants';
import { ACTION_KEYS } from '../../request/action';
import type { SessionAction, SessionRequest } from '../../request/session-request';
import { ChunkRollout, type ChunkAttempt } from './chunk-rollout';
import type { WanT2VModel } from './model';
import { pixelStride, vaeScale, type ModelSpec } from './model-spec';
import { encodePrompt } from './text-encode';

/** Which field of `action` a model with action config `cfg` refuses: its key when the model lacks it, else its vector. */
function refusedActionField(action: SessionAction, cfg: ActionModuleConfig | undefined): string {
  const keyRefused = cfg === undefined ? action.key !== 'none' : (ACTION_KEYS as readonly string[]).indexOf(action.key) >= cfg.numKeys;
  return keyRefused ? 'action.key' : 'action.vector';
}

/**
 * The model's actions for one chunk of `frames` latent frames holding `action` on every frame, through `injector`.
 * A model without an action module (`cfg` undefined) takes only "none" (no conditioning to inject). The front checks
 * every action with it, and the rollout (in process or on the Denoise stage) builds each chunk's actions with it.
 * @throws OmniError from the injector (OMNIRX_ERR_UNSUPPORTED_VALUE) when the model cannot take the action, its
 *   `param` naming the refused field (`action.key` or `action.vector`).
 */
export function chunkActionsOf(
  injector: ConditioningInjector,
  action: SessionAction,
  frames: number,
  cfg: ActionModuleConfig | undefined,
): ChunkActions | undefined {
  if (cfg === undefined && action.key === 'none' && action.vector === undefined) return undefined;
  const { key, vector } = action;
  try {
    return injector.chunkActions(vector === undefined ? { key } : { key, vector }, frames, cfg);
  } catch (e) {
    if (e instanceof OmniError && e.param === undefined) throw new OmniError(e.code, e.message, { param: refusedActionField(action, cfg) });
    throw e;
  }
}

/**
 * Applies the model's defaults to a validated session request (size from the request, else the image, else the
 * model; a random seed when none is given; η from the request, else the model's world-session default
 * `defaults.world.eta`, else 0) and checks what only the model can: the size must be a multiple of its pixel stride.
 * @throws OmniError OMNIRX_ERR_UNSUPPORTED_VALUE naming `width` or `height`.
 */
export function resolveSessionParams(req: SessionRequest, spec: ModelSpec): ResolvedSessionParams {
  const width = req.width ?? req.image?.width ?? spec.defaults.width;
  const height = req.height ?? req.image?.height ?? spec.defaults.height;
  const stride = pixelStride(spec);
  for (const [field, v] of [
    ['width', width],
    ['height', height],
  ] as const) {
    if (v % stride !== 0)
      throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `${field} ${v} is not a multiple of ${stride} (VAE scale × patch size of '${spec.id}')`, {
        param: field,
      });
  }
  return {
    width,
    height,
    fps: req.fps,
    seed: req.seed ?? randomInt(0, 2 ** 32),
    flowShift: req.flowShift ?? spec.defaults.flowShift,
    eta: req.eta ?? spec.defaults.world?.eta ?? 0,
    priority: req.priority,
  };
}

/**
 * Image-to-world: chunk 0's clean latents, the image's latent frame `[z, h, w]` repeated over the chunk's C frames
 * (`[z, C, h, w]`).
 */
export function imageChunkLatents(frame: Float32Array, grid: readonly [number, number, number, number]): Float32Array {
  const [z, C, h, w] = grid;
  const latents = new Float32Array(z * C * h * w);
  for (let ch = 0; ch < z; ch++) for (let f = 0; f < C; f++) latents.set(frame.subarray(ch * h * w, (ch + 1) * h * w), (ch * C + f) * h * w);
  return latents;
}

/**
 * One world session's rollout in process (docs/sessions.md): the prompt encoded once (feature cache), the session's
 * chunk-KV slabs, and a `ChunkRollout`. Each chunk is its denoise steps (restartable by a flush while they run), its
 * decode (→ the `chunk` event) and the commit of its clean K/V — after the frames have left, so the commit never
 * delays them. Every one of them is a grant of the pool's step scheduler.
 */
class WanSessionRollout implements SessionRollout {
  private phase: 'idle' | 'denoise' | 'decode' = 'idle';

  constructor(
    private readonly env: SessionEnv & { model: WanT2VModel },
    private readonly session: AdmittedSession,
    private readonly rollout: ChunkRollout,
    private readonly slabs: SlabSession,
    private readonly state: RequestState,
    private readonly image: SessionImage | undefined,
  ) {}

  get denoising(): boolean {
    return this.phase === 'denoise';
  }

  stats(): { nativeBytes: number; slabBytes: number } {
    return { nativeBytes: this.rollout.bytes, slabBytes: this.slabs.bytes };
  }

  chunk$(index: number, action: SessionAction): Observable<SessionExecutionEvent> {
    return index === 0 && this.image !== undefined ? this.imageChunk$(this.image) : this.denoisedChunk$(index, action);
  }

  private denoisedChunk$(index: number, action: SessionAction): Observable<SessionExecutionEvent> {
    const { rollout, session } = this;
    const chunkActions = chunkActionsOf(this.env.conditioning, action, session.chunkFrames, this.env.model.spec.transformer.action);
    this.phase = 'denoise';
    let attempt: ChunkAttempt | undefined;
    const steps$ = range(0, rollout.stepsOf(index)).pipe(
      concatMap(() =>
        this.step('world-denoise', 'transformer', () => {
          attempt ??= rollout.startChunk(chunkActions, index);
          return rollout.denoiseStep(attempt);
        }),
      ),
      map(({ value: r, ms }): SessionExecutionEvent => ({ type: 'step', index: r.index, total: r.total, timestep: r.timestep, sigma: r.sigma, ms })),
    );
    const decode$ = defer(() => {
      this.phase = 'decode';
      return this.step('world-decode', 'vae', () => rollout.decode(attempt!));
    }).pipe(map(({ value }): SessionExecutionEvent => ({ type: 'chunk', chunk: value.chunk, firstFrame: value.firstFrame, frames: value.frames, action })));
    return concat(steps$, decode$, this.commit$());
  }

  /** Chunk 0 of an image session: the encoded image, decoded and committed without denoising (action none). */
  private imageChunk$(image: SessionImage): Observable<SessionExecutionEvent> {
    const { rollout } = this;
    this.phase = 'decode';
    const chunk$ = this.step('world-encode', 'vae_encoder', async () => {
      const frame = await this.state.track(this.env.model.vaeEncoder.encodeImage(image.data, image.width, image.height));
      return rollout.decode(rollout.startCleanChunk(imageChunkLatents(frame, rollout.latentShape)));
    }).pipe(
      map(({ value }): SessionExecutionEvent => ({
        type: 'chunk',
        chunk: value.chunk,
        firstFrame: value.firstFrame,
        frames: value.frames,
        action: { key: 'none' },
      })),
    );
    return concat(chunk$, this.commit$());
  }

  /** Commits the chunk just emitted (one scheduler step), then marks the session idle between chunks. */
  private commit$(): Observable<never> {
    return defer(() => this.step('world-commit', 'transformer', () => this.rollout.commitPending())).pipe(
      ignoreElements(),
      tap({ complete: () => (this.phase = 'idle') }),
    );
  }

  /** One grant of the pool's step scheduler running `run`; emits its value and wall time (ms). */
  private step<T>(phase: string, component: string, run: () => Promise<T>): Observable<{ value: T; ms: number }> {
    const cost: StepCost = { model: `${this.env.model.spec.id}/${component}`, phase, shape: this.rollout.latentShape.join('x'), guidance: 'single' };
    return this.env.steps.step({
      requestId: this.session.sessionId,
      priority: this.session.priority,
      cost,
      run: async () => {
        const t0 = performance.now();
        const value = await run();
        return { value, ms: performance.now() - t0 };
      },
    });
  }

  async release(): Promise<void> {
    await this.rollout.settled();
    this.rollout.dispose();
    this.slabs.release();
    this.state.release();
    await this.state.whenReleased();
  }
}

/** Chunk-KV slabs of one session: sink chunks + window chunks + the chunk in flight, one per DiT layer. */
function slabsOf(
  spec: ModelSpec,
  config: Pick<AdmittedSession, 'chunkFrames' | 'sinkFrames' | 'localWindowFrames'>,
): { sinkChunks: number; windowChunks: number; layers: number } {
  return {
    sinkChunks: config.sinkFrames / config.chunkFrames,
    windowChunks: config.localWindowFrames / config.chunkFrames + 1,
    layers: spec.transformer.numLayers,
  };
}

/** The chunk-KV slab size of a session on `spec` (`ChunkRollout.slabBytes`). */
function slabBytesOf(spec: ModelSpec, s: { chunkFrames: number; width: number; height: number }): number {
  return ChunkRollout.slabBytes(spec, s.chunkFrames, s.width, s.height);
}

/**
 * Opens a session's rollout in process: encodes the prompt (through the feature cache), claims the session's chunk-KV
 * slabs and builds the `ChunkRollout`. A state released while the prompt encodes still frees its tensor once the call returns.
 */
async function openWanSession(env: SessionEnv & { model: WanT2VModel }, session: AdmittedSession, image: SessionImage | undefined): Promise<SessionRollout> {
  const { native, model, caches } = env;
  const state = new RequestState();
  try {
    const context = await encodePrompt({ model, native, featureCache: caches.features }, state, session.prompt);
    const pool = caches.chunkKv(slabBytesOf(model.spec, session));
    const slabs = pool.openSession(session.sessionId, slabsOf(model.spec, session));
    try {
      const rollout = ChunkRollout.create(native, model, { ...session }, context, slabs);
      return new WanSessionRollout(env, session, rollout, slabs, state, image);
    } catch (e) {
      slabs.release();
      throw e;
    }
  } catch (e) {
    state.release();
    throw e;
  }
}

/** World sessions of the Wan family (docs/sessions.md): a block-causal DiT over a sink + sliding-window chunk KV. */
export const wanSessions: FamilySessions<WanT2VModel, ModelSpec> = {
  components: ['tokenizer', 'text_encoder', 'transformer', 'vae', 'vae_encoder'],
  resolve: resolveSessionParams,
  kv(spec, params, config) {
    const s = slabsOf(spec, config);
    return {
      slabBytes: slabBytesOf(spec, { chunkFrames: config.chunkFrames, width: params.width, height: params.height }),
      slabs: s.layers * (s.sinkChunks + s.windowChunks),
    };
  },
  checkAction(spec, action, conditioning, config) {
    chunkActionsOf(conditioning, action, config.chunkFrames, spec.transformer.action);
  },
  open: openWanSession,
};

/** Latent grid `[zDim, C, h, w]` of a session's chunks on `spec`. */
export function sessionLatentGrid(spec: ModelSpec, s: Pick<AdmittedSession, 'chunkFrames' | 'width' | 'height'>): [number, number, number, number] {
  const f = vaeScale(spec);
  return [spec.vae.zDim, s.chunkFrames, s.height / f, s.width / f];
}
