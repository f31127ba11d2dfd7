// The stream's reconnect rules (src/socket.ts): backoff 1 s doubling to 30 s, reset once a
// connection opens; at once on `visibilitychange` (visible again) and `online`; `offline` says so;
// a forced reconnect after a long absence; no reconnect once `onClose` says stop. Fake timers and a
// fake WebSocket; `document`, `window` and `navigator` are event targets stubbed per test.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

class FakeSocket {
  static all: FakeSocket[] = [];
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSING = 2;
  static CLOSED = 3;
  readyState = FakeSocket.CONNECTING;
  binaryType = 'blob';
  onopen: (() => void) | null = null;
  onmessage: ((m: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  closed = false;
  constructor(public url: string) {
    FakeSocket.all.push(this);
  }
  open() {
    this.readyState = FakeSocket.OPEN;
    this.onopen?.();
  }
  drop(code = 1006) {
    this.readyState = FakeSocket.CLOSED;
    this.onclose?.({ code, reason: '' });
  }
  close() {
    this.closed = true;
    this.readyState = FakeSocket.CLOSED;
  }
  send() {}
}

let doc: EventTarget & { visibilityState: string };
let win: EventTarget;
let nav: { onLine: boolean };
let Reconnecting: typeof import('../src/socket').Reconnecting;

beforeEach(async () => {
  vi.useFakeTimers();
  FakeSocket.all = [];
  doc = Object.assign(new EventTarget(), { visibilityState: 'visible' });
  win = new EventTarget();
  nav = { onLine: true };
  vi.stubGlobal('document', doc);
  vi.stubGlobal('window', win);
  vi.stubGlobal('navigator', nav);
  vi.stubGlobal('WebSocket', FakeSocket);
  ({ Reconnecting } = await import('../src/socket'));
});

afterEach(() => {
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

/** How long after a drop the next socket is made, in ms (advancing the clock 100 ms at a time). */
function delayAfterDrop(): number {
  const before = FakeSocket.all.length;
  FakeSocket.all[before - 1].drop();
  let waited = 0;
  while (FakeSocket.all.length === before) {
    vi.advanceTimersByTime(100);
    waited += 100;
    if (waited > 120_000) throw new Error('never reconnected');
  }
  return waited;
}

describe('the reconnecting socket', () => {
  it('backs off 1 s doubling to 30 s, asking the URL anew each time', () => {
    let n = 0;
    const s = new Reconnecting({ url: () => `ws://x/stream?after=${n++}`, onMessage: () => {} });
    expect(FakeSocket.all.length).toBe(1);
    const delays = Array.from({ length: 8 }, delayAfterDrop);
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    expect(FakeSocket.all.map((w) => w.url).slice(0, 3)).toEqual(['ws://x/stream?after=0', 'ws://x/stream?after=1', 'ws://x/stream?after=2']);
    expect(s.status.value).toBe('reconnecting');
    expect(s.detail.value).toBe('retrying in 30 s');
    s.stop();
  });

  it('starts again from 1 s after a connection opened', () => {
    const s = new Reconnecting({ url: () => 'ws://x', onMessage: () => {} });
    expect([delayAfterDrop(), delayAfterDrop(), delayAfterDrop()]).toEqual([1000, 2000, 4000]);
    FakeSocket.all.at(-1)!.open();
    expect(s.status.value).toBe('live');
    expect(s.detail.value).toBe('');
    expect([delayAfterDrop(), delayAfterDrop()]).toEqual([1000, 2000]);
    s.stop();
  });

  it('reconnects at once when the page is visible again or the network is back', () => {
    const s = new Reconnecting({ url: () => 'ws://x', onMessage: () => {} });
    for (let i = 0; i < 5; i++) delayAfterDrop(); // the next wait is 30 s
    FakeSocket.all.at(-1)!.drop();
    const count = FakeSocket.all.length;
    doc.visibilityState = 'hidden';
    doc.dispatchEvent(new Event('visibilitychange'));
    expect(FakeSocket.all.length).toBe(count); // hidden: nothing yet
    doc.visibilityState = 'visible';
    doc.dispatchEvent(new Event('visibilitychange'));
    expect(FakeSocket.all.length).toBe(count + 1); // at once, not in 30 s
    expect(delayAfterDrop()).toBe(1000); // and the backoff starts over
    FakeSocket.all.at(-1)!.drop();
    nav.onLine = false;
    win.dispatchEvent(new Event('offline'));
    expect(s.status.value).toBe('offline');
    const before = FakeSocket.all.length;
    nav.onLine = true;
    win.dispatchEvent(new Event('online'));
    expect(FakeSocket.all.length).toBe(before + 1);
    vi.advanceTimersByTime(60_000);
    expect(FakeSocket.all.length).toBe(before + 1); // the pending retry was replaced, not added
    s.stop();
  });

  it('an open socket is kept on a short look away and replaced after a long one or going online', () => {
    const s = new Reconnecting({ url: () => 'ws://x', onMessage: () => {} });
    const first = FakeSocket.all[0];
    first.open();
    doc.visibilityState = 'hidden';
    doc.dispatchEvent(new Event('visibilitychange'));
    vi.advanceTimersByTime(5_000);
    doc.visibilityState = 'visible';
    doc.dispatchEvent(new Event('visibilitychange'));
    expect(FakeSocket.all.length).toBe(1);
    doc.visibilityState = 'hidden';
    doc.dispatchEvent(new Event('visibilitychange'));
    vi.advanceTimersByTime(25_000); // a laptop that slept: the socket may be dead without knowing
    doc.visibilityState = 'visible';
    doc.dispatchEvent(new Event('visibilitychange'));
    expect(FakeSocket.all.length).toBe(2);
    expect(first.closed).toBe(true);
    FakeSocket.all[1].open();
    win.dispatchEvent(new Event('online'));
    expect(FakeSocket.all.length).toBe(3);
    s.stop();
  });

  it('stops when onClose says so, and after stop() nothing reconnects', () => {
    const s = new Reconnecting({ url: () => 'ws://x', onMessage: () => {}, onClose: (code) => code !== 4404 });
    FakeSocket.all[0].drop(4404);
    expect(s.status.value).toBe('closed');
    vi.advanceTimersByTime(60_000);
    doc.dispatchEvent(new Event('visibilitychange'));
    win.dispatchEvent(new Event('online'));
    expect(FakeSocket.all.length).toBe(1);
  });
});
