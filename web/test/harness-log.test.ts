// The agent page's "Harness log" panel: the line that says which harness and what was not kept.
import { describe, expect, it } from 'vitest';
import { logFacts, type HarnessLog } from '../src/harness-log';

const log = (over: Partial<HarnessLog>): HarnessLog => ({
  text: '',
  generation: null,
  dropped_bytes: 0,
  rotated_bytes: 0,
  ring_bytes: 65536,
  live: true,
  ...over,
});

describe('harness log facts', () => {
  it('says when nothing was written', () => {
    expect(logFacts(log({}))).toBe('The harness has written nothing on stderr yet.');
    expect(logFacts(log({ live: false }))).toBe('Nothing written since the server started.');
  });
  it('names the harness and counts what was dropped or rotated out', () => {
    expect(logFacts(log({ generation: 3, text: 'oops\n' }))).toBe('harness #3 · 5 characters');
    const flooded = logFacts(log({ generation: 4, text: 'x', dropped_bytes: 1200, rotated_bytes: 7 }));
    expect(flooded).toContain('bytes dropped (over the rate limit or while disconnected)');
    expect(flooded).toContain('older bytes no longer kept');
  });
});
