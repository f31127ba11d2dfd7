// `/agents/{id}/triggers`: prompts nobody types (docs/triggers.md). Schedules (a cron expression
// previewed as its next runs in the chosen zone, pause and resume, each run and why it was
// skipped), webhooks (the URL and signing secret shown once, a template tried against a sample
// body in the page, each delivery and why it was refused), and which agents this one may prompt
// and is prompted by. Viewers read; operators set up schedules and webhooks; admins (of both
// agents) link agents.
import { useMemo, useState } from 'preact/hooks';
import { api, atLeast, roleIn } from '../api';
import { preview } from '../cron';
import { renderTemplate } from '../template';
import type { Agent, CreatedWebhook, Delivery, IncomingLinks, PromptTargets, Schedule, ScheduleRun, Webhook } from '../types';
import { Action, Badge, ErrorLine, Link, useLoad, when } from '../ui';
import { SubmitForm, TextField } from '../forms';

const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const zones = (): string[] => {
  try {
    return (Intl as any).supportedValuesOf('timeZone');
  } catch {
    return ['UTC'];
  }
};

export function TriggersPage({ agentId }: { agentId: string }) {
  const agent = useLoad(() => api<Agent>('GET', `/api/v1/agents/${agentId}`), [agentId]);
  const sessions = useLoad(() => api<{ sessions: string[] }>('GET', `/api/v1/agents/${agentId}/sessions`), [agentId]);
  const a = agent.data;
  if (agent.error) return <main class="page"><ErrorLine error={agent.error} /><Link href="/">Back to the agents</Link></main>;
  if (!a) return <main class="page"><p class="muted">Loading…</p></main>;
  const role = roleIn(a.workspace_id);
  const ids = sessions.data?.sessions ?? [];
  return (
    <main class="page triggers">
      <div class="title-row">
        <h1>Triggers of {a.name}</h1>
        <Link href={`/agents/${a.id}`}>Back to the overview</Link>
      </div>
      <Schedules agent={a} operator={atLeast(role, 'operator')} sessions={ids} />
      <Webhooks agent={a} operator={atLeast(role, 'operator')} sessions={ids} />
      <PromptLinks agent={a} admin={atLeast(role, 'admin')} />
    </main>
  );
}

function SessionChoice(props: { value: string; onChange: (v: string) => void; sessions: string[]; each: string }) {
  return (
    <label>
      Session
      <select value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        <option value="">a new session {props.each}</option>
        {props.sessions.map((s) => <option value={s}>session {s.slice(0, 8)}</option>)}
      </select>
    </label>
  );
}

function CronPreview({ cron, zone }: { cron: string; zone: string }) {
  // Recomputed when the expression or zone changes, not on every keystroke elsewhere.
  const p = useMemo(() => (cron.trim() ? preview(cron, zone, Date.now(), 5) : null), [cron, zone]);
  if (!p) return null;
  return (
    <div class="cron-preview" aria-live="polite" data-preview>
      {p.error ? (
        <p class={p.unsupported ? 'muted' : 'field-error'} role={p.unsupported ? undefined : 'alert'}>{p.error}</p>
      ) : (
        <>
          <span class="muted">Next runs ({zone}):</span>
          <ol>{p.runs.map((r) => <li>{r}</li>)}</ol>
        </>
      )}
    </div>
  );
}

