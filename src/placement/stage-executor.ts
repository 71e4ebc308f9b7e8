import { Observable, Subject, type Subscriber, type Subscription } from 'rxjs';
import { OmniError } from '../errors';
import type { AdmittedRequest, ExecutionEvent, Executor, ExecutorHealth, SessionExecution, SessionInputs } from '../executor/executor';
import { toExecutionFailure } from '../executor/failure';
import type { AdmittedSession, SessionExecutionEvent, SessionImage, StageProgress } from '../pipeline/family/session';
import { RUNTIME_PAYLOAD, SESSION_PAYLOAD, sessionPayload, type DiffusionStagePayload, type PayloadTensor, type StageRole } from '../pipeline/stage-payload';
import { SessionActionSchema, type SessionAction } from '../request/session-request';
import { isConnectorClosed } from './connectors/stage-connector';
import { createInProcessStages } from './in-process-stages';
import { stageErrorOf } from './stage-error';
import type { StageMemory } from './stage-host';
import { packRequest, unpackDecodedChunk, unpackOutputs } from './stage-job';
import type { RequestLocation, StageExecutorOptions, StageHosting, StageSink } from './stage-hosting';
import { StageProcesses } from './stage-processes';

const RANK: Readonly<Record<RequestLocation, number>> = { front: 0, encode: 1, denoise: 2, decode: 3 };

interface Pending {
  subscriber: Subscriber<ExecutionEvent>;
  location: RequestLocation;
  /** The Decode stage reported the hand-over of the request's result (with `reportsDelivery`). */
  delivered: boolean;
  /** The request's terminal event, held until `delivered` (with `reportsDelivery`). */
  result?: ExecutionEvent;
}

/** A world session's link to the stages. */
interface StageSessionState {
  events: Subject<SessionExecutionEvent>;
  /** Ended (by a failure or a close); nothing more is sent or emitted. */
  ended: boolean;
  /** The stages have freed (or lost) its state. */
  released: () => void;
  whenReleased: Promise<void>;
}

/**
 * Runs admitted work on Encode → Denoise → Decode stages (docs/disaggregation.md): in this process over in-process
 * connectors, or as stage processes over shm or TCP links. A request enters Encode as a `omnirx.request` payload
 * (its admitted job), each stage runs its phase of the family's graph and hands the family's payload on, and Decode's
 * `omnirx.outputs` (or an `omnirx.stage_error`) ends it; the stages' progress reaches the engine as the request's
 * node and step events. A world session lives on the stages too: Denoise alone holds its rollout and KV, Decode its
 * decoder state; this side asks for chunks as permits arrive and relays flushes. Cancelling a request stops the stage
 * holding it at its next step boundary.
 */
export class StageExecutor implements Executor, StageSink {
  private readonly pending = new Map<string, Pending>();
  private readonly sessions = new Map<string, StageSessionState>();
  private readonly opening = new Map<string, { resolve: () => void; reject: (e: unknown) => void }>();
  private closed = false;
  private closePromise?: Promise<void>;
  private loop!: Promise<void>;
  private stages!: StageHosting;

  private constructor() {}

  /**
   * Starts the stages of `o.topology` (in this process for the `in-process` connector, else one process per stage).
   * @throws OmniError OMNIRX_ERR_CONFIG for custom policies with stage processes, or a family without a `module` a
   *   stage process could load; OMNIRX_ERR_STAGE_FAILED when a stage process fails to start.
   */
  static async start(o: StageExecutorOptions): Promise<StageExecutor> {
    if (o.topology.connector === 'in-process') return StageExecutor.over((sink) => createInProcessStages(o, sink));
    if (o.customPolicies)
      throw new OmniError('OMNIRX_ERR_CONFIG', 'stage processes run the default policies; custom policies need the monolithic or in-process topology', {
        param: 'topology.connector',
      });
    return StageExecutor.over((sink) => StageProcesses.start(o, sink));
  }

