/**
 * What a request will hold in a pool's memory: `residentBytes` for its whole life (latents, conditioning, CFG
 * duplicates, cache handles) and `peakBytes` on top of that while one of its steps runs (activations).
 */
export interface MemoryClaim {
  requestId: string;
  residentBytes: number;
  peakBytes: number;
}

export type AdmissionDecision = { decision: 'admit' } | { decision: 'wait' } | { decision: 'reject'; message: string };

/** Σ resident + max peak of a set of claims: the pool's worst moment when one step runs at a time. */
function footprint(claims: Iterable<MemoryClaim>): number {
  let resident = 0;
  let peak = 0;
  for (const c of claims) {
    resident += c.residentBytes;
    peak = Math.max(peak, c.peakBytes);
  }
  return resident + peak;
}

function badBytes(v: number): boolean {
  return !Number.isFinite(v) || v < 0;
}

/**
 * Memory admission for one pool (docs/design.md §4, "memory is the second budget axis"): the admitted requests'
 * Σ resident bytes + the largest peak must stay ≤ `budgetBytes`. Only one step runs at a time on a pool
 * (`concurrency: 1`), so only one request's activation peak is live at once — hence the max, not the sum.
 *
 * Intuition: two requests that each fit alone but together would run out of memory at step 37 are caught here.
 *
 * `tryAdmit` answers
 * - `admit`: the claim fits beside everything already admitted, and is reserved now;
 * - `wait`: it fits in an empty pool but not beside the current set — try again after a `release`;
 * - `reject`: it can never fit (or is malformed); the message says by how many bytes it is over.
 *
 * Admitting an id that is already admitted replaces its claim when the new claim fits (else `wait`, and the old
 * reservation stays). `release` of an unknown id does nothing.
 */
export class AdmissionPlanner {
  private readonly admitted = new Map<string, MemoryClaim>();

  constructor(readonly budgetBytes: number) {
    if (badBytes(budgetBytes)) throw new RangeError(`AdmissionPlanner: budgetBytes must be a finite number ≥ 0, got ${budgetBytes}`);
  }

  /** Decides whether `claim` may start now; see the class docs. */
  tryAdmit(claim: MemoryClaim): AdmissionDecision {
    const { requestId, residentBytes, peakBytes } = claim;
    if (badBytes(residentBytes) || badBytes(peakBytes)) {
      return {
        decision: 'reject',
        message: `request ${requestId}: residentBytes and peakBytes must be finite numbers ≥ 0 (got ${residentBytes} and ${peakBytes})`,
      };
    }
    const alone = residentBytes + peakBytes;
    if (alone > this.budgetBytes) {
      return {
        decision: 'reject',
        message: `request ${requestId} needs ${residentBytes} resident + ${peakBytes} peak = ${alone} bytes, ${alone - this.budgetBytes} bytes over the pool budget of ${this.budgetBytes} bytes`,
      };
    }
    const others = [...this.admitted.values()].filter((c) => c.requestId !== requestId);
    if (footprint([...others, claim]) > this.budgetBytes) return { decision: 'wait' };
    this.admitted.set(requestId, { requestId, residentBytes, peakBytes });
    return { decision: 'admit' };
  }

  /** Frees a request's reservation (finished, failed or cancelled). */
  release(requestId: string): void {
    this.admitted.delete(requestId);
  }

  /** Σ resident + max peak of the admitted requests (0 when none). */
  get usedBytes(): number {
    return footprint(this.admitted.values());
  }
}
