// Shared worker of scenario 7's transport floors (bench.cross.ringJoin, ringRun): the tabs of a ring each
// connect and name themselves ({ tab, tabs }). Over the 'relay' transport it forwards each token ({ to, ... })
// to the port of tab `to` (the shape of docs/PROTOCOL.md §15's hub: tab -> worker -> tab); over 'ports', once
// every tab has named itself, it hands each tab i the sending end of a new MessageChannel whose receiving
// end goes to tab i + 1 (tokens then go tab -> tab, the worker no longer in the way). One worker per ring.
'use strict';
const ports = new Map(); // tab -> its port
self.onconnect = (event) => {
  const port = event.ports[0];
  port.onmessage = (message) => {
    const data = message.data;
    if (data.tab === undefined) {
      ports.get(data.to)?.postMessage(data);
      return;
    }
    ports.set(data.tab, port);
    if (data.links && ports.size === data.tabs) {
      for (let tab = 0; tab < data.tabs; tab++) {
        const link = new MessageChannel();
        ports.get(tab).postMessage({ link: 'out' }, [link.port1]);
        ports.get((tab + 1) % data.tabs).postMessage({ link: 'in' }, [link.port2]);
      }
    }
    port.postMessage({ joined: true });
  };
};
