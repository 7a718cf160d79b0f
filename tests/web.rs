//! Browser tests of the ponyfill, run by `wasm-bindgen-test-runner` in Chromium and Firefox (scripts/test.sh).
//!
//! Each test runs one case of `tests/web_cases.js` (same name) against a fresh API object from
//! `createLockApi` in `js/lock_api.js`, whose engine is this crate's `weblocks::wasm::Engine`. The
//! browser's native `navigator.locks` is never used. A case fails by rejecting with a message saying what
//! differed from the spec; the test then panics with that message.
#![cfg(target_arch = "wasm32")]

use js_sys::{Function, Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;
use weblocks::wasm::Engine;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen(module = "/js/lock_api.js")]
extern "C" {
    #[wasm_bindgen(thread_local_v2, js_name = createLockApi)]
    static CREATE_LOCK_API: Function;
}

// The evidence of life and death every coordinating engine needs. js/liveness.js imports
// js/global_object.js; importing that module here too puts it beside the snippet, where the import finds
// it.
#[wasm_bindgen(module = "/js/liveness.js")]
extern "C" {
    type LivenessStorage;
    #[wasm_bindgen(js_name = makeLivenessStorage)]
    fn make_liveness_storage(global: &JsValue, scope: &str) -> LivenessStorage;
    /// Opens the register as the engine expects (without a database of this context's opened ahead).
    #[wasm_bindgen(method)]
    fn prepare(this: &LivenessStorage, client_id: &str, ahead: bool);
}

#[wasm_bindgen(module = "/js/global_object.js")]
extern "C" {
    #[wasm_bindgen(thread_local_v2, js_name = theGlobal)]
    static THE_GLOBAL: JsValue;
}

#[wasm_bindgen(module = "/js/page_cache.js")]
extern "C" {
    /// The farewell's `pagehide` filter the glue gives an engine that stays in the back/forward cache.
    #[wasm_bindgen(thread_local_v2, js_name = unlessPersisted)]
    static UNLESS_PERSISTED: Function;
}

#[wasm_bindgen(module = "/js/transport_choice.js")]
extern "C" {
    /// The JavaScript engine's family, as the glue gives it to the engine.
    #[wasm_bindgen(js_name = engineFamily)]
    fn engine_family() -> JsValue;
}

/// The `env` every case receives: `{ createLockApi, makeEngine, makeRefusingEngine }`, where
/// `makeEngine(clientId, sink)` builds the real wasm engine, and `makeRefusingEngine` one that refuses.
fn env() -> JsValue {
    let make_engine =
        Closure::<dyn Fn(String, Function) -> JsValue>::new(|client_id: String, sink: Function| {
            // Each api gets its own channel scope (and liveness databases of that scope): the cases stay
            // isolated from one another while every call still goes through the origin protocol
            // (BroadcastChannel, liveness database, join, echo, census) as in production.
            let global = THE_GLOBAL.with(JsValue::clone);
            let evidence = make_liveness_storage(&global, &client_id);
            evidence.prepare(&client_id, false);
            let evidence = JsValue::from(evidence);
            let scope = Some(client_id.clone());
            JsValue::from(Engine::new(
                client_id,
                sink,
                scope,
                None,
                global,
                None,
                None,
                evidence,
                engine_family(),
                Some(UNLESS_PERSISTED.with(Function::clone)),
            ))
        });
    // An engine that refuses from the start, as where its origin's transport cannot be reached.
    let make_refusing_engine =
        Closure::<dyn Fn(String, Function) -> JsValue>::new(|client_id: String, sink: Function| {
            JsValue::from(Engine::new(
                client_id,
                sink,
                None,
                None,
                js_sys::global().into(),
                None,
                Some(2),
                JsValue::UNDEFINED,
                JsValue::UNDEFINED,
                None,
            ))
        });
    let env = Object::new();
    let create = CREATE_LOCK_API.with(|f| JsValue::from(f.clone()));
    Reflect::set(&env, &"createLockApi".into(), &create).unwrap();
    Reflect::set(&env, &"makeEngine".into(), &make_engine.into_js_value()).unwrap();
    let refusing = make_refusing_engine.into_js_value();
    Reflect::set(&env, &"makeRefusingEngine".into(), &refusing).unwrap();
    env.into()
}

/// How long one case may take; they finish in milliseconds, so this only turns a hang into a failure.
const CASE_TIMEOUT_MS: u32 = 3_000;

