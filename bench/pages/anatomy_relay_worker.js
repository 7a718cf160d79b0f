// Shared worker of bench/handoff_anatomy.mjs: relays each message of a tab to the other tabs, or, asked to
// 'introduce', hands the first two tabs the two ports of a new MessageChannel (a direct link).
const ports = [];
onconnect = (event) => {
  const port = event.ports[0];
  ports.push(port);
  port.onmessage = (m) => {
    if (m.data === 'introduce') {
      const channel = new MessageChannel();
      ports[0].postMessage('direct', [channel.port1]);
      ports[1].postMessage('direct', [channel.port2]);
      return;
    }
    for (const p of ports) if (p !== port) p.postMessage(m.data);
  };
};
