import { concatMap, fromEvent, lastValueFrom, takeUntil } from 'rxjs';
import { OmniError } from '../errors';
import { runGraph } from '../pipeline/graph-runner';
import type { StepGrants } from '../pipeline/step-grants';
import type { AdmittedRequest } from '../executor/executor';
import type { ModelFamily, RequestContext } from '../pipeline/family/family';
import type { RequestState } from '../pipeline/request-state';
import type { NodeSpec } from '../pipeline/spec';
import { isConnectorClosed, type StageReceiver, type StageSender } from './connectors/stage-connector';
import { forwardStageError, stageErrorPayload } from './stage-error';
import { packDecodedChunk } from './stage-job';
import { RUNTIME_PAYLOAD, type DiffusionStagePayload, type StageRole } from '../pipeline/stage-payload';
import type { StageProgress } from '../pipeline/family/session';

/** One request's run of a phase on a stage: its context, fresh state, the phase's nodes and the edges they consume. */
export interface PhaseRun {
  family: ModelFamily;
  job: AdmittedRequest;
  ctx: RequestContext;
  state: RequestState;
  nodes: ReadonlyArray<NodeSpec<RequestContext, RequestState>>;
  consumes: readonly string[];
  abort: AbortController;
}

/** How a stage opens and packs the phases of its requests (`StageHost` builds it from the families' stage phases). */
export interface StagePhases {
  /** Validates an incoming payload and restores it into a fresh run. @throws PayloadError for a payload it cannot take. */
  open(role: StageRole, p: DiffusionStagePayload): Promise<PhaseRun>;
  /** The payload of what the phase produced, for the next stage (after decode: for the front). */
  pack(role: StageRole, run: PhaseRun): DiffusionStagePayload;
  /**
   * Session payloads (world sessions): handled by the family, which puts what they produce through `emit` and reports
   * the session's progress (denoise steps) through `report`.
   */
  session?: {
    claims(p: DiffusionStagePayload): boolean;
    handle(p: DiffusionStagePayload, emit: (out: DiffusionStagePayload) => Promise<void>, report: (ev: StageProgress) => void): Promise<void>;
  };
}

export interface StageWorkerOptions {
  role: StageRole;
  phases: StagePhases;
  /** Payloads for this stage. */
  input: StageReceiver;
  /** Payloads for the next stage (the front, after decode). */
  output: StageSender;
  /**
   * Further consumers of every payload this stage produces (fan-out, e.g. Denoise's latents to Decode and to a
   * latents exporter). Failures are not sent to them. Each link's credits apply, so the slowest consumer throttles
   * the stage like the main output does.
   */
  taps?: readonly StageSender[];
  /** The stage's own step scheduler: the Denoise stage interleaves the loop steps of its requests through it. */
  steps: StepGrants;
  /**
   * Requests this stage works on at once. The input is taken only while fewer are in flight, so a full stage stops
   * taking (its receiver stops granting credits) and a slow next stage, whose credits this stage waits on, throttles it.
   */
  maxInFlight: number;
  /** A request was taken from the input (it is now this stage's). */
  onHeld?(requestId: string): void;
  /** A request's output was accepted by the next stage (it is no longer this stage's). */
  onPassed?(requestId: string): void;
  /** Progress of a request's nodes (node_start, step, node_end) or of a session, as this stage runs them. */
  onProgress?(ev: StageProgress): void;
}

const NEXT: Readonly<Record<StageRole, StageRole>> = { encode: 'denoise', denoise: 'decode', decode: 'decode' };

/**
 * Runs one stage of a disaggregated pipeline (docs/design.md §9): takes payloads from its input, runs the family's phase
 * nodes for each through the graph runner (loop nodes through the stage's StepScheduler, so the Denoise stage
 * interleaves the steps of up to `maxInFlight` requests), and puts the packed result on its output. A request
 * that fails here (bad payload, model error) becomes an `omnirx.stage_error` payload that travels on to the front;
 * error payloads from earlier stages pass through. The stage keeps serving after any one request's failure.
 *
 * A put whose link was lost before the receiver accepted it (the next stage's process died) is retried once the
 * link is ready again: the payload is still here, so the request is requeued, not lost.
 */
