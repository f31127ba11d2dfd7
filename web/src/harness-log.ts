// The agent page's "Harness log" (GET /api/v1/agents/{id}/harness-log): its shape and the line
// that says which harness and what was not kept. The panel is harness-log-panel.tsx.
import type { Schemas } from './types';

export type HarnessLog = Schemas['HarnessLog'];

/** How often the open panel reads the log again. */
export const POLL_MS = 2000;

/** The line under the panel's title: which harness, and what was not kept. */
export function logFacts(log: HarnessLog): string {
  if (log.generation === null || log.generation === undefined) {
    return log.live ? 'The harness has written nothing on stderr yet.' : 'Nothing written since the server started.';
  }
  const parts = [`harness #${log.generation}`, `${log.text.length.toLocaleString()} characters`];
  if (log.dropped_bytes) parts.push(`${log.dropped_bytes.toLocaleString()} bytes dropped (over the rate limit or while disconnected)`);
  if (log.rotated_bytes) parts.push(`${log.rotated_bytes.toLocaleString()} older bytes no longer kept`);
  return parts.join(' · ');
}
