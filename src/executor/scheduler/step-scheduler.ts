import { asyncScheduler, from, Observable, Subject, take, type SchedulerLike, type Subscription } from 'rxjs';
import { OmniError } from '../../errors';
import type { BatchRunner, StepCost, StepGrants, StepRequest } from '../../pipeline/step-grants';
import { CostModel } from './cost-model';

/**
 * Why the granted step (the head of the unit) won, compared with the step that arrived first among those ready:
 * `fifo` — it is that step; `priority` — it has a higher priority; `least-attained-service` — same priority,
 * but its request has received less pool time so far.
 */
export type ScheduleReason = 'priority' | 'least-attained-service' | 'fifo';

/** What the scheduler granted, when, and why: plain data, one per step or batch started. */
export interface ScheduleDecision {
  /** Scheduler time of the grant (ms; frames under a TestScheduler). */
  at: number;
  /** The requests whose steps run in this unit, head first. */
  requestIds: string[];
  /** Set when two or more steps run together through a BatchRunner. */
  batchKey?: string;
  /** Σ of the cost model's per-step predictions for the unit's members. */
  predictedMs: number;
  reason: ScheduleReason;
}

export interface StepSchedulerOptions {
  /** Time source and timers (default asyncScheduler): virtual time in tests. */
  scheduler?: SchedulerLike;
  /** Per-step predictions; receives every measured step time (default: a fresh CostModel). */
  costModel?: CostModel;
  /** Steps (or batches) in flight at once, default 1: native compute is serial on the machine. */
  concurrency?: number;
  /** Bounded wait, counted from the batch head's arrival, for more members of a batch (default 0). */
  batchWindowMs?: number;
}

/** A step between subscription and delivery. `state` only moves forward: ready → running → done. */
interface Entry {
  readonly seq: number;
  readonly req: StepRequest<unknown>;
  readonly arrivedAt: number;
  state: 'ready' | 'running' | 'done';
  /** Emits the result and completes (a no-op once the subscriber has gone). */
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

function maxBatchOf(batch: { runner: BatchRunner }): number {
  const m = Math.floor(batch.runner.maxBatch);
  return m >= 1 ? m : 1;
}

/**
 * The per-pool step scheduler (docs/design.md §4, level 2). The runtime owns every loop; each loop asks for
 * permission to run its next step by subscribing to `step(...)`. The scheduler keeps the set of ready steps of
 * all running requests and, whenever a slot is free (a step boundary), grants the best one; `concurrency: 1`
 * because native compute is serial on the machine. A running step is never interrupted: preemption happens only
 * at step boundaries.
 *
 * Intuition: a one-lane road where every car drives one step and then queues again, and the car that has driven
 * least goes next.
 *
 * ```
 * long  (6 steps × 3 frames):  ---a------b--c--d--e--(f|)
 * short (2 steps × 2 frames):  -----a-(b|)                  (submitted at frame 1)
 * grants (decisions$):         L--S-S-L--L--L--L--L
 * ```
 *
 * **Selection.** Highest `priority` first; among equal priorities the request with the least attained service
 * (the sum of the measured time of its steps so far); ties by arrival (FIFO). Least attained service (LAS, a.k.a.
 * foreground-background) is chosen over earliest-deadline-first because it needs no deadlines and no size
 * predictions to be fair: a job that has run little — a 4-step distilled job, or any job just arriving — goes
 * ahead of one that has run a lot, which approximates shortest-remaining-time-first on heavy-tailed job sizes, and
 * a mispredicted cost can never starve anyone. EDF would need per-request deadlines (the request plane has none
 * yet) and degrades badly under overload (every job misses once one does). Latency classes are expressed as
 * priorities; the cost model is for estimates and admission, not for ranking.
 *
 * **Batching.** When the chosen step carries `batch`, the other ready steps with the same `batch.key` join it, in
 * ranking order, up to `runner.maxBatch`. If that is fewer than `maxBatch` and `batchWindowMs > 0`, the slot is
 * held until `head's arrival + batchWindowMs` (a timer on the given scheduler) or until the batch is full; a
 * step that ranks above the head still runs first. Two or more members run as one `runner.run(items)`; a batch of
 * one runs through its own `run()`. Each result slot goes to its member; an `Error` in a slot errors only that
 * member; a runner that throws, errors, completes without a value or returns the wrong number of results errors
 * every member. A batch's measured time is shared equally by its members (service and cost model alike).
 *
 * **Failure isolation.** A step whose `run()` throws or errors errors only its own observable; the scheduler goes
 * on with the others.
 *
 * **Cancellation.** Unsubscribing before the grant removes the step at once (it never runs; the others move up).
 * Unsubscribing while it runs drops its result; the slot stays busy until the step settles, and the step's time
 * is still accounted.
 *
 * **Re-entrancy.** Dispatch is trampolined: a subscriber that re-submits synchronously from its `next` or
 * `complete` handler only marks the queue dirty, and the outer dispatch loop picks it up — constant stack however
 * many synchronous steps run. All results of a unit are delivered before its slot is offered again, so members
 * of a batch that re-submit at once can batch again.
 *
 * Instances share nothing; every timer is cancelled once no step is waiting for it.
 *
 * ## Example
 * ```ts
 * const pool = new StepScheduler();
 * driveLoop({ init: () => denoise.init(ctx, state), step: (l) => pool.step({ requestId, priority: 0, cost, run: () => denoise.step(ctx, l) }) });
 * ```
 */
export class StepScheduler implements StepGrants {
  /** One decision per granted step or batch, emitted just before it starts (hot; no replay). */
  readonly decisions$: Observable<ScheduleDecision>;

