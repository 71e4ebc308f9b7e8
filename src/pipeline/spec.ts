import { z } from 'zod';
import { OmniError } from '../errors';
import type { Task } from '../request/omni-request';
import type { Policy } from './policies/policy';
import type { ResolvedParams } from './params';
import type { LoopStage, Stage } from './stage';

/** An artifact type carried by an edge (`text_embeds`, `latents`, `video`, …). Producer and consumers must agree. */
export type ArtifactType = string;

/** A model component and the tasks that need it; a component no deployed task needs is never loaded. */
export interface ComponentSpec {
  tasks: readonly Task[];
}

export type NodeRun<C, S> = { kind: 'stage'; stage: Stage<C, S> } | { kind: 'loop'; stage: LoopStage<C, S, unknown> };

/** One node of a pipeline graph. Edges are named; `inputs`/`outputs` map edge names to their artifact types. */
export interface NodeSpec<C, S> {
  name: string;
  run: NodeRun<C, S>;
  inputs: Readonly<Record<string, ArtifactType>>;
  outputs: Readonly<Record<string, ArtifactType>>;
  /** Components the node calls (must be declared by the spec). */
  components: readonly string[];
  /** Tasks the node may run for (static; decides which components a deployment loads). */
  tasks: readonly Task[];
  /** Dynamic predicate on the resolved request (options such as returnLatents). */
  when?: (p: ResolvedParams) => boolean;
  /** Schema of the request's `nodeParams[name]` overrides (strict object). */
  params?: z.ZodType;
  /** Policies bound to the node; at most one per slot. */
  policies?: readonly Policy[];
}

/** A frozen, declarative pipeline graph for one model family (docs/design.md §3). */
export interface PipelineSpec<C, S> {
  family: string;
  components: Readonly<Record<string, ComponentSpec>>;
  /** Edges the request itself provides (e.g. `prompt: 'text'`). */
  requestInputs: Readonly<Record<string, ArtifactType>>;
  nodes: ReadonlyArray<NodeSpec<C, S>>;
}

/** A validated graph for a deployment: nodes in a topological order and the components to load. */
export interface BuiltPipeline<C, S> {
  readonly spec: PipelineSpec<C, S>;
  readonly tasks: readonly Task[];
  /** Nodes in a topological order. */
  readonly order: ReadonlyArray<NodeSpec<C, S>>;
  /** Components some deployed task needs (the only ones loaded). */
  readonly components: ReadonlySet<string>;
  /** Nodes that run for a request (task and `when` applied), in topological order. */
  activeNodes(p: ResolvedParams): ReadonlyArray<NodeSpec<C, S>>;
  /**
   * Validates a request's `nodeParams` against the nodes' schemas.
   * @throws OmniError OMNIRX_ERR_INVALID_REQUEST naming `nodeParams.<node>.<key>`.
   */
  parseNodeParams(nodeParams: Readonly<Record<string, unknown>> | undefined): Record<string, unknown>;
}

function buildError(family: string, message: string): OmniError {
  return new OmniError('OMNIRX_ERR_INVALID_PIPELINE', `pipeline '${family}': ${message}`);
}

/** Freezes the declarative parts of a spec (the graph), not the stage, schema and policy objects it points to. */
function freezeSpec<C, S>(spec: PipelineSpec<C, S>): PipelineSpec<C, S> {
  for (const c of Object.values(spec.components)) Object.freeze(c.tasks);
  Object.freeze(spec.components);
  Object.freeze(spec.requestInputs);
  for (const n of spec.nodes) {
    Object.freeze(n.inputs);
    Object.freeze(n.outputs);
    Object.freeze(n.components);
    Object.freeze(n.tasks);
    if (n.policies) Object.freeze(n.policies);
    Object.freeze(n);
  }
  Object.freeze(spec.nodes);
  return Object.freeze(spec);
}

/**
 * Validates a pipeline spec for a deployment and returns the built graph. Rejects, with a message naming the
 * node or edge: an edge whose producer and consumer disagree on its type, an input no node or request provides
 * (for some deployed task the consumer runs for), an edge produced twice by nodes whose tasks overlap, a cycle, a
 * node using an undeclared component, a component a deployed task needs but the spec does not declare for that
 * task, two policies claiming one slot. (Node params for an unknown node or failing the node's schema are
 * rejected per request by `parseNodeParams`.)
 * @throws OmniError OMNIRX_ERR_INVALID_PIPELINE.
 */
