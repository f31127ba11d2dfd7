// Killing and starting again the dev stack's server of this checkout (the `restart` project's
// test): SIGKILL to the pid in .dev/server.pid (checked to be the agenthold binary), then
// scripts/dev/server.sh start with the killed server's own settings (its AGENTHOLD_* variables,
// DATABASE_URL and CARGO_TARGET_DIR, read from /proc before the kill: .dev/env names only the URL
// and token, and a server started with another instance name, port or database would clobber
// someone else's). Only with AGENTHOLD_UI_RESTART=1 (scripts/dev/test.sh sets it).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PIDFILE = `${REPO}.dev/server.pid`;

/** Why the server cannot be restarted here (the test skips saying so), or null. */
export function restartable(): string | null {
  if (process.env.AGENTHOLD_UI_RESTART !== '1') return 'AGENTHOLD_UI_RESTART is not 1: this test kills and restarts the dev stack’s server';
  // Asked to: a missing server is a failure, not a skip.
  if (!existsSync(PIDFILE)) throw new Error(`${PIDFILE} does not exist: start the dev stack (scripts/dev/server.sh start)`);
  return null;
}

/** The settings of the server that runs now (what server.sh start needs to start it again). */
let settings: Record<string, string> = {};

/** Whether `pid` has exited (gone, or a zombie: its sockets are closed by then). */
function exited(pid: number): boolean {
  try {
    // The state follows the command name's closing parenthesis.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/**
 * SIGKILL to the dev stack's server, its settings kept for startServer; resolves once it has
 * exited (until then its listening sockets still accept, and a new server finds its ports taken).
 */
export async function killServer() {
  const pid = Number(readFileSync(PIDFILE, 'utf8').trim());
  const exe = readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  if (!exe.endsWith('/agenthold')) throw new Error(`pid ${pid} in ${PIDFILE} runs ${exe}, not the agenthold server`);
  settings = Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])
      .filter(([k]) => /^(AGENTHOLD_|DATABASE_URL$|CARGO_TARGET_DIR$)/.test(k)),
  );
  // server.sh exports the addresses it listens on, not always the ports it made them from.
  settings.AGENTHOLD_PORT ??= /:(\d+)$/.exec(settings.AGENTHOLD_LISTEN ?? '')?.[1] ?? '';
  settings.AGENTHOLD_TUNNEL_PORT ??= /:(\d+)$/.exec(settings.AGENTHOLD_TUNNEL_LISTEN ?? '')?.[1] ?? '';
  if (!settings.AGENTHOLD_PORT || !settings.AGENTHOLD_TUNNEL_PORT) throw new Error(`pid ${pid}: no listen address in its environment`);
  process.kill(pid, 'SIGKILL');
  const deadline = Date.now() + 30_000;
  while (!exited(pid)) {
    if (Date.now() > deadline) throw new Error(`pid ${pid} did not exit within 30 s of SIGKILL`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** scripts/dev/server.sh start with the killed server's settings: resolves once it is ready. */
export function startServer(): Promise<void> {
  return new Promise((ok, fail) => {
    const env = { ...process.env, ...settings };
    const p = spawn('bash', [`${REPO}scripts/dev/server.sh`, 'start'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    p.on('error', fail);
    p.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`scripts/dev/server.sh start: exit ${code}`))));
  });
}
