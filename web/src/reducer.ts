// The session's event log → the view model of the conversation. Plain TypeScript, no DOM, so it is
// unit-tested on its own (test/reducer.test.ts).
//
// Rules (docs/ui.md):
// - `cursor` is the seq of the last event APPLIED. An event with seq <= cursor is dropped
//   (a duplicate from a reconnect); one with seq > cursor + 1 is refused (a gap: the caller
//   reconnects from the cursor). So every event is applied exactly once, in order.
// - Streamed chunks merge into one growing message (by messageId when present, else while
//   adjacent); thoughts likewise.
// - Tool calls are one item per toolCallId: `tool_call` and `tool_call_update` upsert it, and
//   each field present replaces the old value (never appended).
// - `plan` replaces the whole plan (a panel, not a timeline item).
// - Whether a turn runs and which questions wait come from the log, never from a live flag.
// - Every item changed by an event gets a new `rev`, so the view re-renders only those.

import { UsageTracker, type TurnUsage } from './usage';

export interface StoredEvent {
  session_id?: string;
  seq: number;
  type: string;
  payload: any;
  created_at?: string;
}

/** A cut or NUL-replaced payload: the exact one is behind `url`. */
export interface Truncation {
  seq: number;
  url: string;
  size: number | null;
  fields: string[];
}

interface Base {
  /** Stable key: `e<seq>` of the event that made the item. */
  key: string;
  /** Bumped on every change. */
  rev: number;
  seq: number;
  at?: string;
  truncated: Truncation[];
}

export interface PromptItem extends Base {
  kind: 'prompt';
  text: string;
  turnId: string | null;
  /** Who or what prompted (the event's `origin`), in words; `null` for events without one. */
  origin: string | null;
}
export interface MessageItem extends Base {
  kind: 'message';
  role: 'agent' | 'user';
  messageId: string | null;
  text: string;
  /** How many chunks were merged into it. */
  chunks: number;
}
export interface ThoughtItem extends Base {
  kind: 'thought';
  messageId: string | null;
  text: string;
  chunks: number;
}
export interface ToolItem extends Base {
  kind: 'tool';
  toolCallId: string;
  title: string;
  toolKind: string;
  status: string;
  locations: { path: string; line?: number }[];
  content: any[];
  rawInput: unknown;
  rawOutput: unknown;
  /** Output a harness streamed through `_meta.terminal_output(_delta)`. */
  terminalOutput: string;
  terminalExit: { exitCode: number | null; signal: string | null } | null;
  updates: number;
}
export interface Resolution {
  outcome: string | null;
  /** `allow_once` / `reject_once` (older logs: also `allow_always` / `reject_always`), or null. */
  optionKind: string | null;
  optionId: string | null;
  // `auto`, `cancel`, `policy:…`, `default`, `person`, {user_id, via?}, {grant, scope?}
  by: unknown;
  /** `session`: a person chose Approve for this session (a session grant answers the like later). */
  scope: string | null;
  /** A posture or policy change settled the question while it waited. */
  redecided: boolean;
  /** The harness's option a person picked by id (through the API), when that was how it was answered: the harness got a once-answer all the same. */
  picked?: { optionId: string; kind: string } | null;
  /** An elicitation's action (`accept`, `decline`, `cancel`) and the content accepted. */
  action?: string;
  content?: unknown;
}
export interface QuestionItem extends Base {
  kind: 'question';
  permissionId: string | null;
  requestId: string | null;
  elicitation: boolean;
  message: string;
  toolCall: {
    toolCallId?: string;
    title?: string;
    kind?: string;
    [k: string]: any;
  } | null;
  options: { optionId: string; name: string; kind: string }[];
  call: any;
  requestedSchema: unknown;
  resolved: Resolution | null;
}
export interface NoticeItem extends Base {
  kind: 'notice';
  level: 'notice' | 'error';
  code: string;
  message: string;
  payload: any;
}
export interface PolicyItem extends Base {
  kind: 'policy';
  denied: boolean;
  payload: any;
}
export interface TurnEndItem extends Base {
  kind: 'turn_end';
  turnId: string | null;
  stopReason: string;
  durationMs: number | null;
  usage: { inputTokens?: number; outputTokens?: number; totalTokens?: number; [k: string]: unknown } | null;
  /** The turn's usage normalised across harnesses, with its own cost (src/usage.ts). */
  turn: TurnUsage | null;
}
export interface OtherItem extends Base {
  kind: 'other';
  type: string;
  payload: unknown;
}

