// Seed 002's one-line briefs.
import { describe, expect, it } from 'vitest';
import { briefOfOutput, briefOfQuestion, briefOfThought, oneLine } from '../src/brief';

describe('briefs', () => {
  it('a question: the tool and what it touches', () => {
    expect(briefOfQuestion('permission', { title: 'Bash', kind: 'execute', rawInput: { command: 'npm test' } })).toBe('Bash → npm test');
    expect(briefOfQuestion('permission', { title: 'Write', locations: [{ path: '/home/agent/a.md' }] })).toBe('Write → /home/agent/a.md');
    expect(briefOfQuestion('permission', { title: 'Run `ls`', rawInput: { command: 'ls' } })).toBe('Run `ls`');
    expect(briefOfQuestion('elicitation', { message: 'Which file\nfirst?' })).toBe('Which file first?');
  });
  it('outputs, thoughts, and the length', () => {
    expect(briefOfOutput('✓ src/parser.test.ts (12 ok)\nTest Files 1 passed\nok\n')).toBe('→ ✓ src/parser.test.ts (12 ok) (3 lines)');
    expect(briefOfThought('Considering the request')).toBe('[thinking] Considering the request');
    expect(oneLine('x'.repeat(200))).toHaveLength(120);
  });
});
