import { DomainError } from '@libs/protocol';
import { canSee, targetWorkspace } from './tenancy';

function refusal(fn: () => unknown): { code: string; field: unknown } {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError) {
      return { code: e.code, field: e.details.field };
    }
    throw e;
  }
  throw new Error('accepted');
}

describe('tenancy rules (docs/tenancy.md#keys)', () => {
  it('a global key sees every workspace; a scoped key only its own', () => {
    expect(canSee({ workspaces: null }, 'acme')).toBe(true);
    expect(canSee({ workspaces: ['acme'] }, 'acme')).toBe(true);
    expect(canSee({ workspaces: ['acme'] }, 'globex')).toBe(false);
    // No workspace is the default one.
    expect(canSee({ workspaces: ['default'] }, null)).toBe(true);
  });

  it("a write goes to the named workspace (the caller's), else the only one, else default for a global key", () => {
    expect(targetWorkspace({ workspaces: null }, undefined)).toBe('default');
    expect(targetWorkspace({ workspaces: null }, 'globex')).toBe('globex');
    expect(targetWorkspace({ workspaces: ['acme'] }, undefined)).toBe('acme');
    // An admin body's `workspace_id: null` names no workspace, as an absent one.
    expect(targetWorkspace({ workspaces: null }, null)).toBe('default');
    expect(targetWorkspace({ workspaces: ['acme'] }, null)).toBe('acme');
    expect(targetWorkspace({ workspaces: ['acme', 'globex'] }, 'globex')).toBe('globex');
    expect(refusal(() => targetWorkspace({ workspaces: ['acme'] }, 'globex'))).toEqual({
      code: 'unauthorized',
      field: 'workspace_id',
    });
    expect(refusal(() => targetWorkspace({ workspaces: ['acme', 'globex'] }, undefined))).toEqual({
      code: 'invalid_argument',
      field: 'workspace_id',
    });
  });
});
