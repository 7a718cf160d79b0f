//! Who holds a lease: the user named by the token of the request that took it, shown to other users.

use serde::{Deserialize, Serialize};

/// The user holding a lease, from the token of the request that took it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    pub sub: String,
    pub name: String,
}
