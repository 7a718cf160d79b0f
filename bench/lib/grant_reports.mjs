// Reports that pages POST to the bench server (`/bench/report/<id>`), taken on Node's clock as they arrive:
// scenario 8's waiter reports its grant this way, which reaches the harness even where the driver no longer
// answers (WebKitWebDriver ends its session when a page of it crashes), and without a driver's polling delay.

const PREFIX = '/bench/report/';

export function grantReports() {
  const arrived = new Map(); // id -> { at (performance.now()), body }
  const waiting = new Map(); // id -> resolve
  let next = 0;
  return {
    /** The server's `handle` option: takes a report, or leaves the request to the file server. */
    async handle(req, res) {
      if (req.method !== 'POST' || !req.url.startsWith(PREFIX)) return false;
      const at = performance.now();
      let body = '';
      for await (const chunk of req) body += chunk;
      const id = req.url.slice(PREFIX.length);
      arrived.set(id, { at, body });
      waiting.get(id)?.(arrived.get(id));
      waiting.delete(id);
      res.writeHead(204, { 'cache-control': 'no-store' });
      res.end();
      return true;
    },
    /** A new report path, and a promise of its report (`{ at, body }`) or null after `timeoutMs`. */
    expect(timeoutMs) {
      const id = `r${++next}`;
      const report = new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve(null);
        }, timeoutMs);
        waiting.set(id, (r) => {
          clearTimeout(timer);
          resolve(r);
        });
      });
      return { path: PREFIX + id, report };
    },
  };
}
