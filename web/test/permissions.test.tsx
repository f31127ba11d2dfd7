// @vitest-environment happy-dom
//
// The gate's answers, clicked: a permission question offers exactly Approve, Approve for this
// session and Deny whatever the harness offered (Claude Code, Codex and OpenCode offer their own
// "always" options: never sent), and posts `{decision}`; the agent's own question (an
// elicitation) shows its schema's choices, checkbox and numbers and posts `{content}`; an answered
// question says what was decided and by what; the session's grants list and Revoke.
import { render } from 'preact';
import { act } from 'preact/test-utils';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { contentOf, fieldsOf, initialValues } from '../src/elicitation';
import { GrantList, SessionGrants } from '../src/grants';
import { ElicitationForm, ItemView, type ItemContext } from '../src/items';
import { apply, createView, describeResolution, type QuestionItem, type Resolution, type StoredEvent } from '../src/reducer';
import type { SessionGrant } from '../src/types';
import claudeCode from './fixtures/claude-code.json';
import codex from './fixtures/codex.json';
import opencode from './fixtures/opencode.json';

const FIXTURES: Record<string, { events: StoredEvent[] }> = { 'claude-code': claudeCode, codex, opencode };
const ctx: ItemContext = { meId: 'me-1', canAnswer: true, waitingTools: new Set() };

/** The fixture's log up to its first question, so the question waits. */
function waitingQuestion(name: string): QuestionItem {
  const view = createView();
  for (const ev of structuredClone(FIXTURES[name].events)) {
    apply(view, ev);
    if (ev.type === 'permission') break;
  }
  expect(view.pending).toHaveLength(1);
  return view.pending[0];
}

interface Call {
  method: string;
  path: string;
  body: unknown;
}
let calls: Call[] = [];
/** What the stubbed server answers: status and body by "METHOD path". */
let answers: Record<string, { status: number; body?: unknown }> = {};
let root: HTMLElement;

beforeEach(() => {
  calls = [];
  answers = {};
  vi.useFakeTimers();
  vi.stubGlobal('fetch', async (path: string, init: RequestInit = {}) => {
    const method = init.method ?? 'GET';
    calls.push({ method, path, body: init.body ? JSON.parse(String(init.body)) : undefined });
    const a = answers[`${method} ${path}`] ?? { status: 200, body: {} };
    const text = a.body === undefined ? '' : JSON.stringify(a.body);
    return { ok: a.status < 300, status: a.status, statusText: String(a.status), text: async () => text };
  });
  root = document.createElement('div');
  document.body.appendChild(root);
});

