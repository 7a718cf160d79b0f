//! The edge loop's policies and its re-entrancy, over a host that records what it is asked to do and
//! answers a lone context as a browser would (its databases open, its register's transactions
//! complete and list no other context, its messages come back).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::*;
use crate::protocol::Config;
use crate::scheduler::LockOptions;

/// A participant call the host will make.
type Call = Box<dyn FnOnce(&mut Participant, u64)>;

/// One input the host will feed the loop: a participant call, or a storage answer.
enum Answer {
    Call(Call),
    Storage(StorageEvent),
}

struct TestHost {
    participant: RefCell<Participant>,
    evidence: RefCell<Evidence>,
    state: EdgeState,
    /// What the loop asked of the host, in order.
    calls: RefCell<Vec<String>>,
    /// The answers its effects get, in the order they come (each one input of its own).
    answers: RefCell<VecDeque<Answer>>,
    microtasks: Cell<u32>,
    /// The host can queue microtasks.
    queues: bool,
    /// Its sink releases each lock as soon as it is granted, from inside the sink call.
    release_at_once: bool,
}

impl TestHost {
    fn new(queues: bool) -> TestHost {
        let host = TestHost {
            participant: RefCell::new(Participant::new("tab", Config::default())),
            evidence: RefCell::new(Evidence::new("tab", 7, None)),
            state: EdgeState::default(),
            calls: RefCell::new(Vec::new()),
            answers: RefCell::new(VecDeque::new()),
            microtasks: Cell::new(0),
            queues,
            release_at_once: false,
        };
        // What the edge started before the machine existed: the register opens and lists nobody.
        for op in Evidence::prepared("tab", None) {
            host.answer_storage(&op);
        }
        host
    }

    /// Queues what a browser answers to `op` for a lone context.
    fn answer_storage(&self, op: &StorageOp) {
        let events = match *op {
            StorageOp::Open {
                handle, version: 1, ..
            } => vec![StorageEvent::Opened { handle }],
            // Another context's database: it has no connection left.
            StorageOp::Open { handle, .. } => vec![
                StorageEvent::Upgrading { handle },
                StorageEvent::Opened { handle },
            ],
            StorageOp::Write { tx, .. } => vec![StorageEvent::Written { tx, ok: true }],
            StorageOp::Read { tx, .. } => vec![StorageEvent::Listed {
                tx,
                entries: Some(Vec::new()),
            }],
            StorageOp::ReleaseRecord => vec![StorageEvent::RecordAgreed],
            StorageOp::List => vec![StorageEvent::Databases(Some(Vec::new()))],
            StorageOp::Close { .. } | StorageOp::Delete { .. } => Vec::new(),
        };
        for event in events {
            self.answers.borrow_mut().push_back(Answer::Storage(event));
        }
    }

    fn call(&self, call: String) {
        self.calls.borrow_mut().push(call);
    }

    fn answer(&self, answer: impl FnOnce(&mut Participant, u64) + 'static) {
        self.answers
            .borrow_mut()
            .push_back(Answer::Call(Box::new(answer)));
    }

    fn request(&self, id: u64) {
        input(&mut &*self, |p, now| {
            p.handle_request(now, id, "x", LockOptions::default())
        });
    }

    /// Runs a queued microtask, or else the next answer; false when there is neither.
    fn step(&self) -> bool {
        if self.microtasks.get() > 0 {
            self.microtasks.set(self.microtasks.get() - 1);
            microtask(&mut &*self);
            return true;
        }
        let answer = self.answers.borrow_mut().pop_front();
        match answer {
            Some(Answer::Call(call)) => input(&mut &*self, call),
            Some(Answer::Storage(event)) => storage(&mut &*self, event),
            None => return false,
        }
        true
    }

    /// Runs answers until the participant has queued its Join, the first message it sends (its flush
    /// then waits for a hop).
    fn until_join_is_queued(&self) {
        while self.microtasks.get() == 0 {
            assert!(self.step(), "a lone context queues its Join");
        }
    }

    /// Runs the queued microtasks and answers until nothing is left.
    fn settle(&self) {
        while self.step() {}
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut self.calls.borrow_mut())
    }
}

/// The calls posted exactly one message, a Join announcing a liveness database.
fn assert_joins(calls: &[String]) {
    let posts = posts(calls);
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert!(
        posts[0].starts_with("Join { watch: ") && posts[0] != "Join { watch: 0 }",
        "{posts:?}"
    );
}

fn posts(calls: &[String]) -> Vec<&str> {
    calls
        .iter()
        .filter_map(|c| c.strip_prefix("transmit "))
        .collect()
}

