// The cron preview: fields, names and aliases, Vixie's day rule, zones and their DST changes.
import { describe, expect, it } from 'vitest';
import { nextRuns, parseCron, preview } from '../src/cron';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number[]) => ms.map((t) => new Date(t).toISOString());
function runs(expr: string, zone: string, from: string, n = 3) {
  const p = parseCron(expr);
  if (!p.ok) throw new Error(p.error);
  return iso(nextRuns(p.spec, zone, at(from), n));
}

describe('cron expressions', () => {
  it('weekdays at nine in Berlin (CET, UTC+1 in December)', () => {
    // 2026-12-04 is a Friday
    expect(runs('0 9 * * 1-5', 'Europe/Berlin', '2026-12-04T10:00:00Z')).toEqual([
      '2026-12-07T08:00:00.000Z',
      '2026-12-08T08:00:00.000Z',
      '2026-12-09T08:00:00.000Z',
    ]);
  });
  it('steps, lists, names, six fields and aliases', () => {
    expect(runs('*/15 * * * *', 'UTC', '2026-12-05T02:07:00Z')).toEqual(['2026-12-05T02:15:00.000Z', '2026-12-05T02:30:00.000Z', '2026-12-05T02:45:00.000Z']);
    expect(runs('30 0 8 * * MON,FRI', 'UTC', '2026-12-05T00:00:00Z', 2)).toEqual(['2026-12-07T08:00:30.000Z', '2026-12-11T08:00:30.000Z']);
    expect(runs('@monthly', 'UTC', '2026-12-05T00:00:00Z', 2)).toEqual(['2027-01-01T00:00:00.000Z', '2027-02-01T00:00:00.000Z']);
    expect(runs('0 12 L * *', 'UTC', '2027-02-01T00:00:00Z', 1)).toEqual(['2027-02-28T12:00:00.000Z']);
    expect(runs('0 0 * JAN 7', 'UTC', '2026-12-05T00:00:00Z', 1)).toEqual(['2027-01-03T00:00:00.000Z']);
  });
  it('day of month and day of week both given: either matches', () => {
    // the 13th, or any Friday
    expect(runs('0 0 13 * FRI', 'UTC', '2026-12-05T00:00:00Z', 3)).toEqual(['2026-12-11T00:00:00.000Z', '2026-12-13T00:00:00.000Z', '2026-12-18T00:00:00.000Z']);
  });
  it('a wall time the clock skips runs after the gap; a repeated one runs once', () => {
    // Berlin springs forward at 02:00 → 03:00 on 2026-03-29
    expect(runs('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
    // and falls back 03:00 → 02:00 on 2026-10-25: 02:30 happens twice, runs once
    expect(runs('30 2 * * *', 'Europe/Berlin', '2026-10-24T12:00:00Z', 2)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
  });
  it('says what is wrong', () => {
    expect(parseCron('0 9 * *')).toMatchObject({ ok: false, error: expect.stringContaining('4 fields') });
    expect(parseCron('61 * * * *')).toMatchObject({ ok: false, error: expect.stringContaining('minute') });
    expect(parseCron('0 0 * * MON#2')).toMatchObject({ ok: false, unsupported: true });
    expect(preview('0 0 30 2 *', 'UTC', at('2026-12-05T00:00:00Z')).error).toBe('it is never due');
    expect(preview('0 0 * * *', 'Mars/Olympus', 0).error).toContain('unknown time zone');
    expect(preview('0 9 * * *', 'UTC', at('2026-12-05T00:00:00Z'), 2).runs).toHaveLength(2);
  });
});
