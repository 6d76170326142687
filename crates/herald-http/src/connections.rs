//! Serving connections on the open internet: a cap on open connections, a header-read
//! timeout, an idle keep-alive timeout, and a shutdown that the grace period bounds
//! whatever clients do. Connections closed for these reasons are counted and reported
//! as a periodic summary, never a log line each.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower_service::Service;

/// How long to wait before accepting again when the process is out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How often dropped-connection counts are reported (only when they changed).
const SUMMARY_EVERY: Duration = Duration::from_secs(10);
/// Descriptors kept free below the process's limit for the store, scripts and sends.
const FD_RESERVE: u64 = 256;

/// The bounds every connection is served under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// A request's head (request line and headers) must arrive within this.
    pub header_timeout: Duration,
    /// A connection with no request in progress and no bytes moving is closed after this.
    pub idle_timeout: Duration,
    /// After the shutdown signal, connections get this long; then they are closed.
    pub shutdown_grace: Duration,
    /// The front door the listener serves (`webhook`, `api`, `rpc`), as the metrics of
    /// open connections name it.
    pub door: &'static str,
}

impl ConnectionLimits {
    /// `max_connections` lowered to what the process's descriptor limit allows.
    pub fn within_fd_limit(mut self) -> Self {
        let limit = raise_fd_limit();
        let allowed = limit.saturating_sub(FD_RESERVE).max(16) as usize;
        if self.max_connections > allowed {
            tracing::warn!(
                configured = self.max_connections,
                allowed,
                fd_limit = limit,
                "max_connections lowered below the process's file descriptor limit"
            );
            self.max_connections = allowed;
        }
        self
    }
}

/// Raises the soft descriptor limit to the hard one and returns the soft limit in force.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// Counts shared by the accept loops and the connections.
#[derive(Default)]
struct Counters {
    open: AtomicUsize,
    refused: AtomicU64,
    header_timeouts: AtomicU64,
    idle_closed: AtomicU64,
    shutdown_closed: AtomicU64,
    accept_errors: AtomicU64,
}

/// Serves on every listener until `shutdown` resolves, then lets connections finish
/// for at most the grace period.
pub async fn serve(
    listeners: Vec<TcpListener>,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let counters = Arc::new(Counters::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut accepters = JoinSet::new();
    let connections = Arc::new(tokio::sync::Mutex::new(JoinSet::new()));
    for listener in listeners {
        accepters.spawn(accept_loop(
            listener,
            app.clone(),
            limits,
            counters.clone(),
            connections.clone(),
            stop_rx.clone(),
        ));
    }
    let summary = tokio::spawn(report_summaries(counters.clone(), limits));
    shutdown.await;
    let _ = stop_tx.send(true);
    while accepters.join_next().await.is_some() {}
    let mut connections = connections.lock().await;
    let drained = tokio::time::timeout(limits.shutdown_grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        let left = connections.len();
        connections.abort_all();
        while connections.join_next().await.is_some() {}
        tracing::warn!(
            connections = left,
            grace_seconds = limits.shutdown_grace.as_secs(),
            "closed connections still open when the shutdown grace period ended"
        );
    }
    summary.abort();
    log_summary(
        &counters,
        &mut Snapshot::default(),
        limits,
        "connections dropped while serving (totals)",
    );
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    counters: Arc<Counters>,
    connections: Arc<tokio::sync::Mutex<JoinSet<()>>>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: count, wait a moment, accept again (no busy loop).
                counters.accept_errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if counters.open.load(Ordering::Relaxed) >= limits.max_connections {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            continue;
        }
        counters.open.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let conn = serve_connection(
            stream,
            peer,
            app.clone(),
            limits,
            counters.clone(),
            stop.clone(),
        );
        let open = herald_metrics::get().doors.open(limits.door);
        let mut set = connections.lock().await;
        // Finished connections leave the set as new ones come in.
        while set.try_join_next().is_some() {}
        set.spawn(async move {
            conn.await;
            drop(open);
        });
    }
}

