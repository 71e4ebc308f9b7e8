import * as path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { Subscription, type Observable } from 'rxjs';
import { z } from 'zod';
import { OmniError } from '../errors';
import { checkOutputPath, encodeMp4 } from '../media/mp4';
import { writePng } from '../media/png';
import type { ImageArtifact, VideoArtifact } from '../request/artifacts';
import type { ErrorEvent, OmniEvent } from '../request/omni-event';
import { parseGuidanceIntervalText } from '../request/guidance-interval';
import { OmniRequestSchema, TaskSchema, type OmniRequestInput } from '../request/omni-request';
import { createProgressReporter } from './progress';
import { framesForSeconds } from '../request/seconds';
import { isMatmulDtype, MATMUL_DTYPES, type MatmulDtype } from '../native/plan-builder';

/** The part of the engine the CLI uses (`src/engine/engine.ts` `Engine` satisfies it). */
export interface EngineLike {
  /** Cold stream of one request's events; subscribing submits, unsubscribing cancels. */
  generate(request: OmniRequestInput): Observable<OmniEvent>;
  /** The models: `get(id)` resolves model `id` (the default when undefined) with its request defaults (`--seconds` reads fps). */
  readonly models: { get(id: string | undefined): Promise<{ spec: { defaults: { fps: number } } }> };
  /** Releases models and worker threads. */
  close(): Promise<void>;
}

/** Options the CLI passes when it creates the engine (only those the user gave). */
export interface CliEngineOptions {
  modelsDir?: string;
  /** Operand dtype of the DiT's matrix products (`--matmul-dtype`). */
  matmulDtype?: MatmulDtype;
}

/** What {@link runGenerate} needs from the outside world; injected so tests can fake every part. */
export interface GenerateDeps {
  createEngine: (options?: CliEngineOptions) => Promise<EngineLike>;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Whether stdout is a terminal: progress bar when true, plain lines when false. */
  isTTY: boolean;
  /** Aborted on SIGINT (wired by `main.ts`): the request is unsubscribed (cancelled) and the command exits 130. */
  signal?: AbortSignal;
  /** ffmpeg binary for the MP4 encode; resolved by `encodeMp4` when absent. */
  ffmpegPath?: string;
}

/** Exit codes of `omnirx generate`. */
export const EXIT = Object.freeze({ OK: 0, FAILED: 1, USAGE: 2, INTERRUPTED: 130 });

/**
 * Prompt used when `--prompt` is not given: a prompt of the embedded default's grammar. Since 2026-12-07 its agent is
 * white; the shipped weights draw a red agent beside yellow blocks as several red objects (exactly one agent in 3 % of
 * T2V frames over 12 seeds, against 94 % for this prompt; docs/model-card.md, "Known limits").
 */
export const DEFAULT_PROMPT = 'a white ball in a dark blue room with two yellow blocks';

/** The `final` event. */
export type FinalEvent = Extract<OmniEvent, { type: 'final' }>;

const diffusionShape = OmniRequestSchema.shape.diffusion.unwrap().shape;
type DiffusionKey = keyof typeof diffusionShape;

interface NumericFlag {
  flag: string;
  key: DiffusionKey;
  integer: boolean;
  min: number;
  max: number;
  help: string;
}

/** Reads the bounds of a (possibly optional) zod number schema, so the CLI's ranges are the schema's. */
function numberBounds(schema: z.ZodType): { min: number; max: number; integer: boolean } {
  let s: z.ZodType = schema;
  while (s instanceof z.ZodOptional || s instanceof z.ZodDefault) s = s.unwrap() as z.ZodType;
  if (!(s instanceof z.ZodNumber)) throw new Error('numberBounds: not a number schema');
  return { min: s.minValue ?? -Number.MAX_SAFE_INTEGER, max: s.maxValue ?? Number.MAX_SAFE_INTEGER, integer: s.isInt };
}

function numericFlag(flag: string, key: DiffusionKey, help: string): NumericFlag {
  return { flag, key, help, ...numberBounds(diffusionShape[key]) };
}

