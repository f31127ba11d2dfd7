//! How many threads run the server's async work: `AGENTHOLD_WORKER_THREADS`, else half the cores
//! the process may use, at least one. The server shares its host with Postgres, the proxy, the
//! engine and the sandboxes, and at the loads measured its async work takes a fraction of a core:
//! a second worker on a two-core host cost more in threads parking and waking each other than it
//! ran (docs/benchmarks.md, "One worker thread on two cores").

use super::Config;

impl Config {
    /// The runtime's worker threads.
    pub fn runtime_workers(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        workers(self.worker_threads, cores)
    }
}

/// `configured`, else half of `cores`, at least one.
fn workers(configured: Option<u16>, cores: usize) -> usize {
    configured.map_or((cores / 2).max(1), usize::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_cores_at_least_one_unless_configured() {
        assert_eq!(workers(None, 1), 1);
        assert_eq!(workers(None, 2), 1);
        assert_eq!(workers(None, 3), 1);
        assert_eq!(workers(None, 8), 4);
        assert_eq!(workers(Some(3), 2), 3);
        assert_eq!(workers(Some(1), 64), 1);
    }
}
