/**
 * The sending of one API request on fetch: the API key only to the configured origin, the request deadline, the
 * retries (429/503, and a failed idempotent request) with their backoff, and the answer read under its byte limit.
 * CofferClient (./sdk.ts) speaks the API through it. Platform-neutral (no Node built-in).
 */
import { CofferApiError, CofferNetworkError, refusalOf } from './errors.js';
import { connectionFailure, pause } from './network-failure.js';
import { ERROR_ANSWER_BYTES, readAnswer, seconds, sendingAllowanceMs } from './sdk-transfer.js';

/** The retries of a request, unless CofferClientOptions.maxRetries says otherwise. */
export const DEFAULT_MAX_RETRIES = 2;
/** The longest wait a retry accepts (Retry-After beyond it: the refusal is the answer, e.g. a cadence's hours). */
export const MAX_RETRY_WAIT_MS = 60_000;
/** The first backoff without Retry-After; each further retry doubles it (with ±25% jitter), up to 8 s. */
const FIRST_BACKOFF_MS = 500;

/** The pause before retry number `attempt` (0-based) when the server names none. */
const backoffMs = (attempt: number) => Math.min(8000, FIRST_BACKOFF_MS * 2 ** attempt) * (0.75 + Math.random() / 2);

const IDEMPOTENT = new Set(['GET', 'HEAD']);

/** The request deadline passed: not retried (a stalled server would stall again). */
class DeadlineError extends CofferNetworkError {}

/** Options of one API request. */
export interface RequestInit {
  json?: unknown;
  /** A raw body (an upload); a stream one is sent half-duplex and never retried. */
  body?: ReadableStream<Uint8Array> | Blob | Uint8Array;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * A public document (the API description): sent without the API key, so that a page of another origin reads it
   * with a simple CORS request (only /api/ answers a preflight).
   */
  public?: boolean;
}

/** A request sent and its answer's headers in: see CofferClient.open. */
export interface Opened {
  response: Response;
  address: string;
  done: () => void;
  failure: (error: unknown) => unknown;
}

/** What the transport needs of the client's options (all defaults applied). */
export interface TransportSettings {
  baseUrl: string;
  apiKey: string;
  userAgent: string;
  requestTimeoutMs: number;
  maxAnswerBytes: number;
  maxRetries: number;
  fetch: typeof fetch;
}

/** One client's way to the server: CofferClient holds one. */
export class ApiTransport {
  constructor(private readonly settings: TransportSettings) {}

