// The session's grants: what a person approved "for this session" (GET/DELETE
// /api/v1/sessions/{id}/grants). While one is active, agenthold approves the calls like it in the
// session without asking; the harness is never told to stop asking.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError } from './api';
import type { SessionGrant } from './types';
import { Action, ErrorLine, when } from './ui';

/** The active grants (not revoked), oldest first as the server lists them. */
export const activeGrants = (grants: SessionGrant[]) => grants.filter((g) => !g.revoked_at);

/** The panel on the session page; reloads when `rev` changes (a session-scoped answer arrived). */
export function SessionGrants({ sessionId, canRevoke, meId, rev }: { sessionId: string; canRevoke: boolean; meId: string | null; rev: number }) {
  const [grants, setGrants] = useState<SessionGrant[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    api<{ grants: SessionGrant[] }>('GET', `/api/v1/sessions/${sessionId}/grants`).then(
      (r) => live && (setGrants(activeGrants(r.grants ?? [])), setError(null)),
      (e) => {
        if (!live) return;
        // Not there (the session is gone, or a server without grants) or not for this reader: no panel.
        if (e instanceof ApiError && (e.status === 404 || e.status === 403)) setGrants([]);
        else setError(e);
      },
    );
    return () => {
      live = false;
    };
  }, [sessionId, rev, n]);
  const revoke = async (g: SessionGrant) => {
    try {
      await api('DELETE', `/api/v1/sessions/${sessionId}/grants/${g.id}`);
    } catch (e) {
      // Revoked already (another tab, another person): the list reloads either way.
      if (!(e instanceof ApiError && e.status === 404)) throw e;
    }
    setN((x) => x + 1);
  };
  if (error) return <ErrorLine error={error} />;
  if (!grants?.length) return null;
  return <GrantList grants={grants} canRevoke={canRevoke} meId={meId} revoke={revoke} />;
}

/** What a grant approves, in a few words (for its Revoke button's name). */
export function grantSummary(g: SessionGrant): string {
  const c = g.call;
  const what = c.command ?? c.url ?? (c.paths?.length ? c.paths.join(', ') : c.title) ?? 'calls';
  return `${c.effect ?? 'any effect'}: ${what}`;
}

export function GrantList(props: { grants: SessionGrant[]; canRevoke: boolean; meId: string | null; revoke: (g: SessionGrant) => Promise<void> }) {
  return (
    <details class="grants" data-grants={props.grants.length}>
      <summary>Approved for this session ({props.grants.length})</summary>
      <p class="muted">agenthold approves calls like these in this session without asking, until they are revoked.</p>
      <ul>
        {props.grants.map((g) => (
          <li key={g.id} data-grant={g.id}>
            <span class="badge">{g.call.effect ?? 'any effect'}</span>
            {g.call.title ? <span class="tool-title"> {g.call.title}</span> : null}
            {g.call.command ? <> <code>{g.call.command}</code></> : null}
            {(g.call.paths ?? []).map((p) => <> <code>{p}</code></>)}
            {g.call.url ? <> <code>{g.call.url}</code></> : null}
            <span class="muted">
              {' '}· by {g.created_by === null ? 'the server' : g.created_by === props.meId ? 'you' : `user ${g.created_by.slice(0, 8)}`} · {when(g.created_at)}
            </span>{' '}
            {props.canRevoke ? (
              <Action class="reject" title={`Revoke the approval of ${grantSummary(g)}`} run={() => props.revoke(g)}>
                Revoke
              </Action>
            ) : null}
          </li>
        ))}
      </ul>
    </details>
  );
}
