// The in-page half of the benchmark scenarios (docs/BENCH.md): each scenario is a function of
// `bench.locks` (the native `navigator.locks`, the polyfill's, or the ponyfill's `locks`), called by the
// Node harness through page.evaluate, returning plain numbers. Loaded after instrument.js and before the
// lock library, so it may only define functions here. Time: `performance.now()` (coarsened by the
// browser to 100 µs without cross-origin isolation, so single operations are never timed alone);
// cross-tab times are epoch milliseconds (`timeOrigin + now()`), comparable between tabs. Throughput
// scenarios first run a small instance of themselves (`warmup`), for native and weblocks alike, so the
// figures are of JIT-compiled code rather than of a page's first calls.
'use strict';
(() => {
  const bench = self.bench;
  const now = () => performance.now();
  const epochNow = () => performance.timeOrigin + performance.now();
  const SHARED = Object.freeze({ mode: 'shared' });
  const IF_AVAILABLE = Object.freeze({ ifAvailable: true });
  const noop = () => {};
  const runId = Math.random().toString(36).slice(2, 10);
  let nextName = 0;
  /** A lock name no other run, tab or scenario uses (native locks are shared by the whole origin). */
  const uniqueName = (label) => `bench-${label}-${runId}-${nextName++}`;

  let locks = null;

  /** A promise and its resolve function. */
  function deferred() {
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    return { promise, resolve };
  }

  /**
   * Called by the page right after the library: `lockManager` is usable from here on ("navigation to
   * first usable navigator.locks"); its first grant is timed too (scenario 9).
   */
  const started = deferred();
  /** Settles once the page has started its lock API and got a first grant (never, if it did not start). */
  bench.ready = started.promise;
  bench.start = (lockManager, ready, variant) => {
    bench.usableAt = now();
    bench.variant = variant;
    bench.locks = locks = lockManager;
    bench.firstGrant = lockManager.request(uniqueName('load'), () => {
      bench.firstGrantAt = now();
    });
    started.resolve(
      Promise.all([ready, bench.firstGrant]).then(() => ({
        variant,
        secureContext: self.isSecureContext,
        usableMs: bench.usableAt,
        firstGrantMs: bench.firstGrantAt,
        resources: performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname),
      })),
    );
  };

  /** Page heap after a full GC (Chromium with --expose-gc and --enable-precise-memory-info) plus wasm memory. */
  function memoryNow() {
    if (typeof self.gc === 'function') self.gc();
    return { jsHeap: performance.memory?.usedJSHeapSize ?? null, wasm: bench.wasmMemoryBytes() };
  }

  /**
   * A round trip through the lock manager: everything this context requested before is queued there
   * once it resolves (requests from one context are handled in order).
   */
  function lockManagerRoundTrip() {
    return locks.request(uniqueName('sync'), noop);
  }

  /** Hold an exclusive lock on each of `names` until `release()`; resolves once all are granted. */
  async function holdAll(names, options = {}) {
    const released = deferred();
    const grants = [];
    const done = names.map((name) => {
      const granted = deferred();
      grants.push(granted.promise);
      return locks.request(name, options, () => {
        granted.resolve();
        return released.promise;
      });
    });
    await Promise.all(grants);
    return {
      release() {
        released.resolve();
        return Promise.all(done);
      },
    };
  }

  bench.scenarios = {
    /** 1. Uncontended sequential request/release cycles on one name. */
    async uncontended({ n, budgetMs, warmup = 50 }) {
      const name = uniqueName('uncontended');
      for (let i = 0; i < warmup; i++) await locks.request(name, noop);
      const deadline = now() + budgetMs;
      const t0 = now();
      let done = 0;
      while (done < n) {
        await locks.request(name, noop);
        done++;
        if (now() > deadline) break;
      }
      const ms = now() - t0;
      return { n: done, complete: done === n, ms, opsPerSec: (done / ms) * 1000 };
    },

    /** 2. `ifAvailable` requests that miss because another request holds the name. */
    async ifAvailableMisses({ n, budgetMs, warmup = 50 }) {
      const name = uniqueName('ifavailable');
      const holder = await holdAll([name]);
      let granted = 0;
      const callback = (lock) => {
        if (lock !== null) granted++;
      };
      for (let i = 0; i < warmup; i++) await locks.request(name, IF_AVAILABLE, callback);
      const deadline = now() + budgetMs;
      const t0 = now();
      let done = 0;
      while (done < n) {
        await locks.request(name, IF_AVAILABLE, callback);
        done++;
        if (now() > deadline) break;
      }
      const ms = now() - t0;
      await holder.release();
      return { n: done, complete: done === n, ms, opsPerSec: (done / ms) * 1000, wronglyGranted: granted };
    },

    /**
     * 3. Queue drain: `n` requests queued behind blockers on `names` names, then the blockers are
     * released and the queue drains. Memory per pending request is read while all `n` are queued.
     */
    async drain({ n, names, measureMemory, warmup = Math.min(n, 1_000) }) {
      if (warmup > 0) await bench.scenarios.drain({ n: warmup, names: Math.min(names, warmup), measureMemory: false, warmup: 0 });
      const base = uniqueName('drain');
      const nameList = Array.from({ length: names }, (_, i) => `${base}-${i}`);
      const blockers = await holdAll(nameList);
      const before = measureMemory ? memoryNow() : null;
      const t0 = now();
      const requests = new Array(n);
      for (let i = 0; i < n; i++) requests[i] = locks.request(nameList[i % names], noop);
      const t1 = now();
      const queued = measureMemory ? memoryNow() : null;
      const t2 = now();
      await blockers.release();
      await Promise.all(requests);
      const t3 = now();
      const totalMs = t1 - t0 + (t3 - t2);
      const memory = measureMemory
        ? {
            jsHeapBytes: before.jsHeap === null ? null : queued.jsHeap - before.jsHeap,
            wasmBytes: queued.wasm - before.wasm,
            wasmTotalBytes: queued.wasm,
            bytesPerRequest: before.jsHeap === null ? null : (queued.jsHeap - before.jsHeap + queued.wasm - before.wasm) / n,
          }
        : null;
      return {
        n,
        names,
        enqueueMs: t1 - t0,
        drainMs: t3 - t2,
        totalMs,
        usPerRequest: (totalMs * 1000) / n,
        requestsPerSec: (n / totalMs) * 1000,
        memory,
      };
    },

    /** 4. Shared fan-out: `n` shared holders granted, an exclusive waiter queued, then all released. */
    async sharedFanOut({ n, warmup = Math.min(n, 100) }) {
      if (warmup > 0) await bench.scenarios.sharedFanOut({ n: warmup, warmup: 0 });
      const name = uniqueName('fanout');
      const released = deferred();
      const allGranted = deferred();
      let grantedCount = 0;
      const shared = () => {
        if (++grantedCount === n) allGranted.resolve();
        return released.promise;
      };
      const t0 = now();
      const holders = [];
      for (let i = 0; i < n; i++) holders.push(locks.request(name, SHARED, shared));
      await allGranted.promise;
      const t1 = now();
      let exclusiveAt = 0;
      const exclusive = locks.request(name, () => {
        exclusiveAt = now();
      });
      await lockManagerRoundTrip(); // the exclusive request is queued behind the shared holders
      const t2 = now();
      released.resolve();
      await exclusive;
      await Promise.all(holders);
      return {
        n,
        grantAllSharedMs: t1 - t0,
        sharedGrantsPerSec: (n / (t1 - t0)) * 1000,
        releaseToExclusiveMs: exclusiveAt - t2,
        totalMs: t1 - t0 + (exclusiveAt - t2),
      };
    },

    /**
     * 5. query() while `held` locks are held and `pending` requests wait (one of each per name): the
     * first `warmup` queries (cold: the page has not run query() before) and then `iterations` more
     * (warm), as scenarios 1 and 2 warm up before they measure.
     */
    async query({ held, pending, warmup, iterations, budgetMs }) {
      const base = uniqueName('query');
      const names = Array.from({ length: held }, (_, i) => `${base}-${i}`);
      const holders = await holdAll(names);
      const waiters = [];
      for (let i = 0; i < pending; i++) waiters.push(locks.request(names[i % held], noop));
      await lockManagerRoundTrip();
      const deadline = now() + budgetMs;
      const loop = async (count) => {
        const t0 = now();
        let done = 0;
        let snapshot;
        while (done < count) {
          snapshot = await locks.query();
          done++;
          if (now() > deadline) break;
        }
        return { done, ms: now() - t0, snapshot };
      };
      const cold = await loop(warmup);
      const warm = await loop(iterations);
      const mine = (list) => list.filter((info) => info.name.startsWith(base)).length;
      const seen = { held: mine(warm.snapshot.held), pending: mine(warm.snapshot.pending) };
      await holders.release();
      await Promise.all(waiters);
      return {
        iterations: warm.done,
        complete: cold.done === warmup && warm.done === iterations,
        ms: warm.ms,
        msPerQuery: warm.ms / warm.done,
        queriesPerSec: (warm.done / warm.ms) * 1000,
        coldQueriesPerSec: (cold.done / cold.ms) * 1000,
        seen,
      };
    },

    /** 10. A burst of every kind of call, ending with nothing held or pending. */
    async burst({ n }) {
      await bench.scenarios.uncontended({ n, budgetMs: 10_000, warmup: 0 });
      await bench.scenarios.ifAvailableMisses({ n, budgetMs: 10_000, warmup: 0 });
      await bench.scenarios.drain({ n, names: 3, measureMemory: false, warmup: 0 });
      await bench.scenarios.sharedFanOut({ n, warmup: 0 });
      await bench.scenarios.query({ held: 3, pending: 3, warmup: 1, iterations: 3, budgetMs: 10_000 });
      const name = uniqueName('burst');
      const holder = await holdAll([name]);
      const controller = new AbortController();
      const aborted = locks.request(name, { signal: controller.signal }, noop).catch((e) => e.name);
      controller.abort();
      const stolen = holder.release().catch((e) => e.name);
      await locks.request(name, { steal: true }, noop);
      const snapshot = await locks.query();
      const left = [...snapshot.held, ...snapshot.pending].filter((info) => info.name.startsWith('bench-')).length;
      return { aborted: await aborted, stolen: await Promise.race([stolen, 'not stolen']), left };
    },
  };

  // ---------------------------------------------------------------------------------------------
  // Cross-tab scenarios (6, 7, 8): each tab runs its half; the Node harness merges what they return.

  /** Resolves in a new task (a MessageChannel hop: not a timer, which background tabs throttle). */
  function nextTask() {
    return new Promise((resolve) => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => {
        channel.port1.close();
        resolve();
      };
      channel.port2.postMessage(undefined);
    });
  }

  /** An RPC port to the referee SharedWorker (referee_worker.js) named `name`. */
  function referee(name) {
    const port = new SharedWorker('/bench/pages/referee_worker.js', { name }).port;
    const waiting = new Map();
    let nextCall = 0;
    port.onmessage = (event) => {
      const { call, result } = event.data;
      waiting.get(call)(result);
      waiting.delete(call);
    };
    return (op, arg) =>
      new Promise((resolve) => {
        const call = nextCall++;
        waiting.set(call, resolve);
        port.postMessage({ call, op, arg });
      });
  }

  /** A read-modify-write of the referee's counter (`call` = referee(...)), each step awaited. */
  async function readModifyWrite(call, tab) {
    const value = await call('enter', tab);
    await call('exit', { tab, value: value + 1 });
  }

  /** Resolves at `epoch` (ms), by the page's own setTimeout (not the instrumented one). */
  async function untilEpoch(epoch) {
    const wait = bench.original.setTimeout ?? setTimeout;
    while (epochNow() < epoch) await new Promise((r) => wait(r, Math.max(0, epoch - epochNow())));
  }

  let held = null; // the lock this tab holds for the harness (holdFirst / holdForever)
  // The AbortErrors of this tab's cross-tab requests (messages). None of them has a signal or is stolen, and
  // the harness asks for the count only while the tab lives, so each is a lock lost by a live context.
  const evictions = [];
  const noteEviction = (e) => {
    if (e && e.name === 'AbortError') evictions.push(String(e.message));
  };
  let waiter = null; // the waiter of scenario 8
  let echo = null; // the channel objects of startEcho
  let ring = null; // this tab's part of a token ring (ringJoin, ringRun)

  bench.cross = {
    epochNow,

    /**
     * 6. Request `name` and hold it (inside the referee's critical section) until pingPong takes over;
     * resolves when granted.
     */
    async holdFirst(name, refereeName) {
      const call = referee(refereeName);
      const granted = deferred();
      const released = deferred();
      const done = locks.request(name, async () => {
        const grantedAt = epochNow();
        const value = await call('enter', 'first');
        granted.resolve();
        await released.promise;
        await call('exit', { tab: 'first', value: value + 1 });
        held.interval = [grantedAt, epochNow()];
      });
      done.catch(noteEviction);
      held = { released, done, interval: null };
      return granted.promise;
    },

    /**
     * Holder: poll query() until another client's request for `name` is pending (bounded). Each poll
     * yields a task: weblocks may answer query() without one (in the context that decides), and a loop
     * of microtasks would starve the messages that carry the other tab's request.
     */
    async waitForOtherPending(name, timeoutMs) {
      const deadline = now() + timeoutMs;
      while (now() < deadline) {
        const { held: heldInfos, pending } = await locks.query();
        const mine = heldInfos.find((info) => info.name === name)?.clientId;
        if (pending.some((info) => info.name === name && info.clientId !== mine)) return true;
        await nextTask();
      }
      return false;
    },

    /**
     * 6. Ping-pong: `turns` grants of `name` in this tab. Each grant queues this tab's next request
     * before releasing, so with another tab doing the same the lock alternates without polling. Inside,
     * the referee's critical section (read and write, awaited) catches two tabs holding at once.
     * `holding`: this tab holds `name` from holdFirst, and the other tab's request is already queued.
     * Returns this tab's [grantedAt, releasedAt] intervals (its own clock), the first one holdFirst's.
     */
    async pingPong({ name, turns, holding, budgetMs, refereeName, tab }) {
      const call = referee(refereeName);
      await call('hello', tab);
      const deadline = now() + budgetMs;
      const intervals = [];
      const finished = deferred();
      let outstanding = 0;
      const turn = async () => {
        const grantedAt = epochNow();
        if (intervals.length + 1 < turns && now() < deadline) request();
        await readModifyWrite(call, tab);
        intervals.push([grantedAt, epochNow()]);
      };
      const request = () => {
        outstanding++;
        locks.request(name, turn).then(
          () => {
            if (--outstanding === 0) finished.resolve();
          },
          (e) => {
            noteEviction(e);
            finished.resolve(String(e));
          },
        );
      };
      request();
      let holdInterval = null;
      if (holding) {
        held.released.resolve();
        await held.done;
        holdInterval = held.interval;
      }
      const error = await finished.promise;
      return { intervals: holding ? [holdInterval, ...intervals] : intervals, error: error ?? null };
    },

    /**
     * 7. Contention: until `endEpoch`, take `name` and do a read-modify-write of the referee's counter
     * with awaits inside the callback; the referee counts overlapping critical sections.
     */
    async contend({ name, refereeName, tab, startEpoch, endEpoch }) {
      const call = referee(refereeName);
      await call('hello', tab);
      await untilEpoch(startEpoch);
      let ops = 0;
      const startedAt = epochNow();
      const critical = () => readModifyWrite(call, tab);
      while (epochNow() < endEpoch) {
        try {
          await locks.request(name, critical);
          ops++;
        } catch (e) {
          // A lost lock is counted (falseEvictions) and the tab contends on; anything else ends the run.
          if (e.name !== 'AbortError') throw e;
          noteEviction(e);
        }
      }
      return { ops, startedAt, endedAt: epochNow() };
    },

    /**
     * 7, the floor of each transport a lock protocol could use: contend's critical section, with no lock
     * at all, passed round the `tabs` tabs (this one is `tab`) by a token. ringJoin sets this tab up and
     * resolves once it can take part; once every tab has joined, ringRun (in every tab) passes the token
     * from `startEpoch`: the tab that has it runs the critical section and passes it on, until `endEpoch`;
     * then a stop token goes round once. `transport`: 'broadcast' (every token reaches every tab, two
     * channel objects per tab: weblocks' layout), 'relay' (through a shared worker, ring_worker.js:
     * docs/PROTOCOL.md §15's hub), 'ports' (a MessagePort from each tab to the next, which that worker
     * hands out), 'log' (the floor of weblocks' log transport, docs/PROTOCOL.md §12: the tab that passes
     * the token appends it to an IndexedDB object store in a read/write transaction, and once that
     * commits, posts it on a BroadcastChannel, two objects per tab, as js/log_channel.js carries an entry).
     */
    async ringJoin({ transport, ringName, refereeName, tab, tabs }) {
      const call = referee(refereeName);
      await call('hello', tab);
      const mine = { call, tab, transport, next: (tab + 1) % tabs, token: deferred() };
      ring = mine;
      const onToken = (data) => {
        if (data.to === tab) mine.token.resolve(data);
      };
      if (transport === 'log') {
        const db = await new Promise((resolve, reject) => {
          const open = indexedDB.open(ringName, 1);
          open.onupgradeneeded = () => open.result.createObjectStore('log', { autoIncrement: true });
          open.onsuccess = () => resolve(open.result);
          open.onerror = () => reject(open.error);
        });
        const rx = new BroadcastChannel(ringName);
        const tx = new BroadcastChannel(ringName);
        rx.onmessage = (event) => onToken(event.data);
        mine.send = (data) => {
          const transaction = db.transaction(['log'], 'readwrite');
          transaction.objectStore('log').add(data);
          transaction.oncomplete = () => tx.postMessage(data);
          if (transaction.commit) transaction.commit();
        };
        mine.close = () => {
          rx.close();
          tx.close();
          db.close();
          if (tab === 0) indexedDB.deleteDatabase(ringName);
        };
        return true;
      }
      if (transport === 'broadcast') {
        const rx = new BroadcastChannel(ringName);
        const tx = new BroadcastChannel(ringName);
        rx.onmessage = (event) => onToken(event.data);
        mine.send = (data) => tx.postMessage(data);
        mine.close = () => {
          rx.close();
          tx.close();
        };
        return true;
      }
      const port = new SharedWorker('/bench/pages/ring_worker.js', { name: ringName }).port;
      const links = transport === 'ports';
      const joined = deferred();
      let [into, out] = [null, null];
      port.onmessage = (event) => {
        const data = event.data;
        if (data.link === 'in') (into = event.ports[0]).onmessage = (m) => onToken(m.data);
        else if (data.link === 'out') out = event.ports[0];
        else if (!data.joined) onToken(data);
        if (links ? out !== null : data.joined) joined.resolve();
      };
      port.postMessage({ tab, tabs, links });
      mine.send = (data) => (links ? out : port).postMessage(data);
      mine.close = () => {
        for (const p of [port, into, out]) p?.close();
      };
      await joined.promise;
      return true;
    },

    async ringRun({ startEpoch, endEpoch }) {
      const { call, tab, next, send, close } = ring;
      await untilEpoch(startEpoch);
      let ops = 0;
      const startedAt = epochNow();
      let data = tab === 0 ? { to: tab } : await ring.token.promise;
      while (!data.stop && epochNow() < endEpoch) {
        ring.token = deferred();
        await readModifyWrite(call, tab);
        ops++;
        send({ to: next });
        data = await ring.token.promise;
      }
      send({ to: next, stop: true });
      // Let the stop token leave before the objects close (a post is sent at once, or over the log once
      // its append commits; this is margin).
      await nextTask();
      if (ring.transport === 'log') await new Promise((r) => (bench.original.setTimeout ?? setTimeout)(r, 50));
      close();
      ring = null;
      return { ops, startedAt, endedAt: epochNow() };
    },

    /**
     * 6, the floor of a BroadcastChannel design: one tab echoes on `channelName` what the other sends
     * (channelHop). `objects`: 2 is weblocks' layout (a receiving object made first, a sending one), 1 a
     * single object that sends and receives. Until stopEcho.
     */
    startEcho(channelName, objects) {
      const rx = new BroadcastChannel(channelName);
      const tx = objects === 2 ? new BroadcastChannel(channelName) : rx;
      rx.onmessage = (event) => {
        if (event.data[0] === 'ping') tx.postMessage(['pong', event.data[1]]);
      };
      echo = [rx, tx];
      return true;
    },
    stopEcho() {
      for (const channel of echo ?? []) channel.close();
      echo = null;
    },

    /** The other half: `turns` round trips over the same layout; returns half of each, in ms. */
    async channelHop(channelName, objects, turns) {
      const rx = new BroadcastChannel(channelName);
      const tx = objects === 2 ? new BroadcastChannel(channelName) : rx;
      const hops = [];
      try {
        for (let turn = 0; turn < turns; turn++) {
          const sentAt = now();
          await new Promise((resolve) => {
            rx.onmessage = (event) => {
              if (event.data[0] === 'pong' && event.data[1] === turn) resolve();
            };
            tx.postMessage(['ping', turn]);
          });
          hops.push((now() - sentAt) / 2);
        }
      } finally {
        rx.close();
        tx.close();
      }
      return hops;
    },

    /** The referee's totals (any tab of the run may ask). */
    refereeStats(refereeName) {
      return referee(refereeName)('stats');
    },

    /** 8. The holder: take `name` and never release it. Resolves when granted. */
    holdForever(name) {
      return new Promise((resolve) => {
        locks
          .request(name, () => {
            resolve(epochNow());
            return new Promise(noop);
          })
          .catch(noteEviction);
      });
    },

    /**
     * 8. The waiter: request `name`; once granted, POST to `reportPath` on the bench server, which tells the
     * harness at once even where the driver cannot (WebKitWebDriver ends its session when a page crashes).
     */
    startWaiter(name, reportPath) {
      waiter = { grantedAt: null };
      locks
        .request(name, () => {
          waiter.grantedAt = epochNow();
          fetch(reportPath, { method: 'POST', body: String(waiter.grantedAt), keepalive: true }).catch(noop);
        })
        .catch(noteEviction);
      return true;
    },
    waiterGrantedAt() {
      return waiter.grantedAt;
    },

    /** The locks this tab's cross-tab requests lost (AbortError) so far, and the first message. */
    falseEvictions() {
      return { count: evictions.length, first: evictions[0] ?? null };
    },
  };
})();
