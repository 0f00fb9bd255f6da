import { useState } from 'preact/hooks';
import { api, call, CallError, session } from '../api/client';

/** Sign-in: the key is checked against an admin route before it is kept (in sessionStorage only). */
export function SignIn({ onSignedIn, reason }: { onSignedIn: () => void; reason: string | null }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    session.signIn(key.trim());
    try {
      await call(api.GET('/v1/admin/runners'));
      onSignedIn();
    } catch (err) {
      session.signOut();
      const c = err instanceof CallError ? err : null;
      setError(
        c?.status === 401
          ? 'This key was refused: unknown or revoked.'
          : c?.status === 403
            ? 'This is a platform key: the console needs an admin key.'
            : (c?.message ?? String(err)),
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" class="signin">
      <h1>Runner Host console</h1>
      {reason && (
        <p class="state error" role="alert">
          {reason}
        </p>
      )}
      <form onSubmit={(e) => void submit(e)} aria-describedby="key-help">
        <label for="admin-key">Admin API key</label>
        <input
          id="admin-key"
          name="admin-key"
          type="password"
          autoComplete="off"
          required
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          aria-invalid={error ? 'true' : undefined}
          aria-describedby={error ? 'key-error' : 'key-help'}
        />
        <p id="key-help" class="muted">
          Kept in this tab only (sessionStorage): closing the tab signs you out.
        </p>
        {error && (
          <p id="key-error" class="field-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy || key.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
