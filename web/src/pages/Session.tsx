import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError, atLeast, errorText, me, roleIn } from '../api';
import { type LinkStatus } from '../socket';
import { AnswerButtons, ElicitationForm, ItemView, type ItemContext } from '../items';
import { SessionGrants } from '../grants';
import { SessionStore } from '../session-store';
import { elementScroll, measureElement, observeElementOffset, observeElementRect, Virtualizer } from '@tanstack/virtual-core';
import type { Agent } from '../types';
import { Link, useLoad } from '../ui';
import { SessionTotalsLine } from '../usage-view';
import { sessionTotals } from '../usage';

const STATUS_TEXT: Record<LinkStatus, string> = {
  connecting: 'connecting…',
  live: 'live',
  reconnecting: 'reconnecting',
  offline: 'offline',
  closed: 'closed',
};

export function SessionPage({ agentId, sessionId }: { agentId: string; sessionId: string }) {
  const agent = useLoad(() => api<Agent>('GET', `/api/v1/agents/${agentId}`), [agentId]);
  const store = useMemo(() => new SessionStore(sessionId), [sessionId]);
  useEffect(() => () => store.stop(), [store]);
  const tick = store.tick.value;
  const view = store.view;
  const role = roleIn(agent.data?.workspace_id);
  const canOperate = atLeast(role, 'operator');
  const status: LinkStatus = store.socket ? store.socket.status.value : 'connecting';
  const earlier = store.earlier.value;

  // The log is virtualized (only what is on screen, plus a margin, is in the page) and anchored
  // at its end: it follows new items while the reader is at the bottom, and keeps what the reader
  // looks at in place when older events come in above or an item above grows.
  const logRef = useRef<HTMLDivElement>(null);
  const [atBottom, setAtBottom] = useState(true);
  // The same, as the last scroll event left it — read at once, where the state may not have been
  // rendered yet (an item arriving between a scroll and its re-render must not pull the log down).
  const atBottomNow = useRef(true);
  const [, rerender] = useState(0);
  const items = view.items;
  const virtualizer = useMemo(
    () =>
      new Virtualizer<HTMLDivElement, HTMLDivElement>({
        count: 0,
        getScrollElement: () => logRef.current,
        estimateSize: () => 64,
        overscan: 8,
        observeElementRect,
        observeElementOffset,
        scrollToFn: elementScroll,
        measureElement,
        anchorTo: 'end',
        followOnAppend: true,
        scrollEndThreshold: 48,
        onChange: () => rerender((n) => n + 1),
      }),
    [],
  );
  // A reader who just scrolled up, before the scroll event said so (it comes a frame later), is
  // not at the bottom: items arriving in between must not pull the log back down.
  const scrolledUp = () => {
    const el = logRef.current;
    return !!el && virtualizer.scrollOffset !== null && el.scrollTop < virtualizer.scrollOffset - 4;
  };
  const readerLeft = scrolledUp() || !atBottomNow.current;
  virtualizer.setOptions({
    ...virtualizer.options,
    followOnAppend: !readerLeft,
    count: items.length,
    getItemKey: (i: number) => items[i]?.key ?? i,
  });
  useLayoutEffect(() => virtualizer._didMount(), [virtualizer]);
  useLayoutEffect(() => {
    virtualizer._willUpdate();
  });
  // A streamed token grows the last item: while the reader is at the bottom, stay there.
  useLayoutEffect(() => {
    if (readerLeft || scrolledUp() || !atBottomNow.current) setAtBottom(false);
    else if (atBottom && items.length) virtualizer.scrollToEnd();
  }, [tick]);
  const onScroll = () => {
    const el = logRef.current;
    if (!el) return;
    const bottom = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
    atBottomNow.current = bottom;
    if (bottom !== atBottom) setAtBottom(bottom);
    if (el.scrollTop < 300 && store.hasOlder && !store.loadingOlder) loadOlder();
  };
  const loadOlder = () => {
    store.loadOlder().catch(() => undefined);
  };

  const waitingTools = new Set(view.pending.map((q) => q.toolCall?.toolCallId).filter(Boolean) as string[]);
  const ctx: ItemContext = useMemo(
    () => ({ meId: me.value?.id ?? null, canAnswer: canOperate, waitingTools }),
    [canOperate],
  );
  const usage = view.usage as { used?: number; size?: number } | null;
  const plan = view.plan;
  const done = plan ? plan.filter((e) => e.status === 'completed').length : 0;

  return (
    <main class="page session">
      <div class="session-head">
        <div>
          <Link href={`/agents/${agentId}`}>{agent.data?.name ?? 'agent'}</Link> <span class="muted">/ session {sessionId.slice(0, 8)}</span>
        </div>
        <div class="status-line" role="status" aria-live="polite">
          <span class={`dot ${status}`} aria-hidden="true" />
          <span data-status={status}>{STATUS_TEXT[status]}</span>
          {status !== 'live' && store.socket?.detail.value ? <span class="muted"> ({store.socket.detail.value})</span> : null}
          {store.loadError.value ? <span class="error"> {store.loadError.value}</span> : null}
          {store.closedReason.value ? <span class="error"> {store.closedReason.value}</span> : null}
          {' · '}
          <span data-running={view.running ? 'yes' : 'no'}>{view.running ? (view.pending.length ? 'waiting for an answer' : 'turn running') : 'idle'}</span>
          {usage && typeof usage.used === 'number' ? <span class="muted"> · context {usage.used}{usage.size ? ` / ${usage.size}` : ''}</span> : null}
          {view.usageTracker.turns.length ? <span class="muted"> · <SessionTotalsLine t={sessionTotals(view.usageTracker.turns)} /></span> : null}
          {status !== 'live' && status !== 'closed' ? (
            <button type="button" class="link" onClick={() => store.socket?.now()}>
              connect again
            </button>
          ) : null}
        </div>
      </div>
      {plan ? (
        <details class="plan" open>
          <summary>
            Plan {done}/{plan.length}
          </summary>
          <ol>
            {plan.map((e) => (
              <li class={`plan-${e.status}`}>
                <span class="badge">{e.status.replace('_', ' ')}</span> {e.content}
              </li>
            ))}
          </ol>
        </details>
      ) : null}
      <SessionGrants sessionId={sessionId} canRevoke={canOperate} meId={me.value?.id ?? null} rev={store.grantsRev.value} />
      {store.hasOlder ? (
        <button type="button" class="older" onClick={loadOlder}>
          Load earlier events (before {items[0]?.seq ?? view.cursor})
        </button>
      ) : null}
      {earlier.length ? (
        <section class="question pending earlier" aria-label="Questions asked earlier">
          <strong>Asked earlier in this session, still waiting:</strong>
          {earlier.map((p) => (
            <div class="earlier-question" data-permission={p.id}>
              <span class="badge">{p.tool_call?.kind ?? p.kind}</span> {p.tool_call?.title ?? p.tool_call?.message ?? ''}
              {canOperate ? (
                p.kind === 'elicitation' ? <ElicitationForm permissionId={p.id} schema={p.tool_call?.requestedSchema} /> : <AnswerButtons permissionId={p.id} options={p.options} />
              ) : null}
            </div>
          ))}
        </section>
      ) : null}
      <div
        class="log"
        ref={logRef}
        onScroll={onScroll}
        tabIndex={0}
        aria-label="Session log"
        data-cursor={view.cursor}
        data-applied={view.applied}
        data-items={items.length}
      >
        {items.length === 0 && status === 'live' ? <p class="muted empty">Nothing has happened in this session yet.</p> : null}
        <div class="virtual" style={{ height: `${virtualizer.getTotalSize()}px` }}>
          {virtualizer.getVirtualItems().map((v) => {
            const item = items[v.index];
            if (!item) return null;
            return (
              <div
                key={item.key}
                class="row"
                data-index={v.index}
                ref={(el) => {
                  if (el) virtualizer.measureElement(el);
                }}
                style={{ transform: `translateY(${v.start}px)` }}
              >
                <ItemView
                  live={view.running && v.index === items.length - 1}
                  item={item}
                  rev={item.rev}
                  ctx={ctx}
                  waiting={item.kind === 'tool' && waitingTools.has(item.toolCallId)}
                />
              </div>
            );
          })}
        </div>
      </div>
      {!atBottom ? (
        <button
          type="button"
          class="jump"
          onClick={() => {
            virtualizer.scrollToEnd();
            setAtBottom(true);
          }}
        >
          Jump to latest ↓
        </button>
      ) : null}
      {agent.data === undefined ? null : canOperate ? (
        <Composer
          sessionId={sessionId}
          running={view.running}
          waiting={view.pending.length + earlier.length}
          // A reply answers the oldest waiting question (the earlier ones are listed newest first).
          asks={earlier.length ? earlier[earlier.length - 1].kind === 'elicitation' : !!view.pending[0]?.elicitation}
        />
      ) : (
        <p class="muted viewer-note">You can read this session; operators of its workspace can prompt it.</p>
      )}
    </main>
  );
}

