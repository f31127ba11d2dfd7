// The agent form's logic: defaults that work, the create body, the smallest PATCH and what it
// restarts, secrets to attach and detach, checks before sending, server errors at their field.
import { describe, expect, it } from 'vitest';
import {
  blankForm,
  checkForm,
  createBody,
  defaultHarness,
  egressChange,
  authMethodsOf,
  changeText,
  fieldOfError,
  formFromAgent,
  needsRebuild,
  patchBody,
  secretChanges,
  suggestedSecrets,
} from '../src/agent-settings';
import type { Agent } from '../src/types';
import type { Harness, ServerInfo } from '../src/server-info';

// As `GET /api/v1/harnesses` and `GET /api/v1/limits` answer (trimmed to what the form reads).
const h = (name: string, over: Partial<Harness>): Harness => ({
  name, label: name, available: true, development_only: false, needs_command: false, models: [], account_logins: [], secrets: [], auto_logins: [], terminal_login: false,
  default_image: 'agenthold/base:latest', provider_hosts: [], ...over,
});
const harnesses: Harness[] = [
  h('claude-code', { account_logins: ['claude_subscription', 'anthropic_api_key'], secrets: [{ preset: 'anthropic', env: 'ANTHROPIC_API_KEY' }] }),
  h('codex', { account_logins: ['chatgpt_login', 'chatgpt_access_token', 'openai_api_key'], secrets: [{ preset: 'openai', env: 'OPENAI_API_KEY' }] }),
  h('opencode', { secrets: [{ preset: 'anthropic', env: 'ANTHROPIC_API_KEY' }, { preset: 'openai', env: 'OPENAI_API_KEY' }, { preset: 'openrouter', env: 'OPENROUTER_API_KEY' }] }),
  h('fake', { development_only: true, account_logins: ['anthropic_api_key'] }),
  h('command', { needs_command: true }),
];
const range = (d: number, min: number, max: number) => ({ default: d, min, max });
const info: ServerInfo = {
  harnesses,
  limits: {
    limits: { cpus: range(2, 0.05, 4), memory_mib: range(2048, 64, 8192), pids: range(512, 16, 4096), disk_mib: range(10240, 64, 65536), turn_seconds: range(3600, 1, 86400), auto_sleep_secs: range(1800, 0, 31622400) },
    model: { max_chars: 200, punctuation: '-._:/@+' },
    env: { max_vars: 128, max_value_bytes: 32768 },
    max_secrets: 32,
    egress: { max_entries: 64, max_entry_chars: 260, presets: [{ name: 'npm', hosts: ['registry.npmjs.org'] }] },
    posture: { offered: ['guarded', 'approval'], default: 'approval' },
    max_auth_method_chars: 128,
  },
} as ServerInfo;

const agent: Agent = {
  id: 'a1',
  workspace_id: 'w1',
  created_by: 'u1',
  name: 'demo',
  harness: 'claude-code',
  command: null,
  auth_method: null,
  model: null,
  env: { LANG: 'C.UTF-8' },
  image: 'agenthold/base:latest',
  driver: 'docker',
  engine: 'local',
  isolated: true,
  permission_policy: 'ask',
  posture: 'guarded',
  own_posture: 'guarded',
  policy: { rules: [{ effect: 'read', answer: 'allow' }], default: 'ask' },
  limits: { cpus: 2, memory_mib: 2048, pids: 512, disk_mib: 10240, disk_enforced: null, turn_seconds: null, auto_sleep_secs: null },
  login_user_id: null,
  sandbox_login_at: null,
  desired_state: 'asleep',
  state: 'asleep',
  state_reason: null,
  repo: null,
  created_at: '2026-12-01T00:00:00Z',
  secrets: [{ env_name: 'ANTHROPIC_API_KEY', secret_id: 's1', secret_name: 'anthropic', preset: 'anthropic' }],
  credentials_inside_sandbox: false,
  egress: { allow: [], presets: [] },
  egress_inherited: false,
} as Agent;

describe('defaults that work', () => {
  it('the first real harness whose login or secret the user has; never fake', () => {
    expect(defaultHarness(harnesses, [], [])).toBe('claude-code');
    expect(defaultHarness(harnesses, [{ kind: 'openai_api_key', state: 'ok' }], [])).toBe('codex');
    expect(defaultHarness(harnesses, [{ kind: 'openai_api_key', state: 'connect_again' }], [])).toBe('claude-code');
    expect(defaultHarness(harnesses, [], [{ id: 's', name: 'or', preset: 'openrouter' }])).toBe('opencode');
    expect(defaultHarness(harnesses, [{ kind: 'anthropic_api_key', state: 'ok' }], [{ id: 's', name: 'o', preset: 'openai' }])).toBe('claude-code');
    // What the server does not offer is never the default.
    const production = harnesses.map((x) => (x.name === 'claude-code' ? { ...x, available: false } : x));
    expect(defaultHarness(production, [{ kind: 'anthropic_api_key', state: 'ok' }], [])).toBe('codex');
  });
  it('suggests the workspace secret the harness reads', () => {
    expect(suggestedSecrets(harnesses[0], [{ id: 's9', name: 'key', preset: 'anthropic' }])).toEqual([{ env: 'ANTHROPIC_API_KEY', secretId: 's9' }]);
    expect(suggestedSecrets(harnesses[1], [{ id: 's9', name: 'key', preset: 'anthropic' }])).toEqual([]);
  });
});