export type Item =
  | PromptItem
  | MessageItem
  | ThoughtItem
  | ToolItem
  | QuestionItem
  | NoticeItem
  | PolicyItem
  | TurnEndItem
  | OtherItem;

export interface PlanEntry {
  content: string;
  status: string;
  priority?: string;
}

export interface SessionView {
  cursor: number;
  /** Events applied (equals `cursor` when the log was read from its start). */
  applied: number;
  items: Item[];
  plan: PlanEntry[] | null;
  planRev: number;
  usage: Record<string, unknown> | null;
  /** Each ended turn's normalised usage, in order (the session's totals sum these). */
  usageTracker: UsageTracker;
  /** The turn that runs: from its `prompt` to its `turn_end` (or an `error` ending it). */
  runningTurn: string | null;
  running: boolean;
  /** Questions asked and not yet answered, oldest first. */
  pending: QuestionItem[];
  /** Session-level state a harness reports (modes, commands, …), by update type. */
  meta: Record<string, unknown>;
  /** Keys of the items changed since the caller last cleared it. */
  changed: Set<string>;
  tools: Map<string, ToolItem>;
  questions: Map<string, QuestionItem>;
}

/** A view of the log after `after` (0: from its start). */
export function createView(after = 0): SessionView {
  return {
    cursor: after,
    applied: 0,
    items: [],
    plan: null,
    planRev: 0,
    usage: null,
    usageTracker: new UsageTracker(),
    runningTurn: null,
    running: false,
    pending: [],
    meta: {},
    changed: new Set(),
    tools: new Map(),
    questions: new Map(),
  };
}

export type ApplyResult = 'applied' | 'duplicate' | 'gap';

function truncationOf(ev: StoredEvent, payload: any): Truncation[] {
  if (!payload || typeof payload !== 'object') return [];
  if (!payload.truncated && !payload.nul_replaced) return [];
  return [
    {
      seq: ev.seq,
      url: typeof payload.full_payload === 'string' ? payload.full_payload : '',
      size: typeof payload.full_size_bytes === 'number' ? payload.full_size_bytes : null,
      fields: Array.isArray(payload.truncated_fields) ? payload.truncated_fields : [],
    },
  ];
}

/** The text of one ACP content block, as a conversation shows it. */
export function blockText(block: any): string {
  if (!block || typeof block !== 'object') return '';
  switch (block.type) {
    case 'text':
      return typeof block.text === 'string' ? block.text : '';
    case 'image':
      return `[image${block.mimeType ? ` ${block.mimeType}` : ''}]`;
    case 'audio':
      return `[audio${block.mimeType ? ` ${block.mimeType}` : ''}]`;
    case 'resource_link':
      return `[${block.name ?? block.uri ?? 'resource'}](${block.uri ?? ''})`;
    case 'resource':
      return block.resource?.text ?? `[resource ${block.resource?.uri ?? ''}]`;
    default:
      return '';
  }
}

function touch(view: SessionView, item: Item) {
  item.rev++;
  view.changed.add(item.key);
}

function push<T extends Item>(view: SessionView, item: T): T {
  view.items.push(item);
  view.changed.add(item.key);
  return item;
}

function base(ev: StoredEvent, truncated: Truncation[]) {
  return { key: `e${ev.seq}`, rev: 1, seq: ev.seq, at: ev.created_at, truncated };
}

