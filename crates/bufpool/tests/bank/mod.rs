//! A bank on the engine, for crash tests: accounts on pages, transfers as single atomic
//! committed WAL records.
//!
//! Layout: relation `REL`, pages 0..ACCOUNT_PAGES hold `PER_PAGE` i64 balances each; page
//! `META` holds, per thread, the sequence number of its last committed transfer. Transfer
//! `k` of thread `t` is a pure function of (t, k), so after recovery the expected balances
//! are recomputed exactly from the recovered sequence numbers: a lost acknowledged
//! transfer, a half-applied one or an invented one all show as a mismatch. Optionally
//! each transfer also appends a page to a history relation (so the workload extends a
//! relation, creating segment files), and [`scratch_ddl`] creates, truncates and refills
//! a relation (unlinking and creating segment files).
#![allow(dead_code)]

use bufpool::wal::FLAG_COMMIT;
use bufpool::{BufferTag, Engine, EngineError, ForkNumber, RelFileId};

pub const REL: RelFileId = RelFileId::new(0, 700);
pub const ACCOUNT_PAGES: u32 = 8;
pub const PER_PAGE: u32 = 16;
pub const ACCOUNTS: u32 = ACCOUNT_PAGES * PER_PAGE;
pub const META: u32 = ACCOUNT_PAGES;
pub const MAX_THREADS: u32 = 16;
pub const INITIAL: i64 = 1_000;
const BODY: usize = bufpool::page::PAGE_HEADER_SIZE;

fn tag(b: u32) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, b)
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Transfer `k` of thread `t`: (from, to, amount).
pub fn transfer(t: u32, k: u64) -> (u32, u32, i64) {
    let h = mix((u64::from(t) << 40) ^ k);
    let from = (h % u64::from(ACCOUNTS)) as u32;
    let to = ((h >> 20) % u64::from(ACCOUNTS - 1)) as u32;
    let to = if to >= from { to + 1 } else { to };
    (from, to, ((h >> 40) % 100) as i64 + 1)
}

fn slot(account: u32) -> (u32, usize) {
    (account / PER_PAGE, BODY + 8 * (account % PER_PAGE) as usize)
}

fn get(p: &[u8], off: usize) -> i64 {
    i64::from_le_bytes(p[off..off + 8].try_into().unwrap())
}

fn put(p: &mut [u8], off: usize, v: i64) {
    p[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Creates the bank (pages logged, then a checkpoint).
pub fn init(e: &Engine) -> Result<(), EngineError> {
    e.pool().create_relation(REL, ForkNumber::Main)?;
    for b in 0..=META {
        let buf = e.pool().extend(REL, ForkNumber::Main)?;
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        if b < ACCOUNT_PAGES {
            for i in 0..PER_PAGE as usize {
                put(&mut g, BODY + 8 * i, INITIAL);
            }
        }
        let all = 0..g.len();
        let end = e.log_pages(0, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&all))])?;
        drop(g);
        e.commit(end)?;
    }
    e.checkpoint()?;
    Ok(())
}

/// The last committed sequence number of thread `t`.
pub fn seq(e: &Engine, t: u32) -> Result<u64, EngineError> {
    let buf = e.pool().read(tag(META))?;
    let g = buf.read();
    Ok(get(&g, BODY + 8 * t as usize) as u64)
}

/// Runs transfer `k` of thread `t` as one committed record; returns when it is durable.
pub fn run_transfer(e: &Engine, t: u32, k: u64) -> Result<(), EngineError> {
    run_transfer_logged(e, t, k, None)
}

/// [`run_transfer`] that also appends one page to [`HISTORY`] recording the transfer, in
/// the same record (so the history page and the balances commit together). `placed` is
/// told the new page's block as soon as the relation was extended.
pub fn run_transfer_with_history(
    e: &Engine,
    t: u32,
    k: u64,
    placed: &mut dyn FnMut(u32),
) -> Result<(), EngineError> {
    run_transfer_logged(e, t, k, Some(placed))
}

