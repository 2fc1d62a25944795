//! The HTTP server under `--metrics`: HTTP/1 (hyper) on a tokio runtime of one thread, with a
//! limit on everything a client could make it hold. The endpoint shares the daemon's process
//! with the file system, so what it may take is bounded up front:
//!
//! - **Connections**: at most [`Limits::connections`] at once that have not shown the token
//!   (all of them without one). When they are all taken, a new connection replaces the one
//!   that has waited longest without sending a whole request (a client that drips its request
//!   a byte at a time holds a place only until others come), else the one idle longest
//!   between requests; only when every one is answering a request is the new one answered
//!   `503` and closed at once (one non-blocking write, no task). With a token
//!   ([`Listener::serve`]), a connection whose request carries it (`Authorization: Bearer`)
//!   moves to places of its own, [`Limits::connections`] more, where it is never replaced or
//!   counted against the others: a scraper with the token is served however many clients
//!   without it hold their places. No connection ever gets a thread. File descriptors: the
//!   listener, the runtime's three (its epoll, a duplicate of it, its waker), the connections
//!   of both kinds and the one being refused, 37 in all with the default limits, against the
//!   20,000 the daemon raises its limit to. Connections not yet accepted
//!   wait in the kernel's queue ([`BACKLOG`]), which costs the daemon no descriptor. An
//!   `accept` that fails (`EMFILE` when the file system has taken every descriptor,
//!   `ECONNABORTED`, ...) is logged, at most once per [`ACCEPT_LOG_EVERY`], and retried after
//!   [`Limits::accept_pause`]: it never ends the endpoint.
//! - **Request head**: at most [`Limits::header_bytes`] (hyper answers `431` and closes), read
//!   within [`Limits::header_timeout`] of the connection going idle (a new connection, or the
//!   last response written), or the connection is closed. That also ends idle keep-alive
//!   connections.
//! - **Request body**: never read. A request that has one is answered `413` and the connection
//!   closed (hyper then gives up on the body, having read at most its one buffer of
//!   [`Limits::header_bytes`]); a declared length is never allocated.
//! - **Responses**: one in flight per connection (hyper's HTTP/1 reads the next pipelined
//!   request only once the response before it is written). A write that makes no progress for
//!   [`Limits::write_timeout`] (a client that does not read) drops the connection.
//!
//! The connections are tasks on the one thread, so a client that stalls holds only its own
//! connection: the others are served meanwhile. Answers are built by the caller's handler,
//! synchronously, on that thread.
//!
//! What the Prometheus exporters promise, for comparison: node_exporter limits parallel scrape
//! requests (`--web.max-requests`, 40 by default, `503` beyond) and runs on one CPU by
//! default; the exporter-toolkit's server sets no timeouts or header limit of its own (Go's
//! default allows 1 MB of headers). This endpoint bounds connections rather than requests
//! (each connection has at most one request in flight, so that bounds requests too), and adds
//! the header, idle and write limits.

use std::convert::Infallible;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONNECTION, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tokio_io_timeout::TimeoutStream;

/// What one client, or all of them, may make the endpoint hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is answered `503` and closed. Default 16.
    pub connections: usize,
    /// The largest request head (request line and headers), in bytes; at least 8192 (hyper's
    /// smallest read buffer). Default 8192.
    pub header_bytes: usize,
    /// Time to receive a whole request head, from the moment the connection is idle. Default
    /// 10 s.
    pub header_timeout: Duration,
    /// Time a response write may make no progress before the connection is dropped. Default
    /// 10 s.
    pub write_timeout: Duration,
    /// Pause after a failed `accept` before the next. Default 100 ms.
    pub accept_pause: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 16,
            header_bytes: 8192,
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            accept_pause: Duration::from_millis(100),
        }
    }
}

/// A failed `accept` is logged at most once in this time (with the count of those not logged).
pub const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);

/// The answer to a connection over the limit (written once, without waiting).
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
content-length: 21\r\nconnection: close\r\n\r\ntoo many connections\n";

/// Answers one request (its head; the body is never read); the flag says whether it carried
/// the token.
pub type Handler = dyn Fn(&Request<Incoming>, bool) -> Response<Full<Bytes>> + Send + Sync;

/// Connections the kernel may hold for the endpoint before it accepts them (they cost it no
/// descriptor): as Go's servers (the Prometheus exporters') take the system's `somaxconn`,
/// enough that a burst of connections waits rather than having its SYNs dropped.
const BACKLOG: u32 = 1024;

/// A listening socket, bound but not yet served, and the runtime (not yet running: no thread)
/// that will serve it.
pub struct Listener {
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
}