/** Numeric flags, their request field (`diffusion.<key>`) and ranges taken from `OmniRequestSchema`. */
export const NUMERIC_FLAGS: readonly NumericFlag[] = Object.freeze([
  numericFlag('--steps', 'numInferenceSteps', 'denoise steps (num_inference_steps)'),
  numericFlag('--seed', 'seed', 'seed of the initial noise, unsigned 32-bit'),
  numericFlag('--width', 'width', 'width, pixels'),
  numericFlag('--height', 'height', 'height, pixels'),
  numericFlag('--frames', 'numFrames', 'video frames to generate'),
  numericFlag('--fps', 'fps', 'playback rate, frames per second'),
  numericFlag('--guidance-scale', 'guidanceScale', 'classifier-free guidance scale (1 disables CFG)'),
  numericFlag('--flow-shift', 'flowShift', 'flow shift of the sigma schedule'),
  numericFlag('--eta', 'eta', 'share of fresh noise re-noising each Euler step but the last, 0 (deterministic) to 1'),
]);

/** Request field (dotted path) → flag, for mapping validation errors back to what the user typed. */
export const FLAG_FOR_PARAM: Readonly<Record<string, string>> = Object.freeze({
  'inputs.prompt': '--prompt',
  'inputs.negativePrompt': '--negative-prompt',
  model: '--model',
  modelsDir: '--models-dir',
  task: '--task',
  ...Object.fromEntries(NUMERIC_FLAGS.map((f) => [`diffusion.${f.key}`, f.flag])),
  'diffusion.guidanceInterval': '--guidance-interval',
  'diffusion.sampler': '--sampler',
});

/** Longest clip `--seconds` takes, s (as `POST /v1/videos`' `seconds`). */
const MAX_SECONDS = 3600;

const STRING_FLAGS = [
  '--prompt',
  '--negative-prompt',
  '--out',
  '--model',
  '--task',
  '--models-dir',
  '--matmul-dtype',
  '--guidance-interval',
  '--sampler',
] as const;
const ALL_FLAGS = new Set<string>([...STRING_FLAGS, ...NUMERIC_FLAGS.map((f) => f.flag), '--seconds', '--help', '-h']);

const INT_RE = /^[+-]?\d+$/;
const FLOAT_RE = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

function argError(flag: string | undefined, message: string): OmniError {
  return new OmniError('OMNIRX_ERR_CLI_ARGUMENT', message, flag ? { param: flag } : {});
}

function missingValueHint(raw: string): string {
  return ALL_FLAGS.has(raw.split('=')[0]!) ? ` (is the value missing? "${raw}" is a flag)` : '';
}

/**
 * Parses a numeric flag value strictly: integers are `[+-]?digits` only (no `1e3`, `0x10`, `12abc`, `1.5`, ``),
 * reals are plain decimal or exponent notation (no `NaN`, `Infinity`); the value must lie in the flag's range.
 *
 * @throws OmniError `OMNIRX_ERR_CLI_ARGUMENT`, e.g. `--width must be an integer in [8, 1024]; got "abc"`.
 */
export function parseNumericFlag(spec: Pick<NumericFlag, 'flag' | 'integer' | 'min' | 'max'>, raw: string): number {
  const what = spec.integer ? 'an integer' : 'a number';
  const fail = () => argError(spec.flag, `${spec.flag} must be ${what} in [${spec.min}, ${spec.max}]; got ${JSON.stringify(raw)}${missingValueHint(raw)}`);
  if (!(spec.integer ? INT_RE : FLOAT_RE).test(raw)) throw fail();
  const value = Number(raw);
  if (!Number.isFinite(value) || (spec.integer && !Number.isSafeInteger(value))) throw fail();
  if (value < spec.min || value > spec.max) throw fail();
  return value === 0 ? 0 : value; // no -0
}

/** Result of {@link parseGenerateArgs}. */
export type ParsedGenerate =
  | { kind: 'help' }
  | {
      kind: 'run';
      /** Only the fields the user gave, plus `task` and `inputs.prompt`. */
      request: OmniRequestInput;
      /** `--out` as given, or undefined for the default `out/omnirx-<requestId>.mp4` (`.png` for T2I). */
      out?: string;
      /** `--seconds`: the clip length, s; its frames (× `--fps` or the model's fps) are set once the model is known. */
      seconds?: number;
      engineOptions: CliEngineOptions;
    };

