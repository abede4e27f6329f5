//! YCSB's core workloads A to F as the driver runs them ([`Ycsb`], a [`Workload`]): each
//! transaction is one operation drawn by the workload's proportions, on a record drawn by
//! its request distribution, as YCSB's CoreWorkload does:
//!
//! | workload | operations | distribution |
//! |---|---|---|
//! | A | read 50%, update 50% | Zipfian |
//! | B | read 95%, update 5% | Zipfian |
//! | C | read 100% | Zipfian |
//! | D | read 95%, insert 5% | latest |
//! | E | scan 95% (1 to 100 records, uniform), insert 5% | Zipfian |
//! | F | read 50%, read-modify-write 50% | Zipfian |
//!
//! A read reads every field (`readallfields=true`); an update and a read-modify-write
//! write one field (`writeallfields=false`). Inserts take the next record number; reads
//! choose among the records whose insert has committed with every earlier one
//! (YCSB's acknowledged counter), so a read never looks for a record still being
//! inserted. A transaction that only reads takes no transaction id.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::Result;
use rand::rngs::SmallRng;
use rand::Rng;

use super::keys::{Chooser, THETA};
use super::ops::{Op, OpCounts};
use super::{YcsbDb, FIELDS, FIELD_LEN};
use crate::tpcb::driver::{Done, Workload};

/// One of YCSB's core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Core {
    A,
    B,
    C,
    D,
    E,
    F,
}

/// YCSB's `maxscanlength`.
pub const MAX_SCAN: usize = 100;

impl Core {
    /// The operations and their shares (summing to 1).
    pub fn mix(self) -> &'static [(Op, f64)] {
        match self {
            Core::A => &[(Op::Read, 0.5), (Op::Update, 0.5)],
            Core::B => &[(Op::Read, 0.95), (Op::Update, 0.05)],
            Core::C => &[(Op::Read, 1.0)],
            Core::D => &[(Op::Read, 0.95), (Op::Insert, 0.05)],
            Core::E => &[(Op::Scan, 0.95), (Op::Insert, 0.05)],
            Core::F => &[(Op::Read, 0.5), (Op::ReadModifyWrite, 0.5)],
        }
    }

    /// Whether its records are drawn by YCSB's `latest` distribution (else Zipfian).
    pub fn latest(self) -> bool {
        self == Core::D
    }

    /// The operation a draw `u` in [0, 1) picks.
    pub fn pick(self, u: f64) -> Op {
        let mut acc = 0.0;
        for &(op, share) in self.mix() {
            acc += share;
            if u < acc {
                return op;
            }
        }
        self.mix()[self.mix().len() - 1].0
    }
}

/// The record numbers inserts take, and how many records reads may choose from: those
/// below the first number whose insert has not committed yet (YCSB's acknowledged
/// counter).
#[derive(Debug)]
pub(crate) struct Inserts {
    next: AtomicU64,
    acked: AtomicU64,
    /// Numbers committed above the acknowledged prefix.
    pending: Mutex<BTreeSet<u64>>,
}

