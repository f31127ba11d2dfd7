import { useState } from 'preact/hooks';
import { signIn } from '../api';
import { navigate, query } from '../router';
import { ErrorLine } from '../ui';

export function LoginPage() {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  return (
    <main class="page narrow">
      <h1>Sign in to agenthold</h1>
      <form
        class="stack"
        onSubmit={async (e) => {
          e.preventDefault();
          setBusy(true);
          setError(null);
          try {
            await signIn(username.trim(), password);
            const next = query.value.get('next');
            navigate(next && next.startsWith('/') && !next.startsWith('//') && next !== '/login' ? next : '/', true);
          } catch (err) {
            setError(err);
          } finally {
            setBusy(false);
          }
        }}
      >
        <label>
          Username
          <input name="username" autoComplete="username" required value={username} onInput={(e) => setUsername(e.currentTarget.value)} />
        </label>
        <label>
          Password
          <input name="password" type="password" autoComplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
        <ErrorLine error={error} />
      </form>
      <p class="muted">Accounts are made by a server admin (<code>POST /api/v1/users</code>, or <code>agentholdctl</code>).</p>
    </main>
  );
}
