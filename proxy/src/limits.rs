//! Connection bounds: the settings that bound how many connections the proxy holds and for how
//! long (each with a default and a maximum the configuration cannot exceed), and the per-sandbox
//! count: how many authenticated connections one sandbox holds open at once, so one sandbox
//! cannot exhaust a proxy it shares with others. The per-address count of connections that
//! have not authenticated yet is [`crate::admission`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// A setting's default and the largest value the configuration may give it (larger values are
/// lowered to it), and the smallest (0 would lock everyone out).
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// When the file does not say.
    pub default: u64,
    /// The smallest value taken.
    pub min: u64,
    /// The largest value taken.
    pub max: u64,
}

impl Bound {
    /// `value` (or the default) within the bounds.
    pub fn take(self, value: Option<u64>) -> u64 {
        value.unwrap_or(self.default).clamp(self.min, self.max)
    }

    fn take_usize(self, value: Option<usize>) -> usize {
        usize::try_from(self.take(value.map(|v| u64::try_from(v).unwrap_or(u64::MAX)))).unwrap_or(usize::MAX)
    }
}

/// `max_connections_per_sandbox`.
pub const PER_SANDBOX: Bound = Bound { default: 256, min: 1, max: 65_536 };
/// `max_unauthenticated_per_source`.
pub const UNAUTHENTICATED_PER_SOURCE: Bound = Bound { default: 64, min: 1, max: 4_096 };
/// `max_unauthenticated`.
pub const UNAUTHENTICATED: Bound = Bound { default: 1_024, min: 1, max: 65_536 };
/// `auth_timeout_secs`.
pub const AUTH_TIMEOUT_SECS: Bound = Bound { default: 5, min: 1, max: 60 };
/// `host_addrs_refresh_secs`.
pub const HOST_ADDRS_REFRESH_SECS: Bound = Bound { default: 30, min: 1, max: 3_600 };
/// `tunnel_idle_timeout_secs`.
pub const TUNNEL_IDLE_SECS: Bound = Bound { default: 600, min: 1, max: 86_400 };

/// The connection limits in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Authenticated connections one sandbox may hold open.
    pub per_sandbox: usize,
    /// Unauthenticated connections from one address (per sandbox bound to it).
    pub unauthenticated_per_source: usize,
    /// Unauthenticated connections from addresses no sandbox is bound to, together.
    pub unauthenticated: usize,
    /// How long a connection has to authenticate.
    pub auth_timeout: Duration,
}

impl ConnectionLimits {
    /// The limits the file asks for, within their bounds.
    pub fn from_file(
        per_sandbox: Option<usize>,
        unauthenticated_per_source: Option<usize>,
        unauthenticated: Option<usize>,
        auth_timeout_secs: Option<u64>,
    ) -> Self {
        Self {
            per_sandbox: PER_SANDBOX.take_usize(per_sandbox),
            unauthenticated_per_source: UNAUTHENTICATED_PER_SOURCE.take_usize(unauthenticated_per_source),
            unauthenticated: UNAUTHENTICATED.take_usize(unauthenticated),
            auth_timeout: Duration::from_secs(AUTH_TIMEOUT_SECS.take(auth_timeout_secs)),
        }
    }
}

impl Default for ConnectionLimits {
    /// The defaults (also what applies while no valid configuration is loaded).
    fn default() -> Self {
        Self::from_file(None, None, None, None)
    }
}

/// Open-connection counts per sandbox id.
#[derive(Debug, Default)]
pub struct SandboxLimits {
    counts: Mutex<HashMap<String, usize>>,
}

/// One open connection of a sandbox; released on drop.
#[derive(Debug)]
pub struct Slot {
    limits: Arc<SandboxLimits>,
    id: String,
}

impl Slot {
    /// The sandbox holding it.
    pub fn sandbox(&self) -> &str {
        &self.id
    }
}

impl SandboxLimits {
    /// Takes a slot for sandbox `id` unless it already holds `max`.
    pub fn try_acquire(self: &Arc<Self>, id: &str, max: usize) -> Option<Slot> {
        let mut counts = self.counts.lock();
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
        let mut counts = self.limits.counts.lock();
        if let Some(count) = counts.get_mut(&self.id) {
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

    #[test]
    fn settings_take_their_default_and_stay_within_their_bounds() {
        let defaults = ConnectionLimits::default();
        assert_eq!(
            defaults,
            ConnectionLimits {
                per_sandbox: 256,
                unauthenticated_per_source: 64,
                unauthenticated: 1024,
                auth_timeout: Duration::from_secs(5)
            }
        );
        let extreme = ConnectionLimits::from_file(Some(0), Some(usize::MAX), Some(1 << 40), Some(u64::MAX));
        assert_eq!(
            extreme,
            ConnectionLimits {
                per_sandbox: 1,
                unauthenticated_per_source: 4096,
                unauthenticated: 65_536,
                auth_timeout: Duration::from_secs(60)
            }
        );
        assert_eq!(HOST_ADDRS_REFRESH_SECS.take(Some(0)), 1);
        assert_eq!(TUNNEL_IDLE_SECS.take(None), 600);
    }
}
