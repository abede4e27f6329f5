//! Where a result comes from: the binary's version and commit, and the machine (cores,
//! CPU model, kernel). Every report records it: `bench --out` and `--json`, experiments,
//! `compare`, `seeds`.

/// The binary's version and commit and the machine it ran on.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    /// The package version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The commit built (`git rev-parse --short=12 HEAD`, `-dirty` with local changes;
    /// "unknown" for a build outside a git checkout).
    pub commit: String,
    pub cores: usize,
    pub cpu: String,
    pub kernel: String,
}

impl Provenance {
    /// This binary on this machine.
    pub fn here() -> Provenance {
        Provenance {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: env!("BUFPOOL_COMMIT").to_string(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu: cpu_model(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

/// The CPU's model name from /proc/cpuinfo ("" if unknown).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default()
}
