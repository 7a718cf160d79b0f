// Scenarios across tabs of one origin (issue 6 numbering): 6 handoff ping-pong, 7 contention with a
// safety check, 8 recovery after the holder tab goes away. They run for weblocks exactly as for the
// native API; until weblocks coordinates across contexts (issue 3) its rows show the failure
// (overlaps, a waiter granted while the holder lives) rather than being skipped.
import { openReady, sleep, withTimeout } from './tabs.mjs';

const randomId = () => Math.random().toString(36).slice(2, 10);

/**
 * Slack for comparing epoch times taken in different tabs: the browser coarsens performance.now() to
 * 100 µs (with jitter) without cross-origin isolation, so two tabs' clocks may disagree by ~0.2 ms.
 * A real overlap (two tabs inside at once) is far longer than that.
 */
const CLOCK_SLACK_MS = 0.25;

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Merge the tabs' [grantedAt, releasedAt] intervals (epoch ms): overlaps (a grant while another tab
 * still held) and the handoff times (a grant in one tab after a release in another).
 */
export function analyseIntervals(perTab) {
  const all = perTab.flatMap((intervals, tab) => intervals.map(([granted, released]) => ({ tab, granted, released })));
  all.sort((a, b) => a.granted - b.granted);
  const lastRelease = new Map();
  let overlaps = 0;
  let sameTabTwice = 0;
  const handoffs = [];
  for (let i = 0; i < all.length; i++) {
    const cur = all[i];
    for (const [tab, released] of lastRelease) {
      if (tab !== cur.tab && released > cur.granted + CLOCK_SLACK_MS) {
        overlaps++;
        break;
      }
    }
    if (i > 0) {
      const prev = all[i - 1];
      if (prev.tab !== cur.tab) handoffs.push(cur.granted - prev.released);
      else sameTabTwice++;
    }
    lastRelease.set(cur.tab, Math.max(lastRelease.get(cur.tab) ?? -Infinity, cur.released));
  }
  handoffs.sort((a, b) => a - b);
  return { grants: all.length, overlaps, sameTabTwice, handoffs: handoffs.length, p50: percentile(handoffs, 50), p95: percentile(handoffs, 95) };
}

/** Why a ping-pong's handoff times mean nothing: the two tabs held the lock at once. */
const overlapped = (r) => (r.overlaps > 0 ? `overlaps: ${r.overlaps.toLocaleString('en')}` : null);

async function closeAll(tabs) {
  await Promise.all(tabs.map((tab) => tab.close().catch(() => {})));
}

/** 6. Ping-pong of one exclusive lock between two tabs; with `thirdTab`, a third tab is opened first. */
function pingPongScenario(sizes, thirdTab) {
  return {
    number: '6',
    key: thirdTab ? 'pingpong-third' : 'pingpong-two',
    crossTab: true,
    title: `cross-tab handoff ping-pong, ${sizes.turns} turns, ${thirdTab ? 'a third tab opened first (the arbiter, if first-come)' : 'two tabs (the first opened is the arbiter, if first-come)'}`,
    async run(ctx, variant, timeoutMs) {
      const tabs = [];
      try {
        if (thirdTab) tabs.push(await openReady(ctx, variant));
        const [a, b] = [await openReady(ctx, variant), await openReady(ctx, variant)];
        tabs.push(a, b);
        return await withTimeout(
          (async () => {
            const name = `bench-pingpong-${randomId()}`;
            const perTab = Math.ceil(sizes.turns / 2);
            const budgetMs = timeoutMs / 2;
            const holdGrantedAt = await a.evaluate((n) => bench.cross.holdFirst(n), name);
            const bDone = b.evaluate((args) => bench.cross.pingPong(args), { name, turns: perTab, holding: false, budgetMs });
            const otherVisible = await a.evaluate(([n, t]) => bench.cross.waitForOtherPending(n, t), [name, sizes.pendingVisibleMs]);
            const holdReleasedAt = await a.evaluate(() => bench.cross.epochNow());
            const aDone = a.evaluate((args) => bench.cross.pingPong(args), { name, turns: perTab, holding: true, budgetMs });
            const [ra, rb] = await Promise.all([aDone, bDone]);
            const analysis = analyseIntervals([[[holdGrantedAt, holdReleasedAt], ...ra.intervals], rb.intervals]);
            return { otherVisible, errors: [ra.error, rb.error].filter(Boolean), ...analysis };
          })(),
          timeoutMs,
          `${variant.id} ping-pong`,
        );
      } finally {
        await closeAll(tabs);
      }
    },
    metrics: [
      { label: 'p50 handoff, ms', better: 'lower', pick: (r) => r.p50, invalid: overlapped, target: { ratioAtMost: 1.5 }, digits: 2 },
      { label: 'p95 handoff, ms', better: 'lower', pick: (r) => r.p95, invalid: overlapped, digits: 2 },
    ],
    checks: [
      { label: 'overlapping grants', pick: (r) => r.overlaps },
      { label: "other tab's request not seen pending by query()", pick: (r) => (r.otherVisible ? 0 : 1) },
    ],
  };
}

