// The REST API as the signed-in browser uses it: the session cookie (HttpOnly, never seen here)
// plus the CSRF token, which lives in memory only (after a reload, GET /api/v1/me gives it back).
import { signal } from '@preact/signals';

export interface Workspace {
  workspace_id: string;
  name: string;
  role: 'viewer' | 'operator' | 'admin';
  personal: boolean;
}
export interface Me {
  id: string;
  username: string;
  server_admin: boolean;
  workspaces: Workspace[];
  csrf_token?: string;
}

/** undefined: not known yet; null: signed out. */
export const me = signal<Me | null | undefined>(undefined);
let csrf: string | null = null;

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Tries of a read (GET, HEAD) that fails before any answer, and the wait before each again. */
const READ_TRIES = 3;
const READ_RETRY_MS = 300;

export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const read = method === 'GET' || method === 'HEAD';
  if (!read && csrf) headers['x-csrf-token'] = csrf;
  let response: Response | null = null;
  // A read that fails without an answer is tried again: a browser on the server's own host drops
  // requests in flight whenever the host's interfaces change (Chromium's ERR_NETWORK_CHANGED, on
  // each Docker network or container made). A write is not: it may have reached the server.
  for (let attempt = 1; response === null; attempt++) {
    try {
      response = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'same-origin',
      });
    } catch {
      if (!read || attempt >= READ_TRIES) throw new ApiError(0, 'NETWORK', 'the server cannot be reached');
      await new Promise((r) => setTimeout(r, READ_RETRY_MS));
    }
  }
  const text = await response.text();
  let data: any = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    const code = data?.error?.code ?? `HTTP_${response.status}`;
    const message = data?.error?.message ?? response.statusText;
    if (response.status === 401 && path !== '/api/v1/auth/login') {
      csrf = null;
      me.value = null;
    }
    throw new ApiError(response.status, code, message);
  }
  return data as T;
}

export async function loadMe(): Promise<void> {
  try {
    const who = await api<Me>('GET', '/api/v1/me');
    csrf = who.csrf_token ?? null;
    me.value = who;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) me.value = null;
    else throw e;
  }
}

export async function signIn(username: string, password: string): Promise<void> {
  const answer = await api<{ csrf_token: string }>('POST', '/api/v1/auth/login', { username, password });
  csrf = answer.csrf_token;
  await loadMe();
}

export async function signOut(): Promise<void> {
  try {
    await api('POST', '/api/v1/auth/logout');
  } finally {
    csrf = null;
    me.value = null;
  }
}

export function roleIn(workspaceId: string | undefined): Workspace['role'] | null {
  return me.value?.workspaces.find((w) => w.workspace_id === workspaceId)?.role ?? null;
}
export const atLeast = (role: Workspace['role'] | null, needed: Workspace['role']) =>
  role !== null && ['viewer', 'operator', 'admin'].indexOf(role) >= ['viewer', 'operator', 'admin'].indexOf(needed);

export function wsUrl(path: string): string {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${path}`;
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return `${e.message} (${e.code})`;
  return e instanceof Error ? e.message : String(e);
}
