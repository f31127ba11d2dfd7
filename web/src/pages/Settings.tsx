import type * as preact from 'preact';
import { useState } from 'preact/hooks';
import { api, me } from '../api';
import { Action, ErrorLine, Link, useLoad, when } from '../ui';

const TABS: [string, string, boolean][] = [
  ['providers', 'Provider logins', false],
  ['tokens', 'API tokens', false],
  ['members', 'Members', false],
  ['secrets', 'Secrets', true],
  ['audit', 'Audit log', true],
];

export function SettingsPage({ tab }: { tab: string }) {
  const isAdmin = (me.value?.workspaces ?? []).some((w) => w.role === 'admin');
  return (
    <main class="page">
      <h1>Settings</h1>
      <nav class="tabs" aria-label="Settings">
        {TABS.filter(([, , admin]) => !admin || isAdmin).map(([id, label]) => (
          <Link href={`/settings/${id}`} aria-current={tab === id ? 'page' : undefined}>{label}</Link>
        ))}
      </nav>
      {tab === 'providers' ? <Providers /> : null}
      {tab === 'tokens' ? <Tokens /> : null}
      {tab === 'members' ? <Members /> : null}
      {tab === 'secrets' && isAdmin ? <Secrets /> : null}
      {tab === 'audit' && isAdmin ? <Audit /> : null}
    </main>
  );
}

interface Login {
  id: string;
  kind: string;
  provider: string;
  env_name: string;
  state: string;
  connected_at: string;
  refreshed_at: string | null;
  agents: { id?: string; agent_id?: string; name?: string; agent_name?: string }[];
}

