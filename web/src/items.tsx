// How each kind of item of a session reads (seed 002): one component per kind. Items re-render
// only when their `rev` changes (the reducer bumps it), so a streamed token repaints its message
// and nothing else.
import { Component } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { structuredPatch } from 'diff';
import { api, ApiError, errorText } from './api';
import { parseAnsi } from './ansi';
import { renderMarkdown } from './markdown';
import type { Item, MessageItem, NoticeItem, PolicyItem, QuestionItem, ThoughtItem, ToolItem, Truncation, TurnEndItem } from './reducer';
import { blockText, describeResolution } from './reducer';
import { usageLine } from './usage';
import { contentOf, fieldsOf, initialValues, quickChoices, type Field, type Values } from './elicitation';

export interface ItemContext {
  meId: string | null;
  canAnswer: boolean;
  /** Questions waiting, by tool call id (a tool card says it waits). */
  waitingTools: Set<string>;
}

interface ItemProps {
  item: Item;
  rev: number;
  ctx: ItemContext;
  waiting: boolean;
  /** The last item of a running turn (it may still grow). */
  live: boolean;
}

export class ItemView extends Component<ItemProps> {
  shouldComponentUpdate(next: ItemProps) {
    return (
      next.rev !== this.props.rev ||
      next.item !== this.props.item ||
      next.waiting !== this.props.waiting ||
      next.live !== this.props.live ||
      next.ctx.canAnswer !== this.props.ctx.canAnswer
    );
  }
  render() {
    const { item, ctx, waiting } = this.props;
    return (
      <div class={`item item-${item.kind}`} data-seq={item.seq} data-kind={item.kind}>
        {renderItem(item, ctx, waiting, this.props.live)}
        {item.truncated.length ? <Truncated list={item.truncated} /> : null}
      </div>
    );
  }
}

function renderItem(item: Item, ctx: ItemContext, waiting: boolean, live: boolean) {
  switch (item.kind) {
    case 'prompt':
      return (
        <div class="bubble prompt">
          <div class="who">
            Prompt{item.origin && <span class="muted"> · from {item.origin}</span>}
          </div>
          <div class="text">{item.text || <span class="muted">(no text)</span>}</div>
        </div>
      );
    case 'message':
      return <Message item={item} live={live} />;
    case 'thought':
      return <Thought item={item} />;
    case 'tool':
      return <ToolCard item={item} waiting={waiting} />;
    case 'question':
      return <Question item={item} ctx={ctx} />;
    case 'notice':
      return <Notice item={item} />;
    case 'policy':
      return <Policy item={item} />;
    case 'turn_end':
      return <TurnEnd item={item} />;
    case 'other':
      return (
        <details class="other">
          <summary>
            <code>{item.type}</code> <span class="muted">(an event this page does not know how to show)</span>
          </summary>
          <pre>{JSON.stringify(item.payload, null, 2)}</pre>
        </details>
      );
  }
}

/** Above this size a message that is still streaming renders block by block (see LiveMarkdown). */
const LIVE_SPLIT = 8000;
/** A streaming block longer than this shows as plain text until the message is complete. */
const LIVE_PLAIN = 4000;

/** Splits markdown at blank lines outside code fences. */
export function splitBlocks(text: string): string[] {
  const blocks: string[] = [];
  let current: string[] = [];
  let fence = false;
  let blank = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fence = !fence;
    if (!fence && line.trim() === '') {
      blank = true;
      current.push(line);
      continue;
    }
    if (blank && !fence && current.some((l) => l.trim() !== '')) {
      blocks.push(current.join('\n'));
      current = [];
    }
    blank = false;
    current.push(line);
  }
  if (current.length) blocks.push(current.join('\n'));
  return blocks;
}

class MdBlock extends Component<{ text: string }> {
  shouldComponentUpdate(next: { text: string }) {
    return next.text !== this.props.text;
  }
  render() {
    return <div class="md-block" dangerouslySetInnerHTML={{ __html: renderMarkdown(this.props.text) }} />;
  }
}

class PlainPart extends Component<{ text: string }> {
  shouldComponentUpdate(next: { text: string }) {
    return next.text !== this.props.text;
  }
  render() {
    // A block of its own: a growing last part lays out alone, not the whole text.
    return <div class="part">{this.props.text}</div>;
  }
}

