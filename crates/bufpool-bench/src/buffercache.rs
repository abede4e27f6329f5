//! `bufpool buffercache`: pg_buffercache's views of a data directory's pool, and the
//! socket through which a running `bufpool bench` serves them.
//!
//! How a running pool is reached: while `bench` (or any run through `run_tpcb`) has a
//! directory open, it listens on the Unix socket `<pgdata>/bufpool.sock` (as PostgreSQL
//! listens on `.s.PGSQL.5432`). A client connects, writes one line naming a view (`rows`,
//! `summary`, `usage-counts`, `relations`) and reads the view back as one JSON document; the
//! server answers one request per connection, a few connections at once, each on its own
//! thread within a deadline and with a bounded request (`serve`), from the library's views
//! (`BufferPool::buffercache` and friends: no stop of the world, each row consistent for
//! its buffer). The socket is made readable and writable by its owner only, and a client
//! of another user is refused (its credentials, SO_PEERCRED). The socket is removed when the run ends; one left by a killed process is
//! replaced by the next run (the directory lock says nobody else has the directory).
//!
//! A stopped directory has no pool. The command then shows the block list that autoprewarm
//! last saved (`autoprewarm.blocks`: what the pool held then, without usage counts or
//! dirtiness), or says that nothing was saved.

use std::io::BufReader;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bufpool::buffer::cache_view;
use bufpool::BufferPool;
use serde::{Deserialize, Serialize};

/// `bufpool buffercache`'s flags.
#[derive(Debug, clap::Args)]
pub struct BuffercacheArgs {
    /// pg_buffercache_summary: used, unused, dirty and pinned buffers, mean usage count.
    #[arg(long, group = "view")]
    pub summary: bool,
    /// pg_buffercache_usage_counts: buffers, dirty and pinned per usage count.
    #[arg(long = "usage-counts", group = "view")]
    pub usage_counts: bool,
    /// Buffers, dirty and pinned buffers and mean usage count per relation fork.
    #[arg(long, group = "view")]
    pub relations: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Data directory.
    #[arg(short = 'D', long = "pgdata", default_value = "bufpool-data")]
    pub dir: PathBuf,
}

impl BuffercacheArgs {
    /// The view the flags ask for (one row per buffer without any).
    pub fn view(&self) -> View {
        match (self.summary, self.usage_counts, self.relations) {
            (true, _, _) => View::Summary,
            (_, true, _) => View::UsageCounts,
            (_, _, true) => View::Relations,
            _ => View::Rows,
        }
    }
}

/// The socket's file name in the data directory.
pub const SOCKET: &str = "bufpool.sock";

/// Which view to show (the command's flags; the socket's request line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    Rows,
    Summary,
    UsageCounts,
    Relations,
}

impl View {
    fn request(self) -> &'static str {
        match self {
            View::Rows => "rows",
            View::Summary => "summary",
            View::UsageCounts => "usage-counts",
            View::Relations => "relations",
        }
    }

    /// The view a request line names (`requests::view_name`).
    fn parse(line: &[u8]) -> Option<View> {
        let name = crate::requests::view_name(line)?;
        [
            View::Rows,
            View::Summary,
            View::UsageCounts,
            View::Relations,
        ]
        .into_iter()
        .find(|v| v.request() == name)
    }
}

/// One pg_buffercache row with PostgreSQL's column names (`bufferid` from 1, as there);
/// the page's columns are null for an unused buffer. `ring`: the kind of ring that loaded
/// the page (bulkread, bulkwrite, vacuum), bufpool's addition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub bufferid: u32,
    pub relfilenode: Option<u32>,
    pub reltablespace: Option<u32>,
    pub relforknumber: Option<u8>,
    pub relblocknumber: Option<u32>,
    pub isdirty: Option<bool>,
    pub usagecount: Option<u8>,
    pub pinning_backends: Option<u32>,
    pub ring: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub buffers_used: u64,
    pub buffers_unused: u64,
    pub buffers_dirty: u64,
    pub buffers_pinned: u64,
    pub usagecount_avg: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageCount {
    pub usage_count: u8,
    pub buffers: u64,
    pub dirty: u64,
    pub pinned: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    pub relfilenode: u32,
    pub reltablespace: u32,
    pub relforknumber: u8,
    pub buffers: u64,
    pub dirty: u64,
    pub pinned: u64,
    pub usagecount_avg: f64,
    /// Share of the pool's buffers, percent.
    pub pool_pct: f64,
}