/** Applies one stored event. */
export function apply(view: SessionView, ev: StoredEvent): ApplyResult {
  if (!ev || typeof ev.seq !== 'number') return 'duplicate';
  if (ev.seq <= view.cursor) return 'duplicate';
  if (ev.seq > view.cursor + 1) return 'gap';
  view.cursor = ev.seq;
  view.applied++;
  const p = ev.payload ?? {};
  const turnUsage = view.usageTracker.apply(ev);
  const trunc = truncationOf(ev, p);
  switch (ev.type) {
    case 'prompt': {
      const blocks = Array.isArray(p.prompt) ? p.prompt : [];
      const text = blocks.map(blockText).join('\n');
      push(view, { kind: 'prompt', ...base(ev, trunc), text, turnId: p.turn_id ?? null, origin: promptOrigin(p.origin) });
      view.runningTurn = p.turn_id ?? `seq-${ev.seq}`;
      view.running = true;
      break;
    }
    case 'update':
      applyUpdate(view, ev, p, trunc);
      break;
    case 'permission':
      applyPermission(view, ev, p, trunc);
      break;
    case 'permission_resolved':
      applyResolved(view, ev, p);
      break;
    case 'turn_end': {
      push(view, {
        kind: 'turn_end',
        ...base(ev, trunc),
        turnId: p.turn_id ?? null,
        stopReason: p.stop_reason ?? 'end_turn',
        durationMs: typeof p.duration_ms === 'number' ? p.duration_ms : null,
        usage: p.usage && typeof p.usage === 'object' ? p.usage : null,
        turn: turnUsage,
      });
      endTurn(view);
      break;
    }
    case 'error':
    case 'notice': {
      push(view, {
        kind: 'notice',
        ...base(ev, trunc),
        level: ev.type === 'error' ? 'error' : 'notice',
        code: String(p.code ?? ev.type),
        message: String(p.message ?? ''),
        payload: p,
      });
      // An error naming the turn ends it (no turn_end follows).
      if (ev.type === 'error' && p.turn_id && p.turn_id === view.runningTurn && p.code !== 'TURN_TIMEOUT') endTurn(view);
      break;
    }
    case 'policy_applied':
    case 'policy_denied':
      push(view, { kind: 'policy', ...base(ev, trunc), denied: ev.type === 'policy_denied', payload: p });
      break;
    default:
      push(view, { kind: 'other', ...base(ev, trunc), type: ev.type, payload: p });
  }
  return 'applied';
}

function endTurn(view: SessionView) {
  view.running = false;
  view.runningTurn = null;
}

function applyUpdate(view: SessionView, ev: StoredEvent, u: any, trunc: Truncation[]) {
  const kind: string = u.sessionUpdate ?? '';
  switch (kind) {
    case 'agent_message_chunk':
    case 'user_message_chunk':
    case 'agent_thought_chunk': {
      const text = u.content !== undefined ? blockText(u.content) : '';
      const messageId: string | null = typeof u.messageId === 'string' ? u.messageId : null;
      const last = view.items[view.items.length - 1];
      const isThought = kind === 'agent_thought_chunk';
      const role = kind === 'user_message_chunk' ? 'user' : 'agent';
      // A chunk that stands for a cut or excerpted payload without content still says so.
      const shown = text || (u.excerpt ? '[a large message: load the whole payload]' : '');
      if (isThought) {
        if (last && last.kind === 'thought' && (messageId === null || last.messageId === messageId)) {
          last.text += shown;
          last.chunks++;
          last.truncated.push(...trunc);
          touch(view, last);
        } else {
          push(view, { kind: 'thought', ...base(ev, trunc), messageId, text: shown, chunks: 1 });
        }
      } else if (
        last &&
        last.kind === 'message' &&
        last.role === role &&
        (messageId === null || last.messageId === null || last.messageId === messageId)
      ) {
        last.text += shown;
        last.chunks++;
        if (messageId) last.messageId = messageId;
        last.truncated.push(...trunc);
        touch(view, last);
      } else {
        push(view, { kind: 'message', ...base(ev, trunc), role, messageId, text: shown, chunks: 1 });
      }
      break;
    }
    case 'tool_call':
    case 'tool_call_update': {
      const id: string = String(u.toolCallId ?? `seq-${ev.seq}`);
      let tool = view.tools.get(id);
      if (!tool) {
        tool = push(view, {
          kind: 'tool',
          ...base(ev, []),
          toolCallId: id,
          title: '',
          toolKind: 'other',
          status: 'pending',
          locations: [],
          content: [],
          rawInput: undefined,
          rawOutput: undefined,
          terminalOutput: '',
          terminalExit: null,
          updates: 0,
        });
        view.tools.set(id, tool);
      } else {
        touch(view, tool);
      }
      if (typeof u.title === 'string') tool.title = u.title;
      if (typeof u.kind === 'string') tool.toolKind = u.kind;
      if (typeof u.status === 'string') tool.status = u.status;
      if (Array.isArray(u.locations)) tool.locations = u.locations;
      if (Array.isArray(u.content)) tool.content = u.content;
      if ('rawInput' in u) tool.rawInput = u.rawInput;
      if ('rawOutput' in u) tool.rawOutput = u.rawOutput;
      const meta = u._meta ?? {};
      // Both keys carry chunks to append (the TypeScript codex-acp and claude-agent-acp send
      // `terminal_output_delta`, the Rust codex-acp `terminal_output`).
      if (meta.terminal_output_delta && typeof meta.terminal_output_delta.data === 'string') {
        tool.terminalOutput += meta.terminal_output_delta.data;
      } else if (meta.terminal_output && typeof meta.terminal_output.data === 'string') {
        tool.terminalOutput += meta.terminal_output.data;
      }
      if (meta.terminal_exit && typeof meta.terminal_exit === 'object') {
        tool.terminalExit = { exitCode: meta.terminal_exit.exit_code ?? null, signal: meta.terminal_exit.signal ?? null };
      }
      tool.updates++;
      tool.truncated.push(...trunc);
      break;
    }
    case 'plan': {
      view.plan = Array.isArray(u.entries) ? u.entries : [];
      view.planRev++;
      break;
    }
    case 'usage_update':
      view.usage = u;
      break;
    case 'available_commands_update':
    case 'current_mode_update':
    case 'config_option_update':
    case 'session_info_update':
      view.meta[kind] = u;
      break;
    default:
      push(view, { kind: 'other', ...base(ev, trunc), type: kind || 'update', payload: u });
  }
}

