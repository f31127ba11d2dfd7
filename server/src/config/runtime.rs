//! How many threads run the server's async work: `AGENTHOLD_WORKER_THREADS`, else one per core
//! the process may use (tokio's default). One worker on a two-core host cut `multi`'s CPU per
//! event by a tenth and steadied the flood, but slowed a pooled agent's claim by 20–40 ms (its
//! other work no longer runs beside it on a second thread): a choice for the operator, with both
//! sides measured in docs/benchmarks.md ("One worker thread on two cores").

use super::Config;

impl Config {
    /// The runtime's worker threads.
    pub fn runtime_workers(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        workers(self.worker_threads, cores)
    }
}

/// `configured`, else one per core.
fn workers(configured: Option<u16>, cores: usize) -> usize {
    configured.map_or(cores.max(1), usize::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_core_unless_configured() {
        assert_eq!(workers(None, 1), 1);
        assert_eq!(workers(None, 2), 2);
        assert_eq!(workers(None, 8), 8);
        assert_eq!(workers(Some(1), 2), 1);
        assert_eq!(workers(Some(3), 2), 3);
    }
}
