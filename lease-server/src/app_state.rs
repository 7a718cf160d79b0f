//! What every request handler shares: the store, the change hub, the token verifier, the service's
//! limits, and the shutdown signal. Cloning it is cheap (every part is shared).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};

use crate::events::Events;
use crate::grant_token::GrantKey;
use crate::identity::TokenVerifier;
use crate::limits::TtlBounds;
use crate::store::Store;

/// The limits the handlers enforce, fixed when the service starts.
pub struct Limits {
    pub ttls: TtlBounds,
    pub max_body_bytes: usize,
    /// `/health` answers 503 past this.
    pub health_timeout: Duration,
    /// A change stream writes a keep-alive comment this often (a third of the idle timeout, at most 15
    /// s), so an open stream is never closed as idle.
    pub keep_alive: Duration,
    /// One permit per change stream that may be open.
    pub streams: Arc<Semaphore>,
}

/// The state of the router: every handler and extractor gets a clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    pub events: Arc<Events>,
    pub verifier: Arc<TokenVerifier>,
    /// The key of the tokens of grants that carry a request id (derived from the secret).
    pub grants: Arc<GrantKey>,
    pub limits: Arc<Limits>,
    /// Becomes true when the service shuts down: change streams end.
    pub shutdown: watch::Receiver<bool>,
}
