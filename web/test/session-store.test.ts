import { describe, expect, it } from 'vitest';
import { grantsChanged, turnStateOf } from '../src/session-store';

const e = (seq: number, type: string, payload: unknown = {}) => ({ seq, type, payload });

describe('the turn state of a tail of the log', () => {
  it('the last boundary decides', () => {
    expect(turnStateOf([e(1, 'prompt', { turn_id: 't1' }), e(2, 'update')])).toEqual({ running: true, turnId: 't1' });
    expect(turnStateOf([e(1, 'prompt', { turn_id: 't1' }), e(2, 'turn_end')])).toEqual({ running: false, turnId: null });
    expect(turnStateOf([e(1, 'prompt', { turn_id: 't1' }), e(2, 'error', { turn_id: 't1', code: 'HARNESS_EXITED' })])).toEqual({ running: false, turnId: null });
    // A turn timeout is followed by the turn's end; it does not end the turn by itself.
    expect(turnStateOf([e(1, 'prompt', { turn_id: 't1' }), e(2, 'error', { turn_id: 't1', code: 'TURN_TIMEOUT' })])).toEqual({ running: true, turnId: 't1' });
  });
  it('no boundary: unknown', () => {
    expect(turnStateOf([e(5, 'update'), e(6, 'notice')])).toBeNull();
  });
});

describe("what changes the session's grants", () => {
  it('an answer for this session, or a revocation', () => {
    expect(grantsChanged(e(1, 'permission_resolved', { scope: 'session', by: { user_id: 'u' } }))).toBe(true);
    expect(grantsChanged(e(2, 'notice', { code: 'GRANT_REVOKED', grant: 'g' }))).toBe(true);
    expect(grantsChanged(e(3, 'permission_resolved', { by: { user_id: 'u' } }))).toBe(false);
    expect(grantsChanged(e(4, 'notice', { code: 'TURN_PARKED' }))).toBe(false);
  });
});