function buildCommand(): Command {
  const cmd = new Command('omnirx generate')
    .description('Generate a video (T2V, written as an H.264 MP4) or an image (T2I, written as a PNG) from a text prompt.')
    .allowExcessArguments(true)
    .exitOverride()
    .helpOption('-h, --help', 'show this help');
  const text = (flag: string) => (raw: string) => {
    if (ALL_FLAGS.has(raw.split('=')[0]!)) throw argError(flag, `${flag} is missing its value${missingValueHint(raw)}`);
    return raw;
  };
  cmd.addOption(new Option('--prompt <text>', `text prompt (default: "${DEFAULT_PROMPT}")`).argParser(text('--prompt')));
  cmd.addOption(new Option('--negative-prompt <text>', 'negative prompt').argParser(text('--negative-prompt')));
  cmd.addOption(
    new Option('--out <file>', 'output file: .mp4 (T2V; T2I as one frame) or .png (T2I) (default: out/omnirx-<requestId>.mp4, .png for T2I)').argParser(
      text('--out'),
    ),
  );
  for (const f of NUMERIC_FLAGS) {
    const range = `${f.integer ? 'integer' : 'number'} in [${f.min}, ${f.max}]`;
    cmd.addOption(
      new Option(
        `${f.flag} <${f.integer ? 'n' : 'x'}>`,
        `${f.help}; ${range} (default: ${f.key === 'seed' ? 'random, printed with the result' : "the model's"})`,
      ).argParser((raw: string) => parseNumericFlag(f, raw)),
    );
  }
  cmd.addOption(
    new Option(
      '--seconds <s>',
      `clip length, seconds, in (0, ${MAX_SECONDS}]: frames = seconds × fps (--fps or the model's), a whole number (T2V; not with --frames)`,
    ).argParser((raw: string) => {
      const range = () => argError('--seconds', `--seconds must be a number in (0, ${MAX_SECONDS}]; got ${JSON.stringify(raw)}${missingValueHint(raw)}`);
      let v: number;
      try {
        v = parseNumericFlag({ flag: '--seconds', integer: false, min: 0, max: MAX_SECONDS }, raw);
      } catch {
        throw range();
      }
      if (v === 0) throw range();
      return v;
    }),
  );
  const interval = text('--guidance-interval');
  cmd.addOption(
    new Option(
      '--guidance-interval <start,end>',
      "fractions [start, end) of the denoise steps that run guidance, e.g. 0,0.25 (default: the model's)",
    ).argParser((raw: string) => {
      const pair = parseGuidanceIntervalText(interval(raw));
      if (pair === undefined)
        throw argError('--guidance-interval', `--guidance-interval must be two numbers "start,end", e.g. 0,0.25; got ${JSON.stringify(raw)}`);
      return pair;
    }),
  );
  cmd.addOption(new Option('--model <id>', "registered model id (default: the engine's default model)").argParser(text('--model')));
  cmd.addOption(
    new Option(
      '--sampler <name>',
      "sampler: euler (flow-matching Euler), unipc (UniPC, order 2) or dmd (a few-step schedule) (default: the model's)",
    ).argParser(text('--sampler')),
  );
  cmd.addOption(new Option('--task <task>', `task, one of ${TaskSchema.options.join(', ')}`).default('T2V').argParser(text('--task')));
  cmd.addOption(new Option('--models-dir <dir>', "directory of model checkpoints (default: the engine's)").argParser(text('--models-dir')));
  const dtype = text('--matmul-dtype');
  cmd.addOption(
    new Option(
      '--matmul-dtype <dtype>',
      `dtype of the DiT's matrix products, one of ${MATMUL_DTYPES.join(', ')} (default float32; bfloat16 is faster, operands rounded to 8 significant bits)`,
    ).argParser((raw: string) => {
      const v = dtype(raw);
      if (!isMatmulDtype(v)) throw argError('--matmul-dtype', `--matmul-dtype must be one of ${MATMUL_DTYPES.join(', ')}; got ${JSON.stringify(v)}`);
      return v;
    }),
  );
  return cmd;
}