/** 7. `tabs` tabs contend on one name, each doing a read-modify-write with awaits inside the lock. */
function contentionScenario(sizes, tabCount) {
  return {
    number: '7',
    key: `contention-${tabCount}`,
    crossTab: true,
    title: `${tabCount} tabs contending on one name for ${sizes.contentionMs / 1000} s, read-modify-write with awaits inside`,
    async run(ctx, variant, timeoutMs) {
      const tabs = [];
      try {
        const opening = Array.from({ length: tabCount }, () => openReady(ctx, variant));
        const opened = await Promise.allSettled(opening);
        for (const o of opened) if (o.status === 'fulfilled') tabs.push(o.value);
        for (const o of opened) if (o.status === 'rejected') throw o.reason;
        return await withTimeout(
          (async () => {
            const name = `bench-contend-${randomId()}`;
            const refereeName = `referee-${randomId()}`;
            const startEpoch = (await tabs[0].evaluate(() => bench.cross.epochNow())) + sizes.contentionStartMs;
            const endEpoch = startEpoch + sizes.contentionMs;
            const runs = await Promise.all(
              tabs.map((tab, i) => tab.evaluate((args) => bench.cross.contend(args), { name, refereeName, tab: i, startEpoch, endEpoch })),
            );
            const referee = await tabs[0].evaluate((n) => bench.cross.refereeStats(n), refereeName);
            const ops = runs.reduce((sum, r) => sum + r.ops, 0);
            const spanMs = Math.max(...runs.map((r) => r.endedAt)) - Math.min(...runs.map((r) => r.startedAt));
            return { ops, spanMs, opsPerSec: (ops / spanMs) * 1000, perTab: runs.map((r) => r.ops), referee };
          })(),
          timeoutMs,
          `${variant.id} contention`,
        );
      } finally {
        await closeAll(tabs);
      }
    },
    metrics: [
      {
        label: 'critical sections/s',
        better: 'higher',
        pick: (r) => r.opsPerSec,
        invalid: (r) => (r.referee.overlaps > 0 ? `overlaps: ${r.referee.overlaps.toLocaleString('en')}` : null),
        target: { ratio: 1 },
      },
    ],
    checks: [
      { label: 'overlapping critical sections', pick: (r) => r.referee.overlaps },
      { label: 'lost updates', pick: (r) => r.referee.lostUpdates },
      { label: 'tabs that never got the lock', pick: (r) => r.perTab.filter((ops) => ops === 0).length },
    ],
  };
}

const recoveryActions = {
  close: { title: 'closed', target: 50, act: async (tab) => () => tab.close() },
  crash: { title: 'crashed (CDP Page.crash)', target: 500, act: (tab) => tab.armCrash() },
  navigate: { title: 'navigated away', target: 50, act: async (tab, url) => () => tab.goto(url) },
};

/** 8. The holder tab goes away (`how`); time until another tab's waiter is granted. */
function recoveryScenario(sizes, how) {
  const action = recoveryActions[how];
  return {
    number: '8',
    key: `recovery-${how}`,
    crossTab: true,
    requires: how === 'crash' ? 'canCrash' : undefined,
    title: `recovery: holder tab ${action.title}, time until the waiter in another tab is granted`,
    async run(ctx, variant, timeoutMs) {
      const tabs = [];
      try {
        const opened = await Promise.allSettled([openReady(ctx, variant), openReady(ctx, variant)]);
        for (const o of opened) if (o.status === 'fulfilled') tabs.push(o.value);
        for (const o of opened) if (o.status === 'rejected') throw o.reason;
        const [holder, waiter] = tabs;
        return await withTimeout(
          (async () => {
            const name = `bench-recovery-${randomId()}`;
            await holder.evaluate((n) => bench.cross.holdForever(n), name);
            const elsewhere = new URL('/bench/pages/blank.html', await holder.evaluate(() => location.href)).href;
            const act = await action.act(holder, elsewhere);
            await waiter.evaluate((n) => bench.cross.startWaiter(n), name);
            await sleep(sizes.settleMs);
            const grantedWhileHeld = (await waiter.evaluate(() => bench.cross.waiterGrantedAt())) !== null;
            const granted = waiter.evaluate(() => bench.cross.waiterGranted());
            const t0 = performance.now();
            act();
            const ms = await Promise.race([granted.then(() => performance.now() - t0), sleep(sizes.recoveryTimeoutMs).then(() => null)]);
            return { grantedWhileHeld, ms, waiterCrashed: waiter.crashed };
          })(),
          timeoutMs,
          `${variant.id} recovery (${how})`,
        );
      } finally {
        await closeAll(tabs);
      }
    },
    metrics: [
      {
        label: 'ms until the waiter is granted',
        better: 'lower',
        pick: (r) => r.ms,
        invalid: (r) => (r.grantedWhileHeld ? 'granted while the holder was alive' : r.ms === null ? 'never granted' : null),
        target: { atMost: action.target },
      },
    ],
    checks: [
      { label: 'waiter granted while the holder was alive', pick: (r) => (r.grantedWhileHeld ? 1 : 0) },
      { label: `waiter not granted within ${sizes.recoveryTimeoutMs / 1000} s`, pick: (r) => (!r.grantedWhileHeld && r.ms === null ? 1 : 0) },
      { label: 'waiter tab crashed too (same renderer process)', pick: (r) => (r.waiterCrashed ? 1 : 0) },
    ],
  };
}

export function crossTabScenarios(sizes) {
  return [
    pingPongScenario(sizes, false),
    pingPongScenario(sizes, true),
    ...sizes.contentionTabs.map((n) => contentionScenario(sizes, n)),
    recoveryScenario(sizes, 'close'),
    recoveryScenario(sizes, 'crash'),
    recoveryScenario(sizes, 'navigate'),
  ];
}
