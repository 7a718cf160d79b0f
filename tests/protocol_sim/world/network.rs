//! The simulated network: the channel (the broadcast transport, or the log's carrier), its sending
//! and delivery delays and the [`Delivery`] model each receiver gets the messages in, what the edge
//! drops as undecodable, the deputies' posts, and a context's transmit onto the transport.

use std::rc::Rc;

use weblocks::protocol::wire::{self, Body, Decoded, Message, Value};
use weblocks::protocol::{Transport, Wake};

use super::{Delivery, Ev, Status, World};

/// What a context receives on the channel.
#[derive(Clone, Debug)]
pub(super) enum Payload {
    /// Broadcast transport: a message, with its place in the log once it has one (a post that
    /// reached the sender's own process before the dispatcher has none yet).
    Message {
        msg: Rc<Vec<Value>>,
        idx: Option<usize>,
    },
    /// Log transport: the carrier frame its writer's log writer posted of an entry of the log of
    /// generation `log` (see `World::log_generation`).
    Entry { log: usize, frame: Rc<Vec<Value>> },
    /// Log transport: a message for the receiver to append for its sender (a farewell).
    Relay(Rc<Vec<Value>>),
}

impl World {
    /// The transport is the log in IndexedDB.
    pub fn over_log(&self) -> bool {
        matches!(self.env.config.transport, Transport::Log(_))
    }

    /// The log has a carrier (a BroadcastChannel).
    pub(super) fn carried(&self) -> bool {
        self.env.config.transport == Transport::Log(Wake::Carrier)
    }

    /// Context `i` is a document whose storage events wake it (over the log without a carrier).
    pub(super) fn poked(&self, i: usize) -> bool {
        self.env.storage && self.contexts[i].wake == Wake::Pokes
    }

    /// Context `i` posts `payload` on the channel (the transport, or the log's carrier): the contexts of
    /// its process get it at once under `Delivery::OwnProcessFirst`; the dispatcher gets it after a
    /// sending delay, in the sender's order.
    pub(super) fn channel_post(&mut self, i: usize, payload: Payload) {
        if self.env.delivery == Delivery::OwnProcessFirst {
            let process = self.contexts[i].process;
            for j in 0..self.contexts.len() {
                if self.contexts[j].process == process && self.receives(i, j, &payload) {
                    let hop = self.rng.range(0, 1);
                    self.deliver_at(j, payload.clone(), hop, i);
                }
            }
        }
        let delay = self.rng.range(0, self.env.send_max);
        let n = &mut self.contexts[i];
        let at = (self.now + delay).max(n.last_append);
        n.last_append = at;
        let life = n.life;
        self.schedule(at, i, Ev::Dispatch { payload, life });
    }

    /// Whether context `j` receives what `i` posts on the channel: `j` is connected, and it is not the
    /// sender's own object (a context listens to its own messages only on the broadcast transport,
    /// through its second object).
    pub(super) fn receives(&self, i: usize, j: usize, payload: &Payload) -> bool {
        self.contexts[j].connected
            && matches!(
                self.contexts[j].status,
                Status::Running | Status::Stalled | Status::Frozen | Status::Cached
            )
            && (i != j || matches!(payload, Payload::Message { .. }))
    }

    /// The channel's dispatcher handles a post of context `i`: a message of the broadcast transport
    /// joins the sequence; every receiver not served already gets it as the delivery model says.
    pub(super) fn channel_dispatch(&mut self, i: usize, payload: Payload, life: u32) {
        if std::mem::take(&mut self.contexts[i].loses_next_post) {
            return;
        }
        if life != self.contexts[i].life && self.rng.chance(0.5) {
            return; // the sender crashed before this message left it
        }
        let payload = match payload {
            Payload::Message { msg, .. } => {
                let idx = self.log.len();
                self.log.push(msg.clone());
                self.observe(idx, &msg);
                Payload::Message {
                    msg,
                    idx: Some(idx),
                }
            }
            other => other,
        };
        let process = self.contexts[i].process;
        for j in 0..self.contexts.len() {
            let served = self.env.delivery == Delivery::OwnProcessFirst
                && self.contexts[j].process == process;
            if !served && self.receives(i, j, &payload) {
                let delay = self.rng.range(0, self.env.delivery_max);
                self.deliver_at(j, payload.clone(), delay, i);
            }
        }
    }

    /// Schedules the delivery of `payload` from `from` to context `j`, `delay` from now, in the order
    /// the delivery model keeps: all of `j`'s deliveries in order, or only those of each sender.
    pub(super) fn deliver_at(&mut self, j: usize, payload: Payload, delay: u64, from: usize) {
        let now = self.now;
        let at = match self.env.delivery {
            Delivery::TotalOrder | Delivery::OwnProcessFirst => {
                let n = &mut self.contexts[j];
                let at = (now + delay).max(n.last_delivery);
                n.last_delivery = at;
                at
            }
            Delivery::SenderFifo => {
                let spread = self.rng.range(0, 4 * self.env.delivery_max);
                let last = self.contexts[j].last_from.entry(from).or_insert(0);
                let at = (now + delay + spread).max(*last);
                *last = at;
                at
            }
        };
        let epoch = self.contexts[j].epoch;
        self.schedule(at, j, Ev::Deliver { payload, epoch });
    }