  // Configuration.
  private readonly clock: SchedulerLike;
  /** The cost model pricing this pool's steps (calibrated by every measured step). */
  readonly costModel: CostModel;
  private readonly concurrency: number;
  private readonly batchWindowMs: number;

  // Queue and accounting.
  private readonly decisionSubject = new Subject<ScheduleDecision>();
  /** Ready steps in arrival order. */
  private readonly ready: Entry[] = [];
  /** requestId → attained service (ms). An entry exists from a request's first step until `forget`. */
  private readonly service = new Map<string, number>();
  private seq = 0;
  private inFlight = 0;
  private granted = 0;

  // Dispatch trampoline and the batch-window timer.
  private dispatching = false;
  private dirty = false;
  private wake: { at: number; sub?: Subscription } | undefined;
  /** While a wake timer's dispatch runs: its deadline, so a timer that fires a hair early still counts as on time. */
  private wokeFor: number | undefined;

  constructor(options: StepSchedulerOptions = {}) {
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`StepScheduler: concurrency must be an integer ≥ 1, got ${concurrency}`);
    const window = options.batchWindowMs ?? 0;
    if (!Number.isFinite(window) || window < 0) throw new RangeError(`StepScheduler: batchWindowMs must be a finite number ≥ 0, got ${window}`);
    this.clock = options.scheduler ?? asyncScheduler;
    this.costModel = options.costModel ?? new CostModel();
    this.concurrency = concurrency;
    this.batchWindowMs = window;
    this.decisions$ = this.decisionSubject.asObservable();
  }

  /**
   * Cold: subscribing puts the step in the ready set; when granted it runs, emits the result and completes.
   * Unsubscribing before the grant removes it at once; unsubscribing while it runs drops its result (the pool
   * stays busy until it settles).
   */
  step<R>(req: StepRequest<R>): Observable<R> {
    return new Observable<R>((subscriber) => {
      if (!Number.isFinite(req.priority)) {
        subscriber.error(new RangeError(`StepScheduler: priority of request ${req.requestId} must be a finite number, got ${req.priority}`));
        return undefined;
      }
      const entry: Entry = {
        seq: this.seq++,
        req: req as StepRequest<unknown>,
        arrivedAt: this.clock.now(),
        state: 'ready',
        resolve: (value) => {
          subscriber.next(value as R);
          subscriber.complete();
        },
        reject: (err) => subscriber.error(err),
      };
      if (!this.service.has(req.requestId)) this.service.set(req.requestId, 0);
      this.ready.push(entry);
      this.dispatch();
      return () => {
        // A running step is never interrupted: its subscriber is closed, so its result is simply dropped.
        if (entry.state !== 'ready') return;
        entry.state = 'done';
        this.ready.splice(this.ready.indexOf(entry), 1);
        this.dispatch();
      };
    });
  }

  /** Service attained so far by a request (sum of measured step ms, shared equally by batch members). */
  attained(requestId: string): number {
    return this.service.get(requestId) ?? 0;
  }

  /** Drops a finished request's accounting; a step of it still running when this is called is not credited. */
  forget(requestId: string): void {
    this.service.delete(requestId);
  }

