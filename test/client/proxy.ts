/** A loopback TCP proxy that stalls: a stuck proxy, or a server that stopped reading or sending (client tests). */
import type { AddressInfo } from 'node:net';
import net from 'node:net';

/**
 * A TCP proxy to `port` that forwards both ways until a direction has carried `after` bytes, then stops reading
 * that direction (the connection stays open: a stuck proxy, a server that stopped reading or sending). With
 * `bytesPerSecond`, each direction is held to about that rate instead (a slow link that still moves).
 */
export async function stallingProxy(port: number, stall: { upload?: number; download?: number; bytesPerSecond?: number }) {
  const sockets = new Set<net.Socket>();
  const forward = (from: net.Socket, to: net.Socket, after: number | undefined) => {
    let carried = 0;
    from.on('data', (chunk: Buffer) => {
      if (after !== undefined && carried + chunk.length > after) {
        to.write(chunk.subarray(0, Math.max(0, after - carried)));
        carried = after;
        from.pause();
        from.removeAllListeners('data');
        return;
      }
      carried += chunk.length;
      const written = to.write(chunk);
      if (stall.bytesPerSecond !== undefined) {
        // Slow, not stuck: each chunk holds this direction for as long as it takes at that rate.
        from.pause();
        setTimeout(
          () => (to.writableNeedDrain ? to.once('drain', () => from.resume()) : from.resume()),
          (chunk.length / stall.bytesPerSecond) * 1000,
        );
      } else if (!written) {
        from.pause();
        to.once('drain', () => from.resume());
      }
    });
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    forward(client, upstream, stall.upload);
    forward(upstream, client, stall.download);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
