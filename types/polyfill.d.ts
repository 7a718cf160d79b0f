// `import 'weblocks/polyfill'` only installs `navigator.locks`, `LockManager` and `Lock` where they are
// missing; their types are the platform's own (TypeScript's lib "dom" or "webworker").
export {};
