//! The harness log: what each agent's harness wrote on stderr lately, kept in memory per agent as
//! a ring of the last [`RING_BYTES`] bytes, for the agent's admins to read while it runs
//! (`GET /api/v1/agents/{id}/harness-log`). The supervisor's shell appends every stderr frame of
//! the running harness; a new harness (a new generation) starts an empty ring. sandboxd numbers
//! stderr bytes and drops what is over its rate limit (or sent while the tunnel was down), so a
//! gap between frames' offsets is counted as dropped. Memory: one ring per agent with a
//! supervisor on this replica, whatever the harness writes.
//!
//! It can hold anything a harness prints (tokens, if one is careless): it is shown to the agent's
//! admins only and never written to the server's own log.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

use crate::ids::AgentId;

/// Bytes of stderr kept per agent (the newest).
pub const RING_BYTES: usize = 64 * 1024;

/// One agent's ring.
#[derive(Debug, Default)]
struct Ring {
    generation: i64,
    bytes: VecDeque<u8>,
    /// The stderr offset the next frame should start at.
    next: u64,
    /// Bytes sandboxd dropped (gaps between frames).
    dropped: u64,
    /// Bytes pushed out of the ring by newer ones.
    rotated: u64,
}

/// A copy of an agent's ring as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The harness generation the bytes are from.
    pub generation: i64,
    /// The newest stderr bytes, oldest first.
    pub bytes: Vec<u8>,
    /// Bytes sandboxd dropped (over its rate limit, or written while the tunnel was down).
    pub dropped: u64,
    /// Older bytes no longer kept (the ring holds the last [`RING_BYTES`]).
    pub rotated: u64,
}

/// Every agent's ring on this replica.
#[derive(Debug, Default)]
pub struct HarnessLogs {
    rings: Mutex<HashMap<AgentId, Ring>>,
}

impl HarnessLogs {
    /// Adds a stderr frame of harness `generation` of `agent`, which starts at stderr offset
    /// `offset`. A newer generation replaces the ring; a frame of an older one is ignored.
    pub fn append(&self, agent: AgentId, generation: i64, offset: u64, bytes: &[u8]) {
        let mut rings = self.rings.lock();
        let ring = rings.entry(agent).or_insert_with(|| Ring { generation, ..Ring::default() });
        if generation < ring.generation {
            return;
        }
        if generation > ring.generation {
            *ring = Ring { generation, ..Ring::default() };
        }
        // A frame from before `next` (a resend cannot happen for stderr, but a reordered or
        // repeated frame must not count twice) keeps only its new part.
        let skip = usize::try_from(ring.next.saturating_sub(offset)).unwrap_or(usize::MAX).min(bytes.len());
        let bytes = &bytes[skip..];
        ring.dropped += offset.saturating_sub(ring.next);
        ring.next = ring.next.max(offset) + bytes.len() as u64;
        let keep = bytes.len().min(RING_BYTES);
        ring.rotated += (bytes.len() - keep) as u64;
        ring.bytes.extend(&bytes[bytes.len() - keep..]);
        let over = ring.bytes.len().saturating_sub(RING_BYTES);
        if over > 0 {
            ring.bytes.drain(..over);
            ring.rotated += over as u64;
        }
    }

    /// A copy of `agent`'s ring (`None`: nothing written since its supervisor started here).
    pub fn snapshot(&self, agent: AgentId) -> Option<Snapshot> {
        let rings = self.rings.lock();
        rings.get(&agent).map(|ring| Snapshot {
            generation: ring.generation,
            bytes: ring.bytes.iter().copied().collect(),
            dropped: ring.dropped,
            rotated: ring.rotated,
        })
    }

    /// Forgets `agent`'s ring (its supervisor ended here, or it was deleted).
    pub fn forget(&self, agent: AgentId) {
        self.rings.lock().remove(&agent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_bytes_and_counts_gaps_as_dropped() {
        let logs = HarnessLogs::default();
        let agent = AgentId::new();
        assert_eq!(logs.snapshot(agent), None);
        logs.append(agent, 1, 0, b"one\n");
        logs.append(agent, 1, 10, b"two\n");
        let snap = logs.snapshot(agent).expect("ring");
        assert_eq!((snap.bytes.as_slice(), snap.dropped, snap.rotated), (&b"one\ntwo\n"[..], 6, 0));
        // A repeated frame is not counted twice.
        logs.append(agent, 1, 12, b"o\nthree\n");
        assert_eq!(logs.snapshot(agent).expect("ring").bytes, b"one\ntwo\nthree\n");
        // Older generations are ignored; a newer one starts afresh.
        logs.append(agent, 0, 0, b"old");
        logs.append(agent, 2, 0, b"new");
        let snap = logs.snapshot(agent).expect("ring");
        assert_eq!((snap.generation, snap.bytes.as_slice(), snap.dropped), (2, &b"new"[..], 0));
        logs.forget(agent);
        assert_eq!(logs.snapshot(agent), None);
    }

    #[test]
    fn an_endless_writer_costs_the_ring_and_no_more() {
        let logs = HarnessLogs::default();
        let agent = AgentId::new();
        let chunk = vec![b'x'; 16 * 1024];
        let mut offset = 0;
        for _ in 0..1000 {
            logs.append(agent, 1, offset, &chunk);
            offset += chunk.len() as u64;
        }
        logs.append(agent, 1, offset, &vec![b'y'; 3 * RING_BYTES]);
        let snap = logs.snapshot(agent).expect("ring");
        assert_eq!(snap.bytes.len(), RING_BYTES);
        assert!(snap.bytes.iter().all(|&b| b == b'y'));
        assert_eq!(snap.rotated + RING_BYTES as u64, offset + 3 * RING_BYTES as u64);
        assert_eq!(snap.dropped, 0);
    }
}
