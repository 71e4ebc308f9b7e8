/**
 * The same Wan DiT forward (same seeded weights, same inputs, float32, 2 threads) in omnirx, in PyTorch eager under
 * its best setup on these machines, and in onnxruntime-node (the model exported from the PyTorch reference), run
 * alternately in one process tree after a numerical check that all three compute the same thing.
 *
 * Prints one JSON line per config (medians):
 *   {"config", "tokens", "omnirx_ms", "torch_ms", "ort_ms", "speedup_vs_best": min(torch, ort) / omnirx,
 *    "omnirx_bf16_ms", "speedup_bf16_vs_best", ...}
 * and one line for the GEMM: {"matmul_gflops", "peak_gflops_2threads", "torch_mm_gflops", "matmul_bf16_gflops", ...}
 * (1024³ `linear` plan; torch.mm = OpenBLAS SGEMM under the same setup, at the same moment). The bf16 figures are
 * omnirx with `matmulDtype: 'bfloat16'` (bf16 operands, float32 accumulation; checked against the
 * reference within BF16_TOL); speedup_vs_best stays the float32 comparison. The numerical check goes to stderr as
 * {"check": config, ...}. With --profile, also one {"profile": config, ...} line per config: every op of omnirx's
 * real DiT plan timed on its own, summed by category (linear GEMMs / attention / norm / elementwise / layout) and by
 * kind (op and shape), with GFLOP/s or GB/s. "parallel_speedup_2threads" (2 = both vCPUs free) tells whether the
 * shared host gave the run its two cores; discard runs where it is well below 2.
 *
 * Run: npm run build && npm run bench:dit [-- --config tiny,small --rounds 7 --profile --no-torch --no-ort]
 *
 * PyTorch: /usr/bin/python3 (Debian python3-torch 1.13; OMNIRX_BENCH_PYTHON overrides) runs
 * bench/dit-forward/torch_driver.py through bench/dit-forward/torch-env.sh (the environment of FACTS.md's best
 * setup) with the project's reference model, tools/reference/omnirx_reference.py. onnxruntime-node 1.30 is installed
 * by this script into /tmp/omnirx-ort (OMNIRX_ORT_DIR overrides), never into the package. Weights, inputs and the
 * ONNX export are cached in $TMPDIR/omnirx-dit-bench (OMNIRX_BENCH_DIR overrides). When torch or onnxruntime cannot
 * be set up, the script says why on stderr and prints null for that column; the omnirx figures are always printed.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Worker } from 'node:worker_threads';
import { WanDiTConfigSchema, type WanDiTConfig } from '../src/models/wan/config';
import { WanDiT, wanDiTParams, type DiTShape } from '../src/models/wan/dit';
import { timestepEmbedding } from '../src/models/wan/rope';
import { readSafetensors, writeSafetensors } from '../src/models/weights/safetensors';
import { WeightStore, type ParamSpec } from '../src/models/weights/weight-store';
import { createTensor, loadNative, type NativeBinding, type NativePlan, type NativeTensor, type PlanOpSpec } from '../src/native/binding';
import { PlanBuilder, type CompiledPlan, type MatmulDtype } from '../src/native/plan-builder';
import { Rng } from '../src/util/rng';
import { cpuDescription } from './cpu';
import { maxRelErr as relErr } from '../test/helpers/fixtures';

const ROOT = path.resolve(__dirname, '..', '..');
const HELPERS = path.join(ROOT, 'bench', 'dit-forward');
const CACHE = process.env.OMNIRX_BENCH_DIR ?? path.join(os.tmpdir(), 'omnirx-dit-bench');
const ORT_DIR = process.env.OMNIRX_ORT_DIR ?? '/tmp/omnirx-ort';
const ORT_VERSION = '1.30';
const PYTHON = process.env.OMNIRX_BENCH_PYTHON ?? '/usr/bin/python3';
const THREADS = 2;
const TOL = 1e-3;
/** omnirx with bfloat16 matmuls against the float32 reference (test/parity: measured 3.6e-3 on the tiny fixture). */
const BF16_TOL = 1e-2;
const SEED = 20250;
const T = 737.25;
/** Measured earlier on Zen 5: ~200–220 GFLOP/s per core with AVX-512 FMA, ~390–400 GFLOP/s on both cores (not measurable from Node). */
const PEAK_GFLOPS_2THREADS = 390;

interface BenchConfig {
  name: string;
  dit: WanDiTConfig;
  /** Latent frames, height, width (patch [1, 2, 2]). */
  frames: number;
  height: number;
  width: number;
  textLen: number;
  /** Forwards per engine per round. */
  reps: number;
  rounds: number;
}

function ditConfig(dim: number, ffnDim: number, numHeads: number, numLayers: number): WanDiTConfig {
  return WanDiTConfigSchema.parse({
    patchSize: [1, 2, 2],
    inChannels: 16,
    outChannels: 16,
    dim,
    ffnDim,
    numHeads,
    numLayers,
    textDim: dim,
    freqDim: 256,
    eps: 1e-6,
    ropeTheta: 10000,
  });
}

