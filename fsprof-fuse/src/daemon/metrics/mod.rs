//! The `--metrics ADDR` endpoint: `GET /metrics` answers the live profile in the Prometheus text
//! exposition format ([`profile_store::prometheus`]).
//!
//! It runs on a thread of its own and reads snapshots of the profiler (its counters are read
//! without locks), so a scrape never blocks a file-system request. With `--metrics-native`, a
//! scraper that asks for the protobuf format gets native histograms ([`native`]). The HTTP
//! server and its limits (connections, request head size and time, no request body, write
//! timeout, its own descriptor budget), which keep any client from hurting the file system, are
//! [`server`]'s.

pub mod native;
pub mod server;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::ACCEPT;
use hyper::{Method, Request, Response, StatusCode};
use profile_store::{ClockInfo, Profiler};

use crate::layers::access::{self, Policy, ProcRule, View};

pub use server::Limits;

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A running endpoint; stopped (its connections closed, its thread joined) when dropped.
pub struct Endpoint {
    _server: server::Server,
    addr: SocketAddr,
}

/// An endpoint's address, bound and listening, not yet answering: bound before the file
/// system is set up, so that an address that cannot be had changes nothing (raif would have
/// formatted its branches). Connections that arrive meanwhile wait in the kernel's queue.
pub struct Bound {
    listener: server::Listener,
    addr: SocketAddr,
}

impl Bound {
    /// Listens on `addr`. Fails (with the address in the message) if it cannot be bound.
    pub fn new(addr: SocketAddr) -> io::Result<Bound> {
        let at = |e: io::Error| io::Error::new(e.kind(), format!("--metrics {addr}: {e}"));
        let listener = server::Listener::bind(addr).map_err(at)?;
        let addr = listener.local_addr().map_err(at)?;
        Ok(Bound { listener, addr })
    }

    /// Serves `profiler`'s snapshots from now on, within the default [`Limits`]: everything
    /// to a scrape with the `token`, what `policy` shows every user to any other
    /// ([`crate::layers::access`]).
    pub fn serve(
        self,
        profiler: Arc<Profiler>,
        native: bool,
        policy: Policy,
        token: Option<String>,
    ) -> io::Result<Endpoint> {
        let hz = ClockInfo::get().cycles_per_sec;
        let handler = Arc::new(move |req: &Request<Incoming>, trusted: bool| {
            answer(req, &profiler, &policy, trusted, native, hz)
        });
        let server = self
            .listener
            .serve("metrics", Limits::default(), token, handler)?;
        Ok(Endpoint {
            _server: server,
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

/// The answer to `req`: the exposition at `GET /metrics`, `404` elsewhere, `405` for other
/// methods.
fn answer(
    req: &Request<Incoming>,
    profiler: &Profiler,
    policy: &Policy,
    trusted: bool,
    native: bool,
    hz: u64,
) -> Response<Full<Bytes>> {
    let metrics = req.uri().path() == "/metrics";
    let snapshot = || {
        let p = profiler.live_snapshot();
        match (trusted, policy.share) {
            (true, _) => p,
            (false, false) => access::profile(p, View::Plain, None),
            (false, true) => {
                let mut f = access::Filter::new(None, ProcRule::current(), policy);
                access::profile(p, View::Shared, Some(&mut f))
            }
        }
    };
    match *req.method() {
        Method::GET if metrics && native && wants_protobuf(req) => {
            let body = native::exposition(&snapshot(), hz);
            server::with_type(StatusCode::OK, native::CONTENT_TYPE, body.into())
        }
        Method::GET if metrics => {
            let text = profile_store::prometheus::exposition(&snapshot(), hz);
            server::with_type(StatusCode::OK, CONTENT_TYPE, text.into())
        }
        Method::GET => server::text(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        ),
        _ => server::text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n"),
    }
}

/// Whether the scraper accepts the protobuf exposition (Prometheus lists it first when native
/// histograms are on).
fn wants_protobuf(req: &Request<Incoming>) -> bool {
    req.headers().get_all(ACCEPT).iter().any(|v| {
        v.as_bytes()
            .windows(PROTOBUF.len())
            .any(|w| w == PROTOBUF.as_bytes())
    })
}

/// What an `Accept` header names to ask for the protobuf exposition.
const PROTOBUF: &str = "application/vnd.google.protobuf";