async fn run(case: &str, case_fn: JsValue) {
    let promise = case::run_case(&case_fn, &env(), CASE_TIMEOUT_MS);
    if let Err(error) = JsFuture::from(promise).await {
        let message = error
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .unwrap_or_else(|| format!("{error:?}"));
        panic!("{case}: {message}");
    }
}

/// Declares each case as an import from `tests/web_cases.js` and as a test of the same name.
macro_rules! cases {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        // The statics are the case functions themselves, named as in web_cases.js.
        #[allow(non_upper_case_globals)]
        mod case {
            use super::*;
            #[wasm_bindgen(module = "/tests/web_cases.js")]
            extern "C" {
                #[wasm_bindgen(js_name = runCase)]
                pub fn run_case(case_fn: &JsValue, env: &JsValue, ms: u32) -> Promise;
                $(
                    #[wasm_bindgen(thread_local_v2)]
                    pub static $name: JsValue;
                )*
            }
        }
        $(
            $(#[doc = $doc])*
            #[wasm_bindgen_test]
            async fn $name() {
                run(stringify!($name), case::$name.with(JsValue::clone)).await;
            }
        )*
    };
}

cases! {
    // request(): grant, callback result, promise settlement (3.2.1, 4.1, 4.4, 2.4)
    /// 3.2.1 `request(name, callback)`: granted; resolves with the callback's value; default mode.
    request_with_name_and_callback_resolves_with_callback_value,
    /// 3.2.1 `request(name, options, callback)`: granted with the options' mode; resolves with the value.
    request_with_name_options_and_callback_resolves_with_callback_value,
    /// 4.4 step 14.3 / 2.4: an async callback's value resolves the promise once its promise settles.
    callback_async_value_resolves_the_request_promise,
    /// 4.4 step 14.2: a synchronous throw rejects the request's promise with that error.
    callback_sync_throw_rejects_the_request_promise,
    /// 2.4: an async callback's rejection rejects the request's promise with that reason.
    callback_async_rejection_rejects_the_request_promise,
    /// WebIDL `Promise<any>` callback return: a thenable result is adopted.
    callback_thenable_result_is_adopted,
    /// 2.4: the lock is held until the callback's promise fulfils; then the next request is granted.
    lock_is_held_until_callback_promise_fulfils,
    /// 2.4: ... and likewise when it rejects.
    lock_is_held_until_callback_promise_rejects,
    /// 2.4: a synchronous throw releases the lock; the next request is granted.
    lock_is_released_after_sync_throw,
    /// 2.4: release the lock, then settle the released promise: the lock is free when it settles.
    request_promise_settles_after_the_lock_is_released,
    /// 4.4 step 14: the callback runs in a later task, after microtasks queued behind request().
    callback_is_invoked_in_a_later_task,
    /// 4.4 step 14: a task per callback: callbacks granted at once each run after the promise jobs of
    /// the one before (a throwing callback does not stall the rest).
    callbacks_granted_together_each_run_after_the_previous_ones_microtasks,
    /// WebIDL callback invocation: `this` is undefined; exactly one argument, a Lock.
    callback_this_is_undefined_and_gets_exactly_the_lock,
    /// 3.3: Lock `name` and `mode` getters (exclusive default, shared, explicit exclusive).
    lock_name_and_mode_getters,
    /// An engine that cannot reach its origin's transport rejects every request and query with an
    /// OperationError and grants nothing.
    a_refusing_engine_rejects_every_request_and_query_with_an_operation_error,
    // Modes and scheduling (2.3, 2.5 grantable, 4.4)
    /// 2.5 step 8: exclusive is not grantable while an exclusive of that name is held.
    exclusive_blocks_exclusive,
    /// 2.5 step 9: shared is not grantable while an exclusive is held.
    exclusive_blocks_shared,
    /// 2.3 / 2.5 step 9: shared locks of one name coexist.
    shared_locks_coexist,
    /// 2.5 step 8: exclusive waits until every shared holder released.
    exclusive_waits_for_every_shared_holder,
    /// 4.4 step 2 / 2.5 step 7: requests for one name are granted first in, first out.
    requests_for_one_name_are_granted_in_fifo_order,
    /// 2.5 step 7: a shared request does not overtake an exclusive queued before it.
    shared_request_does_not_overtake_a_queued_exclusive,
    /// 4.4 step 2: processing the queue grants every consecutive grantable request at its head.
    consecutive_shared_requests_are_granted_together,
    /// 2.5: queues are per name; other names do not wait.
    different_names_are_independent,
    // ifAvailable (4.1 step 3.5.1)
    /// 4.1 step 3.5: ifAvailable on a free name is granted a Lock.
    if_available_is_granted_when_free,
    /// 4.1 step 3.5.1: ifAvailable on a held name calls back with null; nothing is queued.
    if_available_calls_back_with_null_when_held,
    /// 4.1 step 3.5.1 with 2.5 step 7: null when the queue is not empty, even if compatible.
    if_available_calls_back_with_null_when_queue_not_empty,
    /// 2.5 step 9: ifAvailable shared is granted beside a shared holder.
    if_available_shared_is_granted_beside_shared,
    /// 4.1 step 3.5.1: the null callback runs in a later task.
    if_available_null_callback_runs_in_a_later_task,
    /// 4.1 step 3.5.1.2: a throwing null callback rejects the promise.
    if_available_null_callback_throw_rejects,
    // steal (4.1 step 3.4)
    /// 4.1 step 3.4.1: the holder's promise rejects with an AbortError DOMException; its callback goes on.
    steal_rejects_the_holder_with_abort_error_and_its_callback_keeps_running,
    /// 4.1 step 3.4.1: every held lock of that name (and only that name) is released.
    steal_releases_every_holder_of_the_name_only,
    /// 4.1 step 3.4.2: the thief goes to the head of the queue, ahead of earlier waiters.
    steal_is_granted_ahead_of_the_queue,
    /// 4.2 on a stolen lock: its callback settling later does not release the thief's lock.
    stolen_lock_finishing_later_does_not_release_the_thief,
    /// 4.1 step 3.4: steal on a free name is simply granted.
    steal_of_a_free_name_is_granted,
    // signal (3.2.1 step 9, 4.1 step 2, 4.3, 4.4 step 14.1)
    /// 4.3 signal to abort: rejects with signal.reason (AbortError); request leaves the queue.
    abort_before_grant_rejects_with_the_default_reason,
    /// 4.3 signal to abort: a custom reason (string, object) is the rejection reason.
    abort_before_grant_rejects_with_a_custom_reason,
    /// 4.3 step 7: aborting processes the queue, granting requests that were behind.
    abort_unblocks_requests_queued_behind,
    /// 3.2.1 step 9: an already aborted signal rejects with its reason; no callback, nothing queued.
    already_aborted_signal_rejects_with_its_reason,
    /// 4.4 step 14.1.2: after the callback started, the signal is ignored.
    abort_after_grant_is_ignored,
    /// 4.4 step 14.1.1: abort between grant and callback: rejects, no callback, lock released.
    abort_between_grant_and_callback_releases_the_lock,
    // NotSupportedError (3.2.1 steps 5-8)
    /// 3.2.1 step 5: a name starting with '-' (after ToString) rejects NotSupportedError.
    name_starting_with_hyphen_rejects_not_supported,
    /// 2.1: only a leading U+002D is reserved ('x-', 'a-b', ' -x', other dashes are fine).
    names_with_a_hyphen_elsewhere_are_allowed,
    /// 3.2.1 step 6: steal with ifAvailable.
    steal_with_if_available_rejects_not_supported,
    /// 3.2.1 step 7: steal with mode 'shared'.
    steal_with_shared_mode_rejects_not_supported,
    /// 3.2.1 step 8: signal with steal.
    signal_with_steal_rejects_not_supported,
    /// 3.2.1 step 8: signal with ifAvailable.
    signal_with_if_available_rejects_not_supported,
    /// 3.2.1: steps 5-8 come before step 9 (an aborted signal does not mask them).
    not_supported_checks_come_before_the_aborted_signal,
    /// WebIDL boolean members: ifAvailable/steal are converted with ToBoolean.
    not_supported_checks_use_to_boolean_options,
    // TypeError: WebIDL conversions, all as rejections
    /// WebIDL DOMString: a Symbol name rejects TypeError.
    symbol_name_rejects_type_error,
    /// WebIDL enum LockMode: a value outside the enum rejects TypeError (ToString first).
    invalid_mode_rejects_type_error,
    /// WebIDL dictionary: options that are not an object, null or undefined reject TypeError.
    non_object_options_reject_type_error,
    /// WebIDL dictionary: null / undefined / a function give the default options.
    null_and_undefined_options_mean_defaults,
    /// WebIDL AbortSignal member: anything else (null included) rejects TypeError.
    signal_that_is_not_an_abort_signal_rejects_type_error,
    /// WebIDL callback function: a non-callable callback rejects TypeError (both overloads).
    non_callable_callback_rejects_type_error,
    /// WebIDL overload resolution: fewer than 2 arguments rejects TypeError.
    too_few_arguments_reject_type_error,
    /// WebIDL operation on a non-LockManager `this`: request()/query() reject TypeError.
    bad_this_rejects_type_error,
    /// WebIDL conversions (TypeError) come before steps 5-8 (NotSupportedError).
    conversion_errors_come_before_not_supported_checks,
    // Conversions
    /// WebIDL DOMString: the name goes through ToString (numbers, objects, null, undefined, arrays).
    name_is_converted_with_to_string,
    /// WebIDL DOMString: a throwing toString rejects with that very error.
    name_to_string_throwing_rejects_with_that_error,
    /// 2.1 / WPT resource-names: names round-trip unchanged ('' , NUL, lone surrogates, U+FFFF).
    dom_string_names_round_trip_unchanged,
    /// WPT resource-names: '\uD800' and '\uFFFD' are different names (no USVString mangling).
    names_differing_only_in_lone_surrogates_are_distinct,
    /// WebIDL dictionary: members read in lexicographic order, once each, after the name.
    options_members_are_read_in_lexicographic_order,
    /// WebIDL: arguments converted in order name, options, callback; a throwing name stops the rest.
    conversion_order_is_name_then_options_then_callback,
    /// WebIDL dictionary: a throwing getter or bad enum value stops at that member.
    option_conversion_errors_stop_at_the_failing_member,
    // query() (3.2.2, 4.5)
    /// 4.5: {held, pending} of {name, mode, clientId}; follows the state through release.
    query_reports_held_and_pending_with_name_mode_client_id,
    /// WebIDL dictionary to JS: plain objects, members in lexicographic order.
    query_dictionaries_are_plain_objects_with_members_in_lexicographic_order,
    /// 4.5 step 5: held locks in held-set (grant) order.
    query_lists_held_locks_in_grant_order,
    /// 4.5 step 3: pending per queue in the queue map's order, FIFO within a queue.
    query_lists_pending_requests_per_name_queue_in_fifo_order,
    /// 3.2.2 step 5: the snapshot is taken after requests made before query().
    query_sees_a_request_made_just_before_it,
    /// 4.5: each call returns a new snapshot, unaffected by changes to older ones.
    query_returns_a_fresh_snapshot_each_time,
    /// 2.4 clientId: a v4 UUID string, the same in every entry of this API, unique per API.
    client_id_is_a_uuid_shared_by_all_entries_of_this_api,
    // Interface objects
    /// WebIDL interface object: `new LockManager()` and `LockManager()` throw TypeError.
    lock_manager_constructor_throws_type_error,
    /// WebIDL interface object: `new Lock()` and `Lock()` throw TypeError.
    lock_constructor_throws_type_error,
    /// WebIDL interface objects: name, length 0, prototype/constructor property attributes.
    interface_objects_have_webidl_shapes,
    /// WebIDL operations: request.length 2, query.length 0, names, property attributes.
    request_and_query_have_webidl_lengths,
    /// WebIDL: Symbol.toStringTag 'LockManager' / 'Lock' on the prototypes.
    to_string_tags,
    /// WebIDL attributes: name/mode are enumerable configurable accessors without setter on Lock.prototype.
    lock_getters_are_accessors_on_the_prototype,
    /// WebIDL: the prototypes hold exactly the IDL members.
    prototypes_have_exactly_the_webidl_members,
    /// The ponyfill: no wasm-bindgen `free`/`__wbg_ptr` shows; locks and Lock objects have no own properties.
    no_wasm_bindgen_members_are_visible,
    // The ponyfill's own contract
    /// Calls before the engine is ready are queued in order and none is lost.
    calls_before_the_engine_is_ready_are_queued_in_order,
    /// Validation errors (WebIDL, steps 5-9) do not wait for the engine.
    errors_reject_without_waiting_for_the_engine,
    /// ARCHITECTURE.md: the factory is called once with the api's clientId and a sink.
    engine_factory_gets_the_client_id_and_a_sink,
    /// The ponyfill touches no global.
    create_lock_api_touches_no_global,
}
