// Scenarios across tabs of one origin (docs/BENCH.md's numbering): 6 handoff ping-pong, 7 contention with
// a safety check, 8 recovery after the holder tab goes away. They run for weblocks exactly as for the
// native API, so a lock manager that did not span the origin would show its failure in their safety rows
// (overlaps, a waiter granted while the holder lives) rather than be skipped.
import { spawn } from 'node:child_process';
import { openReady, sleep, withTimeout } from './tabs.mjs';

const randomId = () => Math.random().toString(36).slice(2, 10);

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/**
 * Handoff times of a ping-pong from each tab's own clock, never comparing two tabs' clocks (they may
 * disagree by more than a handoff: seen in Firefox). `first` and `second` are the tabs' [grantedAt,
 * releasedAt] intervals in turn order, `first` starting with its initial hold, so the lock went
 * first[0], second[0], first[1], second[1], ... One tab's release-to-next-grant time, less the other tab's
 * hold in between (its own clock), is two handoffs; half of it is a sample.
 */
export function handoffsFromRoundTrips(first, second) {
  const samples = [];
  for (let k = 0; k + 1 < first.length && k < second.length; k++) {
    samples.push((first[k + 1][0] - first[k][1] - (second[k][1] - second[k][0])) / 2);
  }
  for (let k = 0; k + 1 < second.length && k + 1 < first.length; k++) {
    samples.push((second[k + 1][0] - second[k][1] - (first[k + 1][1] - first[k + 1][0])) / 2);
  }
  samples.sort((a, b) => a - b);
  return { grants: first.length + second.length, handoffs: samples.length, p50: percentile(samples, 50), p95: percentile(samples, 95) };
}

/**
 * p50 of a bare BroadcastChannel message from tab `a` to tab `b` (half a round trip on `a`'s clock), with
 * `objects` channel objects per tab as in bench.cross.startEcho.
 */
async function channelHop(a, b, objects, turns) {
  const channelName = `bench-hop-${randomId()}`;
  await b.evaluate(([n, o]) => bench.cross.startEcho(n, o), [channelName, objects]);
  try {
    const hops = await a.evaluate(([n, o, t]) => bench.cross.channelHop(n, o, t), [channelName, objects, turns]);
    return percentile(hops.sort((x, y) => x - y), 50);
  } finally {
    await b.evaluate(() => bench.cross.stopEcho());
  }
}

/**
 * The locks that `tabs`, all alive, lost with an AbortError in this run (bench.cross.falseEvictions): none of
 * their requests has a signal or is stolen, so each is a false eviction. `{ count, first }` (a message).
 */
async function falseEvictions(tabs) {
  const each = await Promise.all(tabs.map((tab) => tab.evaluate(() => bench.cross.falseEvictions())));
  return { count: each.reduce((sum, e) => sum + e.count, 0), first: each.find((e) => e.first)?.first ?? null };
}

/** The safety row of every cross-tab scenario whose tabs hold locks. */
const falseEvictionCheck = { label: 'false evictions (AbortError in a live tab)', pick: (r) => r.falseEvictions?.count };

/** Why a ping-pong's handoff times mean nothing: the two tabs held the lock at once. */
const overlapped = (r) => (r.overlaps > 0 ? `overlaps: ${r.overlaps.toLocaleString('en')}` : null);

async function closeAll(tabs) {
  await Promise.all(tabs.map((tab) => tab.close().catch(() => {})));
}

/**
 * Opens `count` tabs of the variant at once into `tabs` (those that opened, for the caller to close even
 * if another failed); throws the first failure.
 */
