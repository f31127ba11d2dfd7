// What the Claude Code browser flow (claude-code-flow.spec.ts) needs around the page, as
// scripts/e2e/real-harness.sh does it for the shell checks: whether the base image exists (the
// only reason to skip), the local Anthropic stand-in (scripts/e2e/standins/anthropic.py) with a
// throwaway CA, and the dev server restarted with the TEST-ONLY upstream override that maps
// api.anthropic.com to it (AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES; the real egress proxy injects
// the key on the way), then restarted without it. Everything here talks to loopback only.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const STANDINS = join(ROOT, 'scripts/e2e/standins');
const SERVER_SH = join(ROOT, 'scripts/dev/server.sh');

/** Why the flow cannot run here (the base image is absent), or null. */
export function baseImageMissing(image: string): string | null {
  try {
    execFileSync('docker', ['image', 'inspect', image], { stdio: 'ignore', timeout: 30_000 });
    return null;
  } catch {
    return `${image} does not exist on this Docker engine: build it with \`make base-image\` (the real Claude Code runs in it)`;
  }
}

/** Waits for `check` with a deadline (no bare sleeps as synchronisation). */
async function until(what: string, ms: number, check: () => boolean) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface StandIn {
  /** Requests the stand-in answered, one JSON object a line (headers included). */
  record: string;
  /** Stops the stand-in and restarts the server without the override. */
  stop: () => void;
}

function restartServer(overrides: string | null) {
  const env = { ...process.env };
  if (overrides) env.AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES = overrides;
  else delete env.AGENTHOLD_PROXY_TEST_UPSTREAM_OVERRIDES;
  execFileSync(SERVER_SH, ['start'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 180_000 });
}

/** The stand-in on a free loopback port, and the dev server restarted to reach it through the proxy. */
export async function startStandIn(): Promise<StandIn> {
  const work = mkdtempSync(join(tmpdir(), 'agenthold-ui-claude-'));
  execFileSync(join(STANDINS, 'make-cert.sh'), [join(work, 'certs'), 'api.anthropic.com'], { stdio: 'ignore', timeout: 60_000 });
  const record = join(work, 'record.jsonl');
  const portFile = join(work, 'port');
  const child: ChildProcess = spawn(
    'python3',
    [join(STANDINS, 'anthropic.py'), '--cert', join(work, 'certs/leaf.pem'), '--key', join(work, 'certs/leaf.key'), '--ready', portFile, '--record', record],
    { stdio: ['ignore', 'ignore', 'ignore'] },
  );
  let restarted = false;
  const stop = () => {
    child.kill('SIGTERM');
    if (restarted) restartServer(null);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    await until('the Anthropic stand-in', 15_000, () => existsSync(portFile) && readFileSync(portFile, 'utf8').endsWith('\n'));
    const port = readFileSync(portFile, 'utf8').trim();
    const overrides = JSON.stringify({ 'api.anthropic.com:443': { addr: `127.0.0.1:${port}`, ca_cert: join(work, 'certs/root.pem') } });
    restarted = true;
    restartServer(overrides);
  } catch (e) {
    stop();
    throw e;
  }
  return { record, stop };
}

/** The requests the stand-in recorded. */
export function recorded(record: string): { headers?: Record<string, string> }[] {
  if (!existsSync(record)) return [];
  return readFileSync(record, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return {};
      }
    });
}

/**
 * Deletes an agent as the user who made it (its workspace is theirs; the server admin is not a
 * member): signs in with its password and sends the CSRF token the login answers.
 */
export async function deleteAgentAs(baseURL: string, user: { username: string; password: string }, agentId: string): Promise<number> {
  const { request } = await import('@playwright/test');
  const ctx = await request.newContext({ baseURL });
  try {
    const login = await ctx.post('/api/v1/auth/login', { data: { username: user.username, password: user.password } });
    const csrf = (await login.json()).csrf_token as string;
    const r = await ctx.delete(`/api/v1/agents/${agentId}`, { headers: { 'x-csrf-token': csrf } });
    return r.status();
  } finally {
    await ctx.dispose();
  }
}
