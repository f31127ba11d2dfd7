// An agent's settings as the create-and-edit form holds them, and what each change means: the
// form's state from an agent, the body of `POST /api/v1/agents` and the smallest `PATCH
// /api/v1/agents/{id}` body, what a change restarts (the rules of server/src/api/
// agent_settings.rs `apply`/`Change`: harness, command, model, env restart the harness once no
// turn runs; image and limits need a rebuild; posture, policy and the login method apply at once;
// the turn limit and auto-sleep from the next prompt; egress within seconds), the secrets to attach or detach, checks
// the page can make before sending, and which field a server error belongs to.
// Plain TypeScript, unit-tested (test/agent-settings.test.ts).
import type { Agent, CreateAgent, UpdateAgent } from './types';
import { fromPolicy, rowErrors, toPolicy, type Answer, type RuleRow } from './policy';

/**
 * What the UI knows of each harness. The server has no route listing its harnesses with their
 * models and login kinds yet (docs/ui.md, "What the UI needs from the server"); until it does this
 * mirrors docs/harnesses.md and docs/logins.md. Models are suggestions: any name is accepted.
 */
export const HARNESS_INFO: Record<string, { label: string; models: string[]; loginKinds: string[]; secretPresets: { preset: string; env: string }[]; real: boolean }> = {
  'claude-code': {
    label: 'Claude Code',
    models: ['claude-sonnet-4-5', 'claude-opus-4-1', 'claude-haiku-4-5'],
    loginKinds: ['claude_subscription', 'anthropic_api_key'],
    secretPresets: [{ preset: 'anthropic', env: 'ANTHROPIC_API_KEY' }],
    real: true,
  },
  codex: {
    label: 'Codex',
    models: ['gpt-5-codex', 'gpt-5'],
    loginKinds: ['chatgpt_login', 'chatgpt_access_token', 'openai_api_key'],
    secretPresets: [{ preset: 'openai', env: 'OPENAI_API_KEY' }],
    real: true,
  },
  opencode: {
    label: 'OpenCode',
    models: ['anthropic/claude-sonnet-4-5', 'openai/gpt-5', 'openrouter/anthropic/claude-sonnet-4.5'],
    loginKinds: [],
    secretPresets: [
      { preset: 'anthropic', env: 'ANTHROPIC_API_KEY' },
      { preset: 'openai', env: 'OPENAI_API_KEY' },
      { preset: 'openrouter', env: 'OPENROUTER_API_KEY' },
    ],
    real: true,
  },
  command: { label: 'Any ACP program (command)', models: [], loginKinds: [], secretPresets: [], real: false },
  fake: { label: 'fake (development and tests only)', models: [], loginKinds: [], secretPresets: [], real: false },
};

export const POSTURES: [string, string][] = [
  ['', 'the server’s default'],
  ['approval', 'approval — ask a person for every call'],
  ['guarded', 'guarded — a policy answers; it may ask a person'],
  ['autonomous', 'autonomous — approve every call'],
];

export const EGRESS_PRESETS: [string, string][] = [
  ['npm', 'npm registry'],
  ['pypi', 'PyPI'],
  ['crates', 'crates.io'],
  ['go', 'Go modules'],
  ['debian', 'Debian mirror (apt)'],
  ['opencode_free', "OpenCode's free models"],
  ['package_registries', 'Package registries (npm, PyPI, crates.io, Go modules, RubyGems, Maven Central)'],
];

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

/**
 * The harness a new agent should start with: the first real one the user can run — with one of
 * their own logins that harness takes, or a secret of the workspace with its provider's preset —
 * else Claude Code. Never `fake` (production refuses it).
 */
export function defaultHarness(logins: MyLogin[], secrets: WorkspaceSecret[]): string {
  const usable = new Set(logins.filter((l) => l.state === 'ok').map((l) => l.kind));
  const presets = new Set(secrets.map((s) => s.preset));
  for (const [name, info] of Object.entries(HARNESS_INFO)) {
    if (!info.real) continue;
    if (info.loginKinds.some((k) => usable.has(k)) || info.secretPresets.some((p) => presets.has(p.preset))) return name;
  }
  return 'claude-code';
}

