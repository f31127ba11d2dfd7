// One session's live view: the tail of its log read over REST (a long session opens at its end
// quickly), older events on request (scrolling up), then the stream from the cursor. Events are
// applied to the reducer once per animation frame however fast they come.
import { signal, type Signal } from '@preact/signals';
import { api, loadMe, wsUrl } from './api';
import { apply, createView, type SessionView, type StoredEvent } from './reducer';
import { Reconnecting } from './socket';
import type { Permission } from './types';

/** Events read when a session opens; older ones come in pages of OLDER as the reader scrolls up. */
export const TAIL = 400;
export const OLDER = 1000;

interface Page {
  events: StoredEvent[];
  next_after: number;
}

/** Whether a turn runs at the end of `events`: true/false, or null when they hold no boundary. */
export function turnStateOf(events: StoredEvent[]): { running: boolean; turnId: string | null } | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e.type === 'prompt') return { running: true, turnId: e.payload?.turn_id ?? `seq-${e.seq}` };
    if (e.type === 'turn_end') return { running: false, turnId: null };
    if (e.type === 'error' && e.payload?.turn_id && e.payload?.code !== 'TURN_TIMEOUT') return { running: false, turnId: null };
  }
  return null;
}

/** Whether an event changes the session's grants: a question answered "for this session", or a grant revoked (its notice). */
export function grantsChanged(ev: StoredEvent): boolean {
  return (ev.type === 'permission_resolved' && ev.payload?.scope === 'session') || (ev.type === 'notice' && ev.payload?.code === 'GRANT_REVOKED');
}

export class SessionStore {
  view: SessionView = createView();
  tick: Signal<number> = signal(0);
  closedReason: Signal<string | null> = signal(null);
  loadError: Signal<string | null> = signal(null);
  /** Questions of this session that wait but were asked before the loaded part of the log. */
  earlier: Signal<Permission[]> = signal([]);
  /** Bumped when the session's grants changed (an answer "for this session", a revocation). */
  grantsRev: Signal<number> = signal(0);
  loadingOlder = false;
  socket: Reconnecting | null = null;
  /** The loaded part of the log: events after `start`. */
  private events: StoredEvent[] = [];
  private start = 0;
  /** The turn state before `start`, when the loaded part holds no turn boundary. */
  private before: { running: boolean; turnId: string | null } | null = null;
  private queue: StoredEvent[] = [];
  private scheduled = false;
  private stopped = false;

  constructor(private sessionId: string) {
    this.open().catch((e) => {
      this.loadError.value = e instanceof Error ? e.message : String(e);
    });
  }

  get hasOlder() {
    return this.start > 0;
  }

  private async page(after: number, limit: number): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    let cursor = after;
    while (out.length < limit) {
      const r = await api<Page>('GET', `/api/v1/sessions/${this.sessionId}/events?after=${cursor}&limit=${Math.min(1000, limit - out.length)}`);
      if (!r.events.length) break;
      out.push(...r.events);
      cursor = r.next_after;
    }
    return out;
  }

  private async open() {
    const session = await api<{ last_seq: number }>('GET', `/api/v1/sessions/${this.sessionId}`);
    const from = Math.max(0, session.last_seq - TAIL);
    const tail = from > 0 ? await this.page(from, session.last_seq - from) : [];
    if (from > 0 && !turnStateOf(tail)) this.before = await this.turnStateBefore(from);
    if (this.stopped) return;
    this.start = from;
    this.events = tail;
    this.rebuild();
    if (from > 0) this.loadEarlierQuestions();
    this.socket = new Reconnecting({
      url: () => wsUrl(`/api/v1/sessions/${this.sessionId}/stream?after=${this.view.cursor}`),
      onMessage: (data) => {
        try {
          this.queue.push(JSON.parse(String(data)));
        } catch {
          return;
        }
        this.schedule();
      },
      onOpen: () => this.flush(),
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
    this.tick.value++;
  }

  /** Reads backwards from `from` for the last turn boundary (a long turn's prompt may be far back). */
  private async turnStateBefore(from: number) {
    let end = from;
    while (end > 0) {
      const begin = Math.max(0, end - OLDER);
      const state = turnStateOf(await this.page(begin, end - begin));
      if (state) return state;
      end = begin;
    }
    return { running: false, turnId: null };
  }

  private async loadEarlierQuestions() {
    try {
      const r = await api<{ permissions: Permission[] }>('GET', '/api/v1/permissions?state=pending&limit=1000');
      const mine = r.permissions.filter((p) => p.session_id === this.sessionId);
      this.earlier.value = mine;
    } catch {
      // Viewers cannot read the inbox; the log shows the questions it holds.
    }
  }

  /** The view from the loaded events (after the tail loads, and after older events come in). */
  private rebuild() {
    const view = createView(this.start);
    if (this.before) {
      view.running = this.before.running;
      view.runningTurn = this.before.turnId;
    }
    for (const e of this.events) apply(view, e);
    view.changed.clear();
    this.view = view;
  }

  /** Reads the page of events before the loaded ones. */
  async loadOlder() {
    if (this.start === 0 || this.loadingOlder) return;
    this.loadingOlder = true;
    try {
      const begin = Math.max(0, this.start - OLDER);
      const older = await this.page(begin, this.start - begin);
      this.events = [...older, ...this.events];
      this.start = begin;
      // Events already applied are in `events`; the stream's queue continues after them.
      const cursor = this.view.cursor;
      this.events = this.events.filter((e) => e.seq <= cursor);
      if (begin === 0) this.before = null;
      this.rebuild();
      this.tick.value++;
    } finally {
      this.loadingOlder = false;
    }
  }

  private schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    // One repaint per frame; a hidden tab (no frames) still applies them.
    requestAnimationFrame(() => this.flush());
    setTimeout(() => this.flush(), 100);
  }

  flush() {
    this.scheduled = false;
    if (!this.queue.length) return;
    const batch = this.queue;
    this.queue = [];
    let changed = false;
    for (const ev of batch) {
      const result = apply(this.view, ev);
      if (result === 'applied') {
        this.events.push(ev);
        changed = true;
        if (ev.type === 'permission_resolved' && this.earlier.value.length)
          this.earlier.value = this.earlier.value.filter((p) => p.id !== ev.payload?.permission_id);
        if (grantsChanged(ev)) this.grantsRev.value++;
      } else if (result === 'gap') {
        // The feed skipped something (it never should): read again from the cursor.
        this.socket?.now(true);
        break;
      }
    }
    if (changed) this.tick.value++;
  }

  stop() {
    this.stopped = true;
    this.socket?.stop();
  }
}
