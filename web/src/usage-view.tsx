// Usage shown: a session's totals line (its turns summed, its cost as last reported), and an
// agent's usage from the server (`GET /api/v1/agents/{id}/usage?days=`, summed there alike for
// every harness): totals, a days selector, a small SVG chart of each UTC day (tokens as bars, cost
// as a line) with the numbers in a table for screen readers, and the sessions that used most.
import { useState } from 'preact/hooks';
import { api } from './api';
import { useLoad, ErrorLine, Link } from './ui';
import { compact, fromServerTotals, money, tokensOf, type AgentUsage, type SessionTotals, type Totals } from './usage';

export const USAGE_WINDOWS = [7, 30, 90] as const;

export const loadAgentUsage = (agentId: string, days: number) => api<AgentUsage>('GET', `/api/v1/agents/${agentId}/usage?days=${days}`);

export function SessionTotalsLine({ t }: { t: SessionTotals }) {
  return (
    <span class="usage-totals" data-usage-totals>
      {t.turns} turn{t.turns === 1 ? '' : 's'} · {compact(t.input)} in{t.cachedRead ? ` (${compact(t.cachedRead)} cached)` : ''} · {compact(t.output)} out
      {t.thought ? ` · ${compact(t.thought)} thinking` : ''}
      {t.cost ? ` · ${money(t.cost.amount, t.cost.currency)}` : ''}
    </span>
  );
}

/** The server's totals in a line; `part`: one session's (not the whole window's). */
export function TotalsLine({ totals, part }: { totals: Totals; part?: boolean }) {
  const t = fromServerTotals(totals);
  return (
    <span class="usage-totals" data-usage-totals={part ? undefined : true} data-usage-part={part ? true : undefined}>
      {t.turns} turn{t.turns === 1 ? '' : 's'} · {compact(t.input)} in{t.cachedRead ? ` (${compact(t.cachedRead)} cached)` : ''} · {compact(t.output)} out
      {t.thought ? ` · ${compact(t.thought)} thinking` : ''}
      {t.costs.length ? ` · ${t.costs.map(([c, a]) => money(a, c)).join(' + ')}` : ''}
    </span>
  );
}

/** Bars of each day's tokens, a line of its cost (the first currency) when any was reported. */
export function UsageChart({ days }: { days: AgentUsage['by_day'] }) {
  if (!days.length) return null;
  const W = 600;
  const H = 120;
  const pad = 4;
  const tokens = days.map(tokensOf);
  const top = Math.max(1, ...tokens);
  const currency = days.map((d) => Object.keys(d.cost)[0]).find(Boolean);
  const costs = days.map((d) => (currency ? (d.cost[currency] ?? 0) : 0));
  const topCost = Math.max(0, ...costs);
  const bw = (W - pad * 2) / days.length;
  const y = (v: number) => H - pad - (v / top) * (H - pad * 2);
  const yc = (v: number) => H - pad - (v / (topCost || 1)) * (H - pad * 2);
  const line = topCost ? costs.map((c, i) => `${pad + bw * i + bw / 2},${yc(c)}`).join(' ') : '';
  const label = `The last ${days.length} days: up to ${compact(top)} tokens a day${topCost && currency ? `, up to ${money(topCost, currency)} a day` : ''}.`;
  return (
    <figure class="usage-chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label} preserveAspectRatio="none">
        <line x1={pad} x2={W - pad} y1={H - pad} y2={H - pad} class="axis" />
        {days.map((d, i) => (
          <rect x={pad + bw * i + 1} y={y(tokens[i])} width={Math.max(1, bw - 2)} height={H - pad - y(tokens[i])} class={d.turns ? 'bar used' : 'bar'}>
            <title>{`${d.day}: ${d.turns} turns, ${compact(tokens[i])} tokens${currency && d.cost[currency] ? `, ${money(d.cost[currency], currency)}` : ''}`}</title>
          </rect>
        ))}
        {line ? <polyline points={line} class="cost" fill="none" /> : null}
      </svg>
      <figcaption class="muted">
        Tokens per UTC day (bars){line ? `, cost per day in ${currency} (line)` : ''}, oldest left. <span class="sr-only">{label}</span>
      </figcaption>
      <details>
        <summary>As a table</summary>
        <table>
          <thead><tr><th scope="col">Day (UTC)</th><th scope="col">Turns</th><th scope="col">In</th><th scope="col">Cached</th><th scope="col">Out</th><th scope="col">Cost</th></tr></thead>
          <tbody>
            {days.filter((d) => d.turns).map((d) => (
              <tr>
                <td>{d.day}</td>
                <td>{d.turns}</td>
                <td>{d.input_tokens}</td>
                <td>{d.cached_read_tokens}</td>
                <td>{d.output_tokens}</td>
                <td>{Object.entries(d.cost).map(([c, a]) => money(a, c)).join(' + ') || '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

/** An agent's usage over a chosen window, from the server. */
export function AgentUsagePanel({ agentId }: { agentId: string }) {
  const [days, setDays] = useState<number>(30);
  const usage = useLoad(() => loadAgentUsage(agentId, days), [agentId, days]);
  const u = usage.data;
  return (
    <section class="card" aria-labelledby="usage-h">
      <div class="title-row">
        <h2 id="usage-h">Usage</h2>
        <label>
          Over the last{' '}
          <select name="usage-days" value={String(days)} onChange={(e) => setDays(Number(e.currentTarget.value))}>
            {USAGE_WINDOWS.map((d) => <option value={String(d)}>{d} days</option>)}
          </select>
        </label>
      </div>
      <ErrorLine error={usage.error} />
      {!u ? <p class="muted">Loading…</p> : !u.totals.turns ? <p class="muted">No turns in the last {days} days.</p> : (
        <>
          <p><TotalsLine totals={u.totals} /></p>
          <UsageChart days={u.by_day} />
          {u.by_session.length ? (
            <details>
              <summary>By session ({u.by_session.length})</summary>
              <ul class="plain">
                {u.by_session.slice(0, 20).map((s) => (
                  <li><Link href={`/agents/${agentId}/sessions/${s.session_id}`}>Session {s.session_id.slice(0, 8)}</Link> · <TotalsLine totals={s} part /></li>
                ))}
              </ul>
            </details>
          ) : null}
        </>
      )}
    </section>
  );
}
