import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { signal, type Signal } from '@preact/signals';
import { api, ApiError, atLeast, errorText, loadMe, me, roleIn, wsUrl } from '../api';
import { apply, createView, type SessionView, type StoredEvent } from '../reducer';
import { Reconnecting, type LinkStatus } from '../socket';
import { ItemView, type ItemContext } from '../items';
import type { Agent } from '../types';
import { Link, useLoad } from '../ui';

/** The live view of one session: the stream, applied to the reducer once per frame. */
class SessionStore {
  view: SessionView = createView();
  tick: Signal<number> = signal(0);
  closedReason: Signal<string | null> = signal(null);
  socket: Reconnecting;
  private queue: StoredEvent[] = [];
  private scheduled = false;

  constructor(sessionId: string) {
    this.socket = new Reconnecting({
      url: () => wsUrl(`/api/v1/sessions/${sessionId}/stream?after=${this.view.cursor}`),
      onMessage: (data) => {
        try {
          this.queue.push(JSON.parse(String(data)));
        } catch {
          return;
        }
        this.schedule();
      },
      onOpen: () => {
        // Anything received before the socket dropped is applied before the new feed's events.
        this.flush();
      },
      onClose: (code) => {
        this.flush();
        if (code === 4404) {
          this.closedReason.value = 'This session was deleted.';
          return false;
        }
        if (code === 4401) {
          this.closedReason.value = 'Your sign-in ended.';
          loadMe().catch(() => undefined);
          return false;
        }
        return true;
      },
    });
  }

  private schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    // One repaint per frame however fast events come; a hidden tab still applies them.
    requestAnimationFrame(() => this.flush());
    setTimeout(() => this.flush(), 100);
  }

  flush() {
    this.scheduled = false;
    if (!this.queue.length) return;
    const batch = this.queue;
    this.queue = [];
    for (const ev of batch) {
      if (apply(this.view, ev) === 'gap') {
        // The feed skipped something (it never should): read again from the cursor.
        this.socket.now(true);
        break;
      }
    }
    this.tick.value++;
  }

  stop() {
    this.socket.stop();
  }
}

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
  const status = store.socket.status.value;

  // Stick to the bottom only while the reader is there.
  const logRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const [atBottom, setAtBottom] = useState(true);
  useLayoutEffect(() => {
    const el = logRef.current;
    if (!el || !stick.current) return;
    el.scrollTop = el.scrollHeight;
    // Again once the browser has laid out what was added (markdown, diffs).
    const frame = requestAnimationFrame(() => {
      if (stick.current) el.scrollTop = el.scrollHeight;
    });
    return () => cancelAnimationFrame(frame);
  }, [tick]);
  const onScroll = () => {
    const el = logRef.current;
    if (!el) return;
    const bottom = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
    stick.current = bottom;
    if (bottom !== atBottom) setAtBottom(bottom);
  };

  const waitingTools = new Set(view.pending.map((q) => q.toolCall?.toolCallId).filter(Boolean) as string[]);
  const ctx: ItemContext = useMemo(
    () => ({ meId: me.value?.id ?? null, canAnswer: canOperate, waitingTools }),
    // eslint-disable-next-line react-hooks/exhaustive-deps
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
          {status !== 'live' && store.socket.detail.value ? <span class="muted"> ({store.socket.detail.value})</span> : null}
          {store.closedReason.value ? <span class="error"> {store.closedReason.value}</span> : null}
          {' · '}
          <span data-running={view.running ? 'yes' : 'no'}>{view.running ? (view.pending.length ? 'waiting for an answer' : 'turn running') : 'idle'}</span>
          {usage && typeof usage.used === 'number' ? <span class="muted"> · context {usage.used}{usage.size ? ` / ${usage.size}` : ''}</span> : null}
          {status !== 'live' && status !== 'closed' ? (
            <button type="button" class="link" onClick={() => store.socket.now()}>
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
      <div
        class="log"
        ref={logRef}
        onScroll={onScroll}
        tabIndex={0}
        aria-label="Session log"
        data-cursor={view.cursor}
        data-applied={view.applied}
        data-items={view.items.length}
      >
        {view.items.length === 0 && status === 'live' ? <p class="muted empty">Nothing has happened in this session yet.</p> : null}
        {view.items.map((item) => (
          <ItemView
            key={item.key}
            item={item}
            rev={item.rev}
            ctx={ctx}
            waiting={item.kind === 'tool' && waitingTools.has(item.toolCallId)}
          />
        ))}
      </div>
      {!atBottom ? (
        <button
          type="button"
          class="jump"
          onClick={() => {
            const el = logRef.current;
            if (el) el.scrollTop = el.scrollHeight;
            stick.current = true;
            setAtBottom(true);
          }}
        >
          Jump to latest ↓
        </button>
      ) : null}
      {agent.data === undefined ? null : canOperate ? (
        <Composer sessionId={sessionId} running={view.running} waiting={view.pending.length} />
      ) : (
        <p class="muted viewer-note">You can read this session; operators of its workspace can prompt it.</p>
      )}
    </main>
  );
}

function Composer({ sessionId, running, waiting }: { sessionId: string; running: boolean; waiting: number }) {
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
      if (r?.answered) setNote(`Your reply answered the waiting question: ${r.decision === 'allow' ? 'allowed' : 'denied'}.`);
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
          A question waits: your reply answers it — “yes” approves, anything else denies.
        </p>
      ) : reason ? (
        <p class="hint" id="composer-hint">{reason}</p>
      ) : null}
      <div class="composer-row">
        <textarea
          aria-label={waiting ? 'Reply to the question' : 'Prompt'}
          aria-describedby={waiting || reason ? 'composer-hint' : undefined}
          placeholder={waiting ? 'Reply (yes approves)' : blocked ? 'Wait for the turn to end' : 'Prompt the agent (Enter sends, Shift+Enter for a new line)'}
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
