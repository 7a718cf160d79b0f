// The farewell of a context that stays a member of its origin's protocol in the back/forward cache
// (docs/PROTOCOL.md §8, the participant's `BackForwardCache::Stay`): `unlessPersisted(post)` is a `pagehide`
// listener that calls `post()` (the channel's own `postMessage`, or the log's, bound to the encoded Leave) only
// when the page goes for good, not when it enters the cache, where it keeps its locks until restored or evicted.
// It calls no wasm: Firefox may stop a closing tab's `pagehide` listener as soon as it calls into wasm.
export const unlessPersisted = (post) => (event) => {
  if (!event.persisted) post();
};
