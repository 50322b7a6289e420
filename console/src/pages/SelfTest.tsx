/**
 * Browser check: runs the published test vectors of docs/crypto.md against the page's own crypto (libsodium in
 * WebAssembly), so an owner can see that this browser decrypts exactly as the CLI does before trusting a restore.
 */
import { useEffect, useState } from 'preact/hooks';
import type { Check } from '../crypto/selftest.js';
import cryptoDoc from '../../../docs/crypto.md?raw';

async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

export function SelfTestPage() {
  const [checks, setChecks] = useState<Check[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    (async () => {
      const [{ ready }, { parseVectors, runVectorChecks }] = await Promise.all([
        import('../crypto/envelope.js'),
        import('../crypto/selftest.js'),
      ]);
      await ready;
      setChecks(await runVectorChecks(parseVectors(cryptoDoc), gunzip));
    })().catch((caught: unknown) => setError(String(caught)));
  }, []);
  const passed = checks?.filter((c) => c.ok).length ?? 0;
  return (
    <section>
      <h1 tabIndex={-1}>Browser check</h1>
      <p class="lede">
        This page runs the test vectors published with Coffer's encryption format (envelope v1) and its restore attestations through the
        same code that restores your backups and checks their drills here.
      </p>
      {!checks && !error && <p role="status">Running the test vectors…</p>}
      {error && (
        <p class="error" role="alert">
          The check could not run: {error}
        </p>
      )}
      {checks && (
        <>
          <p role="status" class={passed === checks.length ? 'success' : 'error'} data-testid="selftest-summary">
            {passed === checks.length
              ? `All ${checks.length} checks passed: this browser encrypts and decrypts exactly as the CLI does.`
              : `${checks.length - passed} of ${checks.length} checks failed: do not restore in this browser.`}
          </p>
          <ul class="checks">
            {checks.map((check) => (
              <li key={check.name} data-ok={check.ok}>
                <span aria-hidden="true">{check.ok ? '✓' : '✗'}</span> {check.name}
                <span class="visually-hidden">{check.ok ? ': passed' : ': failed'}</span>
                {check.detail && <span class="muted"> ({check.detail})</span>}
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}