  /** An executor over stages that `host` starts, reporting to it (for stages wired by hand, e.g. with taps). */
  static async over(host: (sink: StageSink) => StageHosting | Promise<StageHosting>): Promise<StageExecutor> {
    const executor = new StageExecutor();
    executor.stages = await host(executor);
    executor.loop = executor.collect();
    return executor;
  }

  /** The running stages (stage processes expose their processes and restarts for supervision). */
  get hosting(): StageHosting {
    return this.stages;
  }

  /** What each stage holds resident. */
  memory(): Promise<Record<StageRole, StageMemory>> {
    return this.stages.memory();
  }

  /** The stages load models themselves (each its own components, the default model before they report ready). */
  async prepare(): Promise<void> {}

  /** The stages' health (`degraded` while a stage process restarts, `down` once they cannot recover); `down` once closed. */
  health(): ExecutorHealth {
    return this.closed ? { status: 'down', reason: 'the pipeline is closed' } : this.stages.health();
  }

  /** Why new work is refused now (closed, or the stages are down), or undefined. */
  private refusal(): OmniError | undefined {
    const h = this.health();
    if (h.status !== 'down') return undefined;
    return this.closed
      ? new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the pipeline is closed')
      : new OmniError('OMNIRX_ERR_STAGE_FAILED', `the pipeline is down: ${h.reason}`);
  }

  /** No cost model here: step times are learned on the Denoise stage. */
  price(): undefined {
    return undefined;
  }

  execute(request: AdmittedRequest): Observable<ExecutionEvent> {
    return new Observable<ExecutionEvent>((subscriber) => {
      const { requestId } = request;
      const refused = this.refusal();
      if (refused !== undefined) {
        subscriber.next({ type: 'failed', failure: toExecutionFailure(refused) });
        subscriber.complete();
        return undefined;
      }
      const entry: Pending = { subscriber, location: 'front', delivered: false };
      this.pending.set(requestId, entry);
      void this.send(requestId, packRequest(request), entry);
      return () => {
        if (this.pending.get(requestId) !== entry) return;
        this.pending.delete(requestId);
        this.stages.cancel(requestId);
      };
    });
  }

  /** Puts a request into Encode, again if the link dropped before Encode accepted it. */
  private async send(requestId: string, payload: DiffusionStagePayload, entry: Pending): Promise<void> {
    try {
      for (;;) {
        try {
          await this.stages.toEncode.put(payload);
          break;
        } catch (e) {
          // The Encode link dropped before it accepted the request: the request is still here, send it again.
          if (!(e instanceof OmniError && e.code === 'OMNIRX_ERR_CONNECTOR') || this.closed || this.stages.toEncode.state === 'closed') throw e;
          await this.stages.toEncode.ready;
        }
      }
      if (this.pending.get(requestId) === entry) this.moved(requestId, 'encode');
    } catch (e) {
      this.fail(requestId, e instanceof OmniError ? e : new OmniError('OMNIRX_ERR_INTERNAL', (e as Error).message));
    }
  }

  moved(requestId: string, role: StageRole): void {
    const p = this.pending.get(requestId);
    if (p !== undefined && RANK[role] > RANK[p.location]) p.location = role;
  }

  delivered(requestId: string): void {
    const p = this.pending.get(requestId);
    if (p === undefined) return;
    p.delivered = true;
    if (p.result !== undefined) this.finish(requestId, p, p.result);
  }

  locations(): Map<string, RequestLocation> {
    return new Map([...this.pending].map(([id, p]) => [id, p.location]));
  }

  fail(requestId: string, err: OmniError): void {
    const p = this.pending.get(requestId);
    if (p !== undefined) this.finish(requestId, p, { type: 'failed', failure: toExecutionFailure(err) });
  }

  progress(ev: StageProgress): void {
    const p = this.pending.get(ev.requestId);
    if (p !== undefined) {
      p.subscriber.next(ev);
      return;
    }
    const s = this.sessions.get(ev.requestId);
    if (s !== undefined && !s.ended && ev.type === 'step') {
      const { index, total, timestep, sigma, ms } = ev;
      s.events.next({ type: 'step', index, total, timestep, sigma, ms });
    }
  }

