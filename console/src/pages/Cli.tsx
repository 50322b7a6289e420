/** The CLI download page: this server serves its own CLI package, so no registry entry is needed. */
import { useEffect, useState } from 'preact/hooks';
import { api, type About } from '../api.js';
import { formatBytes, wrapPoints } from '../format.js';

export function CliPage() {
  const [about, setAbout] = useState<About | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    api('GET /console/api/about', { quiet401: true }).then(setAbout, () => setFailed(true));
  }, []);
  const base = about?.publicUrl ?? location.origin;
  return (
    <section>
      <h1 tabIndex={-1}>Coffer CLI</h1>
      <p class="lede">
        The <code>coffer</code> command encrypts on your machine before anything is uploaded. This server hosts its own copy: install it
        straight from here. It needs Node.js 20.19 or a later 20, 22.16 or a later 22, or 24 and newer (not 21 or 23):{' '}
        <code>{about?.nodeEngine ?? '^20.19.0 || ^22.16.0 || >=24'}</code>, checked when it starts.
      </p>
      {failed && (
        <p class="error" role="alert">
          The package details could not be loaded.
        </p>
      )}
      {about && !about.cli && (
        <p class="notice">
          This server has not built its CLI package yet (the operator runs <code>npm run build</code>).
        </p>
      )}
      {about?.cli && (
        <>
          <h2>Install</h2>
          <pre class="command" aria-label="Install command">
            <code>{wrapPoints(about.cli.install)}</code>
          </pre>
          <p>
            <a class="button" href="/downloads/coffer-cli.tgz" download>
              Download coffer-cli.tgz
            </a>{' '}
            <span class="muted">
              version {about.version}, {formatBytes(about.cli.bytes)}
            </span>
          </p>
          <dl class="facts">
            <dt>SHA-256</dt>
            <dd class="mono wrap">{about.cli.sha256}</dd>
            <dt>npm integrity</dt>
            <dd class="mono wrap">{about.cli.integrity}</dd>
          </dl>
        </>
      )}
      <h2>First backup</h2>
      <pre class="command">
        <code>
          {wrapPoints(
            [
              `export COFFER_URL=${base}`,
              'export COFFER_API_KEY=cfk_…   # from the API keys page',
              'coffer init                   # asks for a passphrase; creates your vault',
              'coffer backup ~/Documents     # encrypts locally, then uploads',
              'coffer list',
              'coffer restore <backupId> ./restored',
            ].join('\n'),
          )}
        </code>
      </pre>
    </section>
  );
}