const CONFIGS: BenchConfig[] = [
  // 4 latent frames × 16×16 latents → 4 × 8×8 = 256 tokens.
  { name: 'tiny', dit: ditConfig(256, 1024, 4, 8), frames: 4, height: 16, width: 16, textLen: 32, reps: 5, rounds: 9 },
  // 8 latent frames × 32×32 latents → 8 × 16×16 = 2048 tokens.
  { name: 'small', dit: ditConfig(512, 2048, 8, 12), frames: 8, height: 32, width: 32, textLen: 64, reps: 1, rounds: 7 },
];

// ---- small helpers ------------------------------------------------------------------------------------------

function log(msg: string): void {
  process.stderr.write(`[dit-bench] ${msg}\n`);
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

async function timeRuns(n: number, f: () => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f();
    out.push(performance.now() - t0);
  }
  return out;
}

function hash(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 12);
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function parseArgs(argv: readonly string[]): { configs: BenchConfig[]; rounds?: number; profile: boolean; torch: boolean; ort: boolean } {
  let names = CONFIGS.map((c) => c.name);
  let rounds: number | undefined;
  let profile = false;
  let torch = true;
  let ort = true;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--config') names = (argv[++i] ?? '').split(',').filter(Boolean);
    else if (a === '--rounds') rounds = Number(argv[++i]);
    else if (a === '--profile') profile = true;
    else if (a === '--no-torch') torch = false;
    else if (a === '--no-ort') ort = false;
    else throw new Error(`unknown argument ${a} (use --config tiny,small --rounds N --profile --no-torch --no-ort)`);
  }
  if (rounds !== undefined && !(Number.isInteger(rounds) && rounds >= 1)) throw new Error('--rounds must be a positive integer');
  const configs = names.map((n) => {
    const c = CONFIGS.find((x) => x.name === n);
    if (c === undefined) throw new Error(`unknown config ${n} (${CONFIGS.map((x) => x.name).join(', ')})`);
    return c;
  });
  return { configs, rounds, profile, torch, ort };
}

// ---- weights and inputs ---------------------------------------------------------------------------------------

/**
 * Seeded weights in the style of src/families/wan/seeded-model.ts `materialise`, except that the parameters it would
 * set to exactly 0 or 1 (biases, norm gains) are perturbed, so the numerical check also catches a bias or gain
 * that one engine applied differently.
 */
function seededWeights(params: readonly ParamSpec[], rng: Rng): Record<string, { shape: number[]; data: Float32Array }> {
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const p of params) {
    const data = new Float32Array(p.shape.reduce((a, b) => a * b, 1));
    if (p.init === 'normal') rng.fillNormal(data, p.std ?? 1);
    else {
      rng.fillNormal(data, p.init === 'ones' ? 0.1 : 0.05);
      if (p.init === 'ones') for (let i = 0; i < data.length; i++) data[i] += 1;
    }
    out[p.name] = { shape: p.shape, data };
  }
  return out;
}

interface Prepared {
  dir: string;
  weights: string;
  inputs: string;
  onnx: string;
  latents: Float32Array;
  timestep: Float32Array;
  context: Float32Array;
  latentShape: number[];
  contextShape: number[];
}

async function prepare(c: BenchConfig): Promise<Prepared> {
  const key = hash(JSON.stringify({ dit: c.dit, frames: c.frames, height: c.height, width: c.width, textLen: c.textLen, seed: SEED, t: T, v: 1 }));
  const dir = path.join(CACHE, `${c.name}-${key}`);
  mkdirSync(dir, { recursive: true });
  const weights = path.join(dir, 'weights.safetensors');
  const inputs = path.join(dir, 'inputs.safetensors');
  const exporter =
    readFileSync(path.join(HELPERS, 'torch_driver.py'), 'utf8') + readFileSync(path.join(ROOT, 'tools', 'reference', 'omnirx_reference.py'), 'utf8');
  const onnx = path.join(dir, `model-${hash(exporter)}.onnx`);
  const latentShape = [1, c.dit.inChannels, c.frames, c.height, c.width];
  const contextShape = [1, c.textLen, c.dit.textDim];
  if (!existsSync(weights)) {
    log(`${c.name}: writing seeded weights to ${weights}`);
    await writeSafetensors(weights, seededWeights(wanDiTParams(c.dit), new Rng(SEED)), {
      format: 'pt',
      generator: 'omnirx bench/dit-forward',
      seed: String(SEED),
    });
  }
  if (!existsSync(inputs)) {
    const rng = new Rng(SEED + 1);
    const lat = rng.fillNormal(new Float32Array(latentShape.reduce((a, b) => a * b, 1)));
    const ctx = rng.fillNormal(new Float32Array(contextShape.reduce((a, b) => a * b, 1)));
    const ts = timestepEmbedding(T, c.dit.freqDim);
    await writeSafetensors(
      inputs,
      { latents: { shape: latentShape, data: lat }, timestep: { shape: [1, c.dit.freqDim], data: ts }, context: { shape: contextShape, data: ctx } },
      { t: String(T) },
    );
  }
  const f = await readSafetensors(inputs);
  return {
    dir,
    weights,
    inputs,
    onnx,
    latents: f.float32('latents'),
    timestep: f.float32('timestep'),
    context: f.float32('context'),
    latentShape,
    contextShape,
  };
}