impl Inserts {
    pub(crate) fn new(records: u64) -> Inserts {
        Inserts {
            next: AtomicU64::new(records),
            acked: AtomicU64::new(records),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    /// Records reads may choose from.
    pub(crate) fn count(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// The number of the next record to insert.
    pub(crate) fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Record `k`'s insert committed (or was given up: its number is not taken again).
    pub(crate) fn done(&self, k: u64) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.insert(k);
        let mut acked = self.acked.load(Ordering::Relaxed);
        while p.remove(&acked) {
            acked += 1;
        }
        self.acked.store(acked, Ordering::Release);
    }
}

/// YCSB on an open database: the run's workloads with their weights.
pub struct Ycsb<'a, 'e> {
    db: &'a YcsbDb<'e>,
    scripts: Vec<(Core, u32)>,
    zipfian: Chooser,
    latest: Chooser,
    inserts: Inserts,
}

/// One client's state: a buffer for the rows it reads, and its operations.
#[derive(Debug, Default)]
pub struct ClientState {
    buf: Vec<u8>,
    value: Vec<u8>,
    /// What the client's committed transactions did.
    pub counts: OpCounts,
}

impl<'a, 'e> Ycsb<'a, 'e> {
    /// Workloads `scripts` (each with its weight) on `db`, records drawn with Zipfian
    /// constant `theta` (YCSB's 0.99 if None).
    pub fn new(db: &'a YcsbDb<'e>, scripts: Vec<(Core, u32)>, theta: Option<f64>) -> Result<Self> {
        let theta = theta.unwrap_or(THETA);
        Ok(Ycsb {
            db,
            scripts,
            zipfian: Chooser::zipfian(db.records, theta)?,
            latest: Chooser::latest(db.records, theta)?,
            inserts: Inserts::new(db.records),
        })
    }

    /// Records at the end of the run's inserts (acknowledged).
    pub fn records(&self) -> u64 {
        self.inserts.count()
    }

    fn run(
        &self,
        s: &mut ClientState,
        core: Core,
        rng: &mut SmallRng,
    ) -> Result<Done<()>, bufpool::Error> {
        let op = core.pick(rng.random::<f64>());
        let chooser = if core.latest() {
            &self.latest
        } else {
            &self.zipfian
        };
        let e = self.db.engine;
        let t = e.begin()?;
        let found = match op {
            Op::Read => {
                let k = chooser.next(self.inserts.count(), rng);
                self.db.read(&t.snapshot(), k, &mut s.buf)?
            }
            Op::Scan => {
                let k = chooser.next(self.inserts.count(), rng);
                let n = rng.random_range(1..=MAX_SCAN);
                s.counts.scanned += self.db.scan(&t.snapshot(), k, n, &mut s.buf)? as u64;
                true
            }
            Op::Update | Op::ReadModifyWrite => {
                let k = chooser.next(self.inserts.count(), rng);
                let x = t.xid()?;
                let snap = t.snapshot();
                let read = op != Op::ReadModifyWrite || self.db.read(&snap, k, &mut s.buf)?;
                let field = rng.random_range(0..FIELDS);
                s.value.resize(FIELD_LEN, 0);
                super::fill_letters(&mut s.value, rng);
                read && self.db.update(x, &snap, k, field, &s.value)?
            }
            Op::Insert => {
                let k = self.inserts.take();
                let r = self
                    .db
                    .insert(t.xid()?, k, rng)
                    .and_then(|()| Ok(t.commit()?));
                self.inserts.done(k);
                r?;
                s.counts.count(op);
                return Ok(Done::Committed(None));
            }
        };
        t.commit()?;
        if found {
            s.counts.count(op);
        } else {
            s.counts.not_found += 1;
        }
        Ok(Done::Committed(None))
    }
}

/// A committed YCSB operation acknowledges nothing (`--ack-log` is TPC-B's).
#[derive(Debug, Clone, Copy)]
pub struct NoAck;

impl std::fmt::Display for NoAck {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Ok(())
    }
}

impl Workload for Ycsb<'_, '_> {
    type ClientState = ClientState;
    type Ack = NoAck;

    fn weights(&self) -> Vec<u32> {
        self.scripts.iter().map(|s| s.1).collect()
    }

    fn session(&self, _client: u32) -> ClientState {
        ClientState::default()
    }

    fn transaction(
        &self,
        session: &mut ClientState,
        script: usize,
        rng: &mut SmallRng,
    ) -> Result<Done<NoAck>> {
        let core = self.scripts[script].0;
        match self.run(session, core, rng) {
            Ok(_) => Ok(Done::Committed(None)),
            Err(e) if e.is_deadlock() => Ok(Done::Failed { deadlock: true }),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: each workload's draws follow its proportions.
    #[test]
    fn workloads_pick_operations_in_their_proportions() {
        for core in [Core::A, Core::B, Core::C, Core::D, Core::E, Core::F] {
            let total: f64 = core.mix().iter().map(|m| m.1).sum();
            assert!((total - 1.0).abs() < 1e-12, "{core:?}");
            for &(op, share) in core.mix() {
                let n = (0..10_000)
                    .filter(|i| core.pick(f64::from(*i) / 10_000.0) == op)
                    .count();
                assert!(
                    (n as f64 / 10_000.0 - share).abs() < 0.001,
                    "{core:?} {op:?} {n}"
                );
            }
        }
        assert_eq!(Core::A.pick(0.999_999), Op::Update);
    }

    /// Proves: the acknowledged count moves only over a prefix of committed inserts.
    #[test]
    fn reads_see_only_a_committed_prefix_of_inserts() {
        let i = Inserts::new(10);
        let (a, b, c) = (i.take(), i.take(), i.take());
        assert_eq!((a, b, c), (10, 11, 12));
        i.done(b);
        assert_eq!(i.count(), 10, "11 committed, 10 not yet");
        i.done(a);
        assert_eq!(i.count(), 12);
        i.done(c);
        assert_eq!(i.count(), 13);
    }
}
