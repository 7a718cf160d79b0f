//! weblocks-lease-server: leases between users. The lease decisions of the `weblocks` crate
//! (`weblocks::lease`), served over HTTP/JSON, with the leases' `locks` table in SQLite (the embedded
//! default) or PostgreSQL (several instances on one database). See docs/LEASES.md.
//!
//! - [`config`]: flags and environment; [`server`]: the assembled service; [`shutdown`]: its stop signal.
//! - [`connections`]: HTTP connections with their timeouts and cap; [`descriptors`]: room for them.
//! - [`api`]: the endpoints; [`extract`]: their request parsing; [`responses`]: their JSON bodies;
//!   [`api_error`]: typed JSON errors, with [`error_code`], the table of every code and its status;
//!   [`app_state`]: what the endpoints share.
//! - [`identity`] and [`hs256`]: who is asking (an HS256 JWT); [`holder`]: the user a lease names;
//!   [`limits`]: what the service accepts.
//! - [`lease_row`]: a row of `locks` and what an operation does to it (the core's decision applied);
//!   [`grant_token`]: a grant's token, derived from a request id so that a retry gets the same lease.
//! - [`store`]: SQLite and PostgreSQL, one transaction per operation.
//! - [`change`], [`events`], [`bus`], [`stream`], [`expiry`]: change events, from the database to
//!   this instance's streams, and the expiries nobody writes; [`purge`]: deleting long-expired rows.

pub mod api;
pub mod api_error;
pub mod app_state;
pub mod bus;
pub mod change;
pub mod config;
pub mod connections;
pub mod descriptors;
pub mod error_code;
pub mod events;
pub mod expiry;
pub mod extract;
pub mod grant_token;
pub mod holder;
pub mod hs256;
pub mod identity;
pub mod lease_row;
pub mod limits;
pub mod purge;
pub mod responses;
pub mod server;
pub mod shutdown;
pub mod store;
pub mod stream;