/**
 * A long message while it streams: finished blocks keep their rendered markdown, only the growing
 * last block changes, and a very long last block is plain text in fixed parts (each repaint touches
 * one part), so a token never re-lays-out the whole message. Complete, it renders whole.
 */
function LiveMarkdown({ text }: { text: string }) {
  const blocks = splitBlocks(text);
  const last = blocks.pop() ?? '';
  const parts: string[] = [];
  // Parts end at a space where there is one, so the breaks between them fall between words.
  for (let i = 0; last.length > LIVE_PLAIN && i < last.length; ) {
    let end = Math.min(last.length, i + LIVE_PLAIN);
    if (end < last.length) {
      const space = last.lastIndexOf(' ', end);
      if (space > i + LIVE_PLAIN / 2) end = space + 1;
    }
    parts.push(last.slice(i, end));
    i = end;
  }
  return (
    <div class="bubble agent markdown live">
      {blocks.map((b, i) => (
        <MdBlock key={i} text={b} />
      ))}
      {parts.length ? (
        <div class="streaming-plain">
          {parts.map((p, i) => (
            <PlainPart key={i} text={p} />
          ))}
        </div>
      ) : (
        <MdBlock key={blocks.length} text={last} />
      )}
    </div>
  );
}

function Message({ item, live }: { item: MessageItem; live: boolean }) {
  const split = live && item.role === 'agent' && item.text.length > LIVE_SPLIT;
  const html = useMemo(() => (item.role === 'agent' && !split ? renderMarkdown(item.text) : ''), [item.text, item.role, split]);
  if (split) return <LiveMarkdown text={item.text} />;
  if (item.role === 'user')
    return (
      <div class="bubble prompt">
        <div class="who">User</div>
        <div class="text">{item.text}</div>
      </div>
    );
  return <div class="bubble agent markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}

function Thought({ item }: { item: ThoughtItem }) {
  return (
    <details class="thought">
      <summary>Thought</summary>
      {/* Codex opens a reasoning summary with a blank chunk: no empty lines on top. */}
      <div class="text">{item.text.trim()}</div>
    </details>
  );
}

export function Ansi({ text }: { text: string }) {
  const segments = useMemo(() => parseAnsi(text), [text]);
  return (
    <pre class="ansi">
      {segments.map((s) =>
        s.fg || s.bg || s.bold || s.dim || s.italic || s.underline ? (
          <span
            class={[s.bold && 'b', s.dim && 'dim', s.italic && 'i', s.underline && 'u'].filter(Boolean).join(' ')}
            style={{ color: s.fg, backgroundColor: s.bg }}
          >
            {s.text}
          </span>
        ) : (
          s.text
        ),
      )}
    </pre>
  );
}

/** A hunk's lines as rows of a side-by-side view: removals beside the additions that replace them. */
export function splitRows(lines: string[]): [string | null, string | null][] {
  const rows: [string | null, string | null][] = [];
  let del: string[] = [];
  let add: string[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(del.length, add.length); i++) rows.push([del[i] ?? null, add[i] ?? null]);
    del = [];
    add = [];
  };
  for (const l of lines) {
    if (l.startsWith('-')) del.push(l);
    else if (l.startsWith('+')) add.push(l);
    else if (l.startsWith('\\')) continue;
    else {
      flush();
      rows.push([l, l]);
    }
  }
  flush();
  return rows;
}

const lineClass = (l: string | null) => (l === null ? 'empty' : l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : 'ctx');

