//! Per-sandbox bounds: how many tunnels (CONNECTs and in-flight plain requests) one sandbox may
//! hold open at once, so one sandbox cannot exhaust a proxy it shares with others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open-tunnel counts per sandbox id.
#[derive(Debug, Default)]
pub struct SandboxLimits {
    counts: Mutex<HashMap<String, usize>>,
}

/// One open tunnel of a sandbox; released on drop.
#[derive(Debug)]
pub struct Slot {
    limits: Arc<SandboxLimits>,
    id: String,
}

impl SandboxLimits {
    /// Takes a slot for sandbox `id` unless it already holds `max`.
    pub fn try_acquire(self: &Arc<Self>, id: &str, max: usize) -> Option<Slot> {
        let mut counts = self.counts.lock().ok()?;
        let count = counts.entry(id.to_owned()).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Slot { limits: self.clone(), id: id.to_owned() })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut counts) = self.limits.counts.lock()
            && let Some(count) = counts.get_mut(&self.id)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_sandbox_and_released() {
        let limits = Arc::new(SandboxLimits::default());
        let a1 = limits.try_acquire("a", 2).expect("first");
        let _a2 = limits.try_acquire("a", 2).expect("second");
        assert!(limits.try_acquire("a", 2).is_none());
        let _b = limits.try_acquire("b", 2).expect("another sandbox");
        drop(a1);
        assert!(limits.try_acquire("a", 2).is_some());
    }
}
