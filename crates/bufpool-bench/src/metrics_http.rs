//! `bufpool bench --metrics-addr 127.0.0.1:PORT`: the engine's counters served for a
//! scrape while the run goes, as OpenMetrics text (`bufpool::metrics`), on loopback only.
//!
//! A scoped thread accepts connections (`serve::accept_until`: a few at once, each answered
//! on a scoped thread of its own), reads the request head (at most
//! `serve::REQUEST_BYTES_MAX` bytes, within `serve::CONNECTION_DEADLINE` for the request
//! and the answer together), and answers `GET /metrics` with the samples of that moment
//! (200), anything else with 404 or 405, a request too large or too slow with 400 or
//! nothing; each connection is closed after its answer. The address must be a loopback
//! one (an endpoint with no authentication must not face a network); port 0 takes a free
//! port, and the address bound is printed on stderr. The accept thread ends when the run
//! ends or unwinds ([`Endpoint`] sets its flag when dropped: a client's panic ends the
//! run instead of leaving the scope waiting for this thread), within a tick; a connection
//! being answered then ends within its deadline.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Instant;

use anyhow::{Context, Result};
use bufpool::Engine;

use crate::knobs::KnobError;
use crate::serve;

/// `--metrics-addr`'s value: a loopback socket address, or a one-line error.
pub fn parse_loopback(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text
        .parse()
        .map_err(|e| format!("--metrics-addr {text:?}: {e} (want 127.0.0.1:PORT or [::1]:PORT)"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--metrics-addr {text}: only a loopback address (127.0.0.1, ::1) is served; the \
             endpoint has no authentication"
        ));
    }
    Ok(addr)
}

/// The serving thread of one run; stops it when dropped.
pub struct Endpoint<'scope> {
    stop: &'scope AtomicBool,
    thread: Option<ScopedJoinHandle<'scope, ()>>,
}

impl Endpoint<'_> {
    /// Ends the accept thread (within `serve::ACCEPT_TICK`).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Endpoint<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds `addr` and serves `engine`'s metrics on threads of `scope` until stopped.
pub fn serve<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    engine: &'env Engine,
    addr: SocketAddr,
    stop: &'scope AtomicBool,
) -> Result<Endpoint<'scope>> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| KnobError(format!("--metrics-addr {addr}: cannot listen: {e}")))?;
    let addr = listener
        .local_addr()
        .context("the metrics listener's address")?;
    eprintln!("metrics: serving http://{addr}/metrics (OpenMetrics)");
    let thread = scope.spawn(move || {
        let accepted = serve::accept_until(&listener, stop, |conn, slot| {
            scope.spawn(move || {
                // A scraper that goes away or stalls costs nothing but its answer.
                let _ = answer(engine, conn);
                drop(slot);
            });
        });
        if let Err(e) = accepted {
            eprintln!("metrics: not serving: {e}");
        }
    });
    Ok(Endpoint {
        stop,
        thread: Some(thread),
    })
}

/// The answer to `request` (a request head): status, content type, body.
fn respond(engine: &Engine, request: &[u8]) -> (&'static str, &'static str, String) {
    use crate::requests::{http_route, Route};
    match http_route(request) {
        Route::Metrics => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            bufpool::metrics::render_openmetrics(&bufpool::metrics::samples(engine)),
        ),
        Route::NotFound => (
            "404 Not Found",
            "text/plain",
            "only /metrics is served\n".into(),
        ),
        Route::MethodNotAllowed => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET is served\n".into(),
        ),
    }
}

fn answer(engine: &Engine, mut conn: TcpStream) -> std::io::Result<()> {
    let deadline = Instant::now() + serve::CONNECTION_DEADLINE;
    let (status, kind, body) = match serve::read_request(&mut conn, b"\r\n\r\n", deadline) {
        Ok(request) => respond(engine, &request),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            ("400 Bad Request", "text/plain", format!("{e}\n"))
        }
        Err(e) => return Err(e),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    serve::write_answer(
        &mut conn,
        &[head.as_bytes(), body.as_bytes()].concat(),
        deadline,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_taken() {
        assert!(parse_loopback("127.0.0.1:9187").is_ok());
        assert!(parse_loopback("[::1]:0").is_ok());
        let e = parse_loopback("0.0.0.0:9187").unwrap_err();
        assert!(e.contains("loopback"), "{e}");
        let e = parse_loopback("localhost").unwrap_err();
        assert!(e.contains("127.0.0.1:PORT"), "{e}");
    }
}
