// The harness's own question (ACP `elicitation/create`, form mode): its `requestedSchema` as the
// fields of a form, and a person's input as the `content` the answer route takes. Plain
// TypeScript, no DOM (test/elicitation.test.ts). The server checks the content against the same
// schema (core/src/permissions/elicitation.rs); this only makes the right controls and catches
// the obvious before a round trip.

export interface Choice {
  value: string;
  title: string;
}

interface FieldBase {
  name: string;
  /** The property's `title`, else its name. */
  label: string;
  description: string | null;
  required: boolean;
}

export type Field =
  | (FieldBase & { kind: 'choice'; choices: Choice[]; initial: string })
  | (FieldBase & { kind: 'multi'; choices: Choice[]; initial: string[]; minItems: number | null; maxItems: number | null })
  | (FieldBase & { kind: 'boolean'; initial: boolean })
  | (FieldBase & { kind: 'number'; integer: boolean; min: number | null; max: number | null; initial: string })
  | (FieldBase & { kind: 'text'; minLength: number | null; maxLength: number | null; format: string | null; initial: string });

/** What a person has put in: a choice or text as a string, a multi-select as strings, a checkbox as a boolean. */
export type Values = Record<string, string | string[] | boolean>;

const num = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);
const str = (x: unknown): string | null => (typeof x === 'string' ? x : null);

/** `enum` (with `enumNames`, an older form, for titles) or `oneOf`/`anyOf` of `{const, title}`. */
function choicesOf(p: any, titled: 'oneOf' | 'anyOf'): Choice[] | null {
  if (Array.isArray(p?.enum)) {
    const names: unknown[] = Array.isArray(p.enumNames) ? p.enumNames : [];
    return p.enum
      .filter((v: unknown) => typeof v === 'string')
      .map((v: string) => ({ value: v, title: str(names[p.enum.indexOf(v)]) ?? v }));
  }
  const list = p?.[titled];
  if (Array.isArray(list))
    return list
      .filter((o: any) => o && typeof o.const === 'string')
      .map((o: any) => ({ value: o.const, title: str(o.title) ?? o.const }));
  return null;
}

/** The form's fields, in the schema's order; null when the schema is not an object with properties. */
export function fieldsOf(schema: unknown): Field[] | null {
  const s = schema as any;
  if (!s || typeof s !== 'object' || !s.properties || typeof s.properties !== 'object') return null;
  const required = new Set<string>(Array.isArray(s.required) ? s.required.filter((x: unknown) => typeof x === 'string') : []);
  const fields: Field[] = [];
  for (const [name, raw] of Object.entries(s.properties)) {
    const p = (raw && typeof raw === 'object' ? raw : {}) as any;
    const base: FieldBase = { name, label: str(p.title) ?? name, description: str(p.description), required: required.has(name) };
    const choices = p.type === 'string' || p.type === undefined ? choicesOf(p, 'oneOf') : null;
    if (choices && choices.length) {
      const initial = str(p.default) ?? '';
      fields.push({ ...base, kind: 'choice', choices, initial: choices.some((c) => c.value === initial) ? initial : '' });
    } else if (p.type === 'boolean') {
      fields.push({ ...base, kind: 'boolean', initial: p.default === true });
    } else if (p.type === 'number' || p.type === 'integer') {
      const d = num(p.default);
      fields.push({ ...base, kind: 'number', integer: p.type === 'integer', min: num(p.minimum), max: num(p.maximum), initial: d === null ? '' : String(d) });
    } else if (p.type === 'array' && (choicesOf(p.items, 'anyOf') ?? []).length) {
      const all = choicesOf(p.items, 'anyOf')!;
      const initial = Array.isArray(p.default) ? p.default.filter((v: unknown) => all.some((c) => c.value === v)) : [];
      fields.push({ ...base, kind: 'multi', choices: all, initial, minItems: num(p.minItems), maxItems: num(p.maxItems) });
    } else {
      // A string, or a kind this page does not know: a plain text box (the server says if it will not do).
      fields.push({ ...base, kind: 'text', minLength: num(p.minLength), maxLength: num(p.maxLength), format: str(p.format), initial: str(p.default) ?? '' });
    }
  }
  return fields;
}

