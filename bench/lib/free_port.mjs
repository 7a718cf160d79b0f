// A TCP port on the loopback interface that was free a moment ago: the operating system picks it, we let it
// go, and the caller hands it to a server it starts at once (another process could take it in between).
import net from 'node:net';

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
