// The agent form's logic: defaults that work, the create body, the smallest PATCH and what it
// restarts, secrets to attach and detach, checks before sending, server errors at their field.
import { describe, expect, it } from 'vitest';
import {
  blankForm,
  checkForm,
  createBody,
  defaultHarness,
  egressEntryError,
  authMethodsOf,
  fieldOfError,
  formFromAgent,
  impactsOf,
  looksLikeCredential,
  needsRebuild,
  patchBody,
  secretChanges,
  suggestedSecrets,
} from '../src/agent-settings';
import type { Agent } from '../src/types';

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
    expect(defaultHarness([], [])).toBe('claude-code');
    expect(defaultHarness([{ kind: 'openai_api_key', state: 'ok' }], [])).toBe('codex');
    expect(defaultHarness([{ kind: 'openai_api_key', state: 'connect_again' }], [])).toBe('claude-code');
    expect(defaultHarness([], [{ id: 's', name: 'or', preset: 'openrouter' }])).toBe('opencode');
    expect(defaultHarness([{ kind: 'anthropic_api_key', state: 'ok' }], [{ id: 's', name: 'o', preset: 'openai' }])).toBe('claude-code');
  });
  it('suggests the workspace secret the harness reads', () => {
    expect(suggestedSecrets('claude-code', [{ id: 's9', name: 'key', preset: 'anthropic' }])).toEqual([{ env: 'ANTHROPIC_API_KEY', secretId: 's9' }]);
    expect(suggestedSecrets('codex', [{ id: 's9', name: 'key', preset: 'anthropic' }])).toEqual([]);
  });
});

describe('create', () => {
  it('a guarded agent always carries a policy (no POLICY_MISSING), only the fields given', () => {
    const f = { ...blankForm('w1', 'claude-code'), name: ' demo ', posture: 'guarded' };
    expect(createBody(f)).toEqual({ name: 'demo', harness: 'claude-code', workspace_id: 'w1', posture: 'guarded', policy: { rules: [], default: 'ask' } });
  });
  it('env, limits, egress, command', () => {
    const f = { ...blankForm('w1', 'command'), name: 'x', command: 'my-agent  --stdio', env: [{ name: 'LANG', value: 'C' }], egressAllow: 'github.com\n*.npmjs.org', egressPresets: ['package_registries'] };
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
    expect(impactsOf(patch)).toEqual([
      { field: 'model', impact: 'restarts the harness once no turn runs' },
      { field: 'policy', impact: 'applies at once' },
      { field: 'limits (memory_mib)', impact: 'applies when the sandbox is rebuilt' },
      { field: 'turn time limit', impact: 'applies from the next prompt' },
    ]);
    expect(needsRebuild(patch)).toBe(true);
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
    expect(impactsOf(patch)).toEqual([{ field: 'login method', impact: 'applies at once' }]);
    expect(needsRebuild(patch)).toBe(false);
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
    expect(checkForm({ ...f, authMethod: 'x'.repeat(129) }, false).authMethod).toBeTruthy();
    expect(fieldOfError('UNKNOWN_AUTH_METHOD', 'auth_method: …')).toBe('authMethod');
  });
  it('secrets: attach the new, replace by variable, detach the removed', () => {
    expect(secretChanges(agent.secrets, [{ env: 'ANTHROPIC_API_KEY', secretId: 's1' }])).toEqual({ attach: [], detach: [] });
    expect(secretChanges(agent.secrets, [{ env: 'ANTHROPIC_API_KEY', secretId: 's2' }])).toEqual({ attach: [{ env: 'ANTHROPIC_API_KEY', secretId: 's2' }], detach: [] });
    expect(secretChanges(agent.secrets, [])).toEqual({ attach: [], detach: ['ANTHROPIC_API_KEY'] });
  });
});

describe('checks before sending', () => {
  it('credential-looking env names go to secrets (docs/secrets.md)', () => {
    for (const n of ['ANTHROPIC_API_KEY', 'GITHUB_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'PGPASSWORD']) expect(looksLikeCredential(n)).toBe(true);
    for (const n of ['TOKENIZERS_PARALLELISM', 'MAX_TOKENS', 'KEYBOARD_LAYOUT', 'PUBLIC_KEY_PATH']) expect(looksLikeCredential(n)).toBe(false);
  });
  it('egress entries', () => {
    expect(egressEntryError('github.com')).toBeNull();
    expect(egressEntryError('*.npmjs.org:443')).toBeNull();
    expect(egressEntryError('*.com')).toContain('needs a domain with a dot');
    expect(egressEntryError('http://x')).toContain('is not a host');
  });
  it('field by field', () => {
    const f = { ...blankForm('w1', 'claude-code'), name: 'Bad Name', env: [{ name: 'OPENAI_API_KEY', value: 'x' }] };
    f.policyRows = [{ effect: 'write', path: 'src', outsideWorkdir: false, command: '', answer: 'deny' }];
    f.limits.turn_seconds = '-1';
    f.secrets = [{ env: 'PATH', secretId: 's1' }];
    const e = checkForm(f, true);
    expect(Object.keys(e).sort()).toEqual(['env.0', 'limits.turn_seconds', 'name', 'policy.0.path', 'secrets.0']);
  });
  it('server errors at their field', () => {
    expect(fieldOfError('LIMIT_TOO_HIGH', 'cpus at most 2')).toBe('limits.cpus');
    expect(fieldOfError('LIMIT_TOO_HIGH', 'limits.turn_seconds: at most 86400 on this server')).toBe('limits.turn_seconds');
    expect(fieldOfError('INVALID_POLICY', 'rule 1: `command` applies only to exec')).toBe('policy.1');
    expect(fieldOfError('NAME_TAKEN', 'x')).toBe('name');
    expect(fieldOfError('QUOTA_EXCEEDED', 'x')).toBe('form');
  });
});
