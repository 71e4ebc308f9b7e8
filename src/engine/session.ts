import { concat, concatMap, defer, from, ignoreElements, map, Observable, of, range, Subject, switchMap, tap, type Observer, type SchedulerLike, type Subscription } from 'rxjs';
import { concatMapWithLatest, creditGate } from '../../operators';
import type { CacheManager } from '../cache/cache-manager';
import type { SlabSession } from '../cache/slab-pool';
import { OmniError } from '../errors';
import type { NativeBinding } from '../native/binding';
import type { WanT2VModel } from '../families/wan/model';
import type { SessionConfig } from '../pipeline/session-config';
import type { ConditioningInjector } from '../pipeline/policies/conditioning-injector';
import type { ActionModuleConfig, ChunkActions } from '../models/action-module';
import { ACTION_KEYS } from '../request/action';
import { RequestState } from '../pipeline/request-state';
import { encodePrompt } from '../families/wan/text-encode';
import { ChunkRollout, type ChunkAttempt } from '../families/wan/chunk-rollout';
import type { OmniEvent, RolloutInfo } from '../request/omni-event';
import { parseSessionAction, type SessionAction } from '../request/session-request';
import { failureEvent } from './events';
import type { StepScheduler } from '../executor/scheduler';

/** Name of the session's loop node in `step` and `chunk` events. */
export const ROLLOUT_NODE = 'chunk_rollout';

/** The error that ends session `sessionId` after `idleTimeoutMs` ms without an action, credit, flush or frame. */
export function sessionExpired(sessionId: string, idleTimeoutMs: number): OmniError {
  return new OmniError('OMNIRX_ERR_SESSION_EXPIRED', `session '${sessionId}' was idle (no action, credit, flush or frame) for ${idleTimeoutMs} ms`);
}

/**
 * The `admitted` event of world session `sessionId` on model `modelId`: the values used and the work per chunk
 * (`steps` denoise steps and one more DiT forward for the commit).
 */
export function worldAdmittedEvent(sessionId: string, modelId: string, p: Pick<WorldSessionParams, 'width' | 'height' | 'fps' | 'seed' | 'flowShift' | 'eta' | 'priority'>, c: Pick<SessionConfig, 'chunkFrames' | 'sinkFrames' | 'localWindowFrames' | 'steps' | 'firstChunkSteps'>): OmniEvent {
  return {
    type: 'admitted',
    requestId: sessionId,
    model: modelId,
    params: { task: 'WORLD', width: p.width, height: p.height, fps: p.fps, seed: p.seed, flowShift: p.flowShift, eta: p.eta, priority: p.priority, chunkFrames: c.chunkFrames, sinkFrames: c.sinkFrames, localWindowFrames: c.localWindowFrames, stepsPerChunk: c.steps, firstChunkSteps: c.firstChunkSteps },
    estimate: { steps: c.steps, forwards: c.steps + 1 },
  };
}

/** Which field of `action` a model with action config `cfg` refuses: its key when the model lacks it, else its vector. */
function refusedActionField(action: SessionAction, cfg: ActionModuleConfig | undefined): string {
  const keyRefused = cfg === undefined ? action.key !== 'none' : (ACTION_KEYS as readonly string[]).indexOf(action.key) >= cfg.numKeys;
  return keyRefused ? 'action.key' : 'action.vector';
}

/**
 * The model's actions for one chunk of `frames` latent frames holding `action` on every frame, through `injector`.
 * A model without an action module (`cfg` undefined) takes only "none" (no conditioning to inject). The monolithic
 * session and both the front and the Denoise stage of a disaggregated one check actions with it.
 * @throws OmniError from the injector (OMNIRX_ERR_UNSUPPORTED_VALUE) when the model cannot take the action, its
 *   `param` naming the refused field (`action.key` or `action.vector`).
 */
export function chunkActionsOf(injector: ConditioningInjector, action: SessionAction, frames: number, cfg: ActionModuleConfig | undefined): ChunkActions | undefined {
  if (cfg === undefined && action.key === 'none' && action.vector === undefined) return undefined;
  const { key, vector } = action;
  try {
    return injector.chunkActions(vector === undefined ? { key } : { key, vector }, frames, cfg);
  } catch (e) {
    if (e instanceof OmniError && e.param === undefined) throw new OmniError(e.code, e.message, { param: refusedActionField(action, cfg) });
    throw e;
  }
}