/** `asks`: the question a reply would answer is the agent's own (an elicitation), not a permission. */
function Composer({ sessionId, running, waiting, asks }: { sessionId: string; running: boolean; waiting: number; asks: boolean }) {
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const blocked = running && waiting === 0;
  const reason = blocked ? 'A turn is running: wait for it to end, or cancel it.' : null;
  const send = async () => {
    const t = text.trim();
    if (!t || blocked || busy) return;
    setBusy(true);
    setError(null);
    setNote(null);
    try {
      const r = await api<{ answered?: string; decision?: string }>('POST', `/api/v1/sessions/${sessionId}/prompt`, { text });
      setText('');
      if (r?.answered)
        setNote(`Your reply answered the waiting question${r.decision === 'allow' ? ': approved' : r.decision === 'deny' ? ': denied' : ''}.`);
    } catch (e) {
      setError(e instanceof ApiError && e.code === 'TURN_IN_PROGRESS' ? 'A turn is running: wait for it to end, or cancel it.' : errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        send();
      }}
    >
      {waiting ? (
        <p class="hint warn" id="composer-hint">
          {asks ? 'The agent asks a question: your reply answers it.' : 'A question waits: your reply answers it — “yes” approves, anything else denies.'}
        </p>
      ) : reason ? (
        <p class="hint" id="composer-hint">{reason}</p>
      ) : null}
      <div class="composer-row">
        <textarea
          aria-label={waiting ? 'Reply to the question' : 'Prompt'}
          aria-describedby={waiting || reason ? 'composer-hint' : undefined}
          placeholder={waiting ? (asks ? 'Reply to the agent' : 'Reply (yes approves)') : blocked ? 'Wait for the turn to end' : 'Prompt the agent (Enter sends, Shift+Enter for a new line)'}
          rows={3}
          value={text}
          disabled={blocked}
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              send();
            }
          }}
        />
        <div class="composer-buttons">
          <button type="submit" class="primary" disabled={blocked || busy || !text.trim()}>
            {waiting ? 'Reply' : 'Send'}
          </button>
          {running ? (
            <button
              type="button"
              class="reject"
              onClick={async () => {
                setError(null);
                try {
                  await api('POST', `/api/v1/sessions/${sessionId}/cancel`);
                } catch (e) {
                  setError(errorText(e));
                }
              }}
            >
              Cancel
            </button>
          ) : null}
        </div>
      </div>
      {note ? <p class="muted" role="status">{note}</p> : null}
      {error ? <p class="error" role="alert">{error}</p> : null}
    </form>
  );
}
