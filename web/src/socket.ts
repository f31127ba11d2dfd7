// A WebSocket that comes back: backoff 1 s doubling to 30 s, and at once when the page becomes
// visible again or the machine goes back online. `url()` is asked at every (re)connect, so a stream
// resumes from the cursor of the last event applied.
import { signal, type Signal } from '@preact/signals';

export type LinkStatus = 'connecting' | 'live' | 'reconnecting' | 'offline' | 'closed';

export interface SocketOptions {
  url: () => string;
  onMessage: (data: string | ArrayBuffer) => void;
  onOpen?: (ws: WebSocket) => void;
  /** Return false to stop reconnecting (a revoked session, a deleted session). */
  onClose?: (code: number, reason: string) => boolean | void;
  binary?: boolean;
}

export class Reconnecting {
  status: Signal<LinkStatus> = signal('connecting');
  /** Why the last connection ended, and when the next try is. */
  detail: Signal<string> = signal('');
  ws: WebSocket | null = null;
  private delay = 1000;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  private hiddenAt: number | null = null;
  private readonly wake = () => {
    if (document.visibilityState === 'hidden') {
      this.hiddenAt = Date.now();
      return;
    }
    // Back from a long absence (a laptop that slept), an open socket may be dead without knowing
    // it: open a new one (the stream resumes from its cursor, so this costs nothing).
    const away = this.hiddenAt !== null && Date.now() - this.hiddenAt > 20000;
    this.hiddenAt = null;
    this.now(away);
  };
  // A network that came back may be another one: the old socket is likely dead.
  private readonly online = () => this.now(true);
  private readonly offline = () => {
    this.status.value = 'offline';
  };

  constructor(private opts: SocketOptions) {
    document.addEventListener('visibilitychange', this.wake);
    window.addEventListener('online', this.online);
    window.addEventListener('offline', this.offline);
    this.connect();
  }

  /** Reconnect now if not connected (or force a fresh connection). */
  now(force = false) {
    if (this.stopped) return;
    if (!force && this.ws && (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.delay = 1000;
    if (force && this.ws) {
      const old = this.ws;
      this.ws = null;
      old.onclose = null;
      old.close();
    }
    this.connect();
  }

  private connect() {
    if (this.stopped) return;
    const ws = new WebSocket(this.opts.url());
    if (this.opts.binary) ws.binaryType = 'arraybuffer';
    this.ws = ws;
    if (this.status.value !== 'live') this.status.value = this.status.value === 'connecting' ? 'connecting' : 'reconnecting';
    ws.onopen = () => {
      this.delay = 1000;
      this.status.value = 'live';
      this.detail.value = '';
      this.opts.onOpen?.(ws);
    };
    ws.onmessage = (m) => this.opts.onMessage(m.data);
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) return;
      if (this.opts.onClose?.(e.code, e.reason) === false) {
        this.status.value = 'closed';
        this.stop();
        return;
      }
      this.status.value = navigator.onLine === false ? 'offline' : 'reconnecting';
      const wait = this.delay;
      this.delay = Math.min(this.delay * 2, 30000);
      this.detail.value = `retrying in ${Math.round(wait / 1000)} s`;
      this.timer = setTimeout(() => this.connect(), wait);
    };
  }

  send(data: string | ArrayBuffer | Uint8Array) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(data);
  }

  stop() {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    document.removeEventListener('visibilitychange', this.wake);
    window.removeEventListener('online', this.online);
    window.removeEventListener('offline', this.offline);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close();
      this.ws = null;
    }
  }
}
