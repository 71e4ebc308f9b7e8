import { Command, CommanderError, Option } from 'commander';
import { MATMUL_DTYPES, type MatmulDtype } from '../native/plan-builder';
import { OmniError } from '../errors';
import { loadDeployConfig, parseDeployConfig, type DeployConfig } from '../placement/deploy-config';
import { corsOriginProblem } from '../../transports/shared/cors';
import { LOG_LEVELS, type LogLevel } from '../../transports/shared/access-log';
import { EXIT, parseNumericFlag } from './generate';
import { webrtcOverrides, withWebrtcOverrides, type WebrtcOverrides } from './serve-webrtc';

/** What {@link runServe} needs from the outside world; injected so tests can fake every part. */
export interface ServeDeps {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Aborted on SIGINT (wired by `main.ts`): drains like SIGTERM. */
  signal?: AbortSignal;
  /** Registers the SIGTERM handler and returns its remover. Default: `process.once('SIGTERM', ...)`. */
  onSigterm?: (handler: () => void) => () => void;
}

/** Parsed `omnirx serve` options. */
export interface ServeArgs {
  host: string;
  port: number;
  modelsDir?: string;
  /** Deploy config file (tasks, cache budgets, session settings, topology; see docs/deploy.md). */
  config?: string;
  /** Operand dtype of the DiT's matrix products; overrides the deploy config's `matmulDtype`. */
  matmulDtype?: MatmulDtype;
  apiKey?: string;
  /** Origins whose pages may call the server from a browser (CORS; `--cors-origin`, repeatable). */
  corsOrigins?: string[];
  /** Longest wait for in-flight jobs on SIGTERM before they are failed, ms. */
  drainTimeoutMs: number;
  /** Least severe log entry written to stderr (`--log-level`). */
  logLevel: LogLevel;
  /** Data folder that keeps video jobs and their MP4s across restarts (`--data-dir`; docs/http.md "Job retention"). */
  dataDir?: string;
  /** The deploy config's `webrtc` fields set by `--ice-server`, `--ice-bind`, `--ice-transport-policy` (serve-webrtc.ts). */
  webrtc?: WebrtcOverrides;
}

/**
 * Parses `omnirx serve` arguments. `--api-key` falls back to `env.OMNIRX_API_KEY`; an empty or blank key is refused.
 * `--cors-origin` may be given several times; each must be an origin (`scheme://host[:port]`, no path, no `*`).
 * @returns the options, or `help` when help was printed.
 * @throws OmniError `OMNIRX_ERR_CLI_ARGUMENT` naming the flag.
 */
