/**
 * The runnable examples (examples/*.ts) as a user runs them: compiled strict with the package (`npm run build` puts
 * them in dist/examples, where `omnirx/...` resolves through package.json's `exports`), then run with node. Each must
 * exit 0 and print what its docstring promises. The marble-test example (examples/progress-every.test.ts) runs as a
 * test of its own.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** Runs compiled example `name`; its stdout, after checking that it exited 0. */
function runExample(name: string): string {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'examples', `${name}.js`)], { cwd: ROOT, encoding: 'utf8', timeout: 110_000 });
  if (r.status !== 0) throw new Error(`examples/${name}.ts exited ${r.status ?? r.signal}:\n${r.stderr}`);
  return r.stdout;
}

describe('examples', () => {
  it('custom-pipeline: stages and a loop built into a graph, every 4th step shown, the noise more than halved', () => {
    const out = runExample('custom-pipeline');
    expect(out).toContain('node_start smooth\nstep smooth 4/12\nstep smooth 8/12\nstep smooth 12/12\nnode_end smooth');
    const m = /rms error: ([\d.]+) noisy → ([\d.]+) after 12 passes/.exec(out);
    expect(m).not.toBeNull();
    expect(Number(m![2])).toBeLessThan(Number(m![1]) / 2);
  });

  it('world-session: seven chunks following the scripted actions, with the PTS of each', () => {
    const out = runExample('world-session');
    expect(out).toMatch(/chunk 0 at 0 ms: none, 1 frame\(s\) of 64×64/);
    expect(out).toMatch(/chunk 6 at 750 ms: left/);
    expect(out).toMatch(/7 chunks, actions none right right up up left left/);
  });

  it('loop-beside-requests: the custom loop and a denoising request take turns on one scheduler', () => {
    const out = runExample('loop-beside-requests');
    const turns = Number(/took turns (\d+) times/.exec(out)?.[1]);
    expect(turns).toBeGreaterThanOrEqual(3);
    expect(out).toContain('sharpened 256×256 image');
  });
});
