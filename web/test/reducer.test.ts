import { describe, expect, it } from 'vitest';
import {
  answeredBy,
  apply,
  promptOrigin,
  type PromptItem,
  createView,
  takeChanged,
  type MessageItem,
  type QuestionItem,
  type StoredEvent,
  type ToolItem,
} from '../src/reducer';

let seq = 0;
function ev(type: string, payload: unknown): StoredEvent {
  seq += 1;
  return { seq, type, payload, session_id: 's', created_at: '2026-12-01T00:00:00Z' };
}
const upd = (u: Record<string, unknown>) => ev('update', u);
const chunk = (text: string, extra: Record<string, unknown> = {}) =>
  upd({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text }, ...extra });

function fresh() {
  seq = 0;
  return createView();
}

describe('cursor', () => {
  it('applies each seq once, in order; drops duplicates; refuses gaps', () => {
    const v = fresh();
    const a = chunk('a');
    const b = chunk('b');
    const c = chunk('c');
    expect(apply(v, a)).toBe('applied');
    expect(apply(v, a)).toBe('duplicate');
    expect(apply(v, c)).toBe('gap');
    expect(v.cursor).toBe(1);
    expect(apply(v, b)).toBe('applied');
    expect(apply(v, c)).toBe('applied');
    expect(apply(v, b)).toBe('duplicate');
    expect(v.cursor).toBe(3);
    expect(v.applied).toBe(3);
    expect((v.items[0] as MessageItem).text).toBe('abc');
  });

  it('a reconnect that replays an overlap changes nothing', () => {
    const v = fresh();
    const events = [ev('prompt', { turn_id: 't', prompt: [{ type: 'text', text: 'hi' }] }), chunk('x'), chunk('y')];
    for (const e of events) apply(v, e);
    const before = JSON.stringify(v.items);
    for (const e of events) expect(apply(v, e)).toBe('duplicate');
    expect(JSON.stringify(v.items)).toBe(before);
  });

  it('can start after a known point of the log', () => {
    const v = createView(10);
    expect(apply(v, { seq: 11, type: 'update', payload: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'z' } } })).toBe('applied');
    expect(apply(v, { seq: 13, type: 'notice', payload: {} })).toBe('gap');
  });
});

describe('messages', () => {
  it('merges adjacent chunks into one growing message and re-renders only it', () => {
    const v = fresh();
    apply(v, ev('prompt', { turn_id: 't1', prompt: [{ type: 'text', text: 'go' }] }));
    apply(v, chunk('Hel'));
    takeChanged(v);
    apply(v, chunk('lo'));
    const changed = takeChanged(v);
    expect(v.items).toHaveLength(2);
    expect((v.items[1] as MessageItem).text).toBe('Hello');
    expect((v.items[1] as MessageItem).chunks).toBe(2);
    expect([...changed]).toEqual([v.items[1].key]);
  });

  it('a tool call between chunks starts a new message; messageId splits messages', () => {
    const v = fresh();
    apply(v, chunk('one'));
    apply(v, upd({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'ls', kind: 'execute', status: 'pending' }));
    apply(v, chunk('two', { messageId: 'm1' }));
    apply(v, chunk('three', { messageId: 'm2' }));
    const texts = v.items.filter((i) => i.kind === 'message').map((i) => (i as MessageItem).text);
    expect(texts).toEqual(['one', 'two', 'three']);
  });

  it('thoughts merge on their own; user chunks are the user role', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hm' } }));
    apply(v, upd({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'm' } }));
    apply(v, upd({ sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'u' } }));
    expect(v.items.map((i) => i.kind)).toEqual(['thought', 'message']);
    expect(v.items[0]).toMatchObject({ text: 'hmm' });
    expect(v.items[1]).toMatchObject({ role: 'user', text: 'u' });
  });

  it('a flood of 10,000 chunks stays one item with every chunk once', () => {
    const v = fresh();
    for (let i = 1; i <= 10000; i++) apply(v, chunk(`flood ${i}`));
    expect(v.items).toHaveLength(1);
    const nums = [...(v.items[0] as MessageItem).text.matchAll(/flood (\d+)/g)].map((m) => Number(m[1]));
    expect(nums).toHaveLength(10000);
    expect(nums.every((n, i) => n === i + 1)).toBe(true);
  });
});

