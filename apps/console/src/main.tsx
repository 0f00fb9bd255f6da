import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { onKeyRefused, session } from './api/client';
import { href, match, navigate, onLinkClick, useLocation, type Location } from './lib/router';
import { Conversation, Conversations } from './pages/conversations';
import { Deliveries } from './pages/deliveries';
import { Overview } from './pages/overview';
import { Resources, ResourcePage, RESOURCE_KINDS } from './pages/resources';
import { RunPage } from './pages/run';
import { Runs } from './pages/runs';
import { SignIn } from './pages/signin';
import { SnapshotPage } from './pages/snapshot';
import { Steering } from './pages/steering';
import './styles.css';

const NAV: [string, string][] = [
  ['/', 'Overview'],
  ['/runs', 'Runs'],
  ['/conversations', 'Conversations'],
  ['/steering', 'Steering'],
  ['/deliveries', 'Deliveries'],
  ...RESOURCE_KINDS.map((k): [string, string] => [`/${k.path}`, k.title]),
];

function Route({ loc }: { loc: Location }) {
  const p = loc.path;
  let m: Record<string, string> | null;
  if (p === '/') {
    return <Overview />;
  }
  if (p === '/runs') {
    return <Runs loc={loc} />;
  }
  if ((m = match('/runs/:id/snapshot', p))) {
    return <SnapshotPage runId={m.id} loc={loc} />;
  }
  if ((m = match('/runs/:id', p))) {
    return <RunPage runId={m.id} />;
  }
  if (p === '/conversations') {
    return <Conversations />;
  }
  if ((m = match('/conversations/:id', p))) {
    return <Conversation id={m.id} loc={loc} />;
  }
  if (p === '/steering') {
    return <Steering />;
  }
  if (p === '/deliveries') {
    return <Deliveries loc={loc} />;
  }
  for (const kind of RESOURCE_KINDS) {
    if (p === `/${kind.path}`) {
      return <Resources kind={kind} />;
    }
    if ((m = match(`/${kind.path}/:id`, p))) {
      return <ResourcePage kind={kind} id={m.id} />;
    }
  }
  return (
    <>
      <h1>Not found</h1>
      <p>
        No console page at <code class="wrap">{p}</code>. <a href={href('/')}>Go to the overview</a>.
      </p>
    </>
  );
}

function App() {
  const loc = useLocation();
  const [signedIn, setSignedIn] = useState(session.key() !== null);
  const [reason, setReason] = useState<string | null>(null);
  useEffect(
    () =>
      onKeyRefused((status) => {
        if (status === 401) {
          // Revoked or unknown: sign out, say why.
          session.signOut();
          setReason('Your key was refused (revoked or unknown). Sign in again.');
          setSignedIn(false);
        }
      }),
    [],
  );
  if (!signedIn) {
    return (
      <SignIn
        reason={reason}
        onSignedIn={() => {
          setReason(null);
          setSignedIn(true);
        }}
      />
    );
  }
  const section = '/' + (loc.path.split('/')[1] ?? '');
  return (
    <div class="shell" onClick={onLinkClick}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href('/')}>
          Runner Host
        </a>
        <nav aria-label="Console">
          <ul>
            {NAV.map(([to, label]) => (
              <li key={to}>
                <a href={href(to)} aria-current={section === to ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button
          type="button"
          class="signout"
          onClick={() => {
            session.signOut();
            setSignedIn(false);
            navigate('/', true);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Route loc={loc} />
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