async function openAll(ctx, variant, count, tabs) {
  const opened = await Promise.allSettled(Array.from({ length: count }, () => openReady(ctx, variant)));
  for (const o of opened) if (o.status === 'fulfilled') tabs.push(o.value);
  for (const o of opened) if (o.status === 'rejected') throw o.reason;
  return tabs;
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
            const refereeName = `referee-${randomId()}`;
            await a.evaluate(([n, r]) => bench.cross.holdFirst(n, r), [name, refereeName]);
            const common = { name, turns: perTab, budgetMs, refereeName };
            const bDone = b.evaluate((args) => bench.cross.pingPong(args), { ...common, holding: false, tab: 'b' });
            const otherVisible = await a.evaluate(([n, t]) => bench.cross.waitForOtherPending(n, t), [name, sizes.pendingVisibleMs]);
            const aDone = a.evaluate((args) => bench.cross.pingPong(args), { ...common, holding: true, tab: 'a' });
            const [ra, rb] = await Promise.all([aDone, bDone]);
            const referee = await a.evaluate((n) => bench.cross.refereeStats(n), refereeName);
            const evicted = await falseEvictions(tabs);
            const handoffs = handoffsFromRoundTrips(ra.intervals, rb.intervals);
            const floor = {};
            for (const objects of [1, 2]) floor[`hop${objects}`] = await channelHop(a, b, objects, sizes.turns);
            return { otherVisible, errors: [ra.error, rb.error].filter(Boolean), overlaps: referee.overlaps, referee, falseEvictions: evicted, ...handoffs, ...floor };
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
      // The floor of a BroadcastChannel design, measured between the same two tabs right after: a bare
      // message from one tab to the other, with one object per tab and with weblocks' two (the second
      // object, which lets a context see its own messages' place in the order, gets every message too).
      { label: 'for reference: one BroadcastChannel hop between these tabs, one object each, p50 ms', better: 'lower', pick: (r) => r.hop1, digits: 2 },
      { label: 'for reference: the same hop, two objects per tab (weblocks\' layout), p50 ms', better: 'lower', pick: (r) => r.hop2, digits: 2 },
    ],
    checks: [
      { label: 'overlapping grants (referee)', pick: (r) => r.overlaps },
      { label: 'lost updates (referee)', pick: (r) => r.referee.lostUpdates },
      { label: "other tab's request not seen pending by query()", pick: (r) => (r.otherVisible ? 0 : 1) },
      falseEvictionCheck,
    ],
  };
}

/** Critical sections per second over the runs of all tabs, and each tab's count. */
function throughput(runs) {
  const ops = runs.reduce((sum, r) => sum + r.ops, 0);
  const spanMs = Math.max(...runs.map((r) => r.endedAt)) - Math.min(...runs.map((r) => r.startedAt));
  return { ops, spanMs, opsPerSec: (ops / spanMs) * 1000, perTab: runs.map((r) => r.ops) };
}

/** The transports of bench.cross.ringJoin, and how each is named in the table. */
const ringTransports = ['broadcast', 'log', 'relay', 'ports'];
const ringTitles = {
  broadcast: "BroadcastChannel, two objects per tab (weblocks' transport)",
  log: "an IndexedDB read/write transaction, then BroadcastChannel (weblocks' log transport, WebKit's)",
  relay: "a shared-worker relay (PROTOCOL.md §15's hub)",
  ports: 'MessagePorts from tab to tab',
};

/**
 * 7, a transport's floor: contend's critical section passed round `tabs` by a token over `transport`,
 * with no lock at all, for sizes.floorMs (bench.cross.ringJoin, ringRun).
 */
async function tokenRing(tabs, transport, sizes) {
  const id = randomId();
  const join = { transport, ringName: `ring-${id}`, refereeName: `referee-${id}`, tabs: tabs.length };
  // Every tab joins before any token goes: a token sent to a tab that has not joined would be lost.
  await Promise.all(tabs.map((tab, i) => tab.evaluate((a) => bench.cross.ringJoin(a), { ...join, tab: i })));
  const startEpoch = (await tabs[0].evaluate(() => bench.cross.epochNow())) + sizes.contentionStartMs;
  const run = { startEpoch, endEpoch: startEpoch + sizes.floorMs };
  const runs = await Promise.all(tabs.map((tab) => tab.evaluate((a) => bench.cross.ringRun(a), run)));
  const referee = await tabs[0].evaluate((n) => bench.cross.refereeStats(n), join.refereeName);
  return { ...throughput(runs), referee };
}

