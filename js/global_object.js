// The global object of the realm this module runs in: the default of every module that serves a global
// (a frame's API is given the frame's window instead). js/lock_api.js reads none (see its header).

/**
 * The global object, read without `globalThis` (Chrome 71, Firefox 65, Safari 12.1): the support floor
 * is older. `self` is the global of a window and of every kind of worker; `global` that of Node before 12.
 */
export const theGlobal =
  typeof globalThis === 'object' ? globalThis : typeof self === 'object' ? self : typeof window === 'object' ? window : global;