impl Listener {
    /// Binds `addr`.
    pub fn bind(addr: std::net::SocketAddr) -> io::Result<Listener> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _in_runtime = runtime.enter();
            let socket = match addr {
                std::net::SocketAddr::V4(_) => TcpSocket::new_v4()?,
                std::net::SocketAddr::V6(_) => TcpSocket::new_v6()?,
            };
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(BACKLOG)?
        };
        Ok(Listener { runtime, listener })
    }

    /// The bound address (with the port chosen for `:0`).
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `handler` on a thread of its own (named `name`) within `limits`, until the
    /// returned server is dropped. With a `token`, a request without it (`Authorization:
    /// Bearer TOKEN`) is answered `401`, and connections that show it have places of their
    /// own.
    pub fn serve(
        self,
        name: &str,
        limits: Limits,
        token: Option<String>,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        let Listener { runtime, listener } = self;
        let (stop, stopped) = oneshot::channel::<()>();
        let shared = Arc::new(Shared {
            limits,
            token,
            handler,
            places: Mutex::new(Places::default()),
        });
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || runtime.block_on(accept_loop(listener, shared, stopped)))?;
        Ok(Server {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

/// A running server: dropping it stops it, closes every connection and joins its thread.
pub struct Server {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // The accept loop ends when the sender is gone; the runtime, dropped with the
        // thread's closure, drops every connection's task.
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the accept loop and the connections share.
struct Shared {
    limits: Limits,
    token: Option<String>,
    handler: Arc<Handler>,
    places: Mutex<Places>,
}

/// The connections being served.
#[derive(Default)]
struct Places {
    /// Connections that have not shown the token, oldest first.
    open: Vec<Place>,
    /// Connections that have.
    trusted: usize,
    next_id: u64,
}

/// One connection without the token.
struct Place {
    id: u64,
    /// When it was accepted, or last finished a request.
    since: Instant,
    /// It has sent a whole request head since `since` (it is answering, or idle between
    /// requests).
    state: Arc<ConnState>,
    abort: AbortHandle,
}

/// What a connection's task tells the accept loop.
#[derive(Default)]
struct ConnState {
    /// A whole request head came.
    served: AtomicBool,
    /// It has shown the token and moved to the trusted places.
    trusted: AtomicBool,
}

impl Places {
    /// Makes room for one more connection without the token: none to make while there are
    /// fewer than `limit`; else the one that has waited longest without a whole request, or
    /// the one idle longest, is dropped. `false` when every one is answering a request.
    fn make_room(&mut self, limit: usize) -> bool {
        if self.open.len() < limit {
            return true;
        }
        let victim = self
            .open
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.state.served.load(Ordering::Acquire))
            .min_by_key(|(_, p)| p.since)
            .or_else(|| self.open.iter().enumerate().min_by_key(|(_, p)| p.since))
            .map(|(i, _)| i);
        match victim {
            Some(i) => {
                let p = self.open.remove(i);
                p.abort.abort();
                log::debug!("metrics: dropped a connection to make room for a new one");
                true
            }
            None => false,
        }
    }

    /// Forgets connection `id` (it ended), wherever it was.
    fn remove(&mut self, id: u64, trusted: bool) {
        if trusted {
            self.trusted = self.trusted.saturating_sub(1);
        } else if let Some(i) = self.open.iter().position(|p| p.id == id) {
            self.open.remove(i);
        }
    }
}

/// Removes a connection from the places when its task ends (or is aborted).
struct Leaving {
    shared: Arc<Shared>,
    id: u64,
    state: Arc<ConnState>,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        let trusted = self.state.trusted.load(Ordering::Acquire);
        if let Ok(mut p) = self.shared.places.lock() {
            p.remove(self.id, trusted);
        }
    }
}

/// Gives the accepted `stream` a place (replacing one if they are all taken) and its task, or
/// refuses it; returns whether a connection was replaced.
fn admit(shared: &Arc<Shared>, stream: TcpStream, http: &http1::Builder) -> bool {
    let limits = shared.limits;
    let mut places = shared.places.lock().unwrap_or_else(|e| e.into_inner());
    let replacing = places.open.len() >= limits.connections;
    if !places.make_room(limits.connections) {
        // Every place answers a request: say so if the socket takes it now, and
        // close.
        let _ = stream.try_write(REFUSED);
        return false;
    }
    places.next_id += 1;
    let id = places.next_id;
    let state = Arc::new(ConnState::default());
    let leaving = Leaving {
        shared: shared.clone(),
        id,
        state: state.clone(),
    };
    let task = tokio::spawn(connection(stream, http.clone(), leaving));
    // The task has not run yet (one thread): it is listed before it can end.
    places.open.push(Place {
        id,
        since: Instant::now(),
        state,
        abort: task.abort_handle(),
    });
    replacing
}

/// Accepts connections until `stopped` (see the module documentation for the places).
async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let limits = shared.limits;
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.header_bytes)
        .max_buf_size(limits.header_bytes.max(8192));
    let mut errors = AcceptErrors::default();
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, _)) => {
                // A connection replaced is aborted; its socket closes when its task is
                // dropped, which the runtime does once this loop yields: without that, a
                // burst of connections would each replace one and pile their sockets up
                // while accepts are ready.
                if admit(&shared, stream, &http) {
                    tokio::task::yield_now().await;
                }
            }
            Err(e) => {
                errors.failed(&e);
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = tokio::time::sleep(limits.accept_pause) => {}
                }
            }
        }
    }
}

