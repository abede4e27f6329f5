//! `bufpool`: the benchmark and experiment CLI of the bufpool buffer manager.
//!
//! With no subcommand it runs `bufpool experiment pool` and prints its table (the
//! project's `cargo run --release` job until the TPC-B benchmark exists).

mod experiments;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use experiments::pool::{Plan, PoolOptions};

#[derive(Debug, Parser)]
#[command(
    name = "bufpool",
    version,
    about = "Benchmarks and experiments for the bufpool buffer manager"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one experiment and prints its figures (median, min, max over repetitions).
    Experiment(ExperimentArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ExperimentName {
    /// Hit and miss paths of the pool next to HashMap, raw memory, mutex-pool and pread
    /// baselines.
    Pool,
    /// Commit rates (group commit) against raw fdatasync, WAL insert scaling, redo speed.
    Wal,
}

#[derive(Debug, clap::Args)]
struct ExperimentArgs {
    /// Which experiment.
    #[arg(value_enum)]
    name: ExperimentName,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Repetitions of each measurement (the report gives median, min and max).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..))]
    repeats: u32,
    /// Where to make the scratch data directory (a fresh subdirectory, removed afterwards).
    /// Default: ./bufpool-data/experiments, or the system temp directory if that cannot be
    /// created.
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// shared_buffers of the pool that holds the random-hit chain (e.g. 1GB, 256MB).
    #[arg(long, default_value = "1GB")]
    pool_size: String,
}

impl ExperimentArgs {
    fn defaults(name: ExperimentName) -> Self {
        Self {
            name,
            json: false,
            repeats: 3,
            dir: None,
            pool_size: "1GB".into(),
        }
    }
}

fn default_scratch_parent() -> PathBuf {
    let local = PathBuf::from("bufpool-data").join("experiments");
    if std::fs::create_dir_all(&local).is_ok() {
        local
    } else {
        std::env::temp_dir()
    }
}

fn run_experiment(args: ExperimentArgs, command: Vec<String>) -> Result<()> {
    let report = match args.name {
        ExperimentName::Pool => {
            let opts = PoolOptions {
                repeats: args.repeats as usize,
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                pool_size: args.pool_size.clone(),
                plan: Plan::for_profile(),
                command,
            };
            experiments::pool::run(&opts).context("experiment pool")?
        }
        ExperimentName::Wal => {
            let debug = cfg!(debug_assertions);
            let opts = experiments::wal::WalExpOptions {
                repeats: args.repeats as usize,
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                duration: std::time::Duration::from_millis(if debug { 200 } else { 1500 }),
                redo_bytes: if debug { 4 << 20 } else { 128 << 20 },
            };
            experiments::wal::run(&opts).context("experiment wal")?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let mut command: Vec<String> = std::env::args().collect();
    if let Some(first) = command.first_mut() {
        // The program name without its directory, so reports read the same everywhere.
        if let Some(name) = std::path::Path::new(first.as_str()).file_name() {
            *first = name.to_string_lossy().into_owned();
        }
    }
    match cli.command {
        Some(Command::Experiment(args)) => run_experiment(args, command),
        None => {
            command.extend(["experiment".to_string(), "pool".to_string()]);
            run_experiment(ExperimentArgs::defaults(ExperimentName::Pool), command)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed_and_rejects_few_repeats() {
        Cli::command().debug_assert();
        let cli =
            Cli::try_parse_from(["bufpool", "experiment", "pool", "--json", "--repeats", "5"])
                .unwrap();
        match cli.command {
            Some(Command::Experiment(a)) => {
                assert!(a.json && a.repeats == 5 && a.pool_size == "1GB")
            }
            None => panic!("subcommand lost"),
        }
        assert!(Cli::try_parse_from(["bufpool", "experiment", "pool", "--repeats", "2"]).is_err());
        assert!(Cli::try_parse_from(["bufpool"]).unwrap().command.is_none());
    }
}
