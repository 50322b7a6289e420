/** Messages between the key page and its recipient worker (src/recipient.worker.ts). */
export interface RecipientRequest {
  passphrase: string;
}

export type RecipientMessage =
  { type: 'done'; recipient: string; fingerprint: string } | { type: 'error'; wrongPassphrase: boolean; message: string };

/** Derives the vault's recipient in a new worker; resolves with its answer (the worker ends after one). */
export function deriveRecipientInWorker(request: RecipientRequest): Promise<RecipientMessage> {
  return new Promise((resolve) => {
    const worker = new Worker(new URL('./recipient.worker.ts', import.meta.url), { type: 'module', name: 'coffer-recipient' });
    worker.onmessage = (event: MessageEvent<RecipientMessage>) => {
      resolve(event.data);
      worker.terminate();
    };
    worker.onerror = (event) => {
      resolve({ type: 'error', wrongPassphrase: false, message: event.message || 'the worker failed to start' });
      worker.terminate();
    };
    worker.postMessage(request);
  });
}