describe('tool calls', () => {
  it('upserts by toolCallId, replacing fields (not appending)', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'tool_call', toolCallId: 'c1', title: 'Write a.txt', kind: 'edit', status: 'pending' }));
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 'c1', status: 'in_progress', content: [{ type: 'content', content: { type: 'text', text: 'A' } }] }));
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 'c1', title: 'Wrote a.txt', status: 'completed', content: [{ type: 'diff', path: '/w/a.txt', oldText: null, newText: 'x\n' }] }));
    expect(v.items).toHaveLength(1);
    const t = v.items[0] as ToolItem;
    expect(t.title).toBe('Wrote a.txt');
    expect(t.toolKind).toBe('edit');
    expect(t.status).toBe('completed');
    expect(t.content).toEqual([{ type: 'diff', path: '/w/a.txt', oldText: null, newText: 'x\n' }]);
    expect(t.updates).toBe(3);
  });

  it('an update for an unknown id makes the card', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 'zz', status: 'completed', rawOutput: { exitCode: 0 } }));
    expect(v.items[0]).toMatchObject({ kind: 'tool', toolCallId: 'zz', status: 'completed', rawOutput: { exitCode: 0 } });
  });

  it('collects terminal output deltas', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'tool_call', toolCallId: 't', kind: 'execute', _meta: { terminal_output_delta: { data: 'a' } } }));
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 't', _meta: { terminal_output_delta: { data: '\u001b[31mb' } } }));
    expect((v.items[0] as ToolItem).terminalOutput).toBe('a\u001b[31mb');
  });

  it('the Rust codex-acp key appends too, and the exit is kept', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'tool_call', toolCallId: 't', kind: 'execute', content: [{ type: 'terminal', terminalId: 'x' }] }));
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 't', _meta: { terminal_output: { terminal_id: 'x', data: 'one ' } } }));
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 't', _meta: { terminal_output: { terminal_id: 'x', data: 'two' } } }));
    apply(v, upd({ sessionUpdate: 'tool_call_update', toolCallId: 't', status: 'completed', _meta: { terminal_exit: { terminal_id: 'x', exit_code: 2, signal: null } } }));
    const t = v.items[0] as ToolItem;
    expect(t.terminalOutput).toBe('one two');
    expect(t.terminalExit).toEqual({ exitCode: 2, signal: null });
  });
});

describe('plan, usage, unknown variants', () => {
  it('each plan replaces the last, outside the timeline', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'plan', entries: [{ content: 'A', status: 'in_progress' }, { content: 'B', status: 'pending' }] }));
    apply(v, upd({ sessionUpdate: 'plan', entries: [{ content: 'B', status: 'completed' }] }));
    expect(v.plan).toEqual([{ content: 'B', status: 'completed' }]);
    expect(v.planRev).toBe(2);
    expect(v.items).toHaveLength(0);
  });

  it('usage goes to the header; an unknown variant is kept as an item', () => {
    const v = fresh();
    apply(v, upd({ sessionUpdate: 'usage_update', used: 10, size: 100 }));
    apply(v, upd({ sessionUpdate: 'fakeagent_future_variant', detail: 'x' }));
    expect(v.usage).toMatchObject({ used: 10 });
    expect(v.items[0]).toMatchObject({ kind: 'other', type: 'fakeagent_future_variant' });
  });
});