function issueToArgError(issue: z.core.$ZodIssue, request: OmniRequestInput): OmniError {
  const dotted = issue.path.map(String).join('.');
  // An element of a pair (diffusion.guidanceInterval.0) is named by the pair's flag.
  const flag = FLAG_FOR_PARAM[dotted] ?? FLAG_FOR_PARAM[dotted.replace(/\.\d+$/, '')];
  const name = flag ?? dotted;
  let got: unknown = request;
  for (const k of issue.path) got = got !== null && typeof got === 'object' ? (got as Record<PropertyKey, unknown>)[k] : undefined;
  // JSON.stringify writes a non-finite number (a pair element read from 1e999) as null: print it as a number.
  const gotText =
    typeof got === 'string'
      ? got.length > 40
        ? `${got.length} characters`
        : JSON.stringify(got)
      : typeof got === 'number'
        ? String(got)
        : JSON.stringify(got);
  let message: string;
  if (issue.code === 'invalid_value') {
    message = `${name} must be one of ${issue.values.map(String).join(', ')}; got ${gotText}`;
  } else {
    message = `${name}: ${issue.message}; got ${gotText}`;
  }
  return argError(name, message);
}

/**
 * Parses `omnirx generate` arguments (without the command name) into a request. Numeric flags are parsed strictly
 * against the schema's ranges; the finished request is validated with `OmniRequestSchema` and any issue is mapped
 * back to its flag. Only the fields the user gave are sent; defaults are the model's.
 *
 * @param output where `--help` is written.
 * @throws OmniError `OMNIRX_ERR_CLI_ARGUMENT` naming the flag (unknown flag, missing value, out of range, …).
 */
export function parseGenerateArgs(argv: readonly string[], output: { writeOut: (s: string) => void } = { writeOut: () => undefined }): ParsedGenerate {
  const cmd = buildCommand();
  cmd.configureOutput({ writeOut: output.writeOut, writeErr: () => undefined, outputError: () => undefined });
  try {
    cmd.parse([...argv], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.help') return { kind: 'help' };
      throw argError(undefined, err.message.replace(/^error:\s*/, ''));
    }
    throw err;
  }
  if (cmd.args.length > 0) {
    throw argError(
      undefined,
      `unexpected argument${cmd.args.length > 1 ? 's' : ''} ${cmd.args.map((a) => JSON.stringify(a)).join(' ')} (give the prompt with --prompt "...")`,
    );
  }
  const opts = cmd.opts<Record<string, string | number | [number, number] | undefined>>();

  const inputs: OmniRequestInput['inputs'] = { prompt: (opts.prompt as string | undefined) ?? DEFAULT_PROMPT };
  if (opts.negativePrompt !== undefined) inputs.negativePrompt = opts.negativePrompt as string;
  const request: OmniRequestInput = { task: opts.task as OmniRequestInput['task'], inputs };
  if (opts.model !== undefined) request.model = opts.model as string;
  const diffusion: Record<string, string | number | [number, number]> = {};
  if (typeof opts.sampler === 'string') diffusion.sampler = opts.sampler;
  for (const f of NUMERIC_FLAGS) {
    const attr = f.flag.slice(2).replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
    const v = opts[attr];
    if (typeof v === 'number') diffusion[f.key] = v;
  }
  if (Array.isArray(opts.guidanceInterval)) diffusion.guidanceInterval = opts.guidanceInterval;
  if (Object.keys(diffusion).length > 0) request.diffusion = diffusion as OmniRequestInput['diffusion'];

  const parsed = OmniRequestSchema.safeParse(request);
  if (!parsed.success) throw issueToArgError(parsed.error.issues[0]!, request);

  const out = opts.out as string | undefined;
  if (out !== undefined && out.trim() === '') throw argError('--out', `--out must be a file path; got ${JSON.stringify(out)}`);
  const task = parsed.data.task;
  if (out !== undefined && !/\.(mp4|png)$/i.test(out))
    throw argError('--out', `--out must name an .mp4 file (H.264 in MP4) or, for T2I, a .png file; got ${JSON.stringify(out)}`);
  if (out !== undefined && task !== 'T2I' && /\.png$/i.test(out))
    throw argError('--out', `--out: a ${task} video is written as .mp4, not PNG (a PNG holds the one image of --task T2I); got ${JSON.stringify(out)}`);
  const seconds = opts.seconds as number | undefined;
  if (seconds !== undefined && task === 'T2I') throw argError('--seconds', '--seconds sets the length of a video: --task T2I makes one image');
  if (seconds !== undefined && request.diffusion?.numFrames !== undefined)
    throw argError('--seconds', '--seconds and --frames both set the frame count: give one of them');
  const modelsDir = opts.modelsDir as string | undefined;
  if (modelsDir !== undefined && modelsDir.trim() === '') throw argError('--models-dir', `--models-dir must be a directory; got ${JSON.stringify(modelsDir)}`);
  const matmulDtype = opts.matmulDtype as MatmulDtype | undefined;
  const engineOptions: CliEngineOptions = { ...(modelsDir !== undefined ? { modelsDir } : {}), ...(matmulDtype !== undefined ? { matmulDtype } : {}) };
  return { kind: 'run', request, ...(out !== undefined ? { out } : {}), ...(seconds !== undefined ? { seconds } : {}), engineOptions };
}