export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv, writeOut: (s: string) => void): ServeArgs | 'help' {
  const cmd = new Command('omnirx serve')
    .description('Serve the engine over an OpenAI-compatible HTTP API (see docs/http.md).')
    .exitOverride()
    .configureOutput({ writeOut, writeErr: writeOut, outputError: () => undefined })
    .option('--host <host>', 'address to bind (keep 127.0.0.1 unless the port is protected)', '127.0.0.1')
    .option('--port <port>', 'TCP port (0 picks a free one)', '8000')
    .option('--models-dir <dir>', 'folder of model directories')
    .option('--config <file>', 'deploy config (JSON): tasks, cache budgets, session settings, topology')
    .addOption(new Option('--matmul-dtype <dtype>', "dtype of the DiT's matrix products: float32 or bfloat16 (overrides the config)").choices(MATMUL_DTYPES))
    .option('--api-key <key>', 'bearer token required on /v1 routes (default: $OMNIRX_API_KEY)')
    .option(
      '--cors-origin <origin>',
      'an origin whose pages may call the server from a browser, e.g. https://app.example.com (repeatable; CORS is off without it)',
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option('--data-dir <dir>', 'folder that keeps video jobs and their MP4s across restarts (jobs.sqlite, videos/); default: in memory')
    .option('--drain-timeout-ms <ms>', 'wait for in-flight jobs on SIGTERM before failing them', '30000')
    .option(
      '--ice-server <url>',
      'a WebRTC ICE server, stun:host[:port] or turn:host[:port] (repeatable; TURN credentials from $OMNIRX_TURN_USERNAME and $OMNIRX_TURN_CREDENTIAL)',
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option('--ice-bind <address>', "IPv4 address of this host that WebRTC's ICE sockets bind (default: all)")
    .addOption(new Option('--ice-transport-policy <policy>', 'relay: WebRTC over TURN relays only').choices(['all', 'relay']))
    .addOption(
      new Option('--log-level <level>', 'least severe log entry written to stderr as JSON lines (info: one line per request and per job event)')
        .choices(LOG_LEVELS)
        .default('info'),
    );
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError && err.code === 'commander.helpDisplayed') return 'help';
    throw new OmniError('OMNIRX_ERR_CLI_ARGUMENT', err instanceof Error ? err.message.replace(/^error:\s*/, '') : String(err));
  }
  const o = cmd.opts<{
    host: string;
    port: string;
    modelsDir?: string;
    config?: string;
    matmulDtype?: MatmulDtype;
    apiKey?: string;
    corsOrigin: string[];
    drainTimeoutMs: string;
    logLevel: LogLevel;
    dataDir?: string;
    iceServer: string[];
    iceBind?: string;
    iceTransportPolicy?: string;
  }>();
  const webrtc = webrtcOverrides(o, env);
  for (const origin of o.corsOrigin) {
    const problem = corsOriginProblem(origin);
    if (problem !== undefined) throw new OmniError('OMNIRX_ERR_CLI_ARGUMENT', `--cors-origin ${problem}`);
  }
  // an empty key would serve without auth while the operator believes it on: refused, from the flag or the environment
  if (o.apiKey !== undefined && o.apiKey.trim() === '')
    throw new OmniError('OMNIRX_ERR_CLI_ARGUMENT', '--api-key must not be empty (leave it out to serve without auth)');
  if (o.apiKey === undefined && env.OMNIRX_API_KEY !== undefined && env.OMNIRX_API_KEY.trim() === '') {
    throw new OmniError('OMNIRX_ERR_CLI_ARGUMENT', 'OMNIRX_API_KEY is set but empty (unset it to serve without auth)');
  }
  const apiKey = o.apiKey ?? env.OMNIRX_API_KEY;
  return {
    host: o.host,
    logLevel: o.logLevel,
    port: parseNumericFlag({ flag: '--port', integer: true, min: 0, max: 65535 }, o.port),
    drainTimeoutMs: parseNumericFlag({ flag: '--drain-timeout-ms', integer: true, min: 0, max: 3_600_000 }, o.drainTimeoutMs),
    ...(o.modelsDir === undefined ? {} : { modelsDir: o.modelsDir }),
    ...(o.config === undefined ? {} : { config: o.config }),
    ...(o.dataDir === undefined ? {} : { dataDir: o.dataDir }),
    ...(o.matmulDtype === undefined ? {} : { matmulDtype: o.matmulDtype }),
    ...(apiKey === undefined ? {} : { apiKey }),
    ...(o.corsOrigin.length === 0 ? {} : { corsOrigins: o.corsOrigin }),
    ...(Object.keys(webrtc).length === 0 ? {} : { webrtc }),
  };
}

/** Settings (an error's `param`) that a serve flag sets, when the user gave it: the error then names the flag. */
const FLAG_OF_PARAM: ReadonlyArray<[RegExp, string, (a: ServeArgs) => boolean]> = [
  [/^dataDir$/, '--data-dir', (a) => a.dataDir !== undefined],
  [/^webrtc\.iceServers(\.|$)/, '--ice-server', (a) => a.webrtc?.iceServers !== undefined],
  [/^webrtc\.bindAddress$/, '--ice-bind', (a) => a.webrtc?.bindAddress !== undefined],
  [/^webrtc\.iceTransportPolicy$/, '--ice-transport-policy', (a) => a.webrtc?.iceTransportPolicy !== undefined],
];

