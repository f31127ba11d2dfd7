// Killing and starting again the dev stack's server of this checkout (the `restart` project's
// test): SIGKILL to the pid in .dev/server.pid (checked to be the agenthold binary), then
// scripts/dev/server.sh start with this process's environment (.dev/env, sourced by whoever ran
// the tests, names the instance, ports, database and data dir). Only with AGENTHOLD_UI_RESTART=1
// (scripts/dev/test.sh sets it): the server may be someone else's otherwise.
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

/** SIGKILL to the dev stack's server. */
export function killServer() {
  const pid = Number(readFileSync(PIDFILE, 'utf8').trim());
  const exe = readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  if (!exe.endsWith('/agenthold')) throw new Error(`pid ${pid} in ${PIDFILE} runs ${exe}, not the agenthold server`);
  process.kill(pid, 'SIGKILL');
}

/** scripts/dev/server.sh start: resolves once it says the server is ready. */
export function startServer(): Promise<void> {
  return new Promise((ok, fail) => {
    const p = spawn('bash', [`${REPO}scripts/dev/server.sh`, 'start'], { stdio: ['ignore', 'ignore', 'inherit'] });
    p.on('error', fail);
    p.on('exit', (code) => (code === 0 ? ok() : fail(new Error(`scripts/dev/server.sh start: exit ${code}`))));
  });
}
