//! YCSB's operations and their counts: what a run did, by kind ([`OpCounts`]), and a
//! YCSB run's figures beside the driver's ([`YcsbOutcome`]). A leaf: the run's outcome
//! (`tpcb::options::RunOutcome`) holds these without knowing the workload's tables.

/// An operation of YCSB's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Op {
    /// Every operation, in the order of [`OpCounts`]' fields.
    pub const ALL: [Op; 5] = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Scan,
        Op::ReadModifyWrite,
    ];

    /// YCSB's name of it (its report's).
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Update => "update",
            Op::Insert => "insert",
            Op::Scan => "scan",
            Op::ReadModifyWrite => "read_modify_write",
        }
    }
}

/// Operations by kind, and reads that found no record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Committed operations, in [`Op::ALL`]'s order.
    pub ops: [u64; 5],
    /// Records the scans read.
    pub scanned: u64,
    /// Reads, updates and read-modify-writes whose record was not there.
    pub not_found: u64,
}

impl OpCounts {
    /// Adds `other` in.
    pub fn merge(&mut self, other: &OpCounts) {
        for (a, b) in self.ops.iter_mut().zip(other.ops) {
            *a += b;
        }
        self.scanned += other.scanned;
        self.not_found += other.not_found;
    }

    /// Committed operations of kind `op`.
    pub fn of(&self, op: Op) -> u64 {
        self.ops[Op::ALL.iter().position(|&o| o == op).expect("in ALL")]
    }

    /// Counts one committed operation `op`.
    pub fn count(&mut self, op: Op) {
        self.ops[Op::ALL.iter().position(|&o| o == op).expect("in ALL")] += 1;
    }
}

/// What a YCSB run did beyond the driver's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct YcsbOutcome {
    /// Records when the run began (its reads choose among them and those it inserted).
    pub records_start: u64,
    /// Records at its end.
    pub records_end: u64,
    /// Its committed operations.
    pub counts: OpCounts,
}
