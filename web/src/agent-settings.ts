// An agent's settings as the create-and-edit form holds them, and what each change means: the
// form's state from an agent, the body of `POST /api/v1/agents` and the smallest `PATCH
// /api/v1/agents/{id}` body, how to tell when each change applies (the server's `changed`: the
// form asks with `?dry_run=true` before saving), the secrets to attach or detach, the checks the
// page makes before sending from what the server publishes (`GET /api/v1/harnesses`, `GET
// /api/v1/limits`: server-info.ts) rather than copies of its rules, and which field a server
// error belongs to. Plain TypeScript, unit-tested (test/agent-settings.test.ts).
import type { Agent, CreateAgent, Schemas, UpdateAgent } from './types';
import type { Harness, ServerInfo } from './server-info';
import { fromPolicy, rowErrors, toPolicy, type Answer, type RuleRow } from './policy';

/** What each posture means, for its option's text (the offered ones come from the server). */
export const POSTURE_TEXT: Record<string, string> = {
  approval: 'approval — ask a person for every call',
  guarded: 'guarded — a policy answers; it may ask a person',
  autonomous: 'autonomous — approve every call',
};

export interface LimitsForm {
  cpus: string;
  memory_mib: string;
  pids: string;
  disk_mib: string;
  /** '' or '0': the server's limit. */
  turn_seconds: string;
  /** '': the server's setting; '0': never. */
  auto_sleep_secs: string;
}

/** The form, every field as typed. */
export interface AgentForm {
  name: string;
  workspaceId: string;
  harness: string;
  command: string;
  model: string;
  /** The login method the harness is signed in with when it asks ('': none named). */
  authMethod: string;
  image: string;
  /** The repository cloned at the first wake (create only; '': none). */
  repoUrl: string;
  /** Its branch ('': the remote's default). */
  repoBranch: string;
  posture: string;
  policyRows: RuleRow[];
  policyDefault: Answer;
  env: { name: string; value: string }[];
  limits: LimitsForm;
  /** Follow the workspace's default egress (no list of its own). */
  egressInherit: boolean;
  egressAllow: string;
  egressPresets: string[];
  /** Attached secrets: variable → secret id. */
  secrets: { env: string; secretId: string }[];
  useMyLogins: boolean;
}

/** A login the signed-in user has (`GET /api/v1/me/providers`). */
export interface MyLogin {
  kind: string;
  state: string;
}
/** A secret of the workspace (`GET /api/v1/workspaces/{id}/secrets`). */
export interface WorkspaceSecret {
  id: string;
  name: string;
  preset: string;
}

/** Harnesses a person would pick: offered here, not development-only. */
export const realHarnesses = (harnesses: Harness[]) => harnesses.filter((h) => h.available && !h.development_only);

/**
 * The harness a new agent should start with: the first real one the user can run — with one of
 * their own logins that harness takes, or a secret of the workspace with a preset it reads —
 * else the first real one that needs no command. Never a development-only one.
 */
export function defaultHarness(harnesses: Harness[], logins: MyLogin[], secrets: WorkspaceSecret[]): string {
  const usable = new Set(logins.filter((l) => l.state === 'ok').map((l) => l.kind));
  const presets = new Set(secrets.map((s) => s.preset));
  const real = realHarnesses(harnesses).filter((h) => !h.needs_command);
  const fits = real.find((h) => h.account_logins.some((k) => usable.has(k)) || h.secrets.some((p) => presets.has(p.preset)));
  return (fits ?? real[0] ?? harnesses.find((h) => h.available))?.name ?? '';
}

/** Secrets worth attaching to a new agent of `harness`: one per variable the harness reads. */
export function suggestedSecrets(harness: Harness | undefined, secrets: WorkspaceSecret[]): { env: string; secretId: string }[] {
  const out: { env: string; secretId: string }[] = [];
  for (const p of harness?.secrets ?? []) {
    const s = secrets.find((x) => x.preset === p.preset);
    if (s && !out.some((o) => o.env === p.env)) out.push({ env: p.env, secretId: s.id });
  }
  return out;
}