/** A session's resolved parameters (the request with the model's defaults applied). */
export interface WorldSessionParams {
  sessionId: string;
  prompt: string;
  image?: { width: number; height: number; data: Uint8Array };
  width: number;
  height: number;
  /** PTS rate of the emitted frames, frames per second. */
  fps: number;
  seed: number;
  flowShift: number;
  /** Share of fresh noise re-noising each Euler step of every chunk, [0, 1]. */
  eta: number;
  initialAction: SessionAction;
  priority: number;
}

/** What a session uses of its engine. */
export interface WorldSessionDeps {
  native: NativeBinding;
  model: WanT2VModel;
  config: SessionConfig;
  /** The pool's step scheduler: the session's steps interleave with every other request's and session's. */
  steps: StepScheduler;
  /** Time source of the idle timer (virtual time in tests). */
  timers: SchedulerLike;
  caches: CacheManager;
  injector: ConditioningInjector;
  /** Called once, after the session's resources are freed. */
  onClosed: (sessionId: string) => void;
}

/** Occupancy of a session, for transports and tests. */
export interface WorldSessionStats {
  /** Chunks emitted so far. */
  chunks: number;
  /** Credits granted but not yet spent (frames the consumer can still take). */
  creditBalance: number;
  /** Native bytes of the rollout (KV cache, plans, decoder state); 0 once closed. */
  nativeBytes: number;
  /** Bytes of chunk-KV slabs held in the pool. */
  slabBytes: number;
  closed: boolean;
}

/**
 * What a transport uses of an open world session (WebSocket, WebRTC): the monolithic `WorldSession` and the
 * disaggregated front's `StageSession` both implement it, with the semantics documented on `WorldSession`.
 */
export interface WorldSessionHandle {
  readonly id: string;
  /** The resolved parameters; transports read the size (pixels) and PTS rate (frames per second) of the frames. */
  readonly params: Readonly<WorldSessionParams>;
  readonly events$: Observable<OmniEvent>;
  /** Throws an OmniError naming the field (`action.key`, …) for an action the model cannot take; changes nothing then. */
  readonly actions: Observer<unknown>;
  readonly credits: Observer<number>;
  flush(): void;
  close(): void;
  stats(): Pick<WorldSessionStats, 'chunks' | 'creditBalance' | 'closed'>;
}

type Phase = 'idle' | 'denoise' | 'decode';

/**
 * An interactive world-model session (DESIGN.md §8): a chunked causal rollout driven by a live action stream.
 *
 *  - `events$`: the session's events — `admitted`, then per chunk its `step` events and one `chunk` event (RGB24
 *    frames `[C, H, W, 3]`, `rollout` = chunk index, first frame, PTS in ms, the action used); it ends with `final`
 *    after `close()`, or `error` (a failure, or OMNIRX_ERR_SESSION_EXPIRED after the idle timeout). Subscribing
 *    starts the session (one consumer); unsubscribing closes it.
 *  - `actions`: feed actions (`SessionActionSchema`: key none/up/down/left/right, optional vector (x, y), optional id).
 *    The latest action is sampled when a chunk starts: an action arriving mid-chunk applies from the next chunk.
 *    An invalid action throws an OmniError (OMNIRX_ERR_INVALID_REQUEST naming the field) from `next` and changes nothing.
 *  - `credits`: the consumer grants one credit per frame it is ready to take; a chunk of C frames starts only when C
 *    credits are available (no unbounded buffering when the consumer is slow). A grant that is not a positive safe
 *    integer throws OMNIRX_ERR_INVALID_REQUEST.
 *  - `flush()`: on a direction change, drop the chunk being denoised (not yet sent) and generate it again from the
 *    last committed state with the latest action. A chunk already decoding is sent (its successor uses the new action).
 *    Call it right after an action that changes direction: the new action then reaches the frames within about one
 *    chunk instead of up to two.
 *  - `close()`: ends the session and frees its KV cache, decoder state and slabs once in-flight native work settles.
 *
 * Every denoise step, commit and decode is one grant of the pool's `StepScheduler`, so sessions and generation
 * requests interleave step by step; a session's outputs depend only on its seed, prompt, image and actions.
 */