/// A view's answer: what the socket sends and `--json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Rows(Vec<Row>),
    Summary(Summary),
    UsageCounts(Vec<UsageCount>),
    Relations(Vec<Relation>),
    /// A stopped directory: the blocks autoprewarm saved, oldest save first.
    SavedBlocks {
        saved_at: String,
        rows: Vec<Row>,
    },
}

/// Computes `view` from a live pool.
pub fn answer(pool: &BufferPool, view: View) -> Answer {
    match view {
        View::Rows => Answer::Rows(pool.buffercache().iter().map(row).collect()),
        View::Summary => {
            let s = pool.buffercache_summary();
            Answer::Summary(Summary {
                buffers_used: s.buffers_used,
                buffers_unused: s.buffers_unused,
                buffers_dirty: s.buffers_dirty,
                buffers_pinned: s.buffers_pinned,
                usagecount_avg: s.usagecount_avg,
            })
        }
        View::UsageCounts => Answer::UsageCounts(
            pool.buffercache_usage_counts()
                .iter()
                .map(|u| UsageCount {
                    usage_count: u.usage_count,
                    buffers: u.buffers,
                    dirty: u.dirty,
                    pinned: u.pinned,
                })
                .collect(),
        ),
        View::Relations => {
            let nbuffers = pool.nbuffers() as f64;
            let rows = pool.buffercache();
            Answer::Relations(
                cache_view::relations(&rows)
                    .iter()
                    .map(|r| Relation {
                        relfilenode: r.rel.relation,
                        reltablespace: r.rel.tablespace,
                        relforknumber: r.fork as u8,
                        buffers: r.buffers,
                        dirty: r.dirty,
                        pinned: r.pinned,
                        usagecount_avg: r.usage_sum as f64 / r.buffers.max(1) as f64,
                        pool_pct: 100.0 * r.buffers as f64 / nbuffers,
                    })
                    .collect(),
            )
        }
    }
}

fn row(r: &cache_view::BufferCacheRow) -> Row {
    let used = r.tag.is_some();
    Row {
        bufferid: r.buffer + 1,
        relfilenode: r.tag.map(|t| t.rel.relation),
        reltablespace: r.tag.map(|t| t.rel.tablespace),
        relforknumber: r.tag.map(|t| t.fork as u8),
        relblocknumber: r.tag.map(|t| t.block),
        isdirty: used.then_some(r.isdirty),
        usagecount: used.then_some(r.usagecount),
        pinning_backends: used.then_some(r.pinning_backends),
        ring: r.ring.map(|k| k.name().to_string()),
    }
}

/// The socket server of one run; stops and removes the socket when dropped.
pub struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Serves the views of `pool` on `<dir>/bufpool.sock` until the returned server is
/// dropped. The caller holds the directory lock, so a socket file already there is a dead
/// run's and is replaced. A socket that cannot be made (a path too long for a socket
/// address, a read-only directory) costs the run nothing but the views: it says so on
/// stderr and returns `None`.
pub fn serve(pool: Arc<BufferPool>, dir: &Path) -> Option<Server> {
    let path = dir.join(SOCKET);
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path).and_then(|l| {
        // The owner's only (the umask may leave it open to the group or to everyone);
        // a client of another user that connected before this is refused by its
        // credentials anyway.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(l)
    }) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "buffercache: not serving the pool's views: binding {}: {e}",
                path.display()
            );
            return None;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("buffercache".into())
        .spawn(move || {
            let accepted = crate::serve::accept_until(&listener, &stop2, |conn, slot| {
                let pool = pool.clone();
                // Detached: it ends within the connection's deadline.
                let _ = std::thread::Builder::new()
                    .name("buffercache answer".into())
                    .spawn(move || {
                        // A client that goes away or stalls is its own problem.
                        let _ = answer_one(&pool, conn);
                        drop(slot);
                    });
            });
            if let Err(e) = accepted {
                eprintln!("buffercache: not serving the pool's views: {e}");
            }
        })
        .ok()?;
    Some(Server {
        path,
        stop,
        thread: Some(thread),
    })
}