export function initialValues(fields: Field[]): Values {
  const v: Values = {};
  for (const f of fields) v[f.name] = Array.isArray(f.initial) ? [...f.initial] : f.initial;
  return v;
}

/** The answer's `content` from what was put in, or what is missing or wrong (in words). */
export function contentOf(fields: Field[], values: Values): { content: Record<string, unknown> } | { error: string } {
  const content: Record<string, unknown> = {};
  for (const f of fields) {
    const v = values[f.name];
    switch (f.kind) {
      case 'boolean':
        content[f.name] = v === true;
        break;
      case 'multi': {
        const picked = Array.isArray(v) ? v : [];
        if (!picked.length && !f.required) break;
        if (f.minItems !== null && picked.length < f.minItems) return { error: `${f.label}: pick at least ${f.minItems}` };
        if (f.maxItems !== null && picked.length > f.maxItems) return { error: `${f.label}: pick at most ${f.maxItems}` };
        content[f.name] = picked;
        break;
      }
      case 'number': {
        const text = typeof v === 'string' ? v.trim() : '';
        if (!text) {
          if (f.required) return { error: `${f.label}: a number is needed` };
          break;
        }
        const n = Number(text);
        if (!Number.isFinite(n) || (f.integer && !Number.isInteger(n))) return { error: `${f.label}: ${f.integer ? 'a whole number' : 'a number'} is needed` };
        if ((f.min !== null && n < f.min) || (f.max !== null && n > f.max)) return { error: `${f.label}: between ${f.min ?? '…'} and ${f.max ?? '…'}` };
        content[f.name] = n;
        break;
      }
      case 'choice':
      case 'text': {
        const text = typeof v === 'string' ? v : '';
        if (!text) {
          if (f.required) return { error: f.kind === 'choice' ? `${f.label}: choose one` : `${f.label}: an answer is needed` };
          break;
        }
        if (f.kind === 'choice' && !f.choices.some((c) => c.value === text)) return { error: `${f.label}: choose one of the choices` };
        if (f.kind === 'text') {
          const wrong = textError(f, text);
          if (wrong) return { error: `${f.label}: ${wrong}` };
        }
        content[f.name] = text;
      }
    }
  }
  return { content };
}

const FORMATS: Record<string, [RegExp, string]> = {
  email: [/^[^\s@]+@[^\s@]+\.[^\s@]+$/, 'an email address'],
  uri: [/^[a-z][a-z0-9+.-]*:[^\s]+$/i, 'a URL (https://…)'],
  date: [/^\d{4}-\d{2}-\d{2}$/, 'a date, YYYY-MM-DD'],
  'date-time': [/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/, 'a date and time, YYYY-MM-DDThh:mm:ssZ'],
};

/** What is wrong with a text answer against its field's schema (lengths, format), or null. */
export function textError(f: { minLength: number | null; maxLength: number | null; format: string | null }, text: string): string | null {
  const length = [...text].length;
  if (f.minLength !== null && length < f.minLength) return `at least ${f.minLength} characters`;
  if (f.maxLength !== null && length > f.maxLength) return `at most ${f.maxLength} characters`;
  const format = f.format ? FORMATS[f.format] : undefined;
  if (format && !format[0].test(text)) return `${format[1]} is needed`;
  if (f.format === 'date' || f.format === 'date-time') {
    if (Number.isNaN(Date.parse(text))) return `${format![1]} is needed`;
  }
  return null;
}

/**
 * The choices to offer as one-click answer buttons: when the question is a single choice (one
 * field of choices, none other required) with at most `max` of them. Otherwise null: the form.
 */
export function quickChoices(fields: Field[] | null, max = 6): { field: string; choices: Choice[] } | null {
  if (!fields) return null;
  const choice = fields.filter((f) => f.kind === 'choice');
  if (choice.length !== 1 || fields.some((f) => f !== choice[0] && f.required)) return null;
  const f = choice[0] as Extract<Field, { kind: 'choice' }>;
  return f.choices.length <= max ? { field: f.name, choices: f.choices } : null;
}