describe('create', () => {
  it('a guarded agent always carries a policy (no POLICY_MISSING), only the fields given', () => {
    const f = { ...blankForm('w1', 'claude-code'), name: ' demo ', posture: 'guarded' };
    expect(createBody(f)).toEqual({ name: 'demo', harness: 'claude-code', workspace_id: 'w1', posture: 'guarded', policy: { rules: [], default: 'ask' } });
  });
  it('env, limits, egress, command', () => {
    const f = { ...blankForm('w1', 'command'), name: 'x', command: 'my-agent  --stdio', env: [{ name: 'LANG', value: 'C' }], egressInherit: false, egressAllow: 'github.com\n*.npmjs.org', egressPresets: ['package_registries'] };
    f.limits = { ...f.limits, cpus: '1.5', turn_seconds: '600' };
    expect(createBody(f)).toMatchObject({ command: ['my-agent', '--stdio'], env: { LANG: 'C' }, limits: { cpus: 1.5, turn_seconds: 600 }, egress: { allow: ['github.com', '*.npmjs.org'], presets: ['package_registries'] } });
  });
});

describe('edit', () => {
  it('an untouched form changes nothing', () => {
    expect(patchBody(agent, formFromAgent(agent, 'u1'))).toEqual({});
    // jsonb's own key order (shorter keys first) is not a change
    const stored = { ...agent, policy: { rules: [{ answer: 'allow', effect: 'read' }], default: 'ask' } } as Agent;
    expect(patchBody(stored, formFromAgent(stored, 'u1'))).toEqual({});
  });
  it('only what changed, and what each change restarts', () => {
    const f = formFromAgent(agent, 'u1');
    f.model = 'claude-opus-4-1';
    f.limits.memory_mib = '4096';
    f.limits.turn_seconds = '900';
    f.policyDefault = 'deny';
    const patch = patchBody(agent, f);
    expect(patch).toEqual({ model: 'claude-opus-4-1', limits: { memory_mib: 4096, turn_seconds: 900 }, policy: { rules: [{ effect: 'read', answer: 'allow' }], default: 'deny' } });
    // What the server answers for it (agent_offer.rs): read for the page.
    const changed = [
      { field: 'model', impact: 'restarts_harness' },
      { field: 'policy', impact: 'at_once' },
      { field: 'limits', impact: 'needs_rebuild' },
      { field: 'turn_seconds', impact: 'next_prompt' },
    ] as const;
    expect(changed.map(changeText)).toEqual([
      'model: restarts the harness once no turn runs',
      'policy: applies at once',
      'limits: applies when the sandbox is rebuilt',
      'turn time limit: applies from the next prompt',
    ]);
    expect(needsRebuild([...changed])).toBe(true);
    expect(needsRebuild([{ field: 'auth_method', impact: 'at_once' }])).toBe(false);
  });
  it('leaving guarded with no rules removes the policy; clearing the model sends ""', () => {
    const f = formFromAgent({ ...agent, model: 'm', policy: null } as Agent, 'u1');
    f.posture = 'approval';
    f.model = '';
    expect(patchBody({ ...agent, model: 'm', policy: null } as Agent, f)).toEqual({ posture: 'approval', model: '' });
  });
  it('the login method: set, cleared with "", restarting nothing; suggested from what the harness advertised', () => {
    const f = formFromAgent(agent, 'u1');
    f.authMethod = ' acme-key ';
    const patch = patchBody(agent, f);
    expect(patch).toEqual({ auth_method: 'acme-key' });
    const named = { ...agent, auth_method: 'acme-key' } as Agent;
    expect(formFromAgent(named, 'u1').authMethod).toBe('acme-key');
    expect(patchBody(named, { ...formFromAgent(named, 'u1'), authMethod: '' })).toEqual({ auth_method: '' });
    expect(createBody({ ...blankForm('w1', 'command'), name: 'x', command: 'acp', authMethod: 'k' }).auth_method).toBe('k');
    expect(createBody({ ...blankForm('w1', 'fake'), name: 'x', repoUrl: ' https://github.com/o/r.git ', repoBranch: '' }).repo).toEqual({ url: 'https://github.com/o/r.git', branch: null });
    expect(createBody({ ...blankForm('w1', 'fake'), name: 'x', repoUrl: 'https://github.com/o/r', repoBranch: 'dev' }).repo).toEqual({ url: 'https://github.com/o/r', branch: 'dev' });
    expect(createBody({ ...blankForm('w1', 'fake'), name: 'x' }).repo).toBeUndefined();
    expect(fieldOfError('INVALID_REPO', 'repo.url must start with https://')).toBe('repo');
    const advertised = { authMethods: [{ id: 'k', name: 'Key' }, { id: 'login', type: 'terminal' }, { name: 'no id' }, 'x'] };
    expect(authMethodsOf({ ...agent, advertised } as Agent)).toEqual(['k']);
    expect(authMethodsOf(agent)).toEqual([]);
    expect(checkForm({ ...f, authMethod: 'x'.repeat(129) }, false, info).authMethod).toBeTruthy();
    expect(fieldOfError('UNKNOWN_AUTH_METHOD', 'auth_method: …')).toBe('authMethod');
  });
  it('secrets: attach the new, replace by variable, detach the removed', () => {
    expect(secretChanges(agent.secrets, [{ env: 'ANTHROPIC_API_KEY', secretId: 's1' }])).toEqual({ attach: [], detach: [] });
    expect(secretChanges(agent.secrets, [{ env: 'ANTHROPIC_API_KEY', secretId: 's2' }])).toEqual({ attach: [{ env: 'ANTHROPIC_API_KEY', secretId: 's2' }], detach: [] });
    expect(secretChanges(agent.secrets, [])).toEqual({ attach: [], detach: ['ANTHROPIC_API_KEY'] });
  });
});

