//! One change stream: the topic's state when it opened, then its changes as they are published, each
//! key's moving forward only ([`crate::change::Order`]). It ends when the service shuts down, when its
//! watcher falls behind, or when this instance may have missed changes; the page then reconnects and
//! starts again from the current state.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;
use futures_util::Stream;
use tokio::sync::{OwnedSemaphorePermit, watch};

use crate::bus::Subscription;
use crate::change::{Change, Order};

struct Watch {
    first: VecDeque<Change>,
    subscription: Subscription,
    /// Per (type, id), the last state sent.
    sent: HashMap<(String, String), Order>,
    shutdown: watch::Receiver<bool>,
    started: bool,
    /// This stream's place among those the instance may have open, given back when it ends.
    _slot: OwnedSemaphorePermit,
}

impl Watch {
    /// Whether `change` is news to this watcher (and if so, remember it as sent).
    fn is_news(&mut self, change: &Change) -> bool {
        let order = change.order();
        let key = (change.lease_type.clone(), change.id.clone());
        match self.sent.get(&key) {
            Some(sent) if !order.follows(sent) => false,
            _ => {
                self.sent.insert(key, order);
                true
            }
        }
    }

    async fn next_change(&mut self) -> Option<Arc<Change>> {
        if let Some(change) = self.first.pop_front() {
            return Some(Arc::new(change));
        }
        tokio::select! {
            // Lagging behind or a closed channel ends the stream (see the module comment).
            received = self.subscription.receiver.recv() => received.ok(),
            () = crate::shutdown::stopped(&mut self.shutdown) => None,
        }
    }
}

pub fn change_stream(
    subscription: Subscription,
    first: Vec<Change>,
    shutdown: watch::Receiver<bool>,
    slot: OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let watch = Watch {
        first: first.into(),
        subscription,
        sent: HashMap::new(),
        shutdown,
        started: false,
        _slot: slot,
    };
    futures_util::stream::unfold(watch, |mut watch| async move {
        loop {
            let change = watch.next_change().await?;
            if !watch.is_news(&change) {
                continue;
            }
            let mut event = Event::default().event("lease").data(change.to_json());
            if !watch.started {
                // A page that loses the stream reconnects after a second.
                event = event.retry(Duration::from_secs(1));
                watch.started = true;
            }
            return Some((Ok(event), watch));
        }
    })
}