export function blankForm(workspaceId: string, harness: string): AgentForm {
  return {
    name: '',
    workspaceId,
    harness,
    command: '',
    model: '',
    authMethod: '',
    image: '',
    repoUrl: '',
    repoBranch: '',
    posture: '',
    policyRows: [],
    policyDefault: 'ask',
    env: [],
    limits: { cpus: '', memory_mib: '', pids: '', disk_mib: '', turn_seconds: '', auto_sleep_secs: '' },
    egressInherit: true,
    egressAllow: '',
    egressPresets: [],
    secrets: [],
    useMyLogins: false,
  };
}

export function formFromAgent(a: Agent, myId: string | undefined): AgentForm {
  const policy = fromPolicy(a.policy);
  const s = (v: number | null | undefined) => (v === null || v === undefined ? '' : String(v));
  return {
    name: a.name,
    workspaceId: a.workspace_id,
    harness: a.harness,
    command: a.command?.join(' ') ?? '',
    model: a.model ?? '',
    authMethod: a.auth_method ?? '',
    image: a.image,
    repoUrl: a.repo?.url ?? '',
    repoBranch: a.repo?.branch ?? '',
    posture: a.own_posture ?? '',
    policyRows: policy.rows,
    policyDefault: policy.default,
    env: Object.entries(a.env).map(([name, value]) => ({ name, value })),
    limits: {
      cpus: s(a.limits.cpus),
      memory_mib: s(a.limits.memory_mib),
      pids: s(a.limits.pids),
      disk_mib: s(a.limits.disk_mib),
      turn_seconds: s(a.limits.turn_seconds),
      auto_sleep_secs: s(a.limits.auto_sleep_secs),
    },
    egressInherit: !!a.egress_inherited,
    egressAllow: (a.egress.allow ?? []).join('\n'),
    egressPresets: [...(a.egress.presets ?? [])],
    secrets: a.secrets.map((x) => ({ env: x.env_name, secretId: x.secret_id })),
    useMyLogins: !!myId && a.login_user_id === myId,
  };
}

const lines = (text: string) => text.split(/[\n,]/).map((x) => x.trim()).filter(Boolean);
const words = (text: string) => text.trim().split(/\s+/).filter(Boolean);
const envObject = (rows: AgentForm['env']) => Object.fromEntries(rows.filter((r) => r.name.trim()).map((r) => [r.name.trim(), r.value]));

function limitsBody(l: LimitsForm, forCreate: boolean) {
  const out: Record<string, number | null> = {};
  for (const key of ['cpus', 'memory_mib', 'pids', 'disk_mib'] as const) if (l[key].trim()) out[key] = Number(l[key]);
  if (l.turn_seconds.trim()) out.turn_seconds = Number(l.turn_seconds);
  else if (!forCreate) out.turn_seconds = 0; // '' in an edit: back to the server's
  if (l.auto_sleep_secs.trim()) out.auto_sleep_secs = Number(l.auto_sleep_secs);
  else if (!forCreate) out.auto_sleep_secs = null;
  return out;
}

export function createBody(f: AgentForm): CreateAgent {
  const body: CreateAgent = { name: f.name.trim(), harness: f.harness, workspace_id: f.workspaceId || null };
  if (f.harness === 'command') body.command = words(f.command);
  if (f.model.trim()) body.model = f.model.trim();
  if (f.authMethod.trim()) body.auth_method = f.authMethod.trim();
  if (f.image.trim()) body.image = f.image.trim();
  if (f.repoUrl.trim()) body.repo = { url: f.repoUrl.trim(), branch: f.repoBranch.trim() || null };
  if (f.posture) body.posture = f.posture;
  if (f.posture === 'guarded' || f.policyRows.length) body.policy = toPolicy(f.policyRows, f.policyDefault);
  const env = envObject(f.env);
  if (Object.keys(env).length) body.env = env;
  const limits = limitsBody(f.limits, true);
  if (Object.keys(limits).length) body.limits = limits;
  if (!f.egressInherit) body.egress = { allow: lines(f.egressAllow), presets: f.egressPresets };
  return body;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const sortedEntries = (o: Record<string, string>) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1));