export class WorldSession implements WorldSessionHandle {
  readonly events$: Observable<OmniEvent>;
  readonly actions: Observer<unknown>;
  readonly credits: Observer<number>;

  private readonly state = new RequestState();
  private rollout?: ChunkRollout;
  private slabHandle?: SlabSession;
  private latest: SessionAction;
  private readonly actionIn = new Subject<SessionAction>();
  private readonly creditIn = new Subject<number>();
  private readonly flushIn = new Subject<void>();
  private earlyCredits = 0;
  private gateAttached = false;
  private balance = 0;
  private phase: Phase = 'idle';
  private emitted = 0;
  private started = false;
  private finished = false;
  private released = false;
  private out?: { next: (ev: OmniEvent) => void; complete: () => void };
  private run?: Subscription;
  private idle?: Subscription;
  private readonly openedAt = performance.now();
  private markReleased!: () => void;
  private readonly releasedPromise = new Promise<void>((resolve) => (this.markReleased = resolve));

  constructor(
    readonly params: Readonly<WorldSessionParams>,
    private readonly deps: WorldSessionDeps,
  ) {
    this.latest = params.initialAction;
    this.actions = {
      next: (a: unknown) => this.act(a),
      error: () => undefined,
      complete: () => undefined,
    };
    this.credits = {
      next: (n: number) => this.grant(n),
      error: () => undefined,
      complete: () => undefined,
    };
    this.touch(); // a session nobody subscribes to expires too, freeing its reservation
    this.events$ = new Observable<OmniEvent>((subscriber) => {
      if (this.started) {
        subscriber.next(failureEvent(this.id, new OmniError('OMNIRX_ERR_INVALID_REQUEST', `session '${this.id}' already has a consumer (events$ can be subscribed once)`)));
        subscriber.complete();
        return undefined;
      }
      this.started = true;
      this.out = { next: (ev) => subscriber.next(ev), complete: () => subscriber.complete() };
      if (this.finished) {
        subscriber.next(failureEvent(this.id, new OmniError('OMNIRX_ERR_UNAVAILABLE', `session '${this.id}' is closed`)));
        subscriber.complete();
        return undefined;
      }
      this.touch();
      this.run = concat(of(this.admittedEvent()), defer(() => from(this.open())).pipe(switchMap(() => this.chunks$()))).subscribe({
        next: (ev) => subscriber.next(ev),
        error: (err: unknown) => this.end(failureEvent(this.id, err, { node: ROLLOUT_NODE })),
      });
      return () => this.close();
    });
  }

  get id(): string {
    return this.params.sessionId;
  }

  get closed(): boolean {
    return this.finished;
  }

  stats(): WorldSessionStats {
    return {
      chunks: this.emitted,
      creditBalance: this.balance,
      nativeBytes: this.released ? 0 : (this.rollout?.bytes ?? 0),
      slabBytes: this.slabHandle?.bytes ?? 0,
      closed: this.finished,
    };
  }

  /** See the class docs. No-op once the session has ended. */
  flush(): void {
    if (this.finished) return;
    this.touch();
    if (this.phase === 'denoise') this.flushIn.next();
  }

  /** Ends the session with a `final` event and frees everything. Idempotent. */
  close(): void {
    this.end({ type: 'final', requestId: this.id, output: { requestId: this.id, artifacts: {}, seed: this.params.seed, ms: performance.now() - this.openedAt } });
  }

  private act(input: unknown): void {
    if (this.finished) return;
    const action = parseSessionAction(input);
    this.chunkActions(action); // checked against the model now, so a bad action fails here and not when a chunk samples it
    this.touch();
    this.latest = action;
    this.actionIn.next(action);
  }

