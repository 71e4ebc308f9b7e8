import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import { PNG } from 'pngjs';
import { Observable } from 'rxjs';
import {
  DEFAULT_PROMPT,
  NUMERIC_FLAGS,
  defaultOutPath,
  parseGenerateArgs,
  parseNumericFlag,
  runGenerate,
  type EngineLike,
  type GenerateDeps,
} from '../../src/cli/generate';
import { OmniError } from '../../src/errors';
import { main } from '../../src/cli/main';
import { formatEventLine } from '../../src/cli/progress';
import type { VideoArtifact } from '../../src/request/artifacts';
import type { OmniEvent } from '../../src/request/omni-event';
import type { OmniRequestInput } from '../../src/request/omni-request';
import { expectH264Mp4, syntheticVideo } from '../media/helpers';

class Sink extends Writable {
  text = '';
  constructor(readonly isTTY = false) {
    super();
  }
  override _write(chunk: Buffer | string, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.text += chunk.toString();
    cb();
  }
  get lines(): string[] {
    return this.text.split('\n').filter((l) => l !== '');
  }
}

const RID = 'req-test-1';

function happyEvents(video: VideoArtifact, steps = 4): OmniEvent[] {
  const evs: OmniEvent[] = [
    { type: 'queued', requestId: RID, position: 0 },
    {
      type: 'admitted',
      requestId: RID,
      model: 'fake-tiny',
      params: { width: video.width, height: video.height, numFrames: video.numFrames, fps: video.fps, steps },
      estimate: { steps, forwards: steps * 2 },
    },
    { type: 'node_start', requestId: RID, node: 'text_encode' },
    { type: 'node_end', requestId: RID, node: 'text_encode', ms: 3.25 },
    { type: 'node_start', requestId: RID, node: 'denoise' },
  ];
  for (let i = 0; i < steps; i++) {
    evs.push({ type: 'step', requestId: RID, node: 'denoise', index: i, total: steps, timestep: 1000 * (1 - i / steps), sigma: 1 - i / steps, ms: 40 + i });
  }
  evs.push(
    { type: 'node_end', requestId: RID, node: 'denoise', ms: 170 },
    { type: 'node_start', requestId: RID, node: 'vae_decode' },
    { type: 'node_end', requestId: RID, node: 'vae_decode', ms: 12 },
    { type: 'final', requestId: RID, output: { requestId: RID, artifacts: { video }, seed: 42, ms: 200 } },
  );
  return evs;
}

interface FakeEngine extends EngineLike {
  requests: OmniRequestInput[];
  closed: number;
  unsubscribed: number;
}

/** An engine whose every request replays `events` asynchronously (one per macrotask), then completes. */
function fakeEngine(events: OmniEvent[] | ((req: OmniRequestInput) => Observable<OmniEvent>), opts: { complete?: boolean } = {}): FakeEngine {
  const engine: FakeEngine = {
    requests: [],
    closed: 0,
    unsubscribed: 0,
    generate(req) {
      engine.requests.push(req);
      if (typeof events === 'function') return events(req);
      return new Observable<OmniEvent>((sub) => {
        let i = 0;
        let timer: NodeJS.Timeout | undefined;
        const next = () => {
          if (i < events.length) {
            sub.next(events[i++]!);
            timer = setTimeout(next, 0);
          } else if (opts.complete !== false) sub.complete();
        };
        timer = setTimeout(next, 0);
        return () => {
          engine.unsubscribed += 1;
          if (timer) clearTimeout(timer);
        };
      });
    },
    async close() {
      engine.closed += 1;
    },
    models: {
      get: async (id) => {
        if (id !== undefined && id !== 'fake-tiny') throw new OmniError('OMNIRX_ERR_UNKNOWN_MODEL', `no model '${id}'`, { param: 'model' });
        return { spec: { defaults: { fps: 8 } } };
      },
    },
  };
  return engine;
}

interface Run {
  code: number;
  stdout: Sink;
  stderr: Sink;
  engine: FakeEngine;
  created: number;
}

