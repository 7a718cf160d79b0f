// Where a cross-tab handoff's time goes (the bench's scenario 6), in headless Chromium (or Firefox with
// --browser=firefox). Two parts:
//
// 1. Transports: two blank tabs pass a message back and forth, alternating between the ways two tabs of an
//    origin can talk: a BroadcastChannel with one object per tab; the same with two objects per tab
//    (weblocks' layout: a context sees its own messages' places through its second object); a shared
//    worker relaying; a MessagePort the shared worker handed both tabs (a direct link). Prints one hop
//    (half a round trip) per transport: the median over rounds of each round's mean of the fastest 90%.
// 2. Timeline: two tabs ping-pong one lock, native and the polyfill (bench/pages/anatomy.html, which
//    records the library's BroadcastChannel posts and message handlers); prints the handoff and, for the
//    polyfill, its parts: release -> post, post -> the other tab's handler, the handler, the handler's
//    end -> the callback.
//
// performance.now() is coarsened to 0.1 ms in these pages, so every figure is a mean over many samples.
//
//   node bench/handoff_anatomy.mjs [--rounds=5] [--turns=300] [--only=transports|timeline] [--browser=firefox]
//     [--relay]   (the timeline also runs weblocks over bench/pages/relay_worker.js, the prototype of
//                  docs/PROTOCOL.md §15's transport: same engine and protocol, a SharedWorker for channel)
import { startServer } from '../tests/e2e/server.mjs';
import * as chromium from './lib/chromium.mjs';
import * as firefox from './lib/firefox.mjs';
import { pingPong } from './lib/ping_pong.mjs';
import { openReady } from './lib/tabs.mjs';
import { variants, urlFor } from './lib/variants.mjs';

function option(name, fallback) {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg === undefined ? fallback : arg.slice(name.length + 3);
}
const rounds = Number(option('rounds', 5));
const turns = Number(option('turns', 300));
const only = option('only', '');
const relay = process.argv.includes('--relay');
const driver = option('browser', 'chromium') === 'firefox' ? firefox : chromium;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
/** Mean of the fastest 90% (drops the scheduler's outliers, keeps the quantised samples' average). */
function fastMean(xs) {
  const kept = [...xs].sort((a, b) => a - b).slice(0, Math.ceil(xs.length * 0.9));
  return kept.reduce((a, b) => a + b, 0) / kept.length;
}
const ms = (x) => (Number.isFinite(x) ? `${x.toFixed(3)} ms` : '–');

/** In each tab: the objects of every transport; `handler(kind, data)` gets what arrives. */
function setUpTransports() {
  const make = (name, objects) => {
    const rx = new BroadcastChannel(name);
    const tx = objects === 2 ? new BroadcastChannel(name) : rx;
    rx.onmessage = (e) => self.handler?.(name, e.data);
    return tx;
  };
  const worker = new SharedWorker('/bench/pages/anatomy_relay_worker.js');
  self.senders = { 'BroadcastChannel, 1 object per tab': make('anatomy-1', 1), 'BroadcastChannel, 2 objects per tab': make('anatomy-2', 2) };
  worker.port.onmessage = (e) => {
    if (e.data === 'direct') {
      const direct = e.ports[0];
      direct.onmessage = (m) => self.handler?.('direct', m.data);
      self.senders['MessagePort between the tabs'] = direct;
    } else self.handler?.('relay', e.data);
  };
  self.senders['shared worker relaying'] = worker.port;
  return true;
}

async function transports(browser, port) {
  const url = urlFor(variants[0], port, 'bench/pages/blank.html');
  const [a, b] = [await browser.newTab(url), await browser.newTab(url)];
  try {
    for (const tab of [a, b]) await tab.evaluate(setUpTransports);
    await new Promise((r) => setTimeout(r, 300));
    await a.evaluate(() => self.senders['shared worker relaying'].postMessage('introduce'));
    await new Promise((r) => setTimeout(r, 300));
    await b.evaluate((kinds) => {
      self.handler = (_, d) => d.from === 'a' && self.senders[d.kind].postMessage({ from: 'b', n: d.n });
      return kinds;
    });
    const kinds = await a.evaluate(() => Object.keys(self.senders));
    const hops = Object.fromEntries(kinds.map((k) => [k, []]));
    for (let round = 0; round < rounds; round++) {
      for (const kind of kinds) {
        const samples = await a.evaluate(
          async ([kind, turns]) => {
            const out = [];
            for (let n = 0; n < turns; n++) {
              const sentAt = performance.now();
              await new Promise((resolve) => {
                self.handler = (_, d) => d.from === 'b' && d.n === n && resolve();
                self.senders[kind].postMessage({ from: 'a', kind, n });
              });
              out.push((performance.now() - sentAt) / 2);
            }
            return out;
          },
          [kind, turns],
        );
        hops[kind].push(fastMean(samples));
      }
    }
    console.log('\n## One hop between two tabs, by transport (median over rounds)\n');
    for (const [kind, means] of Object.entries(hops)) console.log(`${kind.padEnd(38)} ${ms(median(means))}   rounds: ${means.map((m) => m.toFixed(3)).join(' ')}`);
  } finally {
    await a.close();
    await b.close();
  }
}