/**
 * The default output path for a request: `out/omnirx-<requestId>.<ext>` (or a timestamp when there is no id), `ext`
 * `mp4` for a video and `png` for a T2I image.
 */
export function defaultOutPath(requestId: string | undefined, now: Date = new Date(), ext: 'mp4' | 'png' = 'mp4'): string {
  const id = requestId && requestId.trim() !== '' ? requestId.replace(/[^A-Za-z0-9._-]/g, '_') : now.toISOString().replace(/[:.]/g, '-');
  return path.join('out', `omnirx-${id}.${ext}`);
}

/** The image to write as PNG from a final output: the `image` artifact, else any image. */
export function pickImage(final: FinalEvent): ImageArtifact | undefined {
  const arts = final.output.artifacts;
  const named = arts.image;
  if (named?.kind === 'image') return named;
  return Object.values(arts).find((a): a is ImageArtifact => a.kind === 'image');
}

/** Picks the video to write from a final output: the `video` artifact, else any video, else an image as 1 frame. */
export function pickVideo(final: FinalEvent): VideoArtifact | undefined {
  const arts = final.output.artifacts;
  const named = arts.video;
  if (named?.kind === 'video') return named;
  const anyVideo = Object.values(arts).find((a): a is VideoArtifact => a.kind === 'video');
  if (anyVideo) return anyVideo;
  const image = Object.values(arts).find((a) => a.kind === 'image');
  if (image?.kind === 'image') return { kind: 'video', width: image.width, height: image.height, numFrames: 1, fps: 1, frames: image.pixels };
  return undefined;
}

function errorText(err: unknown): string {
  if (err instanceof OmniError) return `${err.code}: ${err.message}`;
  if (typeof err === 'object' && err !== null && typeof (err as { message?: unknown }).message === 'string') {
    const code = (err as { code?: unknown }).code;
    return `${typeof code === 'string' ? `${code}: ` : ''}${(err as { message: string }).message}`;
  }
  return String(err);
}

function formatErrorEvent(ev: ErrorEvent, flags: Readonly<Record<string, string>>): string {
  const flag = ev.param !== undefined ? (flags[ev.param] ?? ev.param) : undefined;
  const lines = [`error ${ev.code}${flag ? ` (${flag})` : ''}${ev.node ? ` in node ${ev.node}` : ''}: ${ev.message}`];
  for (const issue of ev.issues ?? []) {
    if (issue.message === ev.message && issue.path === ev.param) continue;
    lines.push(`  ${flags[issue.path] ?? issue.path}: ${issue.message}`);
  }
  if (ev.completedSteps !== undefined) lines.push(`  (${ev.completedSteps} steps completed)`);
  return `${lines.join('\n')}\n`;
}