async function run(argv: string[], engine: FakeEngine, extra: Partial<GenerateDeps> & { tty?: boolean } = {}): Promise<Run> {
  const stdout = new Sink(extra.tty ?? false);
  const stderr = new Sink();
  let created = 0;
  const code = await runGenerate(argv, {
    createEngine: async () => {
      created += 1;
      return engine;
    },
    stdout,
    stderr,
    isTTY: extra.tty ?? false,
    ...extra,
  });
  return { code, stdout, stderr, engine, created };
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'omnirx-cli-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('omnirx generate: success', () => {
  it('runs the request, prints plain progress lines and writes a valid MP4', async () => {
    const video = syntheticVideo(64, 64, 16, 8);
    const out = path.join(dir, 'ok', 'clip.mp4');
    const r = await run(['--prompt', 'a cat', '--steps', '4', '--width', '64', '--out', out], fakeEngine(happyEvents(video)));
    expect(r.stderr.text).toBe('');
    expect(r.code).toBe(0);
    expect(r.engine.requests).toStrictEqual([{ task: 'T2V', inputs: { prompt: 'a cat' }, diffusion: { numInferenceSteps: 4, width: 64 } }]);
    expect(r.engine.closed).toBe(1);
    const lines = r.stdout.lines;
    expect(lines[0]).toBe(`queued ${RID} (position 0)`);
    expect(lines).toContain('admitted model=fake-tiny steps=4 forwards=8 width=64 height=64 numFrames=16 fps=8 steps=4');
    expect(lines).toContain('node text_encode started');
    expect(lines).toContain('node text_encode done 3.3 ms');
    expect(lines).toContain('step 1/4 sigma=1.0000 40.0 ms');
    expect(lines).toContain('step 4/4 sigma=0.2500 43.0 ms');
    expect(lines).toContain('final seed=42 200.0 ms');
    expect(lines.filter((l) => l.startsWith('step '))).toHaveLength(4);
    expect(lines.at(-1)).toBe(`wrote ${out} (16 frames, 64x64, 8 fps)`);
    // eslint-disable-next-line no-control-regex -- the terminal escape (ESC [) is what must be absent
    expect(r.stdout.text).not.toMatch(/\x1b\[/); // no escape codes when not a TTY
    expectH264Mp4(out, { width: 64, height: 64, frames: 16, fps: 8 });
  });

  it('--task T2I writes the image as PNG: out/omnirx-<requestId>.png by default, or the --out .png; an --out .mp4 still takes it as one frame', async () => {
    const pixels = new Uint8Array(24 * 16 * 3).map((_, i) => (i * 29 + 7) & 255);
    const image = { kind: 'image' as const, width: 24, height: 16, pixels };
    const events = (): OmniEvent[] => [
      { type: 'queued', requestId: RID, position: 0 },
      { type: 'final', requestId: RID, output: { requestId: RID, artifacts: { image }, seed: 42, ms: 20 } },
    ];
    const cwd = process.cwd();
    const work = path.join(dir, 't2i');
    mkdirSync(work, { recursive: true });
    process.chdir(work);
    try {
      const r = await run(['--task', 'T2I'], fakeEngine(events()));
      expect(r.stderr.text).toBe('');
      expect(r.code).toBe(0);
      const expected = path.join(work, 'out', `omnirx-${RID}.png`);
      expect(r.stdout.lines.at(-1)).toBe(`wrote ${expected} (24x16 PNG)`);
      const png = PNG.sync.read(readFileSync(expected));
      expect([png.width, png.height]).toEqual([24, 16]);
      // RGBA as decoded: every pixel's RGB is the artifact's, alpha opaque
      const rgb = Uint8Array.from({ length: 24 * 16 * 3 }, (_, i) => png.data[Math.floor(i / 3) * 4 + (i % 3)]);
      expect(Buffer.from(rgb).equals(Buffer.from(pixels))).toBe(true);
      expect(readdirSync(path.join(work, 'out'))).toEqual([`omnirx-${RID}.png`]); // no partial file left beside it
    } finally {
      process.chdir(cwd);
    }
    const named = path.join(dir, 't2i', 'named.png');
    expect((await run(['--task', 'T2I', '--out', named], fakeEngine(events()))).stdout.lines.at(-1)).toBe(`wrote ${named} (24x16 PNG)`);
    const mp4 = path.join(dir, 't2i', 'one-frame.mp4');
    const r = await run(['--task', 'T2I', '--out', mp4], fakeEngine(events()));
    expect(r.stdout.lines.at(-1)).toBe(`wrote ${mp4} (1 frames, 24x16, 1 fps)`);
    expectH264Mp4(mp4, { width: 24, height: 16, frames: 1, fps: 1 });
  });

  it('sends only task and the default prompt when no flags are given, and writes out/omnirx-<requestId>.mp4', async () => {
    const cwd = process.cwd();
    const work = path.join(dir, 'defaults');
    mkdirSync(work, { recursive: true });
    process.chdir(work);
    try {
      const r = await run([], fakeEngine(happyEvents(syntheticVideo(32, 32, 4, 4), 2)));
      expect(r.stderr.text).toBe('');
      expect(r.code).toBe(0);
      expect(r.engine.requests).toStrictEqual([{ task: 'T2V', inputs: { prompt: DEFAULT_PROMPT } }]);
      const expected = path.join(work, 'out', `omnirx-${RID}.mp4`);
      expect(r.stdout.lines.at(-1)).toBe(`wrote ${expected} (4 frames, 32x32, 4 fps)`);
      expect(path.isAbsolute(r.stdout.lines.at(-1)!.split(' ')[1]!)).toBe(true);
      expectH264Mp4(expected, { width: 32, height: 32, frames: 4, fps: 4 });
    } finally {
      process.chdir(cwd);
    }
  });

  it('maps every flag to its request field', async () => {
    const out = path.join(dir, 'all.mp4');
    const r = await run(
      [
        '--prompt',
        'p',
        '--negative-prompt',
        'blurry',
        '--steps',
        '7',
        '--seed',
        '0',
        '--width',
        '32',
        '--height',
        '16',
        '--frames',
        '4',
        '--fps',
        '4',
        '--guidance-scale',
        '5.5',
        '--flow-shift=3',
        '--model',
        'wan-tiny',
        '--task',
        'T2V',
        '--out',
        out,
        '--guidance-interval',
        '0,0.25',
        '--eta',
        '0.5',
      ],
      fakeEngine(happyEvents(syntheticVideo(32, 16, 4, 4), 1)),
    );
    expect(r.stderr.text).toBe('');
    expect(r.code).toBe(0);
    expect(r.engine.requests[0]).toStrictEqual({
      task: 'T2V',
      model: 'wan-tiny',
      inputs: { prompt: 'p', negativePrompt: 'blurry' },
      diffusion: {
        numInferenceSteps: 7,
        seed: 0,
        width: 32,
        height: 16,
        numFrames: 4,
        fps: 4,
        guidanceScale: 5.5,
        flowShift: 3,
        eta: 0.5,
        guidanceInterval: [0, 0.25],
      },
    });
  });

  it('draws a progress bar on a TTY and still ends with the wrote line', async () => {
    const out = path.join(dir, 'tty.mp4');
    const r = await run(['--out', out, '--steps', '4'], fakeEngine(happyEvents(syntheticVideo(32, 32, 4, 4))), { tty: true });
    expect(r.stderr.text).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.text).toMatch(/denoise \|[^|]*\| 4\/4 sigma=0\.2500 43\.0 ms\/step/);
    expect(r.stdout.text).toContain('node vae_decode done 12.0 ms');
    expect(r.stdout.text).toContain('node text_encode started');
    // eslint-disable-next-line no-control-regex
    const plain = r.stdout.text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
    expect(plain.trimEnd().split('\n').at(-1)).toBe(`wrote ${out} (4 frames, 32x32, 4 fps)`);
    expect(existsSync(out)).toBe(true);
  });

  it('the plain step line has the documented shape', () => {
    expect(formatEventLine({ type: 'step', requestId: 'r', node: 'denoise', index: 2, total: 20, timestep: 842, sigma: 0.84213, ms: 41.23 })).toBe(
      'step 3/20 sigma=0.8421 41.2 ms',
    );
  });

  it('defaultOutPath sanitises the request id and falls back to a timestamp', () => {
    expect(defaultOutPath('a/b c')).toBe(path.join('out', 'omnirx-a_b_c.mp4'));
    expect(defaultOutPath(undefined, new Date('2024-01-02T03:04:05.678Z'))).toBe(path.join('out', 'omnirx-2024-01-02T03-04-05-678Z.mp4'));
  });
});

