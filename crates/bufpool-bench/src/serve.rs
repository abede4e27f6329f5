//! What the bench's servers share (the metrics endpoint, `metrics_http`, and the buffer
//! cache socket, `buffercache`): every connection is hostile input, and no client can keep
//! the run from ending or grow its memory.
//!
//! Owns: the accept loop and the request reader. Invariants: the listener is non-blocking
//! and the loop looks at its stop flag at least every [`ACCEPT_TICK`], so stopping never
//! needs a connection of its own (nor the socket file to exist) and never waits on a
//! client; at most [`CONNECTIONS_MAX`] connections are answered at once, each on a thread
//! of its own (one beyond that is closed unanswered); a request is at most
//! [`REQUEST_BYTES_MAX`] bytes, and a connection gets [`CONNECTION_DEADLINE`] in all for
//! its request and its answer, after which its reads and writes fail. So a stopped server
//! is gone within a tick plus one deadline, whatever its clients do.
//! Locks: none; a counter of connections being answered (atomic).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::requests::REQUEST_BYTES_MAX;
use crate::requests::{Framed, Framer};

/// Time a connection gets for its request and its answer together: a scraper on the same
/// machine needs milliseconds; a client that trickles is cut off here.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(2);

/// Connections answered at once; one more is closed at once (a scraper or two, and a
/// `bufpool buffercache` now and then, never need more).
pub const CONNECTIONS_MAX: usize = 4;

/// How often the accept loop looks at its stop flag while no connection comes.
pub const ACCEPT_TICK: Duration = Duration::from_millis(100);

/// A listening socket the loop accepts from (TCP or Unix).
pub trait Listener: AsRawFd {
    type Conn: Connection;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
    fn accept_one(&self) -> io::Result<Self::Conn>;
}

/// An accepted connection: a byte stream with timeouts.
pub trait Connection: Read + Write + AsRawFd + Send + 'static {
    fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()>;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
}

macro_rules! listener {
    ($l:ty, $c:ty) => {
        impl Listener for $l {
            type Conn = $c;
            fn set_nonblocking(&self, on: bool) -> io::Result<()> {
                <$l>::set_nonblocking(self, on)
            }
            fn accept_one(&self) -> io::Result<$c> {
                self.accept().map(|(c, _)| c)
            }
        }
        impl Connection for $c {
            fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
                <$c>::set_read_timeout(self, d)
            }
            fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
                <$c>::set_write_timeout(self, d)
            }
            fn set_nonblocking(&self, on: bool) -> io::Result<()> {
                <$c>::set_nonblocking(self, on)
            }
        }
    };
}
listener!(std::net::TcpListener, std::net::TcpStream);
listener!(
    std::os::unix::net::UnixListener,
    std::os::unix::net::UnixStream
);

/// A place among the [`CONNECTIONS_MAX`] being answered, given back when dropped.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts connections on `listener` until `stop` is set, handing each (with its slot,
/// to be moved into the thread that answers it) to `spawn`; past [`CONNECTIONS_MAX`]
/// answered at once, a connection is closed unanswered. Returns within [`ACCEPT_TICK`] of
/// `stop`. Fails only if the listener cannot be made non-blocking.
pub fn accept_until<L: Listener>(
    listener: &L,
    stop: &AtomicBool,
    mut spawn: impl FnMut(L::Conn, Slot),
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        match listener.accept_one() {
            Ok(conn) => {
                if busy.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
                    busy.fetch_sub(1, Ordering::AcqRel);
                    continue; // dropped: closed unanswered
                }
                // An accepted socket may inherit the listener's non-blocking mode on
                // some systems: the answer's reads and writes wait with timeouts.
                if conn.set_nonblocking(false).is_ok() {
                    spawn(conn, Slot(busy.clone()));
                } else {
                    busy.fetch_sub(1, Ordering::AcqRel);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_readable(listener),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A connection that died before it was accepted, or descriptors run out for
            // a moment: wait a tick rather than spin.
            Err(_) => wait_readable(listener),
        }
    }
    Ok(())
}

/// Waits up to [`ACCEPT_TICK`] for `listener` to have a connection.
fn wait_readable(listener: &impl AsRawFd) {
    let mut p = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call's duration; the descriptor is the listener's,
    // open while `listener` is borrowed.
    unsafe { libc::poll(&mut p, 1, ACCEPT_TICK.as_millis() as libc::c_int) };
}

