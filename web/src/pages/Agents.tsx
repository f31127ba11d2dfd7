import { useEffect, useState } from 'preact/hooks';
import { api, me } from '../api';
import type { Agent, Permission } from '../types';
import { Badge, ErrorLine, Link, useLoad } from '../ui';

export function marks(a: Agent): { text: string; tone: string; title: string }[] {
  const out = [];
  if (a.credentials_inside_sandbox)
    out.push({ text: 'credentials inside sandbox', tone: 'warn', title: 'The agent can read a login or credential in its own sandbox' });
  if (!a.isolated) out.push({ text: 'not isolated', tone: 'danger', title: 'The local driver: the harness runs unconfined as the server user' });
  if (a.logins && a.logins.connect_again.length)
    out.push({ text: 'connect again', tone: 'warn', title: `A provider login needs connecting again: ${a.logins.connect_again.join(', ')}` });
  return out;
}

const STATE_TONES: Record<string, string> = { awake: 'ok', starting: 'warn', stopping: 'warn', error: 'danger' };

/** The observed state, with why it failed and what was last asked for when that differs. */
export function StateBadge({ agent: a }: { agent: Agent }) {
  const wanted = a.desired_state !== a.state && (a.state === 'awake' || a.state === 'asleep');
  return (
    <span class="state" data-state={a.state}>
      <Badge tone={STATE_TONES[a.state]}>
        <span title={a.state_reason ?? (wanted ? `last asked: ${a.desired_state}` : a.state)}>{a.state}</span>
      </Badge>
      {a.state === 'error' && a.state_reason ? <span class="state-reason">{a.state_reason}</span> : null}
    </span>
  );
}

export function AgentsPage() {
  const { data, error, reload } = useLoad(async () => {
    const [agents, pending, providers] = await Promise.all([
      api<{ agents: Agent[] }>('GET', '/api/v1/agents'),
      api<{ permissions: Permission[] }>('GET', '/api/v1/permissions?state=pending&limit=1000').catch(() => ({ permissions: [] })),
      api<{ logins: { kind: string; state: string; agents: { agent_id: string }[] }[] }>('GET', '/api/v1/me/providers').catch(() => ({ logins: [] })),
    ]);
    const waiting = new Map<string, number>();
    for (const p of pending.permissions) waiting.set(p.agent_id, (waiting.get(p.agent_id) ?? 0) + 1);
    // The list has no login state per agent; the reader's own logins say which of its agents
    // need one connected again (the overview says it for anyone's).
    const again = new Map<string, string[]>();
    for (const l of providers.logins)
      if (l.state === 'connect_again') for (const a of l.agents) again.set(a.agent_id, [...(again.get(a.agent_id) ?? []), l.kind]);
    for (const a of agents.agents) {
      const kinds = again.get(a.id);
      if (kinds && !a.logins) a.logins = { user_id: a.login_user_id ?? '', delivered: [], connect_again: kinds };
    }
    return { agents: agents.agents, waiting };
  }, []);
  const workspaces = me.value?.workspaces ?? [];
  const canCreate = workspaces.some((w) => w.role === 'admin');
  const [filter, setFilter] = useState('');
  // Faster while a sandbox is starting or stopping, so the change shows when it happens.
  const moving = (data?.agents ?? []).some((a) => a.state === 'starting' || a.state === 'stopping');
  useEffect(() => {
    const t = setInterval(reload, moving ? 2000 : 15000);
    return () => clearInterval(t);
  }, [moving]);
  const agents = (data?.agents ?? []).filter((a) => !filter || a.name.includes(filter) || a.harness.includes(filter));
  return (
    <main class="page">
      <div class="title-row">
        <h1>Agents</h1>
        <input type="search" aria-label="Filter agents" placeholder="Filter by name or harness" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
      </div>
      <ErrorLine error={error} />
      {data === undefined && !error ? <p class="muted">Loading…</p> : null}
      {workspaces.map((w) => {
        const mine = agents.filter((a) => a.workspace_id === w.workspace_id);
        return (
          <section class="workspace" key={w.workspace_id}>
            <h2>
              {w.name} <Badge>{w.role}</Badge>
            </h2>
            {mine.length === 0 ? (
              <p class="muted">No agents{filter ? ' match' : ' yet'}.</p>
            ) : (
              <table class="agents">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">State</th>
                    <th scope="col">Harness</th>
                    <th scope="col">Model</th>
                    <th scope="col">Posture</th>
                    <th scope="col">Logins</th>
                    <th scope="col">Questions</th>
                  </tr>
                </thead>
                <tbody>
                  {mine.map((a) => {
                    const q = data?.waiting.get(a.id) ?? 0;
                    return (
                      <tr key={a.id} data-agent={a.name}>
                        <th scope="row">
                          <Link href={`/agents/${a.id}`}>{a.name}</Link>{' '}
                          {marks(a).map((m) => (
                            <Badge tone={m.tone}>
                              <span title={m.title}>{m.text}</span>
                            </Badge>
                          ))}
                        </th>
                        <td><StateBadge agent={a} /></td>
                        <td>{a.harness}</td>
                        <td>{a.model ?? <span class="muted">default</span>}</td>
                        <td>{a.posture}</td>
                        <td>{a.login_user_id ? (a.login_user_id === me.value?.id ? 'yours' : 'another user’s') : a.sandbox_login_at ? 'in sandbox' : 'none'}</td>
                        <td>{q ? <Link href="/approvals" class="badge warn">{q} waiting</Link> : <span class="muted">—</span>}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            )}
          </section>
        );
      })}
      {canCreate ? <p><Link href="/agents/new" class="button primary">Create an agent</Link></p> : null}
    </main>
  );
}
