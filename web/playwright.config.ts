// The browser checks (@playwright/test) against a running agenthold: the dev stack (`make up`;
// scripts/dev/test.sh runs them in `make test`) or any server named by AGENTHOLD_URL with a
// server admin's AGENTHOLD_TOKEN. Debian's Chromium only (/usr/bin/chromium, `CHROMIUM`
// overrides): a test tool's own browser download does not work on this machine, so never run
// `playwright install`. Each test gets a fresh browser context and its own new user (fixtures.ts).
//
// Two projects: `ui`, every flow but one, and `restart`, which kills and restarts the dev stack's
// server mid-turn (restart.spec.ts; only with AGENTHOLD_UI_RESTART=1, else it skips saying so),
// after `ui` has finished so no other test runs while the server is down. `--project=ui` leaves it
// out.
//
// A failure keeps its trace and screenshot under .dev/playwright/results/ (`npx playwright
// show-trace <trace.zip>`), the HTML report is .dev/playwright/report/ (no video: it needs
// Playwright's own ffmpeg download). In make test one retry (UI_RETRIES, scripts/dev/test.sh),
// for one cause outside the code: Chromium on the host of a Docker engine fails requests in
// flight with ERR_NETWORK_CHANGED whenever the host's interfaces change (each network, holder
// and pooled sandbox the server makes), and the UI does not repeat a write (it may have reached
// the server); a retried test is listed as flaky in the report and in make test's log. One
// worker: on the 2-core dev machine (shared, loaded) the whole suite took 239 and 271 s with one
// worker and 236, 280 and 279 s with two (the server, the sandboxes and the browsers share the
// cores, and the new user's wait for its schedule's first run, up to a minute and a half, is most
// of the critical path either way); UI_WORKERS=2 gives two.
import { defineConfig } from '@playwright/test';
import { fileURLToPath } from 'node:url';

const DEV = fileURLToPath(new URL('../.dev/playwright/', import.meta.url));

export default defineConfig({
  testDir: './e2e/tests',
  timeout: 180_000,
  expect: { timeout: 15_000 },
  fullyParallel: true,
  workers: Number(process.env.UI_WORKERS ?? 1),
  retries: Number(process.env.UI_RETRIES ?? 0),
  forbidOnly: !!process.env.CI,
  reporter: [['list'], ['html', { open: 'never', outputFolder: `${DEV}report` }]],
  outputDir: `${DEV}results`,
  use: {
    baseURL: process.env.AGENTHOLD_URL ?? 'http://127.0.0.1:7700',
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    viewport: { width: 1280, height: 900 },
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic'],
    },
  },
  projects: [
    { name: 'ui', testIgnore: /restart\.spec\.ts$/ },
    { name: 'restart', testMatch: /restart\.spec\.ts$/, dependencies: ['ui'] },
  ],
});
