import { PeerRateLimiter, TokenBucket, type PeerLimits } from '../../../transports/webrtc/rate-limit';

/** A clock the test moves by hand (ms). */
function manualClock(start = 0): { now(): number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

describe('TokenBucket', () => {
  it('starts full, takes up to the burst at once, then refills at the rate', () => {
    const clock = manualClock();
    const b = new TokenBucket({ perSecond: 5, burst: 10 }, clock);
    for (let i = 0; i < 10; i++) expect(b.tryTake()).toBe(true);
    expect(b.tryTake()).toBe(false);
    clock.advance(199);
    expect(b.tryTake()).toBe(false);
    clock.advance(1);
    expect(b.tryTake()).toBe(true); // 200 ms at 5/s: one token
    expect(b.tryTake()).toBe(false);
    clock.advance(60_000);
    let taken = 0;
    while (b.tryTake()) taken++;
    expect(taken).toBe(10); // never more than the burst
  });

  it('takes n tokens at once or none', () => {
    const clock = manualClock();
    const b = new TokenBucket({ perSecond: 1000, burst: 1000 }, clock);
    expect(b.tryTake(600)).toBe(true);
    expect(b.tryTake(600)).toBe(false);
    expect(b.tryTake(400)).toBe(true);
    clock.advance(500);
    expect(b.tryTake(500)).toBe(true);
  });

  it('refuses a rate that could never admit anything', () => {
    expect(() => new TokenBucket({ perSecond: 0, burst: 10 })).toThrow(RangeError);
    expect(() => new TokenBucket({ perSecond: 1, burst: 0 })).toThrow(RangeError);
  });
});

describe('PeerRateLimiter', () => {
  const limits: PeerLimits<'action' | 'stats' | 'close'> = {
    messages: { action: { perSecond: 100, burst: 100 }, stats: { perSecond: 5, burst: 10 } },
    invalid: { perSecond: 5, burst: 5 },
    bytes: { perSecond: 1000, burst: 2000 },
    flood: { droppedPerSecond: 50, seconds: 3 },
  };

  it('limits each type on its own, leaves unlisted types alone, and reports at most once per second', () => {
    const clock = manualClock();
    const l = new PeerRateLimiter(limits, clock);
    const verdicts = Array.from({ length: 30 }, () => l.check('stats'));
    expect(verdicts.filter((v) => v.ok)).toHaveLength(10);
    const dropped = verdicts.filter((v) => !v.ok);
    expect(dropped).toHaveLength(20);
    // The first drop reports (one so far), the others within the second stay silent.
    expect(dropped[0]).toEqual({ ok: false, limit: 'stats', report: { dropped: 1, rate: { perSecond: 5, burst: 10 } }, close: false });
    expect(dropped.slice(1).every((v) => !v.ok && v.report === undefined)).toBe(true);
    // Stats are exhausted, actions and close still pass.
    expect(l.check('action').ok).toBe(true);
    expect(l.check('close').ok).toBe(true);
    clock.advance(1000);
    expect(l.check('stats').ok).toBe(true); // refilled 5
    for (let i = 0; i < 4; i++) l.check('stats');
    const next = l.check('stats');
    // The next report counts everything dropped since the last one.
    expect(next).toMatchObject({ ok: false, limit: 'stats', report: { dropped: 20 } });
  });

  it('charges bytes before the type, and refused messages to `invalid`', () => {
    const clock = manualClock();
    const l = new PeerRateLimiter(limits, clock);
    expect(l.checkBytes(1500).ok).toBe(true);
    expect(l.checkBytes(600)).toMatchObject({ ok: false, limit: 'bytes' });
    expect(l.checkBytes(500).ok).toBe(true);
    for (let i = 0; i < 5; i++) expect(l.check('invalid').ok).toBe(true);
    expect(l.check('invalid')).toMatchObject({ ok: false, limit: 'invalid' });
  });

  it('a burst far over the limit is dropped but never closes the peer; a flood sustained for flood.seconds does', () => {
    const clock = manualClock();
    const l = new PeerRateLimiter(limits, clock);
    // One burst of 2,000 within a second: one flood second, then quiet.
    for (let i = 0; i < 2000; i++) {
      const v = l.check('stats');
      expect(!v.ok && v.close).toBe(false);
    }
    clock.advance(1000);
    expect(l.check('action')).toEqual({ ok: true });
    clock.advance(5000);
    expect(l.check('action')).toEqual({ ok: true });
    // 100 stats per second (20× the limit, twice the flood threshold) for 3 s: closed when the third second ends.
    const closes: number[] = [];
    for (let s = 0; s < 4; s++) {
      for (let i = 0; i < 100; i++) {
        const v = l.check('stats');
        if (!v.ok && v.close) closes.push(s);
        clock.advance(10);
      }
    }
    expect(closes[0]).toBe(3);
  });

  it('a flood run is broken by a quiet second', () => {
    const clock = manualClock();
    const l = new PeerRateLimiter(limits, clock);
    const floodSecond = () => {
      for (let i = 0; i < 100; i++) {
        const v = l.check('stats');
        expect(!v.ok && v.close).toBe(false);
        clock.advance(10);
      }
    };
    floodSecond();
    floodSecond();
    clock.advance(1500); // a second with no message at all
    floodSecond();
    floodSecond();
    clock.advance(2500);
    expect(l.check('action').ok).toBe(true);
  });
});