impl Host for &TestHost {
    fn participant<R>(&mut self, f: impl FnOnce(&mut Participant) -> R) -> R {
        f(&mut self.participant.borrow_mut())
    }
    fn evidence<R>(&mut self, f: impl FnOnce(&mut Evidence) -> R) -> R {
        f(&mut self.evidence.borrow_mut())
    }
    fn state(&self) -> &EdgeState {
        &self.state
    }
    fn now(&self) -> u64 {
        1
    }
    fn log<R>(&mut self, _f: impl FnOnce(&mut LogWriter) -> R) -> Option<R> {
        None
    }
    fn transmitting(&mut self, messages: &[Message]) {
        let bodies: Vec<String> = messages.iter().map(|m| format!("{:?}", m.body)).collect();
        self.call(format!("transmit {}", bodies.join(" + ")));
    }
    fn transmit(&mut self, data: Vec<Value>) {
        // The channel gives a context its own messages too.
        self.answer(move |p, now| p.handle_message(now, &data));
    }
    fn open_channels(&mut self) {
        self.call("open channels".into());
    }
    fn close_channels(&mut self) {
        self.call("close channels".into());
    }
    fn arm_farewell(&mut self, _farewell: Option<Message>) {}
    fn log_op(&mut self, _op: LogOp) {}
    fn storage(&mut self, op: StorageOp) {
        self.answer_storage(&op);
    }
    fn log_unreachable(&mut self) {
        self.call("log unreachable".into());
    }
    fn unreachable(&mut self) {
        self.call("unreachable".into());
    }
    fn register_waits(&mut self) {
        self.call("register waits".into());
    }
    fn deletion_waits(&mut self, names: &[String]) {
        self.call(format!("deletion waits for {names:?}"));
    }
    fn arm_timer(&mut self, at: u64) -> bool {
        self.call(format!("arm {at}"));
        true
    }
    fn cancel_timer(&mut self) {
        self.call("cancel".into());
    }
    fn queue_microtask(&mut self) -> bool {
        if self.queues {
            self.microtasks.set(self.microtasks.get() + 1);
        }
        self.queues
    }
    fn granted(&mut self, id: u64) {
        self.call(format!("granted {id}"));
        if self.release_at_once {
            // As a browser's sink may: the Engine is called again while the loop runs.
            input(self, |p, now| p.handle_release(now, id));
        }
    }
    fn not_available(&mut self, _id: u64) {}
    fn stolen(&mut self, _id: u64, _reason: LossReason) {}
    fn snapshot(&mut self, _query: u64, _snapshot: Snapshot) {}
    fn incompatible(&mut self, version: u32) {
        self.call(format!("incompatible {version}"));
    }
}

#[test]
fn a_flush_waits_four_microtask_hops() {
    let host = TestHost::new(true);
    host.request(1);
    // Its liveness database opens and is in the register: its Join is queued.
    host.until_join_is_queued();
    assert!(
        posts(&host.calls()).is_empty(),
        "nothing goes before the hops"
    );
    for _ in 1..FLUSH_HOPS {
        assert_eq!(host.microtasks.get(), 1);
        assert!(host.step());
        assert!(
            posts(&host.calls()).is_empty(),
            "nothing goes before the last hop"
        );
    }
    assert_eq!(host.microtasks.get(), 1);
    assert!(host.step());
    assert_joins(&host.calls());
    assert_eq!(host.microtasks.get(), 0, "no hop after the flush");
    host.settle();
    assert!(host.calls().contains(&"granted 1".to_owned()));
}

#[test]
fn where_no_microtask_can_be_queued_the_messages_go_at_once() {
    let host = TestHost::new(false);
    host.request(1);
    while posts(&host.calls.borrow()).is_empty() {
        assert!(host.step(), "a lone context sends its Join");
    }
    assert_joins(&host.calls());
    host.settle();
    assert!(host.calls().contains(&"granted 1".to_owned()));
}

#[test]
fn an_armed_timer_that_fires_no_later_is_kept_and_a_later_one_is_replaced() {
    let host = TestHost::new(true);
    host.request(1);
    // Until its Join has come back: then it asks for the census, and would ask again after
    // `join_patience`.
    while host.participant.borrow().poll_timeout().is_none() {
        assert!(host.step(), "no deadline while joining");
    }
    let deadline = host
        .participant
        .borrow()
        .poll_timeout()
        .expect("a deadline");
    assert_eq!(host.state.timer(), Some(deadline), "the loop armed it");
    assert!(host.calls().ends_with(&[format!("arm {deadline}")]));
    // An earlier timer is armed: it is kept.
    host.state.timer.set(Some(deadline - 1));
    input(&mut &host, |p, _| p.handle_flush());
    assert_eq!(host.state.timer(), Some(deadline - 1));
    assert_eq!(host.calls(), Vec::<String>::new());
    // A later timer is cancelled, and the deadline armed.
    host.state.timer.set(Some(deadline + 1));
    input(&mut &host, |p, _| p.handle_flush());
    assert_eq!(
        host.calls(),
        ["cancel".to_owned(), format!("arm {deadline}")]
    );
    // No deadline any more: the timer is cancelled.
    input(&mut &host, |p, now| p.handle_close(now));
    assert!(host.calls().ends_with(&["cancel".to_owned()]));
    assert_eq!(host.state.timer(), None);
}

#[test]
fn a_sink_that_calls_the_participant_again_runs_the_loop_inside_the_loop() {
    let mut host = TestHost::new(true);
    host.release_at_once = true;
    host.request(1);
    host.settle();
    host.request(2);
    host.settle();
    let calls = host.calls();
    assert!(calls.contains(&"granted 1".to_owned()) && calls.contains(&"granted 2".to_owned()));
    assert!(
        host.participant.borrow().is_quiet(),
        "both released: {calls:?}"
    );
}