  /** The API request headers: the key and the user agent, and `extra`. */
  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.settings.apiKey}`, 'user-agent': this.settings.userAgent, ...extra };
  }

  /**
   * Resolves an API path, or a server-announced absolute URL, to an address on the configured server. The API key
   * only ever goes to the configured origin: an announced URL on another origin (for example a server whose
   * COFFER_PUBLIC_URL is wrong, or a hostile one) is re-rooted onto the base URL, keeping its /api/… path and query.
   */
  url(pathOrUrl: string): string {
    if (pathOrUrl.startsWith('/')) return `${this.settings.baseUrl}${pathOrUrl}`;
    const announced = new URL(pathOrUrl);
    if (announced.origin === new URL(this.settings.baseUrl).origin) return announced.toString();
    const at = announced.pathname.indexOf('/api/');
    return `${this.settings.baseUrl}${at >= 0 ? announced.pathname.slice(at) : announced.pathname}${announced.search}`;
  }

  /**
   * Sends one API request under the request deadline (requestTimeoutMs, from now until `done()`): the caller reads
   * the answer under it and then calls `done()`; a JSON call keeps it to the answer's end, a download or an event
   * stream only to the headers (its body is then read under the stall rule). `failure(error)` is what an error
   * thrown meanwhile means: the caller's abort as is, the deadline as CofferNetworkError, else a network failure.
   */
  async open(method: string, path: string, init: RequestInit): Promise<Opened> {
    const streamed = init.body instanceof ReadableStream;
    for (let attempt = 0; ; attempt++) {
      const retries = !streamed && attempt < this.settings.maxRetries;
      let opened: Opened;
      try {
        opened = await this.attempt(method, path, init);
      } catch (error) {
        const again = retries && IDEMPOTENT.has(method) && error instanceof CofferNetworkError && !(error instanceof DeadlineError);
        if (!again || init.signal?.aborted) throw error;
        await pause(backoffMs(attempt), init.signal);
        continue;
      }
      const wait = retries ? this.retryWait(method, opened.response, attempt) : undefined;
      if (wait === undefined) return opened;
      opened.done();
      await opened.response.body?.cancel().catch(() => undefined);
      await pause(wait, init.signal);
    }
  }

  /** How long to wait before sending a request again after this answer, or undefined: the answer stands. */
  private retryWait(method: string, response: Response, attempt: number): number | undefined {
    const status = response.status;
    const retryable = status === 429 || status === 503 || (IDEMPOTENT.has(method) && (status === 502 || status === 504));
    if (!retryable) return undefined;
    const named = new CofferApiError(status, { error: '', code: '', message: '', resolution: '' }, response.headers).retryAfter;
    const wait = named === undefined ? backoffMs(attempt) : named * 1000;
    return wait <= MAX_RETRY_WAIT_MS ? wait : undefined;
  }

  /** One sending of a request (open's retries call it again). */
  private async attempt(method: string, path: string, init: RequestInit): Promise<Opened> {
    const headers = init.public ? { 'user-agent': this.settings.userAgent, ...init.headers } : this.headers(init.headers);
    const requestTimeoutMs = this.settings.requestTimeoutMs;
    let body: string | ReadableStream<Uint8Array> | Blob | Uint8Array | undefined = init.body;
    if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      headers['content-type'] = 'application/json';
    }
    const address = this.url(path);
    const deadline = new AbortController();
    // An upload's body takes its own time to send: a known length adds what it takes at MIN_TRANSFER_RATE; a stream
    // restarts the deadline with each piece it gives (the deadline is then for a stall, not for the whole body).
    const expire = () => deadline.abort(this.noAnswer(method, address));
    let timer = setTimeout(expire, this.settings.requestTimeoutMs + sendingAllowanceMs(body));
    const done = () => clearTimeout(timer);
    if (body instanceof ReadableStream) {
      body = body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            done();
            timer = setTimeout(expire, requestTimeoutMs);
            controller.enqueue(chunk);
          },
        }),
      );
    }
    const failure = (error: unknown): unknown => {
      done();
      if (init.signal?.aborted) return error;
      if (deadline.signal.aborted) return deadline.signal.reason;
      if (error instanceof CofferNetworkError) return error;
      return new CofferNetworkError(connectionFailure(address, error), { cause: error });
    };
    const signal = init.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal;
    try {
      const duplex = body instanceof ReadableStream ? { duplex: 'half' } : {};
      const response = await this.settings.fetch(address, { method, headers, body: body as BodyInit | undefined, signal, ...duplex });
      return { response, address, done, failure };
    } catch (error) {
      throw failure(error);
    }
  }

  private noAnswer(method: string, address: string): CofferNetworkError {
    const url = new URL(address);
    return new DeadlineError(
      `the server at ${url.origin} did not answer ${method} ${url.pathname} within ${seconds(this.settings.requestTimeoutMs)} ` +
        '(COFFER_REQUEST_TIMEOUT): a stalled server or proxy',
    );
  }

  /** A request and its whole answer, all under the request deadline: the answer's text, at most maxAnswerBytes. */
  async call(method: string, path: string, init: RequestInit = {}): Promise<{ response: Response; text: string }> {
    const { response, address, done, failure } = await this.open(method, path, init);
    try {
      const limit = response.ok ? this.settings.maxAnswerBytes : ERROR_ANSWER_BYTES;
      const text = await readAnswer(response, limit, `${method} ${new URL(address).pathname}`, new URL(address).origin);
      done();
      return { response, text };
    } catch (error) {
      throw failure(error);
    }
  }

  /** A refusal of a streamed request (its answer read under the request deadline) as the CofferApiError it is. */
  async refusal(response: Response, what: string, done: () => void, failure: (error: unknown) => unknown) {
    let text: string;
    try {
      text = await readAnswer(response, ERROR_ANSWER_BYTES, what, this.settings.baseUrl);
    } catch (error) {
      throw failure(error);
    }
    done();
    return refusalOf(response.status, text, response.headers);
  }
}