  private finish(requestId: string, entry: Pending, ev: ExecutionEvent): void {
    this.pending.delete(requestId);
    entry.subscriber.next(ev);
    entry.subscriber.complete();
  }

  /** Takes Decode's results: a request's outputs or failure, or a session's answer. */
  private async collect(): Promise<void> {
    for (;;) {
      let p: DiffusionStagePayload;
      try {
        p = await this.stages.results.get();
      } catch (e) {
        if (isConnectorClosed(e)) return;
        throw e;
      }
      if (p.sessionId !== undefined) {
        this.route(p.sessionId, p);
        continue;
      }
      const entry = this.pending.get(p.requestId);
      if (entry === undefined) continue; // cancelled, or already failed with its stage
      if (p.payloadType === RUNTIME_PAYLOAD.decodedChunk) {
        try {
          entry.subscriber.next({ type: 'chunk', requestId: p.requestId, ...unpackDecodedChunk(p) });
        } catch (e) {
          this.fail(p.requestId, e instanceof OmniError ? e : new OmniError('OMNIRX_ERR_INTERNAL', (e as Error).message));
          this.stages.cancel(p.requestId);
        }
        continue;
      }
      let ev: ExecutionEvent;
      if (p.payloadType === RUNTIME_PAYLOAD.error) {
        const { error, node } = stageErrorOf(p);
        ev = { type: 'failed', failure: toExecutionFailure(error, node === undefined ? {} : { node }) };
      } else {
        try {
          ev = { type: 'output', artifacts: unpackOutputs(p) };
        } catch (e) {
          ev = { type: 'failed', failure: toExecutionFailure(e) };
        }
      }
      if (this.stages.reportsDelivery && !entry.delivered) entry.result = ev;
      else this.finish(p.requestId, entry, ev);
    }
  }

  /**
   * Opens a world session on the stages: Encode encodes its prompt (and image), Denoise builds its rollout and claims
   * its chunk-KV slabs, Decode its decoder state; resolves once Decode confirms.
   * @throws OmniError the error a stage failed the open with; OMNIRX_ERR_UNAVAILABLE once closed.
   */
  async openSession(session: AdmittedSession, image: SessionImage | undefined, inputs: SessionInputs): Promise<SessionExecution> {
    const refused = this.refusal();
    if (refused !== undefined) throw refused;
    const id = session.sessionId;
    let released!: () => void;
    const state: StageSessionState = {
      events: new Subject(),
      ended: false,
      released: () => released(),
      whenReleased: new Promise<void>((r) => (released = r)),
    };
    this.sessions.set(id, state);
    try {
      await new Promise<void>((resolve, reject) => {
        this.opening.set(id, { resolve, reject });
        const tensors: Record<string, PayloadTensor> =
          image === undefined ? {} : { image: { dtype: 'uint8', shape: [image.height, image.width, 3], bytes: image.data } };
        this.stages.toEncode.put(sessionPayload(id, `${id}:open`, 'encode', 'encode', SESSION_PAYLOAD.open, { session }, tensors)).catch(reject);
      });
    } catch (e) {
      this.sessions.delete(id);
      throw e;
    } finally {
      this.opening.delete(id);
    }
    let latest: SessionAction = session.initialAction;
    let asked = 0;
    let flushes = 0;
    const subs: Subscription[] = [inputs.actions$.subscribe((a) => (latest = a))];
    const send = (type: string, what: string, metadata: Record<string, unknown>) => {
      if (state.ended) return;
      this.stages.toEncode.put(sessionPayload(id, `${id}:${what}`, 'encode', 'encode', type, metadata)).catch((e: unknown) => this.endSession(id, e));
    };
    let started = false;
    const events$ = new Observable<SessionExecutionEvent>((subscriber) => {
      if (started) {
        subscriber.error(new OmniError('OMNIRX_ERR_INTERNAL', `session '${id}': its execution was already started or closed`));
        return undefined;
      }
      started = true;
      const sub = state.events.subscribe(subscriber);
      subs.push(inputs.permits$.subscribe(() => send(SESSION_PAYLOAD.chunk, `chunk:${asked++}`, { action: latest })));
      subs.push(inputs.flush$.subscribe(() => send(SESSION_PAYLOAD.flush, `flush:${flushes++}`, { action: latest })));
      return () => sub.unsubscribe();
    });
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> => {
      started = true;
      for (const s of subs) s.unsubscribe();
      closing ??= (async () => {
        if (!state.ended) {
          state.ended = true;
          this.stages.toEncode.put(sessionPayload(id, `${id}:close`, 'encode', 'encode', SESSION_PAYLOAD.close, {})).catch(() => this.releaseSession(id));
        }
        await state.whenReleased;
      })();
      return closing;
    };
    return { events$, stats: () => ({ nativeBytes: 0, slabBytes: 0 }), close };
  }

