import { useEffect, useRef, useState } from 'preact/hooks';
import { api, atLeast, roleIn, wsUrl } from '../api';
import { query } from '../router';
import type { Agent } from '../types';
import { Link, useLoad } from '../ui';

/**
 * xterm.js sizes and themes itself with <style> elements it makes at run time. The policy allows
 * only styles that carry the page's nonce (the server makes one per page load), so give them it.
 */
let stylesNonced = false;
function nonceRuntimeStyles() {
  if (stylesNonced) return;
  stylesNonced = true;
  const nonce = document.querySelector<HTMLMetaElement>('meta[property=csp-nonce]')?.nonce;
  if (!nonce) return;
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function (this: Document, tag: string, options?: ElementCreationOptions) {
    const el = create.call(this, tag, options);
    if (String(tag).toLowerCase() === 'style') (el as HTMLStyleElement).nonce = nonce;
    return el;
  } as typeof Document.prototype.createElement;
}

/** The agent's web terminal (xterm.js, loaded only on this page). */
export function TerminalPage({ agentId }: { agentId: string }) {
  const agent = useLoad(() => api<Agent>('GET', `/api/v1/agents/${agentId}`), [agentId]);
  const host = useRef<HTMLDivElement>(null);
  const [state, setState] = useState('connecting');
  const [generation, setGeneration] = useState(0);
  const login = query.value.get('login');
  // Operators use the terminal; wait for the agent to know the reader's role.
  const allowed = agent.data ? atLeast(roleIn(agent.data.workspace_id), 'operator') : null;
  useEffect(() => {
    if (!allowed) return;
    let disposed = false;
    let cleanup = () => {};
    (async () => {
      const [{ Terminal }, { FitAddon }] = await Promise.all([import('@xterm/xterm'), import('@xterm/addon-fit')]);
      await import('@xterm/xterm/css/xterm.css');
      if (disposed || !host.current) return;
      nonceRuntimeStyles();
      const term = new Terminal({ cursorBlink: true, scrollback: 5000, fontSize: 14, fontFamily: 'ui-monospace, monospace' });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(host.current);
      fit.fit();
      const path = `/api/v1/agents/${agentId}/terminal${login ? `?login=${encodeURIComponent(login)}` : ''}`;
      const ws = new WebSocket(wsUrl(path));
      ws.binaryType = 'arraybuffer';
      const encoder = new TextEncoder();
      const sendSize = () => {
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
      };
      ws.onopen = () => {
        setState('connected');
        sendSize();
        term.focus();
      };
      ws.onmessage = (m) => {
        if (typeof m.data === 'string') {
          try {
            const msg = JSON.parse(m.data);
            if (msg.type === 'error') term.write(`\r\n\x1b[31m${msg.message}\x1b[0m\r\n`);
          } catch {
            term.write(m.data);
          }
        } else term.write(new Uint8Array(m.data));
      };
      ws.onclose = (e) => {
        if (disposed) return;
        const why: Record<number, string> = {
          1000: 'the shell ended',
          4401: 'your sign-in ended',
          4429: 'the output got too far ahead',
          4502: 'the terminal could not start or the sandbox went away',
        };
        setState(`closed: ${why[e.code] ?? `code ${e.code}`}`);
      };
      const input = term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(encoder.encode(d)));
      const resize = term.onResize(sendSize);
      const observer = new ResizeObserver(() => fit.fit());
      observer.observe(host.current);
      cleanup = () => {
        observer.disconnect();
        input.dispose();
        resize.dispose();
        ws.onclose = null;
        ws.close();
        term.dispose();
      };
    })().catch((e) => setState(`failed: ${e instanceof Error ? e.message : String(e)}`));
    return () => {
      disposed = true;
      cleanup();
    };
  }, [agentId, login, generation, allowed]);
  if (allowed === false)
    return (
      <main class="page">
        <h1>
          <Link href={`/agents/${agentId}`}>{agent.data?.name ?? 'agent'}</Link> · terminal
        </h1>
        <p>Operators of this agent's workspace use its terminal; you can read its sessions.</p>
      </main>
    );
  return (
    <main class="page terminal-page">
      <div class="title-row">
        <h1>
          <Link href={`/agents/${agentId}`}>{agent.data?.name ?? 'agent'}</Link> · terminal{login ? ` (signing in: ${login})` : ''}
        </h1>
        <div class="status-line" role="status" aria-live="polite">
          <span data-status={state}>{state}</span>{' '}
          {state !== 'connected' && state !== 'connecting' ? (
            <button type="button" onClick={() => { setState('connecting'); setGeneration((g) => g + 1); }}>
              Connect again
            </button>
          ) : null}
        </div>
      </div>
      <div class="terminal" ref={host} aria-label="Terminal" />
    </main>
  );
}