    /// Whether context `i`'s edge hands a log entry's key to the order (see
    /// `World::edge_drops_undecodable`).
    pub(super) fn edge_hands_on(&mut self, i: usize, data: &[Value]) -> bool {
        let drops = self.edge_drops_undecodable && !edge_decodes(data);
        if drops {
            self.bump("entries dropped by an edge");
            self.meets_loss(i, "an entry its edge dropped");
        }
        !drops
    }

    /// Context `i` receives message `msg` of the broadcast transport, whose place in the log is `idx`
    /// (`None`: a post of its own process that reached it before the dispatcher ordered it).
    pub(super) fn deliver_message(&mut self, i: usize, msg: &Rc<Vec<Value>>, idx: Option<usize>) {
        let now = self.now;
        if self.trace.is_some() && std::env::var_os("WEBLOCKS_SIM_VERBOSE").is_some() {
            let what = self.describe(i, msg);
            self.note(|| format!("ctx{i} <- [{idx:?}] {what}"));
        }
        self.note_own_echo(i, msg);
        self.bump("deliveries");
        self.contexts[i].participant.handle_message(now, msg);
        self.effects(i);
        if let Some(idx) = idx {
            self.check_expected(i, idx);
        }
    }

    /// A message as context `i` decodes it, for traces.
    pub(super) fn describe(&self, i: usize, msg: &[Value]) -> String {
        let what = match wire::decode_versioned(msg, self.contexts[i].participant.version()) {
            Some(Decoded::Ours(m)) => {
                format!("{}/{} {:?}", m.sender.client, m.sender.incarnation, m.body)
            }
            other => format!("{other:?}"),
        };
        what.chars().take(160).collect()
    }

    /// If `msg` is one of context `i`'s own messages, it has now applied it.
    pub(super) fn note_own_echo(&mut self, i: usize, msg: &[Value]) {
        let msg = entry_data(msg);
        let version = self.contexts[i].participant.version();
        let parts = wire::split_batch(msg, version).unwrap_or_else(|| vec![msg]);
        for part in parts {
            if let Some(Decoded::Ours(m)) = wire::decode_versioned(part, version)
                && *m.sender.client == *self.contexts[i].participant.client_id()
                && m.seq != 0
            {
                self.contexts[i].applied_seq = m.seq;
            }
        }
    }

    /// Context `i` sends `messages` on the transport, as one channel message or log entry: messages of
    /// its own, and others' it appends for them (a relayed farewell, over the log).
    pub(super) fn transmit(&mut self, i: usize, messages: &[Message], msg: Vec<Value>) {
        self.transmitting(i, messages);
        self.channel_post(
            i,
            Payload::Message {
                msg: Rc::new(msg),
                idx: None,
            },
        );
    }

    /// What the world records of the messages context `i` sends (on the channel, or appended by its
    /// log writer).
    pub(super) fn transmitting(&mut self, i: usize, messages: &[Message]) {
        for m in messages {
            let own = *m.sender.client == *self.contexts[i].participant.client_id();
            if own {
                self.contexts[i].posted_seq = self.contexts[i].posted_seq.max(m.seq);
            } else {
                self.bump("relayed");
            }
            if let Body::Request { id, .. } = &m.body
                && own
                && let Some(r) = self.contexts[i].requests.get_mut(id)
            {
                r.posted_as = Some(m.sender.incarnation);
            }
            self.note(|| match &m.body {
                Body::State(st) => format!(
                    "ctx{i} post State as of {:?}/{} ({} members, {} held, {} pending) #{}",
                    st.as_of.sender,
                    st.as_of.seq,
                    st.members.len(),
                    st.held.len(),
                    st.pending.len(),
                    m.seq
                ),
                body if own => format!("ctx{i} post {body:?} #{}", m.seq),
                body => format!("ctx{i} relays {body:?} of {}", m.sender.client),
            });
        }
        self.bump("transmits");
    }
}

/// Whether the edge decodes `data` (src/wasm/channel.rs, `decode_values`): at most `wire::MAX_SLOTS`
/// slots. The same data gives the same answer in every context.
pub(super) fn edge_decodes(data: &[Value]) -> bool {
    data.len() <= wire::MAX_SLOTS
}

/// What the edge hands the participant for a log entry: its data, or nothing where it does not decode
/// (its key still takes its place in the order: src/wasm/log_storage.rs, `read_event`).
pub(super) fn entry_data(data: &[Value]) -> &[Value] {
    if edge_decodes(data) { data } else { &[] }
}
