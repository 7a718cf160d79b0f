// The control of the cross-tab safety checks: a lock manager that knows only its own tab (exclusive
// locks, FIFO per name, callbacks in a new task). It is what a lock that does not coordinate across tabs
// looks like; tests/e2e/package/bench_smoke.test.mjs runs the cross-tab scenarios on it and requires them to
// report overlaps and a waiter granted while the holder lives, so the checks are known not to be blind.
'use strict';
self.perTabLocks = (() => {
  const clientId = `per-tab-${Math.random().toString(36).slice(2)}`;
  const queues = new Map(); // name -> requests waiting, in order
  const held = new Set(); // names held in this tab

  function inNewTask(fn) {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      fn();
    };
    channel.port2.postMessage(undefined);
  }

  function grantNext(name) {
    const queue = queues.get(name);
    if (held.has(name) || !queue?.length) return;
    const request = queue.shift();
    held.add(name);
    inNewTask(() => {
      let result;
      try {
        result = Promise.resolve(request.callback({ name, mode: 'exclusive' }));
      } catch (e) {
        result = Promise.reject(e);
      }
      const release = () => {
        held.delete(name);
        grantNext(name);
      };
      result.then(
        (value) => {
          release();
          request.resolve(value);
        },
        (error) => {
          release();
          request.reject(error);
        },
      );
    });
  }

  return {
    request(name, options, callback) {
      if (callback === undefined) callback = options;
      return new Promise((resolve, reject) => {
        if (!queues.has(name)) queues.set(name, []);
        queues.get(name).push({ callback, resolve, reject });
        grantNext(name);
      });
    },
    query() {
      const info = (name) => ({ clientId, mode: 'exclusive', name });
      const pending = [...queues].flatMap(([name, queue]) => queue.map(() => info(name)));
      return Promise.resolve({ held: [...held].map(info), pending });
    },
  };
})();
