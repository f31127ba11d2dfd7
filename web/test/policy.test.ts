// The policy editor's grammar: the server's glob and command rules checked per row, rows to the
// API's JSON and back, and the server's "rule N:" landing on row N.
import { describe, expect, it } from 'vitest';
import { describeRule, fromPolicy, globError, ruleIndexOf, rowErrors, toPolicy, type RuleRow } from '../src/policy';

const row = (over: Partial<RuleRow>): RuleRow => ({ effect: 'write', path: '', outsideWorkdir: false, command: '', answer: 'deny', ...over });

describe('path globs (core/src/permissions/glob.rs)', () => {
  it('accepts absolute globs and ** prefixes', () => {
    for (const g of ['/home/agent/**/*.rs', '**/.env', '**', '/etc/*']) expect(globError(g)).toBeNull();
  });
  it('refuses what the server refuses, with its reason', () => {
    expect(globError('src/*.rs')).toContain('must be absolute');
    expect(globError('/a/b**')).toContain('whole segment');
    expect(globError('/a/../b')).toContain('`..`');
    expect(globError('  ')).toBe('is empty');
    expect(globError('/' + 'a'.repeat(600))).toContain('longer than 512');
  });
});

describe('rows', () => {
  it('command only on exec; no path on network', () => {
    expect(rowErrors(row({ effect: 'write', command: 'x' }))).toEqual({ command: '`command` applies only to exec rules' });
    expect(rowErrors(row({ effect: 'network', path: '/x' })).path).toContain('do not apply to network');
    expect(rowErrors(row({ effect: 'exec', command: 'git *', answer: 'allow' }))).toEqual({});
    expect(rowErrors(row({ path: 'relative/x' })).path).toContain('must be absolute');
  });
  it('rows → the API’s JSON, fields left out when empty, and back', () => {
    const rows = [row({ effect: 'read', answer: 'allow' }), row({ outsideWorkdir: true }), row({ effect: 'exec', command: ' git * ', answer: 'allow' })];
    const policy = toPolicy(rows, 'ask');
    expect(policy).toEqual({
      rules: [{ effect: 'read', answer: 'allow' }, { effect: 'write', outside_workdir: true, answer: 'deny' }, { effect: 'exec', command: 'git *', answer: 'allow' }],
      default: 'ask',
    });
    expect(toPolicy(fromPolicy(policy).rows, fromPolicy(policy).default)).toEqual(policy);
    expect(fromPolicy(null)).toEqual({ rows: [], default: 'ask' });
  });
  it('the server’s error names the row (from 0)', () => {
    expect(ruleIndexOf('rule 2: `path` must be absolute (start with `/`) or start with `**`')).toBe(2);
    expect(ruleIndexOf('`default` is required')).toBeNull();
  });
  it('reads as a sentence', () => {
    expect(describeRule({ effect: 'exec', command: 'git *', answer: 'allow' })).toBe('allow exec `git *`');
    expect(describeRule({ effect: 'write', outside_workdir: true, answer: 'deny' })).toBe('deny write outside the work folder');
  });
});
