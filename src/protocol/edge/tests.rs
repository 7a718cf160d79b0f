//! The edge loop's policies and its re-entrancy, over a host that records what it is asked to do and
//! answers a lone context as a browser would (its liveness database opens, its messages
//! come back, the census finds no other context).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::*;
use crate::protocol::Config;
use crate::scheduler::LockOptions;

type Answer = Box<dyn FnOnce(&mut Participant, u64)>;

struct TestHost {
    participant: RefCell<Participant>,
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
        TestHost {
            participant: RefCell::new(Participant::new("tab", Config::default())),
            state: EdgeState::default(),
            calls: RefCell::new(Vec::new()),
            answers: RefCell::new(VecDeque::new()),
            microtasks: Cell::new(0),
            queues,
            release_at_once: false,
        }
    }

    fn call(&self, call: String) {
        self.calls.borrow_mut().push(call);
    }

    fn answer(&self, answer: impl FnOnce(&mut Participant, u64) + 'static) {
        self.answers.borrow_mut().push_back(Box::new(answer));
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
        answer.map(|answer| input(&mut &*self, answer)).is_some()
    }

    /// Runs the queued microtasks and answers until nothing is left.
    fn settle(&self) {
        while self.step() {}
    }

    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut self.calls.borrow_mut())
    }
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
    fn state(&self) -> &EdgeState {
        &self.state
    }
    fn now(&self) -> u64 {
        1
    }
    fn transmit(&mut self, messages: &[Message], data: Vec<Value>) {
        let bodies: Vec<String> = messages.iter().map(|m| format!("{:?}", m.body)).collect();
        self.call(format!("transmit {}", bodies.join(" + ")));
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
    fn read_log(&mut self, _after: u64) {}
    fn trim_log(&mut self, _upto: u64) {}
    fn open_alive(&mut self) {
        self.answer(|p, now| p.handle_alive(now, 7));
    }
    fn close_alive(&mut self) {}
    fn census(&mut self) {
        self.answer(|p, now| p.handle_census(now, Vec::new()));
    }
    fn watch(&mut self, _client: Rc<str>, _watch: u64) {}
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
    // Its liveness database opens: its Join is queued.
    assert!(host.step());
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
    assert_eq!(posts(&host.calls()), ["Join { watch: 7 }"]);
    assert_eq!(host.microtasks.get(), 0, "no hop after the flush");
    host.settle();
    assert!(host.calls().contains(&"granted 1".to_owned()));
}

#[test]
fn where_no_microtask_can_be_queued_the_messages_go_at_once() {
    let host = TestHost::new(false);
    host.request(1);
    assert!(host.step());
    assert_eq!(posts(&host.calls()), ["Join { watch: 7 }"]);
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
