//! The HTTP server under `--metrics`: HTTP/1 (hyper) on a tokio runtime of one thread, with a
//! limit on everything a client could make it hold. The endpoint shares the daemon's process
//! with the file system, so what it may take is bounded up front:
//!
//! - **Connections**: at most [`Limits::connections`] at once. One more is accepted only to be
//!   answered `503` and closed at once (one non-blocking write, no task); no connection ever
//!   gets a thread. File descriptors: the listener, the runtime's three (its epoll, a duplicate
//!   of it, its waker), the connections and the one being refused, 21 in all with the default
//!   limits, against the 20,000 the daemon raises its limit to. Connections not yet accepted
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
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
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

/// Answers one request (its head; the body is never read).
pub type Handler = dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync;

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
    /// returned server is dropped.
    pub fn serve(self, name: &str, limits: Limits, handler: Arc<Handler>) -> io::Result<Server> {
        let Listener { runtime, listener } = self;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || runtime.block_on(accept_loop(listener, limits, handler, stopped)))?;
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

/// Accepts connections until `stopped`, serving at most `limits.connections` at once.
async fn accept_loop(
    listener: TcpListener,
    limits: Limits,
    handler: Arc<Handler>,
    mut stopped: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(limits.connections));
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
            Ok((stream, _)) => match permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    let conn = connection(stream, permit, http.clone(), limits, handler.clone());
                    tokio::spawn(conn);
                }
                Err(_) => {
                    // Over the limit: say so if the socket takes it now, and close.
                    let _ = stream.try_write(REFUSED);
                }
            },
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

/// Serves one connection; `_permit` is its place under the limit, given back when it ends.
async fn connection(
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    http: http1::Builder,
    limits: Limits,
    handler: Arc<Handler>,
) {
    let mut io = TimeoutStream::new(stream);
    io.set_write_timeout(Some(limits.write_timeout));
    let service = service_fn(move |req: Request<Incoming>| {
        let response = if req.body().is_end_stream() {
            handler(&req)
        } else {
            body_refused()
        };
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
