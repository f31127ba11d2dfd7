// The "Harness log" panel of the agent page (agent admins): what the agent's harness wrote on
// stderr lately (GET /api/v1/agents/{id}/harness-log, the newest 64 KiB), polled every 2 s while
// the panel is open. It can hold whatever the harness prints, so only admins see it.
import { useEffect, useState } from 'preact/hooks';
import { api } from './api';
import { Ansi } from './items';
import { POLL_MS, logFacts, type HarnessLog } from './harness-log';
import { ErrorLine } from './ui';

export function HarnessLogPanel({ agentId }: { agentId: string }) {
  const [open, setOpen] = useState(false);
  const [log, setLog] = useState<HarnessLog | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!open) return;
    let live = true;
    const read = () =>
      api<HarnessLog>('GET', `/api/v1/agents/${agentId}/harness-log`).then(
        (l) => live && (setLog(l), setError(null)),
        (e) => live && setError(e),
      );
    read();
    const t = setInterval(read, POLL_MS);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [open, agentId]);
  return (
    <section class="card harness-log" aria-labelledby="harness-log-h">
      <details open={open} onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
        <summary><h2 id="harness-log-h">Harness log</h2></summary>
        <p class="muted">What the harness writes on stderr (the newest 64 KiB), live while this is open. It may show whatever the harness prints.</p>
        <ErrorLine error={error} />
        {log ? (
          <>
            <p class="muted" data-testid="harness-log-facts">{logFacts(log)}</p>
            {log.text ? <Ansi text={log.text} /> : null}
          </>
        ) : open && !error ? <p class="muted">Loading…</p> : null}
      </details>
    </section>
  );
}
