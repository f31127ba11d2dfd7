// A guarded agent's policy as the editor holds it: rows of rules and a default, checked in the
// page with the server's own grammar (docs/permissions.md, core/src/permissions/{policy,glob}.rs)
// so a mistake shows at its row before anything is sent, and the server's `INVALID_POLICY`
// ("rule 2: …", counted from 0) lands on the same row. Plain TypeScript, unit-tested
// (test/policy.test.ts).

export const EFFECTS = ['read', 'write', 'exec', 'network'] as const;
export const ANSWERS = ['allow', 'ask', 'deny'] as const;
export type Effect = (typeof EFFECTS)[number];
export type Answer = (typeof ANSWERS)[number];

/** One rule as the API takes it. */
export interface Rule {
  effect: Effect;
  path?: string;
  outside_workdir?: true;
  command?: string;
  answer: Answer;
}
export interface Policy {
  rules: Rule[];
  default: Answer;
}

/** One row of the editor: every field a string or flag, as typed. */
export interface RuleRow {
  effect: Effect;
  path: string;
  outsideWorkdir: boolean;
  command: string;
  answer: Answer;
}

/** The longest glob or command pattern (server: MAX_PATTERN_BYTES). */
export const MAX_PATTERN_BYTES = 512;

const bytes = (s: string) => new TextEncoder().encode(s).length;

/** Why a path glob is refused, or null (core/src/permissions/glob.rs). */
export function globError(glob: string): string | null {
  if (!glob.trim()) return 'is empty';
  if (bytes(glob) > MAX_PATTERN_BYTES) return `is longer than ${MAX_PATTERN_BYTES} bytes`;
  if (glob.includes('\0')) return 'must not contain NUL';
  if (!(glob.startsWith('/') || glob === '**' || glob.startsWith('**/'))) return 'must be absolute (start with `/`) or start with `**`';
  const segments = glob.split('/');
  if (segments.some((s) => s.includes('**') && s !== '**')) return '`**` must be a whole segment, as in `/a/**/b`';
  if (segments.some((s) => s === '.' || s === '..')) return 'must not contain `.` or `..` segments';
  return null;
}

/** Why a command pattern is refused, or null. */
export function commandError(pattern: string): string | null {
  if (!pattern.trim()) return 'is empty';
  if (bytes(pattern) > MAX_PATTERN_BYTES) return `is longer than ${MAX_PATTERN_BYTES} bytes`;
  if (pattern.includes('\0')) return 'must not contain NUL';
  return null;
}

/** What is wrong with a row, by field; empty when it is fine. */
export function rowErrors(row: RuleRow): Partial<Record<'path' | 'command' | 'effect', string>> {
  const out: Partial<Record<'path' | 'command' | 'effect', string>> = {};
  if (row.effect === 'network' && (row.path.trim() || row.outsideWorkdir)) out.path = '`path` and `outside_workdir` do not apply to network';
  else if (row.path.trim()) {
    const e = globError(row.path.trim());
    if (e) out.path = `\`path\` ${e}`;
  }
  if (row.command.trim()) {
    if (row.effect !== 'exec') out.command = '`command` applies only to exec rules';
    else {
      const e = commandError(row.command);
      if (e) out.command = `\`command\` ${e}`;
    }
  }
  return out;
}

export function ruleToRow(r: Rule): RuleRow {
  return { effect: r.effect, path: r.path ?? '', outsideWorkdir: r.outside_workdir === true, command: r.command ?? '', answer: r.answer };
}

export function rowToRule(row: RuleRow): Rule {
  const r: Rule = { effect: row.effect, answer: row.answer };
  if (row.path.trim()) r.path = row.path.trim();
  if (row.outsideWorkdir) r.outside_workdir = true;
  if (row.command.trim()) r.command = row.command.trim();
  return r;
}

/** Reads a stored policy (the agent's view) into rows; anything unreadable gives a blank editor. */
export function fromPolicy(value: unknown): { rows: RuleRow[]; default: Answer } {
  const p = value as Partial<Policy> | null;
  const rules = Array.isArray(p?.rules) ? p!.rules : [];
  const def = ANSWERS.includes(p?.default as Answer) ? (p!.default as Answer) : 'ask';
  return { rows: rules.filter((r) => EFFECTS.includes(r?.effect) && ANSWERS.includes(r?.answer)).map(ruleToRow), default: def };
}

export function toPolicy(rows: RuleRow[], def: Answer): Policy {
  return { rules: rows.map(rowToRule), default: def };
}

/** The row the server's `INVALID_POLICY` message names ("rule 2: …", from 0), or null. */
export function ruleIndexOf(message: string): number | null {
  const m = /\brule (\d+):/.exec(message);
  return m ? Number(m[1]) : null;
}

/** One line per rule, for a summary: "allow exec `git *`", "deny write outside the work folder". */
export function describeRule(r: Rule): string {
  const parts: string[] = [r.answer, r.effect];
  if (r.command) parts.push(`\`${r.command}\``);
  if (r.path) parts.push(`in ${r.path}`);
  if (r.outside_workdir) parts.push('outside the work folder');
  return parts.join(' ');
}

/** Starting points a person can pick, then edit. */
export const POLICY_PRESETS: { name: string; policy: Policy }[] = [
  {
    name: 'Read freely, ask for the rest',
    policy: { rules: [{ effect: 'read', answer: 'allow' }], default: 'ask' },
  },
  {
    name: 'Work in the home folder; ask for commands and the network',
    policy: {
      rules: [
        { effect: 'read', answer: 'allow' },
        { effect: 'write', outside_workdir: true, answer: 'deny' },
        { effect: 'write', answer: 'allow' },
        { effect: 'exec', command: 'git *', answer: 'allow' },
        { effect: 'exec', answer: 'ask' },
        { effect: 'network', answer: 'ask' },
      ],
      default: 'ask',
    },
  },
  {
    name: 'Read only',
    policy: { rules: [{ effect: 'read', answer: 'allow' }], default: 'deny' },
  },
];