  /** Predicted ms for `steps` more steps of cost key k (the per-request estimate). */
  estimate(k: StepCost, steps: number): number {
    return Math.max(0, steps) * this.costModel.predict(k);
  }

  /** Steps waiting, units (steps or batches) running, and steps granted since construction. */
  stats(): { ready: number; inFlight: number; granted: number } {
    return { ready: this.ready.length, inFlight: this.inFlight, granted: this.granted };
  }

  /**
   * Runs `effect` (if any), then selection passes until nothing more can start. Re-entrant calls (from a
   * subscriber reacting synchronously to a delivery or a decision) run their effect and mark the queue dirty;
   * the outermost call loops — a trampoline, never recursion.
   */
  private dispatch(effect?: () => void): void {
    if (this.dispatching) {
      effect?.();
      this.dirty = true;
      return;
    }
    this.dispatching = true;
    try {
      effect?.();
      do {
        this.dirty = false;
        if (this.pass()) this.dirty = true;
      } while (this.dirty);
    } finally {
      this.dispatching = false;
    }
  }

  /**
   * Phase: selection. Ranks the ready steps and starts at most one unit (a step or a batch) in a free slot;
   * returns whether it did. A batch head still inside its window holds a slot and arms the wake timer. Ends by
   * checking the queue's invariants when nothing more can start.
   */
  private pass(): boolean {
    let slots = this.concurrency - this.inFlight;
    if (slots <= 0 || this.ready.length === 0) {
      this.armWake(undefined);
      this.checkInvariants();
      return false;
    }
    const now = Math.max(this.clock.now(), this.wokeFor ?? -Infinity);
    const ranked = this.rank();
    const taken = new Set<Entry>();
    let wakeAt: number | undefined;
    for (const head of ranked) {
      if (slots === 0) break;
      if (taken.has(head)) continue;
      const first = this.earliestUntaken(ranked, taken);
      const unit = this.gather(head, ranked, taken);
      const holdUntil = this.holdUntil(unit, now);
      if (holdUntil !== undefined) {
        slots -= 1;
        wakeAt = Math.min(wakeAt ?? Infinity, holdUntil);
        continue;
      }
      this.launch(unit, this.reasonOf(head, first));
      return true;
    }
    this.armWake(wakeAt);
    this.checkInvariants();
    return false;
  }

  /** Ready steps best first: priority (desc), attained service of the request (asc), arrival (asc). */
  private rank(): Entry[] {
    return [...this.ready].sort((a, b) => b.req.priority - a.req.priority || this.attained(a.req.requestId) - this.attained(b.req.requestId) || a.seq - b.seq);
  }

  private earliestUntaken(ranked: readonly Entry[], taken: ReadonlySet<Entry>): Entry {
    let first: Entry | undefined;
    for (const e of ranked) if (!taken.has(e) && (first === undefined || e.seq < first.seq)) first = e;
    return first!;
  }

  /** The head alone, or the head plus the best-ranked ready steps with its batch key, up to `maxBatch`. */
  private gather(head: Entry, ranked: readonly Entry[], taken: Set<Entry>): Entry[] {
    const batch = head.req.batch;
    if (batch === undefined) {
      taken.add(head);
      return [head];
    }
    const max = maxBatchOf(batch);
    const unit: Entry[] = [];
    for (const e of ranked) {
      if (unit.length >= max) break;
      if (!taken.has(e) && e.req.batch?.key === batch.key) {
        unit.push(e);
        taken.add(e);
      }
    }
    return unit;
  }

  /** The time until which a not-yet-full batch keeps waiting for members, or undefined to start now. */
  private holdUntil(unit: readonly Entry[], now: number): number | undefined {
    const head = unit[0]!;
    const batch = head.req.batch;
    if (batch === undefined || this.batchWindowMs <= 0 || unit.length >= maxBatchOf(batch)) return undefined;
    const deadline = head.arrivedAt + this.batchWindowMs;
    return now < deadline ? deadline : undefined;
  }

  private reasonOf(head: Entry, first: Entry): ScheduleReason {
    if (head === first) return 'fifo';
    return head.req.priority > first.req.priority ? 'priority' : 'least-attained-service';
  }