// ---- PyTorch worker -------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

class TorchWorker {
  private readonly pending: string[] = [];
  private readonly waiters: Array<(line: string | undefined) => void> = [];
  private closed = false;
  private exitInfo = '';

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const w = this.waiters.shift();
      if (w) w(line);
      else this.pending.push(line);
    });
    child.stderr.on('data', (d: Buffer) => process.stderr.write(d));
    child.on('exit', (code, signal) => {
      this.exitInfo = `exited with ${signal ?? `code ${code}`}`;
      this.closeAll();
    });
    child.on('error', (e) => {
      this.exitInfo = `could not be started: ${e.message}`;
      this.closeAll();
    });
  }

  private closeAll(): void {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w(undefined);
  }

  /** Starts the driver; resolves with its ready line, or rejects with its error line or exit status. */
  static async start(args: string[]): Promise<{ worker: TorchWorker; ready: Json }> {
    if (!existsSync(PYTHON)) throw new Error(`${PYTHON} not found (Debian python3-torch; set OMNIRX_BENCH_PYTHON)`);
    const child = spawn('sh', [path.join(HELPERS, 'torch-env.sh'), PYTHON, path.join(HELPERS, 'torch_driver.py'), ...args], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const worker = new TorchWorker(child);
    const ready = await worker.next();
    if (ready.ready !== true) {
      worker.close();
      throw new Error(String(ready.error ?? JSON.stringify(ready)));
    }
    return { worker, ready };
  }

  private async next(): Promise<Json> {
    const line = this.pending.shift() ?? (this.closed ? undefined : await new Promise<string | undefined>((r) => this.waiters.push(r)));
    if (line === undefined) throw new Error(`the PyTorch driver ${this.exitInfo || 'closed its output'}`);
    try {
      return JSON.parse(line) as Json;
    } catch {
      throw new Error(`the PyTorch driver printed a non-JSON line: ${line.slice(0, 200)}`);
    }
  }

  async run(n: number): Promise<number[]> {
    if (this.closed) throw new Error(`the PyTorch driver ${this.exitInfo}`);
    this.child.stdin.write(`run ${n}\n`);
    const r = await this.next();
    if (!Array.isArray(r.times_ms)) throw new Error(`PyTorch driver: ${String(r.error ?? JSON.stringify(r))}`);
    return r.times_ms as number[];
  }

  close(): void {
    if (!this.closed) {
      this.child.stdin.end('quit\n');
      const t = setTimeout(() => this.child.kill(), 5000);
      t.unref();
    }
  }
}

// ---- onnxruntime-node ------------------------------------------------------------------------------------------

interface OrtTensor {
  readonly data: unknown;
  readonly dims: readonly number[];
}
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release?(): Promise<void>;
}
interface OrtModule {
  InferenceSession: { create(path: string, options: Record<string, unknown>): Promise<OrtSession> };
  Tensor: new (type: 'float32', data: Float32Array, dims: readonly number[]) => OrtTensor;
}