export function DiffView({ path, oldText, newText }: { path: string; oldText: string | null; newText: string }) {
  const [split, setSplit] = useState(false);
  const patch = useMemo(() => structuredPatch(path, path, oldText ?? '', newText ?? '', '', '', { context: 3 }), [path, oldText, newText]);
  let added = 0;
  let removed = 0;
  for (const h of patch.hunks)
    for (const l of h.lines) {
      if (l.startsWith('+')) added++;
      else if (l.startsWith('-')) removed++;
    }
  return (
    <div class={`diff ${split ? 'split' : 'unified'}`}>
      <div class="diff-head">
        <code>{path}</code> {oldText === null ? <span class="badge ok">new file</span> : null}{' '}
        <span class="chip add">+{added}</span> <span class="chip del">−{removed}</span>{' '}
        {oldText !== null ? (
          <button type="button" class="link" aria-pressed={split} onClick={() => setSplit(!split)}>
            {split ? 'unified' : 'side by side'}
          </button>
        ) : null}
      </div>
      {patch.hunks.map((h) => (
        <div class="hunk">
          <div class="hunk-head">@@ −{h.oldStart},{h.oldLines} +{h.newStart},{h.newLines} @@</div>
          {split
            ? splitRows(h.lines).map(([a, b]) => (
                <div class="split-row">
                  <div class={`line ${lineClass(a)}`}>{a ?? ''}</div>
                  <div class={`line ${lineClass(b)}`}>{b ?? ''}</div>
                </div>
              ))
            : h.lines.map((l) => (
                <div class={`line ${l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : l[0] === '\\' ? 'meta' : 'ctx'}`}>{l}</div>
              ))}
        </div>
      ))}
    </div>
  );
}

const KIND_LABEL: Record<string, string> = {
  read: 'Read',
  edit: 'Edit',
  delete: 'Delete',
  move: 'Move',
  search: 'Search',
  execute: 'Run',
  think: 'Think',
  fetch: 'Fetch',
  switch_mode: 'Mode',
  other: 'Tool',
};

function ToolCard({ item, waiting }: { item: ToolItem; waiting: boolean }) {
  const status = waiting ? 'waiting for an answer' : item.status;
  return (
    <section class={`tool status-${item.status}`} aria-label={`Tool call: ${item.title || item.toolKind}`} data-tool-call={item.toolCallId}>
      <header>
        <span class="tool-kind">{KIND_LABEL[item.toolKind] ?? item.toolKind}</span>
        <span class="tool-title">{item.title || item.toolCallId}</span>
        <span class={`badge status ${waiting ? 'warn' : item.status === 'completed' ? 'ok' : item.status === 'failed' ? 'danger' : ''}`}>{status}</span>
      </header>
      {item.locations.length ? (
        <ul class="locations">
          {item.locations.map((l) => (
            <li><code>{l.path}{l.line ? `:${l.line}` : ''}</code></li>
          ))}
        </ul>
      ) : null}
      {item.content.map((c) => {
        if (c?.type === 'diff') return <DiffView path={c.path} oldText={c.oldText ?? null} newText={c.newText ?? ''} />;
        if (c?.type === 'content') return <Ansi text={blockText(c.content)} />;
        if (c?.type === 'terminal') return item.terminalOutput ? null : <p class="muted">Terminal {c.terminalId}</p>;
        return <pre>{JSON.stringify(c, null, 2)}</pre>;
      })}
      {item.terminalOutput ? <Ansi text={item.terminalOutput} /> : null}
      {item.terminalExit ? (
        <p class={item.terminalExit.exitCode === 0 ? 'muted' : 'error'}>
          exited {item.terminalExit.signal ? `on ${item.terminalExit.signal}` : `with ${item.terminalExit.exitCode}`}
        </p>
      ) : null}
      {item.rawInput !== undefined || item.rawOutput !== undefined ? (
        <details class="raw">
          <summary>Raw input and output</summary>
          {item.rawInput !== undefined ? <pre>{JSON.stringify(item.rawInput, null, 2)}</pre> : null}
          {item.rawOutput !== undefined ? <pre>{JSON.stringify(item.rawOutput, null, 2)}</pre> : null}
        </details>
      ) : null}
    </section>
  );
}

/** What a person may answer to a permission question, whatever the harness offered: agenthold's
 * gate keeps the decision, so the harness's own "always" options are never sent. */
export const DECISIONS = [
  { decision: 'allow', label: 'Approve', tone: 'allow', hint: 'Allow this call once.' },
  {
    decision: 'allow_for_session',
    label: 'Approve for this session',
    tone: 'allow',
    hint: 'Allow this call, and let agenthold approve calls like it in this session without asking (revocable on the session page).',
  },
  { decision: 'deny', label: 'Deny', tone: 'reject', hint: 'Refuse this call.' },
] as const;

function answerError(e: unknown) {
  return e instanceof ApiError && e.code === 'ALREADY_ANSWERED' ? 'Someone answered it first.' : errorText(e);
}

