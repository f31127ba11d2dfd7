// Usage normalised across the real harnesses' sessions (test/fixtures: stored by the server from
// real runs) and the fake harness's shape; per-turn costs from the running totals; sums.
import { describe, expect, it } from 'vitest';
import claudeCode from './fixtures/claude-code.json';
import codex from './fixtures/codex.json';
import opencode from './fixtures/opencode.json';
import { byDay, compact, money, normaliseUsage, totals, turnsOf, usageLine } from '../src/usage';

describe('turn usage, normalised', () => {
  it('Claude Code: tokens with cache counts, and each turn’s own cost out of the running total', () => {
    const turns = turnsOf(claudeCode.events as any);
    expect(turns).toHaveLength(5);
    expect(turns[0]).toMatchObject({ input: 5151, output: 10, cachedRead: 0, cachedWrite: 0, total: 5161, cost: 0.020814, currency: 'USD' });
    // 0.0437339 - 0.0208139: the second turn's own cost, not the session's total
    expect(turns[1].cost).toBeCloseTo(0.02292, 5);
    const sum = totals(turns);
    expect(sum.turns).toBe(5);
    expect(sum.cost.USD).toBeCloseTo(0.1270739, 5);
    expect(sum.input).toBe(5151 + 2664 + 2713 + 2783 + 5787);
  });

  it('Codex: thought tokens, no cost reported (null, not 0)', () => {
    const turns = turnsOf(codex.events as any);
    expect(turns[0]).toMatchObject({ input: 35644, output: 10, thought: 0, cachedRead: 0, cost: null, currency: null });
    expect(totals(turns).cost).toEqual({});
  });

  it('OpenCode: tokens without cache fields (null), cost from its updates', () => {
    const turns = turnsOf(opencode.events as any);
    expect(turns[0]).toMatchObject({ input: 122, output: 5, total: 127, cachedRead: null, thought: null, cost: 0.000609 });
    expect(turns[4].cost).toBeCloseTo(0.008010 - 0.004335, 6);
  });

  it('the fake harness and snake_case spellings; a missing total is input + output', () => {
    expect(normaliseUsage({ inputTokens: 3, outputTokens: 4 })).toMatchObject({ input: 3, output: 4, total: 7, cachedRead: null });
    expect(normaliseUsage({ input_tokens: 12480, input_tokens_cached: 9600, output_tokens: 1322 })).toMatchObject({ input: 12480, cachedRead: 9600, output: 1322, total: 13802 });
    expect(normaliseUsage(null)).toMatchObject({ input: null, output: null, total: null });
  });

  it('a tail loaded mid-session (no prompt seen) does not invent a cost', () => {
    const turns = turnsOf([
      { type: 'update', payload: { sessionUpdate: 'usage_update', cost: { amount: 1.5, currency: 'USD' } } },
      { type: 'turn_end', payload: { turn_id: 't', usage: { inputTokens: 1, outputTokens: 1 } } },
    ]);
    expect(turns[0].cost).toBeNull();
  });
});

describe('reading it', () => {
  it('one line per turn', () => {
    expect(usageLine({ input: 12480, output: 1322, cachedRead: 9600, cachedWrite: null, thought: null, cost: 0.0208, currency: 'USD' })).toBe('12k in (9.6k cached) · 1.3k out · $0.0208');
    expect(usageLine({ input: 5, output: 2, cachedRead: 0, cachedWrite: 0, thought: 0, cost: null, currency: null })).toBe('5 in · 2 out');
  });
  it('compact numbers and money', () => {
    expect(compact(950)).toBe('950');
    expect(compact(5161)).toBe('5.2k');
    expect(compact(2_500_000)).toBe('2.5M');
    expect(money(1.2, 'EUR')).toBe('€1.20');
  });
  it('buckets by day for the chart, oldest first', () => {
    const turns = turnsOf(claudeCode.events as any);
    const days = byDay(turns);
    expect(days.length).toBeGreaterThan(0);
    expect(days.reduce((s, d) => s + d.tokens, 0)).toBe(totals(turns).total);
  });
});
