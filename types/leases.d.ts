// Types of `weblocks/leases`, the leases add-on (docs/LEASES.md): locks that outlive a page load, kept in
// IndexedDB or shared by a lease service. Not part of the Web Locks spec; the module needs no lock engine.

/** Why a lease operation failed. `Revoked`, `Unauthorized` and `Forbidden` come from the lease service only. */
export type LockErrorCode =
  | 'InvalidArgument'
  | 'AlreadyLocked'
  | 'NotFound'
  | 'Expired'
  | 'TakenOver'
  | 'Revoked'
  | 'Unauthorized'
  | 'Forbidden'
  | 'StorageError';

/** A lease service user, from the claims of the token that took the lease. */
export interface LeaseHolder {
  /** The user's id (the token's `sub`). */
  sub: string;
  /** The display name other users see (the token's `name`). */
  name: string;
}

/** Extension: the error every lease operation rejects with. */
export declare class LockError extends Error {
  constructor(
    code: LockErrorCode,
    message: string,
    options?: { expiresAt?: number; holder?: LeaseHolder; acquiredAt?: number; cause?: unknown; deadline?: boolean },
  );
  readonly name: 'LockError';
  readonly code: LockErrorCode;
  /** With `AlreadyLocked` and `Expired`: when the lease expires or expired (ms since the epoch). */
  readonly expiresAt?: number;
  /** Lease service, when another lease holds the key (`AlreadyLocked`, `TakenOver`, `Revoked`): its holder. */
  readonly holder?: LeaseHolder;
  /** With `holder`: since when it holds the key (ms since the epoch). */
  readonly acquiredAt?: number;
  /** With `Expired`: true when this page decided it (its deadline for the lease passed), not the store. */
  readonly deadline?: true;
}

/** A live lease as `checkLock`, `extendLockExpiration` and `list` report it (never its token). */
export interface LeaseInfo {
  type: string;
  id: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
  /** Lease service: who holds it. */
  holder?: LeaseHolder;
  /** Lease service: since when (ms since the epoch, the service's database clock). */
  acquiredAt?: number;
  /** Lease service: the lease's fencing number; a later lease on the same (type, id) always has a larger one. */
  fence?: number;
  /** Lease service: its database's clock when it answered (`expiresAt - now` is the time left). */
  now?: number;
}

/** A change of a (type, id), as the lease service's stream reports it to `watch`. */
export interface LeaseChange {
  kind: 'current' | 'acquired' | 'extended' | 'released' | 'expired' | 'takenOver';
  type: string;
  id: string;
  /** The fencing number of the lease the change is about (of its last lease for a free key; 0: never held). */
  fence: number;
  /** The live lease, or null when the key is free. */
  lease: { holder: LeaseHolder; acquiredAt: number; expiresAt: number } | null;
  /** The service's clock when the change was made or read (ms since the epoch). */
  now: number;
}

export interface WatchOptions {
  /** Called once if the service refuses the stream (a bad token, type or id); the watch then stops. */
  onError?: (error: LockError) => void;
}

/** Where leases are kept; the default is IndexedDB. Every method returns a promise but `watch`. */
export interface LeaseStore {
  tryLock(type: string, id: string, ttlMs: number): Promise<LeaseInfo & { lockId: string }>;
  checkLock(lockId: string): Promise<LeaseInfo>;
  releaseLock(lockId: string): Promise<unknown>;
  extendLockExpiration(lockId: string, incMs: number): Promise<LeaseInfo>;
  list(type?: string): Promise<LeaseInfo[]>;
  /** Optional: take the lease whoever holds it. */
  takeOver?(type: string, id: string, ttlMs: number): Promise<LeaseInfo & { lockId: string }>;
  /** Optional: call `onChange` for each change of (type, id) (of the type when `id` is null); returns `stop`. */
  watch?(type: string, id: string | null, onChange: (change: LeaseChange) => void, options?: WatchOptions): () => void;
}

export interface KeepAliveOptions {
  /** How often to extend (ms); default one minute. */
  everyMs?: number;
  /** By how much each time (ms); default `everyMs`. */
  incMs?: number;
  /** Called once when the lease is lost (keepAlive then stops): the store's definite answer (`Expired`,
   *  `TakenOver`, `Revoked`, `NotFound`, `Unauthorized`...), or `Expired` with `deadline: true` when this
   *  page's deadline passed first. A failed extension is tried again while the deadline leaves time. */
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
  /** Move a live lease's expiry `incMs` later; `signal` aborts the request where the store can. */
  extendLockExpiration(lockId: string, incMs: number, options?: { signal?: AbortSignal }): Promise<LeaseInfo>;
  /** The live leases (of the origin, or the lease service's; there, of `type` if given). */
  list(type?: string): Promise<LeaseInfo[]>;
  /** Extend the lease periodically while this page is open; returns `stop`. */
  keepAlive(lockId: string, options?: KeepAliveOptions): () => void;
  /** Lease service: take the lease whoever holds it (needs the `takeover` permission); resolves with its lockId. */
  takeOver(type: string, id: string, options?: { ttlMs?: number }): Promise<string>;
  /** Lease service: `onChange` for each change of (type, id), or of the type when `id` is null; returns `stop`. */
  watch(type: string, id: string | null, onChange: (change: LeaseChange) => void, options?: WatchOptions): () => void;
}

/** Extension: the leases of this origin, kept in IndexedDB (database `weblocks-leases`). */
export declare const leases: Leases;

/** Extension: the leases API over another store (or a function returning one, called on first use). */
export declare function createLeases(store: LeaseStore | (() => LeaseStore | Promise<LeaseStore>)): Leases;

export interface ServerLeaseStoreOptions {
  /** The lease service's base URL, e.g. `https://leases.example.com`. */
  url: string | URL;
  /** The user's HS256 JWT (claims `sub`, `name`, `perms`, `exp`), or a function returning it (called per request). */
  token: string | (() => string | Promise<string>);
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** The longest one request may take, in ms (default 10,000); then it fails with `StorageError`. */
  timeoutMs?: number;
}

/** Extension: the store of the lease service (weblocks-lease-server): leases shared between users. */
export declare function serverLeaseStore(options: ServerLeaseStoreOptions): Required<LeaseStore>;