/** A permission question's three answers: what the inline card, the session's earlier questions and the inbox share. */
export function AnswerButtons(props: {
  permissionId: string;
  /** The harness's options: named in a muted line, never buttons. */
  options?: { optionId: string; name: string; kind: string }[];
  disabled?: boolean;
  onAnswered?: () => void;
}) {
  // Fail closed: the buttons arm a moment after they appear, so a click meant for something else
  // that was there before does not answer.
  const [armed, setArmed] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const t = setTimeout(() => setArmed(true), 600);
    return () => clearTimeout(t);
  }, []);
  const offered = (props.options ?? []).map((o) => o?.name).filter((n) => typeof n === 'string' && n);
  return (
    <>
      <div class="answers" role="group" aria-label="Answer">
        {DECISIONS.map((d) => (
          <button
            type="button"
            class={`answer ${d.tone}`}
            data-decision={d.decision}
            title={d.hint}
            disabled={!armed || busy || props.disabled}
            onClick={async () => {
              setBusy(true);
              setError(null);
              try {
                await api('POST', `/api/v1/permissions/${props.permissionId}/answer`, { decision: d.decision });
                props.onAnswered?.();
              } catch (e) {
                setError(answerError(e));
              } finally {
                setBusy(false);
              }
            }}
          >
            {d.label}
          </button>
        ))}
        {error ? <span class="error" role="alert">{error}</span> : null}
      </div>
      {offered.length ? <p class="muted offered">The harness offered: {offered.join(' · ')}</p> : null}
    </>
  );
}

/** The harness's own question: a control per field of its schema (choices, a checkbox, numbers, text), Answer and Decline. */
export function ElicitationForm({ permissionId, schema, disabled }: { permissionId: string; schema?: unknown; disabled?: boolean }) {
  const fields = useMemo(() => fieldsOf(schema), [schema]);
  const [values, setValues] = useState<Values>(() => initialValues(fields ?? []));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const set = (name: string, v: Values[string]) => setValues((old) => ({ ...old, [name]: v }));
  const send = async (body: unknown) => {
    setBusy(true);
    setError(null);
    try {
      await api('POST', `/api/v1/permissions/${permissionId}/answer`, body);
    } catch (e) {
      setError(answerError(e));
    } finally {
      setBusy(false);
    }
  };
  const off = disabled || busy;
  const quick = quickChoices(fields);
  return (
    <form
      class="elicit"
      onSubmit={(e) => {
        e.preventDefault();
        if (!fields) return send({ text: String(values.__text ?? '') });
        const r = contentOf(fields, values);
        if ('error' in r) setError(r.error);
        else send({ content: r.content });
      }}
    >
      {quick ? (
        // One choice to make: each choice is a button that answers at once.
        <div class="choices quick" role="group" aria-label={fields!.find((f) => f.name === quick.field)!.label}>
          {quick.choices.map((c) => (
            <button type="button" class="allow" data-choice={c.value} disabled={off} onClick={() => send({ content: { ...contentOrEmpty(fields!, values), [quick.field]: c.value } })}>
              {c.title}
            </button>
          ))}
        </div>
      ) : null}
      {fields ? (
        fields.filter((f) => !quick || f.name !== quick.field).map((f) => <FieldInput key={f.name} field={f} value={values[f.name]} disabled={off} set={(v) => set(f.name, v)} />)
      ) : (
        <label class="field">
          <span>Your answer</span>
          <input value={String(values.__text ?? '')} disabled={off} onInput={(e) => set('__text', e.currentTarget.value)} />
        </label>
      )}
      <div class="elicit-buttons">
        {quick ? null : <button type="submit" class="allow" disabled={off}>Answer</button>}
        <button type="button" class="reject" disabled={off} onClick={() => send({ decision: 'decline' })}>Decline</button>
        {error ? <span class="error" role="alert">{error}</span> : null}
      </div>
    </form>
  );
}

/** The other fields' content (optional ones left out when empty), for a one-click choice. */
function contentOrEmpty(fields: Field[], values: Values): Record<string, unknown> {
  const r = contentOf(fields.filter((f) => f.kind !== 'choice'), values);
  return 'content' in r ? r.content : {};
}

