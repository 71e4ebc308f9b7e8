import { defer, ReplaySubject, type Observable, type Observer, type SchedulerLike, type Subscription } from 'rxjs';
import { failureEvent } from '../engine/events';
import { ROLLOUT_NODE, sessionExpired, worldAdmittedEvent, type WorldSessionHandle, type WorldSessionParams } from '../engine/session';
import { OmniError } from '../errors';
import type { ChunkEvent, OmniEvent } from '../request/omni-event';
import { parseSessionAction, SessionActionSchema, type SessionAction } from '../request/session-request';
import type { StageSender } from './connectors/stage-connector';
import { STAGE_ERROR_PAYLOAD, stageErrorOf } from './stage-error';
import type { DiffusionStagePayload } from '../pipeline/stage-payload';
import type { StageProgress } from './stage-progress';
import { sessionPayload, WAN_SESSION_PAYLOAD, type WanSessionSpec } from '../families/wan/session-stages';

/**
 * The front's handle on a world session of a disaggregated topology (the counterpart of `WorldSession`). The
 * session's KV and chunk counter live on the Denoise stage, its decoder state on the Decode stage; this side gates
 * chunks by credits and samples the latest action when it asks for a chunk.
 *
 *  - `events$` (replayed to a late subscriber): `admitted` once the stages have opened the session, then per chunk the `step` events Denoise reports and one `chunk` event
 *    (RGB24 frames `[C, H, W, 3]`, `rollout` = chunk index as Denoise counted it, first frame, PTS, action), then
 *    `final` after `close()`, or `error` (a stage's failure, or OMNIRX_ERR_SESSION_EXPIRED after the idle timeout).
 *  - `actions`: the latest valid action travels with the next chunk request or flush; Denoise starts each chunk with
 *    the latest action it has received. An action is checked here as `WorldSession` checks it — its shape
 *    (OMNIRX_ERR_INVALID_REQUEST) and what the model can take (`checkAction`: OMNIRX_ERR_UNSUPPORTED_VALUE) — and a
 *    refused one throws from `next`, naming the field (`action.key`, `action.vector`, …), and changes nothing.
 *  - `credits`: one per frame; a chunk of C frames is asked for whenever C credits are available, so chunks are
 *    pipelined through the stages (Decode of chunk k overlaps Denoise of chunk k+1).
 *  - `flush()`: sends the latest action to Denoise; a chunk still in its denoise steps there is started again with it
 *    (its dropped attempt is never decoded); a chunk already past its steps is sent, and its successor uses the action.
 *  - idle expiry: no action, credit, flush, subscription or emitted chunk for `idleTimeoutMs` (from the open) ends the
 *    session with OMNIRX_ERR_SESSION_EXPIRED.
 *
 * However the session ends (close, expiry, a stage's failure), the stages are asked to free its state — Denoise's
 * rollout, KV and slabs, Decode's decoder state — and `whenReleased()` resolves once Decode has answered; until then
 * the session counts against `sessions.maxSessions`. Once ended, `actions`, `credits`, `flush()` and `close()` are
 * no-ops.
 */
export class StageSession implements WorldSessionHandle {
  private readonly subject = new ReplaySubject<OmniEvent>();
  readonly events$: Observable<OmniEvent> = defer(() => {
    this.touch(); // a subscription is activity
    return this.subject;
  });
  readonly actions: Observer<unknown>;
  readonly credits: Observer<number>;
  /** The resolved parameters (as `WorldSession` has them; the image of an image-to-world session is not kept). */
  readonly params: Readonly<WorldSessionParams>;
  private latest: SessionAction;
  private balance = 0;
  private asked = 0;
  private emitted = 0;
  private flushes = 0;
  private finished = false;
  /** The stages have been asked to free the session. */
  private closing = false;
  private released = false;
  private idleTimer?: Subscription;
  private readonly openedAt = performance.now();
  private markReleased!: () => void;
  private readonly releasedPromise = new Promise<void>((resolve) => (this.markReleased = resolve));

  /**
   * @param expiry `timeoutMs`: idle time after which the session expires, ms; `timers`: its time source.
   * @param onReleased called once, when the stages have freed the session (or can no longer be asked to).
   * @param checkAction throws an OmniError naming the field for a (well-formed) action the model cannot take.
   */
  constructor(
    readonly id: string,
    readonly spec: Readonly<WanSessionSpec>,
    initialAction: SessionAction,
    private readonly toEncode: StageSender,
    private readonly expiry: { timeoutMs: number; timers: SchedulerLike },
    private readonly onReleased: (id: string) => void,
    private readonly checkAction: (action: SessionAction) => void,
  ) {
    this.latest = initialAction;
    const { prompt, width, height, fps, seed, flowShift, eta, priority } = spec;
    this.params = { sessionId: id, prompt, width, height, fps, seed, flowShift, eta, initialAction, priority };
    this.actions = { next: (a: unknown) => this.act(a), error: () => undefined, complete: () => undefined };
    this.credits = { next: (n: number) => this.grant(n), error: () => undefined, complete: () => undefined };
  }

  get closed(): boolean {
    return this.finished;
  }

  /** Chunks emitted so far; credits granted and not yet spent on an emitted chunk (frames); whether it has ended. */
  stats(): { chunks: number; creditBalance: number; closed: boolean } {
    return { chunks: this.emitted, creditBalance: this.balance + (this.asked - this.emitted) * this.spec.chunkFrames, closed: this.finished };
  }