describe('omnirx generate --seconds', () => {
  it("sets the frame count from seconds × the model's fps, or × --fps", async () => {
    const video = syntheticVideo(16, 16, 16, 8);
    const a = await run(['--seconds', '2', '--out', path.join(dir, 'sec', 'a.mp4')], fakeEngine(happyEvents(video)));
    expect(a.stderr.text).toBe('');
    expect(a.code).toBe(0);
    expect(a.engine.requests[0]!.diffusion).toEqual({ numFrames: 16 });
    const b = await run(['--seconds', '0.5', '--fps', '24', '--out', path.join(dir, 'sec', 'b.mp4')], fakeEngine(happyEvents(video)));
    expect(b.code).toBe(0);
    expect(b.engine.requests[0]!.diffusion).toEqual({ fps: 24, numFrames: 12 });
    // 1.1 × 10 is 11.000000000000002 in float64: still 11 frames.
    const c = await run(['--seconds', '1.1', '--fps', '10', '--out', path.join(dir, 'sec', 'c.mp4')], fakeEngine(happyEvents(video)));
    expect(c.engine.requests[0]!.diffusion).toEqual({ fps: 10, numFrames: 11 });
  });

  it.each([
    [['--seconds', '0.3'], 2, '--seconds: OMNIRX_ERR_UNSUPPORTED_VALUE: seconds 0.3 × fps 8 = 2.4 frames is not a whole number of frames'],
    [['--seconds', '0'], 2, '--seconds must be a number in (0, 3600]; got "0"'],
    [['--seconds', '-1'], 2, '--seconds must be a number in (0, 3600]; got "-1"'],
    [['--seconds', 'abc'], 2, '--seconds must be a number in (0, 3600]; got "abc"'],
    [['--seconds', '1e9'], 2, '--seconds must be a number in (0, 3600]; got "1e9"'],
    [['--seconds', '2', '--frames', '9'], 2, '--seconds and --frames both set the frame count: give one of them'],
    [['--seconds', '2', '--task', 'T2I'], 2, '--seconds sets the length of a video: --task T2I makes one image'],
    [['--seconds', '2', '--model', 'nope'], 1, "--seconds: OMNIRX_ERR_UNKNOWN_MODEL: no model 'nope'"],
  ])('%j exits %d: %s', async (argv, code, message) => {
    const r = await run(argv, fakeEngine([]));
    expect(r.code).toBe(code);
    expect(r.stderr.text).toContain(message);
    expect(r.engine.requests).toEqual([]);
    expect(r.engine.closed).toBe(r.created);
  });

  it('a frame count the engine refuses is named as --seconds', async () => {
    const refuse = (): OmniEvent[] => [
      { type: 'error', requestId: RID, code: 'OMNIRX_ERR_INVALID_REQUEST', message: 'diffusion.numFrames: too big', param: 'diffusion.numFrames' },
    ];
    const r = await run(['--seconds', '100'], fakeEngine(refuse()));
    expect(r.code).toBe(1);
    expect(r.stderr.text).toContain('error OMNIRX_ERR_INVALID_REQUEST (--seconds): diffusion.numFrames: too big');
  });
});