/** `"--flag: "` for an error about a setting the user gave as a flag, else `""`. */
function flagPrefix(err: unknown, args: ServeArgs): string {
  const param = (err as { param?: unknown }).param;
  if (typeof param !== 'string') return '';
  const hit = FLAG_OF_PARAM.find(([re, , given]) => re.test(param) && given(args));
  return hit === undefined ? '' : `${hit[1]}: `;
}

/**
 * Runs `omnirx serve`: starts the HTTP server, prints `listening on http://HOST:PORT` (logs go to stderr), and on SIGTERM (or the
 * injected abort signal) drains — stops admitting, waits up to `--drain-timeout-ms` for in-flight jobs, fails the
 * rest, closes the engine — and resolves 0. Resolves 2 for a bad flag, 1 when the server cannot start. Never throws.
 */
export async function runServe(argv: string[], deps: ServeDeps): Promise<number> {
  let args: ServeArgs | 'help';
  try {
    args = parseServeArgs(argv, process.env, (s) => void deps.stdout.write(s));
  } catch (err) {
    deps.stderr.write(`error: ${(err as Error).message}\n(see "omnirx serve --help")\n`);
    return EXIT.USAGE;
  }
  if (args === 'help') return EXIT.OK;
  let deploy: DeployConfig | undefined;
  try {
    deploy = args.config === undefined ? undefined : await loadDeployConfig(args.config);
    if (args.matmulDtype !== undefined) deploy = { ...(deploy ?? parseDeployConfig({ schemaVersion: 1 })), matmulDtype: args.matmulDtype };
    if (args.webrtc !== undefined) deploy = withWebrtcOverrides(deploy ?? parseDeployConfig({ schemaVersion: 1 }), args.webrtc);
  } catch (err) {
    deps.stderr.write(`error: ${flagPrefix(err, args)}${(err as OmniError).code ?? 'OMNIRX_ERR_CONFIG'}: ${(err as Error).message}\n`);
    return EXIT.USAGE;
  }
  const { createServer } = await import('../../transports/server');
  const { builtinFamilies } = await import('../index');
  let app: Awaited<ReturnType<typeof createServer>>;
  try {
    app = await createServer({
      families: builtinFamilies(),
      logLevel: args.logLevel,
      logStream: deps.stderr,
      ...(args.modelsDir === undefined ? {} : { modelsDir: args.modelsDir }),
      ...(deploy === undefined ? {} : { deploy }),
      ...(args.apiKey === undefined ? {} : { apiKey: args.apiKey }),
      ...(args.corsOrigins === undefined ? {} : { corsOrigins: args.corsOrigins }),
      ...(args.dataDir === undefined ? {} : { dataDir: args.dataDir }),
    });
  } catch (err) {
    // a data folder in use by another server, not writable, or holding a damaged jobs.sqlite
    deps.stderr.write(`error: ${flagPrefix(err, args)}${(err as OmniError).code ?? 'OMNIRX_ERR_CONFIG'}: ${(err as Error).message}\n`);
    return EXIT.FAILED;
  }
  try {
    await app.omnirx.engineReady;
    const address = await app.listen({ host: args.host, port: args.port });
    deps.stdout.write(`omnirx serve: listening on ${address}\n`);
  } catch (err) {
    deps.stderr.write(`error: the server could not start: ${(err as Error).message}\n`);
    await app.close().catch(() => undefined);
    return EXIT.FAILED;
  }
  const drainTimeoutMs = args.drainTimeoutMs;
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    const off = (deps.onSigterm ?? ((h) => (process.once('SIGTERM', h), () => process.off('SIGTERM', h))))(stop);
    deps.signal?.addEventListener('abort', stop, { once: true });
    app.server.once('close', () => {
      off();
      resolve();
    });
  });
  deps.stdout.write('omnirx serve: draining\n');
  const r = await app.omnirx.drain(drainTimeoutMs);
  const kept = r.kept === undefined ? '' : `, ${r.kept} queued kept for the next start`;
  deps.stdout.write(`omnirx serve: stopped (${r.finished} jobs finished, ${r.failed} failed by the drain${kept})\n`);
  return EXIT.OK;
}
