/**
 * COFFER_MAX_CONNECTIONS (docs/operations.md#limits-that-protect-the-server): a node holds at most that many open
 * connections; one more is closed at once, without a response, while the open ones keep working, and a connection
 * is accepted again once one of them has gone.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const REQUEST = 'GET /healthz HTTP/1.1\r\nHost: coffer.test\r\n\r\n';

interface Connection {
  socket: net.Socket;
  /** Sends one keep-alive request; resolves with the status line of its response, or null when the server closed. */
  ask(): Promise<string | null>;
}

function connect(url: string): Promise<Connection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port) }, () => {
      let waiting: ((line: string | null) => void) | null = null;
      let received = '';
      const settle = (line: string | null) => {
        const done = waiting;
        waiting = null;
        received = '';
        done?.(line);
      };
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        received += chunk;
        // /healthz answers with a small JSON body: the whole response is in once its body has ended.
        if (received.includes('\r\n\r\n') && received.trimEnd().endsWith('}')) settle(received.split('\r\n')[0]!);
      });
      socket.on('close', () => settle(null));
      socket.on('error', () => undefined);
      resolve({
        socket,
        ask: () =>
          new Promise((answer) => {
            if (socket.destroyed) return answer(null);
            waiting = answer;
            socket.write(REQUEST);
          }),
      });
    });
    socket.once('error', reject);
  });
}

describe('COFFER_MAX_CONNECTIONS', () => {
  let server: TestServer;
  const open: Connection[] = [];

  beforeAll(async () => {
    server = await startTestServer({ env: { COFFER_MAX_CONNECTIONS: '3' } });
  });
  afterAll(async () => {
    for (const connection of open) connection.socket.destroy();
    await server?.stop();
  });

  it('closes the connection over the cap without an answer; the others keep working', async () => {
    for (let i = 0; i < 3; i++) {
      const connection = await connect(server.url);
      open.push(connection);
      expect(await connection.ask()).toBe('HTTP/1.1 200 OK');
    }

    const fourth = await connect(server.url);
    open.push(fourth);
    expect(await fourth.ask()).toBeNull();

    for (const connection of open.slice(0, 3)) expect(await connection.ask()).toBe('HTTP/1.1 200 OK');
  });

  it('accepts a connection again once one has closed', async () => {
    const leaving = open[0]!;
    await new Promise<void>((resolve) => {
      leaving.socket.once('close', () => resolve());
      leaving.socket.end();
    });
    // The server counts the connection as gone once its side has closed too; until then a newcomer is still refused.
    let answer: string | null = null;
    for (let attempt = 0; attempt < 50 && answer === null; attempt++) {
      const next = await connect(server.url);
      open.push(next);
      answer = await next.ask();
    }
    expect(answer).toBe('HTTP/1.1 200 OK');
  });
});