describe('omnirx generate: argument errors exit 2 and name the flag', () => {
  const intFlags = NUMERIC_FLAGS.filter((f) => f.integer);
  const realFlags = NUMERIC_FLAGS.filter((f) => !f.integer);

  it('the integer flags are the six documented ones, the real ones three, with schema ranges', () => {
    expect(intFlags.map((f) => `${f.flag} [${f.min}, ${f.max}]`)).toEqual([
      '--steps [1, 200]',
      '--seed [0, 4294967295]',
      '--width [8, 1024]',
      '--height [8, 1024]',
      '--frames [1, 256]',
      '--fps [1, 120]',
    ]);
    expect(realFlags.map((f) => `${f.flag} [${f.min}, ${f.max}]`)).toEqual(['--guidance-scale [0, 50]', '--flow-shift [0.01, 100]', '--eta [0, 1]']);
  });

  const badInts = ['abc', '12abc', '-5', '0', '1e3', '99999', '2.5', '', '-0x10', '0x10', 'NaN', 'Infinity', ' 12', '9007199254740993'];
  const cases: Array<[string, string]> = [];
  for (const f of intFlags) {
    for (const v of badInts) {
      if (f.flag === '--seed' && (v === '0' || v === '99999')) continue; // valid seeds
      cases.push([f.flag, v]);
    }
  }
  cases.push(['--seed', '4294967296']);
  for (const f of realFlags) for (const v of ['NaN', 'Infinity', '-Infinity', 'abc', '1.5x', '', '-1', '1e9', '0x1']) cases.push([f.flag, v]);

  it.each(cases)('%s %j', async (flag, value) => {
    const spec = NUMERIC_FLAGS.find((f) => f.flag === flag)!;
    const r = await run([flag, value], fakeEngine([]));
    expect(r.code).toBe(2);
    expect(r.created).toBe(0);
    expect(r.stdout.text).toBe('');
    expect(r.stderr.text).toContain(`${flag} must be ${spec.integer ? 'an integer' : 'a number'} in [${spec.min}, ${spec.max}]; got ${JSON.stringify(value)}`);
    expect(r.stderr.text).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('the documented message shape', async () => {
    const r = await run(['--width', 'abc'], fakeEngine([]));
    expect(r.stderr.lines[0]).toBe('error: --width must be an integer in [8, 1024]; got "abc"');
  });

  const other: Array<[string, string[], RegExp]> = [
    ['unknown flag', ['--bogus', '3'], /unknown option '--bogus'/],
    ['near-miss flag', ['--fsp', '3'], /unknown option '--fsp'[\s\S]*--fps/],
    ['missing value at the end', ['--steps'], /option '--steps <n>' argument missing/],
    ['missing value before another flag', ['--steps', '--seed', '3'], /--steps must be an integer in \[1, 200\]; got "--seed" \(is the value missing\?/],
    ['missing prompt value', ['--prompt', '--steps', '3'], /--prompt is missing its value/],
    ['missing --out value', ['--out'], /option '--out <file>' argument missing/],
    ['stray positional', ['a cat'], /unexpected argument "a cat"/],
    ['unknown task', ['--task', 'I2V'], /--task must be one of T2V, T2I; got "I2V"/],
    ['T2I with frames', ['--task', 'T2I', '--frames', '16'], /--frames: T2I generates one frame/],
    ['prompt too long', ['--prompt', 'x'.repeat(4001)], /--prompt: .*4000/],
    ['negative prompt too long', ['--negative-prompt', 'x'.repeat(4001)], /--negative-prompt: .*4000/],
    ['empty model', ['--model', ''], /--model: /],
    ['empty out', ['--out', ''], /--out must be a file path/],
    ['unknown matmul dtype', ['--matmul-dtype', 'fp8'], /--matmul-dtype must be one of float32, bfloat16; got "fp8"/],
    ['missing matmul dtype value', ['--matmul-dtype', '--seed', '3'], /--matmul-dtype is missing its value/],
    ['guidance interval not a pair', ['--guidance-interval', '0.25'], /--guidance-interval must be two numbers "start,end", e\.g\. 0,0\.25; got "0\.25"/],
    ['guidance interval not numbers', ['--guidance-interval', 'a,b'], /--guidance-interval must be two numbers/],
    ['guidance interval reversed', ['--guidance-interval', '0.5,0.25'], /--guidance-interval: start must not exceed end .*; got \[0\.5,0\.25\]/],
    ['guidance interval past 1', ['--guidance-interval', '0,1.5'], /--guidance-interval: .*got 1\.5/],
    ['guidance interval negative', ['--guidance-interval', '-0.5,0.5'], /--guidance-interval: .*got -0\.5/],
    ['guidance interval overflowing', ['--guidance-interval', '1e999,1'], /--guidance-interval: .*got Infinity$/m],
    ['missing guidance interval value', ['--guidance-interval', '--seed', '3'], /--guidance-interval is missing its value/],
    ['eta past 1', ['--eta', '1.5'], /--eta must be a number in \[0, 1\]; got "1\.5"/],
  ];
  it.each(other)('%s', async (_name, argv, re) => {
    const r = await run(argv, fakeEngine([]));
    expect(r.code).toBe(2);
    expect(r.created).toBe(0);
    expect(r.stderr.text).toMatch(re);
    expect(r.stderr.text).not.toMatch(/\n\s+at /);
  });

  it('--out naming a directory', async () => {
    const d = path.join(dir, 'a-directory.mp4');
    mkdirSync(d, { recursive: true });
    const r = await run(['--out', d], fakeEngine([]));
    expect(r.code).toBe(2);
    expect(r.stderr.text).toMatch(/--out: .*it is a directory/);
  });

  it.each([['x'], ['-'], ['clip.mp4.txt'], ['x.gif']])('--out %s without the .mp4 or .png extension', async (name) => {
    const r = await run(['--out', path.join(dir, name)], fakeEngine([]));
    expect(r.code).toBe(2);
    expect(r.stderr.text).toMatch(/--out must name an \.mp4 file \(H\.264 in MP4\) or, for T2I, a \.png file/);
  });

  it('--out x.png for a video (T2V) is refused before any work, naming the flag', async () => {
    const engine = fakeEngine([]);
    const r = await run(['--out', path.join(dir, 'x.png')], engine);
    expect(r.code).toBe(2);
    expect(r.stderr.text).toMatch(/--out: a T2V video is written as \.mp4, not PNG/);
    expect(engine.requests).toEqual([]);
  });

  it('--help prints usage with ranges and exits 0 without creating the engine', async () => {
    const r = await run(['--help'], fakeEngine([]));
    expect(r.code).toBe(0);
    expect(r.created).toBe(0);
    expect(r.stdout.text).toMatch(/--width <n>\s+width, pixels; integer in \[8, 1024\]/);
  });

  it('parseNumericFlag accepts well-formed values', () => {
    const steps = NUMERIC_FLAGS.find((f) => f.flag === '--steps')!;
    const gs = NUMERIC_FLAGS.find((f) => f.flag === '--guidance-scale')!;
    expect(parseNumericFlag(steps, '20')).toBe(20);
    expect(parseNumericFlag(steps, '+20')).toBe(20);
    expect(parseNumericFlag(gs, '7.5')).toBe(7.5);
    expect(parseNumericFlag(gs, '.5')).toBe(0.5);
    expect(parseNumericFlag(gs, '5e0')).toBe(5);
    expect(Object.is(parseNumericFlag(gs, '-0'), 0)).toBe(true);
  });

  it('parseGenerateArgs keeps the request minimal', () => {
    expect(parseGenerateArgs(['--seed', '7'])).toStrictEqual({
      kind: 'run',
      request: { task: 'T2V', inputs: { prompt: DEFAULT_PROMPT }, diffusion: { seed: 7 } },
      engineOptions: {},
    });
    expect(parseGenerateArgs(['--models-dir', '/m', '--out', 'x.mp4'])).toMatchObject({ out: 'x.mp4', engineOptions: { modelsDir: '/m' } });
    expect(parseGenerateArgs(['--sampler', 'unipc'])).toMatchObject({ request: { diffusion: { sampler: 'unipc' } } });
    expect(() => parseGenerateArgs(['--sampler', 'heun'])).toThrow(
      expect.objectContaining({ code: 'OMNIRX_ERR_CLI_ARGUMENT', param: '--sampler', message: '--sampler must be one of euler, unipc, dmd; got "heun"' }),
    );
    expect(parseGenerateArgs(['--matmul-dtype', 'bfloat16'])).toMatchObject({ engineOptions: { matmulDtype: 'bfloat16' } });
  });
});

describe('omnirx generate: failures', () => {
  it('an error event prints the message on stderr and exits 1', async () => {
    const engine = fakeEngine([
      { type: 'queued', requestId: RID, position: 0 },
      { type: 'error', requestId: RID, code: 'OMNIRX_ERR_UNSUPPORTED_VALUE', message: 'width must be a multiple of 16; got 40', param: 'diffusion.width' },
    ]);
    const out = path.join(dir, 'err', 'x.mp4');
    const r = await run(['--width', '40', '--out', out], engine);
    expect(r.code).toBe(1);
    expect(r.stderr.text).toBe('error OMNIRX_ERR_UNSUPPORTED_VALUE (--width): width must be a multiple of 16; got 40\n');
    expect(existsSync(out)).toBe(false);
    expect(engine.closed).toBe(1);
  });

  it('a failing node with completed steps', async () => {
    const engine = fakeEngine([
      { type: 'step', requestId: RID, node: 'denoise', index: 0, total: 2, timestep: 1, sigma: 1, ms: 1 },
      { type: 'error', requestId: RID, code: 'OMNIRX_ERR_NON_FINITE', message: 'NaN in latents', node: 'denoise', completedSteps: 1 },
    ]);
    const r = await run([], engine);
    expect(r.code).toBe(1);
    expect(r.stderr.text).toMatch(/^error OMNIRX_ERR_NON_FINITE in node denoise: NaN in latents\n {2}\(1 steps completed\)\n$/);
  });

  it('an erroring observable exits 1', async () => {
    const engine = fakeEngine(() => new Observable<OmniEvent>((sub) => sub.error(new Error('worker crashed'))));
    const r = await run([], engine);
    expect(r.code).toBe(1);
    expect(r.stderr.text).toBe('error: generation failed: worker crashed\n');
  });

  it('a stream that completes without final exits 1', async () => {
    const r = await run([], fakeEngine([{ type: 'queued', requestId: RID, position: 0 }]));
    expect(r.code).toBe(1);
    expect(r.stderr.text).toMatch(/without a final event/);
  });

  it('a final without a video artifact exits 1', async () => {
    const r = await run(
      [],
      fakeEngine([
        {
          type: 'final',
          requestId: RID,
          output: { requestId: RID, artifacts: { latents: { kind: 'latents', shape: [1], data: new Float32Array(1) } }, seed: 1, ms: 1 },
        },
      ]),
    );
    expect(r.code).toBe(1);
    expect(r.stderr.text).toMatch(/no video artifact \(got latents \(latents\)\)/);
  });

  it('an engine that cannot start exits 1', async () => {
    const stdout = new Sink();
    const stderr = new Sink();
    const code = await runGenerate([], {
      createEngine: () => Promise.reject(Object.assign(new Error('no model "x" in /models'), { code: 'OMNIRX_ERR_UNKNOWN_MODEL' })),
      stdout,
      stderr,
      isTTY: false,
    });
    expect(code).toBe(1);
    expect(stderr.text).toBe('error: could not start the engine: OMNIRX_ERR_UNKNOWN_MODEL: no model "x" in /models\n');
  });

  it('an ffmpeg failure exits 1 with the ffmpeg error', async () => {
    const r = await run(['--out', path.join(dir, 'noff.mp4')], fakeEngine(happyEvents(syntheticVideo(16, 16, 2, 2), 1)), { ffmpegPath: '/nonexistent/ffmpeg' });
    expect(r.code).toBe(1);
    expect(r.stderr.text).toMatch(/OMNIRX_ERR_FFMPEG: could not start ffmpeg at \/nonexistent\/ffmpeg/);
  });

  it('an odd-sized video is rejected clearly', async () => {
    const r = await run(['--out', path.join(dir, 'odd.mp4')], fakeEngine(happyEvents(syntheticVideo(15, 16, 2, 2), 1)));
    expect(r.code).toBe(1);
    expect(r.stderr.text).toMatch(/must be even for yuv420p H\.264; got 15x16/);
  });
});

describe('omnirx generate: interruption', () => {
  it('SIGINT (abort) unsubscribes, prints cancelled and exits 130', async () => {
    const ac = new AbortController();
    const steps: OmniEvent[] = [{ type: 'queued', requestId: RID, position: 0 }];
    for (let i = 0; i < 1000; i++) steps.push({ type: 'step', requestId: RID, node: 'denoise', index: i, total: 1000, timestep: 0, sigma: 0.5, ms: 1 });
    const engine = fakeEngine(steps, { complete: false });
    const stdout = new Sink();
    const stderr = new Sink();
    const origWrite = stdout.write.bind(stdout);
    // Press Ctrl-C once the third step is shown.
    stdout.write = ((chunk: string, ...rest: never[]) => {
      if (String(chunk).startsWith('step 3/')) ac.abort();
      return origWrite(chunk, ...rest);
    }) as typeof stdout.write;
    const out = path.join(dir, 'int', 'x.mp4');
    const code = await runGenerate(['--out', out], { createEngine: async () => engine, stdout, stderr, isTTY: false, signal: ac.signal });
    expect(code).toBe(130);
    expect(stdout.lines.at(-1)).toBe('cancelled');
    expect(stdout.lines.filter((l) => l.startsWith('step '))).toHaveLength(3);
    expect(engine.unsubscribed).toBe(1);
    expect(engine.closed).toBe(1);
    expect(stderr.text).toBe('');
    expect(existsSync(out)).toBe(false); // the folder is checked (and created) up front; no MP4 is left
  });

  it('SIGINT while the engine is starting exits 130 and closes the engine once it exists', async () => {
    const ac = new AbortController();
    const engine = fakeEngine([]);
    let resolveEngine!: (e: EngineLike) => void;
    const stdout = new Sink();
    const p = runGenerate([], {
      createEngine: () => new Promise<EngineLike>((res) => (resolveEngine = res)),
      stdout,
      stderr: new Sink(),
      isTTY: false,
      signal: ac.signal,
    });
    setTimeout(() => ac.abort(), 5);
    expect(await p).toBe(130);
    expect(stdout.text).toBe('cancelled\n');
    resolveEngine(engine);
    await new Promise((r) => setTimeout(r, 5));
    expect(engine.closed).toBe(1);
    expect(engine.requests).toHaveLength(0);
  });

  it('an already-aborted signal never submits', async () => {
    const ac = new AbortController();
    ac.abort();
    const r = await run([], fakeEngine(happyEvents(syntheticVideo(16, 16, 2, 2), 1)), { signal: ac.signal });
    expect(r.code).toBe(130);
    expect(r.engine.requests).toHaveLength(0);
  });
});

describe('omnirx main', () => {
  function io() {
    return { stdout: new Sink(), stderr: new Sink() };
  }

  it('passes generate arguments through to runGenerate', async () => {
    const engine = fakeEngine(happyEvents(syntheticVideo(16, 16, 2, 2), 1));
    const s = io();
    const out = path.join(dir, 'main', 'm.mp4');
    const code = await main(['generate', '--prompt', 'x', '--steps', '3', '--out', out], { ...s, createEngine: async () => engine, isTTY: false });
    expect(s.stderr.text).toBe('');
    expect(code).toBe(0);
    expect(engine.requests[0]).toStrictEqual({ task: 'T2V', inputs: { prompt: 'x' }, diffusion: { numInferenceSteps: 3 } });
    expect(readdirSync(path.dirname(out))).toEqual(['m.mp4']);
  });

  it('exit codes for usage errors and help', async () => {
    let s = io();
    expect(await main(['generate', '--width', 'abc'], { ...s, createEngine: () => Promise.reject(new Error('unused')) })).toBe(2);
    expect(s.stderr.text).toContain('--width must be an integer in [8, 1024]; got "abc"');
    s = io();
    expect(await main(['generate', '--help'], s)).toBe(0);
    expect(s.stdout.text).toContain('Usage: omnirx generate');
    s = io();
    expect(await main(['--help'], s)).toBe(0);
    expect(s.stdout.text).toMatch(/generate/);
    s = io();
    expect(await main(['nope'], s)).toBe(2);
    expect(s.stderr.text).toMatch(/unknown command 'nope'/);
    s = io();
    expect(await main([], s)).toBe(2);
  });
});
