import { asyncScheduler, BehaviorSubject, concat, defer, map, Observable, of, Subject, type Observer, type SchedulerLike, type Subscription } from 'rxjs';
import { creditGate } from '../../operators';
import { OmniError } from '../errors';
import type { SessionExecution, SessionInputs as ExecutorSessionInputs } from '../executor/executor';
import { ROLLOUT_NODE, type AdmittedSession, type ResolvedSessionParams, type SessionExecutionEvent } from '../pipeline/family/session';
import type { OmniEvent } from '../request/omni-event';
import { parseSessionAction, type SessionAction } from '../request/session-request';
import { failureEvent } from './events';

/** The error that ends session `sessionId` after `idleTimeoutMs` ms without an action, credit, flush or frame. */
export function sessionExpired(sessionId: string, idleTimeoutMs: number): OmniError {
  return new OmniError('OMNIRX_ERR_SESSION_EXPIRED', `session '${sessionId}' was idle (no action, credit, flush or frame) for ${idleTimeoutMs} ms`);
}

/**
 * The `admitted` event of world session `s`: the values used and the work per chunk (`steps` denoise steps and one
 * more DiT forward for the commit).
 */
export function worldAdmittedEvent(s: AdmittedSession): OmniEvent {
  return {
    type: 'admitted',
    requestId: s.sessionId,
    model: s.model,
    params: {
      task: 'WORLD',
      width: s.width,
      height: s.height,
      fps: s.fps,
      seed: s.seed,
      flowShift: s.flowShift,
      eta: s.eta,
      priority: s.priority,
      chunkFrames: s.chunkFrames,
      sinkFrames: s.sinkFrames,
      localWindowFrames: s.localWindowFrames,
      stepsPerChunk: s.steps,
      firstChunkSteps: s.firstChunkSteps,
    },
    estimate: { steps: s.steps, forwards: s.steps + 1 },
  };
}

/** A session's resolved parameters (the request with the model's defaults applied), with its id, prompt and first action. */
export interface WorldSessionParams extends ResolvedSessionParams {
  sessionId: string;
  prompt: string;
  initialAction: SessionAction;
}

/** Occupancy of a session, for transports and tests. */
export interface WorldSessionStats {
  /** Chunks emitted so far. */
  chunks: number;
  /** Credits granted but not yet spent on an emitted chunk (frames the consumer can still take). */
  creditBalance: number;
  /** Native bytes the session holds in this process (KV cache, plans, decoder state); 0 once closed or on stages. */
  nativeBytes: number;
  /** Bytes of chunk-KV slabs it holds in this process's pool. */
  slabBytes: number;
  closed: boolean;
}

/**
 * The live inputs of one world session (what the front feeds the executor): credit grants gated into one permit per
 * chunk of `chunkFrames` frames (grants made before the executor subscribes are kept for it), the latest valid action
 * (replayed to a new subscriber, so an action given before the rollout started is not lost), and flushes.
 */
export class SessionInputs implements ExecutorSessionInputs {
  readonly permits$: Observable<number>;
  private readonly actionIn: BehaviorSubject<SessionAction>;
  private readonly creditIn = new Subject<number>();
  private readonly flushIn = new Subject<void>();
  private early = 0;
  private attached = false;
  readonly actions$: Observable<SessionAction>;
  readonly flush$ = this.flushIn.asObservable();

  constructor(chunkFrames: number, initialAction: SessionAction) {
    this.actionIn = new BehaviorSubject(initialAction);
    this.actions$ = this.actionIn.asObservable();
    this.permits$ = defer(() => {
      const early = this.early;
      this.early = 0;
      this.attached = true;
      return early > 0 ? concat(of(early), this.creditIn) : this.creditIn;
    }).pipe(creditGate(chunkFrames));
  }

  grant(n: number): void {
    if (this.attached) this.creditIn.next(n);
    else this.early += n;
  }

  act(action: SessionAction): void {
    this.actionIn.next(action);
  }

  flush(): void {
    this.flushIn.next();
  }

  complete(): void {
    this.actionIn.complete();
    this.creditIn.complete();
    this.flushIn.complete();
  }
}