/** Why a floor's figure means nothing: the token did not go round every tab, or the ring broke. */
function brokenRing(floor) {
  if (floor === undefined) return 'not measured in this run';
  if (floor.perTab.some((ops) => ops === 0)) return 'a tab never had the token';
  return floor.referee.overlaps > 0 ? `overlaps: ${floor.referee.overlaps}` : null;
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
        await openAll(ctx, variant, tabCount, tabs);
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
            const evicted = await falseEvictions(tabs);
            const floors = {};
            for (const transport of ringTransports) floors[transport] = await tokenRing(tabs, transport, sizes);
            return { ...throughput(runs), referee, falseEvictions: evicted, floors };
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
      // What any lock protocol over each transport could reach at best, measured in the same tabs right
      // after: the ratio is to native's critical sections/s (native's own column too), so the native
      // column says whether a transport leaves any room to meet the target at all.
      ...ringTransports.map((transport) => ({
        label: `for reference, no lock: a token passes the same critical section round these tabs over ${ringTitles[transport]}, critical sections/s (÷ native's locks)`,
        better: 'higher',
        pick: (r) => r.floors[transport]?.opsPerSec,
        invalid: (r) => brokenRing(r.floors[transport]),
        ratioToNative: (r) => r.opsPerSec,
      })),
    ],
    checks: [
      { label: 'overlapping critical sections', pick: (r) => r.referee.overlaps },
      { label: 'lost updates', pick: (r) => r.referee.lostUpdates },
      { label: 'tabs that never got the lock', pick: (r) => r.perTab.filter((ops) => ops === 0).length },
      falseEvictionCheck,
    ],
  };
}

/**
 * 1, in a tab that does not decide alone: uncontended request/release cycles while another tab of the
 *  origin has taken part (a member of weblocks' protocol, then idle). Target: no slower than native.
 * weblocks posts every request and release and waits for its request's echo here.
 */
function uncontendedBesideScenario(sizes) {
  return {
    number: '1',
    key: 'uncontended-beside',
    crossTab: true,
    title: `uncontended request/release (N = ${sizes.uncontended.toLocaleString('en')}) in a tab whose origin has another, idle tab`,
    async run(ctx, variant, timeoutMs) {
      const tabs = [];
      try {
        await openAll(ctx, variant, 2, tabs);
        const [measured, other] = tabs;
        return await withTimeout(
          (async () => {
            await other.evaluate(() => bench.scenarios.uncontended({ n: 3, budgetMs: 5_000, warmup: 0 }));
            return measured.evaluate((a) => bench.scenarios.uncontended(a), { n: sizes.uncontended, budgetMs: sizes.loopBudgetMs });
          })(),
          timeoutMs,
          `${variant.id} uncontended beside another tab`,
        );
      } finally {
        await closeAll(tabs);
      }
    },
    metrics: [{ label: 'cycles/s', better: 'higher', pick: (r) => r.opsPerSec, target: { ratio: 1 } }],
    checks: [{ label: 'loop cut short by the time bound', pick: (r) => (r.complete ? 0 : 1) }],
  };
}

const recoveryActions = {
  close: { title: 'closed', target: 50, act: async (tab) => () => tab.close() },
  crash: { title: 'crashed (Chromium: CDP Page.crash; Firefox, WebKit: its content process killed, SIGKILL)', target: 100, act: (tab) => tab.armCrash() },
  navigate: { title: 'navigated away', target: 50, act: async (tab, url) => () => tab.goto(url) },
};

/** Why a recovery time means nothing. */
function recoveryInvalid(r) {
  if (r.grantedWhileHeld) return 'granted while the holder was alive';
  if (r.waiterCrashed) return 'the waiter shared the crashed process';
  return r.ms === null ? 'never granted' : null;
}

/**
 * `count` processes that each spin one CPU until `stop()` (a starved machine: the browser's processes
 * wait for a core, and over the log every message's transaction queues behind them).
 */
function busyProcesses(count) {
  const children = Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;);'], { stdio: 'ignore' }));
  return {
    stop() {
      for (const child of children) child.kill('SIGKILL');
    },
  };
}

/**
 * 8. The holder tab goes away (`how`); time until another tab's waiter is granted, from just before the
 * action to the arrival of the waiter's report (grant_reports.mjs), on Node's clock. `loaded`: with
 * sizes.busyProcesses processes spinning beside the browser from before the waiter starts until the tabs close,
 * sizes.loadedRepeat runs per variant (variants interleaved, as every scenario's), for the p95.
 */
