import { randomUUID } from 'node:crypto';
import { asyncScheduler, Observable, type SchedulerLike, type Subscriber } from 'rxjs';
import { OmniError } from '../errors';
import { resolveParams } from '../engine/admission';
import { failureEvent } from '../engine/events';
import { takeRequestOrAnswer } from '../engine/intake';
import { resolveSessionParams } from '../families/wan/session-params';
import { invalidInput } from '../request/invalid-input';
import type { ModelRegistry } from '../models/registry';
import type { WanT2VPolicies } from '../families/wan/pipeline';
import type { BuiltPipeline } from '../pipeline/spec';
import type { WanT2VContext } from '../families/wan/context';
import { packRequest, unpackOutputs } from '../families/wan/phases';
import type { WanT2VState } from '../families/wan/state';
import type { RequestLimits } from '../request/limits';
import type { OmniEvent } from '../request/omni-event';
import { createOmniRequestSchema, type OmniRequestInput } from '../request/omni-request';
import { createSessionRequestSchema, type SessionAction, type SessionRequestInput } from '../request/session-request';
import { SessionConfigSchema, type SessionConfig } from '../pipeline/session-config';
import { StageSession } from './stage-session';
import { stageAdmittedEvent } from './stage-admitted';
import type { StageProgress } from './stage-progress';
import { chunkActionsOf, ROLLOUT_NODE } from '../engine/session';
import { actionAdaLNInjector } from '../pipeline/policies/conditioning-injector';
import { sessionPayload, WAN_SESSION_PAYLOAD, type WanSessionSpec } from '../families/wan/session-stages';
import { isConnectorClosed, type StageReceiver, type StageSender } from './connectors/stage-connector';
import { STAGE_ERROR_PAYLOAD, stageErrorOf } from './stage-error';
import type { PayloadTensor, StageRole } from '../pipeline/stage-payload';

/** Where a request of a disaggregated pipeline is: still at the front, or held by a stage. */
export type RequestLocation = 'front' | StageRole;

const RANK: Readonly<Record<RequestLocation, number>> = { front: 0, encode: 1, denoise: 2, decode: 3 };

interface Pending {
  subscriber: Subscriber<OmniEvent>;
  started: number;
  seed: number;
  location: RequestLocation;
  /** The Decode stage reported the hand-over of the request's result (with `reportsDelivery`). */
  delivered: boolean;
  /** The request's terminal event, held until `delivered` (with `reportsDelivery`). */
  result?: OmniEvent;
}

export interface StageFrontOptions {
  /** Models with no component loaded: the front reads their specs to resolve requests, never their weights. */
  models: ModelRegistry;
  pipeline: BuiltPipeline<WanT2VContext, WanT2VState>;
  policies: WanT2VPolicies;
  limits: RequestLimits;
  /** Link to the Encode stage. */
  toEncode: StageSender;
  /** Link from the Decode stage (outputs and failures of every request). */
  results: StageReceiver;
  /** Requests in the pipeline at once before new ones are refused with OMNIRX_ERR_QUEUE_FULL. Default 64. */
  maxPending?: number;
  /** World-session settings (deploy config `sessions`). */
  sessions?: SessionConfig;
  /** A request was cancelled (unsubscribed) while in the pipeline: tell the stages to stop its work. */
  onCancel?(requestId: string): void;
  /** Time source of the sessions' idle timers (virtual time in tests). Default `asyncScheduler`. */
  timers?: SchedulerLike;
  /**
   * Decode's hand-overs are reported through `delivered` (stage processes, whose progress travels over IPC, apart from
   * the results link). A result is then held until its report — the report follows every progress event of the
   * request — so `final` comes after all of them. Off in process, where progress is reported before the hand-over.
   */
  reportsDelivery?: boolean;
}

/**
 * The engine side of a disaggregated topology: validates and resolves each request (model defaults, limits, node
 * params) as the monolithic engine does, sends it into Encode → Denoise → Decode, and turns what comes back from
 * Decode into the request's `final` (or `error`) event. `generate` is cold like `Engine.generate`: it emits
 * `queued`, `admitted` once the request is resolved, the stages' progress as they run its nodes (`node_start`,
 * `step` per loop step, `node_end`: see `progress`), then `final` or `error`; failures are events, never stream errors. Unsubscribing cancels the request: the
 * stage holding it stops at its next step boundary (`onCancel`) and nothing more is passed on for it.
 */
export class StageFront {
  private readonly schema;
  private readonly sessionSchema;
  private readonly sessionConfig: SessionConfig;
  private readonly sessions = new Map<string, StageSession>();
  private readonly opening = new Map<string, { resolve: () => void; reject: (e: unknown) => void }>();
  private readonly pending = new Map<string, Pending>();
  private readonly maxPending: number;
  private closed = false;
  private readonly loop: Promise<void>;