/** The smallest PATCH body that makes `a` what the form says (empty: nothing to change). */
export function patchBody(a: Agent, f: AgentForm): UpdateAgent {
  const body: UpdateAgent = {};
  if (f.harness !== a.harness) body.harness = f.harness;
  if (f.harness === 'command' && !same(words(f.command), a.command ?? [])) body.command = words(f.command);
  if (f.model.trim() !== (a.model ?? '')) body.model = f.model.trim();
  if (f.authMethod.trim() !== (a.auth_method ?? '')) body.auth_method = f.authMethod.trim();
  if (f.image.trim() && f.image.trim() !== a.image) body.image = f.image.trim();
  if (f.posture !== (a.own_posture ?? '')) body.posture = f.posture;
  const wantsPolicy = f.posture === 'guarded' || f.policyRows.length > 0;
  const policy = wantsPolicy ? toPolicy(f.policyRows, f.policyDefault) : null;
  // The document gives `policy` as an object without properties (Record<string, never>): cast.
  // Compared in one key order: the server stores the policy as jsonb, whose key order is its own.
  const stored = fromPolicy(a.policy);
  const current = a.policy ? toPolicy(stored.rows, stored.default) : null;
  if (!same(policy, current)) body.policy = policy as UpdateAgent['policy'];
  const env = envObject(f.env);
  if (!same(sortedEntries(env), sortedEntries(a.env))) body.env = env;
  const want = limitsBody(f.limits, false);
  const have: Record<string, number | null> = {
    cpus: a.limits.cpus,
    memory_mib: a.limits.memory_mib,
    pids: a.limits.pids,
    disk_mib: a.limits.disk_mib,
    turn_seconds: a.limits.turn_seconds ?? 0,
    auto_sleep_secs: a.limits.auto_sleep_secs,
  };
  const limits: Record<string, number | null> = {};
  for (const [k, v] of Object.entries(want)) if (have[k] !== v) limits[k] = v;
  if (Object.keys(limits).length) body.limits = limits;
  return body;
}

/**
 * What saving does to the agent's egress (`PUT`/`DELETE /api/v1/agents/{id}/egress`, which
 * operators may use within the workspace's default): follow the default again, take a list of
 * its own, or nothing.
 */
export function egressChange(a: Agent, f: AgentForm): { inherit: true } | { set: { allow: string[]; presets: string[] } } | null {
  if (f.egressInherit) return a.egress_inherited ? null : { inherit: true };
  const egress = { allow: lines(f.egressAllow), presets: [...f.egressPresets].sort() };
  if (!a.egress_inherited && same(egress, { allow: a.egress.allow ?? [], presets: [...(a.egress.presets ?? [])].sort() })) return null;
  return { set: egress };
}

/** When a change reaches the running agent (the server's `Impact`). */
export type Impact = Schemas['Impact'];
export type FieldChange = Schemas['FieldChange'];

export const IMPACT_TEXT: Record<Impact, string> = {
  restarts_harness: 'restarts the harness once no turn runs',
  needs_rebuild: 'applies when the sandbox is rebuilt',
  at_once: 'applies at once',
  next_prompt: 'applies from the next prompt',
  proxy: 'reaches the proxy within seconds',
};

/** What people call each setting the server names in `changed`. */
export const FIELD_TEXT: Record<string, string> = {
  auth_method: 'login method',
  env: 'environment',
  turn_seconds: 'turn time limit',
  auto_sleep_secs: 'auto-sleep',
  egress: 'egress allow-list',
};

/** "memory: applies when the sandbox is rebuilt". */
export const changeText = (c: FieldChange) => `${FIELD_TEXT[c.field] ?? c.field}: ${IMPACT_TEXT[c.impact]}`;

