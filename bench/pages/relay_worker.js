// Prototype for docs/PROTOCOL.md §15 (bench only, not part of the package): a SharedWorker that relays
// every message it gets from one port to all its other ports, in the order it gets them. Each port is one
// channel object of bench/pages/relay.html, so the ports see one order and an object does not get its own
// messages, as on a BroadcastChannel: the unchanged protocol runs over it. A port first names its page
// (['hello', page id]); the sender's own page is served last, so the other pages' copies, the ones that
// grant, go first. A port says 'close' before it goes.
'use strict';
const ports = new Map(); // port -> its page's id
self.onconnect = (event) => {
  const port = event.ports[0];
  ports.set(port, null);
  port.onmessage = (message) => {
    const data = message.data;
    if (data === 'close') {
      ports.delete(port);
      return;
    }
    if (Array.isArray(data) && data[0] === 'hello') {
      ports.set(port, data[1]);
      return;
    }
    const page = ports.get(port);
    for (const [other, otherPage] of ports) if (otherPage !== page) other.postMessage(data);
    for (const [other, otherPage] of ports) if (otherPage === page && other !== port) other.postMessage(data);
  };
};
