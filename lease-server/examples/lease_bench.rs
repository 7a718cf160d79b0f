//! The lease service's benchmark, driven by `bench/lease_service.mjs` (`npm run bench:leases`), which
//! builds this with `--profile server`, starts the databases and the service, and prints the table.
//!
//! - `lease_bench store --database URL`: the ceiling. `clients` tasks cycle tryLock + releaseLock, each
//!   on its own key, straight through the service's store: the same transactions and statements as the
//!   service runs, without HTTP, JSON or tokens.
//! - `lease_bench service --url URL --token JWT`: the same cycles through the running service, over HTTP
//!   with one keep-alive connection per client.
//! - `lease_bench streams --url URL --token JWT --pid PID --count N`: opens N change streams (one key
//!   each) on the service and reads the growth of its resident memory.
//!
//! Each prints one JSON line: cycles/s and the p50/p99 of a cycle's latency, or bytes per stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use weblocks::lease::{Operation, Token};
use weblocks_lease_server::events::Events;
use weblocks_lease_server::holder::Holder;
use weblocks_lease_server::lease_row::{Grant, LeaseRequest, Reply};
use weblocks_lease_server::store::{Database, PgTimeouts, Store, StoreOptions};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64, global = true)]
    clients: usize,
    /// Measured seconds (after one second of warm-up).
    #[arg(long, default_value_t = 5.0, global = true)]
    seconds: f64,
}

#[derive(Subcommand)]
enum Command {
    Store {
        #[arg(long)]
        database: Database,
        /// PostgreSQL connections (the service's default).
        #[arg(long, default_value_t = 16)]
        pool: usize,
        /// SQLite: the most operations committed together (the service's default; 1: each alone).
        #[arg(long, default_value_t = 256)]
        group: usize,
    },
    Service {
        #[arg(long)]
        url: String,
        #[arg(long)]
        token: String,
        /// The service's process, to report its CPU time per cycle.
        #[arg(long)]
        pid: Option<u32>,
    },
    Streams {
        #[arg(long)]
        url: String,
        #[arg(long)]
        token: String,
        #[arg(long)]
        pid: u32,
        #[arg(long, default_value_t = 10_000)]
        count: usize,
    },
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The service's allocator (src/main.rs), so that the store alone runs the same code as in the service.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let result = match &args.command {
        Command::Store {
            database,
            pool,
            group,
        } => {
            let (events, _expiries) = Events::new();
            // Generous bounds: the ceiling is measured, not the timeouts.
            let bound = std::time::Duration::from_secs(30);
            let options = StoreOptions {
                pg_pool: *pool,
                sqlite_group: *group,
                pg: PgTimeouts {
                    connect: bound,
                    pool_wait: bound,
                    statement: bound,
                    lock: bound,
                    idle_in_transaction: bound,
                },
            };
            let store = Arc::new(
                Store::open(database, Arc::new(events), options)
                    .await
                    .expect("open the database"),
            );
            let shared = Arc::clone(&store);
            let cycles = measure(&args, None, move |client, key| {
                let store = Arc::clone(&shared);
                async move { store_cycle(&store, client, &key).await }
            })
            .await;
            store.close().await;
            cycles
        }
        Command::Service { url, token, pid } => {
            let http = http_client();
            let (url, token) = (Arc::new(url.clone()), Arc::new(token.clone()));
            measure(&args, *pid, move |_, key| {
                let (http, url, token) = (http.clone(), Arc::clone(&url), Arc::clone(&token));
                async move { service_cycle(&http, &url, &token, &key).await }
            })
            .await
        }
        Command::Streams {
            url,
            token,
            pid,
            count,
        } => streams(url, token, *pid, *count).await,
    };
    println!("{result}");
}

fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(4096)
        .build_http()
}

/// CPU time (user + system) a process has used, in seconds, from /proc (`self` or a pid).
fn cpu_seconds(process: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat")).expect("a /proc stat");
    // Fields 14 and 15 (utime, stime), counted after the command name, which is in parentheses.
    let after_name = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 =
        fields[11].parse::<f64>().unwrap_or(0.0) + fields[12].parse::<f64>().unwrap_or(0.0);
    ticks / 100.0 // USER_HZ: 100 on Linux
}

