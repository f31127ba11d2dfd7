// Terminal output with ANSI SGR colours → segments to render as spans. Other escape sequences are
// dropped; a carriage return rewrites the line (progress bars show their last state).

export interface Segment {
  text: string;
  fg?: string;
  bg?: string;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
}

const BASIC = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white'];

function colour256(n: number): string {
  if (n < 8) return `var(--ansi-${BASIC[n]})`;
  if (n < 16) return `var(--ansi-bright-${BASIC[n - 8]})`;
  if (n < 232) {
    const i = n - 16;
    const v = [0, 95, 135, 175, 215, 255];
    return `rgb(${v[Math.floor(i / 36)]},${v[Math.floor(i / 6) % 6]},${v[i % 6]})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

/** Collapses carriage returns: each line keeps what was written after its last `\r`. */
function collapseCR(text: string): string {
  if (!text.includes('\r')) return text;
  return text
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => {
      const parts = line.split('\r');
      return parts[parts.length - 1] === '' && parts.length > 1 ? parts[parts.length - 2] : parts[parts.length - 1];
    })
    .join('\n');
}

const ESCAPES = /\u001b\[([0-9;?]*)([A-Za-z])|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[()][A-Za-z0-9]|\u001b[=>78DEHMc]/g;

export function parseAnsi(input: string): Segment[] {
  const text = collapseCR(input);
  const out: Segment[] = [];
  let style: Omit<Segment, 'text'> = {};
  let last = 0;
  const emit = (s: string) => {
    if (!s) return;
    const prev = out[out.length - 1];
    if (prev && JSON.stringify({ ...prev, text: '' }) === JSON.stringify({ ...style, text: '' })) prev.text += s;
    else out.push({ text: s, ...style });
  };
  for (const m of text.matchAll(ESCAPES)) {
    emit(text.slice(last, m.index));
    last = (m.index ?? 0) + m[0].length;
    if (m[2] !== 'm') continue;
    const codes = (m[1] || '0').split(';').map((c) => Number(c || '0'));
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i];
      if (c === 0) style = {};
      else if (c === 1) style = { ...style, bold: true };
      else if (c === 2) style = { ...style, dim: true };
      else if (c === 3) style = { ...style, italic: true };
      else if (c === 4) style = { ...style, underline: true };
      else if (c === 22) style = { ...style, bold: undefined, dim: undefined };
      else if (c === 23) style = { ...style, italic: undefined };
      else if (c === 24) style = { ...style, underline: undefined };
      else if (c >= 30 && c <= 37) style = { ...style, fg: `var(--ansi-${BASIC[c - 30]})` };
      else if (c >= 90 && c <= 97) style = { ...style, fg: `var(--ansi-bright-${BASIC[c - 90]})` };
      else if (c >= 40 && c <= 47) style = { ...style, bg: `var(--ansi-${BASIC[c - 40]})` };
      else if (c >= 100 && c <= 107) style = { ...style, bg: `var(--ansi-bright-${BASIC[c - 100]})` };
      else if (c === 39) style = { ...style, fg: undefined };
      else if (c === 49) style = { ...style, bg: undefined };
      else if ((c === 38 || c === 48) && codes[i + 1] === 5) {
        const col = colour256(codes[i + 2] ?? 0);
        style = c === 38 ? { ...style, fg: col } : { ...style, bg: col };
        i += 2;
      } else if ((c === 38 || c === 48) && codes[i + 1] === 2) {
        const col = `rgb(${codes[i + 2] ?? 0},${codes[i + 3] ?? 0},${codes[i + 4] ?? 0})`;
        style = c === 38 ? { ...style, fg: col } : { ...style, bg: col };
        i += 4;
      }
    }
    // Drop undefined keys so equal styles compare equal.
    style = Object.fromEntries(Object.entries(style).filter(([, v]) => v !== undefined));
  }
  emit(text.slice(last));
  return out;
}
