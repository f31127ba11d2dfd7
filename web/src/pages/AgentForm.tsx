// Create an agent (`/agents/new`) or change one (`/agents/{id}/edit`): every setting the API has —
// harness (with its models and the logins it takes), command, model, login method, image, posture
// and policy,
// whose logins, attached secrets by variable, plain env, limits, egress — checked in the page
// first (src/agent-settings.ts), each server error shown at its field, and, when editing, what
// each change restarts before it is saved. The logic lives in src/agent-settings.ts (tested).
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, api, atLeast, me, roleIn } from '../api';
import { navigate } from '../router';
import type { Agent, ProviderLoginList, Secret } from '../types';
import { Link } from '../ui';
import { PolicyEditor } from '../policy-editor';
import { serverInfo, type ServerInfo } from '../server-info';
import {
  POSTURE_TEXT,
  authMethodsOf,
  blankForm,
  changeText,
  egressChange,
  realHarnesses,
  type FieldChange,
  checkForm,
  createBody,
  defaultHarness,
  fieldOfError,
  formFromAgent,
  needsRebuild,
  patchBody,
  secretChanges,
  suggestedSecrets,
  type AgentForm,
  type FieldErrors,
} from '../agent-settings';

interface Loaded {
  info: ServerInfo;
  agent: Agent | null;
  logins: ProviderLoginList;
  secrets: Secret[];
}

const secretsOf = (ws: string | null | undefined) =>
  ws ? api<{ secrets: Secret[] }>('GET', `/api/v1/workspaces/${ws}/secrets`).then((r) => r.secrets, () => [] as Secret[]) : Promise.resolve([] as Secret[]);

/**
 * Everything the form needs. Editing, the form shows as soon as the agent and the logins are in;
 * the workspace's secrets (a second round trip: the workspace comes with the agent) follow
 * through `later`, so opening the form costs one round trip.
 */
async function load(id: string | null, workspaceId: string | null, later?: (secrets: Secret[]) => void): Promise<Loaded> {
  const agentP = id ? api<Agent>('GET', `/api/v1/agents/${id}`) : Promise.resolve(null);
  const loginsP = api<ProviderLoginList>('GET', '/api/v1/me/providers').catch(() => ({ logins: [], kinds: [] }) as ProviderLoginList);
  const secretsP = id ? null : secretsOf(workspaceId);
  const [agent, logins, info] = await Promise.all([agentP, loginsP, serverInfo()]);
  if (!secretsP && later) {
    secretsOf(agent?.workspace_id).then(later);
    return { info, agent, logins, secrets: [] };
  }
  return { info, agent, logins, secrets: await (secretsP ?? secretsOf(agent?.workspace_id)) };
}