/// Run `clients` tasks doing `cycle` on their own key for the warm-up, then the measured time. Reports
/// this process's CPU time per cycle (`selfCpuUs`) and, given a `pid`, that process's (`otherCpuUs`).
async fn measure<F, Fut>(args: &Args, pid: Option<u32>, cycle: F) -> Value
where
    F: Fn(usize, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let cycle = Arc::new(cycle);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..args.clients)
        .map(|client| {
            let (cycle, measuring, stop) = (
                Arc::clone(&cycle),
                Arc::clone(&measuring),
                Arc::clone(&stop),
            );
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let key = format!("client-{client}");
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    cycle(client, key.clone()).await;
                    if measuring.load(Ordering::Relaxed) {
                        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
                    }
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let other = pid.map(|pid| pid.to_string());
    let cpu = || (cpu_seconds("self"), other.as_deref().map(cpu_seconds));
    measuring.store(true, Ordering::Relaxed);
    let (self_before, other_before) = cpu();
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let (self_after, other_after) = cpu();
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a client task"));
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let per_cycle_us = |seconds: f64| seconds / latencies.len() as f64 * 1e6;
    json!({
        "clients": args.clients,
        "cycles": latencies.len(),
        "cyclesPerSecond": latencies.len() as f64 / elapsed,
        "p50Ms": at(0.50),
        "p99Ms": at(0.99),
        "selfCpuUs": per_cycle_us(self_after - self_before),
        "otherCpuUs": other_before.zip(other_after).map(|(before, after)| per_cycle_us(after - before)),
    })
}

fn holder(client: usize) -> Holder {
    Holder {
        sub: format!("bench-{client}"),
        name: format!("bench {client}"),
    }
}

fn random_token() -> Token {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("randomness");
    Token::from_random_bytes(bytes)
}

async fn store_cycle(store: &Store, client: usize, key: &str) {
    let request = LeaseRequest::grant(
        Grant::TryLock,
        "bench",
        key,
        60_000.0,
        random_token().into(),
        holder(client),
    )
    .expect("a valid request");
    let Ok(Reply::Acquired { lock_id, .. }) = store.run(request, 3_600_000.0).await else {
        panic!("tryLock failed on a free key");
    };
    let release = LeaseRequest::on_lock_id(
        Operation::release(&lock_id).expect("a lockId"),
        holder(client),
    );
    assert!(matches!(
        store.run(release, 3_600_000.0).await,
        Ok(Reply::Released)
    ));
}

async fn post(http: &HttpClient, url: &str, token: &str, path: &str, body: Value) -> (u16, Value) {
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("{url}{path}"))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a request");
    let response = http.request(request).await.expect("the service answers");
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    (status, serde_json::from_slice(&bytes).expect("JSON"))
}

async fn service_cycle(http: &HttpClient, url: &str, token: &str, key: &str) {
    let (status, lease) = post(
        http,
        url,
        token,
        "/v1/tryLock",
        json!({ "type": "bench", "id": key, "ttlMs": 60_000 }),
    )
    .await;
    assert_eq!(status, 200, "{lease}");
    let (status, answer) = post(
        http,
        url,
        token,
        "/v1/releaseLock",
        json!({ "lockId": lease["lockId"] }),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}

/// The service's resident memory, from /proc.
fn resident_bytes(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the service's /proc status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number");
    kib * 1024
}

async fn streams(url: &str, token: &str, pid: u32, count: usize) -> Value {
    let http = http_client();
    // Warm the service (its allocator, its thread pool, the database's caches) with a few streams first.
    let mut warm = Vec::new();
    for i in 0..64 {
        warm.push(open_stream(&http, url, token, &format!("warm-{i}")).await);
    }
    drop(warm);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = resident_bytes(pid);
    let started = Instant::now();
    let mut open = Vec::with_capacity(count);
    let mut batch = tokio::task::JoinSet::new();
    for i in 0..count {
        let (http, url, token) = (http.clone(), url.to_owned(), token.to_owned());
        batch.spawn(async move { open_stream(&http, &url, &token, &format!("stream-{i}")).await });
        if batch.len() >= 256 {
            open.push(
                batch
                    .join_next()
                    .await
                    .expect("a stream")
                    .expect("a stream task"),
            );
        }
    }
    while let Some(stream) = batch.join_next().await {
        open.push(stream.expect("a stream task"));
    }
    let opening = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = resident_bytes(pid);
    let per_stream = (after.saturating_sub(before)) as f64 / count as f64;
    drop(open);
    json!({
        "streams": count,
        "openedInSeconds": opening,
        "residentBeforeBytes": before,
        "residentAfterBytes": after,
        "bytesPerStream": per_stream,
    })
}

/// Open a stream on ("bench-streams", `id`) and read its first event (the current state): it is then
/// registered on the service. The returned body keeps it open.
async fn open_stream(http: &HttpClient, url: &str, token: &str, id: &str) -> hyper::body::Incoming {
    let request = Request::builder()
        .uri(format!("{url}/v1/events?type=bench-streams&id={id}"))
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))
        .expect("a request");
    let response = http.request(request).await.expect("the service answers");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    loop {
        let frame = body.frame().await.expect("a first event").expect("a frame");
        if frame.data_ref().is_some_and(|data| !data.is_empty()) {
            return body;
        }
    }
}