type Outcome =
  | { kind: 'final'; event: FinalEvent }
  | { kind: 'error'; event: ErrorEvent }
  | { kind: 'cancelled' }
  | { kind: 'thrown'; error: unknown }
  | { kind: 'incomplete' }
  | { kind: 'interrupted' };

function abortPromise(signal: AbortSignal | undefined): { promise: Promise<'interrupted'>; dispose: () => void } {
  if (!signal) return { promise: new Promise<never>(() => undefined), dispose: () => undefined };
  let onAbort = () => undefined as void;
  const promise = new Promise<'interrupted'>((resolve) => {
    onAbort = () => resolve('interrupted');
    if (signal.aborted) resolve('interrupted');
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
}

/**
 * `omnirx generate`: parses `argv` (the arguments after `generate`), creates the engine, runs one request while
 * showing progress, encodes the `video` artifact of the `final` event as MP4 and prints
 * `wrote /abs/path.mp4 (F frames, WxH, N fps)` as the last stdout line; for `--task T2I` (unless `--out` names an
 * .mp4) writes the image as PNG and prints `wrote /abs/path.png (WxH PNG)`.
 *
 * Never throws; every failure is a message on stderr and an exit code:
 * 0 written; 1 the engine could not start, the request failed (`error` event) or encoding failed;
 * 2 an argument error (the message names the flag and its range); 130 interrupted (`deps.signal`).
 *
 * @returns the process exit code.
 */
export async function runGenerate(argv: string[], deps: GenerateDeps): Promise<number> {
  const { stdout, stderr, signal } = deps;
  const say = (s: string) => void stdout.write(s);
  const complain = (s: string) => void stderr.write(s);

  let parsed: ParsedGenerate;
  try {
    parsed = parseGenerateArgs(argv, { writeOut: say });
  } catch (err) {
    if (err instanceof OmniError && err.code === 'OMNIRX_ERR_CLI_ARGUMENT') {
      complain(`error: ${err.message}\n(see "omnirx generate --help")\n`);
      return EXIT.USAGE;
    }
    complain(`error: ${errorText(err)}\n`);
    return EXIT.USAGE;
  }
  if (parsed.kind === 'help') return EXIT.OK;

  if (parsed.out !== undefined) {
    // Before any generation: a path that cannot take the MP4 fails now, not after minutes of compute.
    try {
      await checkOutputPath(parsed.out);
    } catch (err) {
      complain(`error: --out: ${errorText(err)}\n`);
      return EXIT.USAGE;
    }
  }

  const interrupt = abortPromise(signal);
  const interrupted = (): number => {
    say('cancelled\n');
    return EXIT.INTERRUPTED;
  };

  try {
    if (signal?.aborted) return interrupted();
    // Engine start (model load) may take a while: let SIGINT win the race.
    const enginePromise = Promise.resolve().then(() => deps.createEngine(parsed.engineOptions));
    let engine: EngineLike;
    try {
      const first = await Promise.race([enginePromise, interrupt.promise]);
      if (first === 'interrupted') {
        enginePromise.then((e) => e.close()).catch(() => undefined);
        return interrupted();
      }
      engine = first;
      if (signal?.aborted) {
        await engine.close().catch(() => undefined);
        return interrupted();
      }
    } catch (err) {
      complain(`error: could not start the engine: ${errorText(err)}\n`);
      return EXIT.FAILED;
    }

    if (parsed.seconds !== undefined) {
      try {
        const fps = parsed.request.diffusion?.fps ?? (await engine.models.get(parsed.request.model)).spec.defaults.fps;
        parsed.request.diffusion = { ...parsed.request.diffusion, numFrames: framesForSeconds(parsed.seconds, fps) };
      } catch (err) {
        await engine.close().catch(() => undefined);
        complain(`error: --seconds: ${errorText(err)}\n`);
        return err instanceof OmniError && err.code === 'OMNIRX_ERR_UNSUPPORTED_VALUE' ? EXIT.USAGE : EXIT.FAILED;
      }
    }
    const progress = createProgressReporter({ stream: stdout, isTTY: deps.isTTY });
    let requestId: string | undefined;
    const subscription = new Subscription();
    let outcome: Outcome;
    try {
      const done = new Promise<Outcome>((resolve) => {
        let events$: Observable<OmniEvent>;
        try {
          events$ = engine.generate(parsed.request);
        } catch (error) {
          resolve({ kind: 'thrown', error });
          return;
        }
        subscription.add(
          events$.subscribe({
            next: (ev) => {
              requestId ??= ev.requestId;
              if (ev.type === 'final') {
                progress.onEvent(ev);
                resolve({ kind: 'final', event: ev });
              } else if (ev.type === 'error') {
                progress.stop();
                resolve({ kind: 'error', event: ev });
              } else if (ev.type === 'cancelled') {
                progress.onEvent(ev);
                resolve({ kind: 'cancelled' });
              } else {
                progress.onEvent(ev);
              }
            },
            error: (error: unknown) => resolve({ kind: 'thrown', error }),
            complete: () => resolve({ kind: 'incomplete' }),
          }),
        );
      });
      outcome = await Promise.race([done, interrupt.promise.then((): Outcome => ({ kind: 'interrupted' }))]);
    } finally {
      subscription.unsubscribe(); // cancels the request unless it already finished
      progress.stop();
      await engine.close().catch((err: unknown) => complain(`warning: engine close failed: ${errorText(err)}\n`));
    }

    switch (outcome.kind) {
      case 'interrupted':
        return interrupted();
      case 'error':
        // With --seconds the frame count is the user's seconds: a bad count is named by that flag.
        complain(formatErrorEvent(outcome.event, parsed.seconds === undefined ? FLAG_FOR_PARAM : { ...FLAG_FOR_PARAM, 'diffusion.numFrames': '--seconds' }));
        return EXIT.FAILED;
      case 'cancelled':
        complain('error: the engine cancelled the request\n');
        return EXIT.FAILED;
      case 'thrown':
        complain(`error: generation failed: ${errorText(outcome.error)}\n`);
        return EXIT.FAILED;
      case 'incomplete':
        complain('error: the request ended without a final event\n');
        return EXIT.FAILED;
      case 'final':
        break;
    }

    const final = outcome.event;
    const id = final.output.requestId || final.requestId || requestId;
    if (parsed.request.task === 'T2I' && (parsed.out === undefined || /\.png$/i.test(parsed.out))) {
      const image = pickImage(final);
      if (!image) {
        const names = Object.entries(final.output.artifacts).map(([k, a]) => `${k} (${a.kind})`);
        complain(`error: the final output has no image artifact (got ${names.length ? names.join(', ') : 'none'})\n`);
        return EXIT.FAILED;
      }
      try {
        const written = await writePng(image, parsed.out ?? defaultOutPath(id, undefined, 'png'));
        say(`wrote ${written} (${image.width}x${image.height} PNG)\n`);
        return EXIT.OK;
      } catch (err) {
        complain(`error: ${errorText(err)}\n`);
        return EXIT.FAILED;
      }
    }
    const video = pickVideo(final);
    if (!video) {
      const names = Object.entries(final.output.artifacts).map(([k, a]) => `${k} (${a.kind})`);
      complain(`error: the final output has no video artifact (got ${names.length ? names.join(', ') : 'none'})\n`);
      return EXIT.FAILED;
    }
    const out = parsed.out ?? defaultOutPath(id);
    try {
      const written = await encodeMp4(video, out, { ...(deps.ffmpegPath !== undefined ? { ffmpegPath: deps.ffmpegPath } : {}), ...(signal ? { signal } : {}) });
      say(`wrote ${written.path} (${video.numFrames} frames, ${video.width}x${video.height}, ${video.fps} fps)\n`);
      return EXIT.OK;
    } catch (err) {
      if (signal?.aborted) return interrupted();
      complain(`error: ${errorText(err)}\n`);
      return EXIT.FAILED;
    }
  } finally {
    interrupt.dispose();
  }
}
