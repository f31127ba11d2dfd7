import type * as preact from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, api, atLeast, me, roleIn } from '../api';
import { type Role, RoleSelect, SelectField, SubmitForm, TextField, WorkspacePicker } from '../forms';
import { Action, Badge, ErrorLine, Link, useLoad, when } from '../ui';
import { serverInfo } from '../server-info';

const TABS: [string, string, boolean][] = [
  ['providers', 'Provider logins', false],
  ['tokens', 'API tokens', false],
  ['members', 'Members', false],
  ['secrets', 'Secrets', true],
  ['egress', 'Egress', true],
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
      {tab === 'egress' && isAdmin ? <WorkspaceEgress /> : null}
      {tab === 'audit' && isAdmin ? <Audit /> : null}
    </main>
  );
}

/** The workspaces the reader administers, and the one chosen (the first at first). */
function useAdminWorkspace() {
  const admin = (me.value?.workspaces ?? []).filter((w) => w.role === 'admin');
  const [ws, setWs] = useState(admin[0]?.workspace_id ?? '');
  return { admin, ws, setWs };
}

/** A table with a header row, or `empty` when there are no rows (nothing while loading). */
function Table<T>(props: { rows: T[] | undefined; head: string[]; empty: string; row: (r: T) => preact.ComponentChildren; class?: string }) {
  if (!props.rows) return null;
  if (!props.rows.length) return <p class="muted">{props.empty}</p>;
  return (
    <table class={props.class}>
      <thead><tr>{props.head.map((h) => <th scope="col">{h}</th>)}</tr></thead>
      <tbody>{props.rows.map(props.row)}</tbody>
    </table>
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
  return (
    <section class="card">
      <h2>Provider logins</h2>
      <p class="muted">Your Claude Code and Codex logins. Agents that use your logins get placeholders; the egress proxy puts the real value into their requests. Values are never shown again.</p>
      <ErrorLine error={error} />
      <Table
        rows={data?.logins}
        head={['Kind', 'State', 'Connected', 'Agents using it', '']}
        empty="No logins connected."
        row={(l) => (
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
        )}
      />
      <SubmitForm
        submit={async () => {
          await api('POST', '/api/v1/me/providers', { kind, value });
          setValue('');
          reload();
        }}
      >
        <SelectField
          label="Connect (or connect again)"
          required
          value={kind}
          onChange={setKind}
          options={[['', 'choose a kind'], ...(data?.kinds ?? []).map((k): [string, string] => [k.kind, `${k.kind} (${k.provider})`])]}
        />
        <TextField label="Value" rows={2} value={value} onInput={setValue} placeholder="the token, key, or auth.json" />
        <div><button type="submit" class="primary">Connect</button></div>
        {HOW[kind] ? <p class="hint muted how">{HOW[kind]}</p> : null}
      </SubmitForm>
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
      <Table
        rows={data?.tokens}
        head={['Name', 'Created', 'Last used', '']}
        empty="No tokens."
        row={(t) => (
          <tr data-token={t.name}>
            <td>{t.name}</td><td>{when(t.created_at)}</td><td>{when(t.last_used_at)}</td>
            <td><Action confirm={`Revoke ${t.name}? Scripts using it stop working at once.`} run={async () => { await api('DELETE', `/api/v1/tokens/${t.id}`); reload(); }}>Revoke</Action></td>
          </tr>
        )}
      />
      <SubmitForm
        class="inline-form"
        submit={async () => {
          setShown(await api<{ name: string; token: string }>('POST', '/api/v1/tokens', { name }));
          setName('');
          reload();
        }}
      >
        <TextField label="New token's name" value={name} onInput={setName} />
        <button type="submit" class="primary">Create token</button>
      </SubmitForm>
    </section>
  );
}

interface Member {
  user_id: string;
  username: string;
  role: Role;
  joined_at: string;
}

function Members() {
  const workspaces = me.value?.workspaces ?? [];
  const [ws, setWs] = useState(workspaces.find((w) => !w.personal)?.workspace_id ?? workspaces[0]?.workspace_id ?? '');
  const { data, error, reload } = useLoad(() => api<{ members: Member[] }>('GET', `/api/v1/workspaces/${ws}/members`), [ws]);
  const admin = atLeast(roleIn(ws), 'admin');
  const [userId, setUserId] = useState('');
  const [role, setRole] = useState<Role>('operator');
  return (
    <section class="card">
      <h2>Members</h2>
      <WorkspacePicker value={ws} onChange={setWs} workspaces={workspaces} />
      <ErrorLine error={error} />
      <Table
        class="members"
        rows={data?.members}
        head={admin ? ['Member', 'Role', 'Joined', ''] : ['Member', 'Role', 'Joined']}
        empty="No members."
        row={(m) => (
          <tr key={m.user_id} data-member={m.username}>
            <td>{m.username}{m.user_id === me.value?.id ? <span class="muted"> (you)</span> : null} <code class="muted">{m.user_id.slice(0, 8)}</code></td>
            <td>
              {admin ? (
                <RoleSelect
                  label={`Role of ${m.username}`}
                  value={m.role}
                  onChange={async (r) => { await api('PUT', `/api/v1/workspaces/${ws}/members/${m.user_id}`, { role: r }); reload(); }}
                />
              ) : <Badge>{m.role}</Badge>}
            </td>
            <td>{when(m.joined_at)}</td>
            {admin ? (
              <td>
                <Action confirm={`Remove ${m.username} from this workspace? Its agents stop using their logins.`} run={async () => { await api('DELETE', `/api/v1/workspaces/${ws}/members/${m.user_id}`); reload(); }}>
                  Remove
                </Action>
              </td>
            ) : null}
          </tr>
        )}
      />
      {admin ? (
        <SubmitForm
          class="inline-form"
          submit={async () => {
            await api('PUT', `/api/v1/workspaces/${ws}/members/${userId.trim()}`, { role });
            setUserId('');
            reload();
          }}
        >
          <TextField label="Add a member by user id" value={userId} onInput={setUserId} />
          <RoleSelect label="Their role" value={role} onChange={async (r) => setRole(r)} />
          <button type="submit" class="primary">Add member</button>
        </SubmitForm>
      ) : <p class="muted">The workspace's admins add and remove members and change roles.</p>}
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
  const { admin, ws, setWs } = useAdminWorkspace();
  const { data, error, reload } = useLoad(() => api<{ secrets: SecretRow[] }>('GET', `/api/v1/workspaces/${ws}/secrets`), [ws]);
  const [name, setName] = useState('');
  const [preset, setPreset] = useState('anthropic');
  const [value, setValue] = useState('');
  const [host, setHost] = useState('');
  const [header, setHeader] = useState('');
  return (
    <section class="card">
      <h2>Secrets</h2>
      <WorkspacePicker value={ws} onChange={setWs} workspaces={admin} />
      <ErrorLine error={error} />
      <Table
        rows={data?.secrets}
        head={['Name', 'Preset', 'Goes to', 'Used by', '']}
        empty="No secrets."
        row={(s) => (
          <tr>
            <td>{s.name}</td><td>{s.preset}</td><td><code>{s.rule.host}</code> <code>{s.rule.header}</code></td>
            <td>{s.used_by.length ? s.used_by.map((u) => <Link href={`/agents/${u.agent_id}`}>{u.agent_name} ({u.env_name}) </Link>) : <span class="muted">none</span>}</td>
            <td><Action confirm={`Delete ${s.name}? It is detached from every agent.`} run={async () => { await api('DELETE', `/api/v1/workspaces/${ws}/secrets/${s.id}`); reload(); }}>Delete</Action></td>
          </tr>
        )}
      />
      <SubmitForm
        submit={async () => {
          const body: Record<string, string> = { name, preset, value };
          if (preset === 'custom') Object.assign(body, { host, header });
          await api('POST', `/api/v1/workspaces/${ws}/secrets`, body);
          setName('');
          setValue('');
          reload();
        }}
      >
        <TextField label="Name" value={name} onInput={setName} />
        <SelectField label="Preset" value={preset} onChange={setPreset} options={['anthropic', 'openai', 'openrouter', 'custom'].map((p) => [p, p])} />
        {preset === 'custom' ? (
          <>
            <TextField label="Host" value={host} onInput={setHost} />
            <TextField label="Header" value={header} onInput={setHeader} />
          </>
        ) : null}
        <TextField label="Value (write-only)" secret value={value} onInput={setValue} />
        <div><button type="submit" class="primary">Add secret</button></div>
      </SubmitForm>
    </section>
  );
}

/**
 * The workspace's default egress (`GET`/`PUT /api/v1/workspaces/{id}/egress`): the presets (from
 * `GET /api/v1/limits`, each with its hosts) and hosts every agent without a list of its own may
 * reach; operators may give an agent only a narrower list (`EGRESS_WIDENED`).
 */
function WorkspaceEgress() {
  const { admin, ws, setWs } = useAdminWorkspace();
  const info = useLoad(() => serverInfo(), []);
  const current = useLoad(() => api<{ allow: string[]; presets: string[] }>('GET', `/api/v1/workspaces/${ws}/egress`), [ws]);
  const [draft, setDraft] = useState<{ ws: string; allow: string; presets: string[] } | null>(null);
  const [fieldError, setFieldError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const form = draft && draft.ws === ws ? draft : current.data ? { ws, allow: current.data.allow.join('\n'), presets: current.data.presets } : null;
  const edit = (over: Partial<{ allow: string; presets: string[] }>) => {
    if (!form) return;
    setSaved(false);
    setDraft({ ...form, ...over });
  };
  const limits = info.data?.limits;
  return (
    <section class="card" aria-labelledby="egress-h">
      <h2 id="egress-h">Egress default</h2>
      <p class="muted">What the sandboxes of this workspace’s agents may reach besides their secrets’ and harness’s hosts, unless an agent has a list of its own. Operators may give an agent only a narrower list; admins any. The proxy follows a change within seconds.</p>
      <WorkspacePicker value={ws} onChange={setWs} workspaces={admin} />
      <ErrorLine error={current.error ?? info.error} />
      {form && limits ? (
        <form
          class="settings-form"
          noValidate
          onSubmit={async (e) => {
            e.preventDefault();
            setFieldError(null);
            const allow = form.allow.split(/[\n,]/).map((x) => x.trim()).filter(Boolean);
            if (allow.length > limits.egress.max_entries) return setFieldError(`at most ${limits.egress.max_entries} entries`);
            try {
              const stored = await api<{ allow: string[]; presets: string[] }>('PUT', `/api/v1/workspaces/${ws}/egress`, { allow, presets: form.presets });
              setDraft({ ws, allow: stored.allow.join('\n'), presets: stored.presets });
              setSaved(true);
            } catch (error) {
              setFieldError(error instanceof ApiError ? `${error.message} (${error.code})` : String(error));
            }
          }}
        >
          <fieldset>
            <legend>Presets</legend>
            {limits.egress.presets.map((p) => (
              <label class="check" title={p.hosts.join(', ')}>
                <input type="checkbox" name={`preset-${p.name}`} checked={form.presets.includes(p.name)} onChange={(e) => edit({ presets: e.currentTarget.checked ? [...form.presets, p.name] : form.presets.filter((x) => x !== p.name) })} />
                <code>{p.name}</code> <span class="muted">{p.hosts.join(', ')}</span>
              </label>
            ))}
          </fieldset>
          <label>Also allow (one host, host:port or *.domain per line)
            <textarea name="egress-allow" rows={4} value={form.allow} aria-invalid={fieldError ? true : undefined} aria-describedby={fieldError ? 'egress-error' : undefined} onInput={(e) => edit({ allow: e.currentTarget.value })} />
          </label>
          {fieldError ? <span class="field-error" id="egress-error" role="alert">{fieldError}</span> : null}
          {saved ? <p class="ok" role="status">Saved: agents that follow the default get it within seconds.</p> : null}
          <div class="actions"><button class="primary" type="submit">Save the default</button></div>
        </form>
      ) : null}
    </section>
  );
}

interface AuditRecord {
  id: string;
  actor_user_id: string | null;
  action: string;
  resource_type: string;
  resource_id: string;
  detail: unknown;
  created_at: string;
}

function Audit() {
  const { admin, ws, setWs } = useAdminWorkspace();
  const [before, setBefore] = useState<string | null>(null);
  const { data, error } = useLoad(
    () => api<{ records: AuditRecord[]; next_before: string | null }>('GET', `/api/v1/workspaces/${ws}/audit?limit=100${before ? `&before=${before}` : ''}`),
    [ws, before],
  );
  return (
    <section class="card">
      <h2>Audit log</h2>
      <WorkspacePicker value={ws} onChange={(id) => { setWs(id); setBefore(null); }} workspaces={admin} />
      <ErrorLine error={error} />
      <Table
        rows={data?.records}
        head={['When', 'Action', 'By', 'Resource', 'Detail']}
        empty="No records."
        row={(r) => (
          <tr>
            <td>{when(r.created_at)}</td><td><code>{r.action}</code></td>
            <td>{r.actor_user_id === me.value?.id ? 'you' : r.actor_user_id?.slice(0, 8) ?? 'the server'}</td>
            <td>{r.resource_type === 'agent' ? <Link href={`/agents/${r.resource_id}`}>{r.resource_type} {r.resource_id.slice(0, 8)}</Link> : `${r.resource_type} ${r.resource_id.slice(0, 8)}`}</td>
            <td><code class="detail">{JSON.stringify(r.detail)}</code></td>
          </tr>
        )}
      />
      {data?.next_before ? <button type="button" onClick={() => setBefore(data.next_before)}>Older</button> : null}
      {before ? <button type="button" onClick={() => setBefore(null)}>Newest</button> : null}
    </section>
  );
}
