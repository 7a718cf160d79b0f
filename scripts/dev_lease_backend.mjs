// DEV ONLY, NEVER DEPLOY: the demo's stand-in for an application's backend in front of the lease service.
// It mints tokens for anyone who asks for one of a few named users (no password: a real backend mints a
// token for the user who logged in), and keeps the demo's articles in memory. Served by
// scripts/serve.mjs under /dev/ when given the service's URL and secret (scripts/demo.sh does).
//
//   GET /dev/token?user=alice       -> { token, user: { sub, name, perms }, service }   (token valid 8 hours)
//   GET /dev/articles/ID            -> { title, body, savedAt, savedBy, fence }
//   PUT /dev/articles/ID            {title, body, lockId} with the user's token: saved only if the lease
//                                   service says the lockId holds domain.Article/ID (checkLock), and its
//                                   fencing number is not below the last save's; else the service's error.
import crypto from 'node:crypto';

/** The demo's users: bob may take over an article someone else is editing, carol is an admin. */
export const DEV_USERS = {
  alice: { sub: 'dev-alice', name: 'alice', perms: [] },
  bob: { sub: 'dev-bob', name: 'bob', perms: ['takeover'] },
  carol: { sub: 'dev-carol', name: 'carol', perms: ['admin'] },
};

const TOKEN_SECONDS = 8 * 60 * 60;
const LEASE_TYPE = 'domain.Article';

const base64url = (value) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** An HS256 JWT of `claims` (plus `exp` in `expiresIn` seconds) signed with `secret`; `header` may be forged. */
export function mintToken(secret, claims, { expiresIn = TOKEN_SECONDS, header = { alg: 'HS256', typ: 'JWT' } } = {}) {
  const signed = `${base64url(header)}.${base64url({ ...claims, exp: Math.floor(Date.now() / 1000) + expiresIn })}`;
  return `${signed}.${crypto.createHmac('sha256', secret).update(signed).digest('base64url')}`;
}

function reply(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

async function readJson(req) {
  let text = '';
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 1_000_000) throw new Error('body too large');
  }
  return JSON.parse(text);
}

/**
 * The request handler for `startServer({ handle })`: answers /dev/… and returns true, else false.
 * `serviceUrl(req)` is the lease service's URL as the page should reach it.
 */
export function devLeaseBackend({ secret, serviceUrl }) {
  const articles = new Map();
  const article = (id) => articles.get(id) ?? { title: `Article ${id}`, body: 'Edit me.', savedAt: null, savedBy: null, fence: 0 };

  return async (req, res) => {
    const url = new URL(req.url, 'http://x');
    if (!url.pathname.startsWith('/dev/')) return false;
    if (url.pathname === '/dev/token' && req.method === 'GET') {
      const name = url.searchParams.get('user');
      const user = DEV_USERS[name];
      if (!user) reply(res, 404, { error: { code: 'NoSuchUser', message: `dev users: ${Object.keys(DEV_USERS).join(', ')}` } });
      else reply(res, 200, { token: mintToken(secret, user), user, service: serviceUrl(req) });
      return true;
    }
    const match = /^\/dev\/articles\/([^/]+)$/.exec(url.pathname);
    if (!match) return false;
    const id = decodeURIComponent(match[1]);
    if (req.method === 'GET') {
      reply(res, 200, article(id));
      return true;
    }
    if (req.method !== 'PUT') return false;
    try {
      const { title, body, lockId } = await readJson(req);
      // The edit form's save: check the lease first (the user's own token), then write.
      const check = await fetch(`${serviceUrl(req)}/v1/checkLock`, {
        method: 'POST',
        headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
        body: JSON.stringify({ lockId }),
      });
      const lease = await check.json();
      if (!check.ok) return reply(res, check.status, lease), true;
      if (lease.type !== LEASE_TYPE || lease.id !== id) {
        return reply(res, 409, { error: { code: 'InvalidArgument', message: 'that lease is for another article' } }), true;
      }
      // A holder whose lease was taken over may still pass a check it raced with: its older fencing
      // number cannot overwrite what a later holder saved.
      if (lease.fence < article(id).fence) {
        return reply(res, 409, { error: { code: 'TakenOver', message: 'a later lease holder saved this article' } }), true;
      }
      articles.set(id, { title: String(title), body: String(body), savedAt: Date.now(), savedBy: lease.holder.name, fence: lease.fence });
      reply(res, 200, articles.get(id));
    } catch (e) {
      reply(res, 400, { error: { code: 'InvalidArgument', message: String(e.message ?? e) } });
    }
    return true;
  };
}