/// Reads a request from `conn` up to and including the first `end` (a newline; HTTP's
/// blank line), or what came before the client closed its side. Fails with `TimedOut`
/// once `deadline` passes and with `InvalidData` past [`REQUEST_BYTES_MAX`] bytes: the
/// buffer never grows beyond that.
pub fn read_request(
    conn: &mut impl Connection,
    end: &'static [u8],
    deadline: Instant,
) -> io::Result<Vec<u8>> {
    let mut framer = Framer::new(end);
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the request took longer than the connection's deadline",
            ));
        }
        conn.set_read_timeout(Some(left))?;
        let n = match conn.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, e))
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(framer.into_request());
        }
        match framer.push(&chunk[..n]) {
            Framed::More => {}
            Framed::Done => return Ok(framer.into_request()),
            Framed::TooLong => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a request of more than {REQUEST_BYTES_MAX} bytes"),
                ))
            }
        }
    }
}

/// Writes `bytes` to `conn` within what is left of `deadline`.
pub fn write_answer(conn: &mut impl Connection, bytes: &[u8], deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no time left to answer",
        ));
    }
    conn.set_write_timeout(Some(left))?;
    // send(2) with MSG_NOSIGNAL, not write(2): a client gone away is an EPIPE here, never
    // a SIGPIPE, which the program leaves at its default so that `bufpool ... | head` ends
    // quietly (see `main`).
    let fd = conn.as_raw_fd();
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: `fd` is the socket `conn` owns, open for the whole call; the pointer and
        // length are those of the live slice `rest`.
        let n = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, e))
                }
                _ => return Err(e),
            }
        }
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        rest = &rest[n as usize..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    fn pair() -> (UnixStream, UnixStream) {
        UnixStream::pair().unwrap()
    }

    #[test]
    fn a_request_ends_at_its_terminator_or_the_clients_close() {
        let (mut client, mut server) = pair();
        client
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nextra")
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let got = read_request(&mut server, b"\r\n\r\n", deadline).unwrap();
        assert_eq!(got, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let (mut client, mut server) = pair();
        client.write_all(b"summ").unwrap();
        client.write_all(b"ary\nmore").unwrap();
        assert_eq!(
            read_request(&mut server, b"\n", deadline).unwrap(),
            b"summary\n"
        );
        let (mut client, mut server) = pair();
        client.write_all(b"no end").unwrap();
        drop(client);
        assert_eq!(
            read_request(&mut server, b"\n", deadline).unwrap(),
            b"no end"
        );
    }

    #[test]
    fn a_flood_is_cut_at_the_limit_and_a_trickle_at_the_deadline() {
        let (client, mut server) = pair();
        let writer = std::thread::spawn(move || {
            let mut client = client;
            let chunk = vec![b'x'; 4096];
            // Ends when the server side closes (a broken pipe).
            while client.write_all(&chunk).is_ok() {}
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let e = read_request(&mut server, b"\n", deadline).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        drop(server);
        writer.join().unwrap();

        let (mut client, mut server) = pair();
        client.write_all(b"s").unwrap();
        let start = Instant::now();
        let e = read_request(&mut server, b"\n", start + Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_loop_stops_without_a_connection_and_limits_those_answered() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let stop = AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            let l = s.spawn(|| {
                accept_until(&listener, &stop, |conn, slot| {
                    // Held, unanswered, until the test lets go: every slot stays taken.
                    tx.send((conn, slot)).unwrap();
                })
            });
            let clients: Vec<UnixStream> = (0..CONNECTIONS_MAX + 2)
                .map(|_| UnixStream::connect(&path).unwrap())
                .collect();
            let held: Vec<_> = (0..CONNECTIONS_MAX)
                .map(|_| rx.recv_timeout(Duration::from_secs(30)).unwrap())
                .collect();
            // The two beyond the limit are closed unanswered: their reads see the end.
            let mut closed = 0;
            for mut c in clients.into_iter().skip(CONNECTIONS_MAX) {
                c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                let mut b = [0u8; 1];
                if c.read(&mut b).unwrap() == 0 {
                    closed += 1;
                }
            }
            assert_eq!(closed, 2);
            // The socket file removed, no connection to wake it: the loop still stops.
            std::fs::remove_file(&path).unwrap();
            stop.store(true, Ordering::Release);
            l.join().unwrap().unwrap();
            drop(held);
        });
    }
}
