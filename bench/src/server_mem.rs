//! The server's memory, from `/proc/<pid>/status` (Linux; the benchmark runs on the server's
//! machine): resident set now (`VmRSS`) and its peak so far (`VmHWM`), in KiB. Read idle
//! before the flood (the baseline) and right after it, so a flood that makes the server hold
//! on to memory shows.

/// Memory of a process, KiB.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// Resident now.
    pub rss_kib: u64,
    /// Peak resident so far.
    pub hwm_kib: u64,
}

/// The server's memory now; `None` without a pid or where `/proc` does not say.
pub fn read(pid: Option<u32>) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    Some(Memory { rss_kib: field(&status, "VmRSS:")?, hwm_kib: field(&status, "VmHWM:")? })
}

/// A `Name:   1234 kB` line's number.
fn field(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| line.strip_prefix(name)?.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_memory() {
        let memory = read(Some(std::process::id())).expect("/proc/self/status");
        assert!(memory.rss_kib > 0 && memory.hwm_kib >= memory.rss_kib);
    }

    #[test]
    fn parses_the_fields() {
        assert_eq!(field("VmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n", "VmRSS:"), Some(1024));
        assert_eq!(field("VmRSS: x kB", "VmRSS:"), None);
    }
}