describe('egress: the workspace default or a list of its own', () => {
  it('follows the default until a list is given; back to it with DELETE', () => {
    const inherited = { ...agent, egress: { allow: ['deb.debian.org'], presets: ['npm'] }, egress_inherited: true } as Agent;
    const f = formFromAgent(inherited, 'u1');
    expect(f.egressInherit).toBe(true);
    expect(egressChange(inherited, f)).toBeNull();
    expect(egressChange(inherited, { ...f, egressInherit: false, egressAllow: 'github.com', egressPresets: [] })).toEqual({ set: { allow: ['github.com'], presets: [] } });
    const own = { ...agent, egress: { allow: ['github.com'], presets: [] }, egress_inherited: false } as Agent;
    expect(egressChange(own, formFromAgent(own, 'u1'))).toBeNull();
    expect(egressChange(own, { ...formFromAgent(own, 'u1'), egressInherit: true })).toEqual({ inherit: true });
    expect(createBody({ ...blankForm('w1', 'fake'), name: 'x' }).egress).toBeUndefined();
    expect(fieldOfError('EGRESS_WIDENED', 'the workspace default does not allow pypi')).toBe('egress');
  });
});

describe('checks before sending, from what the server publishes', () => {
  it('field by field', () => {
    const f = { ...blankForm('w1', 'claude-code'), name: '', env: [{ name: 'LANG', value: 'x' }, { name: 'LANG', value: 'y' }] };
    f.policyRows = [{ effect: 'write', path: 'src', outsideWorkdir: false, command: '', answer: 'deny' }];
    f.limits.turn_seconds = '-1';
    f.limits.cpus = '5';
    f.posture = 'autonomous';
    f.model = 'has space';
    f.secrets = [{ env: 'X', secretId: '' }];
    const e = checkForm(f, true, info);
    expect(Object.keys(e).sort()).toEqual(['env.1', 'limits.cpus', 'limits.turn_seconds', 'model', 'name', 'policy.0.path', 'posture', 'secrets.0']);
    expect(e['limits.cpus']).toBe('CPUs: 0.05–4 on this server');
    expect(e.posture).toContain('guarded, approval');
  });
  it('a harness the server does not offer, or one needing a command', () => {
    const fake = { ...blankForm('w1', 'fake'), name: 'x' };
    expect(checkForm(fake, true, { ...info, harnesses: harnesses.map((x) => (x.name === 'fake' ? { ...x, available: false } : x)) }).harness).toBeTruthy();
    expect(checkForm({ ...blankForm('w1', 'command'), name: 'x' }, true, info).command).toBeTruthy();
    expect(checkForm({ ...blankForm('w1', 'nope'), name: 'x' }, true, info).harness).toBeTruthy();
  });
  it('the limits at the server’s maxima pass', () => {
    const f = { ...blankForm('w1', 'claude-code'), name: 'x' };
    f.limits = { cpus: '4', memory_mib: '8192', pids: '4096', disk_mib: '65536', turn_seconds: '0', auto_sleep_secs: '31622400' };
    expect(checkForm(f, true, info)).toEqual({});
  });
  it('server errors at their field', () => {
    expect(fieldOfError('LIMIT_TOO_HIGH', 'cpus at most 2')).toBe('limits.cpus');
    expect(fieldOfError('LIMIT_TOO_HIGH', 'limits.turn_seconds: at most 86400 on this server')).toBe('limits.turn_seconds');
    expect(fieldOfError('INVALID_POLICY', 'rule 1: `command` applies only to exec')).toBe('policy.1');
    expect(fieldOfError('NAME_TAKEN', 'x')).toBe('name');
    const f = { ...blankForm('w1', 'claude-code'), env: [{ name: 'LANG', value: '' }, { name: 'MY_TOKEN', value: '' }] };
    expect(fieldOfError('USE_A_SECRET', 'environment variable MY_TOKEN looks like a credential', f)).toBe('env.1');
    expect(fieldOfError('INVALID_ENV', 'at most 128 environment variables', f)).toBe('env');
    expect(fieldOfError('QUOTA_EXCEEDED', 'x')).toBe('form');
  });
});
