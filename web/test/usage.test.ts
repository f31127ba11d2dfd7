// A turn's usage as the server reads it (`turn_end.tokens`, `session_cost`), the fallback for
// events stored before it did (the real harnesses' sessions in test/fixtures carry only their own
// `usage`), a session's sums, the server's totals read for display, and formatting.
import { describe, expect, it } from 'vitest';
import claudeCode from './fixtures/claude-code.json';
import codex from './fixtures/codex.json';
import opencode from './fixtures/opencode.json';
import { compact, fromServerTotals, money, sessionTotals, tokensOf, turnUsage, turnsOf, usageLine } from '../src/usage';

describe('turn usage', () => {
  it('reads the server’s tokens and the session’s cost so far', () => {
    const u = turnUsage({ turn_id: 't1', duration_ms: 900, tokens: { input: 5151, output: 10, cached_read: 4800, cached_write: 0, total: 5161 }, session_cost: { amount: 0.0208, currency: 'USD' }, usage: { inputTokens: 1 } }, '2026-12-06T10:00:00Z');
    expect(u).toMatchObject({ turnId: 't1', durationMs: 900, input: 5151, output: 10, cachedRead: 4800, cachedWrite: 0, thought: null, total: 5161, sessionCost: { amount: 0.0208, currency: 'USD' } });
  });

  it('tokens win over the harness’s own usage; a field the harness did not give stays null', () => {
    expect(turnUsage({ tokens: { input: 3 }, usage: { inputTokens: 99, outputTokens: 4 } })).toMatchObject({ input: 3, output: null });
  });

  it('old events without tokens fall back to the harness’s usage (real Claude Code, Codex, OpenCode sessions)', () => {
    const cc = turnsOf(claudeCode.events as any);
    expect(cc).toHaveLength(5);
    expect(cc[0]).toMatchObject({ input: 5151, output: 10, cachedRead: 0, cachedWrite: 0, total: 5161, sessionCost: null });
    expect(turnsOf(codex.events as any)[0]).toMatchObject({ input: 35644, output: 10, thought: 0 });
    expect(turnsOf(opencode.events as any)[0]).toMatchObject({ input: 122, output: 5, total: 127, cachedRead: null });
  });

  it('nothing usable: nulls, never a throw', () => {
    for (const p of [null, undefined, 'x', { tokens: 'no' }, { tokens: { input: 'many' } }, { session_cost: { amount: 'x' } }]) {
      const u = turnUsage(p);
      expect(u.input).toBeNull();
      expect(u.sessionCost).toBeNull();
    }
  });

  it('a session’s sums; its cost is the last reported', () => {
    const turns = turnsOf([
      { type: 'prompt', payload: {} },
      { type: 'turn_end', payload: { tokens: { input: 10, output: 2, cached_read: 5 }, session_cost: { amount: 0.01, currency: 'USD' } } },
      { type: 'turn_end', payload: { tokens: { input: 7, output: 3, thought: 1 }, session_cost: { amount: 0.025, currency: 'USD' } } },
      { type: 'turn_end', payload: { tokens: { input: 1 } } },
    ]);
    expect(sessionTotals(turns)).toEqual({ turns: 3, input: 18, output: 5, cachedRead: 5, thought: 1, cost: { amount: 0.025, currency: 'USD' } });
  });
});

describe('the server’s totals', () => {
  const t = { turns: 3, input_tokens: 157, output_tokens: 28, cached_read_tokens: 9, cached_write_tokens: 0, thought_tokens: 0, cost: { USD: 0.025 } };
  it('reads them for the totals line and the chart', () => {
    expect(fromServerTotals(t)).toEqual({ turns: 3, input: 157, output: 28, cachedRead: 9, thought: 0, costs: [['USD', 0.025]] });
    expect(tokensOf(t)).toBe(185);
  });
});

describe('reading it', () => {
  it('one line per turn', () => {
    expect(usageLine({ input: 12480, output: 1322, cachedRead: 9600, cachedWrite: null, thought: null, sessionCost: { amount: 0.0208, currency: 'USD' } })).toBe('12k in (9.6k cached) · 1.3k out · session so far $0.0208');
    expect(usageLine({ input: 5, output: 2, cachedRead: 0, cachedWrite: 0, thought: 0, sessionCost: null })).toBe('5 in · 2 out');
  });
  it('compact numbers and money', () => {
    expect(compact(950)).toBe('950');
    expect(compact(5161)).toBe('5.2k');
    expect(compact(2_500_000)).toBe('2.5M');
    expect(money(1.2, 'EUR')).toBe('€1.20');
  });
});