  /** Ends session `id` with `err` (its events error) and asks the stages to free it. */
  private endSession(id: string, err: unknown): void {
    const s = this.sessions.get(id);
    if (s === undefined || s.ended) return;
    s.ended = true;
    s.events.error(err);
    this.stages.toEncode.put(sessionPayload(id, `${id}:close`, 'encode', 'encode', SESSION_PAYLOAD.close, {})).catch(() => this.releaseSession(id));
  }

  /** Marks session `id`'s state on the stages as freed (or beyond reach). */
  private releaseSession(id: string): void {
    const s = this.sessions.get(id);
    if (s === undefined) return;
    this.sessions.delete(id);
    s.released();
  }

  failSessions(err: OmniError): void {
    for (const o of this.opening.values()) o.reject(err);
    for (const [id, s] of [...this.sessions]) {
      if (!s.ended) {
        s.ended = true;
        s.events.error(err);
      }
      this.releaseSession(id);
    }
  }

  down(err: OmniError): void {
    for (const id of [...this.pending.keys()]) this.fail(id, err);
    this.failSessions(err);
  }

  /** Hands a session payload from Decode to its opener or its session. */
  private route(sessionId: string, p: DiffusionStagePayload): void {
    const opener = this.opening.get(sessionId);
    if (opener !== undefined) {
      if (p.payloadType === SESSION_PAYLOAD.ready) opener.resolve();
      else if (p.payloadType === RUNTIME_PAYLOAD.error) opener.reject(stageErrorOf(p).error);
      return;
    }
    const s = this.sessions.get(sessionId);
    if (s === undefined) return;
    if (p.requestId === `${sessionId}:close`) {
      // The stages' answer to the close: `closed`, or a failure (e.g. a restarted stage no longer held the session).
      this.releaseSession(sessionId);
    } else if (p.payloadType === RUNTIME_PAYLOAD.error) {
      this.endSession(sessionId, stageErrorOf(p).error);
    } else if (p.payloadType === SESSION_PAYLOAD.frames && !s.ended) {
      const { chunk, firstFrame } = p.metadata as { chunk: number; firstFrame: number };
      const frames = p.tensors.frames;
      s.events.next({ type: 'chunk', chunk, firstFrame, frames: new Uint8Array(frames.bytes), action: SessionActionSchema.parse(p.metadata.action) });
    }
  }

  /** Pending requests fail with OMNIRX_ERR_UNAVAILABLE, sessions end; stops the stages. Idempotent. */
  close(): Promise<void> {
    this.closePromise ??= (async () => {
      this.closed = true;
      for (const id of [...this.pending.keys()]) this.fail(id, new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the engine closed before the request finished'));
      this.failSessions(new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the pipeline is closed'));
      await this.stages.close();
      await this.loop;
    })();
    return this.closePromise;
  }
}
