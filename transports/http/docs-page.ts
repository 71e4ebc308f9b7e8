/**
 * The API docs page (`GET /docs`): the server's OpenAPI document rendered to one self-contained HTML page on the
 * server — inline CSS, no script, nothing fetched (its Content-Security-Policy forbids it), so it works offline and
 * behind any proxy. A page of our own rather than Swagger UI: the routes validate with zod in their handlers, not with
 * Fastify route schemas that @fastify/swagger reads, and Swagger UI's bundle would be the biggest asset of the package.
 */

type Json = Record<string, unknown>;

/** What `GET /docs` answers with besides the body. */
export const DOCS_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
} as const;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
const esc = (s: unknown): string => String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]!);

const refName = (ref: string): string => ref.slice(ref.lastIndexOf('/') + 1);
const anchor = (s: string): string => s.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');

/** A JSON Schema as a short type expression in HTML (`string`, `integer | null`, `array of <a>VideoObject</a>`). */
function typeHtml(schema: unknown): string {
  if (schema === true || schema === undefined) return 'any';
  if (schema === null || typeof schema !== 'object') return esc(JSON.stringify(schema));
  const s = schema as Json;
  if (typeof s.$ref === 'string') return `<a href="#schema-${esc(anchor(refName(s.$ref)))}">${esc(refName(s.$ref))}</a>`;
  if ('const' in s) return `<code>${esc(JSON.stringify(s.const))}</code>`;
  if (Array.isArray(s.enum)) return s.enum.map((v) => `<code>${esc(JSON.stringify(v))}</code>`).join(' | ');
  if (Array.isArray(s.anyOf)) return s.anyOf.map(typeHtml).join(' | ');
  if (Array.isArray(s.oneOf)) return s.oneOf.map(typeHtml).join(' | ');
  if (Array.isArray(s.type)) return s.type.map((t) => esc(t)).join(' | ');
  if (s.type === 'array') {
    if (Array.isArray(s.prefixItems)) return `[${s.prefixItems.map(typeHtml).join(', ')}]`;
    return `array of ${typeHtml(s.items)}`;
  }
  if (s.type === 'string' && s.format === 'binary') return 'file';
  if (typeof s.type === 'string') return esc(s.type);
  return s.properties !== undefined || s.additionalProperties !== undefined ? 'object' : 'any';
}

/** Bounds and patterns of a JSON Schema, for the constraints column. */
function constraintsHtml(s: Json): string {
  const parts: string[] = [];
  const add = (label: string, key: string) => {
    if (s[key] !== undefined) parts.push(`${label} ${esc(String(s[key]))}`);
  };
  add('≥', 'minimum');
  add('≤', 'maximum');
  add('>', 'exclusiveMinimum');
  add('<', 'exclusiveMaximum');
  add('length ≥', 'minLength');
  add('length ≤', 'maxLength');
  add('items ≥', 'minItems');
  add('items ≤', 'maxItems');
  if (typeof s.pattern === 'string') parts.push(`matches <code>${esc(s.pattern)}</code>`);
  for (const alt of [...((s.anyOf as Json[] | undefined) ?? []), ...((s.prefixItems as Json[] | undefined) ?? [])])
    if (alt !== null && typeof alt === 'object') {
      const inner = constraintsHtml(alt);
      if (inner !== '') parts.push(inner);
    }
  return parts.join(', ');
}