afterEach(() => {
  render(null, root);
  root.remove();
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

async function show(node: preact.ComponentChildren) {
  await act(async () => {
    render(node, root);
  });
  // The answers arm 0.6 s after they appear.
  await act(async () => {
    vi.advanceTimersByTime(700);
  });
}

async function click(el: Element | null) {
  expect(el).not.toBeNull();
  await act(async () => {
    (el as HTMLElement).click();
    await vi.runAllTimersAsync();
  });
}

const buttons = () => [...root.querySelectorAll<HTMLButtonElement>('.answers button')];

describe("a permission question: agenthold's three answers, never the harness's options", () => {
  for (const name of ['claude-code', 'codex', 'opencode']) {
    it(`${name}: Approve, Approve for this session, Deny — though it offered ${FIXTURES[name].events.find((e) => e.type === 'permission')!.payload.options.map((o: any) => o.kind).join(', ')}`, async () => {
      const q = waitingQuestion(name);
      expect(q.options.some((o) => o.kind === 'allow_always')).toBe(true);
      await show(<ItemView item={q} rev={q.rev} ctx={ctx} waiting={false} live={false} />);
      expect(buttons().map((b) => b.textContent)).toEqual(['Approve', 'Approve for this session', 'Deny']);
      expect(buttons().map((b) => b.dataset.decision)).toEqual(['allow', 'allow_for_session', 'deny']);
      expect(root.querySelector('[data-option]')).toBeNull();
      // The harness's names are a muted line, not buttons.
      const offered = root.querySelector('.offered')!;
      for (const o of q.options) {
        expect(offered.textContent).toContain(o.name);
        expect(buttons().some((b) => b.textContent === o.name)).toBe(false);
      }
      expect(offered.querySelector('button, a, input')).toBeNull();
    });
  }

  it('the buttons arm only after 0.6 s', async () => {
    const q = waitingQuestion('claude-code');
    await act(async () => {
      render(<ItemView item={q} rev={q.rev} ctx={ctx} waiting={false} live={false} />, root);
    });
    expect(buttons().every((b) => b.disabled)).toBe(true);
    await act(async () => {
      vi.advanceTimersByTime(700);
    });
    expect(buttons().every((b) => !b.disabled)).toBe(true);
  });

  for (const decision of ['allow', 'allow_for_session', 'deny'])
    it(`${decision} posts {"decision": "${decision}"} to the question's answer route`, async () => {
      const q = waitingQuestion('claude-code');
      await show(<ItemView item={q} rev={q.rev} ctx={ctx} waiting={false} live={false} />);
      await click(root.querySelector(`.answers button[data-decision="${decision}"]`));
      expect(calls).toEqual([{ method: 'POST', path: `/api/v1/permissions/${q.permissionId}/answer`, body: { decision } }]);
    });

  it('a second answer says someone answered first', async () => {
    const q = waitingQuestion('opencode');
    answers[`POST /api/v1/permissions/${q.permissionId}/answer`] = { status: 409, body: { error: { code: 'ALREADY_ANSWERED', message: 'answered' } } };
    await show(<ItemView item={q} rev={q.rev} ctx={ctx} waiting={false} live={false} />);
    await click(root.querySelector('.answers button[data-decision="deny"]'));
    expect(root.querySelector('[role="alert"]')?.textContent).toBe('Someone answered it first.');
  });

  it('a viewer sees no buttons', async () => {
    const q = waitingQuestion('codex');
    await show(<ItemView item={q} rev={q.rev} ctx={{ ...ctx, canAnswer: false }} waiting={false} live={false} />);
    expect(buttons()).toHaveLength(0);
    expect(root.textContent).toContain("Waiting for an operator's answer.");
  });
});

describe('how an answered question reads', () => {
  const q = { elicitation: false, options: [] as { optionId: string; kind: string }[] };
  const r = (over: Partial<Resolution>): Resolution => ({ outcome: 'selected', optionKind: 'allow_once', optionId: null, by: { user_id: 'me-1' }, scope: null, redecided: false, ...over });
  const read = (over: Partial<Resolution>) => {
    const t = describeResolution(r(over), q, 'me-1');
    return `${t.label} ${t.detail}`;
  };

  it('approved, approved for this session, denied — by whom', () => {
    expect(read({})).toBe('Approved by you');
    expect(read({ scope: 'session' })).toBe('Approved for this session by you');
    expect(read({ optionKind: 'reject_once' })).toBe('Denied by you');
    expect(read({ optionKind: 'reject_once', by: { user_id: 'someone-else' } })).toBe('Denied by user someone-');
    expect(read({ by: { user_id: 'me-1', via: 'reply' } })).toBe('Approved by you, in a reply');
    expect(read({ by: 'auto' })).toBe('Approved by the autonomous posture');
    expect(read({ by: 'policy:server:0', optionKind: 'reject_once' })).toBe("Denied by the server's rule 0");
    expect(read({ by: 'default' })).toBe("Approved by the policy's default");
    expect(describeResolution(r({ scope: 'session' }), q, 'me-1').decision).toBe('allow_for_session');
  });

  it('by a grant: the session grant an earlier "for this session" made, or a parked turn\'s one-shot grant', () => {
    expect(read({ by: { grant: 'g-1', scope: 'session' } })).toBe('Approved by a session grant');
    expect(read({ by: { grant: 'g-1', scope: 'session' }, scope: 'session' })).toBe('Approved by a session grant');
    expect(read({ by: { grant: 'g-2' } })).toBe('Approved by a one-shot grant');
  });

  it('settled by a posture or policy change while it waited', () => {
    expect(read({ by: 'auto', redecided: true })).toBe('Approved — decided by the new posture');
    expect(read({ by: 'policy:agent:2', optionKind: 'reject_once', redecided: true })).toBe("Denied — decided by the new policy (the agent's rule 2)");
    expect(read({ by: 'default', redecided: true })).toBe("Approved — decided by the new policy (the policy's default)");
  });

  it('cancelled; an older log that names the option, or chose a harness "always" option', () => {
    expect(describeResolution(r({ outcome: 'cancelled', optionKind: null, by: 'cancel' }), q, null)).toMatchObject({ decision: 'cancelled', label: 'Cancelled' });
    const old = { elicitation: false, options: [{ optionId: 'rej', kind: 'reject_once' }] };
    expect(describeResolution(r({ optionKind: null, optionId: 'rej' }), old, 'me-1').label).toBe('Denied');
    expect(read({ optionKind: 'allow_always' })).toBe('Approved (the harness’s “always” option) by you');
    // Through the API, a person picked the harness's "always" option by id: the harness got a once-answer.
    const opts = { elicitation: false, options: [{ optionId: 'always', name: 'Always allow', kind: 'allow_always' }] };
    const t = describeResolution(r({ picked: { optionId: 'always', kind: 'allow_always' } }), opts, 'me-1');
    expect(`${t.label} ${t.detail}`).toBe('Approved by you (picked “Always allow”; answered once)');
  });

  it('in the card, with a stable data-decision', async () => {
    const view = createView();
    apply(view, { seq: 1, type: 'permission', payload: { permission_id: 'p1', request_id: 1, options: [], tool_call: { title: 'Write a' } } });
    apply(view, { seq: 2, type: 'permission_resolved', payload: { permission_id: 'p1', request_id: 1, outcome: { outcome: 'selected', optionId: 'x' }, option_kind: 'allow_once', by: { user_id: 'me-1' }, scope: 'session' } });
    apply(view, { seq: 3, type: 'permission', payload: { permission_id: 'p2', request_id: 2, options: [], tool_call: { title: 'Write b' } } });
    apply(view, { seq: 4, type: 'permission_resolved', payload: { permission_id: 'p2', request_id: 2, outcome: { outcome: 'selected', optionId: 'x' }, option_kind: 'allow_once', by: { grant: 'g1', scope: 'session' } } });
    const [a, b] = view.items as QuestionItem[];
    await show(
      <>
        <ItemView item={a} rev={a.rev} ctx={ctx} waiting={false} live={false} />
        <ItemView item={b} rev={b.rev} ctx={ctx} waiting={false} live={false} />
      </>,
    );
    const res = [...root.querySelectorAll<HTMLElement>('.resolution')];
    expect(res.map((e) => e.textContent)).toEqual(['Approved for this session by you', 'Approved by a session grant']);
    expect(res.map((e) => e.dataset.decision)).toEqual(['allow_for_session', 'allow']);
  });

  it("an elicitation: answered (with what) or declined", async () => {
    const view = createView();
    apply(view, { seq: 1, type: 'permission', payload: { kind: 'elicitation', permission_id: 'p1', request_id: 1, message: 'Name?', requested_schema: {} } });
    apply(view, { seq: 2, type: 'permission_resolved', payload: { kind: 'elicitation', permission_id: 'p1', request_id: 1, action: 'accept', content: { answer: 'Ada' }, by: { user_id: 'me-1' } } });
    apply(view, { seq: 3, type: 'permission', payload: { kind: 'elicitation', permission_id: 'p2', request_id: 2, message: 'Age?', requested_schema: {} } });
    apply(view, { seq: 4, type: 'permission_resolved', payload: { kind: 'elicitation', permission_id: 'p2', request_id: 2, action: 'decline', by: { user_id: 'u-2' } } });
    const [a, b] = view.items as QuestionItem[];
    await show(
      <>
        <ItemView item={a} rev={a.rev} ctx={ctx} waiting={false} live={false} />
        <ItemView item={b} rev={b.rev} ctx={ctx} waiting={false} live={false} />
      </>,
    );
    expect([...root.querySelectorAll('.resolution')].map((e) => e.textContent)).toEqual(['Answered by you: answer: Ada', 'Declined by user u-2']);
  });
});

/** A question with an untitled enum, a titled oneOf, a checkbox and a bounded integer. */
const SCHEMA = {
  type: 'object',
  properties: {
    release: { type: 'string', title: 'Which release?', enum: ['stable', 'beta'] },
    channel: { type: 'string', title: 'Channel', oneOf: [{ const: 'ch-1', title: 'Channel one' }, { const: 'ch-2', title: 'Channel two' }] },
    notify: { type: 'boolean', title: 'Tell the team' },
    count: { type: 'integer', title: 'How many', minimum: 1, maximum: 5 },
    note: { type: 'string', title: 'Note', description: 'Anything else' },
  },
  required: ['release', 'channel'],
};

describe("the agent's own question (an elicitation): its schema as a form", () => {
  it('reads the fields', () => {
    const fields = fieldsOf(SCHEMA)!;
    expect(fields.map((f) => [f.name, f.kind, f.required])).toEqual([
      ['release', 'choice', true],
      ['channel', 'choice', true],
      ['notify', 'boolean', false],
      ['count', 'number', false],
      ['note', 'text', false],
    ]);
    expect(fields[1]).toMatchObject({ choices: [{ value: 'ch-1', title: 'Channel one' }, { value: 'ch-2', title: 'Channel two' }] });
    expect(fieldsOf(null)).toBeNull();
    expect(fieldsOf({ type: 'object' })).toBeNull();
    // Multi-select: an array of an enum, or of anyOf titles.
    const [multi] = fieldsOf({ type: 'object', properties: { tags: { type: 'array', items: { anyOf: [{ const: 'a', title: 'A' }] }, default: ['a', 'zz'] } } })!;
    expect(multi).toMatchObject({ kind: 'multi', choices: [{ value: 'a', title: 'A' }], initial: ['a'] });
  });

  it('checks what was put in before posting', () => {
    const fields = fieldsOf(SCHEMA)!;
    const v = initialValues(fields);
    expect(contentOf(fields, v)).toEqual({ error: 'Which release?: choose one' });
    expect(contentOf(fields, { ...v, release: 'beta', channel: 'ch-1', count: '7' })).toEqual({ error: 'How many: between 1 and 5' });
    expect(contentOf(fields, { ...v, release: 'beta', channel: 'ch-1', count: '2.5' })).toEqual({ error: 'How many: a whole number is needed' });
    expect(contentOf(fields, { ...v, release: 'beta', channel: 'ch-1' })).toEqual({ content: { release: 'beta', channel: 'ch-1', notify: false } });
  });

  it('choices are radio buttons with their titles, not a text box; a boolean a checkbox; a number a number box', async () => {
    await show(<ElicitationForm permissionId="p9" schema={SCHEMA} />);
    const release = root.querySelector('[data-field="release"]')!;
    expect(release.tagName).toBe('FIELDSET');
    expect([...release.querySelectorAll('label')].map((l) => l.textContent?.trim())).toEqual(['stable', 'beta']);
    expect(release.querySelectorAll('input[type="radio"]')).toHaveLength(2);
    expect(release.querySelector('input[type="text"], input:not([type])')).toBeNull();
    const channel = root.querySelector('[data-field="channel"]')!;
    expect([...channel.querySelectorAll('label')].map((l) => l.textContent?.trim())).toEqual(['Channel one', 'Channel two']);
    expect(root.querySelector('[data-field="notify"] input')?.getAttribute('type')).toBe('checkbox');
    expect(root.querySelector('[data-field="count"] input')?.getAttribute('type')).toBe('number');
    expect(root.querySelector('[data-field="note"]')?.textContent).toContain('Anything else');
  });

  it('posts the chosen values as {content}', async () => {
    await show(<ElicitationForm permissionId="p9" schema={SCHEMA} />);
    // Nothing chosen yet: it says so and posts nothing.
    await click(root.querySelector('button[type="submit"]'));
    expect(root.querySelector('[role="alert"]')?.textContent).toBe('Which release?: choose one');
    expect(calls).toHaveLength(0);
    await click(root.querySelector('[data-field="release"] input[value="beta"]'));
    await click(root.querySelector('[data-field="channel"] input[value="ch-2"]'));
    await click(root.querySelector('[data-field="notify"] input'));
    await act(async () => {
      const count = root.querySelector<HTMLInputElement>('[data-field="count"] input')!;
      count.value = '3';
      count.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await click(root.querySelector('button[type="submit"]'));
    expect(calls).toEqual([{ method: 'POST', path: '/api/v1/permissions/p9/answer', body: { content: { release: 'beta', channel: 'ch-2', notify: true, count: 3 } } }]);
  });

  it('many choices are a select', async () => {
    const many = { type: 'object', properties: { pick: { type: 'string', title: 'Pick', enum: ['a', 'b', 'c', 'd', 'e', 'f', 'g'] } }, required: ['pick'] };
    await show(<ElicitationForm permissionId="p8" schema={many} />);
    const select = root.querySelector<HTMLSelectElement>('[data-field="pick"] select')!;
    expect(select.options).toHaveLength(8); // "choose…" and the seven
    await act(async () => {
      select.value = 'g';
      select.dispatchEvent(new Event('change', { bubbles: true }));
    });
    await click(root.querySelector('button[type="submit"]'));
    expect(calls[0].body).toEqual({ content: { pick: 'g' } });
  });

  it('Decline posts {"decision": "decline"}', async () => {
    await show(<ElicitationForm permissionId="p7" schema={SCHEMA} />);
    await click([...root.querySelectorAll('button')].find((b) => b.textContent === 'Decline')!);
    expect(calls).toEqual([{ method: 'POST', path: '/api/v1/permissions/p7/answer', body: { decision: 'decline' } }]);
  });

  it("a one-field text question (the fake harness's) posts its field", async () => {
    const one = { type: 'object', properties: { answer: { type: 'string', title: 'Answer' } }, required: ['answer'] };
    await show(<ElicitationForm permissionId="p6" schema={one} />);
    await act(async () => {
      const input = root.querySelector<HTMLInputElement>('[data-field="answer"] input')!;
      input.value = 'Ada';
      input.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await click(root.querySelector('button[type="submit"]'));
    expect(calls[0].body).toEqual({ content: { answer: 'Ada' } });
  });
});

const grant = (id: string, over: Partial<SessionGrant> = {}): SessionGrant => ({
  id,
  session_id: 's1',
  tool_call: null,
  revoked_by: null,
  call: { effect: 'exec', paths: [], command: 'make deploy', url: null, title: 'make deploy' },
  created_by: 'me-1',
  created_at: '2026-12-01T10:00:00Z',
  revoked_at: null,
  ...over,
});

describe('the session grants panel', () => {
  it('lists the active grants with Revoke (DELETE), then reloads', async () => {
    answers['GET /api/v1/sessions/s1/grants'] = { status: 200, body: { grants: [grant('g1'), grant('g2', { revoked_at: '2026-12-01T11:00:00Z' }), grant('g3', { call: { effect: 'write', paths: ['/home/agent/a.txt'], command: null, url: null, title: null }, created_by: 'u-2' })] } };
    answers['DELETE /api/v1/sessions/s1/grants/g1'] = { status: 204 };
    await show(<SessionGrants sessionId="s1" canRevoke={true} meId="me-1" rev={0} />);
    const items = [...root.querySelectorAll<HTMLElement>('details.grants li')];
    expect(items.map((li) => li.dataset.grant)).toEqual(['g1', 'g3']);
    expect(root.querySelector('details.grants summary')?.textContent).toBe('Approved for this session (2)');
    expect(items[0].textContent).toContain('make deploy');
    expect(items[0].textContent).toContain('by you');
    expect(items[1].textContent).toContain('/home/agent/a.txt');
    expect(items[1].textContent).toContain('by user u-2');
    calls = [];
    await click(items[0].querySelector('button'));
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(['DELETE /api/v1/sessions/s1/grants/g1', 'GET /api/v1/sessions/s1/grants']);
  });

  it('a grant revoked already (404) just reloads; a refusal (403) shows', async () => {
    answers['GET /api/v1/sessions/s1/grants'] = { status: 200, body: { grants: [grant('g1')] } };
    answers['DELETE /api/v1/sessions/s1/grants/g1'] = { status: 404, body: { error: { code: 'NOT_FOUND', message: 'grant not found' } } };
    await show(<SessionGrants sessionId="s1" canRevoke={true} meId="me-1" rev={0} />);
    await click(root.querySelector('details.grants li button'));
    expect(root.querySelector('[role="alert"]')).toBeNull();
    answers['DELETE /api/v1/sessions/s1/grants/g1'] = { status: 403, body: { error: { code: 'FORBIDDEN', message: 'operators only' } } };
    await click(root.querySelector('details.grants li button'));
    expect(root.querySelector('[role="alert"]')?.textContent).toBe('operators only (FORBIDDEN)');
  });

  it('reloads when a session-scoped answer arrives (rev); nothing shows without active grants', async () => {
    answers['GET /api/v1/sessions/s1/grants'] = { status: 200, body: { grants: [] } };
    await show(<SessionGrants sessionId="s1" canRevoke={true} meId="me-1" rev={0} />);
    expect(root.querySelector('details.grants')).toBeNull();
    answers['GET /api/v1/sessions/s1/grants'] = { status: 200, body: { grants: [grant('g1')] } };
    await show(<SessionGrants sessionId="s1" canRevoke={true} meId="me-1" rev={1} />);
    expect(root.querySelectorAll('details.grants li')).toHaveLength(1);
  });

  it('a viewer sees the list without Revoke', async () => {
    await show(<GrantList grants={[grant('g1')]} canRevoke={false} meId="me-1" revoke={async () => undefined} />);
    expect(root.querySelectorAll('details.grants li')).toHaveLength(1);
    expect(root.querySelector('details.grants button')).toBeNull();
  });
});