export function buildPipeline<C, S>(spec: PipelineSpec<C, S>, deployment: { tasks: readonly Task[] }): BuiltPipeline<C, S> {
  const fam = spec.family;
  const names = new Set<string>();
  for (const n of spec.nodes) {
    if (names.has(n.name)) throw buildError(fam, `node '${n.name}' is declared twice`);
    names.add(n.name);
  }
  // Producers of every edge.
  const producer = new Map<string, { node: string; type: ArtifactType }>();
  /** Every node producing each edge so far (alternative producers are compared with all of them, not just the last). */
  const producers = new Map<string, Array<NodeSpec<C, S>>>();
  for (const [edge, type] of Object.entries(spec.requestInputs)) producer.set(edge, { node: '(request)', type });
  for (const n of spec.nodes) {
    for (const [edge, type] of Object.entries(n.outputs)) {
      const prev = producer.get(edge);
      // Alternative producers (e.g. one per task) may share an edge only if their tasks are pairwise disjoint.
      if (prev !== undefined) {
        const clash = prev.node === '(request)' ? prev.node : (producers.get(edge) ?? []).find((m) => m.tasks.some((t) => n.tasks.includes(t)))?.name;
        if (clash !== undefined) throw buildError(fam, `edge '${edge}' is produced by both '${clash}' and '${n.name}'`);
        if (prev.type !== type) throw buildError(fam, `edge '${edge}' has type '${prev.type}' from '${prev.node}' but '${type}' from '${n.name}'`);
      }
      producer.set(edge, { node: n.name, type });
      producers.set(edge, [...(producers.get(edge) ?? []), n]);
    }
  }
  // Consumers agree on types; every input has a producer.
  for (const n of spec.nodes) {
    for (const [edge, type] of Object.entries(n.inputs)) {
      const p = producer.get(edge);
      if (p === undefined) throw buildError(fam, `node '${n.name}' consumes edge '${edge}' that no node produces`);
      if (p.type !== type) throw buildError(fam, `edge '${edge}': node '${n.name}' expects '${type}' but '${p.node}' produces '${p.type}'`);
      // For every deployed task the node runs for, some node of that task produces the edge (else the request waits forever).
      if (p.node === '(request)') continue;
      const uncovered = n.tasks.filter((t) => deployment.tasks.includes(t) && !spec.nodes.some((m) => m.tasks.includes(t) && Object.hasOwn(m.outputs, edge)));
      if (uncovered.length > 0)
        throw buildError(fam, `node '${n.name}' consumes edge '${edge}' for task ${uncovered.join(', ')}, but no node produces it for that task`);
    }
  }
  // Components.
  for (const n of spec.nodes) {
    for (const c of n.components) {
      const comp = spec.components[c];
      if (comp === undefined) throw buildError(fam, `node '${n.name}' uses component '${c}' that the spec does not declare`);
      const missing = n.tasks.filter((t) => deployment.tasks.includes(t) && !comp.tasks.includes(t));
      if (missing.length > 0)
        throw buildError(fam, `node '${n.name}' needs component '${c}' for task ${missing.join(', ')}, which the component does not declare`);
    }
  }
  // Policies: one per slot per node.
  for (const n of spec.nodes) {
    const seen = new Map<string, string>();
    for (const p of n.policies ?? []) {
      const prev = seen.get(p.slot);
      if (prev !== undefined) throw buildError(fam, `node '${n.name}': policies '${prev}' and '${p.name}' both claim the '${p.slot}' slot`);
      seen.set(p.slot, p.name);
    }
  }
  // Topological order (Kahn); a leftover node is on a cycle.
  const consumers = new Map<string, string[]>();
  const indegree = new Map<string, number>();
  for (const n of spec.nodes) {
    const deps = new Set(
      Object.keys(n.inputs)
        .map((e) => producer.get(e)!.node)
        .filter((p) => p !== '(request)'),
    );
    // Edges with alternative producers count every producer of that edge.
    for (const e of Object.keys(n.inputs)) for (const m of spec.nodes) if (m !== n && e in m.outputs) deps.add(m.name);
    indegree.set(n.name, deps.size);
    for (const d of deps) consumers.set(d, [...(consumers.get(d) ?? []), n.name]);
  }
  const order: Array<NodeSpec<C, S>> = [];
  const ready = spec.nodes.filter((n) => indegree.get(n.name) === 0).map((n) => n.name);
  while (ready.length > 0) {
    const name = ready.shift()!;
    order.push(spec.nodes.find((n) => n.name === name)!);
    for (const c of consumers.get(name) ?? []) {
      const k = indegree.get(c)! - 1;
      indegree.set(c, k);
      if (k === 0) ready.push(c);
    }
  }
  if (order.length !== spec.nodes.length) {
    const cyclic = spec.nodes.filter((n) => !order.includes(n)).map((n) => n.name);
    throw buildError(fam, `cycle through nodes ${cyclic.map((c) => `'${c}'`).join(' → ')}`);
  }
  const deployed = order.filter((n) => n.tasks.some((t) => deployment.tasks.includes(t)));
  const components = new Set(deployed.flatMap((n) => [...n.components]));
  const frozenSpec = freezeSpec(spec);
  const tasks = Object.freeze([...deployment.tasks]);

  return Object.freeze({
    spec: frozenSpec,
    tasks,
    order: Object.freeze(order),
    components,
    activeNodes(p: ResolvedParams) {
      if (!tasks.includes(p.task))
        throw new OmniError('OMNIRX_ERR_UNSUPPORTED_VALUE', `task ${p.task} is not deployed (deployed: ${tasks.join(', ')})`, { param: 'task' });
      return order.filter((n) => n.tasks.includes(p.task) && (n.when === undefined || n.when(p)));
    },
    parseNodeParams(nodeParams: Readonly<Record<string, unknown>> | undefined) {
      const out: Record<string, unknown> = {};
      for (const [node, value] of Object.entries(nodeParams ?? {})) {
        const n = spec.nodes.find((m) => m.name === node);
        if (n === undefined)
          throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `nodeParams: unknown node '${node}' (nodes: ${spec.nodes.map((m) => m.name).join(', ')})`, {
            param: `nodeParams.${node}`,
          });
        if (n.params === undefined)
          throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `nodeParams: node '${node}' takes no parameters`, { param: `nodeParams.${node}` });
        const r = n.params.safeParse(value);
        if (!r.success) {
          const issue = r.error.issues[0];
          const path = ['nodeParams', node, ...issue.path.map(String)].join('.');
          throw new OmniError('OMNIRX_ERR_INVALID_REQUEST', `${path}: ${issue.message}`, { param: path });
        }
        out[node] = r.data;
      }
      return out;
    },
  });
}
