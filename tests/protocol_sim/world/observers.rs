//! The observers: one replica per protocol version that applies the whole sequence at once, the
//! reference the checks (checks.rs) hold each context's reported effects to.

use weblocks::protocol::replica::Outcome;
use weblocks::protocol::wire::{self, Body, Decoded, MemberKey, Message, Value};

use super::{Expect, World, entry_data};

impl World {
    /// Feeds a newly appended message to the observers (replicas that see the whole log at once) and
    /// records what they decided for each context's requests.
    pub(super) fn observe(&mut self, idx: usize, msg: &[Value]) {
        self.dirty = true;
        let msg = entry_data(msg);
        for o in 0..self.observers.len() {
            let version = self.observers[o].version;
            let mut outcomes = Vec::new();
            let parts = wire::split_batch(msg, version).unwrap_or_else(|| vec![msg]);
            for part in parts {
                match wire::decode_versioned(part, version) {
                    Some(Decoded::Ours(m)) => self.observers[o].replica.apply(&m, &mut outcomes),
                    Some(Decoded::Foreign {
                        version: v,
                        kind,
                        id,
                    }) => self.observers[o]
                        .replica
                        .apply_foreign(v, kind, &id, &mut outcomes),
                    None => {}
                }
            }
            for outcome in outcomes {
                let (member, local_id, expect) = expectation(outcome);
                // Only a context connected now will apply this message.
                if let Some(j) = self.context_of(&member)
                    && self.contexts[j].participant.version() == version
                    && self.contexts[j].status.alive()
                {
                    self.contexts[j].expected.push_back((
                        idx,
                        member.incarnation,
                        local_id,
                        expect,
                    ));
                }
            }
        }
    }

    /// Feeds a message context `i` decided alone, without posting it (the lone member), to the observer
    /// of its version, at the place where the context applied it: after every message appended so far
    /// (all of which the lone member has seen but those of contexts that are not active members of its
    /// history). Returns what the observer decided for the context's requests.
    pub(super) fn observe_decided(&mut self, i: usize, m: &Message) -> Vec<(u32, u64, Expect)> {
        self.dirty = true;
        self.bump("decided alone");
        self.note(|| format!("ctx{i} decides alone {:?}", m.body));
        if let Body::Request { id, .. } = &m.body
            && let Some(r) = self.contexts[i].requests.get_mut(id)
        {
            r.posted_as = Some(m.sender.incarnation);
        }
        let version = self.contexts[i].participant.version();
        let o = self
            .observers
            .iter()
            .position(|o| o.version == version)
            .expect("observer");
        let mut outcomes = Vec::new();
        self.observers[o].replica.apply_ahead(m, &mut outcomes);
        let mut mine = Vec::new();
        for outcome in outcomes {
            let (member, local_id, expect) = expectation(outcome);
            if member.client != m.sender.client {
                self.violation(format!(
                    "ctx{i} decided {:?} alone, and the observer decided {expect:?} for {}/{} #{local_id}",
                    m.body, member.client, member.incarnation
                ));
            }
            mine.push((member.incarnation, local_id, expect));
        }
        mine
    }
}

/// What an observer's outcome expects of the context it names: the member, its request, and the decision.
fn expectation(outcome: Outcome) -> (MemberKey, u64, Expect) {
    match outcome {
        Outcome::Granted { member, local_id } => (member, local_id, Expect::Granted),
        Outcome::NotAvailable { member, local_id } => (member, local_id, Expect::NotAvailable),
        Outcome::Revoked {
            member, local_id, ..
        } => (member, local_id, Expect::Revoked),
    }
}
