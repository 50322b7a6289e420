/**
 * The shared shape of the backend suites in test/backends/: each runs ONE set of tests against every
 * implementation of an interface (Store: SQLite and PostgreSQL; BlobStore: filesystem and S3; StatusBus:
 * in-process and PostgreSQL LISTEN/NOTIFY), so the implementations cannot drift apart.
 */
import { afterAll, beforeAll, describe } from 'vitest';

/** One implementation under a suite: how to start it and stop it, and whether it can run here. */
export interface Engine<T> {
  /** Names the implementation in the test titles. */
  name: string;
  /** The backend is unavailable here (PostgreSQL unreachable and not required): its tests are skipped. */
  skip?: boolean;
  /** Starts the backend for the suite; returns what the tests use. */
  setUp(): Promise<T>;
  /** Stops the backend and removes what setUp made; runs after the suite, also when a test failed. */
  tearDown(): Promise<void>;
}

type Backend<E extends Engine<unknown>> = Awaited<ReturnType<E['setUp']>>;

/**
 * Declares `suite` once per engine, titled `<title>: <engine name>`, between the engine's setUp (beforeAll) and
 * tearDown (afterAll). `backend()` returns what setUp gave, from the suite's own beforeAll hooks on.
 */
export function describeEngines<E extends Engine<unknown>>(
  title: string,
  engines: E[],
  suite: (engine: E, backend: () => Backend<E>) => void,
): void {
  for (const engine of engines) {
    describe.skipIf(engine.skip === true)(`${title}: ${engine.name}`, () => {
      let backend: Backend<E>;
      beforeAll(async () => {
        backend = (await engine.setUp()) as Backend<E>;
      });
      afterAll(() => engine.tearDown());
      suite(engine, () => backend);
    });
  }
}