/**
 * The login methods the agent's running harness advertised that the server may sign it in with
 * (`advertised.authMethods`, not its `terminal` ones): suggestions for `auth_method`.
 */
export function authMethodsOf(a: Agent | null | undefined): string[] {
  const methods = (a?.advertised as { authMethods?: unknown } | null | undefined)?.authMethods;
  if (!Array.isArray(methods)) return [];
  return methods
    .filter((m): m is { id: string; type?: unknown } => !!m && typeof m === 'object' && typeof (m as { id?: unknown }).id === 'string')
    .filter((m) => m.type !== 'terminal')
    .map((m) => m.id)
    .slice(0, 32);
}

/** Whether a change (the server's `changed`) needs `POST …/rebuild` to take effect. */
export const needsRebuild = (changed: FieldChange[]) => changed.some((i) => i.impact === 'needs_rebuild');

/** The secret attachments to make and remove so the agent holds what the form says. */
export function secretChanges(current: { env_name: string; secret_id: string }[], wanted: AgentForm['secrets']): { attach: { env: string; secretId: string }[]; detach: string[] } {
  const want = wanted.filter((w) => w.env.trim() && w.secretId);
  return {
    attach: want.filter((w) => !current.some((c) => c.env_name === w.env.trim() && c.secret_id === w.secretId)).map((w) => ({ env: w.env.trim(), secretId: w.secretId })),
    detach: current.filter((c) => !want.some((w) => w.env.trim() === c.env_name)).map((c) => c.env_name),
  };
}

export type FieldErrors = Partial<Record<string, string>>;

/**
 * What the page can tell before sending, from the server's published bounds (`info`); keys are
 * field names (`policy.2.path`, `env.0`, …). The rest (names, credential-looking variables, an
 * egress entry's syntax) the server answers, shown at its field by `fieldOfError`.
 */
export function checkForm(f: AgentForm, creating: boolean, info: ServerInfo): FieldErrors {
  const e: FieldErrors = {};
  const { limits } = info;
  if (creating && !f.name.trim()) e.name = 'a name';
  const harness = info.harnesses.find((h) => h.name === f.harness);
  if (!harness || !harness.available) e.harness = 'choose a harness this server offers';
  if (harness?.needs_command && !words(f.command).length) e.command = 'the program to run and its arguments';
  const model = f.model.trim();
  const modelChar = (c: string) => /[A-Za-z0-9]/.test(c) || limits.model.punctuation.includes(c);
  if (model && ([...model].length > limits.model.max_chars || ![...model].every(modelChar))) e.model = `up to ${limits.model.max_chars} of A-Z a-z 0-9 ${limits.model.punctuation.split('').join(' ')}`;
  if ([...f.authMethod.trim()].length > limits.max_auth_method_chars) e.authMethod = `a login method id is at most ${limits.max_auth_method_chars} characters`;
  if (f.posture && !limits.posture.offered.includes(f.posture)) e.posture = `this server offers ${limits.posture.offered.join(', ')}`;
  f.policyRows.forEach((row, i) => {
    for (const [k, v] of Object.entries(rowErrors(row))) e[`policy.${i}.${k}`] = v;
  });
  const named = f.env.filter((r) => r.name.trim());
  if (named.length > limits.env.max_vars) e.env = `at most ${limits.env.max_vars} variables`;
  f.env.forEach((r, i) => {
    const name = r.name.trim();
    if (!name) return;
    if (f.env.findIndex((x) => x.name.trim() === name) !== i) e[`env.${i}`] = `${name} is set twice`;
    else if (new TextEncoder().encode(r.value).length > limits.env.max_value_bytes) e[`env.${i}`] = `at most ${limits.env.max_value_bytes} bytes`;
  });
  for (const [key, label] of [['cpus', 'CPUs'], ['memory_mib', 'memory'], ['pids', 'processes'], ['disk_mib', 'disk']] as const) {
    const v = f.limits[key].trim();
    const r = limits.limits[key];
    if (v && !(Number(v) >= r.min && Number(v) <= r.max)) e[`limits.${key}`] = `${label}: ${r.min}–${r.max} on this server`;
  }
  const turn = f.limits.turn_seconds.trim();
  const t = limits.limits.turn_seconds;
  if (turn && !(Number.isInteger(Number(turn)) && (Number(turn) === 0 || (Number(turn) >= t.min && Number(turn) <= t.max)))) e['limits.turn_seconds'] = `0 (the server’s, ${t.default} s) or ${t.min}–${t.max} seconds`;
  const sleep = f.limits.auto_sleep_secs.trim();
  const s = limits.limits.auto_sleep_secs;
  if (sleep && !(Number.isInteger(Number(sleep)) && Number(sleep) >= s.min && Number(sleep) <= s.max)) e['limits.auto_sleep_secs'] = `0 (never) up to ${s.max} seconds`;
  const allow = lines(f.egressAllow);
  if (allow.length > limits.egress.max_entries) e.egress = `at most ${limits.egress.max_entries} entries`;
  else if (allow.some((x) => x.length > limits.egress.max_entry_chars)) e.egress = `an entry is at most ${limits.egress.max_entry_chars} characters`;
  if (f.secrets.filter((x) => x.env.trim()).length > limits.max_secrets) e.secrets = `at most ${limits.max_secrets} secrets`;
  f.secrets.forEach((x, i) => {
    const name = x.env.trim();
    if (!name && !x.secretId) return;
    if (!name) e[`secrets.${i}`] = 'the variable to attach it as';
    else if (!x.secretId) e[`secrets.${i}`] = 'choose the secret';
    else if (f.env.some((r) => r.name.trim() === name)) e[`secrets.${i}`] = `the plain environment sets ${name} already`;
  });
  return e;
}

