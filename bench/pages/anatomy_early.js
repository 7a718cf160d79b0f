// Loaded before the library on bench/pages/anatomy.html: records, on one clock for every tab of the machine
// (performance.timeOrigin + now()), when each BroadcastChannel message handler the library sets starts
// and ends, and each post (kind and sender of the message: slots 2 and 3 of the wire format).
'use strict';
(() => {
  const t = () => performance.timeOrigin + performance.now();
  const log = [];
  const slots = (data) => (Array.isArray(data) ? [data[2], data[3]] : [null, null]);
  self.anatomy = { log, t };
  const post = BroadcastChannel.prototype.postMessage;
  BroadcastChannel.prototype.postMessage = function (message) {
    log.push(['post', t(), ...slots(message)]);
    return post.call(this, message);
  };
  const onmessage = Object.getOwnPropertyDescriptor(BroadcastChannel.prototype, 'onmessage');
  Object.defineProperty(BroadcastChannel.prototype, 'onmessage', {
    configurable: true,
    get() {
      return onmessage.get.call(this);
    },
    set(handler) {
      onmessage.set.call(
        this,
        handler &&
          function (event) {
            log.push(['handler', t(), ...slots(event.data)]);
            try {
              return handler.call(this, event);
            } finally {
              log.push(['handled', t()]);
            }
          },
      );
    },
  });
})();
