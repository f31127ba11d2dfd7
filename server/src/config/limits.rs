//! What agents and requests are held to: the ceilings and defaults of an agent's CPUs, memory,
//! processes and disk, and how long a WebSocket send may take. (Quotas, request and turn limits
//! are plain flags read where they are enforced.)

use std::time::Duration;

use super::Config;

impl Config {
    /// The ceilings of an agent's limits: CPUs, memory (MiB), processes.
    pub fn limit_ceilings(&self) -> (f64, i32, i32) {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let cpus = self.max_cpus.unwrap_or(cores as f64);
        let memory = self.max_memory_mib.unwrap_or_else(|| host_memory_mib().map_or(8192, |mib| (mib / 2).max(64)));
        (cpus, memory, self.max_pids)
    }

    /// The disk space (MiB) of an agent that names none: the default, within the ceiling.
    pub fn default_disk_mib(&self) -> i32 {
        self.sandbox_disk_mib.min(self.max_disk_mib)
    }

    /// How long one WebSocket send may take.
    pub fn ws_send_timeout(&self) -> Duration {
        Duration::from_secs(self.ws_send_timeout_secs.max(1))
    }
}

/// The host's memory (MiB), from `/proc/meminfo`.
fn host_memory_mib() -> Option<i32> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: i64 =
        text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    i32::try_from(kib / 1024).ok()
}