const FORMAT_HINT: Record<string, string> = { email: 'an email address', uri: 'a URL', date: 'YYYY-MM-DD', 'date-time': 'YYYY-MM-DDThh:mm:ssZ' };

/** Choices up to this many are radio buttons; more are a select. */
const RADIO_MAX = 6;

function FieldInput({ field: f, value, disabled, set }: { field: Field; value: Values[string]; disabled: boolean; set: (v: Values[string]) => void }) {
  const hint = f.description ? <span class="muted hint">{f.description}</span> : null;
  const mark = f.required ? <span class="muted"> (required)</span> : null;
  switch (f.kind) {
    case 'choice':
      if (f.choices.length > RADIO_MAX)
        return (
          <label class="field" data-field={f.name}>
            <span>{f.label}{mark}</span>
            <select value={String(value ?? '')} disabled={disabled} onChange={(e) => set(e.currentTarget.value)}>
              <option value="">choose…</option>
              {f.choices.map((c) => (
                <option value={c.value}>{c.title}</option>
              ))}
            </select>
            {hint}
          </label>
        );
      return (
        <fieldset class="field choices" data-field={f.name}>
          <legend>{f.label}{mark}</legend>
          {f.choices.map((c) => (
            <label class="choice">
              <input type="radio" name={f.name} value={c.value} checked={value === c.value} disabled={disabled} onChange={() => set(c.value)} /> {c.title}
            </label>
          ))}
          {hint}
        </fieldset>
      );
    case 'multi': {
      const picked = Array.isArray(value) ? value : [];
      return (
        <fieldset class="field choices" data-field={f.name}>
          <legend>{f.label}{mark}</legend>
          {f.choices.map((c) => (
            <label class="choice">
              <input
                type="checkbox"
                value={c.value}
                checked={picked.includes(c.value)}
                disabled={disabled}
                onChange={(e) => set(e.currentTarget.checked ? [...picked, c.value] : picked.filter((x) => x !== c.value))}
              />{' '}
              {c.title}
            </label>
          ))}
          {hint}
        </fieldset>
      );
    }
    case 'boolean':
      return (
        <label class="field checkbox" data-field={f.name}>
          <input type="checkbox" checked={value === true} disabled={disabled} onChange={(e) => set(e.currentTarget.checked)} /> <span>{f.label}</span>
          {hint}
        </label>
      );
    case 'number':
      return (
        <label class="field" data-field={f.name}>
          <span>{f.label}{mark}</span>
          <input
            type="number"
            step={f.integer ? 1 : 'any'}
            min={f.min ?? undefined}
            max={f.max ?? undefined}
            value={String(value ?? '')}
            disabled={disabled}
            onInput={(e) => set(e.currentTarget.value)}
          />
          {hint}
        </label>
      );
    case 'text':
      return (
        <label class="field" data-field={f.name}>
          <span>{f.label}{mark}</span>
          <input
            placeholder={f.format ? FORMAT_HINT[f.format] ?? f.format : undefined}
            minLength={f.minLength ?? undefined}
            maxLength={f.maxLength ?? undefined}
            value={String(value ?? '')}
            disabled={disabled}
            onInput={(e) => set(e.currentTarget.value)}
          />
          {hint}
        </label>
      );
  }
}

export function callSummary(call: { command?: string; paths?: string[]; url?: string; effect?: string } | null) {
  if (!call) return null;
  return (
    <dl class="call">
      {call.effect ? (<><dt>Effect</dt><dd>{call.effect}</dd></>) : null}
      {call.command ? (<><dt>Command</dt><dd><code>{call.command}</code></dd></>) : null}
      {call.paths?.length ? (<><dt>Paths</dt><dd>{call.paths.map((p) => <code>{p} </code>)}</dd></>) : null}
      {call.url ? (<><dt>URL</dt><dd><code>{call.url}</code></dd></>) : null}
    </dl>
  );
}

/** An accepted elicitation's content, in words (`field: value`). */
function contentText(content: unknown): string {
  if (!content || typeof content !== 'object') return '';
  return Object.entries(content as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)
    .join(' · ');
}