/// The user id of the process at the other end of `conn` (SO_PEERCRED).
fn peer_uid(conn: &UnixStream) -> std::io::Result<libc::uid_t> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given, for the call's
    // duration; the descriptor is `conn`'s, open while it is borrowed.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

fn answer_one(pool: &BufferPool, mut conn: UnixStream) -> std::io::Result<()> {
    let deadline = Instant::now() + crate::serve::CONNECTION_DEADLINE;
    // SAFETY: geteuid has no preconditions.
    let own = unsafe { libc::geteuid() };
    let peer = peer_uid(&conn)?;
    let answer = match crate::serve::read_request(&mut conn, b"\n", deadline) {
        // Refused after its request is read, so that the client reads the refusal rather
        // than a reset.
        Ok(_) if peer != own => serde_json::to_vec(&serde_json::json!({
            "error": format!("user {peer} may not read the pool of user {own}'s run")
        })),
        Ok(line) => match View::parse(&line) {
            Some(view) => serde_json::to_vec(&answer(pool, view)),
            None => serde_json::to_vec(&serde_json::json!({
                "error": format!(
                    "unknown view {:?}: rows, summary, usage-counts or relations",
                    String::from_utf8_lossy(line.trim_ascii())
                )
            })),
        },
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            serde_json::to_vec(&serde_json::json!({ "error": e.to_string() }))
        }
        Err(e) => return Err(e),
    }
    .map_err(std::io::Error::other)?;
    crate::serve::write_answer(&mut conn, &answer, deadline)
}