function Providers() {
  const { data, error, reload } = useLoad(
    () => api<{ logins: Login[]; kinds: { kind: string; provider: string; env_name: string }[] }>('GET', '/api/v1/me/providers'),
    [],
  );
  const [kind, setKind] = useState('');
  const [value, setValue] = useState('');
  const [formError, setFormError] = useState<unknown>(null);
  return (
    <section class="card">
      <h2>Provider logins</h2>
      <p class="muted">Your Claude Code and Codex logins. Agents that use your logins get placeholders; the egress proxy puts the real value into their requests. Values are never shown again.</p>
      <ErrorLine error={error} />
      {data?.logins.length ? (
        <table>
          <thead><tr><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Connected</th><th scope="col">Agents using it</th><th scope="col" /></tr></thead>
          <tbody>
            {data.logins.map((l) => (
              <tr>
                <td>{l.kind} <span class="muted">({l.provider})</span></td>
                <td>{l.state === 'connect_again' ? <span class="badge warn">connect again</span> : <span class="badge ok">{l.state}</span>}</td>
                <td>{when(l.connected_at)}{l.refreshed_at ? ` · refreshed ${when(l.refreshed_at)}` : ''}</td>
                <td>
                  {l.agents.length
                    ? l.agents.map((a) => {
                        const id = a.agent_id ?? a.id;
                        return id ? <Link href={`/agents/${id}`}>{a.agent_name ?? a.name ?? id.slice(0, 8)} </Link> : null;
                      })
                    : <span class="muted">none</span>}
                </td>
                <td><Action confirm={`Disconnect ${l.kind}?`} run={async () => { await api('DELETE', `/api/v1/me/providers/${l.id}`); reload(); }}>Disconnect</Action></td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : data ? <p class="muted">No logins connected.</p> : null}
      <form
        class="grid-form"
        onSubmit={async (e) => {
          e.preventDefault();
          setFormError(null);
          try {
            await api('POST', '/api/v1/me/providers', { kind, value });
            setValue('');
            reload();
          } catch (err) {
            setFormError(err);
          }
        }}
      >
        <label>
          Connect (or connect again)
          <select required value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
            <option value="">choose a kind</option>
            {data?.kinds.map((k) => <option value={k.kind}>{k.kind} ({k.provider})</option>)}
          </select>
        </label>
        <label>
          Value
          <textarea required rows={2} value={value} onInput={(e) => setValue(e.currentTarget.value)} placeholder="the token, key, or auth.json" autoComplete="off" />
        </label>
        <div><button type="submit" class="primary">Connect</button></div>
        {HOW[kind] ? <p class="hint muted how">{HOW[kind]}</p> : null}
        <ErrorLine error={formError} />
      </form>
    </section>
  );
}

/** Where each kind of login comes from (docs/logins.md). */
const HOW: Record<string, preact.ComponentChildren> = {
  claude_subscription: <>Run <code>claude setup-token</code> on your computer (Claude Pro/Max) and paste the token it prints (<code>sk-ant-oat…</code>).</>,
  anthropic_api_key: <>An Anthropic API key (<code>sk-ant-…</code>).</>,
  chatgpt_login: (
    <>
      Sign in with a temporary Codex home, so Codex on your computer keeps its own login (agenthold refreshes this one and so takes it over), then paste the file:{' '}
      <code>export CODEX_HOME=$(mktemp -d) &amp;&amp; codex login &amp;&amp; cat $CODEX_HOME/auth.json</code>
    </>
  ),
  chatgpt_access_token: <>A ChatGPT access token (<code>at-…</code>), if your ChatGPT workspace issues them.</>,
  openai_api_key: <>An OpenAI API key (<code>sk-…</code>).</>,
};

function Tokens() {
  const { data, error, reload } = useLoad(
    () => api<{ tokens: { id: string; name: string; created_at: string; last_used_at: string | null }[] }>('GET', '/api/v1/tokens'),
    [],
  );
  const [name, setName] = useState('');
  const [shown, setShown] = useState<{ name: string; token: string } | null>(null);
  const [formError, setFormError] = useState<unknown>(null);
  return (
    <section class="card">
      <h2>API tokens</h2>
      <p class="muted">For scripts and agentholdctl (<code>Authorization: Bearer …</code>). A token is shown once, when it is made.</p>
      <ErrorLine error={error} />
      {shown ? (
        <div class="notice" role="status">
          Token <strong>{shown.name}</strong> (copy it now; it is not shown again): <code class="secret-once">{shown.token}</code>{' '}
          <button type="button" onClick={() => setShown(null)}>Done</button>
        </div>
      ) : null}
      {data?.tokens.length ? (
        <table>
          <thead><tr><th scope="col">Name</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col" /></tr></thead>
          <tbody>
            {data.tokens.map((t) => (
              <tr data-token={t.name}>
                <td>{t.name}</td><td>{when(t.created_at)}</td><td>{when(t.last_used_at)}</td>
                <td><Action confirm={`Revoke ${t.name}? Scripts using it stop working at once.`} run={async () => { await api('DELETE', `/api/v1/tokens/${t.id}`); reload(); }}>Revoke</Action></td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : data ? <p class="muted">No tokens.</p> : null}
      <form
        class="inline-form"
        onSubmit={async (e) => {
          e.preventDefault();
          setFormError(null);
          try {
            const t = await api<{ name: string; token: string }>('POST', '/api/v1/tokens', { name });
            setShown(t);
            setName('');
            reload();
          } catch (err) {
            setFormError(err);
          }
        }}
      >
        <label>New token's name <input required value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <button type="submit" class="primary">Create token</button>
        <ErrorLine error={formError} />
      </form>
    </section>
  );
}

function Members() {
  const workspaces = me.value?.workspaces ?? [];
  const [ws, setWs] = useState(workspaces.find((w) => w.role === 'admin')?.workspace_id ?? '');
  const [userId, setUserId] = useState('');
  const [role, setRole] = useState('operator');
  const [result, setResult] = useState<unknown>(null);
  const [ok, setOk] = useState<string | null>(null);
  return (
    <section class="card">
      <h2>Workspaces and roles</h2>
      <table>
        <thead><tr><th scope="col">Workspace</th><th scope="col">Your role</th></tr></thead>
        <tbody>
          {workspaces.map((w) => <tr><td>{w.name}</td><td>{w.role}</td></tr>)}
        </tbody>
      </table>
      <p class="muted">The API does not list a workspace's members yet; an admin adds a member or changes a role by the user's id.</p>
      {workspaces.some((w) => w.role === 'admin') ? (
        <form
          class="grid-form"
          onSubmit={async (e) => {
            e.preventDefault();
            setResult(null);
            setOk(null);
            try {
              await api('PUT', `/api/v1/workspaces/${ws}/members/${userId.trim()}`, { role });
              setOk('Saved.');
            } catch (err) {
              setResult(err);
            }
          }}
        >
          <label>Workspace
            <select value={ws} onChange={(e) => setWs(e.currentTarget.value)}>
              {workspaces.filter((w) => w.role === 'admin').map((w) => <option value={w.workspace_id}>{w.name}</option>)}
            </select>
          </label>
          <label>User id<input required value={userId} onInput={(e) => setUserId(e.currentTarget.value)} /></label>
          <label>Role
            <select value={role} onChange={(e) => setRole(e.currentTarget.value)}>
              <option value="viewer">viewer</option><option value="operator">operator</option><option value="admin">admin</option>
            </select>
          </label>
          <div>
            <button type="submit" class="primary">Set role</button>{' '}
            <Action confirm="Remove this member?" run={async () => { await api('DELETE', `/api/v1/workspaces/${ws}/members/${userId.trim()}`); setOk('Removed.'); }}>Remove</Action>
          </div>
          <ErrorLine error={result} />
          {ok ? <p role="status">{ok}</p> : null}
        </form>
      ) : null}
    </section>
  );
}

interface SecretRow {
  id: string;
  name: string;
  preset: string;
  rule: { host: string; header: string };
  created_at: string;
  used_by: { agent_id: string; agent_name: string; env_name: string }[];
}

function Secrets() {
  const admin = (me.value?.workspaces ?? []).filter((w) => w.role === 'admin');
  const [ws, setWs] = useState(admin[0]?.workspace_id ?? '');
  const { data, error, reload } = useLoad(() => api<{ secrets: SecretRow[] }>('GET', `/api/v1/workspaces/${ws}/secrets`), [ws]);
  const [name, setName] = useState('');
  const [preset, setPreset] = useState('anthropic');
  const [value, setValue] = useState('');
  const [host, setHost] = useState('');
  const [header, setHeader] = useState('');
  const [formError, setFormError] = useState<unknown>(null);
  return (
    <section class="card">
      <h2>Secrets</h2>
      <label>Workspace{' '}
        <select value={ws} onChange={(e) => setWs(e.currentTarget.value)}>
          {admin.map((w) => <option value={w.workspace_id}>{w.name}</option>)}
        </select>
      </label>
      <ErrorLine error={error} />
      {data?.secrets.length ? (
        <table>
          <thead><tr><th scope="col">Name</th><th scope="col">Preset</th><th scope="col">Goes to</th><th scope="col">Used by</th><th scope="col" /></tr></thead>
          <tbody>
            {data.secrets.map((s) => (
              <tr>
                <td>{s.name}</td><td>{s.preset}</td><td><code>{s.rule.host}</code> <code>{s.rule.header}</code></td>
                <td>{s.used_by.length ? s.used_by.map((u) => <Link href={`/agents/${u.agent_id}`}>{u.agent_name} ({u.env_name}) </Link>) : <span class="muted">none</span>}</td>
                <td><Action confirm={`Delete ${s.name}? It is detached from every agent.`} run={async () => { await api('DELETE', `/api/v1/workspaces/${ws}/secrets/${s.id}`); reload(); }}>Delete</Action></td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : data ? <p class="muted">No secrets.</p> : null}
      <form
        class="grid-form"
        onSubmit={async (e) => {
          e.preventDefault();
          setFormError(null);
          try {
            const body: Record<string, string> = { name, preset, value };
            if (preset === 'custom') Object.assign(body, { host, header });
            await api('POST', `/api/v1/workspaces/${ws}/secrets`, body);
            setName('');
            setValue('');
            reload();
          } catch (err) {
            setFormError(err);
          }
        }}
      >
        <label>Name<input required value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>Preset
          <select value={preset} onChange={(e) => setPreset(e.currentTarget.value)}>
            {['anthropic', 'openai', 'openrouter', 'custom'].map((p) => <option value={p}>{p}</option>)}
          </select>
        </label>
        {preset === 'custom' ? (
          <>
            <label>Host<input required value={host} onInput={(e) => setHost(e.currentTarget.value)} /></label>
            <label>Header<input required value={header} onInput={(e) => setHeader(e.currentTarget.value)} /></label>
          </>
        ) : null}
        <label>Value (write-only)<input required type="password" autoComplete="off" value={value} onInput={(e) => setValue(e.currentTarget.value)} /></label>
        <div><button type="submit" class="primary">Add secret</button></div>
        <ErrorLine error={formError} />
      </form>
    </section>
  );
}

function Audit() {
  const admin = (me.value?.workspaces ?? []).filter((w) => w.role === 'admin');
  const [ws, setWs] = useState(admin[0]?.workspace_id ?? '');
  const [before, setBefore] = useState<string | null>(null);
  const { data, error } = useLoad(
    () =>
      api<{ records: { id: string; actor_user_id: string | null; action: string; resource_type: string; resource_id: string; detail: unknown; created_at: string }[]; next_before: string | null }>(
        'GET',
        `/api/v1/workspaces/${ws}/audit?limit=100${before ? `&before=${before}` : ''}`,
      ),
    [ws, before],
  );
  return (
    <section class="card">
      <h2>Audit log</h2>
      <label>Workspace{' '}
        <select value={ws} onChange={(e) => { setWs(e.currentTarget.value); setBefore(null); }}>
          {admin.map((w) => <option value={w.workspace_id}>{w.name}</option>)}
        </select>
      </label>
      <ErrorLine error={error} />
      {data?.records.length ? (
        <table>
          <thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">By</th><th scope="col">Resource</th><th scope="col">Detail</th></tr></thead>
          <tbody>
            {data.records.map((r) => (
              <tr>
                <td>{when(r.created_at)}</td><td><code>{r.action}</code></td>
                <td>{r.actor_user_id === me.value?.id ? 'you' : r.actor_user_id?.slice(0, 8) ?? 'the server'}</td>
                <td>{r.resource_type === 'agent' ? <Link href={`/agents/${r.resource_id}`}>{r.resource_type} {r.resource_id.slice(0, 8)}</Link> : `${r.resource_type} ${r.resource_id.slice(0, 8)}`}</td>
                <td><code class="detail">{JSON.stringify(r.detail)}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : data ? <p class="muted">No records.</p> : null}
      {data?.next_before ? <button type="button" onClick={() => setBefore(data.next_before)}>Older</button> : null}
      {before ? <button type="button" onClick={() => setBefore(null)}>Newest</button> : null}
    </section>
  );
}