export class StageWorker {
  private readonly held = new Set<string>();
  private readonly runs = new Map<string, PhaseRun>();
  /** Held requests cancelled before their run opened. */
  private readonly cancelled = new Set<string>();
  private wake: (() => void) | undefined;
  private closed = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly o: StageWorkerOptions) {
    if (!Number.isSafeInteger(o.maxInFlight) || o.maxInFlight < 1)
      throw new RangeError(`StageWorker: maxInFlight must be a positive integer, got ${o.maxInFlight}`);
  }

  get role(): StageRole {
    return this.o.role;
  }

  /** Ids of the requests this stage holds (taken, output not yet accepted downstream). */
  holding(): string[] {
    return [...this.held];
  }

  /** Starts taking payloads; resolves when the input closes (or `close()`). */
  start(): Promise<void> {
    this.loop ??= this.serve();
    return this.loop;
  }

  private async serve(): Promise<void> {
    for (;;) {
      while (this.held.size >= this.o.maxInFlight && !this.closed) await new Promise<void>((r) => (this.wake = r));
      if (this.closed) return;
      let p: DiffusionStagePayload;
      try {
        p = await this.o.input.get();
      } catch (e) {
        if (isConnectorClosed(e) || this.closed) return;
        throw e;
      }
      this.held.add(p.requestId);
      this.o.onHeld?.(p.requestId);
      void this.handle(p).finally(() => {
        this.held.delete(p.requestId);
        const w = this.wake;
        this.wake = undefined;
        w?.();
      });
    }
  }

  private async handle(p: DiffusionStagePayload): Promise<void> {
    const { role } = this.o;
    if (p.payloadType === RUNTIME_PAYLOAD.error) {
      await this.deliver(p, forwardStageError(p, role, NEXT[role]));
      return;
    }
    const session = this.o.phases.session;
    if (session?.claims(p)) {
      try {
        await session.handle(
          p,
          (out) => this.deliver(p, out),
          (ev) => this.o.onProgress?.(ev),
        );
      } catch (e) {
        await this.deliver(p, stageErrorPayload(p, e, role, NEXT[role]));
      }
      return;
    }
    let run: PhaseRun | undefined;
    let node: string | undefined;
    let out: DiffusionStagePayload;
    try {
      run = await this.o.phases.open(role, p);
      this.runs.set(p.requestId, run);
      if (this.cancelled.has(p.requestId)) run.abort.abort();
      const r = run;
      await lastValueFrom(
        runGraph(
          r.nodes,
          r.consumes,
          r.ctx,
          r.state,
          { scheduler: this.o.steps, requestId: r.ctx.requestId, priority: r.job.params.priority },
          (n) => (node = n),
        ).pipe(
          // Progress is reported; a progressively decoded piece of the video on the last stage travels on to the front
          // ahead of the result (in order, so the result never overtakes it); other chunks (previews) stay here.
          concatMap(async (ev) => {
            if (ev.type !== 'chunk') this.o.onProgress?.(ev);
            else if (this.o.role === 'decode' && ev.decoded !== undefined && ev.artifact.kind === 'video')
              await this.put(this.o.output, p, packDecodedChunk(r.job, { node: ev.node, artifact: ev.artifact, decoded: ev.decoded }));
          }),
          takeUntil(fromEvent(r.abort.signal, 'abort')),
        ),
        { defaultValue: undefined },
      );
      out = this.o.phases.pack(role, r);
    } catch (e) {
      out = stageErrorPayload(p, e, role, NEXT[role], node);
    }
    try {
      // A cancelled request is dropped here: the front has forgotten it, and later stages never see it.
      if (!(this.cancelled.has(p.requestId) || run?.abort.signal.aborted)) await this.deliver(p, out);
    } finally {
      this.cancelled.delete(p.requestId);
      if (run !== undefined) {
        this.runs.delete(p.requestId);
        run.state.release();
      }
    }
  }

  /**
   * Cancels request `requestId` if this stage holds it: its run stops at the next step boundary (its native buffers
   * are freed once the call in flight returns) and nothing is passed on. A request not held here is unaffected.
   */
  cancel(requestId: string): void {
    if (!this.held.has(requestId)) return;
    this.cancelled.add(requestId);
    this.runs.get(requestId)?.abort.abort();
  }

  /** Puts `out` (made from `from`) on the output and the taps; reports the hand-over once the output accepted it. */
  private async deliver(from: DiffusionStagePayload, out: DiffusionStagePayload): Promise<void> {
    const taps = out.payloadType === RUNTIME_PAYLOAD.error ? [] : (this.o.taps ?? []);
    await Promise.all([this.put(this.o.output, from, out), ...taps.map((t) => this.put(t, from, out))]);
    this.o.onPassed?.(from.requestId);
  }

  /** Puts `out` on `link`, retrying while the link is down but not closed. */
  private async put(link: StageSender, from: DiffusionStagePayload, out: DiffusionStagePayload): Promise<void> {
    for (;;) {
      try {
        await link.put(out);
        return;
      } catch (e) {
        if (this.closed || link.state === 'closed') return;
        if (e instanceof OmniError && e.code === 'OMNIRX_ERR_CONNECTOR') {
          await link.ready.catch(() => undefined);
          continue;
        }
        // The payload itself was refused (a family bug): the request fails, the stage goes on.
        out = stageErrorPayload(from, e, this.o.role, NEXT[this.o.role]);
      }
    }
  }

  /** Stops taking payloads and aborts the runs in flight (their states are released as they settle). Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const r of this.runs.values()) r.abort.abort();
    const w = this.wake;
    this.wake = undefined;
    w?.();
    await this.o.input.close();
    await this.o.output.close();
    for (const t of this.o.taps ?? []) await t.close();
  }
}
