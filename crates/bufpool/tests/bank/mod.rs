//! A bank on the engine, for crash tests: accounts on pages, transfers as single atomic
//! committed WAL records.
//!
//! Layout: relation `REL`, pages 0..ACCOUNT_PAGES hold `PER_PAGE` i64 balances each; page
//! `META` holds, per thread, the sequence number of its last committed transfer. Transfer
//! `k` of thread `t` is a pure function of (t, k), so after recovery the expected balances
//! are recomputed exactly from the recovered sequence numbers: a lost acknowledged
//! transfer, a half-applied one or an invented one all show as a mismatch.
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
    let (from, to, amount) = transfer(t, k);
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
    let mut pages: Vec<(&mut bufpool::PageWriteGuard<'_>, &[std::ops::Range<usize>])> = guards
        .iter_mut()
        .zip(ranges.iter())
        .map(|(g, r)| (g, r.as_slice()))
        .collect();
    let end = e.log_pages(t + 1, FLAG_COMMIT, &mut pages)?;
    drop(pages);
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
