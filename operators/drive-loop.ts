import { from, Observable, type ObservableInput, type Subscription } from 'rxjs';

/** What a loop step reports: `done` ends the loop after this value is emitted. */
export interface StepOutcome {
  readonly done: boolean;
}

/** Why a loop's resources are being released. */
export type ReleaseReason = 'complete' | 'error' | 'unsubscribe';

export interface DriveLoopOptions<L, R extends StepOutcome> {
  /** Creates the loop state (allocations, initial latents). Called once per subscription. */
  init: () => ObservableInput<L>;
  /** Runs ONE step and reports its outcome (first value of the returned input; further values are ignored). */
  step: (loop: L) => ObservableInput<R>;
  /** Runs after the step that reported done, before completion (write final artifacts). */
  finalize?: (loop: L) => ObservableInput<unknown>;
  /**
   * Frees the loop state. Called exactly once per subscription: on completion, on error, or on unsubscribe —
   * and when unsubscribed while a promise-based step is in flight, only after that step settles, so native
   * work that is still running never sees its buffers disappear. `loop` is undefined if init never finished.
   */
  release?: (loop: L | undefined, reason: ReleaseReason) => void;
}

function isPromiseLike(x: unknown): x is PromiseLike<unknown> {
  return typeof x === 'object' && x !== null && typeof (x as { then?: unknown }).then === 'function';
}

/**
 * Drives a loop stage one step at a time: the runtime, not the stage, owns iteration (docs/design.md §3). Each step
 * starts only when the previous one has produced its outcome; each outcome is emitted; the outcome with
 * `done: true` is emitted, then `finalize` runs, then the stream completes.
 *
 * Intuition: a `for` loop over steps that can be cancelled between any two steps.
 *
 * ```
 * init:   a|
 * step:   ---r|          (each step takes 3 frames; the 3rd outcome is done)
 * result: ---r--r--(d|)
 * ```
 *
 * Unsubscribing cancels at the next step boundary: no further step starts, the in-flight step's outcome is
 * dropped, and `release` runs once that step has settled. An error from `init`, a step or `finalize` is
 * forwarded after `release(loop, 'error')`. Synchronous steps are trampolined (no recursion), so a loop of
 * any length runs in constant stack.
 *
 * ## Example
 * ```ts
 * driveLoop({ init: () => denoise.init(ctx, state), step: (l) => denoise.step(ctx, l), release: (l) => l && denoise.release(l) })
 *   .subscribe((outcome) => console.log(outcome));
 * ```
 */
export function driveLoop<L, R extends StepOutcome>(options: DriveLoopOptions<L, R>): Observable<R> {
  return new Observable<R>((subscriber) => {
    let loop: L | undefined;
    let inner: Subscription | undefined;
    let inflight: PromiseLike<unknown> | undefined;
    let released = false;

    const release = (reason: ReleaseReason): void => {
      if (released) return;
      released = true;
      options.release?.(loop, reason);
    };
    const fail = (err: unknown): void => {
      release('error');
      subscriber.error(err);
    };

    /** Subscribes to one input; returns the value if it arrived synchronously, else wires `onAsync`. */
    const first = <T>(input: ObservableInput<T>, onAsync: (v: T) => void): { sync: true; value: T } | { sync: false } => {
      let sync = true;
      let got: { value: T } | undefined;
      inflight = isPromiseLike(input) ? input : undefined;
      let seen = false;
      const sub = from(input).subscribe({
        next: (v) => {
          if (seen) return;
          seen = true;
          inflight = undefined;
          if (sync) {
            got = { value: v };
          } else {
            sub.unsubscribe();
            onAsync(v);
          }
        },
        error: (e) => {
          inflight = undefined;
          fail(e);
        },
        complete: () => {
          if (!seen) fail(new Error('driveLoop: a loop callback completed without producing a value'));
        },
      });
      sync = false;
      if (got !== undefined) {
        sub.unsubscribe();
        return { sync: true, value: got.value };
      }
      inner = sub;
      return { sync: false };
    };

    const finish = (): void => {
      if (options.finalize === undefined) {
        release('complete');
        subscriber.complete();
        return;
      }
      const done = (): void => {
        release('complete');
        subscriber.complete();
      };
      const r = first(options.finalize(loop as L), done);
      if (r.sync) done();
    };

    /** Emits an outcome; returns true when the loop should go on. */
    const handle = (outcome: R): boolean => {
      subscriber.next(outcome);
      if (subscriber.closed) return false;
      if (outcome.done) {
        finish();
        return false;
      }
      return true;
    };

    const pump = (): void => {
      while (!subscriber.closed) {
        let r: ReturnType<typeof first<R>>;
        try {
          r = first(options.step(loop as L), (outcome) => {
            if (handle(outcome)) pump();
          });
        } catch (e) {
          fail(e);
          return;
        }
        if (!r.sync || !handle(r.value)) return;
      }
    };

    try {
      const r = first(options.init(), (l) => {
        loop = l;
        pump();
      });
      if (r.sync) {
        loop = r.value;
        pump();
      }
    } catch (e) {
      fail(e);
    }

    return () => {
      inner?.unsubscribe();
      if (released) return;
      const pending = inflight;
      if (pending !== undefined) {
        pending.then(
          () => release('unsubscribe'),
          () => release('unsubscribe'),
        );
      } else {
        release('unsubscribe');
      }
    };
  });
}
