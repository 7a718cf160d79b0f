// Posts per critical section under contention (scenario 7) and what each tab receives: every
// BroadcastChannel post and `message` event of the tabs, counted around a 2 s contention run, in
// one browser (--browser=chromium|firefox|webkit) and variant (--variant=polyfill|ponyfill).
//
//   node bench/count_posts.mjs --tabs=4 --variant=polyfill [--browser=firefox]
import { startServer } from '../tests/e2e/server.mjs';
import { drivers } from './lib/bench.mjs';
import { grantReports } from './lib/grant_reports.mjs';
import { openReady } from './lib/tabs.mjs';
import { variants } from './lib/variants.mjs';

function option(name, fallback) {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg === undefined ? fallback : arg.slice(name.length + 3);
}

/** In a page: count BroadcastChannel posts and message events (and IndexedDB read/write transactions). */
function countPosts() {
  const counts = { posts: 0, slots: 0, received: 0, transactions: 0 };
  const post = BroadcastChannel.prototype.postMessage;
  BroadcastChannel.prototype.postMessage = function (data) {
    counts.posts++;
    if (Array.isArray(data)) counts.slots += data.length;
    return post.call(this, data);
  };
  // Deliveries, as the handlers read them (the channels were opened before this ran: their handlers are
  // not wrapped, but every handler reads `data` through MessageEvent's getter).
  const data = Object.getOwnPropertyDescriptor(MessageEvent.prototype, 'data');
  const target = Object.getOwnPropertyDescriptor(Event.prototype, 'target').get;
  Object.defineProperty(MessageEvent.prototype, 'data', {
    ...data,
    get() {
      if (target.call(this) instanceof BroadcastChannel) counts.received++;
      return data.get.call(this);
    },
  });
  const transaction = IDBDatabase.prototype.transaction;
  IDBDatabase.prototype.transaction = function (stores, mode) {
    if (mode === 'readwrite') counts.transactions++;
    return transaction.apply(this, arguments);
  };
  self.postCounts = counts;
  return true;
}

const tabCount = Number(option('tabs', 4));
const variant = variants.find((v) => v.id === option('variant', 'polyfill'));
const reports = grantReports();
const server = await startServer({ handle: reports.handle });
const driver = await drivers[option('browser', 'chromium')]();
const browser = await driver.launch();
try {
  const ctx = { browser, port: server.port, reports };
  const tabs = [];
  for (let i = 0; i < tabCount; i++) tabs.push(await openReady(ctx, variant));
  await Promise.all(tabs.map((tab) => tab.evaluate(countPosts)));
  const id = Math.random().toString(36).slice(2, 10);
  const startEpoch = (await tabs[0].evaluate(() => bench.cross.epochNow())) + 500;
  const args = { name: `bench-contend-${id}`, refereeName: `referee-${id}`, startEpoch, endEpoch: startEpoch + 2_000 };
  const runs = await Promise.all(tabs.map((tab, i) => tab.evaluate((a) => bench.cross.contend(a), { ...args, tab: i })));
  const counts = await Promise.all(tabs.map((tab) => tab.evaluate(() => self.postCounts)));
  const ops = runs.reduce((sum, r) => sum + r.ops, 0);
  const total = (k) => counts.reduce((sum, c) => sum + c[k], 0);
  console.log(JSON.stringify({ browser: option('browser', 'chromium'), variant: variant.id, tabs: tabCount, ops, opsPerSec: ops / 2, postsPerOp: total('posts') / ops, slotsPerPost: total('slots') / total('posts'), receivedPerOp: total('received') / ops, readwritePerOp: total('transactions') / ops }));
  for (const tab of tabs) await tab.close();
} finally {
  await browser.close();
  await server.close();
}
