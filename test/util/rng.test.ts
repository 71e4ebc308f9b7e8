import { Rng } from '../../src/util/rng';

describe('Rng', () => {
  it('is deterministic per seed and differs across seeds', () => {
    const a = new Rng(42).fillNormal(new Float32Array(64));
    const b = new Rng(42).fillNormal(new Float32Array(64));
    const c = new Rng(43).fillNormal(new Float32Array(64));
    expect(Array.from(a)).toEqual(Array.from(b));
    expect(Array.from(a)).not.toEqual(Array.from(c));
  });

  it('produces standard normals (mean ≈ 0, variance ≈ 1 over 200k samples)', () => {
    const x = new Rng(7).fillNormal(new Float32Array(200_000));
    let m = 0;
    for (const v of x) m += v;
    m /= x.length;
    let v2 = 0;
    for (const v of x) v2 += (v - m) ** 2;
    v2 /= x.length;
    expect(Math.abs(m)).toBeLessThan(0.01);
    expect(Math.abs(v2 - 1)).toBeLessThan(0.02);
  });

  it('uniform() stays in (0, 1) and nextU32 in [0, 2^32)', () => {
    const r = new Rng(0);
    for (let i = 0; i < 10_000; i++) {
      const u = r.uniform();
      expect(u).toBeGreaterThan(0);
      expect(u).toBeLessThan(1);
      const n = r.nextU32();
      expect(Number.isInteger(n) && n >= 0 && n < 2 ** 32).toBe(true);
    }
  });
});
