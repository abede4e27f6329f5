//! `bufpool bench`: pgbench's client loop on a database made by `init`, its summary
//! printed as pgbench prints it, or `--json`, and the whole run saved with `--out`.
//!
//! The flags are `args.rs`'s and `scripts.rs`'s (`-b`, `-f`, `-S`, `-N`), the run
//! `run.rs`'s, the output `summary.rs`'s and `json.rs`'s; the client loop and the
//! workload are `tpcb`'s. With `--show-script` it prints a built-in script and runs
//! nothing.

pub mod args;
pub mod json;
pub mod run;
pub(crate) use run::Workload;
pub mod scripts;
pub mod summary;

use anyhow::{Context, Result};

use crate::ctrl_c::install_ctrl_c;
use crate::tpcb::builtins::builtin_script_text;
use args::BenchArgs;
use json::summary_json;
use run::run_bench;
use summary::print_summary;

/// `bufpool bench`.
pub fn bench(a: &BenchArgs) -> Result<()> {
    if let Some(m) = a.show_script {
        print!("{}", builtin_script_text(m));
        return Ok(());
    }
    let stop = install_ctrl_c();
    let o = run_bench(a, stop)?;
    if let Some(path) = &a.out {
        std::fs::write(path, serde_json::to_string_pretty(&o.result)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary_json(&o, a.report_per_command))?
        );
    } else {
        print_summary(a, &o);
    }
    Ok(())
}