/** `id` null: create. */
export function AgentFormPage({ id }: { id: string | null }) {
  const admins = (me.value?.workspaces ?? []).filter((w) => atLeast(roleIn(w.workspace_id), 'admin'));
  const firstWs = admins.find((w) => w.personal)?.workspace_id ?? admins[0]?.workspace_id ?? '';
  const [workspaceId, setWorkspaceId] = useState(firstWs);
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [form, setForm] = useState<AgentForm | null>(null);
  const [submitErrors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState<string | null>(null);
  const [rebuild, setRebuild] = useState(false);
  const [applied, setApplied] = useState<FieldChange[] | null>(null);

  useEffect(() => {
    let live = true;
    load(id, workspaceId, (secrets) => live && setLoaded((l) => (l ? { ...l, secrets } : l))).then(
      (l) => {
        if (!live) return;
        setLoaded(l);
        setForm((old) => {
          if (l.agent) return formFromAgent(l.agent, me.value?.id);
          const harness = old?.harness ?? defaultHarness(l.info.harnesses, l.logins.logins, l.secrets);
          const h = l.info.harnesses.find((x) => x.name === harness);
          const f = old ? { ...old, workspaceId } : blankForm(workspaceId, harness);
          if (!old) f.secrets = suggestedSecrets(h, l.secrets);
          f.useMyLogins = old?.useMyLogins ?? h?.account_logins.some((k) => l.logins.logins.some((x) => x.kind === k && x.state === 'ok')) ?? false;
          return f;
        });
      },
      (e) => live && setLoadError(e),
    );
    return () => {
      live = false;
    };
  }, [id, workspaceId]);

  const creating = id === null;
  const patch = useMemo(() => (form && loaded?.agent ? patchBody(loaded.agent, form) : null), [form, loaded]);
  const egress = form && loaded?.agent ? egressChange(loaded.agent, form) : null;
  // What saving would do, from the server (`PATCH …?dry_run=true`, a moment after the last edit):
  // when each change applies, or the refusal, shown at its field.
  const patchKey = patch && Object.keys(patch).length ? JSON.stringify(patch) : '';
  const [preview, setPreview] = useState<{ key: string; changed: FieldChange[]; error: ApiError | null } | null>(null);
  useEffect(() => {
    const agentId = loaded?.agent?.id;
    if (!patchKey || !agentId) return;
    let live = true;
    const timer = setTimeout(() => {
      api<{ changed: FieldChange[] }>('PATCH', `/api/v1/agents/${agentId}?dry_run=true`, JSON.parse(patchKey)).then(
        (a) => live && setPreview({ key: patchKey, changed: a.changed, error: null }),
        (e) => live && setPreview({ key: patchKey, changed: [], error: e instanceof ApiError ? e : new ApiError(0, 'NETWORK', String(e)) }),
      );
    }, 250);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [patchKey, loaded?.agent?.id]);
  const current = preview && preview.key === patchKey ? preview : null;
  const impacts: FieldChange[] = [...(current?.changed ?? []), ...(egress ? [{ field: 'egress', impact: 'proxy' as const }] : [])];
  const refused = current?.error && form ? { [fieldOfError(current.error.code, current.error.message, form)]: `${current.error.message} (${current.error.code})` } : {};
  const errors: FieldErrors = { ...refused, ...submitErrors };

  if (loadError) return <main class="page"><p class="error" role="alert">{loadError instanceof Error ? loadError.message : String(loadError)}</p><Link href="/">Back to the agents</Link></main>;
  if (!form || !loaded) return <main class="page"><h1>{creating ? 'Create an agent' : 'Edit'}</h1><p class="muted">Loading…</p></main>;
  if (creating && !admins.length) return <main class="page"><h1>Create an agent</h1><p>You are not an admin of any workspace.</p></main>;

  const set = (over: Partial<AgentForm>) => {
    setSaved(null);
    setApplied(null);
    setForm({ ...form, ...over });
  };
  const { limits } = loaded.info;
  const info = loaded.info.harnesses.find((h) => h.name === form.harness);
  const offered = realHarnesses(loaded.info.harnesses);
  const choices = info && !offered.includes(info) ? [...offered, info] : offered;
  const devChoices = loaded.info.harnesses.filter((h) => h.available && !choices.includes(h));
  const myKinds = new Set(loaded.logins.logins.filter((l) => l.state === 'ok').map((l) => l.kind));
  const usable = info?.account_logins.filter((k) => myKinds.has(k)) ?? [];
  const secretsChange = secretChanges(loaded.agent?.secrets ?? [], form.secrets);
  const wantsLogins = form.useMyLogins !== (loaded.agent ? loaded.agent.login_user_id === me.value?.id : false);
  const nothingToSave = !creating && patch && !Object.keys(patch).length && !egress && !secretsChange.attach.length && !secretsChange.detach.length && !wantsLogins;
  const invalid = (k: string) => (errors[k] ? { 'aria-invalid': true, 'aria-describedby': `err-${k.replace(/\./g, '-')}` } : {});
  const FieldError = ({ k }: { k: string }) => (errors[k] ? <span class="field-error" id={`err-${k.replace(/\./g, '-')}`} role="alert">{errors[k]}</span> : null);

  async function submit(e: Event) {
    e.preventDefault();
    if (!form || !loaded) return;
    const found = checkForm(form, creating, loaded.info);
    setErrors(found);
    if (Object.keys(found).length) {
      document.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus();
      return;
    }
    setBusy(true);
    let agentId = loaded.agent?.id ?? null;
    let changed: FieldChange[] = [];
    try {
      if (creating) {
        // Secrets go with the creation: one that fits a pooled harness takes it running.
        const secrets = Object.fromEntries(secretsChange.attach.map((s) => [s.env, s.secretId]));
        const made = await api<Agent>('POST', '/api/v1/agents', { ...createBody(form), secrets });
        agentId = made.id;
      } else if (patch && Object.keys(patch).length) {
        const answer = await api<{ changed: FieldChange[] }>('PATCH', `/api/v1/agents/${agentId}`, patch);
        changed = answer.changed;
      }
      if (!creating && egress) {
        if ('inherit' in egress) await api('DELETE', `/api/v1/agents/${agentId}/egress`);
        else await api('PUT', `/api/v1/agents/${agentId}/egress`, egress.set);
        changed = [...changed, { field: 'egress', impact: 'proxy' }];
      }
      for (const env of secretsChange.detach) await api('DELETE', `/api/v1/agents/${agentId}/secrets/${encodeURIComponent(env)}`);
      if (!creating) for (const s of secretsChange.attach) await api('PUT', `/api/v1/agents/${agentId}/secrets/${encodeURIComponent(s.env)}`, { secret_id: s.secretId });
      if (wantsLogins || (creating && form.useMyLogins)) await api(form.useMyLogins ? 'PUT' : 'DELETE', `/api/v1/agents/${agentId}/logins`);
      if (creating) {
        navigate(`/agents/${agentId}`);
        return;
      }
      const fresh = await load(agentId, null);
      setLoaded(fresh);
      setForm(formFromAgent(fresh.agent!, me.value?.id));
      setRebuild(needsRebuild(changed));
      setApplied(changed);
      setSaved(changed.length ? `Saved. ${changed.map(changeText).join('; ')}.` : 'Saved.');
    } catch (error) {
      if (error instanceof ApiError) {
        const field = fieldOfError(error.code, error.message, form);
        setErrors({ [field]: `${error.message} (${error.code})` });
        if (creating && agentId) navigate(`/agents/${agentId}/edit`); // made, but a secret or login failed: fix it there
      } else setErrors({ form: String(error) });
    } finally {
      setBusy(false);
    }
  }

  const title = creating ? 'Create an agent' : `Edit ${loaded.agent!.name}`;
  return (
    <main class="page agent-form">
      <div class="title-row">
        <h1>{title}</h1>
        {!creating ? <Link href={`/agents/${id}`}>Back to the overview</Link> : null}
      </div>
      <form class="settings-form" onSubmit={submit} noValidate>
        <fieldset>
          <legend>Harness</legend>
          {creating ? (
            <>
              <label>Name<input name="name" value={form.name} autoComplete="off" {...invalid('name')} onInput={(e) => set({ name: e.currentTarget.value })} /></label>
              <FieldError k="name" />
              {admins.length > 1 ? (
                <label>Workspace
                  <select name="workspace" value={workspaceId} onChange={(e) => setWorkspaceId(e.currentTarget.value)}>
                    {admins.map((w) => <option value={w.workspace_id}>{w.name}</option>)}
                  </select>
                </label>
              ) : null}
            </>
          ) : null}
          <label>Harness
            <select
              name="harness"
              value={form.harness}
              {...invalid('harness')}
              onChange={(e) => {
                const harness = e.currentTarget.value;
                const h = loaded.info.harnesses.find((x) => x.name === harness);
                set({ harness, secrets: creating && !form.secrets.length ? suggestedSecrets(h, loaded.secrets) : form.secrets });
              }}
            >
              {choices.map((h) => <option value={h.name}>{h.label}</option>)}
              {devChoices.length ? <optgroup label="Development only">{devChoices.map((h) => <option value={h.name}>{h.label}</option>)}</optgroup> : null}
            </select>
          </label>
          <FieldError k="harness" />
          {info && !info.development_only && (info.account_logins.length || info.secrets.length) ? (
            <p class="muted hint" data-hint="logins">
              {info.account_logins.length ? <>Takes the logins {info.account_logins.map((k) => <code>{k} </code>)}{usable.length ? <>— you have <strong>{usable.join(', ')}</strong>.</> : <>— you have none: <Link href="/settings/providers">connect one</Link>, or attach a secret.</>}</> : null}{' '}
              {info.secrets.length ? <>Reads secrets as {info.secrets.map((p) => <code>{p.env} </code>)}.</> : null}
            </p>
          ) : info?.development_only ? (
            <p class="muted hint">For development and tests: refused by a production server.</p>
          ) : null}
          {info?.needs_command ? (
            <>
              <label>Command<input name="command" value={form.command} placeholder="my-acp-agent --stdio" {...invalid('command')} onInput={(e) => set({ command: e.currentTarget.value })} /></label>
              <FieldError k="command" />
            </>
          ) : null}
          <label>Model
            <input name="model" list="models" value={form.model} placeholder="the harness’s default" {...invalid('model')} onInput={(e) => set({ model: e.currentTarget.value })} />
          </label>
          <datalist id="models">{(info?.models ?? []).map((m) => <option value={m} />)}</datalist>
          <FieldError k="model" />
          <label>Login method
            <input name="auth_method" list="auth-methods" value={form.authMethod} placeholder="none: the harness’s own, or the only one whose key it has" {...invalid('authMethod')} onInput={(e) => set({ authMethod: e.currentTarget.value })} />
          </label>
          <datalist id="auth-methods">{authMethodsOf(loaded.agent).map((m) => <option value={m} />)}</datalist>
          <p class="muted hint">Used (ACP <code>authenticate</code>) when the harness asks to sign in before it opens or loads a session.</p>
          <FieldError k="authMethod" />
          <label>Image<input name="image" value={form.image} placeholder={info?.default_image ?? 'the server’s default'} {...invalid('image')} onInput={(e) => set({ image: e.currentTarget.value })} /></label>
          <FieldError k="image" />
          {creating ? (
            <>
              <label>Repository
                <input name="repo_url" value={form.repoUrl} placeholder="https://github.com/org/repo.git (optional)" {...invalid('repo')} onInput={(e) => set({ repoUrl: e.currentTarget.value })} />
              </label>
              <label>Branch
                <input name="repo_branch" value={form.repoBranch} placeholder="the repository’s default" disabled={!form.repoUrl.trim()} onInput={(e) => set({ repoBranch: e.currentTarget.value })} />
              </label>
              <p class="muted hint">Cloned into the home at the first wake, through the egress proxy; sessions start in it. For a private repository, attach a <code>git_token</code> secret for its host.</p>
              <FieldError k="repo" />
            </>
          ) : loaded.agent?.repo ? (
            <p class="muted hint" data-hint="repo">Repository <code>{loaded.agent.repo.url}</code> (set when the agent was made).</p>
          ) : null}
        </fieldset>

        <fieldset>
          <legend>Permissions</legend>
          <label>Posture
            <select name="posture" value={form.posture} {...invalid('posture')} onChange={(e) => set({ posture: e.currentTarget.value })}>
              <option value="">the server’s default{limits.posture.default ? ` (${limits.posture.default})` : ' (none: choose one)'}</option>
              {limits.posture.offered.map((v) => <option value={v}>{POSTURE_TEXT[v] ?? v}</option>)}
              {form.posture && !limits.posture.offered.includes(form.posture) ? <option value={form.posture}>{form.posture} (not offered here)</option> : null}
            </select>
          </label>
          <FieldError k="posture" />
          {form.posture === 'guarded' || form.policyRows.length ? (
            <PolicyEditor rows={form.policyRows} default={form.policyDefault} errors={errors} onChange={(policyRows, policyDefault) => set({ policyRows, policyDefault })} />
          ) : null}
        </fieldset>

        <fieldset>
          <legend>Credentials</legend>
          <label class="check">
            <input type="checkbox" name="use-my-logins" checked={form.useMyLogins} onChange={(e) => set({ useMyLogins: e.currentTarget.checked })} />
            Use my provider logins{loaded.agent?.login_user_id && loaded.agent.login_user_id !== me.value?.id ? ' (instead of another user’s)' : ''}
          </label>
          <p class="muted hint">Secrets of the workspace, each given to the sandbox as a variable holding a placeholder (the proxy puts the value in). <Link href="/settings/secrets">Manage secrets</Link></p>
          {form.secrets.map((s, i) => (
            <div class="pair" data-secret={i}>
              <input aria-label={`Secret ${i + 1}: variable`} value={s.env} placeholder="ANTHROPIC_API_KEY" {...invalid(`secrets.${i}`)} onInput={(e) => set({ secrets: form.secrets.map((x, j) => (j === i ? { ...x, env: e.currentTarget.value } : x)) })} />
              <select aria-label={`Secret ${i + 1}: secret`} value={s.secretId} onChange={(e) => set({ secrets: form.secrets.map((x, j) => (j === i ? { ...x, secretId: e.currentTarget.value } : x)) })}>
                <option value="">choose…</option>
                {loaded.secrets.map((x) => <option value={x.id}>{x.name} ({x.preset})</option>)}
              </select>
              <button type="button" aria-label={`Detach secret ${i + 1}`} onClick={() => set({ secrets: form.secrets.filter((_, j) => j !== i) })}>✕</button>
              <FieldError k={`secrets.${i}`} />
            </div>
          ))}
          <button type="button" disabled={!loaded.secrets.length} onClick={() => set({ secrets: [...form.secrets, { env: info?.secrets[0]?.env ?? '', secretId: '' }] })}>Attach a secret</button>
          {!loaded.secrets.length ? <span class="muted"> The workspace has no secrets.</span> : null}
          <FieldError k="secrets" />
        </fieldset>

        <fieldset>
          <legend>Environment</legend>
          {form.env.map((r, i) => (
            <div class="pair" data-env={i}>
              <input aria-label={`Variable ${i + 1}: name`} value={r.name} placeholder="NAME" {...invalid(`env.${i}`)} onInput={(e) => set({ env: form.env.map((x, j) => (j === i ? { ...x, name: e.currentTarget.value } : x)) })} />
              <input aria-label={`Variable ${i + 1}: value`} value={r.value} onInput={(e) => set({ env: form.env.map((x, j) => (j === i ? { ...x, value: e.currentTarget.value } : x)) })} />
              <button type="button" aria-label={`Remove variable ${i + 1}`} onClick={() => set({ env: form.env.filter((_, j) => j !== i) })}>✕</button>
              <FieldError k={`env.${i}`} />
            </div>
          ))}
          <button type="button" onClick={() => set({ env: [...form.env, { name: '', value: '' }] })}>Add a variable</button>
          <FieldError k="env" />
        </fieldset>

        <fieldset class="limits">
          <legend>Limits</legend>
          <p class="muted hint">Empty: the server’s default (shown greyed). The ranges are this server’s.</p>
          {(
            [
              ['cpus', 'CPUs', '0.05'],
              ['memory_mib', 'Memory (MiB)', '1'],
              ['pids', 'Processes', '1'],
              ['disk_mib', 'Disk (MiB)', '1'],
              ['turn_seconds', 'Turn time limit (s; 0: the server’s)', '1'],
              ['auto_sleep_secs', 'Auto-sleep after idle (s; 0: never)', '1'],
            ] as const
          ).map(([key, label, step]) => {
            const r = limits.limits[key];
            return (
              <label data-limit={key}>
                {label}
                <input name={`limits.${key}`} type="number" min={key === 'turn_seconds' ? 0 : r.min} max={r.max} step={step} placeholder={String(r.default)} value={form.limits[key]} aria-describedby={`range-${key}`} {...invalid(`limits.${key}`)} onInput={(e) => set({ limits: { ...form.limits, [key]: e.currentTarget.value } })} />
                <span class="muted hint" id={`range-${key}`}>{r.min}–{r.max}</span>
                <FieldError k={`limits.${key}`} />
              </label>
            );
          })}
          <FieldError k="limits" />
        </fieldset>

        <fieldset>
          <legend>Network</legend>
          <label class="check">
            <input type="checkbox" name="egress-inherit" checked={form.egressInherit} onChange={(e) => set({ egressInherit: e.currentTarget.checked })} />
            Follow the workspace’s default
          </label>
          <p class="muted hint" data-egress-inherited={form.egressInherit ? 'yes' : 'no'}>
            {form.egressInherit
              ? loaded.agent && loaded.agent.egress_inherited
                ? <>Follows the workspace’s default: {describeEgress(loaded.agent.egress)}. <Link href="/settings/egress">Workspace default</Link></>
                : <>Follows the workspace’s default (changes to it reach the agent within seconds). <Link href="/settings/egress">Workspace default</Link></>
              : <>A list of its own; operators may only narrow the workspace’s default (<code>EGRESS_WIDENED</code> otherwise).</>}
          </p>
          {!form.egressInherit ? (
            <>
              <label>Also allow (one host, host:port or *.domain per line)
                <textarea name="egress" rows={3} value={form.egressAllow} {...invalid('egress')} onInput={(e) => set({ egressAllow: e.currentTarget.value })} />
              </label>
              {limits.egress.presets.map((p) => (
                <label class="check" title={p.hosts.join(', ')}>
                  <input type="checkbox" checked={form.egressPresets.includes(p.name)} onChange={(e) => set({ egressPresets: e.currentTarget.checked ? [...form.egressPresets, p.name] : form.egressPresets.filter((x) => x !== p.name) })} />
                  <code>{p.name}</code> <span class="muted">{p.hosts.slice(0, 3).join(', ')}{p.hosts.length > 3 ? `, … (${p.hosts.length})` : ''}</span>
                </label>
              ))}
            </>
          ) : null}
          <FieldError k="egress" />
        </fieldset>

        {!creating ? (
          <section class="changes" aria-live="polite">
            <h2>What saving changes</h2>
            {applied ? <p class="muted" data-applied>{applied.length ? `The server applied: ${applied.map(changeText).join('; ')}.` : 'The server changed nothing.'}</p> : null}
            {impacts.length || secretsChange.attach.length || secretsChange.detach.length || wantsLogins ? (
              <ul>
                {impacts.map((i) => <li data-impact={i.field}>{changeText(i)}</li>)}
                {secretsChange.attach.map((s) => <li><strong>secret {s.env}</strong>: attached; the proxy takes it within seconds</li>)}
                {secretsChange.detach.map((s) => <li><strong>secret {s}</strong>: detached</li>)}
                {wantsLogins ? <li><strong>logins</strong>: {form.useMyLogins ? 'yours, from the next harness start' : 'nobody’s'}</li> : null}
              </ul>
            ) : (
              <p class="muted">Nothing yet.</p>
            )}
          </section>
        ) : null}
        {errors.form ? <p class="error" role="alert">{errors.form}</p> : null}
        {Object.keys(errors).length && !errors.form ? <p class="error" role="alert">Fix the marked fields.</p> : null}
        {saved ? <p class="ok" role="status">{saved}</p> : null}
        <div class="actions">
          <button class="primary" type="submit" disabled={busy || !!nothingToSave}>{busy ? 'Saving…' : creating ? 'Create' : 'Save'}</button>
          {rebuild ? (
            <button
              type="button"
              onClick={async () => {
                try {
                  await api('POST', `/api/v1/agents/${id}/rebuild`);
                  setRebuild(false);
                  setSaved('Rebuilt: the sandbox was made again with the new image and limits.');
                } catch (e) {
                  setErrors({ form: e instanceof ApiError ? `${e.message} (${e.code})` : String(e) });
                }
              }}
            >
              Rebuild now
            </button>
          ) : null}
        </div>
      </form>
    </main>
  );
}

/** "npm, pypi + example.com" */
function describeEgress(e: { allow?: string[] | null; presets?: string[] | null }): string {
  const parts = [...(e.presets ?? []), ...(e.allow ?? [])];
  return parts.length ? parts.join(', ') : 'nothing beyond its secrets’ and harness’s hosts';
}
