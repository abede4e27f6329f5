//! What the bench's servers make of the bytes a client sends, as pure functions over
//! bytes (standard library only): the framing of a request up to its end marker
//! ([`Framer`]), the metrics endpoint's request head ([`http_route`]) and the buffer-cache
//! socket's request line ([`view_name`]). `serve.rs`, `metrics_http.rs` and
//! `buffercache.rs` do the I/O around them; the `http_request` and `socket_request` fuzz
//! targets (fuzz/src/lib.rs includes this file) run exactly this code.
//!
//! Invariants: a request never holds more than [`REQUEST_BYTES_MAX`] bytes plus one read
//! chunk before it is refused; nothing here allocates what the input says, panics, or
//! reads past what it was given.

/// Most bytes a request may take: a request line with its headers, or a view's name.
/// PostgreSQL's own limit on a startup packet is 10,000 bytes; an HTTP scraper's request
/// is a few hundred.
pub const REQUEST_BYTES_MAX: usize = 8 << 10;

/// What a request's bytes amount to so far ([`Framer::push`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framed {
    /// No end marker yet, and within the limit: read on.
    More,
    /// The request is complete: [`Framer::into_request`] gives it, up to and including
    /// the first end marker.
    Done,
    /// More than [`REQUEST_BYTES_MAX`] bytes without an end marker.
    TooLong,
}

/// A request being read: the bytes up to the first `end` (a newline; HTTP's blank line).
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    end: &'static [u8],
}

impl Framer {
    /// `end` must not be empty.
    pub fn new(end: &'static [u8]) -> Framer {
        assert!(!end.is_empty(), "a request needs an end marker");
        Framer {
            buf: Vec::new(),
            end,
        }
    }

    /// Adds the next bytes read. Once it says `Done` or `TooLong` the request is over.
    pub fn push(&mut self, chunk: &[u8]) -> Framed {
        // The marker may straddle the chunks: look from just before the new bytes.
        let from = self.buf.len().saturating_sub(self.end.len() - 1);
        self.buf.extend_from_slice(chunk);
        let end = self.end;
        if let Some(i) = self.buf[from..].windows(end.len()).position(|w| w == end) {
            self.buf.truncate(from + i + end.len());
            return Framed::Done;
        }
        if self.buf.len() > REQUEST_BYTES_MAX {
            return Framed::TooLong;
        }
        Framed::More
    }

    /// The bytes so far (after `Done`: the request, its end marker included).
    pub fn into_request(self) -> Vec<u8> {
        self.buf
    }
}

/// Where the metrics endpoint sends a request, by its request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics`.
    Metrics,
    /// `GET` of anything else.
    NotFound,
    /// Any other method, or no request line.
    MethodNotAllowed,
}

/// The route of an HTTP request head: its first line's method and path (any bytes; what
/// is not UTF-8 matches nothing).
pub fn http_route(head: &[u8]) -> Route {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    match (words.next(), words.next()) {
        (Some(b"GET"), Some(b"/metrics")) => Route::Metrics,
        (Some(b"GET"), _) => Route::NotFound,
        _ => Route::MethodNotAllowed,
    }
}

/// The buffer-cache socket's views, by their request names.
pub const VIEW_NAMES: [&str; 4] = ["rows", "summary", "usage-counts", "relations"];

/// The view a request line names (surrounding white space ignored), if it names one.
pub fn view_name(line: &[u8]) -> Option<&'static str> {
    let line = line.trim_ascii();
    VIEW_NAMES.into_iter().find(|n| n.as_bytes() == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_ends_at_its_first_marker_even_across_chunks() {
        let mut f = Framer::new(b"\r\n\r\n");
        assert_eq!(f.push(b"GET /metrics HTTP/1.1\r\n\r"), Framed::More);
        assert_eq!(f.push(b"\nextra"), Framed::Done);
        assert_eq!(f.into_request(), b"GET /metrics HTTP/1.1\r\n\r\n");
        let mut f = Framer::new(b"\n");
        assert_eq!(f.push(&vec![b'x'; REQUEST_BYTES_MAX]), Framed::More);
        assert_eq!(f.push(b"x"), Framed::TooLong);
    }

    #[test]
    fn routes_and_views() {
        assert_eq!(http_route(b"GET /metrics HTTP/1.1\r\n"), Route::Metrics);
        assert_eq!(http_route(b"GET / HTTP/1.1\r\n"), Route::NotFound);
        assert_eq!(http_route(b"POST /metrics"), Route::MethodNotAllowed);
        assert_eq!(http_route(b""), Route::MethodNotAllowed);
        assert_eq!(view_name(b" usage-counts\n"), Some("usage-counts"));
        assert_eq!(view_name(b"rows \xff"), None);
    }
}
