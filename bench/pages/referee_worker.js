// The referee of the cross-tab safety check (scenario 7): a SharedWorker holding one counter. A tab in
// its critical section sends 'enter' (answered with the counter: the read) and then 'exit' with the new
// value (the write); both are acknowledged, and the tab releases its lock only after the 'exit' answer,
// so with a working lock the referee never sees two critical sections at once. Each run names its own
// referee, so every run starts from zero.
'use strict';
let value = 0;
let inside = 0;
let overlaps = 0;
let enters = 0;
const tabs = new Set();

function handle(op, arg) {
  switch (op) {
    case 'hello':
      tabs.add(arg);
      return tabs.size;
    case 'enter':
      enters++;
      inside++;
      if (inside > 1) overlaps++;
      return value;
    case 'exit':
      inside--;
      value = arg.value;
      return value;
    case 'stats':
      return { value, enters, overlaps, lostUpdates: enters - value, tabs: tabs.size };
    default:
      throw new Error(`referee: unknown op ${op}`);
  }
}

self.onconnect = (event) => {
  const port = event.ports[0];
  port.onmessage = (message) => {
    const { call, op, arg } = message.data;
    port.postMessage({ call, result: handle(op, arg) });
  };
};
