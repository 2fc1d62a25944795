//! The `--metrics ADDR` endpoint: `GET /metrics` answers the live profile in the Prometheus text
//! exposition format ([`profile_store::prometheus`]).
//!
//! It runs on a thread of its own and reads snapshots of the profiler (its counters are read
//! without locks), so a scrape never blocks a file-system request. With `--metrics-native`, a
//! scraper that asks for the protobuf format gets native histograms ([`native`]).

pub mod native;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use profile_store::{ClockInfo, Profiler};

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A running endpoint; stopped (and its thread joined) when dropped.
pub struct Endpoint {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

/// An endpoint's address, bound and listening, not yet answering: bound before the file
/// system is set up, so that an address that cannot be had changes nothing (raif would have
/// formatted its branches).
pub struct Bound {
    server: tiny_http::Server,
    addr: SocketAddr,
}

impl Bound {
    /// Listens on `addr`. Fails (with the address in the message) if it cannot be bound.
    pub fn new(addr: SocketAddr) -> io::Result<Bound> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| io::Error::other(format!("--metrics {addr}: {e}")))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other(format!("--metrics {addr}: not an IP address")))?;
        Ok(Bound { server, addr })
    }

    /// Serves `profiler`'s snapshots from now on.
    pub fn serve(self, profiler: Arc<Profiler>, native: bool) -> io::Result<Endpoint> {
        let server = Arc::new(self.server);
        let s = server.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || serve(&s, &profiler, native))?;
        Ok(Endpoint {
            server,
            thread: Some(thread),
            addr: self.addr,
        })
    }
}

impl Endpoint {
    /// The address it listens on (with the port chosen when `:0` was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests until the server is unblocked.
fn serve(server: &tiny_http::Server, profiler: &Profiler, native: bool) {
    let hz = ClockInfo::get().cycles_per_sec;
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        let response = match (req.method(), path) {
            (tiny_http::Method::Get, "/metrics") if native && wants_protobuf(&req) => {
                let body = native::exposition(&profiler.live_snapshot(), hz);
                tiny_http::Response::from_data(body).with_header(header(native::CONTENT_TYPE))
            }
            (tiny_http::Method::Get, "/metrics") => {
                let text = profile_store::prometheus::exposition(&profiler.live_snapshot(), hz);
                tiny_http::Response::from_string(text).with_header(header(CONTENT_TYPE))
            }
            (tiny_http::Method::Get, _) => {
                tiny_http::Response::from_string("not found: the metrics are at /metrics\n")
                    .with_status_code(404)
            }
            _ => tiny_http::Response::from_string("only GET\n").with_status_code(405),
        };
        if let Err(e) = req.respond(response) {
            log::debug!("metrics: {e}");
        }
    }
}

/// Whether the scraper accepts the protobuf exposition (Prometheus lists it first when native
/// histograms are on).
fn wants_protobuf(req: &tiny_http::Request) -> bool {
    req.headers().iter().any(|h| {
        h.field.equiv("Accept") && h.value.as_str().contains("application/vnd.google.protobuf")
    })
}

fn header(content_type: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
        .expect("a valid constant header")
}