fn run_transfer_logged(
    e: &Engine,
    t: u32,
    k: u64,
    placed: Option<&mut dyn FnMut(u32)>,
) -> Result<(), EngineError> {
    let (from, to, amount) = transfer(t, k);
    // The history page first: extension is I/O (and may create a segment file); nobody
    // else locks a page that did not exist a moment ago.
    let hist = match placed {
        Some(placed) => {
            let buf = e.pool().extend(HISTORY, ForkNumber::Main)?;
            placed(buf.tag().block);
            Some(buf)
        }
        None => None,
    };
    let (pf, of) = slot(from);
    let (pt, ot) = slot(to);
    let mut blocks = vec![pf, pt, META];
    blocks.sort_unstable();
    blocks.dedup();
    let bufs = blocks
        .iter()
        .map(|&b| e.pool().read(tag(b)))
        .collect::<Result<Vec<_>, _>>()?;
    // Locks in ascending block order: no deadlock between threads.
    let mut guards: Vec<_> = bufs.iter().map(|b| b.write()).collect();
    let idx = |b: u32| blocks.iter().position(|&x| x == b).unwrap();
    let fv = get(&guards[idx(pf)], of);
    put(&mut guards[idx(pf)], of, fv - amount);
    let tv = get(&guards[idx(pt)], ot);
    put(&mut guards[idx(pt)], ot, tv + amount);
    let so = BODY + 8 * t as usize;
    put(&mut guards[idx(META)], so, k as i64);
    let mut ranges: Vec<Vec<std::ops::Range<usize>>> = vec![Vec::new(); blocks.len()];
    ranges[idx(pf)].push(of..of + 8);
    ranges[idx(pt)].push(ot..ot + 8);
    ranges[idx(META)].push(so..so + 8);
    let mut hist_guard = hist.as_ref().map(|b| b.write());
    let whole = 0..e.pool().page_size();
    if let Some(g) = hist_guard.as_mut() {
        bufpool::page::init(g, 0);
        let fields = [
            HISTORY_MAGIC,
            u64::from(t),
            k,
            u64::from(from),
            u64::from(to),
        ];
        for (i, v) in fields.into_iter().enumerate() {
            put(g, BODY + 8 * i, v as i64);
        }
        put(g, BODY + 40, amount);
    }
    let mut pages: Vec<(&mut bufpool::PageWriteGuard<'_>, &[std::ops::Range<usize>])> = guards
        .iter_mut()
        .zip(ranges.iter())
        .map(|(g, r)| (g, r.as_slice()))
        .collect();
    if let Some(g) = hist_guard.as_mut() {
        pages.push((g, std::slice::from_ref(&whole)));
    }
    let end = e.log_pages(t + 1, FLAG_COMMIT, &mut pages)?;
    drop(pages);
    drop(hist_guard);
    drop(guards);
    e.commit(end)
}

/// Checks the recovered bank: every acknowledged transfer present (`acked[t]` is the
/// highest acknowledged sequence of thread t), and balances equal to exactly the
/// transfers the sequence numbers say were committed. Returns the sequence numbers.
pub fn verify(e: &Engine, acked: &[u64]) -> Vec<u64> {
    let seqs: Vec<u64> = (0..MAX_THREADS).map(|t| seq(e, t).unwrap()).collect();
    for (t, &a) in acked.iter().enumerate() {
        assert!(
            seqs[t] >= a,
            "thread {t}: transfer {a} was acknowledged but recovery has only {}",
            seqs[t]
        );
    }
    let mut expect = vec![INITIAL; ACCOUNTS as usize];
    for (t, &n) in seqs.iter().enumerate() {
        for k in 1..=n {
            let (from, to, amount) = transfer(t as u32, k);
            expect[from as usize] -= amount;
            expect[to as usize] += amount;
        }
    }
    let mut total = 0;
    for a in 0..ACCOUNTS {
        let (p, off) = slot(a);
        let buf = e.pool().read(tag(p)).unwrap();
        let v = get(&buf.read(), off);
        assert_eq!(
            v, expect[a as usize],
            "account {a}: half-applied or lost transfer"
        );
        total += v;
    }
    assert_eq!(
        total,
        INITIAL * i64::from(ACCOUNTS),
        "money was created or destroyed"
    );
    seqs
}

/// Relation of the history pages (one page per transfer, when the workload keeps them).
pub const HISTORY: RelFileId = RelFileId::new(0, 701);
const HISTORY_MAGIC: u64 = 0x5452_414e_5346_4552;

/// Creates [`HISTORY`] (call before [`init`], whose checkpoint then covers it).
pub fn create_history(e: &Engine) -> Result<(), EngineError> {
    e.pool().create_relation(HISTORY, ForkNumber::Main)?;
    Ok(())
}

/// Checks [`HISTORY`] against the recovered sequence numbers `seqs`: every committed
/// transfer has exactly one history page and no other transfer has one. `placed` lists
/// (block, thread, sequence) for every page the workload added. A page that fails its
/// checksum is accepted only if the transfer that extended it did not commit (an unsynced
/// extension holds nothing acknowledged, so a power cut may leave any bytes there; reading
/// it reports the file and block). Returns (history pages, new pages, such unreadable
/// pages).
pub fn verify_history(e: &Engine, seqs: &[u64], placed: &[(u32, u32, u64)]) -> (u64, u64, u64) {
    let n = e.pool().nblocks(HISTORY, ForkNumber::Main).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let (mut pages, mut new, mut unreadable) = (0, 0, 0);
    for b in 0..n {
        let tag = BufferTag::new(HISTORY, ForkNumber::Main, b);
        let buf = match e.pool().read(tag) {
            Ok(buf) => buf,
            Err(err @ bufpool::BufferError::Corrupt { .. }) => {
                let owner = placed.iter().find(|p| p.0 == b);
                if let Some(&(_, t, k)) = owner {
                    assert!(
                        k > seqs[t as usize],
                        "history block {b} of committed transfer {k} of thread {t} is \
                         unreadable: {err}"
                    );
                }
                unreadable += 1;
                continue;
            }
            Err(err) => panic!("history block {b}: {err}"),
        };
        let g = buf.read();
        if bufpool::page::is_new(&g) {
            new += 1;
            continue;
        }
        let field = |i: usize| get(&g, BODY + 8 * i) as u64;
        assert_eq!(
            field(0),
            HISTORY_MAGIC,
            "history block {b}: not a history page"
        );
        let (t, k) = (field(1) as u32, field(2));
        let (from, to, amount) = transfer(t, k);
        assert_eq!(
            (field(3), field(4), get(&g, BODY + 40)),
            (u64::from(from), u64::from(to), amount),
            "history block {b}: wrong contents for transfer {k} of thread {t}"
        );
        assert!(
            k <= seqs[t as usize],
            "history block {b} records transfer {k} of thread {t}, which recovery says \
             never committed (it has {})",
            seqs[t as usize]
        );
        assert!(
            seen.insert((t, k)),
            "transfer {k} of thread {t} has two history pages"
        );
        pages += 1;
    }
    for (t, &seq) in seqs.iter().enumerate() {
        for k in 1..=seq {
            let block = placed
                .iter()
                .find(|p| (p.1, p.2) == (t as u32, k))
                .map(|p| p.0);
            assert!(
                seen.contains(&(t as u32, k)),
                "transfer {k} of thread {t} committed but its history page (block {block:?}) \
                 is gone: the history relation has {n} blocks after recovery"
            );
        }
    }
    (pages, new, unreadable)
}

/// Relation that [`scratch_ddl`] creates, fills, truncates and refills.
pub const SCRATCH: RelFileId = RelFileId::new(0, 702);
/// Pages [`scratch_ddl`] writes first (three 4-page segments with 16 kB segments).
pub const SCRATCH_PAGES_1: u32 = 10;
/// Pages [`scratch_ddl`] has in the end: page 0 of the first fill, then pages refilled.
pub const SCRATCH_PAGES_2: u32 = 6;

fn scratch_fill(e: &Engine, gen: u64, blocks: std::ops::Range<u32>) -> Result<(), EngineError> {
    let mut end = bufpool::Lsn(0);
    for b in blocks {
        let buf = e.pool().extend(SCRATCH, ForkNumber::Main)?;
        assert_eq!(buf.tag().block, b);
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put(&mut g, BODY, gen as i64);
        put(&mut g, BODY + 8, i64::from(b));
        let all = 0..g.len();
        end = e.log_pages(0, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&all))])?;
    }
    e.commit(end)?;
    e.checkpoint()?;
    Ok(())
}

