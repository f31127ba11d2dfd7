import { useEffect, useMemo, useState } from 'preact/hooks';
import { wsUrl } from '../api';
import { AnswerButtons, callSummary, ElicitationForm } from '../items';
import { Reconnecting } from '../socket';
import type { Permission } from '../types';
import { Link, when } from '../ui';
import { briefOfQuestion } from '../brief';

/** What a tool call would do, from what the harness sent: its command, paths, URL. */
// The harness's tool call is free-form JSON.
function toolContext(tc: any): { command?: string; paths?: string[]; url?: string; effect?: string } | null {
  if (!tc || typeof tc !== 'object') return null;
  const input = tc.rawInput ?? {};
  const command = Array.isArray(input.command) ? input.command.join(' ') : typeof input.command === 'string' ? input.command : undefined;
  const paths = [
    ...(Array.isArray(tc.locations) ? tc.locations.map((l: { path?: string }) => l?.path).filter(Boolean) : []),
    ...[input.path, input.file_path, input.filePath].filter((x) => typeof x === 'string'),
  ];
  const url = typeof input.url === 'string' ? input.url : undefined;
  if (!command && !paths.length && !url) return null;
  return { command, paths: [...new Set(paths)] as string[], url };
}

/** Questions waiting across every agent the user operates, live (GET /api/v1/permissions/stream). */
export function ApprovalsPage() {
  const [pending, setPending] = useState<Permission[] | null>(null);
  const socket = useMemo(
    () =>
      new Reconnecting({
        url: () => wsUrl('/api/v1/permissions/stream'),
        onMessage: (data) => {
          try {
            const m = JSON.parse(String(data));
            if (m.type === 'pending') setPending(m.permissions);
          } catch {
            /* not ours */
          }
        },
        onClose: (code) => code !== 4401,
      }),
    [],
  );
  useEffect(() => () => socket.stop(), [socket]);
  const status = socket.status.value;
  return (
    <main class="page">
      <div class="title-row">
        <h1>Approvals</h1>
        <div class="status-line" role="status" aria-live="polite">
          <span class={`dot ${status}`} aria-hidden="true" /> <span data-status={status}>{status}</span>
        </div>
      </div>
      <p class="muted">Questions the agents you operate wait on, newest first. The first answer wins; a reply in the session answers too.</p>
      {pending === null ? <p class="muted">Loading…</p> : null}
      {pending?.length === 0 ? <p class="empty-inbox">Nothing waits for an answer.</p> : null}
      <ul class="inbox">
        {pending?.map((p) => (
          <li key={p.id} class="card question pending" data-permission={p.id}>
            <header>
              <strong>
                <Link href={`/agents/${p.agent_id}`}>{p.agent_name}</Link>
              </strong>
              <span class="muted">
                {' '}· <Link href={`/agents/${p.agent_id}/sessions/${p.session_id}`}>session {p.session_id.slice(0, 8)}</Link> · {when(p.created_at)}
              </span>
              <p class="brief" data-brief>{briefOfQuestion(p.kind, p.tool_call)}</p>
            </header>
            {p.kind === 'elicitation' ? (
              <>
                <p>{p.tool_call?.message}</p>
                <ElicitationForm permissionId={p.id} schema={p.tool_call?.requestedSchema} />
              </>
            ) : (
              <>
                <p>
                  <span class="badge">{p.tool_call?.kind ?? 'tool'}</span> <span class="tool-title">{p.tool_call?.title ?? p.tool_call?.toolCallId}</span>
                </p>
                {callSummary(toolContext(p.tool_call))}
                <AnswerButtons permissionId={p.id} options={p.options} />
              </>
            )}
          </li>
        ))}
      </ul>
    </main>
  );
}
