// One line per item where a line is all there is room for (the inbox, lists): the "brief
// human-readable rendering" of seed 002 (`content[0].text` of its thread items): "Bash → npm
// test", "Write → /home/agent/notes.md", "→ first output line (N lines)", "[thinking] …". Plain
// TypeScript, unit-tested (test/brief.test.ts).

export const BRIEF_MAX = 120;

/** Cuts to one line of at most `max` characters. */
export function oneLine(text: string, max = BRIEF_MAX): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** A question's brief: the tool and what it touches, or the agent's own question's first line. */
export function briefOfQuestion(kind: string, toolCall: any): string {
  if (kind === 'elicitation') return oneLine(String(toolCall?.message ?? 'A question'));
  const name = oneLine(String(toolCall?.title ?? toolCall?.kind ?? 'tool'), 60);
  const raw = toolCall?.rawInput ?? {};
  const target =
    (typeof raw.command === 'string' && raw.command) ||
    (Array.isArray(raw.command) && raw.command.join(' ')) ||
    toolCall?.locations?.[0]?.path ||
    raw.file_path ||
    raw.path ||
    raw.url ||
    '';
  return target && !name.includes(String(target)) ? oneLine(`${name} → ${target}`) : name;
}

/** A tool result's brief: "→ <first output line> (N lines)". */
export function briefOfOutput(output: string): string {
  const lines = output.replace(/\n$/, '').split('\n');
  return oneLine(`→ ${lines[0] ?? ''}${lines.length > 1 ? ` (${lines.length} lines)` : ''}`);
}

/** A thought's brief: "[thinking] " and its first ~120 characters. */
export const briefOfThought = (text: string) => oneLine(`[thinking] ${text}`);
