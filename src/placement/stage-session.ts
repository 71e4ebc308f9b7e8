import { ReplaySubject, type Observable, type Observer } from 'rxjs';
import { failureEvent } from '../engine/events';
import { OmniError } from '../errors';
import type { ChunkEvent, OmniEvent } from '../request/omni-event';
import { parseSessionAction, SessionActionSchema, type SessionAction } from '../request/session-request';
import type { StageSender } from './connectors/stage-connector';
import { STAGE_ERROR_PAYLOAD, stageErrorOf } from './stage-error';
import type { DiffusionStagePayload } from './stage-payload';
import { sessionPayload, WAN_SESSION_PAYLOAD, type WanSessionSpec } from './wan-session-stages';

/**
 * The front's handle on a world session of a disaggregated topology (the counterpart of `WorldSession`). The
 * session's KV and chunk counter live on the Denoise stage, its decoder state on the Decode stage; this side gates
 * chunks by credits and samples the latest action when it asks for a chunk.
 *
 *  - `events$` (replayed to a late subscriber): one `chunk` event per chunk (RGB24 frames `[C, H, W, 3]`, `rollout` =
 *    chunk index as Denoise counted it, first frame, PTS, action), then `final` after `close()` or `error`.
 *  - `actions`: the latest valid action is used by the next chunk asked for (an invalid one throws
 *    OMNIRX_ERR_INVALID_REQUEST and changes nothing).
 *  - `credits`: one per frame; a chunk of C frames is asked for whenever C credits are available, so chunks are
 *    pipelined through the stages (Decode of chunk k overlaps Denoise of chunk k+1).
 */
export class StageSession {
  private readonly subject = new ReplaySubject<OmniEvent>();
  readonly events$: Observable<OmniEvent> = this.subject.asObservable();
  readonly actions: Observer<unknown>;
  readonly credits: Observer<number>;
  private latest: SessionAction;
  private balance = 0;
  private asked = 0;
  private finished = false;
  private closing = false;
  private readonly openedAt = performance.now();

  constructor(
    readonly id: string,
    readonly spec: Readonly<WanSessionSpec>,
    initialAction: SessionAction,
    private readonly toEncode: StageSender,
    private readonly onEnd: (id: string) => void,
  ) {
    this.latest = initialAction;
    this.actions = { next: (a: unknown) => this.act(a), error: () => undefined, complete: () => undefined };
    this.credits = { next: (n: number) => this.grant(n), error: () => undefined, complete: () => undefined };
  }

  get closed(): boolean {
    return this.finished;
  }

  /** Asks the stages to free the session; `final` follows once Decode confirms. Idempotent. */
  close(): void {
    if (this.finished || this.closing) return;
    this.closing = true;
    this.send(WAN_SESSION_PAYLOAD.close, 'close', {});
  }

  /** Ends the session with `ev` (a failure, or the stage confirming the close). */
  end(ev: OmniEvent): void {
    if (this.finished) return;
    this.finished = true;
    this.subject.next(ev);
    this.subject.complete();
    this.onEnd(this.id);
  }

  /** A payload of this session from the Decode stage. */
  receive(p: DiffusionStagePayload): void {
    if (p.payloadType === STAGE_ERROR_PAYLOAD) {
      const { error } = stageErrorOf(p);
      this.end(failureEvent(this.id, error, { node: 'chunk_rollout' }));
    } else if (p.payloadType === WAN_SESSION_PAYLOAD.closed) {
      this.end({ type: 'final', requestId: this.id, output: { requestId: this.id, artifacts: {}, seed: this.spec.seed, ms: performance.now() - this.openedAt } });
    } else if (p.payloadType === WAN_SESSION_PAYLOAD.frames && !this.finished) {
      this.subject.next(this.chunkEvent(p));
    }
  }

  private chunkEvent(p: DiffusionStagePayload): ChunkEvent {
    const { chunk, firstFrame } = p.metadata as { chunk: number; firstFrame: number };
    const a = SessionActionSchema.parse(p.metadata.action);
    const t = p.tensors.frames;
    const frames = new Uint8Array(t.bytes);
    return {
      type: 'chunk',
      requestId: this.id,
      node: 'chunk_rollout',
      artifact: { kind: 'video', width: this.spec.width, height: this.spec.height, numFrames: this.spec.chunkFrames, fps: this.spec.fps, frames },
      rollout: { chunk, firstFrame, ptsMs: (firstFrame / this.spec.fps) * 1000, action: { key: a.key, ...(a.vector ? { vector: a.vector } : {}), ...(a.id ? { id: a.id } : {}) } },
    };
  }

  private act(input: unknown): void {
    if (this.finished) return;
    const action = parseSessionAction(input);
    this.latest = action;
  }

  private grant(n: number): void {
    if (this.finished) return;
    if (!Number.isSafeInteger(n) || n < 1) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `credits: a grant must be a positive integer (frames), got ${String(n)}`, { param: 'credits' });
    this.balance += n;
    while (this.balance >= this.spec.chunkFrames && !this.closing) {
      this.balance -= this.spec.chunkFrames;
      this.send(WAN_SESSION_PAYLOAD.chunk, `chunk:${this.asked++}`, { action: this.latest });
    }
  }

  private send(type: string, what: string, metadata: Record<string, unknown>): void {
    this.toEncode.put(sessionPayload(this.id, `${this.id}:${what}`, 'encode', 'encode', type, metadata)).catch((e: unknown) => this.end(failureEvent(this.id, e)));
  }
}
