// Serves the repository root for the demo: `node scripts/serve.mjs [--host H] [--port P] [--lease-port L]`.
// With --lease-port (and WEBLOCKS_LEASE_SECRET in the environment, the lease service's secret), it also
// serves the DEV-ONLY backend of the edit form between users (scripts/dev_lease_backend.mjs): a token
// minter for a few named users and an in-memory article store, with the lease service on port L of the
// host the page was loaded from.
import { startServer } from '../tests/e2e/server.mjs';
import { devLeaseBackend } from './dev_lease_backend.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const leasePort = arg('lease-port');
const secret = process.env.WEBLOCKS_LEASE_SECRET;
const handle =
  leasePort && secret
    ? devLeaseBackend({ secret, serviceUrl: (req) => `http://${new URL(`http://${req.headers.host}`).hostname}:${leasePort}` })
    : undefined;
const server = await startServer({ host: arg('host', '127.0.0.1'), port: Number(arg('port', 8080)), handle });
console.log(`weblocks demo: open ${server.url}www/ in several tabs (Ctrl-C stops)`);
if (handle) {
  console.log(
    `leases between users: open ${server.url}www/edit-form.html?user=alice and ${server.url}www/edit-form.html?user=bob\n` +
      `  in two browser profiles (or one normal and one private window); bob may take over. The token minter\n` +
      `  behind ?user= is DEV ONLY: it gives anyone any of these users' tokens.`,
  );
}
