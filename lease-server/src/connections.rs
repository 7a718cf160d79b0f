//! The HTTP/1.1 connections, with a bound on everything a client can hold without a token:
//!
//! - at most `max_connections` at once: a connection accepted beyond them is closed at once (so the
//!   descriptors the process may open stay within what it needs, and a flood cannot starve the others
//!   of `accept`);
//! - a request's head must arrive within `header_timeout`, counted from the connection's opening or the
//!   end of the previous response (hyper's header-read timer, which also closes a kept-alive connection
//!   left idle that long);
//! - a connection that moves no byte either way for `idle_timeout` is closed, whatever it is doing (a
//!   body trickling in slower than that, a client that stopped reading its answer or its stream: a
//!   change stream writes a keep-alive comment every 15 s, so a live one is never idle that long);
//! - at shutdown, no new connection is accepted, each connection finishes the request it is answering
//!   and closes, and whatever is still open after `grace` is dropped.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

/// What each connection may take.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    /// How long a shutdown waits for the open connections.
    pub grace: Duration,
}

/// Serve `router` on `listener` until `shutdown` becomes true, then close the connections (within
/// `limits.grace`). Returns whether every connection closed within the grace period.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
) -> bool {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut refused_since_log = 0u64;
    let mut last_log: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = crate::shutdown::stopped(&mut shutdown) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors, most likely: the connection stays queued; try again shortly
                // rather than spin (and log at most once a second).
                if last_log.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                    tracing::warn!(%error, "accept failed");
                    last_log = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(stream);
            refused_since_log += 1;
            if last_log.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                tracing::warn!(
                    refused = refused_since_log,
                    max_connections = limits.max_connections,
                    "connections refused: at the connection limit"
                );
                refused_since_log = 0;
                last_log = Some(Instant::now());
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            connection(stream, router, limits, shutdown).await;
            drop(slot);
        });
    }
    drop(listener);
    // Every connection holds a slot until it closes: all slots back means all closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    tokio::time::timeout(limits.grace, slots.acquire_many(all))
        .await
        .is_ok()
}

/// One connection, until it ends, times out, or the shutdown closes it.
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        inner: stream,
        activity: Arc::clone(&activity),
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let served = builder.serve_connection(io, TowerToHyperService::new(router));
    tokio::pin!(served);
    let mut stopping = false;
    loop {
        let idle_until = activity.last() + limits.idle_timeout;
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended");
                }
                return;
            }
            () = tokio::time::sleep_until(idle_until) => {
                if activity.last() + limits.idle_timeout <= Instant::now() {
                    tracing::debug!(idle = ?limits.idle_timeout, "closing an idle connection");
                    return;
                }
            }
            () = crate::shutdown::stopped(&mut shutdown), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When a connection last moved a byte, in ms since it opened.
struct Activity {
    opened: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.opened + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A socket that records when it last read or wrote a byte.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
