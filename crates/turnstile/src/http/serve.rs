//! The accept loop and each connection's timers.
//!
//! `axum::serve` has no header or idle timeout, so connections are served
//! with hyper directly. Each connection has a watcher that knows, from the
//! bytes read and the requests in flight, which of two timers runs:
//!
//! - **idle**: no request in flight and no byte of a next request read yet
//!   (a fresh connection, or a kept-alive one between requests);
//! - **header read**: the first byte of a request head arrived, the head is
//!   not complete yet (a request is "in flight" once hyper hands it to the
//!   router).
//!
//! When the running timer fires, the connection is dropped (the socket is
//! closed). A request in flight, and so a live SSE stream of a turn, is
//! never cut by either timer; reading its body has its own deadline
//! ([`super::limits::read_body`]).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::state::HttpConfig;

/// Serves `router` on `listener` until `shutdown` resolves, then waits for
/// the open connections to finish their requests.
pub(super) async fn run(
    listener: tokio::net::TcpListener,
    router: Router,
    cfg: &HttpConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // HTTP/1.1 only, as `axum::serve` served it here.
    let mut builder = http1::Builder::new();
    builder
        // The watcher below times the head; hyper's own timer would also
        // count the idle time before it.
        .header_read_timeout(None)
        // Heads up to this size reach the router, which answers 431 with a
        // JSON reason above `max_header_bytes`; hyper answers a bare 431
        // beyond it.
        .max_buf_size(hyper_buf(cfg.max_header_bytes));
    let timers = Timers {
        idle: cfg.idle_timeout,
        header: cfg.header_read_timeout,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, as
                    // axum::serve does, instead of spinning.
                    if !is_connection_error(&e) {
                        tracing::error!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
        };
        // SSE frames are small and must leave at once: without TCP_NODELAY,
        // Nagle's algorithm and delayed ACKs hold them back ~40 ms.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
        let builder = builder.clone();
        let router = router.clone();
        let stop = stop_rx.clone();
        let done = done_tx.clone();
        tokio::spawn(async move {
            connection(tcp, builder, router, timers, stop).await;
            drop(done);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_tx);
    // Every connection task holds a sender; `recv` is `None` once all ended.
    let _ = done_rx.recv().await;
    Ok(())
}

/// hyper's read buffer: large enough that a head over the limit still
/// reaches the router's JSON 431, bounded so that a huge one is refused by
/// hyper before it is all in memory.
fn hyper_buf(max_header_bytes: usize) -> usize {
    max_header_bytes.saturating_mul(8).max(8192)
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

#[derive(Clone, Copy)]
struct Timers {
    idle: Duration,
    header: Duration,
}

/// What the watcher of one connection knows.
struct State {
    /// Requests handed to the router whose response has not ended.
    in_flight: usize,
    /// When the connection last became free of requests.
    free_since: Instant,
    /// When the first byte arrived since then.
    head_started: Option<Instant>,
}

#[derive(Clone)]
struct Shared {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            state: Arc::new(Mutex::new(State {
                in_flight: 0,
                free_since: Instant::now(),
                head_started: None,
            })),
            changed: Arc::new(Notify::new()),
        }
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut s);
        drop(s);
        self.changed.notify_one();
    }

    /// Bytes were read from the socket.
    fn read(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.in_flight == 0 && s.head_started.is_none() {
            s.head_started = Some(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }

    /// A request reached the router; the returned guard ends it.
    fn enter(&self) -> InFlight {
        self.update(|s| {
            s.in_flight += 1;
            s.head_started = None;
        });
        InFlight(self.clone())
    }

    /// Resolves when the running timer fires.
    async fn expired(&self, t: Timers) {
        loop {
            let notified = self.changed.notified();
            let deadline = {
                let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                match (s.in_flight, s.head_started) {
                    (0, Some(start)) => Some(start + t.header),
                    (0, None) => Some(s.free_since + t.idle),
                    _ => None,
                }
            };
            match deadline {
                Some(d) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(d) => return,
                    }
                }
                None => notified.await,
            }
        }
    }
}

/// One request in flight, until its response body ends or is dropped.
struct InFlight(Shared);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            if s.in_flight == 0 {
                s.free_since = Instant::now();
                s.head_started = None;
            }
        });
    }
}

async fn connection(
    tcp: TcpStream,
    builder: http1::Builder,
    router: Router,
    timers: Timers,
    mut stop: watch::Receiver<bool>,
) {
    let shared = Shared::new();
    let io = TokioIo::new(Watched {
        inner: tcp,
        shared: shared.clone(),
    });
    let svc_shared = shared.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let guard = svc_shared.enter();
        let router = router.clone();
        async move {
            let res = tower::ServiceExt::oneshot(router, req).await?;
            Ok::<_, Infallible>(res.map(|body| {
                Body::new(Tracked {
                    inner: body,
                    _guard: guard,
                })
            }))
        }
    });
    let conn = builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = shared.expired(timers) => {
                tracing::debug!("closing a connection: idle or head too slow");
                return;
            }
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// The socket, telling the watcher when bytes arrive.
struct Watched {
    inner: TcpStream,
    shared: Shared,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.shared.read();
        }
        res
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A response body that keeps its request in flight until it ends.
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