/// What one connection's I/O and handler tell its watchdog: counters only, so the
/// request path reads no clock (the watchdog keeps the times, at its own ticks).
#[derive(Default)]
struct Activity {
    /// Requests whose handler has not answered yet.
    in_flight: AtomicUsize,
    /// Reads that brought bytes and writes that took some: a response streamed to a
    /// client that sends nothing is not idle, while a client that reads nothing soon
    /// stalls the writes and is.
    moved: AtomicU64,
    /// Request heads completed (handlers started).
    heads: AtomicU64,
    /// Bytes were read since the last head completed: a new head is arriving.
    head_pending: AtomicBool,
}

/// Why a connection ended early.
enum Closed {
    Finished,
    HeaderTimeout,
    Idle,
    Shutdown,
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::default());
    let io = TokioIo::new(TrackedIo {
        inner: stream,
        activity: activity.clone(),
    });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
            let guard = InFlight::enter(&activity);
            // Handlers that bound clients by address read it as axum's `ConnectInfo`.
            request.extensions_mut().insert(ConnectInfo(peer));
            let mut app = app.clone();
            async move {
                let response = app.call(request).await;
                drop(guard);
                response
            }
        })
    };
    // The header timeout is the watchdog's: hyper's own arms a timer for every request.
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service)
        // A WebSocket (`herald rpc --ws`) takes the connection over after its 101.
        .with_upgrades();
    tokio::pin!(conn);
    let tick = (limits.idle_timeout.min(limits.header_timeout) / 4).max(Duration::from_millis(50));
    let mut watchdog = Watchdog::new(limits);
    let mut ticks = tokio::time::interval(tick);
    let mut closing: Option<Closed> = None;
    loop {
        tokio::select! {
            biased;
            _ = conn.as_mut() => break,
            _ = ticks.tick(), if closing.is_none() => {
                // Overdue heads and idle connections are dropped at once (a graceful
                // shutdown would wait for the rest of a head).
                if let Some(why) = watchdog.check(&activity, Instant::now()) {
                    closing = Some(why);
                    break;
                }
            }
            _ = stop.wait_for(|s| *s), if closing.is_none() => {
                conn.as_mut().graceful_shutdown();
                closing = Some(Closed::Shutdown);
            }
        }
    }
    match closing.unwrap_or(Closed::Finished) {
        Closed::HeaderTimeout => counters.header_timeouts.fetch_add(1, Ordering::Relaxed),
        Closed::Idle => counters.idle_closed.fetch_add(1, Ordering::Relaxed),
        Closed::Shutdown => counters.shutdown_closed.fetch_add(1, Ordering::Relaxed),
        Closed::Finished => 0,
    };
    counters.open.fetch_sub(1, Ordering::Relaxed);
}

/// Times a connection's heads and idleness from its activity counters.
struct Watchdog {
    limits: ConnectionLimits,
    last_moved: u64,
    quiet_since: Instant,
    /// The head being waited for (as the count of heads before it) and since when.
    head: Option<(u64, Instant)>,
}

impl Watchdog {
    fn new(limits: ConnectionLimits) -> Self {
        let now = Instant::now();
        // The first head is awaited from the connection's opening.
        Watchdog {
            limits,
            last_moved: 0,
            quiet_since: now,
            head: Some((0, now)),
        }
    }

    /// Why the connection must close now, if it must.
    fn check(&mut self, activity: &Activity, now: Instant) -> Option<Closed> {
        if activity.in_flight.load(Ordering::Relaxed) > 0 {
            self.quiet_since = now;
            self.head = None;
            return None;
        }
        let moved = activity.moved.load(Ordering::Relaxed);
        if moved != self.last_moved {
            self.last_moved = moved;
            self.quiet_since = now;
        }
        let heads = activity.heads.load(Ordering::Relaxed);
        let awaiting = heads == 0 || activity.head_pending.load(Ordering::Relaxed);
        self.head = match self.head {
            _ if !awaiting => None,
            Some((n, since)) if n == heads => Some((n, since)),
            _ => Some((heads, now)),
        };
        if let Some((_, since)) = self.head
            && now.duration_since(since) >= self.limits.header_timeout
        {
            return Some(Closed::HeaderTimeout);
        }
        (now.duration_since(self.quiet_since) >= self.limits.idle_timeout).then_some(Closed::Idle)
    }
}

