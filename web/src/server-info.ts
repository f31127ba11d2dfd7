// What the server publishes about agents, read once per page load and shared: the harnesses it
// knows (`GET /api/v1/harnesses`: names, models, logins, whether offered here) and the bounds of
// an agent's settings (`GET /api/v1/limits`: each limit's default and range, the egress presets,
// the postures offered). The form checks against these instead of copies of the server's rules.
import { api } from './api';
import type { Schemas } from './types';

export type Harness = Schemas['Harness'];
export type AgentBounds = Schemas['AgentBounds'];
export interface ServerInfo {
  harnesses: Harness[];
  limits: AgentBounds;
}

let cached: Promise<ServerInfo> | null = null;

/** Both documents (fetched at once, kept for the page's life; a failure is tried again next time). */
export function serverInfo(): Promise<ServerInfo> {
  cached ??= Promise.all([api<Harness[]>('GET', '/api/v1/harnesses'), api<AgentBounds>('GET', '/api/v1/limits')]).then(
    ([harnesses, limits]) => ({ harnesses, limits }),
    (e) => {
      cached = null;
      throw e;
    },
  );
  return cached;
}