function recoveryScenario(sizes, how, loaded = false) {
  const action = recoveryActions[how];
  return {
    number: '8',
    key: loaded ? `recovery-${how}-loaded` : `recovery-${how}`,
    crossTab: true,
    repeat: loaded ? Math.max(sizes.repeat, sizes.loadedRepeat) : undefined,
    requires: how === 'crash' ? 'canCrash' : undefined,
    title: loaded
      ? `recovery under load (${sizes.busyProcesses} busy processes beside the browser): holder tab ${action.title}, time until the waiter in another tab is granted`
      : `recovery: holder tab ${action.title}, time until the waiter in another tab is granted`,
    async run(ctx, variant, timeoutMs) {
      const tabs = [];
      let busy = null;
      try {
        await openAll(ctx, variant, 2, tabs);
        const [holder, waiter] = tabs;
        return await withTimeout(
          (async () => {
            const name = `bench-recovery-${randomId()}`;
            await holder.evaluate((n) => bench.cross.holdForever(n), name);
            const elsewhere = new URL('/bench/pages/blank.html', await holder.evaluate(() => location.href)).href;
            const act = await action.act(holder, elsewhere);
            // The load starts once the holder's process is known (a crash's is found by a busy loop of
            // the tab, which must stand out among the processes): the waiter starts and the recovery runs
            // under it.
            if (loaded) busy = busyProcesses(sizes.busyProcesses);
            // A killed process must not be the waiter's too (Firefox may put windows of a site in one).
            const sharedProcess = act.pid !== undefined && (await waiter.processId()) === act.pid;
            const { path: reportPath, report } = ctx.reports.expect(sizes.settleMs + sizes.recoveryTimeoutMs + 5_000);
            await waiter.evaluate(([n, p]) => bench.cross.startWaiter(n, p), [name, reportPath]);
            await sleep(sizes.settleMs);
            const grantedWhileHeld = (await waiter.evaluate(() => bench.cross.waiterGrantedAt())) !== null;
            // Both tabs are alive until the action: neither may have lost a lock by then.
            const evicted = await falseEvictions(tabs);
            const t0 = performance.now();
            act();
            const ms = await Promise.race([report.then((r) => (r ? r.at - t0 : null)), sleep(sizes.recoveryTimeoutMs).then(() => null)]);
            return { grantedWhileHeld, ms, waiterCrashed: waiter.crashed || sharedProcess, falseEvictions: evicted };
          })(),
          timeoutMs,
          `${variant.id} recovery (${how}${loaded ? ', loaded' : ''})`,
        );
      } finally {
        await closeAll(tabs);
        busy?.stop();
      }
    },
    metrics: [
      {
        label: 'ms until the waiter is granted',
        better: 'lower',
        pick: (r) => r.ms,
        invalid: recoveryInvalid,
        target: loaded ? undefined : { atMost: action.target },
      },
      {
        label: 'p95 over the runs, ms',
        better: 'lower',
        pick: (r) => r.ms,
        invalid: recoveryInvalid,
        statistic: 'p95',
        // Under load the target is native's own p95 in the same run: within 1.5× of it.
        target: loaded ? { ratioAtMost: 1.5 } : how === 'crash' ? undefined : { atMost: 100 },
      },
    ],
    checks: [
      { label: 'waiter granted while the holder was alive', pick: (r) => (r.grantedWhileHeld ? 1 : 0) },
      { label: `waiter not granted within ${sizes.recoveryTimeoutMs / 1000} s`, pick: (r) => (!r.grantedWhileHeld && r.ms === null ? 1 : 0) },
      { label: 'waiter tab crashed too (same renderer process)', pick: (r) => (r.waiterCrashed ? 1 : 0) },
      falseEvictionCheck,
    ],
  };
}

export function crossTabScenarios(sizes) {
  return [
    uncontendedBesideScenario(sizes),
    pingPongScenario(sizes, false),
    pingPongScenario(sizes, true),
    ...sizes.contentionTabs.map((n) => contentionScenario(sizes, n)),
    recoveryScenario(sizes, 'close'),
    recoveryScenario(sizes, 'crash'),
    recoveryScenario(sizes, 'navigate'),
    recoveryScenario(sizes, 'close', true),
    recoveryScenario(sizes, 'crash', true),
    recoveryScenario(sizes, 'navigate', true),
  ];
}
