import { defineConfig } from 'vitest/config';

// `npm run dev` serves the UI on :5173 and forwards the API (and its WebSockets) to the server
// named by AGENTHOLD_URL (default: the dev stack's http://127.0.0.1:7700).
const api = (globalThis as any).process?.env?.AGENTHOLD_URL ?? 'http://127.0.0.1:7700';

export default defineConfig({
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  // The server puts a fresh nonce in place of this in every index.html it serves (and in the
  // policy's style-src): the terminal's run-time <style> elements use it.
  html: { cspNonce: '__CSP_NONCE__' },
  build: {
    target: 'es2022',
    // No inline scripts: the Content-Security-Policy allows only the server's own files.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  server: { proxy: { '/api': { target: api, ws: true } } },
  test: { include: ['test/**/*.test.{ts,tsx}'], environment: 'node' },
});