/** The properties of an object schema as a table (name, type, required, description and constraints). */
function propertiesTable(schema: Json): string {
  const props = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  if (Object.keys(props).length === 0) return '';
  const rows = Object.entries(props).map(([name, p]) => {
    const notes = [p.description === undefined ? '' : esc(p.description), constraintsHtml(p)].filter((x) => x !== '').join('; ');
    return `<tr><td><code>${esc(name)}</code>${required.has(name) ? ' <span class="req">required</span>' : ''}</td><td>${typeHtml(p)}</td><td>${notes}</td></tr>`;
  });
  return `<table><thead><tr><th>field</th><th>type</th><th>notes</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function responseHtml(status: string, response: Json, components: Json): string {
  const r = (
    typeof response.$ref === 'string' ? ((components.responses as Record<string, Json> | undefined)?.[refName(response.$ref)] ?? {}) : response
  ) as Json;
  const content = (r.content ?? {}) as Record<string, { schema?: unknown }>;
  const bodies = Object.entries(content).map(([type, m]) => `<code>${esc(type)}</code> ${typeHtml(m.schema)}`);
  return `<li><b>${esc(status)}</b> ${esc(r.description ?? '')}${bodies.length === 0 ? '' : ` — ${bodies.join(', ')}`}</li>`;
}

function operationHtml(method: string, path: string, op: Json, components: Json): string {
  const id = `op-${anchor(`${method} ${path}`)}`;
  const params = (op.parameters as Json[] | undefined) ?? [];
  const paramRows = params.map(
    (p) =>
      `<tr><td><code>${esc(p.name)}</code>${p.required === true ? ' <span class="req">required</span>' : ''}</td><td>${esc(p.in)}</td><td>${typeHtml(p.schema)}</td><td>${esc(p.description ?? '')}${
        p.schema !== undefined && constraintsHtml(p.schema as Json) !== '' ? `; ${constraintsHtml(p.schema as Json)}` : ''
      }</td></tr>`,
  );
  const body = op.requestBody as { content: Record<string, { schema: unknown }> } | undefined;
  const bodyHtml =
    body === undefined
      ? ''
      : `<h4>Request body</h4><ul>${Object.entries(body.content)
          .map(([type, m]) => `<li><code>${esc(type)}</code>: ${typeHtml(m.schema)}</li>`)
          .join('')}</ul>`;
  const responses = Object.entries((op.responses ?? {}) as Record<string, Json>).map(([s, r]) => responseHtml(s, r, components));
  const secured = Array.isArray(op.security) && op.security.length > 0;
  return `<section class="op" id="${esc(id)}">
<h3><span class="method ${esc(method)}">${esc(method.toUpperCase())}</span> <code class="path">${esc(path)}</code>${secured ? ' <span class="lock">bearer token</span>' : ''}</h3>
<p>${esc(op.summary ?? '')}</p>${op.description === undefined ? '' : `<p class="desc">${esc(op.description)}</p>`}
${paramRows.length === 0 ? '' : `<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>type</th><th>notes</th></tr></thead><tbody>${paramRows.join('')}</tbody></table>`}
${bodyHtml}<h4>Responses</h4><ul>${responses.join('')}</ul>
</section>`;
}

/** Renders an OpenAPI 3.x document as the docs page. */
export function renderDocsPage(doc: Json): string {
  const info = (doc.info ?? {}) as Json;
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Json>>;
  const components = (doc.components ?? {}) as Json;
  const schemas = (components.schemas ?? {}) as Record<string, Json>;
  const ops: Array<{ method: string; path: string; op: Json }> = [];
  for (const [path, item] of Object.entries(paths)) for (const [method, op] of Object.entries(item)) ops.push({ method, path, op });
  const index = ops
    .map(
      ({ method, path, op }) =>
        `<li><a href="#op-${esc(anchor(`${method} ${path}`))}"><span class="method ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></a> ${esc(op.summary ?? '')}</li>`,
    )
    .join('');
  const schemaHtml = Object.entries(schemas)
    .map(
      ([name, s]) =>
        `<section class="schema" id="schema-${esc(anchor(name))}"><h3>${esc(name)}</h3>${s.description === undefined ? '' : `<p>${esc(s.description)}</p>`}${propertiesTable(s) || `<p>${typeHtml(s)}</p>`}</section>`,
    )
    .join('\n');
  const auth =
    components.securitySchemes !== undefined
      ? '<p class="lock-note">This server requires <code>Authorization: Bearer &lt;api key&gt;</code> on the routes marked <span class="lock">bearer token</span>.</p>'
      : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(info.title ?? 'API')} ${esc(info.version ?? '')} — API</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 62rem; padding: 1rem 1.5rem 4rem; color: #1d1d1f; }
code { font: 13px ui-monospace, monospace; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ccc; margin-top: 2.5rem; } h4 { margin: 0.8rem 0 0.3rem; }
.op, .schema { border: 1px solid #ddd; border-radius: 6px; padding: 0.2rem 1rem 0.6rem; margin: 1rem 0; }
.method { display: inline-block; min-width: 4.2rem; text-align: center; border-radius: 4px; color: #fff; font: bold 12px ui-monospace, monospace; padding: 2px 4px; }
.get { background: #1f6feb; } .post { background: #1a7f37; } .delete { background: #cf222e; } .put, .patch { background: #9a6700; }
.lock { font-size: 12px; background: #fff8c5; border: 1px solid #d4a72c; border-radius: 4px; padding: 0 4px; }
.req { font-size: 11px; color: #cf222e; }
.desc { color: #444; }
table { border-collapse: collapse; width: 100%; font-size: 14px; } th, td { text-align: left; vertical-align: top; border-bottom: 1px solid #eee; padding: 3px 6px; }
ul.index { list-style: none; padding: 0; } ul.index li { margin: 3px 0; } a { color: #0969da; text-decoration: none; }
</style>
</head>
<body>
<h1>${esc(info.title ?? 'API')} <small>${esc(info.version ?? '')}</small></h1>
<p>${esc(info.description ?? '')}</p>
<p>The machine-readable document: <a href="openapi.json">openapi.json</a> (OpenAPI ${esc(doc.openapi ?? '')}).</p>
${auth}
<h2>Routes</h2>
<ul class="index">${index}</ul>
<h2>Operations</h2>
${ops.map(({ method, path, op }) => operationHtml(method, path, op, components)).join('\n')}
<h2>Schemas</h2>
${schemaHtml}
</body>
</html>
`;
}