function Schedules({ agent, operator, sessions }: { agent: Agent; operator: boolean; sessions: string[] }) {
  const list = useLoad(() => api<{ schedules: Schedule[] }>('GET', `/api/v1/agents/${agent.id}/schedules`), [agent.id]);
  const [name, setName] = useState('');
  const [cron, setCron] = useState('0 9 * * 1-5');
  const [zone, setZone] = useState(browserZone());
  const [prompt, setPrompt] = useState('');
  const [session, setSession] = useState('');
  return (
    <section class="card" aria-labelledby="schedules-h">
      <h2 id="schedules-h">Schedules</h2>
      <ErrorLine error={list.error} />
      {list.data?.schedules.length ? (
        <ul class="trigger-list">
          {list.data.schedules.map((s) => (
            <li data-schedule={s.name}>
              <div class="trigger-head">
                <strong>{s.name}</strong> <code>{s.cron}</code> <span class="muted">{s.time_zone}</span>{' '}
                {s.paused ? <Badge tone="warn">paused{s.paused_reason ? ` (${s.paused_reason})` : ''}</Badge> : <span>next {when(s.next_run_at)}</span>}{' '}
                <span class="muted">last {when(s.last_run_at)}</span>
              </div>
              <p class="prompt-text">{s.prompt}</p>
              {operator ? (
                <div class="actions">
                  <Action run={async () => { await api('PATCH', `/api/v1/schedules/${s.id}`, { paused: !s.paused }); list.reload(); }}>{s.paused ? 'Resume' : 'Pause'}</Action>
                  <Action class="reject" confirm={`Delete the schedule ${s.name}?`} run={async () => { await api('DELETE', `/api/v1/schedules/${s.id}`); list.reload(); }}>Delete</Action>
                </div>
              ) : null}
              <Runs schedule={s} agentId={agent.id} />
            </li>
          ))}
        </ul>
      ) : list.data ? <p class="muted">No schedules.</p> : null}
      {operator ? (
        <details class="create">
          <summary>Add a schedule</summary>
          <SubmitForm
            submit={async () => {
              await api('POST', `/api/v1/agents/${agent.id}/schedules`, { name: name.trim(), cron: cron.trim(), time_zone: zone, prompt, session_id: session || null });
              setName('');
              setPrompt('');
              list.reload();
            }}
          >
            <TextField label="Name" value={name} onInput={setName} />
            <label>Cron (minute hour day month weekday)<input name="cron" required value={cron} onInput={(e) => setCron(e.currentTarget.value)} /></label>
            <label>Time zone
              <input name="time_zone" list="zones" required value={zone} onInput={(e) => setZone(e.currentTarget.value)} />
            </label>
            <datalist id="zones">{zones().map((z) => <option value={z} />)}</datalist>
            <CronPreview cron={cron} zone={zone} />
            <TextField label="Prompt" value={prompt} onInput={setPrompt} rows={3} />
            <SessionChoice value={session} onChange={setSession} sessions={sessions} each="per run" />
            <div><button class="primary" type="submit">Add the schedule</button></div>
          </SubmitForm>
        </details>
      ) : null}
    </section>
  );
}

