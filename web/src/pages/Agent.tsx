import { useEffect } from 'preact/hooks';
import { api, atLeast, me, roleIn } from '../api';
import { navigate } from '../router';
import type { Agent } from '../types';
import { Action, Badge, ErrorLine, Json, Link, useLoad, when } from '../ui';
import { StateBadge, marks } from './Agents';
import { AgentUsagePanel } from '../usage-view';
import { serverInfo } from '../server-info';
import { HarnessLogPanel } from '../harness-log-panel';

interface AuditRecord {
  id: string;
  actor_user_id: string | null;
  action: string;
  resource_type: string;
  resource_id: string;
  detail: unknown;
  created_at: string;
}

export function AgentPage({ id }: { id: string }) {
  const agent = useLoad(() => api<Agent>('GET', `/api/v1/agents/${id}`), [id]);
  const sessions = useLoad(() => api<{ sessions: string[] }>('GET', `/api/v1/agents/${id}/sessions`), [id]);
  const a = agent.data;
  // What the edit form checks against (the harnesses and limits), fetched once the page shows, so
  // that "Edit" opens without waiting for it.
  useEffect(() => {
    if (a) serverInfo().catch(() => undefined);
  }, [!!a]);
  // Follow a sandbox that is starting or stopping until it settles.
  const moving = a?.state === 'starting' || a?.state === 'stopping';
  useEffect(() => {
    if (!moving) return;
    const t = setInterval(agent.reload, 1500);
    return () => clearInterval(t);
  }, [moving, id]);
  const role = roleIn(a?.workspace_id);
  const admin = atLeast(role, 'admin');
  const operator = atLeast(role, 'operator');
  const audit = useLoad(async () => {
    if (!a || !admin) return null;
    // The workspace's audit log, this agent's records (the newest 500).
    const r = await api<{ records: AuditRecord[] }>('GET', `/api/v1/workspaces/${a.workspace_id}/audit?limit=500`);
    return r.records.filter((x) => x.resource_id === a.id);
  }, [a?.id, admin]);
  if (agent.error) return <main class="page"><ErrorLine error={agent.error} /><Link href="/">Back to the agents</Link></main>;
  if (!a) return <main class="page"><p class="muted">Loading…</p></main>;
  const act = (verb: string) => async () => {
    await api('POST', `/api/v1/agents/${a.id}/${verb}`);
    agent.reload();
  };
  const mine = a.login_user_id === me.value?.id;
  return (
    <main class="page">
      <div class="title-row">
        <h1>
          {a.name} {marks(a).map((m) => <Badge tone={m.tone}><span title={m.title}>{m.text}</span></Badge>)}
        </h1>
        <div class="actions">
          {admin ? <Link href={`/agents/${a.id}/edit`} class="button">Edit</Link> : null}
          <Link href={`/agents/${a.id}/triggers`} class="button">Triggers</Link>
          {operator ? <Link href={`/agents/${a.id}/terminal`} class="button">Terminal</Link> : null}
          {admin ? (
            <>
              {a.state === 'awake' || a.state === 'starting' ? <Action run={act('sleep')}>Sleep</Action> : <Action run={act('wake')}>Wake</Action>}
              <Action run={act('rebuild')} confirm={`Rebuild ${a.name}? Its container is made again from its image (the home volume stays).`}>Rebuild</Action>
              <Action
                class="reject"
                confirm={`Delete ${a.name}, its sandbox, home volume and every session? This cannot be undone.`}
                run={async () => {
                  await api('DELETE', `/api/v1/agents/${a.id}`);
                  navigate('/');
                }}
              >
                Delete
              </Action>
            </>
          ) : null}
        </div>
      </div>

      <section class="card">
        <h2>Sessions</h2>
        <ErrorLine error={sessions.error} />
        {sessions.data?.sessions.length ? (
          <ol class="sessions">
            {[...sessions.data.sessions].reverse().map((s) => (
              <li><Link href={`/agents/${a.id}/sessions/${s}`}>Session {s.slice(0, 8)}</Link></li>
            ))}
          </ol>
        ) : (
          <p class="muted">No sessions yet.</p>
        )}
        {operator ? (
          <Action
            class="primary"
            run={async () => {
              const s = await api<{ id: string }>('POST', `/api/v1/agents/${a.id}/sessions`, {});
              navigate(`/agents/${a.id}/sessions/${s.id}`);
            }}
          >
            New session
          </Action>
        ) : null}
      </section>

      <AgentUsagePanel agentId={a.id} />

      <section class="card">
        <h2>Overview</h2>
        <dl class="facts">
          <dt>State</dt><dd><StateBadge agent={a} /> <span class="muted">last asked: {a.desired_state}</span></dd>
          <dt>Harness</dt><dd>{a.harness}{a.command ? <> · <code>{a.command.join(' ')}</code></> : null}</dd>
          <dt>Model</dt><dd>{a.model ?? 'the harness’s default'}</dd>
          {a.auth_method ? <><dt>Login method</dt><dd><code>{a.auth_method}</code> <span class="muted">(signed in with when the harness asks)</span></dd></> : null}
          <dt>Image</dt><dd><code>{a.image}</code></dd>
          {a.repo ? (
            <>
              <dt>Repository</dt>
              <dd data-repo-state={a.repo.state}>
                <code>{a.repo.url}</code>{a.repo.branch ? <> · branch <code>{a.repo.branch}</code></> : null} →{' '}
                <code>{a.repo.path}</code>{' '}
                <Badge tone={a.repo.state === 'failed' ? 'warn' : undefined}>{a.repo.state === 'pending' ? 'cloned at the first wake' : a.repo.state}</Badge>
                {a.repo.error ? <p class="muted">The clone failed: {a.repo.error} (tried again when the harness next starts; sessions start in the home meanwhile)</p> : null}
              </dd>
            </>
          ) : null}
          <dt>Driver</dt><dd>{a.driver}{a.isolated ? '' : ' (not isolated: runs as the server’s user)'}</dd>
          <dt>Limits</dt>
          <dd>
            {a.limits.cpus} CPUs · {a.limits.memory_mib} MiB · {a.limits.pids} processes · turn limit {a.limits.turn_seconds ? `${a.limits.turn_seconds} s` : 'the server’s'} · auto-sleep{' '}
            {a.limits.auto_sleep_secs === null ? 'the server’s' : a.limits.auto_sleep_secs === 0 ? 'never' : `${a.limits.auto_sleep_secs} s`}
          </dd>
          <dt>Posture</dt><dd>{a.posture}{a.own_posture ? '' : ' (the server’s default)'}</dd>
          <dt>Policy</dt><dd>{a.policy ? <Json value={a.policy} summary="rules" /> : 'none'}</dd>
          <dt>Environment</dt><dd>{Object.keys(a.env).length ? Object.keys(a.env).map((k) => <code>{k} </code>) : 'none'}</dd>
          <dt>Secrets</dt>
          <dd>{a.secrets.length ? a.secrets.map((s) => <span class="badge"><code>{s.env_name}</code> ← {s.secret_name} ({s.preset})</span>) : 'none attached'}</dd>
          <dt>Egress</dt>
          <dd>
            {a.egress.allow?.length || a.egress.presets?.length
              ? [...(a.egress.presets ?? []).map((p) => `preset ${p}`), ...(a.egress.allow ?? [])].map((x) => <code>{x} </code>)
              : 'only the hosts of its secrets and logins'}
            <span class="muted" data-egress-inherited={a.egress_inherited ? 'yes' : 'no'}>{a.egress_inherited ? ' (the workspace’s default)' : ' (its own list)'}</span>
          </dd>
          <dt>Created</dt><dd>{when(a.created_at)}</dd>
        </dl>
      </section>

      <section class="card">
        <h2>Whose logins</h2>
        {a.login_user_id ? (
          <p>
            Uses {mine ? 'your' : `user ${a.login_user_id.slice(0, 8)}’s`} provider logins
            {a.logins?.delivered.length ? <> (delivered: {a.logins.delivered.join(', ')})</> : ' (none of them fits this harness yet)'}.
            {a.logins?.connect_again.length ? <> <Badge tone="warn">connect again</Badge> <Link href="/settings/providers">Provider logins</Link></> : null}
          </p>
        ) : (
          <p>Uses nobody’s provider logins{a.sandbox_login_at ? `; signed in inside its sandbox ${when(a.sandbox_login_at)}` : ''}.</p>
        )}
        <div class="actions">
          {admin && !mine ? <Action run={async () => { await api('PUT', `/api/v1/agents/${a.id}/logins`); agent.reload(); }}>Use my logins</Action> : null}
          {a.login_user_id && (admin || mine) ? <Action run={async () => { await api('DELETE', `/api/v1/agents/${a.id}/logins`); agent.reload(); }}>Stop using</Action> : null}
        </div>
        {admin && a.login_methods?.length ? (
          <details>
            <summary>Sign in inside this sandbox instead</summary>
            <p class="muted">Runs the harness’s own login in the agent’s terminal; the agent is then marked “credentials inside sandbox”.</p>
            <ul>
              {a.login_methods.map((m) => (
                <li><Link href={`/agents/${a.id}/terminal?login=${encodeURIComponent(m.id)}`}>{m.name ?? m.id}</Link>{m.description ? ` — ${m.description}` : ''}</li>
              ))}
            </ul>
          </details>
        ) : null}
      </section>

      <section class="card">
        <h2>What the harness advertised</h2>
        {a.advertised ? <Json value={a.advertised} summary="initialize answer" /> : <p class="muted">No harness runs now; it is shown once one has started.</p>}
      </section>

      {admin ? <HarnessLogPanel agentId={a.id} /> : null}

      {admin ? (
        <section class="card">
          <h2>Audit</h2>
          <ErrorLine error={audit.error} />
          {audit.data?.length ? (
            <table>
              <thead><tr><th scope="col">When</th><th scope="col">Action</th><th scope="col">By</th><th scope="col">Detail</th></tr></thead>
              <tbody>
                {audit.data.map((r) => (
                  <tr><td>{when(r.created_at)}</td><td><code>{r.action}</code></td><td>{r.actor_user_id === me.value?.id ? 'you' : r.actor_user_id?.slice(0, 8) ?? 'the server'}</td><td><code class="detail">{JSON.stringify(r.detail)}</code></td></tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p class="muted">No records.</p>
          )}
        </section>
      ) : null}
    </main>
  );
}