  private grant(n: number): void {
    if (this.finished) return;
    if (!Number.isSafeInteger(n) || n < 1) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `credits: a grant must be a positive integer (frames), got ${typeof n === 'number' ? String(n) : `${typeof n} ${JSON.stringify(n) ?? String(n)}`}`, { param: 'credits' });
    this.touch();
    this.balance += n;
    if (this.gateAttached) this.creditIn.next(n);
    else this.earlyCredits += n;
  }

  /** (Re)arms the idle timer: no action, credit, flush or emitted chunk for `idleTimeoutMs` ends the session. */
  private touch(): void {
    if (this.finished) return;
    this.idle?.unsubscribe();
    this.idle = this.deps.timers.schedule(() => {
      this.end(failureEvent(this.id, sessionExpired(this.id, this.deps.config.idleTimeoutMs)));
    }, this.deps.config.idleTimeoutMs);
  }

  private admittedEvent(): OmniEvent {
    return worldAdmittedEvent(this.id, this.deps.model.spec.id, this.params, this.deps.config);
  }

  /** Encodes the prompt (feature cache), claims chunk-KV slabs and builds the rollout; primes it with the image. */
  private async open(): Promise<void> {
    const { native, model, config, caches } = this.deps;
    const p = this.params;
    const context = await encodePrompt({ model, native, featureCache: caches.features }, this.state, p.prompt);
    if (this.finished) return;
    const pool = caches.chunkKv(ChunkRollout.slabBytes(model, config.chunkFrames, p.width, p.height));
    const slabs = pool.openSession(this.id, { sinkChunks: config.sinkFrames / config.chunkFrames, windowChunks: config.localWindowFrames / config.chunkFrames + 1, layers: model.spec.transformer.numLayers });
    this.slabHandle = slabs;
    try {
      this.rollout = ChunkRollout.create(native, model, { ...config, flowShift: p.flowShift, eta: p.eta, width: p.width, height: p.height, seed: p.seed }, context, slabs);
    } catch (e) {
      slabs.release();
      throw e;
    }
  }

  /** The chunk stream: credits → permits → one chunk per permit, with the action sampled at the chunk's start. */
  private chunks$(): Observable<OmniEvent> {
    const credits$ = defer(() => {
      const early = this.earlyCredits;
      this.earlyCredits = 0;
      this.gateAttached = true;
      return early > 0 ? concat(of(early), this.creditIn) : this.creditIn;
    });
    const image = this.params.image;
    return credits$.pipe(
      creditGate(this.deps.config.chunkFrames),
      concatMapWithLatest(
        this.actionIn,
        this.latest,
        (_permit, action, index) => (index === 0 && image !== undefined ? this.imageChunk$(image) : this.chunk$(action)),
        { restart$: this.flushIn },
      ),
    );
  }

  /**
   * One chunk: its denoise steps (restartable by a flush), then decode → `chunk` event, then the commit of its clean
   * K/V to the cache — after the frames have left, so the commit never delays them; the next chunk starts (and samples
   * the latest action) once the commit is done.
   */
  private chunk$(action: SessionAction): Observable<OmniEvent> {
    const rollout = this.rollout!;
    const model = this.deps.model;
    const chunkActions = this.chunkActions(action);
    const chunk = this.emitted;
    this.phase = 'denoise';
    const shape = rollout.latentShape.join('x');
    const dit = { model: `${model.spec.id}/transformer`, shape, guidance: 'single' };
    let attempt: ChunkAttempt | undefined;
    const steps$ = range(0, rollout.stepsOf(chunk)).pipe(
      concatMap(() =>
        this.step('world-denoise', dit, () => {
          attempt ??= rollout.startChunk(chunkActions, chunk);
          return rollout.denoiseStep(attempt);
        }),
      ),
      map(
        ({ value: r, ms }): OmniEvent => ({ type: 'step', requestId: this.id, node: ROLLOUT_NODE, index: r.index, total: r.total, timestep: r.timestep, sigma: r.sigma, ms }),
      ),
    );
    const decode$ = defer(() => {
      this.phase = 'decode';
      return this.step('world-decode', { model: `${model.spec.id}/vae`, shape, guidance: 'single' }, () => rollout.decode(attempt!));
    }).pipe(map(({ value }) => this.chunkEvent(value.firstFrame, value.frames, value.chunk, action)));
    return concat(steps$, decode$, this.commit$());
  }

  /** Commits the chunk just emitted (one scheduler step), then marks the session idle between chunks. */
  private commit$(): Observable<never> {
    const rollout = this.rollout!;
    const model = this.deps.model;
    const key = { model: `${model.spec.id}/transformer`, shape: rollout.latentShape.join('x'), guidance: 'single' };
    return defer(() => this.step('world-commit', key, () => rollout.commitPending())).pipe(
      ignoreElements(),
      tap({ complete: () => (this.phase = 'idle') }),
    );
  }

  /** Image-to-world: chunk 0 is the encoded image (repeated over the chunk's C frames), decoded and committed without denoising. */
  private imageChunk$(image: { width: number; height: number; data: Uint8Array }): Observable<OmniEvent> {
    const rollout = this.rollout!;
    const model = this.deps.model;
    const C = this.deps.config.chunkFrames;
    this.phase = 'decode';
    const shape = rollout.latentShape.join('x');
    const chunk$ = this.step('world-encode', { model: `${model.spec.id}/vae_encoder`, shape, guidance: 'single' }, async () => {
      const frame = await this.state.track(model.vaeEncoder.encodeImage(image.data, image.width, image.height));
      const [z, , h, w] = rollout.latentShape;
      const latents = new Float32Array(z * C * h * w);
      for (let ch = 0; ch < z; ch++) for (let f = 0; f < C; f++) latents.set(frame.subarray(ch * h * w, (ch + 1) * h * w), (ch * C + f) * h * w);
      return rollout.decode(rollout.startCleanChunk(latents));
    }).pipe(map(({ value }) => this.chunkEvent(value.firstFrame, value.frames, value.chunk, { key: 'none' })));
    return concat(chunk$, this.commit$());
  }

  private chunkEvent(firstFrame: number, frames: Uint8Array<ArrayBuffer>, chunk: number, action: SessionAction): OmniEvent {
    const p = this.params;
    const C = this.deps.config.chunkFrames;
    this.touch(); // frames flowing to a consumer that granted credits ahead is activity too
    this.emitted++;
    this.balance -= C;
    const rollout: RolloutInfo = { chunk, firstFrame, ptsMs: (firstFrame / p.fps) * 1000, action: { key: action.key, ...(action.vector ? { vector: action.vector } : {}), ...(action.id ? { id: action.id } : {}) } };
    return { type: 'chunk', requestId: this.id, node: ROLLOUT_NODE, artifact: { kind: 'video', width: p.width, height: p.height, numFrames: C, fps: p.fps, frames }, rollout };
  }

  /** The model's actions for one chunk holding `action` (see {@link chunkActionsOf}). */
  private chunkActions(action: SessionAction) {
    return chunkActionsOf(this.deps.injector, action, this.deps.config.chunkFrames, this.deps.model.spec.transformer.action);
  }

  /** One grant of the pool's step scheduler running `run`; emits its value and wall time (ms). */
  private step<T>(phase: string, key: { model: string; shape: string; guidance: string }, run: () => Promise<T>): Observable<{ value: T; ms: number }> {
    return this.deps.steps.step({
      requestId: this.id,
      priority: this.params.priority,
      cost: { model: key.model, phase, shape: key.shape, guidance: key.guidance },
      run: async () => {
        const t0 = performance.now();
        const value = await run();
        return { value, ms: performance.now() - t0 };
      },
    });
  }

  /** Emits the terminal event once, stops the rollout and frees everything after in-flight native work settles. */
  private end(ev: OmniEvent): void {
    if (this.finished) return;
    this.finished = true;
    this.idle?.unsubscribe();
    this.run?.unsubscribe();
    this.out?.next(ev);
    this.out?.complete();
    this.actionIn.complete();
    this.creditIn.complete();
    this.flushIn.complete();
    void this.release();
  }

  /** Resolves once the session has ended (close, expiry, failure) and its native memory and slabs are freed. */
  whenReleased(): Promise<void> {
    return this.releasedPromise;
  }

  private async release(): Promise<void> {
    const r = this.rollout;
    if (r !== undefined) await r.settled();
    r?.dispose();
    this.slabHandle?.release();
    this.released = true;
    this.state.release();
    await this.state.whenReleased(); // a session closed while it opens still has its prompt encoding in flight
    this.deps.steps.forget(this.id);
    this.deps.onClosed(this.id);
    this.markReleased();
  }
}