function Runs({ schedule, agentId }: { schedule: Schedule; agentId: string }) {
  const [open, setOpen] = useState(false);
  const runs = useLoad(async () => (open ? api<{ runs: ScheduleRun[] }>('GET', `/api/v1/schedules/${schedule.id}/runs`) : null), [open, schedule.id]);
  return (
    <details onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Runs</summary>
      <ErrorLine error={runs.error} />
      {runs.data?.runs.length ? (
        <table>
          <thead><tr><th scope="col">Due</th><th scope="col">Ran</th><th scope="col">Outcome</th><th scope="col">Session</th></tr></thead>
          <tbody>
            {runs.data.runs.map((r) => (
              <tr data-outcome={r.outcome}>
                <td>{when(r.due_at)}</td>
                <td>{when(r.ran_at)}</td>
                <td>{r.outcome === 'started' ? <Badge tone="ok">started</Badge> : <Badge tone="warn">skipped</Badge>} {r.reason ?? ''}</td>
                <td>{r.session_id ? <Link href={`/agents/${agentId}/sessions/${r.session_id}`}>{r.session_id.slice(0, 8)}</Link> : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : runs.data ? <p class="muted">No runs yet.</p> : null}
    </details>
  );
}

const SAMPLE = '{\n  "number": 42,\n  "pull_request": {"title": "Fix the parser", "html_url": "https://example.com/pr/42"},\n  "sender": {"login": "ada"}\n}';

function Webhooks({ agent, operator, sessions }: { agent: Agent; operator: boolean; sessions: string[] }) {
  const list = useLoad(() => api<{ webhooks: Webhook[] }>('GET', `/api/v1/agents/${agent.id}/webhooks`), [agent.id]);
  const [name, setName] = useState('');
  const [template, setTemplate] = useState('Review PR #{{ number }} ({{ pull_request.title }}) by {{ sender.login }}: {{ pull_request.html_url }}');
  const [sample, setSample] = useState(SAMPLE);
  const [session, setSession] = useState('');
  const [made, setMade] = useState<CreatedWebhook | null>(null);
  const tried = renderTemplate(template, sample);
  return (
    <section class="card" aria-labelledby="webhooks-h">
      <h2 id="webhooks-h">Webhooks</h2>
      <ErrorLine error={list.error} />
      {made ? (
        <div class="notice once" role="status" data-created-webhook>
          <p><strong>{made.webhook.name}</strong> is ready. Copy its secret now: it is not shown again.</p>
          <dl class="facts">
            <dt>URL</dt><dd><code data-webhook-url>{made.webhook.url ?? `${location.origin}${made.webhook.path}`}</code></dd>
            <dt>Secret (GitHub: X-Hub-Signature-256)</dt><dd><code data-webhook-secret>{made.secret}</code></dd>
            <dt>Standard Webhooks secret</dt><dd><code>{made.standard_secret}</code></dd>
          </dl>
          <button type="button" onClick={() => setMade(null)}>I have copied it</button>
        </div>
      ) : null}
      {list.data?.webhooks.length ? (
        <ul class="trigger-list">
          {list.data.webhooks.map((w) => (
            <li data-webhook={w.name}>
              <div class="trigger-head">
                <strong>{w.name}</strong> <code>POST {w.url ?? w.path}</code> {w.paused ? <Badge tone="warn">paused{w.paused_reason ? ` (${w.paused_reason})` : ''}</Badge> : null}
              </div>
              <p class="prompt-text">{w.template}</p>
              {operator ? (
                <div class="actions">
                  <Action run={async () => { await api('PATCH', `/api/v1/webhooks/${w.id}`, { paused: !w.paused }); list.reload(); }}>{w.paused ? 'Resume' : 'Pause'}</Action>
                  <Action class="reject" confirm={`Delete the webhook ${w.name}? Its URL stops answering.`} run={async () => { await api('DELETE', `/api/v1/webhooks/${w.id}`); list.reload(); }}>Delete</Action>
                </div>
              ) : null}
              <Deliveries webhook={w} agentId={agent.id} />
            </li>
          ))}
        </ul>
      ) : list.data ? <p class="muted">No webhooks.</p> : null}
      {operator ? (
        <details class="create">
          <summary>Add a webhook</summary>
          <SubmitForm
            submit={async () => {
              const r = await api<CreatedWebhook>('POST', `/api/v1/agents/${agent.id}/webhooks`, { name: name.trim(), template, session_id: session || null });
              setMade(r);
              setName('');
              list.reload();
            }}
          >
            <TextField label="Name" value={name} onInput={setName} />
            <TextField label="Template ({{ path }} takes the body's value there)" value={template} onInput={setTemplate} rows={3} />
            <TextField label="Try it with a sample body (JSON)" value={sample} onInput={setSample} rows={6} optional />
            <div class="template-try" aria-live="polite" data-template-result>
              {'prompt' in tried ? (
                <><span class="muted">The prompt would be:</span><pre>{tried.prompt}</pre></>
              ) : (
                <p class="field-error">Refused ({tried.code}): {tried.error}</p>
              )}
            </div>
            <SessionChoice value={session} onChange={setSession} sessions={sessions} each="per delivery" />
            <div><button class="primary" type="submit">Add the webhook</button></div>
          </SubmitForm>
        </details>
      ) : null}
    </section>
  );
}

function Deliveries({ webhook, agentId }: { webhook: Webhook; agentId: string }) {
  const [open, setOpen] = useState(false);
  const list = useLoad(async () => (open ? api<{ deliveries: Delivery[] }>('GET', `/api/v1/webhooks/${webhook.id}/deliveries`) : null), [open, webhook.id]);
  return (
    <details onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Deliveries</summary>
      <ErrorLine error={list.error} />
      {list.data?.deliveries.length ? (
        <table>
          <thead><tr><th scope="col">Received</th><th scope="col">Status</th><th scope="col">Outcome</th><th scope="col">Session</th></tr></thead>
          <tbody>
            {list.data.deliveries.map((d) => (
              <tr data-outcome={d.outcome}>
                <td>{when(d.received_at)}</td>
                <td>{d.status}</td>
                <td>{d.outcome === 'accepted' ? <Badge tone="ok">accepted</Badge> : <Badge tone="danger">refused</Badge>} {d.code ? <code>{d.code}</code> : null} {d.reason ?? ''}</td>
                <td>{d.session_id ? <Link href={`/agents/${agentId}/sessions/${d.session_id}`}>{d.session_id.slice(0, 8)}</Link> : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : list.data ? <p class="muted">No deliveries yet.</p> : null}
    </details>
  );
}

function PromptLinks({ agent, admin }: { agent: Agent; admin: boolean }) {
  const out = useLoad(() => api<PromptTargets>('GET', `/api/v1/agents/${agent.id}/prompt-targets`), [agent.id]);
  const incoming = useLoad(async () => (admin ? api<IncomingLinks>('GET', `/api/v1/agents/${agent.id}/prompted-by`) : null), [agent.id, admin]);
  const all = useLoad(async () => (admin ? api<{ agents: Agent[] }>('GET', '/api/v1/agents') : null), [admin]);
  const [target, setTarget] = useState('');
  const candidates = (all.data?.agents ?? []).filter((x) => x.id !== agent.id && atLeast(roleIn(x.workspace_id), 'admin') && !out.data?.targets.some((t) => t.agent_id === x.id));
  return (
    <section class="card" aria-labelledby="links-h">
      <h2 id="links-h">Agents prompting agents</h2>
      <h3>{agent.name} may prompt</h3>
      <ErrorLine error={out.error} />
      {out.data?.targets.length ? (
        <ul>
          {out.data.targets.map((t) => (
            <li data-target={t.name}>
              <Link href={`/agents/${t.agent_id}`}>{t.name}</Link> <span class="muted">({t.harness}, since {when(t.created_at)})</span>{' '}
              {admin ? <Action run={async () => { await api('DELETE', `/api/v1/agents/${agent.id}/prompt-targets/${t.agent_id}`); out.reload(); }}>Remove</Action> : null}
            </li>
          ))}
        </ul>
      ) : out.data ? <p class="muted">No agents.</p> : null}
      {out.data ? <p class="muted">Chains of agents prompting agents stop at depth {out.data.max_chain_depth}.</p> : null}
      {admin && candidates.length ? (
        <SubmitForm submit={async () => { await api('PUT', `/api/v1/agents/${agent.id}/prompt-targets/${target}`); setTarget(''); out.reload(); }}>
          <label>Let it prompt
            <select required value={target} onChange={(e) => setTarget(e.currentTarget.value)}>
              <option value="">choose an agent…</option>
              {candidates.map((c) => <option value={c.id}>{c.name}</option>)}
            </select>
          </label>
          <div><button type="submit">Add</button></div>
        </SubmitForm>
      ) : null}
      {admin ? (
        <>
          <h3>May prompt {agent.name}</h3>
          <ErrorLine error={incoming.error} />
          {incoming.data?.links.length ? (
            <ul>
              {incoming.data.links.map((l) => (
                <li data-source={l.name}>
                  <Link href={`/agents/${l.agent_id}`}>{l.name}</Link> {l.holds ? null : <Badge tone="warn">does not hold: its maker is no longer an admin of both</Badge>}{' '}
                  <Action run={async () => { await api('DELETE', `/api/v1/agents/${agent.id}/prompted-by/${l.agent_id}`); incoming.reload(); }}>Remove</Action>
                </li>
              ))}
            </ul>
          ) : incoming.data ? <p class="muted">No agents.</p> : null}
        </>
      ) : null}
    </section>
  );
}
