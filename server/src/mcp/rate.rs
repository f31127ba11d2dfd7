//! How often an agent may call agenthold's MCP tools: at most `per_minute` calls in any minute
//! window (fixed windows, per agent, per replica), so a loop between agents or a runaway
//! background process cannot flood the server, the audit log or the agents it may prompt.
//! Bounded: agents idle for a window are forgotten once the table is large.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::ids::AgentId;

/// The window.
const WINDOW: Duration = Duration::from_secs(60);
/// Agents remembered before idle ones are dropped.
const MAX_ENTRIES: usize = 10_000;

static WINDOWS: LazyLock<Mutex<HashMap<AgentId, (Instant, u32)>>> = LazyLock::new(Mutex::default);

/// Counts a call of `agent` at `now`: `Err(wait)` when it is over `per_minute` in this window.
pub fn take(agent: AgentId, per_minute: u32, now: Instant) -> Result<(), Duration> {
    let mut windows = WINDOWS.lock();
    if windows.len() >= MAX_ENTRIES {
        windows.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
    }
    let (start, count) = windows.entry(agent).or_insert((now, 0));
    if now.duration_since(*start) >= WINDOW {
        (*start, *count) = (now, 0);
    }
    if *count >= per_minute {
        return Err(WINDOW.saturating_sub(now.duration_since(*start)));
    }
    *count += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_past_the_limit_wait_for_the_next_window() {
        let (agent, other, now) = (AgentId::new(), AgentId::new(), Instant::now());
        for _ in 0..3 {
            assert_eq!(take(agent, 3, now), Ok(()));
        }
        assert_eq!(take(agent, 3, now + Duration::from_secs(20)), Err(Duration::from_secs(40)));
        assert_eq!(take(other, 3, now), Ok(()), "per agent");
        assert_eq!(take(agent, 3, now + WINDOW), Ok(()), "a new window");
    }
}
