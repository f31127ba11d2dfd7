// A webhook's template filled in from a sample body in the page, as the server does it
// (server/src/triggers/template.rs, docs/triggers.md "Templates"): `{{ path }}` is the body's
// value there (keys and array indexes joined by dots, `{{ . }}` the whole body); strings as they
// are, anything else as compact JSON; a missing path refuses the delivery (422
// TEMPLATE_FIELD_MISSING). Plain TypeScript, unit-tested (test/template.test.ts).

export const MAX_TEMPLATE_BYTES = 16 * 1024;

type Part = { text: string } | { path: string[] };

/** Parses a template, or says why the server would refuse it (400 INVALID_TEMPLATE). */
export function parseTemplate(text: string): { ok: true; parts: Part[] } | { ok: false; error: string } {
  if (new TextEncoder().encode(text).length > MAX_TEMPLATE_BYTES) return { ok: false, error: `the template is over ${MAX_TEMPLATE_BYTES} bytes` };
  const parts: Part[] = [];
  let rest = text;
  for (let open = rest.indexOf('{{'); open >= 0; open = rest.indexOf('{{')) {
    if (open > 0) parts.push({ text: rest.slice(0, open) });
    const after = rest.slice(open + 2);
    const close = after.indexOf('}}');
    if (close < 0) return { ok: false, error: 'a "{{" is not closed by "}}"' };
    const path = after.slice(0, close).trim();
    if (path === '.') parts.push({ path: [] });
    else {
      const segments = path.split('.');
      if (!segments.every((s) => /^[\p{L}\p{N}_\-$@:]+$/u.test(s))) return { ok: false, error: `{{ ${path} }} is not a path (keys and indexes joined by dots, or ".")` };
      parts.push({ path: segments });
    }
    rest = after.slice(close + 2);
  }
  if (rest) parts.push({ text: rest });
  if (!parts.length) return { ok: false, error: 'the template is empty' };
  return { ok: true, parts };
}

function lookup(body: unknown, path: string[]): { found: true; value: unknown } | { found: false } {
  let v: unknown = body;
  for (const s of path) {
    if (Array.isArray(v) && /^\d+$/.test(s) && Number(s) < v.length) v = v[Number(s)];
    else if (v && typeof v === 'object' && !Array.isArray(v) && Object.prototype.hasOwnProperty.call(v, s)) v = (v as Record<string, unknown>)[s];
    else return { found: false };
  }
  return { found: true, value: v };
}

/** The prompt a delivery of `body` (JSON text) would make, or why it would be refused. */
export function renderTemplate(template: string, bodyText: string): { prompt: string } | { error: string; code: string } {
  const parsed = parseTemplate(template);
  if (!parsed.ok) return { error: parsed.error, code: 'INVALID_TEMPLATE' };
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch (e) {
    return { error: `the sample is not JSON (${e instanceof Error ? e.message : e})`, code: 'INVALID_BODY' };
  }
  let out = '';
  for (const part of parsed.parts) {
    if ('text' in part) out += part.text;
    else {
      const got = lookup(body, part.path);
      if (!got.found) return { error: `the body has no ${part.path.length ? part.path.join('.') : '.'}`, code: 'TEMPLATE_FIELD_MISSING' };
      out += typeof got.value === 'string' ? got.value : JSON.stringify(got.value);
    }
  }
  return { prompt: out };
}
