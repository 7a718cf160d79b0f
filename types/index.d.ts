// Types of `weblocks` (the ponyfill). The standard part reuses the platform's own declarations
// (`LockManager`, `Lock`, `LockOptions`, `LockManagerSnapshot`, `LockInfo`, `LockMode`,
// `LockGrantedCallback` of TypeScript's lib "dom" or lib "webworker"), so code written for
// `navigator.locks` type-checks unchanged against `locks`, and `locks` can be passed wherever a
// `LockManager` is expected. Your tsconfig's `lib` must include "dom" or "webworker" (as for the native API).

/** This context's lock manager: behaves like `navigator.locks`, touches no global. */
export declare const locks: globalThis.LockManager;

/** The `LockManager` interface object of `locks` (`locks instanceof LockManager`; not constructible). */
export declare const LockManager: typeof globalThis.LockManager;
export type LockManager = globalThis.LockManager;

/** The `Lock` interface object of the locks `locks` grants (not constructible). */
export declare const Lock: typeof globalThis.Lock;
export type Lock = globalThis.Lock;

export type LockMode = globalThis.LockMode;
export type LockOptions = globalThis.LockOptions;
export type LockInfo = globalThis.LockInfo;
export type LockManagerSnapshot = globalThis.LockManagerSnapshot;

// ---- Extensions (not part of the Web Locks spec) ----

/** Extension: this context's client id, as `query()` reports it in `LockInfo.clientId`. */
export declare const clientId: string;

/**
 * Extension: settles when the WebAssembly engine has loaded (rejects if it failed to load). Calls made
 * before are queued in order, so awaiting it is optional.
 */
export declare const ready: Promise<void>;

/**
 * Extension: installs `locks` as `navigator.locks`, and `LockManager` and `Lock` as globals of
 * `globalObject` (default `globalThis`), only where `navigator.locks` is missing. Returns true if it
 * installed.
 */
export declare function install(globalObject?: typeof globalThis): boolean;

/**
 * Extension: closes this context's IndexedDB connections of weblocks (the databases `weblocks-*`), as
 * before the page deletes its origin's databases (logout code). Resolves once this context holds no
 * lock (a held lock keeps them open: its holder's connection is the evidence that it lives) and has
 * closed them: it leaves the origin's protocol, its pending requests kept. Requests made after it open
 * them again. A deletion made without it completes too, once no context of the origin holds a lock.
 */
export declare function close(): Promise<void>;

// Leases, an extension of their own: `weblocks/leases` (types/leases.d.ts).