function applyPermission(view: SessionView, ev: StoredEvent, p: any, trunc: Truncation[]) {
  const elicitation = p.kind === 'elicitation';
  const toolCall = elicitation ? null : (p.tool_call ?? null);
  const q = push(view, {
    kind: 'question',
    ...base(ev, trunc),
    permissionId: p.permission_id ?? null,
    requestId: p.request_id != null ? String(p.request_id) : null,
    elicitation,
    message: elicitation ? String(p.message ?? '') : '',
    toolCall,
    options: Array.isArray(p.options) ? p.options : [],
    call: p.call ?? null,
    requestedSchema: p.requested_schema ?? null,
    resolved: null,
  } as QuestionItem);
  if (q.permissionId) view.questions.set(`p:${q.permissionId}`, q);
  if (q.requestId) view.questions.set(`r:${q.requestId}`, q);
  view.pending.push(q);
  // The tool card shows that it waits.
  const tid = toolCall?.toolCallId;
  if (tid && view.tools.has(tid)) touch(view, view.tools.get(tid)!);
}

function applyResolved(view: SessionView, ev: StoredEvent, p: any) {
  const q =
    (p.permission_id && view.questions.get(`p:${p.permission_id}`)) ||
    (p.request_id != null && view.questions.get(`r:${String(p.request_id)}`)) ||
    null;
  const outcome: any = p.outcome;
  const res: Resolution = {
    outcome: typeof outcome === 'string' ? outcome : (outcome?.outcome ?? null),
    optionKind: p.option_kind ?? null,
    optionId: typeof outcome === 'object' && outcome ? (outcome.optionId ?? null) : null,
    by: p.by ?? null,
    scope: typeof p.scope === 'string' ? p.scope : null,
    redecided: p.redecided === true,
    picked: p.picked && typeof p.picked === 'object' ? { optionId: String(p.picked.option_id ?? ''), kind: String(p.picked.kind ?? '') } : null,
    action: p.action,
    content: p.content ?? undefined,
  };
  if (!q) {
    // Answered before this page's view began (it started mid-log): a note is enough.
    push(view, { kind: 'other', ...base(ev, []), type: 'permission_resolved', payload: p });
    return;
  }
  q.resolved = res;
  touch(view, q);
  view.pending = view.pending.filter((x) => x !== q);
}

/** Clears and returns the keys changed since the last call. */
export function takeChanged(view: SessionView): Set<string> {
  const changed = view.changed;
  view.changed = new Set();
  return changed;
}

/** Who or what prompted, in words: a person, an API token, a schedule, a webhook or an agent. */
export function promptOrigin(origin: unknown): string | null {
  if (!origin || typeof origin !== 'object') return null;
  const o = origin as any;
  const id = typeof o.id === 'string' ? o.id.slice(0, 8) : '?';
  switch (o.kind) {
    case 'user':
      return `user ${id}`;
    case 'token':
      return typeof o.user_id === 'string' ? `API token ${id} of user ${o.user_id.slice(0, 8)}` : `API token ${id}`;
    case 'schedule':
      return `schedule ${id}`;
    case 'webhook':
      return `webhook ${id}`;
    case 'agent':
      return typeof o.depth === 'number' ? `agent ${id} (chain depth ${o.depth})` : `agent ${id}`;
    default:
      return null;
  }
}