  constructor(private readonly o: StageFrontOptions) {
    this.schema = createOmniRequestSchema(o.limits);
    this.sessionSchema = createSessionRequestSchema(o.limits);
    this.sessionConfig = o.sessions ?? SessionConfigSchema.parse({});
    this.maxPending = o.maxPending ?? 64;
    this.loop = this.collect();
  }

  /** The models the front resolves requests with: specs only, no component constructed, no weights loaded. */
  get models(): ModelRegistry {
    return this.o.models;
  }

  /** Requests at the front (not yet taken by Encode), and requests held by a stage. */
  stats(): { queued: number; running: number } {
    let queued = 0;
    for (const p of this.pending.values()) if (p.location === 'front') queued++;
    return { queued, running: this.pending.size - queued };
  }

  /** Requests sent and not yet finished, with where each is. */
  locations(): Map<string, RequestLocation> {
    return new Map([...this.pending].map(([id, p]) => [id, p.location]));
  }

  /** Records that stage `role` now holds request `requestId` (a progress report; a request only moves downstream). */
  moved(requestId: string, role: StageRole): void {
    const p = this.pending.get(requestId);
    if (p !== undefined && RANK[role] > RANK[p.location]) p.location = role;
  }

  /** The Decode stage handed request `requestId`'s result (or failure) on: every progress event of it has been reported. */
  delivered(requestId: string): void {
    const p = this.pending.get(requestId);
    if (p === undefined) return;
    p.delivered = true;
    if (p.result !== undefined) this.finish(requestId, p, p.result);
  }

  /** Fails request `requestId` with `err` (an `error` event) if it is still pending. */
  fail(requestId: string, err: OmniError): void {
    const p = this.pending.get(requestId);
    if (p === undefined) return;
    this.finish(requestId, p, failureEvent(requestId, err));
  }

