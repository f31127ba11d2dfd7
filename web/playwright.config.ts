// The browser checks (@playwright/test) against a running agenthold: the dev stack (`make up`;
// scripts/dev/test.sh runs them in `make test`) or any server named by AGENTHOLD_URL with a
// server admin's AGENTHOLD_TOKEN. Debian's Chromium only (/usr/bin/chromium, `CHROMIUM`
// overrides): a test tool's own browser download does not work on this machine, so never run
// `playwright install`. Each test gets a fresh browser context and its own new user (fixtures.ts);
// a failure keeps its trace and screenshot under test-results/ (no video: it needs Playwright's
// own ffmpeg download).
import { defineConfig } from '@playwright/test';

export default defineConfig({
  testDir: './e2e/tests',
  timeout: 180_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list'], ['html', { open: 'never', outputFolder: 'e2e/report' }]],
  outputDir: 'test-results',
  use: {
    baseURL: process.env.AGENTHOLD_URL ?? 'http://127.0.0.1:7700',
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    viewport: { width: 1280, height: 900 },
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    },
  },
});