  /**
   * Phase: grant. Moves a unit from ready to running, reports the decision, and starts its work — the members'
   * `run()` for a single step, the runner for a batch. Whatever happens, `settle` runs exactly once.
   */
  private launch(unit: Entry[], reason: ScheduleReason): void {
    for (const e of unit) {
      e.state = 'running';
      this.ready.splice(this.ready.indexOf(e), 1);
    }
    this.inFlight += 1;
    this.granted += unit.length;
    const head = unit[0]!;
    const batch = unit.length > 1 ? head.req.batch : undefined;
    const decision: ScheduleDecision = {
      at: this.clock.now(),
      requestIds: unit.map((e) => e.req.requestId),
      ...(batch !== undefined ? { batchKey: batch.key } : {}),
      predictedMs: unit.reduce((ms, e) => ms + this.costModel.predict(e.req.cost), 0),
      reason,
    };
    this.decisionSubject.next(decision);

    const started = this.clock.now();
    let settled = false;
    const settle = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      this.settle(unit, started, outcome);
    };
    let seen = false;
    try {
      const input = batch !== undefined ? batch.runner.run(unit.map((e) => e.req.batch!.item)) : head.req.run();
      from(input)
        .pipe(take(1))
        .subscribe({
          next: (value) => {
            seen = true;
            settle({ ok: true, value });
          },
          error: (error) => settle({ ok: false, error }),
          complete: () => {
            if (!seen)
              settle({
                ok: false,
                error: new OmniError(
                  'OMNIRX_ERR_INTERNAL',
                  `a ${batch !== undefined ? `batch runner (key '${batch.key}')` : `step of request ${head.req.requestId}`} completed without producing a result`,
                ),
              });
          },
        });
    } catch (error) {
      settle({ ok: false, error });
    }
  }

  /** Phase: settle. Accounts the unit's time, frees its slot, delivers the results, then offers the slot again. */
  private settle(unit: readonly Entry[], started: number, outcome: Outcome): void {
    const ms = Math.max(0, this.clock.now() - started);
    const share = ms / unit.length;
    for (const e of unit) {
      const id = e.req.requestId;
      if (this.service.has(id)) this.service.set(id, this.service.get(id)! + share);
      if (outcome.ok) this.costModel.observe(e.req.cost, share);
    }
    this.inFlight -= 1;
    this.dispatch(() => this.deliver(unit, outcome));
  }

  /** Hands each member its result: one value, one slot of a batch's array, or the error. */
  private deliver(unit: readonly Entry[], outcome: Outcome): void {
    for (const e of unit) e.state = 'done';
    if (!outcome.ok) {
      for (const e of unit) e.reject(outcome.error);
      return;
    }
    if (unit.length === 1) {
      unit[0]!.resolve(outcome.value);
      return;
    }
    const results = outcome.value;
    if (!Array.isArray(results) || results.length !== unit.length) {
      const got = Array.isArray(results) ? `${results.length} results` : `a ${typeof results}`;
      const err = new OmniError('OMNIRX_ERR_INTERNAL', `batch runner (key '${unit[0]!.req.batch!.key}') returned ${got} for ${unit.length} items`);
      for (const e of unit) e.reject(err);
      return;
    }
    unit.forEach((e, i) => {
      const r: unknown = results[i];
      if (r instanceof Error) e.reject(r);
      else e.resolve(r);
    });
  }

  /** Keeps exactly one wake timer, for the earliest batch-window deadline, or none. */
  private armWake(at: number | undefined): void {
    if (this.wake?.at === at) return;
    this.wake?.sub?.unsubscribe();
    this.wake = undefined;
    if (at === undefined) return;
    const wake: { at: number; sub?: Subscription } = { at };
    this.wake = wake;
    wake.sub = this.clock.schedule(
      () => {
        if (this.wake !== wake) return;
        this.wake = undefined;
        this.wokeFor = at;
        try {
          this.dispatch();
        } finally {
          this.wokeFor = undefined;
        }
      },
      Math.max(0, at - this.clock.now()),
    );
  }

  /** Every pass that starts nothing ends here; a failure is a bug in this file. */
  private checkInvariants(): void {
    if (this.inFlight < 0 || this.inFlight > this.concurrency)
      throw new Error(`StepScheduler invariant: ${this.inFlight} units in flight with concurrency ${this.concurrency}`);
    for (const e of this.ready)
      if (e.state !== 'ready') throw new Error(`StepScheduler invariant: a ${e.state} step of request ${e.req.requestId} is in the ready set`);
  }
}
