// Usage shown: totals (tokens in, cached, out, cost by currency) and a small SVG chart of an
// agent's turns over time (tokens as bars, cost as a line), with the numbers in a table for
// screen readers. The agent's figures are summed in the page from its sessions' turn_end events
// (src/usage.ts) until the server offers them (docs/ui.md, "What the UI needs from the server").
import { api } from './api';
import type { StoredEvent } from './reducer';
import { compact, money, totals, turnsOf, type TurnUsage, type UsageTotals } from './usage';

/** Reads the turns of an agent's newest `maxSessions` sessions (every event, paged). */
export async function loadAgentUsage(sessions: string[], maxSessions = 20, maxEvents = 20_000): Promise<{ turns: TurnUsage[]; sessionsRead: number; capped: boolean }> {
  const newest = [...sessions].reverse().slice(0, maxSessions);
  let budget = maxEvents;
  let capped = newest.length < sessions.length;
  const perSession = await Promise.all(
    newest.map(async (id) => {
      const events: StoredEvent[] = [];
      let after = 0;
      for (;;) {
        if (budget <= 0) {
          capped = true;
          break;
        }
        const page = await api<{ events: StoredEvent[]; next_after: number }>('GET', `/api/v1/sessions/${id}/events?after=${after}&limit=1000`);
        budget -= page.events.length;
        // Only what usage needs: prompts, usage updates, turn ends.
        for (const e of page.events) if (e.type === 'prompt' || e.type === 'turn_end' || (e.type === 'update' && e.payload?.sessionUpdate === 'usage_update')) events.push(e);
        if (page.events.length < 1000 || page.next_after <= after) break;
        after = page.next_after;
      }
      return turnsOf(events);
    }),
  );
  const turns = perSession.flat().sort((a, b) => ((a.at ?? '') < (b.at ?? '') ? -1 : 1));
  return { turns, sessionsRead: newest.length, capped };
}

export function UsageTotalsLine({ t }: { t: UsageTotals }) {
  const costs = Object.entries(t.cost);
  return (
    <span class="usage-totals" data-usage-totals>
      {t.turns} turn{t.turns === 1 ? '' : 's'} · {compact(t.input)} in{t.cachedRead ? ` (${compact(t.cachedRead)} cached)` : ''} · {compact(t.output)} out
      {t.thought ? ` · ${compact(t.thought)} thinking` : ''}
      {costs.length ? ` · ${costs.map(([c, a]) => money(a, c)).join(' + ')}` : ''}
    </span>
  );
}

/** Bars of each turn's tokens (the newest `max`), a line of its cost when reported. */
export function UsageChart({ turns, max = 60 }: { turns: TurnUsage[]; max?: number }) {
  const shown = turns.slice(-max);
  if (!shown.length) return null;
  const W = 600;
  const H = 120;
  const pad = 4;
  const tokens = shown.map((u) => u.total ?? (u.input ?? 0) + (u.output ?? 0));
  const top = Math.max(1, ...tokens);
  const costs = shown.map((u) => u.cost);
  const topCost = Math.max(0, ...costs.map((c) => c ?? 0));
  const bw = (W - pad * 2) / shown.length;
  const y = (v: number) => H - pad - (v / top) * (H - pad * 2);
  const yc = (v: number) => H - pad - (v / (topCost || 1)) * (H - pad * 2);
  const line = topCost
    ? costs.map((c, i) => (c === null ? null : `${pad + bw * i + bw / 2},${yc(c)}`)).filter(Boolean).join(' ')
    : '';
  const t = totals(shown);
  const currency = Object.keys(t.cost)[0];
  const label = `The last ${shown.length} turns: up to ${compact(top)} tokens a turn${topCost && currency ? `, up to ${money(topCost, currency)} a turn` : ''}.`;
  return (
    <figure class="usage-chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label} preserveAspectRatio="none">
        <line x1={pad} x2={W - pad} y1={H - pad} y2={H - pad} class="axis" />
        {shown.map((u, i) => (
          <rect x={pad + bw * i + 1} y={y(tokens[i])} width={Math.max(1, bw - 2)} height={H - pad - y(tokens[i])} class="bar">
            <title>{`${u.at ? new Date(u.at).toLocaleString() : ''}: ${compact(tokens[i])} tokens${u.cost !== null && u.currency ? `, ${money(u.cost, u.currency)}` : ''}`}</title>
          </rect>
        ))}
        {line ? <polyline points={line} class="cost" fill="none" /> : null}
      </svg>
      <figcaption class="muted">
        Tokens per turn (bars){line ? ', cost per turn (line)' : ''}, oldest left. <span class="sr-only">{label}</span>
      </figcaption>
      <details>
        <summary>As a table</summary>
        <table>
          <thead><tr><th scope="col">Ended</th><th scope="col">In</th><th scope="col">Cached</th><th scope="col">Out</th><th scope="col">Cost</th></tr></thead>
          <tbody>
            {shown.map((u) => (
              <tr>
                <td>{u.at ? new Date(u.at).toLocaleString() : '—'}</td>
                <td>{u.input ?? '—'}</td>
                <td>{u.cachedRead ?? '—'}</td>
                <td>{u.output ?? '—'}</td>
                <td>{u.cost !== null && u.currency ? money(u.cost, u.currency) : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}
