// A schedule's cron expression read in the page: its next runs in the schedule's time zone, so a
// person sees what "0 9 * * 1-5" means before saving. The server decides (croner, server/src/
// triggers/cron.rs): five fields (minute hour day-of-month month day-of-week) or six (seconds
// first), names (JAN, MON), `@daily` and friends, `L` (last day of the month); day-of-month and
// day-of-week both restricted means either matches (as Vixie cron). Extensions this preview does
// not follow (`W`, `#`, `L` in day-of-week) answer `{unsupported}`: the server still checks them.
// A wall time the zone skips (spring forward) runs at the first instant after the gap; a repeated
// one (fall back) runs once — as the server does. Plain TypeScript, unit-tested (test/cron.test.ts).

export interface CronSpec {
  seconds: Set<number>;
  minutes: Set<number>;
  hours: Set<number>;
  days: Set<number>;
  /** `L` in day-of-month: the month's last day. */
  lastDay: boolean;
  months: Set<number>;
  weekdays: Set<number>;
  domRestricted: boolean;
  dowRestricted: boolean;
}

export type CronParse = { ok: true; spec: CronSpec } | { ok: false; error: string; unsupported?: boolean };

const ALIASES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const DAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

class CronError extends Error {
  constructor(
    message: string,
    public unsupported = false,
  ) {
    super(message);
  }
}

function field(text: string, name: string, min: number, max: number, names?: string[]): Set<number> {
  const out = new Set<number>();
  const value = (s: string) => {
    const up = s.toUpperCase();
    const named = names?.indexOf(up) ?? -1;
    if (named >= 0) return named + (names === MONTHS ? 1 : 0);
    if (!/^\d+$/.test(s)) throw new CronError(`${name}: "${s}" is not a number${names ? ' or a name' : ''}`);
    return Number(s);
  };
  for (const part of text.split(',')) {
    if (/[W#]/i.test(part) || (name === 'day of week' && /L/i.test(part)))
      throw new CronError(`${name}: "${part}" is a croner extension the preview does not follow; the server checks it`, true);
    const [range, stepText] = part.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1) throw new CronError(`${name}: step "${stepText}" must be a whole number from 1`);
    let lo: number;
    let hi: number;
    if (range === '*' || range === '?') {
      lo = min;
      hi = max;
    } else if (range.includes('-')) {
      const [a, b] = range.split('-');
      lo = value(a);
      hi = value(b);
    } else {
      lo = value(range);
      hi = stepText === undefined ? lo : max;
    }
    if (lo < min || hi > max || lo > hi) throw new CronError(`${name}: "${part}" is outside ${min}–${max}`);
    // Day of week 7 is Sunday, as 0.
    for (let v = lo; v <= hi; v += step) out.add(name === 'day of week' && v === 7 ? 0 : v);
  }
  return out;
}

/** Parses an expression (the server has the last word). */
export function parseCron(expression: string): CronParse {
  try {
    let text = expression.trim();
    text = ALIASES[text.toLowerCase()] ?? text;
    if (text.startsWith('@')) throw new CronError(`"${text}" is not one of ${Object.keys(ALIASES).join(', ')}`);
    const parts = text.split(/\s+/).filter(Boolean);
    if (parts.length !== 5 && parts.length !== 6)
      throw new CronError(`${parts.length} fields: give five (minute hour day-of-month month day-of-week) or six (seconds first)`);
    const [sec, min, hour, dom, month, dow] = parts.length === 6 ? parts : ['0', ...parts];
    const lastDay = /^L$/i.test(dom);
    return {
      ok: true,
      spec: {
        seconds: field(sec, 'seconds', 0, 59),
        minutes: field(min, 'minute', 0, 59),
        hours: field(hour, 'hour', 0, 23),
        days: lastDay ? new Set() : field(dom, 'day of month', 1, 31),
        lastDay,
        months: field(month, 'month', 1, 12, MONTHS),
        weekdays: field(dow, 'day of week', 0, 7, DAYS),
        domRestricted: dom !== '*' && dom !== '?',
        dowRestricted: dow !== '*' && dow !== '?',
      },
    };
  } catch (e) {
    if (e instanceof CronError) return { ok: false, error: e.message, unsupported: e.unsupported };
    throw e;
  }
}

/** The zone's wall-clock fields at an instant. */
function wall(at: number, zone: string) {
  const parts = formatter(zone).formatToParts(new Date(at));
  const get = (t: string) => Number(parts.find((p) => p.type === t)?.value);
  return { y: get('year'), mo: get('month'), d: get('day'), h: get('hour') % 24, mi: get('minute'), s: get('second') };
}
const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(zone: string) {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    formatters.set(zone, f);
  }
  return f;
}