const CODE_FIELDS: Record<string, string> = {
  INVALID_NAME: 'name',
  NAME_TAKEN: 'name',
  UNKNOWN_HARNESS: 'harness',
  INVALID_COMMAND: 'command',
  INVALID_MODEL: 'model',
  UNKNOWN_AUTH_METHOD: 'authMethod',
  UNKNOWN_POSTURE: 'posture',
  AUTONOMOUS_FORBIDDEN: 'posture',
  INVALID_POLICY: 'policy',
  POLICY_MISSING: 'policy',
  INVALID_ENV: 'env',
  USE_A_SECRET: 'env',
  ENV_NAME_TAKEN: 'secrets',
  INVALID_ENV_NAME: 'secrets',
  TOO_MANY_SECRETS: 'secrets',
  INVALID_EGRESS: 'egress',
  EGRESS_WIDENED: 'egress',
  INVALID_LIMITS: 'limits',
  LIMIT_TOO_HIGH: 'limits',
  INVALID_IMAGE: 'image',
  IMAGE_NOT_ALLOWED: 'image',
  INVALID_REPO: 'repo',
};

/**
 * Which field a server error belongs to (`limits.cpus`, `policy.2`, `env.1`, …), or 'form'.
 * `form` (optional) places an env error at the row of the variable its message names.
 */
export function fieldOfError(code: string, message: string, form?: AgentForm): string {
  const base = CODE_FIELDS[code];
  if (!base) return 'form';
  if (base === 'env' && form) {
    const said = new Set(message.match(/[A-Za-z0-9_]+/g) ?? []);
    const row = form.env.findIndex((r) => said.has(r.name.trim()));
    return row >= 0 ? `env.${row}` : 'env';
  }
  if (base === 'limits') {
    const m = /limits\.(\w+)/.exec(message) ?? /\b(cpus|memory_mib|pids|disk_mib|turn_seconds|auto_sleep_secs)\b/.exec(message);
    return m ? `limits.${m[1]}` : 'limits';
  }
  if (base === 'policy') {
    const m = /\brule (\d+):/.exec(message);
    return m ? `policy.${m[1]}` : 'policy';
  }
  return base;
}