/// Marks a request in progress on its connection for as long as it lives.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn enter(activity: &Arc<Activity>) -> Self {
        activity.heads.fetch_add(1, Ordering::Relaxed);
        activity.head_pending.store(false, Ordering::Relaxed);
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A TCP stream that counts the reads that brought bytes.
struct TrackedIo {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.moved.fetch_add(1, Ordering::Relaxed);
            // Bytes with no request in progress: the next head is arriving.
            if self.activity.in_flight.load(Ordering::Relaxed) == 0 {
                self.activity.head_pending.store(true, Ordering::Relaxed);
            }
        }
        polled
    }
}

impl TrackedIo {
    /// Counts a write that took bytes.
    fn wrote(&self, polled: &Poll<std::io::Result<usize>>) {
        if matches!(polled, Poll::Ready(Ok(n)) if *n > 0) {
            self.activity.moved.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(&polled);
        polled
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The counts last reported.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    refused: u64,
    header_timeouts: u64,
    idle_closed: u64,
    shutdown_closed: u64,
    accept_errors: u64,
}

async fn report_summaries(counters: Arc<Counters>, limits: ConnectionLimits) {
    let mut last = Snapshot::default();
    let mut every = tokio::time::interval(SUMMARY_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        log_summary(
            &counters,
            &mut last,
            limits,
            "connections dropped since the last report",
        );
    }
}

/// One line with what changed since `last`, if anything did.
fn log_summary(counters: &Counters, last: &mut Snapshot, limits: ConnectionLimits, what: &str) {
    let now = Snapshot {
        refused: counters.refused.load(Ordering::Relaxed),
        header_timeouts: counters.header_timeouts.load(Ordering::Relaxed),
        idle_closed: counters.idle_closed.load(Ordering::Relaxed),
        shutdown_closed: counters.shutdown_closed.load(Ordering::Relaxed),
        accept_errors: counters.accept_errors.load(Ordering::Relaxed),
    };
    if now == *last {
        return;
    }
    tracing::warn!(
        refused_over_cap = now.refused - last.refused,
        header_timeouts = now.header_timeouts - last.header_timeouts,
        idle_closed = now.idle_closed - last.idle_closed,
        closed_at_shutdown = now.shutdown_closed - last.shutdown_closed,
        accept_errors = now.accept_errors - last.accept_errors,
        open = counters.open.load(Ordering::Relaxed),
        max_connections = limits.max_connections,
        "{what}"
    );
    *last = now;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 16,
            header_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_millis(400),
            shutdown_grace: Duration::from_secs(1),
            door: "test",
        }
    }

    /// A body of ten `.`s written 150 ms apart (1.5 s, past the idle timeout).
    async fn trickle() -> axum::body::Body {
        let dots = futures_util::stream::unfold(0u32, |n| async move {
            if n == 10 {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
            Some((
                Ok::<_, std::io::Error>(bytes::Bytes::from_static(b".")),
                n + 1,
            ))
        });
        axum::body::Body::from_stream(dots)
    }

    #[tokio::test]
    async fn a_response_streamed_to_a_silent_client_is_not_idle_but_a_silent_connection_is() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", axum::routing::get(trickle));
        tokio::spawn(serve(vec![listener], app, limits(), std::future::pending()));
        let mut client = TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n = client.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            if n == 0 || String::from_utf8_lossy(&got).ends_with("0\r\n\r\n") {
                break;
            }
        }
        let text = String::from_utf8_lossy(&got);
        assert_eq!(text.matches("\r\n.\r\n").count(), 10, "{text}");
        // Then nothing moves either way: closed at the idle timeout.
        let started = Instant::now();
        let n = tokio::time::timeout(Duration::from_secs(3), client.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 0);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
