// What a turn cost, the same way for every harness. The server stores each harness's own answer:
// `turn_end.usage` is the ACP prompt response's `usage` as the harness sent it (Claude Code and
// Codex: inputTokens, outputTokens, totalTokens, cachedReadTokens, cachedWriteTokens, Codex also
// thoughtTokens; OpenCode: inputTokens, outputTokens, totalTokens; the fake harness the first
// three), and money comes only in `usage_update` session updates as the session's running total
// (`cost: {amount, currency}`: Claude Code and OpenCode; Codex reports none). This module turns
// those into one shape per turn — input, output, cached, thought tokens and the turn's own cost
// (the running total's growth over the turn) — and sums them per session and per agent.
// Plain TypeScript, unit-tested (test/usage.test.ts).

/** One turn's usage, normalised. `null` where the harness reported nothing. */
export interface TurnUsage {
  turnId: string | null;
  /** When the turn ended (the `turn_end` event's time). */
  at: string | null;
  durationMs: number | null;
  /** Input tokens as the harness counts them (Claude Code and Codex: cached reads included). */
  input: number | null;
  output: number | null;
  /** Input tokens read from the provider's prompt cache. */
  cachedRead: number | null;
  /** Input tokens written to the cache. */
  cachedWrite: number | null;
  /** Reasoning tokens, when reported apart (Codex). */
  thought: number | null;
  total: number | null;
  /** What this turn cost: the session's reported running cost at its end minus at its start. */
  cost: number | null;
  currency: string | null;
}

export interface UsageTotals {
  turns: number;
  input: number;
  output: number;
  cachedRead: number;
  cachedWrite: number;
  thought: number;
  total: number;
  /** By currency (a session reports one; an agent's harness may change). */
  cost: Record<string, number>;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** Reads a harness's usage object, whatever its spelling (ACP camelCase, or snake_case). */
export function normaliseUsage(raw: unknown): Omit<TurnUsage, 'turnId' | 'at' | 'durationMs' | 'cost' | 'currency'> {
  const u = raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const pick = (...names: string[]) => {
    for (const n of names) {
      const v = num(u[n]);
      if (v !== null) return v;
    }
    return null;
  };
  const input = pick('inputTokens', 'input_tokens');
  const output = pick('outputTokens', 'output_tokens');
  let total = pick('totalTokens', 'total_tokens');
  if (total === null && input !== null && output !== null) total = input + output;
  return {
    input,
    output,
    cachedRead: pick('cachedReadTokens', 'cached_read_tokens', 'cacheReadInputTokens', 'cache_read_input_tokens', 'input_tokens_cached'),
    cachedWrite: pick('cachedWriteTokens', 'cached_write_tokens', 'cacheCreationInputTokens', 'cache_creation_input_tokens'),
    thought: pick('thoughtTokens', 'thought_tokens', 'reasoningTokens', 'reasoning_output_tokens'),
    total,
  };
}

/** The session's running cost in a `usage_update` (`{amount, currency}`), if it carries one. */
export function reportedCost(update: unknown): { amount: number; currency: string } | null {
  const c = (update as { cost?: { amount?: unknown; currency?: unknown } } | null)?.cost;
  const amount = num(c?.amount);
  if (amount === null) return null;
  return { amount, currency: typeof c?.currency === 'string' ? c.currency : 'USD' };
}

interface LogEvent {
  type: string;
  payload: any;
  created_at?: string;
}

/**
 * Follows a session's events in order and yields each turn's usage at its `turn_end`. Costs are
 * differences of the running total, so a turn whose harness reported no cost has `cost: null`,
 * and the first turn of a loaded tail that started mid-session counts from the last total seen.
 */
export class UsageTracker {
  private lastCost: { amount: number; currency: string } | null = null;
  private costAtTurnStart: number | null = null;
  readonly turns: TurnUsage[] = [];