/** The parts of each handoff from the two tabs' merged logs. */
function parts(logs) {
  const events = [];
  logs.forEach((log, tab) => log.forEach(([kind, at, what, from]) => events.push({ tab, kind, at, what, from })));
  events.sort((x, y) => x.at - y.at);
  const out = { handoff: [], releaseToPost: [], postToHandler: [], handler: [], handledToCallback: [] };
  let end = null;
  let post = null;
  let handler = null;
  for (const e of events) {
    if (e.kind === 'end') [end, post, handler] = [e, null, null];
    else if (e.kind === 'post' && end && e.tab === end.tab && !post) post = e;
    else if (e.kind === 'handler' && end && post && e.tab !== end.tab && e.from === post.from) handler = e;
    else if (e.kind === 'handled' && handler && e.tab === handler.tab && handler.done === undefined) handler.done = e.at;
    else if (e.kind === 'start' && end && e.tab !== end.tab) {
      out.handoff.push(e.at - end.at);
      if (post) out.releaseToPost.push(post.at - end.at);
      if (post && handler) out.postToHandler.push(handler.at - post.at);
      if (handler?.done !== undefined) {
        out.handler.push(handler.done - handler.at);
        out.handledToCallback.push(e.at - handler.done);
      }
      [end, post, handler] = [null, null, null];
    }
  }
  // On each tab's own clock (Firefox's tabs disagree): a post to its echo, and the lock's round trip
  // (this tab's release to its next grant: two handoffs and the other tab's hold).
  out.postToEcho = [];
  out.roundTrip = [];
  for (const log of logs) {
    let posted = null;
    let ended = null;
    for (const [kind, at, , from] of log) {
      if (kind === 'post' && !posted) posted = { at, from };
      else if (kind === 'handler' && posted && from === posted.from) {
        out.postToEcho.push(at - posted.at);
        posted = null;
      } else if (kind === 'end') ended = at;
      else if (kind === 'start' && ended !== null) {
        out.roundTrip.push(at - ended);
        ended = null;
      }
    }
  }
  return out;
}

async function timeline(browser, port) {
  const ctx = { browser, port };
  const pages = [
    ['native', variants.find((v) => v.id === 'native')],
    ['weblocks polyfill', { id: 'polyfill', page: 'bench/pages/anatomy.html', secure: false }],
    // The prototype of docs/PROTOCOL.md §15: the same engine and protocol over a shared-worker relay.
    ...(relay ? [['weblocks over a shared-worker relay (prototype)', { id: 'relay', page: 'bench/pages/relay.html', secure: true }]] : []),
  ];
  const results = {};
  for (let round = 0; round < rounds; round++) {
    for (const [label, variant] of pages) {
      const [a, b] = [await openReady(ctx, variant), await openReady(ctx, variant)];
      try {
        const name = `anatomy-${Math.random().toString(36).slice(2)}`;
        const logs = await Promise.all([a, b].map((tab) => tab.evaluate(pingPong, { name, turns })));
        const round = parts(logs);
        const summary = (results[label] ??= {});
        for (const [part, samples] of Object.entries(round)) if (samples.length > 0) (summary[part] ??= []).push(fastMean(samples));
      } finally {
        await a.close();
        await b.close();
      }
    }
  }
  const labels = { handoff: 'handoff', releaseToPost: '  release -> post', postToHandler: "  post -> other tab's handler", handler: '  the handler', handledToCallback: '  handler end -> callback', postToEcho: 'a post to its echo (one tab)', roundTrip: 'release to next grant (one tab)' };
  console.log('\n## A two-tab handoff and its parts (median over rounds of the mean of the fastest 90%)\n');
  for (const [label, summary] of Object.entries(results)) {
    console.log(label);
    for (const [part, means] of Object.entries(summary)) console.log(`  ${labels[part].padEnd(34)} ${ms(median(means))}`);
  }
}

const server = await startServer();
const browser = await driver.launch();
try {
  if (only !== 'timeline') await transports(browser, server.port);
  if (only !== 'transports') await timeline(browser, server.port);
} finally {
  await browser.close();
  await server.close();
}
