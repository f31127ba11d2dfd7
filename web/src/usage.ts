// What a turn used, as the server reads it alike for every harness: each `turn_end` carries
// `tokens` ({input, output, cached_read, cached_write, thought, total}, each present when the
// harness said) and `session_cost` ({amount, currency}: what the session had cost so far, as the
// harness last reported it) — core/src/events/usage.rs. An agent's totals, by day and by session,
// come from `GET /api/v1/agents/{id}/usage` (usage-view.tsx). This module only reads those
// fields, sums a session's turns for its header, and formats; events stored before the server
// read usage (no `tokens`) fall back to the harness's own `usage` object.
// Plain TypeScript, unit-tested (test/usage.test.ts).
import type { Schemas } from './types';

/** The agent's usage over a window (`GET /api/v1/agents/{id}/usage`). */
export type AgentUsage = Schemas['AgentUsage'];
export type Totals = Schemas['Totals'];

/** One turn's usage. `null` where the harness reported nothing. */
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
  /** What the session had cost when this turn ended, as the harness reported it. */
  sessionCost: { amount: number; currency: string } | null;
}

/** A session's turns summed (its header line). */
export interface SessionTotals {
  turns: number;
  input: number;
  output: number;
  cachedRead: number;
  thought: number;
  /** The session's cost so far, as last reported. */
  cost: { amount: number; currency: string } | null;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

type Counts = Pick<TurnUsage, 'input' | 'output' | 'cachedRead' | 'cachedWrite' | 'thought' | 'total'>;

/** The server's `tokens` of a `turn_end`. */
function fromTokens(t: Record<string, unknown>): Counts {
  return { input: num(t.input), output: num(t.output), cachedRead: num(t.cached_read), cachedWrite: num(t.cached_write), thought: num(t.thought), total: num(t.total) };
}

/** Events stored before the server read usage: the ACP `usage` object as the harness sent it. */
function fromHarnessUsage(raw: unknown): Counts {
  const u = raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  return { input: num(u.inputTokens), output: num(u.outputTokens), cachedRead: num(u.cachedReadTokens), cachedWrite: num(u.cachedWriteTokens), thought: num(u.thoughtTokens), total: num(u.totalTokens) };
}

/** One `turn_end`'s usage. */
export function turnUsage(payload: any, at: string | null = null): TurnUsage {
  const p = payload && typeof payload === 'object' ? payload : {};
  const counts = p.tokens && typeof p.tokens === 'object' ? fromTokens(p.tokens) : fromHarnessUsage(p.usage);
  const amount = num(p.session_cost?.amount);
  const currency = typeof p.session_cost?.currency === 'string' ? p.session_cost.currency : null;
  return {
    turnId: typeof p.turn_id === 'string' ? p.turn_id : null,
    at,
    durationMs: num(p.duration_ms),
    ...counts,
    sessionCost: amount !== null && currency ? { amount, currency } : null,
  };
}

/** Follows a session's events and keeps each turn's usage, in order. */
export class UsageTracker {
  readonly turns: TurnUsage[] = [];

  /** Takes one event; returns the turn's usage when the event ends a turn. */
  apply(e: { type: string; payload: any; created_at?: string }): TurnUsage | null {
    if (e.type !== 'turn_end') return null;
    const turn = turnUsage(e.payload, e.created_at ?? null);
    this.turns.push(turn);
    return turn;
  }
}

/** Each turn's usage in a session's events (in order). */
export function turnsOf(events: { type: string; payload: any; created_at?: string }[]): TurnUsage[] {
  const t = new UsageTracker();
  for (const e of events) t.apply(e);
  return t.turns;
}

/** A session's turns summed; its cost is the last one reported. */
export function sessionTotals(turns: TurnUsage[]): SessionTotals {
  const t: SessionTotals = { turns: 0, input: 0, output: 0, cachedRead: 0, thought: 0, cost: null };
  for (const u of turns) {
    t.turns += 1;
    t.input += u.input ?? 0;
    t.output += u.output ?? 0;
    t.cachedRead += u.cachedRead ?? 0;
    t.thought += u.thought ?? 0;
    if (u.sessionCost) t.cost = u.sessionCost;
  }
  return t;
}

/** The server's totals in the shape the header line reads. */
export function fromServerTotals(t: Totals): { turns: number; input: number; output: number; cachedRead: number; thought: number; costs: [string, number][] } {
  return { turns: t.turns, input: t.input_tokens, output: t.output_tokens, cachedRead: t.cached_read_tokens, thought: t.thought_tokens, costs: Object.entries(t.cost) };
}

/** Tokens of a day or a session, for the chart. */
export const tokensOf = (t: Totals) => t.input_tokens + t.output_tokens;

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

/** One line for a turn: "5.2k in (4.8k cached) · 10 out · session so far $0.0208". */
export function usageLine(u: Pick<TurnUsage, 'input' | 'output' | 'cachedRead' | 'cachedWrite' | 'thought' | 'sessionCost'>): string {
  const parts: string[] = [];
  if (u.input !== null) parts.push(`${compact(u.input)} in${u.cachedRead ? ` (${compact(u.cachedRead)} cached)` : ''}`);
  if (u.output !== null) parts.push(`${compact(u.output)} out`);
  if (u.thought) parts.push(`${compact(u.thought)} thinking`);
  if (u.cachedWrite) parts.push(`${compact(u.cachedWrite)} cache writes`);
  if (u.sessionCost) parts.push(`session so far ${money(u.sessionCost.amount, u.sessionCost.currency)}`);
  return parts.join(' · ');
}