describe('turns and questions', () => {
  it('running comes from the log: prompt starts, turn_end ends, with duration and tokens', () => {
    const v = fresh();
    apply(v, ev('prompt', { turn_id: 't1', prompt: [{ type: 'text', text: 'go' }] }));
    expect(v.running).toBe(true);
    apply(v, ev('turn_end', { turn_id: 't1', stop_reason: 'end_turn', duration_ms: 1234, usage: { inputTokens: 100, outputTokens: 20, totalTokens: 120 } }));
    expect(v.running).toBe(false);
    expect(v.items[1]).toMatchObject({ kind: 'turn_end', durationMs: 1234, usage: { totalTokens: 120 } });
  });

  it('an error that names the turn ends it', () => {
    const v = fresh();
    apply(v, ev('prompt', { turn_id: 't1', prompt: [] }));
    apply(v, ev('error', { turn_id: 't1', code: 'HARNESS_EXITED', message: 'gone' }));
    expect(v.running).toBe(false);
    expect(v.items[1]).toMatchObject({ kind: 'notice', level: 'error', code: 'HARNESS_EXITED' });
  });

  it('a question waits until its permission_resolved, which says who answered', () => {
    const v = fresh();
    apply(v, ev('prompt', { turn_id: 't1', prompt: [] }));
    apply(v, upd({ sessionUpdate: 'tool_call', toolCallId: 'call-1', title: 'rm -rf build/', kind: 'execute', status: 'pending' }));
    apply(v, ev('permission', {
      request_id: 'fa-req-1',
      permission_id: 'p1',
      tool_call: { toolCallId: 'call-1', title: 'rm -rf build/', kind: 'execute' },
      options: [
        { optionId: 'allow-once', name: 'Allow once', kind: 'allow_once' },
        { optionId: 'reject-once', name: 'Reject', kind: 'reject_once' },
      ],
      posture: 'approval',
      call: { effect: 'exec', command: 'rm -rf build/' },
    }));
    expect(v.pending).toHaveLength(1);
    const q = v.items[2] as QuestionItem;
    expect(q.options.map((o) => o.name)).toEqual(['Allow once', 'Reject']);
    apply(v, ev('permission_resolved', { request_id: 'fa-req-1', permission_id: 'p1', outcome: { outcome: 'selected', optionId: 'allow-once' }, option_kind: 'allow_once', by: { user_id: 'u1' } }));
    expect(v.pending).toHaveLength(0);
    expect(q.resolved).toMatchObject({ outcome: 'selected', optionKind: 'allow_once', optionId: 'allow-once' });
    expect(answeredBy(q.resolved!.by, 'u1')).toBe('you');
    expect(answeredBy({ user_id: 'u2', via: 'reply' }, 'u1')).toBe('user u2, in a reply');
    expect(answeredBy('auto', null)).toBe('the autonomous posture');
    expect(answeredBy('policy:server:0', null)).toBe("the server's rule 0");
    expect(answeredBy('policy:agent:2', null)).toBe("the agent's rule 2");
    expect(answeredBy({ grant: 'g1', scope: 'session' }, null)).toBe('a session grant');
    expect(answeredBy({ grant: 'g1' }, null)).toBe('a one-shot grant');
  });

  it('elicitations are questions too', () => {
    const v = fresh();
    apply(v, ev('permission', { kind: 'elicitation', request_id: 7, permission_id: 'p2', message: 'Your name?', requested_schema: { type: 'object' } }));
    expect(v.items[0]).toMatchObject({ kind: 'question', elicitation: true, message: 'Your name?', requestId: '7' });
    apply(v, ev('permission_resolved', { kind: 'elicitation', request_id: 7, permission_id: 'p2', action: 'accept', by: { user_id: 'u' } }));
    expect(v.pending).toHaveLength(0);
  });
});

describe('truncation and policy', () => {
  it('keeps where the whole payload is', () => {
    const v = fresh();
    apply(v, chunk('head…tail', { truncated: true, truncated_fields: ['content.text'], full_payload: '/api/v1/sessions/s/events/1/payload', full_size_bytes: 400063 }));
    expect((v.items[0] as MessageItem).truncated).toEqual([{ seq: 1, url: '/api/v1/sessions/s/events/1/payload', size: 400063, fields: ['content.text'] }]);
  });

  it('policy events are items', () => {
    const v = fresh();
    apply(v, ev('policy_applied', { posture: 'guarded', rules: [], default: 'ask' }));
    apply(v, ev('policy_denied', { by: 'policy:agent:0', rule: {}, effect: 'write', detail: { paths: ['/etc/x'] } }));
    expect(v.items.map((i) => i.kind)).toEqual(['policy', 'policy']);
    expect(v.items[1]).toMatchObject({ denied: true });
  });
});

describe('prompt origin', () => {
  it('says who or what prompted, and nothing for an event without an origin', () => {
    const v = fresh();
    apply(v, ev('prompt', { turn_id: 't1', prompt: [{ type: 'text', text: 'hi' }], origin: { kind: 'schedule', id: 'abcdef0123', run_id: 'r' } }));
    const item = v.items[v.items.length - 1] as PromptItem;
    expect(item.origin).toBe('schedule abcdef01');
    expect(promptOrigin({ kind: 'token', id: '11112222333', user_id: '99998888777' })).toBe('API token 11112222 of user 99998888');
    expect(promptOrigin({ kind: 'agent', id: 'aaaabbbbcc', depth: 2 })).toBe('agent aaaabbbb (chain depth 2)');
    expect(promptOrigin({ kind: 'webhook', id: 'wwwwxxxxyy' })).toBe('webhook wwwwxxxx');
    expect(promptOrigin({ kind: 'user', id: 'uuuuvvvvzz' })).toBe('user uuuuvvvv');
    expect(promptOrigin({ kind: 'martian', id: 'x' })).toBeNull();
    expect(promptOrigin(undefined)).toBeNull();
  });
});