/** Who or what answered a question, in words (`you` for the reader). */
export function answeredBy(by: unknown, me: string | null): string {
  if (by === 'auto') return 'the autonomous posture';
  if (by === 'cancel') return 'a cancel';
  if (by === 'default') return "the policy's default";
  if (by === 'person') return 'a person';
  if (by === 'truncated') return 'a person (the call was too long to judge by rule)';
  if (typeof by === 'string') {
    const m = /^policy:(server|agent):(\d+)$/.exec(by);
    if (m) return m[1] === 'server' ? `the server's rule ${m[2]}` : `the agent's rule ${m[2]}`;
    return by.startsWith('policy:') ? `rule ${by.slice(7)}` : by;
  }
  if (by && typeof by === 'object') {
    const b = by as any;
    if (b.grant) return b.scope === 'session' ? 'a session grant' : 'a one-shot grant';
    if (b.user_id) {
      const who = me && b.user_id === me ? 'you' : `user ${String(b.user_id).slice(0, 8)}`;
      return b.via === 'reply' ? `${who}, in a reply` : who;
    }
  }
  return 'unknown';
}

/** What an answered question says: its decision (a stable word for tests and styles), a label and who or what decided. */
export interface ResolutionText {
  decision: 'allow' | 'allow_for_session' | 'deny' | 'cancelled' | 'answered' | 'declined' | 'unknown';
  label: string;
  /** Who or what decided: "by …", "— decided by …" or "(the turn was cancelled)". */
  detail: string;
}

/** How an answered question reads: "Approved by you", "Approved for this session by you", "Denied by the agent's rule 2", "Approved by a session grant", "Approved — decided by the new posture". */
export function describeResolution(
  r: Resolution,
  q: { elicitation: boolean; options: { optionId: string; kind: string; name?: string }[] },
  me: string | null,
): ResolutionText {
  const who = answeredBy(r.by, me);
  if (r.by === 'cancel' || r.outcome === 'cancelled' || r.action === 'cancel')
    return { decision: 'cancelled', label: 'Cancelled', detail: r.by === 'cancel' ? '(the turn was cancelled)' : `by ${who}` };
  if (q.elicitation) {
    if (r.action === 'accept') return { decision: 'answered', label: 'Answered', detail: `by ${who}` };
    if (r.action === 'decline') return { decision: 'declined', label: 'Declined', detail: `by ${who}` };
    return { decision: 'unknown', label: r.action ?? 'Answered', detail: `by ${who}` };
  }
  // The kind of the option sent; an older event without it names the option.
  const kind = r.optionKind ?? q.options.find((o) => o.optionId === r.optionId)?.kind ?? '';
  const allowed = kind.startsWith('allow');
  if (!allowed && !kind.startsWith('reject')) return { decision: 'unknown', label: r.outcome ?? 'Answered', detail: `by ${who}` };
  // Older logs: the harness's own "always" options, chosen before agenthold kept to its own three.
  const always = kind.endsWith('_always') ? ' (the harness’s “always” option)' : '';
  if (r.redecided) {
    const what = r.by === 'auto' || r.by === 'person' ? 'the new posture' : `the new policy (${who})`;
    return { decision: allowed ? 'allow' : 'deny', label: allowed ? 'Approved' : 'Denied', detail: `— decided by ${what}` };
  }
  if (r.picked?.kind.endsWith('_always')) {
    // Picked the harness's "always" option by id: agenthold answered once and keeps asking.
    const name = q.options.find((o) => o.optionId === r.picked!.optionId)?.name ?? r.picked.optionId;
    return { decision: allowed ? 'allow' : 'deny', label: allowed ? 'Approved' : 'Denied', detail: `by ${who} (picked “${name}”; answered once)` };
  }
  // A grant's own answer carries the scope of the grant, not a new "for this session".
  const byGrant = !!r.by && typeof r.by === 'object' && !!(r.by as any).grant;
  if (allowed && r.scope === 'session' && !byGrant) return { decision: 'allow_for_session', label: 'Approved for this session', detail: `by ${who}` };
  return { decision: allowed ? 'allow' : 'deny', label: (allowed ? 'Approved' : 'Denied') + always, detail: `by ${who}` };
}
