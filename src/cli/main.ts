#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import type { ModelFamily } from '../pipeline/family/family';
import { EXIT, runGenerate, type CliEngineOptions, type EngineLike, type GenerateDeps } from './generate';
import { runModels } from './models';
import { runServe } from './serve';

/**
 * Creates the real engine with the package's built-in model families (the CLI uses the public API, `omnirx`, as any
 * caller does). Imported lazily so `--help` or an argument error never loads the native addon or a model.
 * @throws whatever `Engine.create` throws (native addon missing).
 */
export async function loadEngine(options: CliEngineOptions = {}): Promise<EngineLike> {
  const { Engine, builtinFamilies } = await import('../index');
  return Engine.create({ families: builtinFamilies(), ...options });
}

/** The package's built-in model families, loaded lazily as `loadEngine` does. */
async function builtinFamilies(): Promise<readonly ModelFamily[]> {
  return (await import('../index')).builtinFamilies();
}

/** The package's version from its package.json (the CLI runs from src/ under tests and from dist/src/ built). */
function packageVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const v = (require(rel) as { version?: unknown }).version;
      if (typeof v === 'string') return v;
    } catch {
      // try the next location
    }
  }
  return 'unknown';
}

/**
 * Builds the `omnirx` program. Each subcommand takes its raw arguments and resolves to an exit code, stored in
 * `result.code` (commander actions cannot return values).
 */
export function buildProgram(deps: GenerateDeps, result: { code: number }): Command {
  const program = new Command('omnirx')
    .description('Serve diffusion video models as RxJS streams.')
    .version(packageVersion(), '-V, --version')
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({
      writeOut: (s) => void deps.stdout.write(s),
      writeErr: (s) => void deps.stderr.write(s),
    });
  program
    .command('generate')
    .description('generate a video (MP4) or, with --task T2I, an image (PNG) from a prompt (see "omnirx generate --help")')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .passThroughOptions()
    .action(async (_opts: unknown, cmd: Command) => {
      result.code = await runGenerate(cmd.args, deps);
    });
  program
    .command('models')
    .description('list the models of the models folder: id, family, tasks (see "omnirx models --help")')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .passThroughOptions()
    .action(async (_opts: unknown, cmd: Command) => {
      result.code = await runModels(cmd.args, { families: builtinFamilies, stdout: deps.stdout, stderr: deps.stderr });
    });
  program
    .command('serve')
    .description('serve an OpenAI-compatible HTTP API (see "omnirx serve --help")')
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .passThroughOptions()
    .action(async (_opts: unknown, cmd: Command) => {
      result.code = await runServe(cmd.args, deps);
    });
  return program;
}

/**
 * Runs the CLI with `argv` (arguments after the executable and script) and resolves to the exit code:
 * 0 success, 1 failure, 2 usage error, 130 interrupted. Never throws.
 */
export async function main(argv: string[], overrides: Partial<GenerateDeps> = {}): Promise<number> {
  const deps: GenerateDeps = {
    createEngine: loadEngine,
    stdout: process.stdout,
    stderr: process.stderr,
    isTTY: process.stdout.isTTY === true,
    ...overrides,
  };
  const result = { code: EXIT.OK };
  const program = buildProgram(deps, result);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return result.code;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return EXIT.OK;
      // Usage errors (unknown command, no command): commander already printed the message.
      return EXIT.USAGE;
    }
    deps.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT.FAILED;
  }
}

if (require.main === module) {
  // First Ctrl-C cancels the request (unsubscribe) and exits 130 once the engine has closed; a second one exits now.
  const controller = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    interrupts += 1;
    if (interrupts > 1) process.exit(EXIT.INTERRUPTED);
    controller.abort();
  };
  process.on('SIGINT', onSigint);
  // `omnirx generate | head -1`: a closed stdout is not an error worth a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
  void main(process.argv.slice(2), { signal: controller.signal }).then((code) => {
    process.off('SIGINT', onSigint);
    process.exitCode = code;
    // Exit even if something (a misbehaving engine) left a handle open.
    setTimeout(() => process.exit(code), 2000).unref();
  });
}
