// The in-page half of a two-tab ping-pong, shared by handoff_anatomy.mjs and profile.mjs: run with
// `tab.evaluate(pingPong, { name, turns })` in each of two tabs.

/**
 * In each tab: `turns` grants of `name`; each callback requests the next turn before it returns. Returns
 * the tab's log (`self.anatomy.log`, which bench/pages/anatomy_early.js also fills): a `start` and an
 * `end` entry, on one clock for every tab of the machine, per grant.
 */
export async function pingPong({ name, turns }) {
  const t = () => performance.timeOrigin + performance.now();
  const log = self.anatomy?.log ?? (self.anatomy = { log: [] }).log;
  let count = 0;
  await new Promise((resolve) => {
    const request = () =>
      bench.locks.request(name, () => {
        log.push(['start', t()]);
        if (++count < turns) request();
        else resolve();
        log.push(['end', t()]);
      });
    request();
  });
  return log;
}
