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

// ---- Extension: leases, locks that outlive a page load (kept in IndexedDB) ----

/** Why a lease operation failed. */
export type LockErrorCode = 'InvalidArgument' | 'AlreadyLocked' | 'NotFound' | 'Expired' | 'TakenOver' | 'StorageError';

/** Extension: the error every lease operation rejects with. */
export declare class LockError extends Error {
  constructor(code: LockErrorCode, message: string, options?: { expiresAt?: number; cause?: unknown });
  readonly name: 'LockError';
  readonly code: LockErrorCode;
  /** With `AlreadyLocked` and `Expired`: when the lease expires or expired (ms since the epoch). */
  readonly expiresAt?: number;
}

/** A live lease as `checkLock`, `extendLockExpiration` and `list` report it (never its token). */
export interface LeaseInfo {
  type: string;
  id: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

/** Where leases are kept; the default is IndexedDB. Every method returns a promise. */
export interface LeaseStore {
  tryLock(type: string, id: string, ttlMs: number): Promise<LeaseInfo & { lockId: string }>;
  checkLock(lockId: string): Promise<LeaseInfo>;
  releaseLock(lockId: string): Promise<unknown>;
  extendLockExpiration(lockId: string, incMs: number): Promise<LeaseInfo>;
  list(): Promise<LeaseInfo[]>;
}

export interface KeepAliveOptions {
  /** How often to extend (ms); default one minute. */
  everyMs?: number;
  /** By how much each time (ms); default `everyMs`. */
  incMs?: number;
  /** Called once when an extension fails (keepAlive then stops). */
  onLost?: (error: LockError) => void;
}

/** Extension: leases (offline pessimistic locks with an expiry). Every promise rejects with a `LockError`. */
export interface Leases {
  /** Take the lease on (type, id) for `ttlMs` (default 5 minutes); resolves with its lockId: keep it. */
  tryLock(type: string, id: string, options?: { ttlMs?: number }): Promise<string>;
  /** Resolves while the lease is live. */
  checkLock(lockId: string): Promise<LeaseInfo>;
  /** Remove the lease. */
  releaseLock(lockId: string): Promise<void>;
  /** Move a live lease's expiry `incMs` later. */
  extendLockExpiration(lockId: string, incMs: number): Promise<LeaseInfo>;
  /** The live leases of the origin. */
  list(): Promise<LeaseInfo[]>;
  /** Extend the lease periodically while this page is open; returns `stop`. */
  keepAlive(lockId: string, options?: KeepAliveOptions): () => void;
}

/** Extension: the leases of this origin, kept in IndexedDB (database `weblocks-leases`). */
export declare const leases: Leases;

/** Extension: the leases API over another store (or a function returning one, called on first use). */
export declare function createLeases(store: LeaseStore | (() => LeaseStore | Promise<LeaseStore>)): Leases;