function Question({ item, ctx }: { item: QuestionItem; ctx: ItemContext }) {
  const r = item.resolved;
  const said = r ? describeResolution(r, item, ctx.meId) : null;
  const answer = r?.action === 'accept' ? contentText(r.content) : '';
  return (
    <section class={`question ${r ? 'resolved' : 'pending'}`} aria-label="Permission question" data-permission={item.permissionId ?? ''}>
      <header>
        <strong>{item.elicitation ? 'The agent asks' : 'Permission asked'}</strong>
        {item.toolCall?.title ? <span class="tool-title">{item.toolCall.title}</span> : null}
        {item.toolCall?.kind ? <span class="badge">{item.toolCall.kind}</span> : null}
      </header>
      {item.elicitation ? <p>{item.message}</p> : null}
      {callSummary(item.call)}
      {said ? (
        <p class="resolution" data-decision={said.decision}>
          <strong>{said.label}</strong> {said.detail}
          {answer ? <span class="answered-content">: {answer}</span> : null}
        </p>
      ) : item.permissionId && ctx.canAnswer ? (
        item.elicitation ? (
          <ElicitationForm permissionId={item.permissionId} schema={item.requestedSchema} />
        ) : (
          <AnswerButtons permissionId={item.permissionId} options={item.options} />
        )
      ) : (
        <p class="muted">Waiting for an operator's answer.</p>
      )}
    </section>
  );
}

function Notice({ item }: { item: NoticeItem }) {
  return (
    <div class={`notice ${item.level}`} role={item.level === 'error' ? 'alert' : undefined}>
      <code>{item.code}</code> {item.message}
    </div>
  );
}

function Policy({ item }: { item: PolicyItem }) {
  const p = item.payload ?? {};
  if (item.denied)
    return (
      <div class="notice error policy">
        <strong>Denied by {String(p.by ?? 'policy')}</strong> {p.effect ? <span class="badge">{p.effect}</span> : null}{' '}
        {p.detail?.command ? <code>{p.detail.command}</code> : null}
        {Array.isArray(p.detail?.paths) ? p.detail.paths.map((x: string) => <code> {x}</code>) : null}
        {p.detail?.url ? <code>{p.detail.url}</code> : null}
      </div>
    );
  return (
    <details class="notice policy">
      <summary>
        Policy applied: {String(p.posture ?? '')}, {Array.isArray(p.rules) ? p.rules.length : 0} rules, default {String(p.default ?? '—')}
      </summary>
      <pre>{JSON.stringify(p, null, 2)}</pre>
    </details>
  );
}

function TurnEnd({ item }: { item: TurnEndItem }) {
  const line = item.turn ? usageLine(item.turn) : '';
  return (
    <div class={`turn-end ${item.stopReason}`} data-usage={line || undefined}>
      Turn ended · <code>{item.stopReason}</code>
      {item.durationMs !== null ? ` · ${(item.durationMs / 1000).toFixed(1)} s` : ''}
      {line ? <> · <span class="usage" title="tokens as the harness counts them; cost as it reports it">{line}</span></> : ''}
    </div>
  );
}

function Truncated({ list }: { list: Truncation[] }) {
  return (
    <div class="truncated">
      {list.map((t) => (
        <LoadWhole t={t} />
      ))}
    </div>
  );
}

function LoadWhole({ t }: { t: Truncation }) {
  const [whole, setWhole] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (!t.url) return <span class="muted">Part of this item was cut when stored.</span>;
  return (
    <div>
      <span class="muted">
        Event {t.seq} was cut to fit ({t.size !== null ? `${Math.round(t.size / 1024)} KiB whole` : 'size unknown'}
        {t.fields.length ? `; ${t.fields.join(', ')}` : ''}).
      </span>{' '}
      {whole === null ? (
        <button
          type="button"
          onClick={async () => {
            try {
              const r = await fetch(t.url, { credentials: 'same-origin' });
              if (!r.ok) throw new Error(`HTTP ${r.status}`);
              const text = await r.text();
              try {
                setWhole(JSON.stringify(JSON.parse(text), null, 2));
              } catch {
                setWhole(text);
              }
            } catch (e) {
              setError(errorText(e));
            }
          }}
        >
          Load whole
        </button>
      ) : (
        <details open>
          <summary>The whole payload</summary>
          <pre class="whole">{whole}</pre>
        </details>
      )}
      {error ? <span class="error">{error}</span> : null}
    </div>
  );
}
