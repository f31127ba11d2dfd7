//! Admission at accept, before any authentication: how many connections that have not
//! authenticated yet each client address may hold, and how many all addresses that no sandbox
//! is bound to may hold together. A sandbox's own address (its `source_addrs`) never draws from
//! that shared pool, so neither the internet (when the port is exposed) nor another sandbox can
//! fill the room a sandbox needs to open its next connection. A connection gives its place back
//! when it authenticates (it then counts against its sandbox, [`crate::limits`]) or closes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::addr::canonical;

/// Unauthenticated connections per address, and how many of them came from unbound addresses.
#[derive(Debug, Default)]
pub struct Admission {
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    per_source: HashMap<IpAddr, usize>,
    unbound: usize,
}

/// Why a connection was closed at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Its address holds its share of unauthenticated connections.
    Source,
    /// Unbound addresses hold the shared pool.
    Shared,
}

/// What a new connection from one address may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// Unauthenticated connections the address may hold.
    pub per_source: usize,
    /// Whether a sandbox is bound to the address (it does not use the shared pool).
    pub bound: bool,
    /// The shared pool's size.
    pub shared: usize,
}

/// One unauthenticated connection's place; given back on drop.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    source: IpAddr,
    bound: bool,
}

impl Admission {
    /// A place for a new connection from `peer`, or why there is none.
    pub fn admit(self: &Arc<Self>, peer: IpAddr, allowance: Allowance) -> Result<Ticket, Full> {
        let source = canonical(peer);
        let mut counts = self.counts.lock();
        let held = counts.per_source.get(&source).copied().unwrap_or(0);
        if held >= allowance.per_source {
            return Err(Full::Source);
        }
        if !allowance.bound {
            if counts.unbound >= allowance.shared {
                return Err(Full::Shared);
            }
            counts.unbound += 1;
        }
        counts.per_source.insert(source, held + 1);
        Ok(Ticket { admission: self.clone(), source, bound: allowance.bound })
    }

    /// Unauthenticated connections `peer` holds now.
    pub fn held_by(&self, peer: IpAddr) -> usize {
        let counts = self.counts.lock();
        counts.per_source.get(&canonical(peer)).copied().unwrap_or(0)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut counts = self.admission.counts.lock();
        if !self.bound {
            counts.unbound = counts.unbound.saturating_sub(1);
        }
        if let Some(held) = counts.per_source.get_mut(&self.source) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                counts.per_source.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn one_address_is_capped_and_bound_addresses_keep_their_room() {
        let admission = Arc::new(Admission::default());
        let unbound = Allowance { per_source: 2, bound: false, shared: 3 };
        let bound = Allowance { per_source: 2, bound: true, shared: 3 };
        let a1 = admission.admit(ip("203.0.113.1"), unbound).expect("first");
        let _a2 = admission.admit(ip("203.0.113.1"), unbound).expect("second");
        assert_eq!(admission.admit(ip("::ffff:203.0.113.1"), unbound).err(), Some(Full::Source), "mapped form counts");
        let _b1 = admission.admit(ip("203.0.113.2"), unbound).expect("another address");
        assert_eq!(admission.admit(ip("203.0.113.3"), unbound).err(), Some(Full::Shared), "the shared pool is full");
        // A sandbox's own address is not in the shared pool.
        let _s1 = admission.admit(ip("172.30.0.2"), bound).expect("bound address");
        let _s2 = admission.admit(ip("172.30.0.2"), bound).expect("bound address");
        assert_eq!(admission.admit(ip("172.30.0.2"), bound).err(), Some(Full::Source));
        drop(a1);
        assert_eq!(admission.held_by(ip("203.0.113.1")), 1);
        let _a3 = admission.admit(ip("203.0.113.3"), unbound).expect("room again");
    }
}
