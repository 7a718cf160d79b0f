// The deputy: a tiny worker of this page that speaks for it while its main thread runs a long task
// (docs/PROTOCOL.md, "the deputy"). A context that waits for this page's lock pings the page on the
// origin's channel and also sends the deputy, on the deputy's own channel, the answer it wants posted (a
// `Vouch` prepared by the pinger's wasm); the deputy posts it on the origin's channel. It runs as long as
// the page's process does, so only a page that is gone (crashed, killed) stays silent, and the others
// can evict a silent page after 200 ms instead of 650 ms. No wasm, no decoding: it relays, and posts the
// announcement the page hands it for each new membership.
//
// Only where the global is a Window or a dedicated worker (whose nested workers end with it; shared and
// service workers cannot start workers), and only once the context first takes part in the protocol.
// Where blob workers are forbidden (a CSP without `blob:` in worker-src) or there is no BroadcastChannel,
// there is no deputy, and the others wait 650 ms as before. Nor in an engine where the test command does
// not show that a worker's channel posts while its page's main thread is busy (WebKit's waits for the
// page's main thread: a deputy there would only make the others evict the page sooner).
import { oneOrderEngine } from './transport_choice.js';

import { theGlobal } from './global_object.js';

// The deputy opens the origin's channel to post and closes it a second after its last post: an
// object kept open would receive every message of the origin, waking this worker's thread for each, on
// every lock handoff of every tab; one closed at once can drop a message posted before its connection
// to the browser is set up.
// The worker's script is this function's source, run at once: written as code, it is minified with the
// bundle (a string of it was not). It must use nothing from outside itself.
function deputyMain() {
  let originName = null, origin = null, own = null, closer = 0;
  const closeOrigin = () => {
    if (origin !== null) origin.close();
    origin = null;
  };
  const post = (message) => {
    if (origin === null) origin = new BroadcastChannel(originName);
    origin.postMessage(message);
    clearTimeout(closer);
    closer = setTimeout(closeOrigin, 1000);
  };
  self.onmessage = ({ data: [name, ownName, message] }) => {
    if (own === null || own.name !== ownName) {
      if (own !== null) own.close();
      own = new BroadcastChannel(ownName);
      own.onmessage = (event) => post(event.data);
    }
    if (name !== originName) closeOrigin();
    originName = name;
    post(message);
  };
}
const SOURCE = `(${deputyMain})()`;

/**
 * The `deputy(originChannel, ownChannel, message)` function the Engine calls (`deputy()` ends the
 * deputy), or `undefined` where this global cannot have one.
 */
export function makeDeputy(globalObject = theGlobal) {
  const { Worker, Blob, URL, document, DedicatedWorkerGlobalScope } = globalObject;
  const dedicatedWorker = typeof DedicatedWorkerGlobalScope === 'function' && globalObject instanceof DedicatedWorkerGlobalScope;
  if ((typeof document !== 'object' && !dedicatedWorker) || typeof Worker !== 'function' || typeof Blob !== 'function') return undefined;
  // The deputy speaks on BroadcastChannel, and only where a busy page does not hold its posts back.
  if (typeof globalObject.BroadcastChannel !== 'function' || !oneOrderEngine(globalObject)) return undefined;
  let worker = null;
  let failed = false;
  return (originName, ownName, message) => {
    if (failed) return;
    if (originName === undefined) {
      if (worker !== null) worker.terminate();
      failed = true;
      return;
    }
    if (worker === null) {
      try {
        worker = new Worker(URL.createObjectURL(new Blob([SOURCE], { type: 'text/javascript' })), { name: 'weblocks deputy' });
        worker.onerror = () => {
          failed = true;
          worker.terminate();
        };
      } catch (e) {
        failed = true; // blob workers forbidden here: no deputy
        return;
      }
    }
    worker.postMessage([originName, ownName, message]);
  };
}