/** Whether `zone` is an IANA zone this browser knows. */
export function validZone(zone: string): boolean {
  try {
    formatter(zone);
    return true;
  } catch {
    return false;
  }
}

/** The UTC offset (ms) of `zone` at an instant. */
function offset(at: number, zone: string): number {
  const w = wall(at, zone);
  return Date.UTC(w.y, w.mo - 1, w.d, w.h, w.mi, w.s) - Math.floor(at / 1000) * 1000;
}

/**
 * The instant a wall time in `zone` names: the earlier of two when the clock repeats it; when
 * the clock skips it, the first instant after the gap.
 */
function instant(y: number, mo: number, d: number, h: number, mi: number, s: number, zone: string): number {
  const naive = Date.UTC(y, mo - 1, d, h, mi, s);
  const candidates = [naive - offset(naive - 86_400_000, zone), naive - offset(naive + 86_400_000, zone)].sort((a, b) => a - b);
  for (const c of candidates) {
    const w = wall(c, zone);
    if (w.y === y && w.mo === mo && w.d === d && w.h === h && w.mi === mi && w.s === s) return c;
  }
  // Skipped: the gap's end, the first instant with the later offset.
  const after = offset(naive + 86_400_000, zone);
  let lo = candidates[0];
  let hi = candidates[1];
  while (hi - lo > 1000) {
    const mid = Math.floor((lo + hi) / 2000) * 1000;
    if (offset(mid, zone) === after) hi = mid;
    else lo = mid;
  }
  return hi;
}

const daysIn = (y: number, mo: number) => new Date(Date.UTC(y, mo, 0)).getUTCDate();

function dayMatches(spec: CronSpec, y: number, mo: number, d: number): boolean {
  if (!spec.months.has(mo)) return false;
  const domOk = spec.lastDay ? d === daysIn(y, mo) : spec.days.has(d);
  const dowOk = spec.weekdays.has(new Date(Date.UTC(y, mo - 1, d)).getUTCDay());
  if ((spec.domRestricted || spec.lastDay) && spec.dowRestricted) return domOk || dowOk;
  if (spec.domRestricted || spec.lastDay) return domOk;
  return dowOk;
}

/** The next `count` times (epoch ms) strictly after `from`, looking at most ~5 years ahead. */
export function nextRuns(spec: CronSpec, zone: string, from: number, count: number): number[] {
  const out: number[] = [];
  const sorted = (s: Set<number>) => [...s].sort((a, b) => a - b);
  const [secs, mins, hours] = [sorted(spec.seconds), sorted(spec.minutes), sorted(spec.hours)];
  const start = wall(from, zone);
  let y = start.y;
  let mo = start.mo;
  let d = start.d;
  for (let day = 0; day < 366 * 5 && out.length < count; day++) {
    if (dayMatches(spec, y, mo, d)) {
      for (const h of hours)
        for (const mi of mins)
          for (const s of secs) {
            if (out.length >= count) break;
            const t = instant(y, mo, d, h, mi, s, zone);
            if (t > from && (out.length === 0 || t > out[out.length - 1])) out.push(t);
          }
    }
    d += 1;
    if (d > daysIn(y, mo)) {
      d = 1;
      mo += 1;
      if (mo > 12) {
        mo = 1;
        y += 1;
      }
    }
  }
  return out;
}

/** "Mon 8 Dec, 09:00" in the zone. */
export function formatIn(at: number, zone: string): string {
  return new Intl.DateTimeFormat(undefined, { timeZone: zone, weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' }).format(new Date(at));
}

/** The next runs as text, or why there are none. */
export function preview(expression: string, zone: string, from: number, count = 5): { runs: string[]; error: string | null; unsupported?: boolean } {
  if (!validZone(zone)) return { runs: [], error: `unknown time zone "${zone}" (an IANA name such as Europe/Berlin or UTC)` };
  const parsed = parseCron(expression);
  if (!parsed.ok) return { runs: [], error: parsed.error, unsupported: parsed.unsupported };
  const runs = nextRuns(parsed.spec, zone, from, count);
  if (!runs.length) return { runs: [], error: 'it is never due' };
  return { runs: runs.map((t) => formatIn(t, zone)), error: null };
}
