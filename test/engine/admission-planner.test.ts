import { AdmissionPlanner } from '../../src/engine/admission-planner';

const MiB = 1024 * 1024;

describe('AdmissionPlanner', () => {
  it('admits while Σ resident + max peak stays within the budget, and reserves at once', () => {
    const pool = new AdmissionPlanner(100 * MiB);
    expect(pool.usedBytes).toBe(0);
    expect(pool.tryAdmit({ requestId: 'a', residentBytes: 30 * MiB, peakBytes: 20 * MiB })).toEqual({ decision: 'admit' });
    expect(pool.usedBytes).toBe(50 * MiB);
    // one step runs at a time, so only the larger peak counts: 30 + 30 + max(20, 40) = 100
    expect(pool.tryAdmit({ requestId: 'b', residentBytes: 30 * MiB, peakBytes: 40 * MiB })).toEqual({ decision: 'admit' });
    expect(pool.usedBytes).toBe(100 * MiB);
  });

  it('"fits alone but not together" waits, and is admitted after a release', () => {
    const pool = new AdmissionPlanner(100 * MiB);
    expect(pool.tryAdmit({ requestId: 'a', residentBytes: 50 * MiB, peakBytes: 30 * MiB }).decision).toBe('admit');
    const b = { requestId: 'b', residentBytes: 40 * MiB, peakBytes: 30 * MiB }; // 70 alone; 50 + 40 + 30 = 120 together
    expect(pool.tryAdmit(b)).toEqual({ decision: 'wait' });
    expect(pool.usedBytes).toBe(80 * MiB); // a wait reserves nothing
    pool.release('a');
    expect(pool.tryAdmit(b)).toEqual({ decision: 'admit' });
    expect(pool.usedBytes).toBe(70 * MiB);
  });

  it('rejects what can never fit, saying by how much', () => {
    const pool = new AdmissionPlanner(100);
    expect(pool.tryAdmit({ requestId: 'big', residentBytes: 80, peakBytes: 45 })).toEqual({
      decision: 'reject',
      message: 'request big needs 80 resident + 45 peak = 125 bytes, 25 bytes over the pool budget of 100 bytes',
    });
    expect(pool.usedBytes).toBe(0);
  });

  it('rejects a malformed claim and refuses a bad budget', () => {
    const pool = new AdmissionPlanner(100);
    const r = pool.tryAdmit({ requestId: 'x', residentBytes: -1, peakBytes: 0 });
    expect(r.decision).toBe('reject');
    expect(() => new AdmissionPlanner(Number.NaN)).toThrow(RangeError);
    expect(() => new AdmissionPlanner(-5)).toThrow(RangeError);
  });

  it('re-admitting an id replaces its claim when the new one fits; release of an unknown id is a no-op', () => {
    const pool = new AdmissionPlanner(100);
    expect(pool.tryAdmit({ requestId: 'a', residentBytes: 40, peakBytes: 10 }).decision).toBe('admit');
    expect(pool.tryAdmit({ requestId: 'a', residentBytes: 60, peakBytes: 30 }).decision).toBe('admit');
    expect(pool.usedBytes).toBe(90);
    expect(pool.tryAdmit({ requestId: 'b', residentBytes: 15, peakBytes: 5 }).decision).toBe('wait'); // 60 + 15 + 30 = 105
    pool.release('nobody');
    expect(pool.usedBytes).toBe(90);
    pool.release('a');
    expect(pool.usedBytes).toBe(0);
  });
});