  /** Takes one event; returns the turn's usage when the event ends a turn. */
  apply(e: LogEvent): TurnUsage | null {
    if (e.type === 'prompt') {
      this.costAtTurnStart = this.lastCost?.amount ?? 0;
      return null;
    }
    if (e.type === 'update' && e.payload?.sessionUpdate === 'usage_update') {
      const c = reportedCost(e.payload);
      if (c) this.lastCost = c;
      return null;
    }
    if (e.type !== 'turn_end') return null;
    const p = e.payload ?? {};
    const start = this.costAtTurnStart;
    const cost = this.lastCost && start !== null && this.lastCost.amount >= start ? this.lastCost.amount - start : null;
    const turn: TurnUsage = {
      turnId: typeof p.turn_id === 'string' ? p.turn_id : null,
      at: e.created_at ?? null,
      durationMs: num(p.duration_ms),
      ...normaliseUsage(p.usage),
      cost: cost !== null && cost > 0 ? roundMoney(cost) : cost === 0 && this.lastCost ? 0 : null,
      currency: this.lastCost?.currency ?? null,
    };
    // The next turn's cost counts from here even if its prompt came before this update arrived.
    this.costAtTurnStart = this.lastCost?.amount ?? null;
    this.turns.push(turn);
    return turn;
  }
}

/** Each turn's usage in a session's events (in order). */
export function turnsOf(events: LogEvent[]): TurnUsage[] {
  const t = new UsageTracker();
  for (const e of events) t.apply(e);
  return t.turns;
}

export function emptyTotals(): UsageTotals {
  return { turns: 0, input: 0, output: 0, cachedRead: 0, cachedWrite: 0, thought: 0, total: 0, cost: {} };
}

/** Sums turns (a session's, or every session's of an agent). */
export function totals(turns: TurnUsage[]): UsageTotals {
  const t = emptyTotals();
  for (const u of turns) {
    t.turns += 1;
    t.input += u.input ?? 0;
    t.output += u.output ?? 0;
    t.cachedRead += u.cachedRead ?? 0;
    t.cachedWrite += u.cachedWrite ?? 0;
    t.thought += u.thought ?? 0;
    t.total += u.total ?? (u.input ?? 0) + (u.output ?? 0);
    if (u.cost !== null && u.currency) t.cost[u.currency] = roundMoney((t.cost[u.currency] ?? 0) + u.cost);
  }
  return t;
}

/** Buckets turns by day (UTC date of their end) for a chart: oldest first. */
export function byDay(turns: TurnUsage[]): { day: string; tokens: number; cost: number }[] {
  const days = new Map<string, { tokens: number; cost: number }>();
  for (const u of turns) {
    if (!u.at) continue;
    const day = u.at.slice(0, 10);
    const d = days.get(day) ?? { tokens: 0, cost: 0 };
    d.tokens += u.total ?? (u.input ?? 0) + (u.output ?? 0);
    d.cost += u.cost ?? 0;
    days.set(day, d);
  }
  return [...days.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([day, d]) => ({ day, tokens: d.tokens, cost: roundMoney(d.cost) }));
}

const roundMoney = (x: number) => Math.round(x * 1e6) / 1e6;

/** 12,480 → "12.5k"; 950 → "950". */
export function compact(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  return String(n);
}

/** A cost in its currency: "$0.0437", "€1.20". */
export function money(amount: number, currency: string): string {
  const digits = amount < 1 && amount > 0 ? 4 : 2;
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency, minimumFractionDigits: digits, maximumFractionDigits: digits }).format(amount);
  } catch {
    return `${amount.toFixed(digits)} ${currency}`;
  }
}

/** One line for a turn: "5.2k in (4.8k cached) · 10 out · $0.0208". */
export function usageLine(u: Pick<TurnUsage, 'input' | 'output' | 'cachedRead' | 'cachedWrite' | 'thought' | 'cost' | 'currency'>): string {
  const parts: string[] = [];
  if (u.input !== null) parts.push(`${compact(u.input)} in${u.cachedRead ? ` (${compact(u.cachedRead)} cached)` : ''}`);
  if (u.output !== null) parts.push(`${compact(u.output)} out`);
  if (u.thought) parts.push(`${compact(u.thought)} thinking`);
  if (u.cachedWrite) parts.push(`${compact(u.cachedWrite)} cache writes`);
  if (u.cost !== null && u.currency) parts.push(money(u.cost, u.currency));
  return parts.join(' · ');
}
