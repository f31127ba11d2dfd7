// What real harnesses send, rendered: the fixtures in test/fixtures/ are whole sessions as the
// server stored them from Claude Code (claude-agent-acp), Codex (codex-acp) and OpenCode (`opencode
// acp`) running in agenthold's base image against the provider stand-ins (scripts/e2e/harness.sh
// with E2E_EVENTS_OUT; each fixture says how). The reducer takes every event once, and the item
// components (rendered to HTML with preact-render-to-string) show each harness's tool calls,
// diffs, terminal output, thoughts, questions and turn ends as the user should see them.
import { render } from 'preact-render-to-string';
import { describe, expect, it } from 'vitest';
import { ItemView, type ItemContext } from '../src/items';
import { apply, createView, type Item, type SessionView, type StoredEvent, type ToolItem } from '../src/reducer';
import claudeCode from './fixtures/claude-code.json';
import codex from './fixtures/codex.json';
import opencode from './fixtures/opencode.json';

interface Fixture {
  harness: string;
  how: string;
  events: StoredEvent[];
}

const FIXTURES: Record<string, Fixture> = { 'claude-code': claudeCode, codex, opencode };
const load = (name: string): Fixture => structuredClone(FIXTURES[name]);
const ctx: ItemContext = { meId: null, canAnswer: true, waitingTools: new Set() };

/** The fixture's events through the reducer (each applied once, in order). */
function reduce(f: Fixture): SessionView {
  const view = createView();
  for (const ev of f.events) expect(apply(view, ev)).toBe('applied');
  expect(view.cursor).toBe(f.events[f.events.length - 1].seq);
  expect(view.running).toBe(false);
  return view;
}

const html = (item: Item) => render(<ItemView item={item} rev={item.rev} ctx={ctx} waiting={false} live={false} />);
const tools = (view: SessionView) => view.items.filter((i): i is ToolItem => i.kind === 'tool');
const of = <K extends Item['kind']>(view: SessionView, kind: K) => view.items.filter((i) => i.kind === kind) as Extract<Item, { kind: K }>[];
/** `green` in green, then ` plain` and `rest` uncoloured, as one ANSI block. */
const GREEN = (rest: string) => new RegExp(`<pre class="ansi"><span[^>]*style="color:var\\(--ansi-green\\);?"[^>]*>green</span> plain\\n${rest}</pre>`);
/** The visible text of rendered HTML (tags dropped, entities of the output decoded). */
const text = (h: string) => h.replace(/<[^>]+>/g, '').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

describe('Claude Code (claude-agent-acp 0.101.0)', () => {
  const f = load('claude-code');
  const view = reduce(f);

  it('shows one conversation item per thing said or done, in order', () => {
    expect(view.items.map((i) => i.kind)).toEqual([
      'prompt', 'tool', 'question', 'message', 'turn_end', // write hello.txt
      'prompt', 'message', 'turn_end', // what did I ask you before?
      'prompt', 'thought', 'message', 'turn_end', // think …
      'prompt', 'message', 'turn_end', // plan … (this Claude Code offers no TodoWrite: an echo)
      'prompt', 'tool', 'message', 'turn_end', // run …
    ]);
    // Streamed chunks of one messageId are one message.
    expect(of(view, 'message')[1].text).toBe('echo: what did I ask you before?');
    expect(of(view, 'message')[1].chunks).toBe(2);
  });

  it('the Write call is one card: its title replaced, its diff a new file', () => {
    const write = tools(view)[0];
    expect(write).toMatchObject({ title: 'Write hello.txt', toolKind: 'edit', status: 'completed', updates: 5 });
    expect(write.content).toEqual([{ path: '/home/agent/hello.txt', type: 'diff', newText: 'hi', oldText: null }]);
    const h = html(write);
    expect(text(h)).toContain('EditWrite hello.txtcompleted');
    expect(h).not.toContain('Preparing file');
    expect(h).toContain('<span class="badge ok">new file</span>');
    expect(h).toMatch(/<div class="line add">\+hi<\/div>/);
    expect(h).toContain('<span class="chip add">+1</span>');
    expect(text(h)).toContain('File created successfully at: /home/agent/hello.txt'); // raw output on demand
  });

  it('the permission question says what was decided and by what', () => {
    const [q] = of(view, 'question');
    expect(q.options.map((o) => o.name)).toEqual(['Yes', 'Yes, allow all edits during this session', 'No']);
    const h = text(html(q));
    expect(h).toContain('Permission askedWrite hello.txtedit');
    expect(h).toContain('Effectwrite');
    expect(h).toContain('/home/agent/hello.txt');
    expect(h).toContain('Approved by the autonomous posture');
    expect(html(q)).toContain('data-decision="allow"');
    expect(q.resolved?.optionId).toBe('allow-once');
  });

  it('the thought is collapsed, apart from the answer', () => {
    const [thought] = of(view, 'thought');
    expect(thought.text).toBe('Which file should I read first?');
    const h = html(thought);
    expect(h).toMatch(/^<div class="item item-thought"[^>]*><details class="thought"><summary>Thought<\/summary>/);
    expect(h).not.toContain('open');
    expect(of(view, 'message')[2].text).toBe('thought');
  });

  it('the Bash call streams terminal output with its colours and exit code, no placeholder', () => {
    const run = tools(view)[1];
    expect(run).toMatchObject({ toolKind: 'execute', status: 'completed' });
    expect(run.title).toBe("printf '\\033[32mgreen\\033[0m plain\\n'; ls /home/agent");
    expect(run.terminalOutput).toBe('\u001b[32mgreen\u001b[0m plain\nhello.txt');
    expect(run.terminalExit).toEqual({ exitCode: 0, signal: null });
    const h = html(run);
    expect(h).toMatch(GREEN('hello\\.txt'));
    expect(h).not.toContain('\u001b');
    expect(h).not.toContain('Terminal toolu_');
    expect(text(h)).toContain('exited with 0');
  });

  it('turn ends show duration and tokens; usage keeps the last report', () => {
    expect(text(html(of(view, 'turn_end')[0]))).toBe('Turn ended · end_turn · 6.1 s · 5.2k in · 10 out');
    expect(view.usage).toMatchObject({ sessionUpdate: 'usage_update', used: 2949, cost: { currency: 'USD' } });
    expect(view.meta.session_info_update).toMatchObject({ title: 'Stand-in' });
  });
});

