//! The service's stop signal: a watch channel that becomes `true` once, when a shutdown begins.

use tokio::sync::watch;

/// Wait until the shutdown begins (at once if it has). The channel's read guard is released before this
/// returns, so the future stays `Send`.
pub async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
