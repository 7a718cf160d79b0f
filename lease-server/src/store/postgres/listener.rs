//! The listening connection: one per instance, outside the pool, `LISTEN`ing on [`CHANNEL`]; what it
//! hears (every instance's committed changes, in commit order) is published to this instance's streams.
//! While it is down, `/health` fails and every stream ends when it is back (changes were missed).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, NoTls};

use super::pool::with_causes;
use crate::change::Change;
use crate::events::Events;
use crate::store::CHANNEL;

/// Keep one connection listening on [`CHANNEL`] and publish what it hears, reconnecting when it drops;
/// `ready` is told once the first `LISTEN` is in place (or failed).
pub(super) async fn listen(
    config: tokio_postgres::Config,
    connect_timeout: Duration,
    events: Arc<Events>,
    listening: Arc<AtomicBool>,
    mut stop: watch::Receiver<bool>,
    ready: mpsc::Sender<()>,
) {
    loop {
        let connected = match tokio::time::timeout(connect_timeout, config.connect(NoTls)).await {
            Ok(Ok(pair)) => Ok(pair),
            Ok(Err(error)) => Err(with_causes(&error)),
            Err(_) => Err(format!(
                "no answer within {} ms",
                connect_timeout.as_millis()
            )),
        };
        match connected {
            Ok((client, mut connection)) => {
                let (heard_tx, mut heard) = mpsc::unbounded_channel::<String>();
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                    while let Some(message) = messages.next().await {
                        match message {
                            Ok(AsyncMessage::Notification(n)) => {
                                if heard_tx.send(n.payload().to_owned()).is_err() {
                                    return;
                                }
                            }
                            Ok(_) => {}
                            Err(error) => {
                                tracing::warn!(%error, "the listening connection failed");
                                return;
                            }
                        }
                    }
                });
                let listen = format!("LISTEN {CHANNEL}");
                match tokio::time::timeout(connect_timeout, client.batch_execute(&listen)).await {
                    Ok(Ok(())) => {
                        listening.store(true, Ordering::Release);
                        // Changes made while this instance was not listening were never heard: every
                        // stream ends, and its page reconnects to the current state.
                        events.bus.end_all();
                        let _ = ready.try_send(());
                        tracing::info!("listening for lease changes");
                        loop {
                            tokio::select! {
                                payload = heard.recv() => match payload {
                                    Some(payload) => match serde_json::from_str::<Change>(&payload) {
                                        Ok(change) => events.publish(change),
                                        Err(error) => tracing::warn!(%error, "an unreadable change notification"),
                                    },
                                    None => break,
                                },
                                () = crate::shutdown::stopped(&mut stop) => {
                                    driver.abort();
                                    return;
                                }
                            }
                        }
                        listening.store(false, Ordering::Release);
                        events.bus.end_all();
                    }
                    Ok(Err(error)) => tracing::warn!(error = %with_causes(&error), "LISTEN failed"),
                    Err(_) => tracing::warn!("LISTEN got no answer"),
                }
                driver.abort();
            }
            Err(error) => tracing::warn!(%error, "cannot connect the listening connection"),
        }
        let _ = ready.try_send(());
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            () = crate::shutdown::stopped(&mut stop) => return,
        }
    }
}