/** Secrets worth attaching to a new agent of `harness`: one per variable the harness reads. */
export function suggestedSecrets(harness: string, secrets: WorkspaceSecret[]): { env: string; secretId: string }[] {
  const out: { env: string; secretId: string }[] = [];
  for (const p of HARNESS_INFO[harness]?.secretPresets ?? []) {
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
  if (f.egressAllow.trim() || f.egressPresets.length) body.egress = { allow: lines(f.egressAllow), presets: f.egressPresets };
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
  const egress = { allow: lines(f.egressAllow), presets: [...f.egressPresets].sort() };
  if (!same(egress, { allow: a.egress.allow ?? [], presets: [...(a.egress.presets ?? [])].sort() })) body.egress = egress;
  return body;
}

export type Impact = 'restarts the harness once no turn runs' | 'applies when the sandbox is rebuilt' | 'applies at once' | 'applies from the next prompt' | 'reaches the proxy within seconds';

/** What each field of a PATCH does to the running agent (server: `agent_settings::apply`). */
export function impactsOf(patch: UpdateAgent): { field: string; impact: Impact }[] {
  const out: { field: string; impact: Impact }[] = [];
  const add = (field: string, impact: Impact) => out.push({ field, impact });
  if ('harness' in patch) add('harness', 'restarts the harness once no turn runs');
  if ('command' in patch) add('command', 'restarts the harness once no turn runs');
  if ('model' in patch) add('model', 'restarts the harness once no turn runs');
  if ('env' in patch) add('environment', 'restarts the harness once no turn runs');
  if ('image' in patch) add('image', 'applies when the sandbox is rebuilt');
  if ('auth_method' in patch) add('login method', 'applies at once');
  if ('posture' in patch) add('posture', 'applies at once');
  if ('policy' in patch) add('policy', 'applies at once');
  const l = patch.limits ?? {};
  const resources = (['cpus', 'memory_mib', 'pids', 'disk_mib'] as const).filter((k) => k in l);
  if (resources.length) add(`limits (${resources.join(', ')})`, 'applies when the sandbox is rebuilt');
  if ('turn_seconds' in l) add('turn time limit', 'applies from the next prompt');
  if ('auto_sleep_secs' in l) add('auto-sleep', 'applies at once');
  if ('egress' in patch) add('egress allow-list', 'reaches the proxy within seconds');
  return out;
}

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

/** Whether a change needs `POST …/rebuild` to take effect. */
export const needsRebuild = (patch: UpdateAgent) => impactsOf(patch).some((i) => i.impact === 'applies when the sandbox is rebuilt');

/** The secret attachments to make and remove so the agent holds what the form says. */
export function secretChanges(current: { env_name: string; secret_id: string }[], wanted: AgentForm['secrets']): { attach: { env: string; secretId: string }[]; detach: string[] } {
  const want = wanted.filter((w) => w.env.trim() && w.secretId);
  return {
    attach: want.filter((w) => !current.some((c) => c.env_name === w.env.trim() && c.secret_id === w.secretId)).map((w) => ({ env: w.env.trim(), secretId: w.secretId })),
    detach: current.filter((c) => !want.some((w) => w.env.trim() === c.env_name)).map((c) => c.env_name),
  };
}

const CREDENTIAL_LAST = ['KEY', 'APIKEY', 'TOKEN', 'SECRET', 'PASSWORD', 'PASSWD', 'PASSPHRASE', 'CREDENTIAL', 'CREDENTIALS'];
/** Whether a plain env name looks like a credential (docs/secrets.md: refused with USE_A_SECRET). */
export function looksLikeCredential(name: string): boolean {
  const parts = name.toUpperCase().split('_').filter(Boolean);
  if (!parts.length) return false;
  if (CREDENTIAL_LAST.includes(parts[parts.length - 1])) return true;
  if (parts.some((p) => p === 'SECRET' || p === 'PASSWORD' || p === 'PASSWD')) return true;
  return name.toUpperCase().endsWith('PASSWORD');
}

const RESERVED_ENV = new Set(['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY', 'NODE_USE_ENV_PROXY', 'NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'CODEX_CA_CERTIFICATE', 'PATH', 'HOME', 'USER', 'SHELL', 'LD_PRELOAD', 'LD_LIBRARY_PATH']);

/** An egress entry the server would refuse, or null (`host`, `host:port`, `*.domain[:port]`). */
export function egressEntryError(entry: string): string | null {
  const m = /^(\*\.)?([a-z0-9-]+(?:\.[a-z0-9-]+)*)\.?(?::(\d{1,5}))?$/i.exec(entry);
  if (!m) return `“${entry}” is not a host, host:port, *.domain or *.domain:port`;
  if (m[1] && !m[2].includes('.')) return `“${entry}”: a wildcard needs a domain with a dot (*.example.com, not *.com)`;
  if (m[3] && (Number(m[3]) < 1 || Number(m[3]) > 65535)) return `“${entry}”: the port must be 1–65535`;
  return null;
}

export type FieldErrors = Partial<Record<string, string>>;

/** What the page can tell before sending; keys are field names (`policy.2.path`, `env.0`, …). */
export function checkForm(f: AgentForm, creating: boolean): FieldErrors {
  const e: FieldErrors = {};
  if (creating && !/^[a-z0-9][a-z0-9._-]{0,63}$/.test(f.name.trim())) e.name = '1–64 of a-z 0-9 - _ ., starting with a letter or digit';
  if (!HARNESS_INFO[f.harness]) e.harness = 'choose a harness';
  if (f.harness === 'command' && !words(f.command).length) e.command = 'the program to run and its arguments';
  if (f.model.trim() && !/^[A-Za-z0-9\-._:/@+]{1,200}$/.test(f.model.trim())) e.model = 'up to 200 of A-Z a-z 0-9 - . _ : / @ +';
  if ([...f.authMethod.trim()].length > 128) e.authMethod = 'a login method id is at most 128 characters';
  f.policyRows.forEach((row, i) => {
    for (const [k, v] of Object.entries(rowErrors(row))) e[`policy.${i}.${k}`] = v;
  });
  f.env.forEach((r, i) => {
    const name = r.name.trim();
    if (!name) return;
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name.toUpperCase().startsWith('AGENTHOLD_')) e[`env.${i}`] = 'a name of letters, digits and _, not starting with a digit, not AGENTHOLD_*';
    else if (looksLikeCredential(name)) e[`env.${i}`] = `${name} looks like a credential: store it as a secret and attach it instead`;
    else if (f.env.findIndex((x) => x.name.trim() === name) !== i) e[`env.${i}`] = `${name} is set twice`;
  });
  for (const [key, label] of [['cpus', 'CPUs'], ['memory_mib', 'memory'], ['pids', 'processes'], ['disk_mib', 'disk']] as const) {
    const v = f.limits[key].trim();
    if (v && !(Number(v) > 0)) e[`limits.${key}`] = `${label}: a number above 0`;
  }
  const turn = f.limits.turn_seconds.trim();
  if (turn && !(Number.isInteger(Number(turn)) && Number(turn) >= 0 && Number(turn) <= 2_592_000)) e['limits.turn_seconds'] = '0 (the server’s) or 1–2,592,000 seconds';
  const sleep = f.limits.auto_sleep_secs.trim();
  if (sleep && !(Number.isInteger(Number(sleep)) && Number(sleep) >= 0 && Number(sleep) <= 31_536_000)) e['limits.auto_sleep_secs'] = '0 (never) up to a year, in seconds';
  const allow = lines(f.egressAllow);
  if (allow.length > 64) e.egress = 'at most 64 entries';
  else for (const entry of allow) {
    const err = egressEntryError(entry);
    if (err) {
      e.egress = err;
      break;
    }
  }
  f.secrets.forEach((s, i) => {
    const name = s.env.trim();
    if (!name && !s.secretId) return;
    if (!/^[A-Z_][A-Z0-9_]{0,127}$/.test(name) || name.startsWith('AGENTHOLD_') || RESERVED_ENV.has(name)) e[`secrets.${i}`] = 'a variable of A-Z 0-9 _ (not reserved: AGENTHOLD_*, PATH, HOME, proxy variables, …)';
    else if (!s.secretId) e[`secrets.${i}`] = 'choose the secret';
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
  INVALID_LIMITS: 'limits',
  LIMIT_TOO_HIGH: 'limits',
  INVALID_IMAGE: 'image',
  IMAGE_NOT_ALLOWED: 'image',
  INVALID_REPO: 'repo',
};

/** Which field a server error belongs to (`limits.cpus`, `policy.2`, …), or 'form'. */
export function fieldOfError(code: string, message: string): string {
  const base = CODE_FIELDS[code];
  if (!base) return 'form';
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
