//! `bufpool bench --metrics-addr 127.0.0.1:PORT`: the engine's counters served for a
//! scrape while the run goes, as OpenMetrics text (`bufpool::metrics`), on loopback only.
//!
//! One scoped thread accepts connections one at a time (a scraper's), reads the request
//! head, and answers `GET /metrics` with the samples of that moment (200), anything else
//! with 404 or 405; each connection is closed after its answer. The address must be a
//! loopback one (an endpoint with no authentication must not face a network); port 0
//! takes a free port, and the address bound is printed on stderr. The thread ends when the
//! run ends ([`Endpoint::stop`]: a flag, and a connection of its own to wake the accept).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

use anyhow::{Context, Result};
use bufpool::Engine;

use crate::commands::KnobError;

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

/// The serving thread of one run.
pub struct Endpoint<'scope> {
    addr: SocketAddr,
    stop: &'scope AtomicBool,
    thread: ScopedJoinHandle<'scope, ()>,
}

impl Endpoint<'_> {
    /// Ends the thread (after the answer it may be writing).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = self.thread.join();
    }
}

/// Binds `addr` and serves `engine`'s metrics on a thread of `scope` until stopped.
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
        for conn in listener.incoming() {
            if stop.load(Ordering::Acquire) {
                break;
            }
            if let Ok(conn) = conn {
                // A scraper that goes away mid-answer costs nothing but its answer.
                let _ = answer(engine, conn);
            }
        }
    });
    Ok(Endpoint { addr, stop, thread })
}

fn answer(engine: &Engine, conn: TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(&conn);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The rest of the head, up to the blank line (headers are not needed).
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut words = request.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            bufpool::metrics::render_openmetrics(&bufpool::metrics::samples(engine)),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain",
            "only /metrics is served\n".into(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET is served\n".into(),
        ),
    };
    let mut out = std::io::BufWriter::new(&conn);
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
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
