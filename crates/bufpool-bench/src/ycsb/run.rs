//! A YCSB run (`bufpool bench -b ycsb-a` .. `-b ycsb-f` on a YCSB database): the
//! workload ([`Ycsb`]) through `tpcb::workload_run`, with the operations counted
//! ([`YcsbOutcome`]).

use anyhow::{ensure, Result};

use super::ops::{OpCounts, YcsbOutcome};
use super::workload::{Core, Ycsb};
use super::YcsbDb;
use crate::tpcb::builtins::Mode;
use crate::tpcb::options::{BenchOptions, RunOutcome};
use crate::tpcb::workload_run::run_workload;

/// The YCSB workload of built-in script `mode` (None: not one of YCSB's).
pub fn core_of(mode: Mode) -> Option<Core> {
    Some(match mode {
        Mode::YcsbA => Core::A,
        Mode::YcsbB => Core::B,
        Mode::YcsbC => Core::C,
        Mode::YcsbD => Core::D,
        Mode::YcsbE => Core::E,
        Mode::YcsbF => Core::F,
        _ => return None,
    })
}

/// The built-in script of YCSB workload `core`.
pub fn mode_of(core: Core) -> Mode {
    match core {
        Core::A => Mode::YcsbA,
        Core::B => Mode::YcsbB,
        Core::C => Mode::YcsbC,
        Core::D => Mode::YcsbD,
        Core::E => Mode::YcsbE,
        Core::F => Mode::YcsbF,
    }
}

/// Runs `opts`' scripts (all YCSB's) on `db`.
pub fn run(db: &YcsbDb<'_>, opts: &BenchOptions) -> Result<RunOutcome> {
    let list = opts.script_list();
    let scripts = list
        .iter()
        .map(|s| {
            core_of(s.mode).map(|c| (c, s.weight)).ok_or_else(|| {
                anyhow::anyhow!(
                    "script {} is TPC-B's: this database holds YCSB's usertable (run -b ycsb-a .. ycsb-f)",
                    s.name
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        list.len() == 1 || scripts.iter().any(|s| s.1 > 0),
        "total script weight must not be zero"
    );
    let workload = Ycsb::new(db, scripts, opts.zipf_theta)?;
    let (mut out, sessions) = run_workload(db.engine, &workload, opts, &db.relation_names())?;
    let mut counts = OpCounts::default();
    for s in &sessions {
        counts.merge(&s.counts);
    }
    out.ycsb = Some(YcsbOutcome {
        records_start: db.records,
        records_end: workload.records(),
        counts,
    });
    Ok(out)
}