describe('Codex (codex-acp, code mode)', () => {
  const view = reduce(load('codex'));

  it('the patch is one "Editing files" card with its diff, completed', () => {
    expect(view.items.map((i) => i.kind)).toEqual([
      'prompt', 'tool', 'question', 'message', 'turn_end', // write hello.txt
      'prompt', 'message', 'turn_end', // what did I ask you before?
      'prompt', 'thought', 'message', 'turn_end', // think … (a reasoning summary)
      'prompt', 'message', 'turn_end', // plan … (the stand-in has no plan for Codex: an echo)
      'prompt', 'tool', 'message', 'turn_end', // run …
    ]);
    const [edit] = tools(view);
    expect(edit).toMatchObject({ title: 'Editing files', toolKind: 'edit', status: 'completed', updates: 2 });
    const h = html(edit);
    expect(h).toContain('<code>/home/agent/hello.txt</code> <span class="badge ok">new file</span>');
    expect(h).toMatch(/<div class="line add">\+hi<\/div>/);
    expect(h).not.toContain('Raw input and output'); // Codex sent none
  });

  it("Codex's option names, and the question's tool call title", () => {
    const [q] = of(view, 'question');
    const h = text(html(q));
    expect(h).toContain('Permission askedEdit filesedit');
    expect(q.options.map((o) => o.name)).toEqual(['Yes, proceed', "Yes, and don't ask again for these files", 'No, and tell Codex what to do differently']);
    expect(h).toContain('Approved by the autonomous posture');
  });

  it('the reasoning summary is one thought (its leading blank chunk merged in)', () => {
    const [thought] = of(view, 'thought');
    expect(thought).toMatchObject({ chunks: 2 });
    expect(thought.text.trim()).toBe('Which file should I read first?');
    expect(html(thought)).toContain('<div class="text">Which file should I read first?</div>'); // no blank lines on top
  });

  it("a command Codex's own sandbox (bwrap) could not start: a failed card with its output", () => {
    // Codex wraps commands in bubblewrap, which cannot make a user namespace inside agenthold's
    // container: the command fails before it runs (what the harness really sent).
    const run = tools(view)[1];
    expect(run).toMatchObject({ title: "List files in 'agent'", toolKind: 'read', status: 'failed', rawOutput: { exit_code: 1 } });
    expect(run.terminalOutput).toMatch(/^bwrap: No permissions to create a new namespace/);
    const h = html(run);
    expect(h).toContain('<span class="badge status danger">failed</span>');
    expect(text(h)).toContain('ReadList files in \'agent\'failed');
    expect(h).toMatch(/<pre class="ansi">bwrap: No permissions/);
    expect(h).not.toContain('Terminal exec-');
  });

  it('thread status updates stay out of the conversation', () => {
    expect(view.items.some((i) => i.kind === 'other')).toBe(false);
    expect(view.meta.session_info_update).toMatchObject({ _meta: { codex: { threadStatus: { type: 'idle' } } } });
  });
});

describe('OpenCode (opencode acp)', () => {
  const view = reduce(load('opencode'));
  const [write, todo, bash] = tools(view);

  it('the write card shows the result text; the diff was offered in the question', () => {
    expect(write).toMatchObject({ title: 'home/agent/hello.txt', toolKind: 'edit', status: 'completed' });
    const h = html(write);
    expect(h).toContain('<pre class="ansi">Wrote file successfully.</pre>');
    expect(h).not.toContain('class="diff');
    // The diff OpenCode offered for approval is in the question.
    const [q] = of(view, 'question');
    expect(q.toolCall?.content[0]).toMatchObject({ type: 'diff', newText: 'hi', oldText: '' });
    expect(q.options.map((o) => o.name)).toEqual(['Allow once', 'Always allow', 'Reject']);
  });

  it('the thought: an empty closing chunk merges into it', () => {
    const [thought] = of(view, 'thought');
    expect(thought).toMatchObject({ text: 'Which file should I read first?', chunks: 2 });
  });

  it('todowrite is a tool card (this OpenCode sends no plan update), its list as text', () => {
    expect(todo).toMatchObject({ title: '3 todos', toolKind: 'other', status: 'completed' });
    expect(view.plan).toBeNull();
    const h = text(html(todo));
    expect(h).toContain('Tool3 todoscompleted');
    expect(h).toContain('"content": "Fix the bug"');
  });

  it('bash output arrives as text content, sent twice (running, then completed): shown once, coloured', () => {
    expect(bash).toMatchObject({ toolKind: 'execute', status: 'completed', locations: [{ path: '/home/agent' }], updates: 5 });
    expect(bash.content).toHaveLength(1); // each update's content replaces the last, never appends
    const h = html(bash);
    expect(h.match(/<pre class="ansi">/g)).toHaveLength(1);
    expect(h).toMatch(GREEN('hello\\.txt\\n'));
    const q = of(view, 'question')[1];
    expect(text(html(q))).toContain("Commandprintf '\\033[32mgreen\\033[0m plain\\n'; ls /home/agent");
  });
});