  /**
   * Opens a world session across the stages (see `StageSession`): resolves it like `Engine.session`, has Encode
   * encode the prompt, Denoise build the session's rollout and KV, Decode its decoder state, and resolves once Decode
   * confirms.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST (invalid input, duplicate id), OMNIRX_ERR_UNSUPPORTED_VALUE (a size
   *   off the model's stride), OMNIRX_ERR_QUEUE_FULL at
   *   `sessions.maxSessions`, the model's load errors, or the error a stage failed the open with.
   */
  async session(input: SessionRequestInput): Promise<StageSession> {
    if (this.closed) throw new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the pipeline is closed');
    const parsed = this.sessionSchema.safeParse(input);
    if (!parsed.success) throw invalidInput(parsed.error);
    const req = parsed.data;
    const model = await this.o.models.get(req.model);
    const resolved = resolveSessionParams(req, model);
    const { width, height } = resolved;
    const sessionId = req.sessionId ?? randomUUID();
    if (this.sessions.has(sessionId)) throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `sessionId '${sessionId}' is already in use`, { param: 'sessionId' });
    const c = this.sessionConfig;
    if (this.sessions.size >= c.maxSessions) throw new OmniError('OMNIRX_ERR_QUEUE_FULL', `${this.sessions.size} world sessions are open, the deployment's bound (sessions.maxSessions); retry later`);
    const spec: WanSessionSpec = {
      model: model.spec.id,
      prompt: req.prompt,
      ...resolved,
      chunkFrames: c.chunkFrames,
      sinkFrames: c.sinkFrames,
      localWindowFrames: c.localWindowFrames,
      steps: c.steps,
      firstChunkSteps: c.firstChunkSteps,
    };
    const expiry = { timeoutMs: c.idleTimeoutMs, timers: this.o.timers ?? asyncScheduler };
    const actionConfig = model.spec.transformer.action;
    const checkAction = (a: SessionAction) => void chunkActionsOf(actionAdaLNInjector, a, c.chunkFrames, actionConfig);
    const session = new StageSession(sessionId, spec, req.initialAction, this.o.toEncode, expiry, (id) => this.sessions.delete(id), checkAction);
    this.sessions.set(sessionId, session);
    try {
      await new Promise<void>((resolve, reject) => {
        this.opening.set(sessionId, { resolve, reject });
        const image: Record<string, PayloadTensor> = req.image === undefined ? {} : { image: { dtype: 'uint8', shape: [height, width, 3], bytes: req.image.data } };
        this.o.toEncode.put(sessionPayload(sessionId, `${sessionId}:open`, 'encode', 'encode', WAN_SESSION_PAYLOAD.open, { session: spec }, image)).catch(reject);
      });
    } catch (e) {
      this.sessions.delete(sessionId);
      throw e;
    } finally {
      this.opening.delete(sessionId);
    }
    session.start();
    return session;
  }

  /**
   * Ends every open session with `err` (a stage holding session state died, or the pipeline closes) and forgets it at
   * once; the stages that still hold its state are asked to free it.
   */
  failSessions(err: OmniError): void {
    for (const o of this.opening.values()) o.reject(err);
    for (const s of [...this.sessions.values()]) {
      s.end(failureEvent(s.id, err, { node: ROLLOUT_NODE }));
      s.release();
    }
  }

  /** A stage's progress on a request or a session (see `StageProgress`); dropped once that has finished. */
  progress(ev: StageProgress): void {
    const p = this.pending.get(ev.requestId);
    if (p !== undefined) p.subscriber.next(ev);
    else this.sessions.get(ev.requestId)?.progress(ev);
  }

  /** Why a valid request cannot enter now (closed pipeline, an id in use, the pending bound), or undefined. */
  private refusal(requestId: string): OmniError | undefined {
    if (this.closed) return new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the pipeline is closed');
    if (this.pending.has(requestId)) return new OmniError('OMNIRX_ERR_INVALID_REQUEST', `requestId '${requestId}' is already in the pipeline`, { param: 'requestId' });
    if (this.pending.size >= this.maxPending) return new OmniError('OMNIRX_ERR_QUEUE_FULL', `${this.pending.size} requests are in the pipeline, its bound; retry later`);
    return undefined;
  }

  /** Runs one request through the stages as a cold event stream. */
  generate(input: OmniRequestInput): Observable<OmniEvent> {
    return new Observable<OmniEvent>((subscriber) => {
      const intake = takeRequestOrAnswer(subscriber, this.schema, input, (id) => this.refusal(id));
      if (intake === undefined) return undefined;
      const { request: req, requestId } = intake;
      const entry: Pending = { subscriber, started: performance.now(), seed: 0, location: 'front', delivered: false };
      this.pending.set(requestId, entry);
      subscriber.next({ type: 'queued', requestId, position: this.pending.size - 1 });
      void this.send(requestId, req, entry);
      return () => {
        if (this.pending.get(requestId) !== entry) return;
        this.pending.delete(requestId);
        this.o.onCancel?.(requestId);
      };
    });
  }

  private async send(requestId: string, req: ReturnType<typeof this.schema.parse>, entry: Pending): Promise<void> {
    try {
      const model = await this.o.models.get(req.model);
      const params = resolveParams(req, model, this.o.limits, this.o.policies);
      this.o.pipeline.activeNodes(params);
      const nodeParams = this.o.pipeline.parseNodeParams(req.nodeParams);
      entry.seed = params.seed;
      if (this.pending.get(requestId) !== entry) return; // cancelled while it was being resolved
      entry.subscriber.next(stageAdmittedEvent(requestId, params, nodeParams, this.o.policies));
      const payload = packRequest({ requestId, params, nodeParams });
      for (;;) {
        try {
          await this.o.toEncode.put(payload);
          break;
        } catch (e) {
          // The Encode link dropped before it accepted the request: the request is still here, send it again.
          if (!(e instanceof OmniError && e.code === 'OMNIRX_ERR_CONNECTOR') || this.closed || this.o.toEncode.state === 'closed') throw e;
          await this.o.toEncode.ready;
        }
      }
      this.moved(requestId, 'encode');
    } catch (e) {
      this.fail(requestId, e instanceof OmniError ? e : new OmniError('OMNIRX_ERR_INTERNAL', (e as Error).message));
    }
  }

  private async collect(): Promise<void> {
    for (;;) {
      let p;
      try {
        p = await this.o.results.get();
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
      let ev: OmniEvent;
      if (p.payloadType === STAGE_ERROR_PAYLOAD) {
        const { error, node } = stageErrorOf(p);
        ev = failureEvent(p.requestId, error, node === undefined ? {} : { node });
      } else {
        try {
          const { artifacts } = unpackOutputs(p);
          ev = { type: 'final', requestId: p.requestId, output: { requestId: p.requestId, artifacts, seed: entry.seed, ms: performance.now() - entry.started } };
        } catch (e) {
          ev = failureEvent(p.requestId, e);
        }
      }
      if (this.o.reportsDelivery === true && !entry.delivered) entry.result = ev;
      else this.finish(p.requestId, entry, ev);
    }
  }

  private finish(requestId: string, entry: Pending, ev: OmniEvent): void {
    this.pending.delete(requestId);
    entry.subscriber.next(ev);
    entry.subscriber.complete();
  }

  /** Hands a session payload to its opener or its session. */
  private route(sessionId: string, p: Parameters<StageSession['receive']>[0]): void {
    const opener = this.opening.get(sessionId);
    if (opener !== undefined) {
      if (p.payloadType === WAN_SESSION_PAYLOAD.ready) opener.resolve();
      else if (p.payloadType === STAGE_ERROR_PAYLOAD) opener.reject(stageErrorOf(p).error);
      return;
    }
    this.sessions.get(sessionId)?.receive(p);
  }

  /** Stops admitting; pending requests fail with OMNIRX_ERR_UNAVAILABLE; closes both links. */
  async close(): Promise<void> {
    this.closed = true;
    for (const id of [...this.pending.keys()]) this.fail(id, new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the pipeline is closed'));
    this.failSessions(new OmniError('OMNIRX_ERR_UNAVAILABLE', 'the pipeline is closed'));
    await this.o.toEncode.close();
    await this.o.results.close();
    await this.loop;
  }
}