  /** Emits `admitted` and starts the idle timer (the stages have confirmed the open). */
  start(): void {
    this.subject.next(worldAdmittedEvent(this.id, this.spec.model, this.spec, this.spec));
    this.touch();
  }

  /** Asks the stages to free the session; `final` follows once Decode confirms. Idempotent; no-op once ended. */
  close(): void {
    if (this.finished || this.closing) return;
    this.idleTimer?.unsubscribe();
    this.sendClose();
  }

  /** See the class docs. No-op once the session has ended or is closing. */
  flush(): void {
    if (this.finished || this.closing) return;
    this.touch();
    this.send(WAN_SESSION_PAYLOAD.flush, `flush:${this.flushes++}`, { action: this.latest });
  }

  /** Ends the session with `ev` (a failure, or the stages' answer to the close) and asks the stages to free it. */
  end(ev: OmniEvent): void {
    if (this.finished) return;
    this.finished = true;
    this.idleTimer?.unsubscribe();
    this.subject.next(ev);
    this.subject.complete();
    if (!this.closing) this.sendClose();
  }

  /** Marks the session's state on the stages as freed (or beyond reach). Idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.onReleased(this.id);
    this.markReleased();
  }

  /** Resolves once the session has ended and the stages have freed its state (see `release`). */
  whenReleased(): Promise<void> {
    return this.releasedPromise;
  }

  /** A payload of this session from the Decode stage. */
  receive(p: DiffusionStagePayload): void {
    if (p.requestId === this.closeId) {
      // The stages' answer to the close: `closed`, or a failure (e.g. a restarted stage no longer held the session).
      this.end(p.payloadType === STAGE_ERROR_PAYLOAD ? failureEvent(this.id, stageErrorOf(p).error, { node: ROLLOUT_NODE }) : this.finalEvent());
      this.release();
    } else if (p.payloadType === STAGE_ERROR_PAYLOAD) {
      this.end(failureEvent(this.id, stageErrorOf(p).error, { node: ROLLOUT_NODE }));
    } else if (p.payloadType === WAN_SESSION_PAYLOAD.frames && !this.finished) {
      this.touch(); // frames flowing to a consumer that granted credits ahead is activity too
      this.emitted++;
      this.subject.next(this.chunkEvent(p));
    }
  }

  /** A progress event of this session (Denoise's denoise steps). */
  progress(ev: StageProgress): void {
    if (!this.finished) this.subject.next(ev);
  }

  private get closeId(): string {
    return `${this.id}:close`;
  }

  private finalEvent(): OmniEvent {
    return { type: 'final', requestId: this.id, output: { requestId: this.id, artifacts: {}, seed: this.spec.seed, ms: performance.now() - this.openedAt } };
  }

  private chunkEvent(p: DiffusionStagePayload): ChunkEvent {
    const { chunk, firstFrame } = p.metadata as { chunk: number; firstFrame: number };
    const a = SessionActionSchema.parse(p.metadata.action);
    const t = p.tensors.frames;
    const frames = new Uint8Array(t.bytes);
    return {
      type: 'chunk',
      requestId: this.id,
      node: ROLLOUT_NODE,
      artifact: { kind: 'video', width: this.spec.width, height: this.spec.height, numFrames: this.spec.chunkFrames, fps: this.spec.fps, frames },
      rollout: { chunk, firstFrame, ptsMs: (firstFrame / this.spec.fps) * 1000, action: { key: a.key, ...(a.vector ? { vector: a.vector } : {}), ...(a.id ? { id: a.id } : {}) } },
    };
  }

  private act(input: unknown): void {
    if (this.finished) return;
    const action = parseSessionAction(input);
    this.checkAction(action); // checked against the model now, so a bad action fails here and not on Denoise
    this.touch();
    this.latest = action;
  }

  private grant(n: number): void {
    if (this.finished) return;
    if (!Number.isSafeInteger(n) || n < 1) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `credits: a grant must be a positive integer (frames), got ${String(n)}`, { param: 'credits' });
    this.touch();
    this.balance += n;
    while (this.balance >= this.spec.chunkFrames && !this.closing) {
      this.balance -= this.spec.chunkFrames;
      this.send(WAN_SESSION_PAYLOAD.chunk, `chunk:${this.asked++}`, { action: this.latest });
    }
  }

  /** (Re)arms the idle timer; no-op once ended or closing. */
  private touch(): void {
    if (this.finished || this.closing) return;
    this.idleTimer?.unsubscribe();
    this.idleTimer = this.expiry.timers.schedule(() => this.end(failureEvent(this.id, sessionExpired(this.id, this.expiry.timeoutMs))), this.expiry.timeoutMs);
  }

  /** Asks the stages to free the session; a close that cannot be sent releases it at once. */
  private sendClose(): void {
    this.closing = true;
    this.toEncode.put(sessionPayload(this.id, this.closeId, 'encode', 'encode', WAN_SESSION_PAYLOAD.close, {})).catch((e: unknown) => {
      this.end(failureEvent(this.id, e));
      this.release();
    });
  }

  private send(type: string, what: string, metadata: Record<string, unknown>): void {
    this.toEncode.put(sessionPayload(this.id, `${this.id}:${what}`, 'encode', 'encode', type, metadata)).catch((e: unknown) => this.end(failureEvent(this.id, e)));
  }
}