/// Whether `req` carries `token` (`Authorization: Bearer TOKEN`), compared in time that does
/// not depend on where it differs.
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    req.headers().get_all(AUTHORIZATION).iter().any(|v| {
        let v = v.as_bytes();
        let Some(given) = v
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
            .map(|_| v[7..].trim_ascii())
        else {
            return false;
        };
        given.len() == token.len()
            && given
                .iter()
                .zip(token.as_bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    })
}

/// The answer to a request and what it changes in the places: a request with the token moves
/// its connection to the trusted places (if one is free); one without it, when there is a
/// token, is answered `401`.
fn answer(req: &Request<Incoming>, shared: &Shared, leaving: &Leaving) -> Response<Full<Bytes>> {
    let state = &leaving.state;
    let trusted = match &shared.token {
        None => false,
        Some(t) if authorized(req, t) => true,
        Some(_) => {
            mark_served(shared, leaving);
            let mut r = text(StatusCode::UNAUTHORIZED, "a bearer token is needed\n");
            r.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    };
    if trusted && !state.trusted.load(Ordering::Acquire) {
        let mut p = shared.places.lock().unwrap_or_else(|e| e.into_inner());
        if p.trusted >= shared.limits.connections {
            drop(p);
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "too many connections\n");
            r.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            return r;
        }
        p.trusted += 1;
        p.remove(leaving.id, false);
        state.trusted.store(true, Ordering::Release);
    } else if !trusted {
        mark_served(shared, leaving);
    }
    if req.body().is_end_stream() {
        (shared.handler)(req, trusted)
    } else {
        body_refused()
    }
}

/// Notes that connection `leaving` sent a whole request: from now on it is replaced only
/// after those that have not.
fn mark_served(shared: &Shared, leaving: &Leaving) {
    leaving.state.served.store(true, Ordering::Release);
    let mut p = shared.places.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(place) = p.open.iter_mut().find(|x| x.id == leaving.id) {
        place.since = Instant::now();
    }
}

/// Serves one connection; `leaving` takes it out of the places when it ends.
async fn connection(stream: TcpStream, http: http1::Builder, leaving: Leaving) {
    let mut io = TimeoutStream::new(stream);
    io.set_write_timeout(Some(leaving.shared.limits.write_timeout));
    let leaving = Arc::new(leaving);
    let conn = leaving.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let response = answer(&req, &conn.shared, &conn);
        std::future::ready(Ok::<_, Infallible>(response))
    });
    if let Err(e) = http
        .serve_connection(TokioIo::new(Box::pin(io)), service)
        .await
    {
        log::debug!("metrics: connection: {e}");
    }
}

/// The answer to a request with a body: `413`, and the connection closed.
fn body_refused() -> Response<Full<Bytes>> {
    let mut r = text(
        StatusCode::PAYLOAD_TOO_LARGE,
        "a request body is not accepted\n",
    );
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A plain-text answer.
pub fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    with_type(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(body.as_bytes()),
    )
}

/// An answer of `content_type`.
pub fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Failed `accept`s, logged at most once per [`ACCEPT_LOG_EVERY`].
#[derive(Debug, Default)]
struct AcceptErrors {
    last_logged: Option<Instant>,
    not_logged: u64,
}

impl AcceptErrors {
    fn failed(&mut self, e: &io::Error) {
        let now = Instant::now();
        if self
            .last_logged
            .is_some_and(|t| now.duration_since(t) < ACCEPT_LOG_EVERY)
        {
            self.not_logged += 1;
            return;
        }
        if self.not_logged > 0 {
            log::warn!(
                "metrics: accept: {e} (and {} more since the last report); retrying",
                self.not_logged
            );
        } else {
            log::warn!("metrics: accept: {e}; retrying");
        }
        self.last_logged = Some(now);
        self.not_logged = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_errors_are_logged_once_per_period() {
        let mut errors = AcceptErrors::default();
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        errors.failed(&e);
        let first = errors.last_logged;
        assert!(first.is_some());
        for _ in 0..1000 {
            errors.failed(&e);
        }
        assert_eq!(errors.not_logged, 1000);
        assert_eq!(errors.last_logged, first);
    }

    #[test]
    fn the_refusal_is_a_whole_response() {
        let text = std::str::from_utf8(REFUSED).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), len);
        assert!(head.starts_with("HTTP/1.1 503 "));
    }
}