/**
 * What a transport uses of an open world session (WebSocket, WebRTC), with the semantics documented on
 * `WorldSession`, which implements it (a transport's tests and baselines may stand in their own).
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

/** What a session front needs from its engine. */
export interface WorldSessionDeps {
  /** A session with no action, credit, flush or emitted chunk for this long ends with OMNIRX_ERR_SESSION_EXPIRED, ms. */
  idleTimeoutMs: number;
  /** Time source of the idle timer (virtual time in tests). Default `asyncScheduler`. */
  timers?: SchedulerLike;
  /** Throws an OmniError naming the field (`action.key`, `action.vector`) for an action the model cannot take. */
  checkAction(action: SessionAction): void;
  /** Called once, after the session's state is freed on every stage that held it. */
  onReleased(sessionId: string): void;
}

/**
 * An interactive world-model session (docs/sessions.md): a chunked causal rollout driven by a live action stream, the
 * same object whatever the topology (the rollout runs on the engine's executor).
 *
 *  - `events$`: the session's events — `admitted`, then per chunk its `step` events and one `chunk` event (RGB24
 *    frames `[C, H, W, 3]`, `rollout` = chunk index, first frame, PTS in ms, the action used); it ends with `final`
 *    after `close()`, or `error` (a failure, or OMNIRX_ERR_SESSION_EXPIRED after the idle timeout). Subscribing
 *    starts the session (one consumer); unsubscribing closes it.
 *  - `actions`: feed actions (`SessionActionSchema`: key none/up/down/left/right, optional vector (x, y), optional id).
 *    The latest action is sampled when a chunk starts: an action arriving mid-chunk applies from the next chunk.
 *    An invalid action throws an OmniError (OMNIRX_ERR_INVALID_REQUEST naming the field, or
 *    OMNIRX_ERR_UNSUPPORTED_VALUE for one the model cannot take) from `next` and changes nothing.
 *  - `credits`: the consumer grants one credit per frame it is ready to take; a chunk of C frames starts only when C
 *    credits are available (no unbounded buffering when the consumer is slow). A grant that is not a positive safe
 *    integer throws OMNIRX_ERR_INVALID_REQUEST.
 *  - `flush()`: on a direction change, drop the chunk being denoised (not yet sent) and generate it again from the
 *    last committed state with the latest action. A chunk already decoding is sent (its successor uses the new action).
 *    Call it right after an action that changes direction: the new action then reaches the frames within about one
 *    chunk instead of up to two.
 *  - `close()`: ends the session and frees its KV cache, decoder state and slabs once in-flight native work settles.
 *
 * Every denoise step, commit and decode is one grant of a pool's `StepScheduler`, so sessions and generation requests
 * interleave step by step; a session's outputs depend only on its seed, prompt, image and actions.
 */
export class WorldSession implements WorldSessionHandle {
  readonly events$: Observable<OmniEvent>;
  readonly actions: Observer<unknown>;
  readonly credits: Observer<number>;
  readonly params: Readonly<WorldSessionParams>;

  private balance = 0;
  private emitted = 0;
  private started = false;
  private finished = false;
  private out?: { next: (ev: OmniEvent) => void; complete: () => void };
  private run?: Subscription;
  private idle?: Subscription;
  private readonly openedAt = performance.now();
  private readonly releasedPromise: Promise<void>;
  private markReleased!: () => void;

