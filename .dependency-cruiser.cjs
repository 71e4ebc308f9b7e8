/**
 * The dependency rules of docs/design.md §1, checked by `npm run lint` (dependency-cruiser). Imports point down the
 * planes only:
 *
 *   transports, src/cli, src/index.ts (composition roots)
 *     → src/engine (the front)
 *       → src/executor, src/placement (where admitted work runs)
 *         → src/pipeline (stage contracts, graph runner, policies, samplers, the family registration API)
 *           → src/models, src/cache, src/media
 *             → src/native
 *   src/request, src/util, src/errors.ts, operators/: leaves, usable from every plane above and beside them.
 *
 * Model families (src/families) plug in beside the planes: a family builds on the pipeline plane and below, and only
 * the composition roots import one; the engine, executors, placement, transports and CLI never do. Transports are
 * sibling plugins over transports/shared. No cycles anywhere.
 */
const PLANES = {
  roots: '^(transports/|src/cli/|src/index\\.ts$)',
  engine: '^src/engine/',
  execution: '^src/(executor|placement)/',
  families: '^src/families/',
  familyModels: '^src/models/(wan|t5|vae)/',
  pipeline: '^src/pipeline/',
  lower: '^src/(models|cache|media)/',
  native: '^src/native/',
  leaves: '^(src/(request|util)/|src/errors\\.ts$|operators/)',
};
const anyOf = (...keys) => keys.map((k) => `(${PLANES[k]})`).join('|');

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'An import cycle: the planes must form a directed acyclic graph.', from: {}, to: { circular: true } },
    {
      name: 'nothing-imports-transports',
      severity: 'error',
      comment: 'Transports sit on top: only other transports and the CLI (omnirx serve) import them.',
      from: { path: '^(src|operators)/', pathNot: '^src/cli/' },
      to: { path: '^transports/' },
    },
    {
      name: 'transports-are-siblings',
      severity: 'error',
      comment: 'http, ws and webrtc are sibling plugins: they share transports/shared, never each other.',
      from: { path: '^transports/(http|ws|webrtc)/' },
      to: { path: '^transports/(http|ws|webrtc)/', pathNot: '^transports/$1/' },
    },
    {
      name: 'shared-transport-part-is-shared',
      severity: 'error',
      comment: 'transports/shared serves the plugins; it imports none of them, nor the server that composes them.',
      from: { path: '^transports/shared/' },
      to: { path: '^transports/((http|ws|webrtc)/|server\\.ts$)' },
    },
    {
      name: 'engine-points-down',
      severity: 'error',
      comment: 'The engine front imports the execution plane and below, never a composition root.',
      from: { path: PLANES.engine },
      to: { path: anyOf('roots') },
    },
    {
      name: 'execution-points-down',
      severity: 'error',
      comment: 'Executors and placement run admitted work; they never import the engine front (no second front) or a root.',
      from: { path: PLANES.execution },
      to: { path: anyOf('roots', 'engine') },
    },
    {
      name: 'in-process-executor-needs-no-placement',
      severity: 'error',
      comment: 'The in-process executor stands alone; placement implements the Executor interface beside it.',
      from: { path: '^src/executor/' },
      to: { path: '^src/placement/' },
    },
    {
      name: 'no-family-above-the-pipeline',
      severity: 'error',
      comment: 'The engine, executors, placement, transports and CLI never import a model family: families register by name.',
      from: { path: `${PLANES.engine}|${PLANES.execution}|^transports/|^src/cli/` },
      to: { path: anyOf('families', 'familyModels') },
    },
    {
      name: 'families-build-on-the-pipeline',
      severity: 'error',
      comment: 'A family builds on the pipeline plane and below; it never imports the engine, an executor, placement or a root.',
      from: { path: PLANES.families },
      to: { path: anyOf('roots', 'engine', 'execution') },
    },
    {
      name: 'pipeline-points-down',
      severity: 'error',
      comment: 'The pipeline plane knows no family, executor, engine or transport.',
      from: { path: PLANES.pipeline },
      to: { path: anyOf('roots', 'engine', 'execution', 'families', 'familyModels') },
    },
    {
      name: 'models-cache-media-point-down',
      severity: 'error',
      comment: 'Models, caches and media sit below the pipeline plane.',
      from: { path: PLANES.lower },
      to: { path: anyOf('roots', 'engine', 'execution', 'families', 'pipeline') },
    },
    {
      name: 'native-is-the-floor',
      severity: 'error',
      comment: 'The addon binding imports nothing above it but the leaves.',
      from: { path: PLANES.native },
      to: { path: anyOf('roots', 'engine', 'execution', 'families', 'pipeline', 'lower') },
    },
    {
      name: 'leaves-stay-leaves',
      severity: 'error',
      comment: 'The request schemas, utilities, errors and operators are leaves: they import no plane.',
      from: { path: PLANES.leaves },
      to: { path: anyOf('roots', 'engine', 'execution', 'families', 'pipeline', 'lower', 'native') },
    },
    {
      name: 'operators-are-plane-agnostic',
      severity: 'error',
      comment: 'operators/ are pure RxJS operators: they import nothing of the runtime.',
      from: { path: '^operators/' },
      to: { path: '^(src|transports)/' },
    },
    {
      name: 'product-imports-no-tests-or-benches',
      severity: 'error',
      comment: 'The product never imports tests, benchmarks, tools or examples.',
      from: { path: '^(src|operators|transports)/' },
      to: { path: '^(test|bench|tools|examples)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['require', 'default', 'types'] },
  },
};