/** Loads onnxruntime-node from ORT_DIR, installing it there first (never into this package) when missing. */
function loadOrt(): { ort: OrtModule; version: string } {
  const pkgDir = path.join(ORT_DIR, 'node_modules', 'onnxruntime-node');
  if (!existsSync(path.join(pkgDir, 'package.json'))) {
    log(`installing onnxruntime-node@${ORT_VERSION} into ${ORT_DIR} (outside the repository; ONNXRUNTIME_NODE_INSTALL=skip)`);
    mkdirSync(ORT_DIR, { recursive: true });
    const manifest = path.join(ORT_DIR, 'package.json');
    if (!existsSync(manifest))
      writeFileSync(
        manifest,
        JSON.stringify({ name: 'omnirx-bench-ort', private: true, description: 'onnxruntime-node for omnirx bench/dit-forward' }, null, 2),
      );
    // Drop npm_* variables inherited from `npm run` so the nested npm cannot resolve this repository as its project.
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.toLowerCase().startsWith('npm_')) env[k] = v;
    env.ONNXRUNTIME_NODE_INSTALL = 'skip';
    const r = spawnSync('npm', ['install', `onnxruntime-node@${ORT_VERSION}`, '--prefix', ORT_DIR, '--no-audit', '--no-fund'], {
      cwd: ORT_DIR,
      env,
      stdio: ['ignore', 2, 2],
      timeout: 600_000,
    });
    if (r.error !== undefined || r.status !== 0)
      throw new Error(`npm install onnxruntime-node@${ORT_VERSION} into ${ORT_DIR} failed (${r.error?.message ?? `exit ${r.status}`})`);
  }
  const version = (JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
  if (!version.startsWith(`${ORT_VERSION}.`)) log(`note: ${pkgDir} holds onnxruntime-node ${version}, not ${ORT_VERSION}.x`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return { ort: require(pkgDir) as OrtModule, version };
}

// ---- omnirx ---------------------------------------------------------------------------------------------------

interface OmnirxSide {
  dit: WanDiT;
  store: WeightStore;
  shape: DiTShape;
  io: { latents: NativeTensor; context: NativeTensor; timestep: NativeTensor; out: NativeTensor };
  forward(): Promise<void>;
  dispose(): void;
}

async function omnirxSide(native: NativeBinding, c: BenchConfig, p: Prepared, matmulDtype: MatmulDtype = 'float32'): Promise<OmnirxSide> {
  const store = await WeightStore.open(native, p.weights, wanDiTParams(c.dit));
  const dit = new WanDiT(native, c.dit, store, matmulDtype);
  const shape: DiTShape = { batch: 1, frames: c.frames, height: c.height, width: c.width, textLen: c.textLen };
  const io = {
    latents: createTensor(native, p.latentShape, p.latents),
    context: createTensor(native, p.contextShape, p.context),
    timestep: createTensor(native, [1, c.dit.freqDim]),
    out: createTensor(native, p.latentShape),
  };
  return {
    dit,
    store,
    shape,
    io,
    forward: () => dit.forward(shape, io, [T]),
    dispose: () => {
      for (const t of Object.values(io)) t.dispose();
      dit.dispose();
      store.dispose();
    },
  };
}

// ---- profile --------------------------------------------------------------------------------------------------

/**
 * The op list and value shapes of every plan compiled while the bench runs, captured from the PlanBuilder (its
 * `ops` and `values` are private fields; this is bench tooling, so it reads them and fails loudly if they move).
 */
interface CapturedPlan {
  ops: PlanOpSpec[];
  shapes: number[][];
}
const capturedPlans = new WeakMap<CompiledPlan, CapturedPlan>();

function captureCompiledPlans(): void {
  const original = PlanBuilder.prototype.compile;
  PlanBuilder.prototype.compile = function (this: PlanBuilder, native: NativeBinding): CompiledPlan {
    const plan = original.call(this, native);
    const inner = this as unknown as { ops?: PlanOpSpec[]; values?: Array<{ shape: number[] }> };
    if (Array.isArray(inner.ops) && Array.isArray(inner.values))
      capturedPlans.set(plan, { ops: inner.ops.map((o) => ({ ...o })), shapes: inner.values.map((v) => [...v.shape]) });
    return plan;
  };
}

type Category = 'linear' | 'attention' | 'norm' | 'elementwise' | 'layout';

const CATEGORY: Record<string, Category> = {
  linear: 'linear',
  attention: 'attention',
  layer_norm: 'norm',
  rms_norm: 'norm',
  permute: 'layout',
  copy: 'layout',
};

const numel = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** A name for ops of the same kind and shape, its FLOPs (GEMM-like ops) and the bytes it reads and writes. */
function describeOp(op: PlanOpSpec, shapes: number[][]): { kind: string; category: Category; flops: number; bytes: number } {
  const category = CATEGORY[op.op] ?? 'elementwise';
  const shp = (i: number): number[] => (op.inputs[i] >= 0 ? shapes[op.inputs[i]] : []);
  const bytes = 4 * (op.inputs.reduce((a, id) => a + (id >= 0 ? numel(shapes[id]) : 0), 0) + op.outputs.reduce((a, id) => a + numel(shapes[id]), 0));
  const role = (op.label ?? '').replace(/^blocks\.\d+\./, '').replace(/^condition_embedder\./, '');
  if (op.op === 'linear') {
    const [N, K] = shp(1);
    const M = numel(shp(0)) / K;
    const act = op.attrs?.act === 1 ? '+gelu' : op.attrs?.act === 2 ? '+silu' : '';
    return { kind: `linear ${M}x${K}·${K}x${N}${act}`, category, flops: 2 * M * N * K, bytes };
  }
  if (op.op === 'attention') {
    const B = Number(op.attrs?.batch);
    const H = Number(op.attrs?.heads);
    const D = Number(op.attrs?.headDim);
    const Lq = numel(shp(0)) / (B * H * D);
    const Lk = numel(shp(1)) / (B * H * D);
    return { kind: `attention Lq=${Lq} Lk=${Lk} H=${H} D=${D}`, category, flops: 4 * B * H * Lq * Lk * D, bytes };
  }
  return { kind: `${op.op} [${shapes[op.outputs[0]].join('x')}]${role ? ` (${role})` : ''}`, category, flops: 0, bytes };
}

/**
 * Where omnirx's forward time goes: every op of the real DiT plan is run on its own (CompiledPlan's native plan
 * runs any op range [i, i+1) with the same arena, so inputs are the real intermediates), in order, several sweeps;
 * per-op medians less the cost of an empty run are summed by op kind and category. The sum is compared with the
 * whole plan run; the difference is what running ops back to back saves or costs (thread wake-ups, caches).
 */
async function profileConfig(c: BenchConfig, side: OmnirxSide): Promise<Json> {
  const plan = side.dit.planFor(side.shape);
  const captured = capturedPlans.get(plan);
  const inner = (plan as unknown as { plan?: NativePlan }).plan;
  if (captured === undefined || inner === undefined)
    throw new Error('profile: cannot see the plan internals (PlanBuilder.ops/values or CompiledPlan.plan moved)');
  const named: Record<string, NativeTensor> = { latents: side.io.latents, timestep: side.io.timestep, context: side.io.context, velocity: side.io.out };
  const ordered = plan.slots.map((s) => named[s.name]);
  const nOps = captured.ops.length;
  const sweeps = c.reps >= 5 ? 7 : 3;
  const per: number[][] = captured.ops.map(() => []);
  const empty: number[] = [];
  const full: number[] = [];
  await side.forward();
  for (let s = 0; s < sweeps; s++) {
    full.push(...(await timeRuns(1, () => plan.run(named))));
    for (let i = 0; i < nOps; i++) {
      let t0 = performance.now();
      await inner.run(ordered, i, i + 1);
      per[i].push(performance.now() - t0);
      t0 = performance.now();
      await inner.run(ordered, i + 1, i + 1);
      empty.push(performance.now() - t0);
    }
  }
  const overhead = median(empty);
  const opMs = per.map((xs) => Math.max(median(xs) - overhead, 0));
  const sumOps = opMs.reduce((a, b) => a + b, 0);
  const fullMs = median(full);

  const groups = new Map<string, { category: Category; count: number; ms: number; flops: number; bytes: number }>();
  const cats = new Map<Category, { ms: number; flops: number; bytes: number; count: number }>();
  const firstBlock = plan.segments.find((s) => s.name === 'blocks.0')?.from ?? 0;
  const head = plan.segments.find((s) => s.name === 'head')?.from ?? nOps;
  const sections = { prefix_ms: 0, blocks_ms: 0, head_ms: 0 };
  captured.ops.forEach((op, i) => {
    const d = describeOp(op, captured.shapes);
    const g = groups.get(d.kind) ?? { category: d.category, count: 0, ms: 0, flops: 0, bytes: 0 };
    g.count++;
    g.ms += opMs[i];
    g.flops += d.flops;
    g.bytes += d.bytes;
    groups.set(d.kind, g);
    const e = cats.get(d.category) ?? { ms: 0, flops: 0, bytes: 0, count: 0 };
    e.ms += opMs[i];
    e.flops += d.flops;
    e.bytes += d.bytes;
    e.count++;
    cats.set(d.category, e);
    if (i < firstBlock) sections.prefix_ms += opMs[i];
    else if (i < head) sections.blocks_ms += opMs[i];
    else sections.head_ms += opMs[i];
  });
  const rate = (e: { ms: number; flops: number; bytes: number }): Json =>
    e.ms <= 0 ? {} : e.flops > 0 ? { gflops: round(e.flops / e.ms / 1e6, 1), gflop: round(e.flops / 1e9, 3) } : { gbps: round(e.bytes / e.ms / 1e6, 1) };
  const categories: Json = {};
  for (const [name, e] of [...cats].sort((a, b) => b[1].ms - a[1].ms)) {
    categories[name] = { ops: e.count, ms: round(e.ms), pct_of_ops: round((100 * e.ms) / sumOps, 1), ...rate(e) };
  }
  return {
    profile: c.name,
    parallel_speedup_2threads: round(await parallelSpeedup()),
    full_plan_ms: round(fullMs),
    sum_of_ops_ms: round(sumOps),
    ops: nOps,
    per_op_run_overhead_ms: round(overhead, 4),
    sections: { prefix_ms: round(sections.prefix_ms, 3), blocks_ms: round(sections.blocks_ms), head_ms: round(sections.head_ms, 3) },
    categories,
    kinds: [...groups]
      .sort((a, b) => b[1].ms - a[1].ms)
      .map(([kind, g]) => ({
        kind,
        category: g.category,
        count: g.count,
        ms_total: round(g.ms, 3),
        ms_each: round(g.ms / g.count, 4),
        pct_of_ops: round((100 * g.ms) / sumOps, 1),
        ...rate(g),
      })),
  };
}

// ---- machine ----------------------------------------------------------------------------------------------------

/**
 * How much faster two JS threads run a fixed busy loop than one (2.0 = two free cores). The machines are shared:
 * when the host gives this VM's two vCPUs less than two cores, every 2-thread figure drops, so it is printed with
 * the results.
 */
async function parallelSpeedup(): Promise<number> {
  const code = `const { parentPort } = require('node:worker_threads');
    parentPort.on('message', (n) => { const t = performance.now(); let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); parentPort.postMessage([performance.now() - t, s]); });`;
  const workers = [new Worker(code, { eval: true }), new Worker(code, { eval: true })];
  const job = (w: Worker, n: number): Promise<number> =>
    new Promise((resolve) => {
      w.once('message', (m: [number, number]) => resolve(m[0]));
      w.postMessage(n);
    });
  try {
    const n = 2e7;
    await Promise.all(workers.map((w) => job(w, n / 10)));
    const ratios: number[] = [];
    for (let r = 0; r < 3; r++) {
      const one = await job(workers[0], n);
      const two = Math.max(...(await Promise.all(workers.map((w) => job(w, n)))));
      ratios.push((2 * one) / two);
    }
    return median(ratios);
  } finally {
    for (const w of workers) await w.terminate();
  }
}

// ---- GEMM -----------------------------------------------------------------------------------------------------

async function matmulGflops(native: NativeBinding, matmulDtype: MatmulDtype = 'float32'): Promise<number> {
  const M = 1024;
  const N = 1024;
  const K = 1024;
  const rng = new Rng(5);
  const w = createTensor(native, [N, K], rng.fillNormal(new Float32Array(N * K)));
  const x = createTensor(native, [M, K], rng.fillNormal(new Float32Array(M * K)));
  const y = createTensor(native, [M, N]);
  const g = new PlanBuilder();
  g.output('y', g.linear(g.input('x', [M, K]), g.constant(w), undefined, { matmulDtype }));
  const plan = g.compile(native);
  try {
    await timeRuns(3, () => plan.run({ x, y }));
    const ms = median(await timeRuns(15, () => plan.run({ x, y })));
    return (2 * M * N * K) / ms / 1e6;
  } finally {
    plan.dispose();
    for (const t of [w, x, y]) t.dispose();
  }
}

// ---- one config -----------------------------------------------------------------------------------------------

async function benchConfig(
  native: NativeBinding,
  c: BenchConfig,
  opts: { rounds?: number; profile: boolean; torch: boolean; ort: boolean },
): Promise<{ line: Json; profile?: Json }> {
  const p = await prepare(c);
  const L = (c.frames / c.dit.patchSize[0]) * (c.height / c.dit.patchSize[1]) * (c.width / c.dit.patchSize[2]);

  log(`${c.name}: omnirx: loading and compiling`);
  const om = await omnirxSide(native, c, p);
  log(`${c.name}: omnirx with bfloat16 matmuls: loading and compiling`);
  const omBf = await omnirxSide(native, c, p, 'bfloat16');
  let torch: TorchWorker | undefined;
  let session: OrtSession | undefined;
  try {
    await om.forward();
    const omOut = Float32Array.from(om.io.out.data);
    await omBf.forward();
    const omBfOut = Float32Array.from(omBf.io.out.data);

    // PyTorch: reference outputs, ONNX export, then the timing server.
    let refOut: Float32Array | undefined;
    let torchOut: Float32Array | undefined;
    if (opts.torch) {
      try {
        const outputs = path.join(p.dir, `outputs-${process.pid}.safetensors`);
        log(`${c.name}: PyTorch: loading the reference, checking it, exporting ONNX if needed (${path.basename(p.onnx)})`);
        const started = await TorchWorker.start([
          '--config',
          JSON.stringify(c.dit),
          '--weights',
          p.weights,
          '--inputs',
          p.inputs,
          '--outputs',
          outputs,
          '--onnx',
          opts.ort ? p.onnx : '',
          '--threads',
          String(THREADS),
        ]);
        torch = started.worker;
        log(`${c.name}: PyTorch ready: ${JSON.stringify(started.ready)}`);
        const f = await readSafetensors(outputs);
        refOut = f.float32('reference');
        torchOut = f.float32('torch');
        rmSync(outputs, { force: true });
      } catch (e) {
        log(`${c.name}: PyTorch unavailable, torch_ms will be null: ${errorText(e)}`);
        torch?.close();
        torch = undefined;
      }
    }

    // onnxruntime-node on the exported model.
    let ort: OrtModule | undefined;
    let feeds: Record<string, OrtTensor> | undefined;
    let ortOut: Float32Array | undefined;
    if (opts.ort) {
      try {
        if (!existsSync(p.onnx))
          throw new Error(
            `no ONNX export at ${p.onnx} (it is written by the PyTorch driver${opts.torch ? ', which failed' : '; run without --no-torch once'})`,
          );
        const loaded = loadOrt();
        ort = loaded.ort;
        feeds = {
          latents: new ort.Tensor('float32', p.latents, p.latentShape),
          timestep: new ort.Tensor('float32', p.timestep, [1, c.dit.freqDim]),
          context: new ort.Tensor('float32', p.context, p.contextShape),
        };
        // Its best setup: 2 intra-op threads, all graph optimisations; with and without spin-waiting of the intra-op
        // pool (ORT's default spins, which costs a lot when the host does not give both vCPUs at once), keeping the
        // faster of the two in a short trial.
        const trial = async (spin: '0' | '1'): Promise<{ s: OrtSession; ms: number }> => {
          const s = await ort!.InferenceSession.create(p.onnx, {
            intraOpNumThreads: THREADS,
            interOpNumThreads: 1,
            executionMode: 'sequential',
            graphOptimizationLevel: 'all',
            extra: { session: { intra_op: { allow_spinning: spin } } },
          });
          await s.run(feeds!);
          return { s, ms: median(await timeRuns(c.reps >= 5 ? 5 : 2, async () => void (await s.run(feeds!)))) };
        };
        const spin = await trial('1');
        const still = await trial('0');
        const [keep, drop] = spin.ms <= still.ms ? [spin, still] : [still, spin];
        await drop.s.release?.();
        session = keep.s;
        log(
          `${c.name}: onnxruntime-node ${loaded.version} ready (${ORT_DIR}); intra-op spinning on ${round(spin.ms)} ms, off ${round(still.ms)} ms → ${keep === spin ? 'on' : 'off'}`,
        );
        ortOut = (await session.run(feeds)).velocity.data as Float32Array;
      } catch (e) {
        log(`${c.name}: onnxruntime unavailable, ort_ms will be null: ${errorText(e)}`);
        await session?.release?.();
        session = undefined;
      }
    }

    // Numerical agreement before timing. Ground truth: the reference as written (complex128 RoPE).
    const truth = refOut ?? ortOut;
    const check: Json = {
      check: c.name,
      tolerance: TOL,
      ground_truth: refOut ? 'torch reference as written' : ortOut ? 'onnxruntime (torch unavailable)' : 'none',
    };
    if (truth !== undefined) {
      const eOm = relErr(omOut, truth);
      check.omnirx_rel_err = eOm;
      if (torchOut) check.torch_rel_err = relErr(torchOut, truth);
      if (ortOut && refOut) check.ort_rel_err = relErr(ortOut, truth);
      if (ortOut) check.omnirx_vs_ort_rel_err = relErr(omOut, ortOut);
      check.omnirx_bf16_rel_err = relErr(omBfOut, truth);
      check.bf16_tolerance = BF16_TOL;
      process.stderr.write(`${JSON.stringify(check)}\n`);
      if (!(eOm <= TOL)) throw new Error(`${c.name}: omnirx differs from the reference by ${eOm} > ${TOL}; not timing different maths`);
      if (!((check.omnirx_bf16_rel_err as number) <= BF16_TOL))
        throw new Error(`${c.name}: omnirx bf16 differs from the reference by ${check.omnirx_bf16_rel_err} > ${BF16_TOL}`);
      if (torchOut && !(relErr(torchOut, truth) <= TOL)) {
        log(`${c.name}: PyTorch output differs from the reference beyond ${TOL}; dropping it`);
        torch?.close();
        torch = undefined;
      }
      if (ortOut && refOut && !(relErr(ortOut, truth) <= TOL)) {
        log(`${c.name}: onnxruntime output differs from the reference beyond ${TOL}; dropping it`);
        await session?.release?.();
        session = undefined;
      }
    } else {
      log(`${c.name}: no baseline ran, so there is nothing to check omnirx against here (test/parity covers it)`);
      const eBf = relErr(omBfOut, omOut);
      check.omnirx_bf16_vs_float32_rel_err = eBf;
      check.bf16_tolerance = BF16_TOL;
      process.stderr.write(`${JSON.stringify(check)}\n`);
      if (!(eBf <= BF16_TOL)) throw new Error(`${c.name}: omnirx bf16 differs from omnirx float32 by ${eBf} > ${BF16_TOL}`);
    }

    // Warm-up, then alternating rounds.
    const sess = session;
    const ortForward = sess && feeds ? async (): Promise<void> => void (await sess.run(feeds!)) : undefined;
    await om.forward();
    await omBf.forward();
    if (ortForward) await ortForward();
    if (torch) await torch.run(1);
    const rounds = opts.rounds ?? c.rounds;
    const times = { omnirx: [] as number[], omnirxBf16: [] as number[], torch: [] as number[], ort: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      times.omnirx.push(...(await timeRuns(c.reps, om.forward)));
      times.omnirxBf16.push(...(await timeRuns(c.reps, omBf.forward)));
      if (torch) {
        try {
          times.torch.push(...(await torch.run(c.reps)));
        } catch (e) {
          log(`${c.name}: PyTorch failed during timing: ${errorText(e)}`);
          torch = undefined;
          times.torch = [];
        }
      }
      if (ortForward && session) times.ort.push(...(await timeRuns(c.reps, ortForward)));
      log(
        `${c.name}: round ${r + 1}/${rounds}: omnirx ${round(median(times.omnirx.slice(-c.reps)))} ms (bf16 ${round(median(times.omnirxBf16.slice(-c.reps)))} ms), torch ${times.torch.length ? round(median(times.torch.slice(-c.reps))) : '-'} ms, ort ${times.ort.length ? round(median(times.ort.slice(-c.reps))) : '-'} ms`,
      );
    }
    const omMs = median(times.omnirx);
    const omBfMs = median(times.omnirxBf16);
    const torchMs = times.torch.length ? median(times.torch) : null;
    const ortMs = session && times.ort.length ? median(times.ort) : null;
    const best = [torchMs, ortMs].filter((x): x is number => x !== null);
    const line: Json = {
      config: c.name,
      tokens: L,
      omnirx_ms: round(omMs),
      torch_ms: torchMs === null ? null : round(torchMs),
      ort_ms: ortMs === null ? null : round(ortMs),
      speedup_vs_best: best.length ? round(Math.min(...best) / omMs, 3) : null,
      omnirx_bf16_ms: round(omBfMs),
      speedup_bf16_vs_best: best.length ? round(Math.min(...best) / omBfMs, 3) : null,
      min_ms: {
        omnirx: round(Math.min(...times.omnirx)),
        torch: times.torch.length ? round(Math.min(...times.torch)) : null,
        ort: ortMs === null ? null : round(Math.min(...times.ort)),
      },
      rounds,
      forwards_per_round: c.reps,
      parallel_speedup_2threads: round(await parallelSpeedup()),
    };
    torch?.close();
    torch = undefined;
    await session?.release?.();
    session = undefined;
    const profile = opts.profile ? await profileConfig(c, om) : undefined;
    return { line, profile };
  } finally {
    torch?.close();
    await session?.release?.();
    om.dispose();
    omBf.dispose();
  }
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.profile) captureCompiledPlans();
  const native = loadNative();
  const threads = native.stats().threads;
  log(
    `omnirx native pool: ${threads} threads (OMNIRX_THREADS=${process.env.OMNIRX_THREADS ?? 'unset'}); ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`,
  );
  if (threads !== THREADS)
    log(`warning: omnirx runs ${threads} threads, the baselines ${THREADS}; set OMNIRX_THREADS=${THREADS} for a like-for-like comparison`);
  const parallelStart = await parallelSpeedup();
  log(`parallel speedup of 2 busy JS threads over 1: ${round(parallelStart)} (2 = both vCPUs fully available)`);
  let failed = false;
  for (const c of opts.configs) {
    try {
      const { line, profile } = await benchConfig(native, c, opts);
      console.log(JSON.stringify(line));
      if (profile) console.log(JSON.stringify(profile));
    } catch (e) {
      failed = true;
      log(`${c.name}: failed: ${errorText(e)}`);
    }
  }
  // Ours, then torch.mm (OpenBLAS SGEMM under the same setup) at the same moment, then ours again.
  const ours = [await matmulGflops(native)];
  let torchGemm: number | null = null;
  if (opts.torch) {
    try {
      const r = spawnSync(
        'sh',
        [path.join(HELPERS, 'torch-env.sh'), PYTHON, path.join(HELPERS, 'torch_driver.py'), '--gemm', '1024', '--threads', String(THREADS)],
        { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
      );
      const line = (r.stdout ?? '').trim().split('\n').pop() ?? '';
      const j = JSON.parse(line || '{}') as { gemm_gflops?: number; error?: string };
      if (typeof j.gemm_gflops !== 'number') throw new Error(j.error ?? (r.error?.message || (r.stderr ?? '').slice(-300) || `exit ${r.status}`));
      torchGemm = j.gemm_gflops;
    } catch (e) {
      log(`torch.mm 1024³ unavailable: ${errorText(e)}`);
    }
  }
  ours.push(await matmulGflops(native));
  const gflops = median(ours);
  const bf16 = median([await matmulGflops(native, 'bfloat16'), await matmulGflops(native, 'bfloat16'), await matmulGflops(native, 'bfloat16')]);
  const parallelEnd = await parallelSpeedup();
  console.log(
    JSON.stringify({
      matmul_gflops: round(gflops, 1),
      shape: '1024x1024x1024',
      peak_gflops_2threads: PEAK_GFLOPS_2THREADS,
      pct_of_peak: round((100 * gflops) / PEAK_GFLOPS_2THREADS, 1),
      torch_mm_gflops: torchGemm === null ? null : round(torchGemm, 1),
      matmul_bf16_gflops: round(bf16, 1),
      bf16_native: native.stats().bf16Native,
      parallel_speedup_2threads: [round(parallelStart), round(parallelEnd)],
      cpu: cpuDescription(),
      peak_source:
        'measured earlier on Zen 5: fp32 FMA peak ~200-220 GFLOP/s per core with AVX-512, ~390-400 on both cores; not measurable from Node without native code. On Zen 4 the peak per cycle is half; torch_mm_gflops (OpenBLAS, same moment) is the practical reference',
    }),
  );
  if (failed) process.exitCode = 1;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