  constructor(
    private readonly admitted: AdmittedSession,
    private readonly execution: SessionExecution,
    private readonly inputs: SessionInputs,
    private readonly deps: WorldSessionDeps,
  ) {
    const { sessionId, prompt, width, height, fps, seed, flowShift, eta, initialAction, priority } = admitted;
    this.params = { sessionId, prompt, width, height, fps, seed, flowShift, eta, initialAction, priority };
    this.releasedPromise = new Promise<void>((resolve) => (this.markReleased = resolve));
    this.actions = { next: (a: unknown) => this.act(a), error: () => undefined, complete: () => undefined };
    this.credits = { next: (n: number) => this.grant(n), error: () => undefined, complete: () => undefined };
    this.touch(); // a session nobody subscribes to expires too, freeing its reservation
    this.events$ = new Observable<OmniEvent>((subscriber) => {
      if (this.started) {
        subscriber.next(
          failureEvent(this.id, new OmniError('OMNIRX_ERR_INVALID_REQUEST', `session '${this.id}' already has a consumer (events$ can be subscribed once)`)),
        );
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
      subscriber.next(worldAdmittedEvent(this.admitted));
      this.run = this.execution.events$.pipe(map((ev) => this.eventOf(ev))).subscribe({
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
    const { nativeBytes, slabBytes } = this.execution.stats();
    return { chunks: this.emitted, creditBalance: this.balance, nativeBytes, slabBytes, closed: this.finished };
  }

  /** See the class docs. No-op once the session has ended. */
  flush(): void {
    if (this.finished) return;
    this.touch();
    this.inputs.flush();
  }

  /** Ends the session with a `final` event and frees everything. Idempotent. */
  close(): void {
    this.end({
      type: 'final',
      requestId: this.id,
      output: { requestId: this.id, artifacts: {}, seed: this.params.seed, ms: performance.now() - this.openedAt },
    });
  }

  /** Resolves once the session has ended (close, expiry, failure) and its state is freed on every stage that held it. */
  whenReleased(): Promise<void> {
    return this.releasedPromise;
  }

  private act(input: unknown): void {
    if (this.finished) return;
    const action = parseSessionAction(input);
    this.deps.checkAction(action); // checked against the model now, so a bad action fails here and not when a chunk samples it
    this.touch();
    this.inputs.act(action);
  }

  private grant(n: number): void {
    if (this.finished) return;
    if (!Number.isSafeInteger(n) || n < 1)
      throw new OmniError(
        'OMNIRX_ERR_INVALID_REQUEST',
        `credits: a grant must be a positive integer (frames), got ${typeof n === 'number' ? String(n) : `${typeof n} ${JSON.stringify(n) ?? String(n)}`}`,
        { param: 'credits' },
      );
    this.touch();
    this.balance += n;
    this.inputs.grant(n);
  }

  /** (Re)arms the idle timer: no action, credit, flush or emitted chunk for `idleTimeoutMs` ends the session. */
  private touch(): void {
    if (this.finished) return;
    this.idle?.unsubscribe();
    this.idle = (this.deps.timers ?? asyncScheduler).schedule(() => {
      this.end(failureEvent(this.id, sessionExpired(this.id, this.deps.idleTimeoutMs)));
    }, this.deps.idleTimeoutMs);
  }

  /** An execution event as the session's `step` or `chunk` event. */
  private eventOf(ev: SessionExecutionEvent): OmniEvent {
    if (ev.type === 'step') {
      const { index, total, timestep, sigma, ms } = ev;
      return { type: 'step', requestId: this.id, node: ROLLOUT_NODE, index, total, timestep, sigma, ms };
    }
    const p = this.params;
    const C = this.admitted.chunkFrames;
    this.touch(); // frames flowing to a consumer that granted credits ahead is activity too
    this.emitted++;
    this.balance -= C;
    const a = ev.action;
    return {
      type: 'chunk',
      requestId: this.id,
      node: ROLLOUT_NODE,
      artifact: { kind: 'video', width: p.width, height: p.height, numFrames: C, fps: p.fps, frames: ev.frames },
      rollout: {
        chunk: ev.chunk,
        firstFrame: ev.firstFrame,
        ptsMs: (ev.firstFrame / p.fps) * 1000,
        action: { key: a.key, ...(a.vector ? { vector: a.vector } : {}), ...(a.id ? { id: a.id } : {}) },
      },
    };
  }

  /** Emits the terminal event once, stops the rollout and frees everything after in-flight native work settles. */
  private end(ev: OmniEvent): void {
    if (this.finished) return;
    this.finished = true;
    this.idle?.unsubscribe();
    this.run?.unsubscribe();
    this.out?.next(ev);
    this.out?.complete();
    this.inputs.complete();
    void this.execution.close().then(
      () => this.released(),
      () => this.released(),
    );
  }

  private released(): void {
    this.deps.onReleased(this.id);
    this.markReleased();
  }
}