/// DDL on [`SCRATCH`], with a checkpoint acknowledging each step (DDL is not WAL-logged:
/// a checkpoint makes it durable). `step(s)` is called as it goes: 1 when the relation,
/// created with [`SCRATCH_PAGES_1`] pages of generation 1, is checkpointed; 2 when its
/// truncation to one page (unlinking its later segments) begins; 3 when the truncation is
/// checkpointed; 4 when it is refilled with generation-2 pages to [`SCRATCH_PAGES_2`]
/// (creating a segment again) and checkpointed.
pub fn scratch_ddl(e: &Engine, step: &mut dyn FnMut(u32)) -> Result<(), EngineError> {
    e.pool().create_relation(SCRATCH, ForkNumber::Main)?;
    scratch_fill(e, 1, 0..SCRATCH_PAGES_1)?;
    step(1);
    step(2);
    e.pool().truncate_relation(SCRATCH, ForkNumber::Main, 1)?;
    e.checkpoint()?;
    step(3);
    scratch_fill(e, 2, 1..SCRATCH_PAGES_2)?;
    step(4);
    Ok(())
}

/// Checks [`SCRATCH`] after a crash given the last step [`scratch_ddl`] reported: from
/// step 1 on, page 0 holds generation 1; at step 1 the relation is exactly the generation-1
/// pages; at step 2 (truncation under way) every page there is still of generation 1; from
/// step 3 on no page past 0 holds generation 1 (the truncation is durable: no unlinked
/// segment came back), and pages the unacknowledged refill extended may be new, or
/// unreadable (reported as corrupt: an unsynced extension holds nothing acknowledged); at
/// step 4 the relation is exactly page 0 and the generation-2 pages.
pub fn verify_scratch(e: &Engine, step: u32) {
    if step == 0 {
        return;
    }
    let pool = e.pool();
    let n = pool.nblocks(SCRATCH, ForkNumber::Main).unwrap();
    let page = |b: u32| -> Result<Option<(i64, i64)>, bufpool::BufferError> {
        let buf = pool.read(BufferTag::new(SCRATCH, ForkNumber::Main, b))?;
        let g = buf.read();
        Ok((!bufpool::page::is_new(&g)).then(|| (get(&g, BODY), get(&g, BODY + 8))))
    };
    let must = |b: u32| {
        page(b).unwrap_or_else(|err| panic!("scratch block {b} of {n} (step {step}): {err}"))
    };
    let gen = |g: i64, b: u32| Some((g, i64::from(b)));
    assert!(n >= 1, "step {step}: the scratch relation is empty");
    assert_eq!(must(0), gen(1, 0), "scratch block 0 (step {step})");
    match step {
        1 => {
            assert_eq!(n, SCRATCH_PAGES_1, "step 1: the scratch relation's size");
            for b in 1..n {
                assert_eq!(must(b), gen(1, b), "scratch block {b} (step 1)");
            }
        }
        2 => {
            assert!(n <= SCRATCH_PAGES_1, "step 2: {n} scratch pages");
            for b in 1..n {
                assert_eq!(must(b), gen(1, b), "scratch block {b} of {n} (step 2)");
            }
        }
        3 => {
            assert!(
                n <= SCRATCH_PAGES_2,
                "step 3: {n} scratch pages after the truncation to 1 page was acknowledged \
                 and a refill to at most {SCRATCH_PAGES_2} began: unlinked segments came back"
            );
            for b in 1..n {
                if let Ok(p) = page(b) {
                    assert!(
                        p.is_none() || p == gen(2, b),
                        "scratch block {b} of {n} holds {p:?} after the truncation was \
                         acknowledged (step 3): a truncated page came back"
                    );
                }
            }
        }
        _ => {
            assert_eq!(n, SCRATCH_PAGES_2, "step 4: the scratch relation's size");
            for b in 1..n {
                assert_eq!(must(b), gen(2, b), "scratch block {b} (step 4)");
            }
        }
    }
}
