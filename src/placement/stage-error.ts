import { z } from 'zod';
import { ERROR_CATALOGUE, OmniError, type ErrorCode } from '../errors';
import { PAYLOAD_SCHEMA_VERSION, RUNTIME_PAYLOAD, type DiffusionStagePayload, type StageRole } from '../pipeline/stage-payload';

const StageErrorMetaSchema = z.strictObject({
  code: z.string().refine((c): c is ErrorCode => c in ERROR_CATALOGUE, 'an unknown error code'),
  message: z.string().max(4096),
  stage: z.enum(['encode', 'denoise', 'decode']),
  node: z.string().max(128).optional(),
});

/**
 * The failure of the payload `of` (its request, and session when it has one) in stage `stage` (node `node`) as a
 * payload for the next stage, `target`.
 */
export function stageErrorPayload(
  of: { requestId: string; sessionId?: string },
  err: unknown,
  stage: StageRole,
  target: StageRole,
  node?: string,
): DiffusionStagePayload {
  const e = err instanceof Error ? err : new Error(String(err));
  const code = e instanceof OmniError ? e.code : 'OMNIRX_ERR_INTERNAL';
  return {
    schemaVersion: PAYLOAD_SCHEMA_VERSION,
    requestId: of.requestId,
    ...(of.sessionId === undefined ? {} : { sessionId: of.sessionId }),
    sourceStage: stage,
    targetStage: target,
    payloadType: RUNTIME_PAYLOAD.error,
    tensors: {},
    metadata: { code, message: e.message.slice(0, 4096), stage, ...(node === undefined ? {} : { node }) },
  };
}

/** An error payload passed on unchanged but for its source and target. */
export function forwardStageError(p: DiffusionStagePayload, source: StageRole, target: StageRole): DiffusionStagePayload {
  return { ...p, sourceStage: source, targetStage: target };
}

/**
 * The OmniError an error payload carries and the node that failed. A failure inside a node reads as it does in process
 * (the node says where it happened); one outside any node (a payload a stage refused) is prefixed with the stage. A
 * malformed error payload becomes OMNIRX_ERR_PAYLOAD.
 */
export function stageErrorOf(p: DiffusionStagePayload): { error: OmniError; node?: string } {
  const r = StageErrorMetaSchema.safeParse(p.metadata);
  if (!r.success) return { error: new OmniError('OMNIRX_ERR_PAYLOAD', `a malformed ${RUNTIME_PAYLOAD.error} payload: ${r.error.issues[0].message}`) };
  const { code, message, stage, node } = r.data;
  return { error: new OmniError(code as ErrorCode, node === undefined ? `${stage} stage: ${message}` : message), node };
}