impl Drop for Server {
    fn drop(&mut self) {
        // The accept loop sees the flag within a tick; no connection (and no socket file)
        // is needed to wake it.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Asks the run serving `dir` for `view`. `Ok(None)`: nobody serves it (no socket, or a
/// dead run's).
pub fn ask(dir: &Path, view: View) -> Result<Option<Answer>> {
    let path = dir.join(SOCKET);
    let conn = match UnixStream::connect(&path) {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    };
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    // Through the servers' writer (MSG_NOSIGNAL): a server that closed the connection
    // is an error here, not a SIGPIPE.
    let mut conn = conn;
    let deadline = Instant::now() + crate::serve::CONNECTION_DEADLINE;
    crate::serve::write_answer(
        &mut conn,
        format!("{}\n", view.request()).as_bytes(),
        deadline,
    )
    .with_context(|| format!("asking {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_reader(BufReader::new(&conn))
        .with_context(|| format!("reading the answer from {}", path.display()))?;
    if let Some(e) = v.get("error") {
        bail!("{}: {e}", path.display());
    }
    Ok(Some(serde_json::from_value(v)?))
}

/// `bufpool buffercache`: asks the run serving `dir`, or shows the saved block list of a
/// stopped directory.
pub fn run(dir: &Path, view: View, json: bool) -> Result<()> {
    if !dir.join("bufpool.meta").exists() {
        bail!(
            "{} is not a bufpool data directory (no bufpool.meta)",
            dir.display()
        );
    }
    let answer = match ask(dir, view)? {
        Some(a) => a,
        None if crate::dirlock::in_use(dir)? => bail!(
            "{} is open in a process that does not serve its buffer cache (only `bufpool \
             bench` listens on {SOCKET})",
            dir.display()
        ),
        None => saved_blocks(dir, view)?,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        print!("{}", render(&answer));
    }
    Ok(())
}

/// A stopped directory's answer: autoprewarm's saved list, or an error saying why there is
/// nothing to show.
fn saved_blocks(dir: &Path, view: View) -> Result<Answer> {
    let vfs = bufpool::RealVfs::new();
    // The pool the directory is configured for bounds the list it can have saved.
    let (config, _) = crate::knobs::load_config(dir, &[])?;
    let max = config.nbuffers() as u64;
    let Some(saved) = bufpool::engine::prewarm::read_saved(&vfs, dir, max)? else {
        bail!(
            "{} is not running (no process holds it), so its pool is empty, and no block \
             list was saved (autoprewarm = off)",
            dir.display()
        );
    };
    if view != View::Rows {
        eprintln!(
            "buffercache: {} is not running; the {} view needs a live pool, showing the \
             block list autoprewarm saved instead",
            dir.display(),
            view.request()
        );
    }
    let saved_at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(saved.saved_at_unix),
    )
    .to_string();
    let rows = saved
        .blocks
        .iter()
        .map(|t| Row {
            bufferid: 0,
            relfilenode: Some(t.rel.relation),
            reltablespace: Some(t.rel.tablespace),
            relforknumber: Some(t.fork as u8),
            relblocknumber: Some(t.block),
            isdirty: None,
            usagecount: None,
            pinning_backends: None,
            ring: None,
        })
        .collect();
    Ok(Answer::SavedBlocks { saved_at, rows })
}

/// psql-like text of an answer.
pub fn render(a: &Answer) -> String {
    fn opt<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map_or_else(String::new, T::to_string)
    }
    let mut out = String::new();
    let mut line = |cols: Vec<String>| {
        out.push_str(cols.join(" | ").trim_end());
        out.push('\n');
    };
    let row_line = |r: &Row| {
        vec![
            format!("{:>8}", r.bufferid),
            format!("{:>11}", opt(&r.relfilenode)),
            format!("{:>13}", opt(&r.reltablespace)),
            format!("{:>13}", opt(&r.relforknumber)),
            format!("{:>14}", opt(&r.relblocknumber)),
            format!("{:<7}", opt(&r.isdirty.map(|d| if d { "t" } else { "f" }))),
            format!("{:>10}", opt(&r.usagecount)),
            format!("{:>16}", opt(&r.pinning_backends)),
            opt(&r.ring),
        ]
    };
    const ROW_HEAD: &str = "bufferid | relfilenode | reltablespace | relforknumber | \
                            relblocknumber | isdirty | usagecount | pinning_backends | ring";
    match a {
        Answer::Rows(rows) => {
            line(vec![ROW_HEAD.into()]);
            rows.iter().for_each(|r| line(row_line(r)));
            line(vec![format!("({} rows)", rows.len())]);
        }
        Answer::SavedBlocks { saved_at, rows } => {
            line(vec![format!(
                "not running: the block list autoprewarm saved at {saved_at} ({} blocks; \
                 bufferid, isdirty, usagecount and pinning_backends are not saved)",
                rows.len()
            )]);
            line(vec![ROW_HEAD.into()]);
            rows.iter().for_each(|r| line(row_line(r)));
        }
        Answer::Summary(s) => {
            line(vec![
                "buffers_used | buffers_unused | buffers_dirty | buffers_pinned | usagecount_avg"
                    .into(),
            ]);
            line(vec![
                format!("{:>12}", s.buffers_used),
                format!("{:>14}", s.buffers_unused),
                format!("{:>13}", s.buffers_dirty),
                format!("{:>14}", s.buffers_pinned),
                format!("{:>14.3}", s.usagecount_avg),
            ]);
        }
        Answer::UsageCounts(u) => {
            line(vec!["usage_count | buffers | dirty | pinned".into()]);
            for r in u {
                line(vec![
                    format!("{:>11}", r.usage_count),
                    format!("{:>7}", r.buffers),
                    format!("{:>5}", r.dirty),
                    format!("{:>6}", r.pinned),
                ]);
            }
        }
        Answer::Relations(rels) => {
            line(vec![
                "relfilenode | reltablespace | relforknumber | buffers | dirty | pinned | \
                 usagecount_avg | pool_pct"
                    .into(),
            ]);
            for r in rels {
                line(vec![
                    format!("{:>11}", r.relfilenode),
                    format!("{:>13}", r.reltablespace),
                    format!("{:>13}", r.relforknumber),
                    format!("{:>7}", r.buffers),
                    format!("{:>5}", r.dirty),
                    format!("{:>6}", r.pinned),
                    format!("{:>14.2}", r.usagecount_avg),
                    format!("{:>8.1}", r.pool_pct),
                ]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::{BufferTag, Config, ForkNumber, RealVfs, RelFileId};
    use std::io::Write as _;

    fn pool(dir: &Path) -> Arc<BufferPool> {
        let mut c = Config::default();
        c.set("shared_buffers", "32").unwrap();
        let p = BufferPool::open(Arc::new(RealVfs::new()), dir, &c, true).unwrap();
        let rel = RelFileId::new(0, 16384);
        p.create_relation(rel, ForkNumber::Main).unwrap();
        for _ in 0..5 {
            let b = p.extend(rel, ForkNumber::Main).unwrap();
            bufpool::page::init(&mut b.write(), 0);
        }
        drop(p.read(BufferTag::new(rel, ForkNumber::Main, 2)).unwrap());
        Arc::new(p)
    }

    #[test]
    fn the_socket_answers_every_view_as_the_pool_has_it() {
        let tmp = tempfile::tempdir().unwrap();
        let p = pool(tmp.path());
        let server = serve(p.clone(), tmp.path()).expect("serving");
        for view in [
            View::Rows,
            View::Summary,
            View::UsageCounts,
            View::Relations,
        ] {
            let got = ask(tmp.path(), view).unwrap().expect("an answer");
            assert_eq!(got, answer(&p, view), "{view:?}");
        }
        let Some(Answer::Summary(s)) = ask(tmp.path(), View::Summary).unwrap() else {
            panic!("not a summary");
        };
        assert_eq!(
            (s.buffers_used, s.buffers_dirty, s.buffers_unused),
            (5, 5, 27)
        );
        let text = render(&answer(&p, View::Rows));
        assert!(text.starts_with("bufferid | relfilenode"), "{text}");
        assert!(text.contains("(32 rows)"), "{text}");
        drop(server);
        assert!(!tmp.path().join(SOCKET).exists(), "the socket is removed");
        assert_eq!(ask(tmp.path(), View::Rows).unwrap(), None);
    }

    #[test]
    fn a_dead_runs_socket_is_replaced_and_a_bad_request_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let p = pool(tmp.path());
        // What a killed run leaves: a socket file nobody listens on.
        drop(UnixListener::bind(tmp.path().join(SOCKET)).unwrap());
        assert_eq!(ask(tmp.path(), View::Summary).unwrap(), None);
        let _server = serve(p, tmp.path()).expect("serving over the dead socket");
        let conn = UnixStream::connect(tmp.path().join(SOCKET)).unwrap();
        (&conn).write_all(b"everything\n").unwrap();
        let v: serde_json::Value = serde_json::from_reader(&conn).unwrap();
        assert!(v["error"].as_str().unwrap().contains("unknown view"), "{v}");
        assert!(ask(tmp.path(), View::Rows).unwrap().is_some());
    }

    /// The socket is its owner's only (0600 whatever the umask), and a client of another
    /// user that reaches it anyway (the mode opened up by hand) is refused by its
    /// credentials. The second half needs root to run a client as `nobody` (CI runs as
    /// root); without root only the mode is checked, and the test says so.
    #[test]
    fn the_socket_is_the_owners_and_another_users_client_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let p = pool(tmp.path());
        let path = tmp.path().join(SOCKET);
        let _server = serve(p, tmp.path()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: the other-user half of this test is not run");
            return;
        }
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let client = "import socket,sys\n\
                      s=socket.socket(socket.AF_UNIX)\n\
                      s.connect(sys.argv[1])\n\
                      s.sendall(b'summary\\n')\n\
                      sys.stdout.write(s.makefile().read())";
        let out = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                // The system interpreter: a per-user one (pyenv's) is not for others.
                "/usr/bin/python3",
                "-c",
            ])
            .arg(client)
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("user 65534 may not read"),
            "{v}"
        );
        assert!(
            ask(tmp.path(), View::Summary).unwrap().is_some(),
            "the owner is served"
        );
    }
}
