//! Addresses for many agents: the pool of IPv4 subnets agenthold cuts agent networks from
//! (`AGENTHOLD_SANDBOX_SUBNET_POOL`, in blocks of `AGENTHOLD_SANDBOX_SUBNET_PREFIX`), and which
//! blocks are taken. Pure: no engine calls. The Docker driver passes each block to the engine in
//! the network's IPAM settings, so a stock engine (whose own pools hold about 30 networks) holds
//! as many agents as the pool has blocks: a /16 in /28s is 4,096.
//!
//! What is taken is derived from the engine (every network whose subnet overlaps the pool, ours
//! or anyone's), so it survives restarts and tolerates other servers on the same engine; a block
//! the engine still refuses (someone made a network meanwhile) is marked taken and the next one
//! tried.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use crate::config::Config;
use crate::ids::AgentId;

/// The smallest block an agent network may have: a /29 holds the gateway and five containers.
pub const MAX_BLOCK_PREFIX: u8 = 29;
pub use crate::config::sandbox::{DEFAULT_BLOCK_PREFIX, DEFAULT_POOL};

/// An IPv4 network `address/prefix` whose host bits are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Net {
    /// The first address, as a number.
    base: u32,
    /// The prefix length (0–32).
    prefix: u8,
}

impl Ipv4Net {
    /// Parses `a.b.c.d/n`; the host bits must be zero.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (addr, prefix) = text.trim().split_once('/').ok_or_else(|| format!("{text}: not an a.b.c.d/n subnet"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| format!("{text}: not an IPv4 address"))?;
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32).ok_or_else(|| format!("{text}: bad prefix"))?;
        let net = Self { base: u32::from(addr), prefix };
        if net.base & !net.mask() != 0 {
            let aligned = Self { base: net.base & net.mask(), prefix };
            return Err(format!("{text}: host bits set (did you mean {aligned}?)"));
        }
        Ok(net)
    }

    fn mask(self) -> u32 {
        if self.prefix == 0 { 0 } else { u32::MAX << (32 - self.prefix) }
    }

    /// The last address.
    fn last(self) -> u32 {
        self.base | !self.mask()
    }

    /// The prefix length.
    pub fn prefix(self) -> u8 {
        self.prefix
    }

    /// The first host address (the gateway agenthold gives the network).
    pub fn gateway(self) -> Ipv4Addr {
        Ipv4Addr::from(self.base + 1)
    }

    /// Whether the two share an address.
    pub fn overlaps(self, other: Self) -> bool {
        self.base <= other.last() && other.base <= self.last()
    }
}

impl std::fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

/// The pool and its block size, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubnetPool {
    pool: Ipv4Net,
    block_prefix: u8,
}

impl SubnetPool {
    /// The configured pool of agent networks (`None`: the engine picks); an error saying what is
    /// wrong with the two settings.
    pub fn of(config: &Config) -> Result<Option<Self>, String> {
        if config.sandbox_subnet_pool.trim() == "engine" {
            return Ok(None);
        }
        Self::new(&config.sandbox_subnet_pool, config.sandbox_subnet_prefix)
            .map(Some)
            .map_err(|e| format!("AGENTHOLD_SANDBOX_SUBNET_POOL / AGENTHOLD_SANDBOX_SUBNET_PREFIX: {e}"))
    }

    /// A pool cut into blocks of `/block_prefix`: the block must fit in the pool and hold a
    /// gateway and a few containers (at most /[`MAX_BLOCK_PREFIX`]), and the pool may not have
    /// more than 2^20 blocks (a sanity bound, ~1 M agents).
    pub fn new(pool: &str, block_prefix: u8) -> Result<Self, String> {
        let pool = Ipv4Net::parse(pool)?;
        if block_prefix < pool.prefix || block_prefix > MAX_BLOCK_PREFIX {
            return Err(format!(
                "the subnet prefix /{block_prefix} must be between the pool's /{} and /{MAX_BLOCK_PREFIX}",
                pool.prefix
            ));
        }
        if block_prefix - pool.prefix > 20 {
            return Err(format!("{pool} in /{block_prefix}s is more than 2^20 blocks: use a smaller pool"));
        }
        Ok(Self { pool, block_prefix })
    }

    /// How many blocks the pool has.
    pub fn blocks(&self) -> u32 {
        1 << (self.block_prefix - self.pool.prefix)
    }

    /// Block `index` (below [`Self::blocks`]).
    pub fn block(&self, index: u32) -> Ipv4Net {
        Ipv4Net { base: self.pool.base + (index << (32 - self.block_prefix)), prefix: self.block_prefix }
    }

    /// The blocks `subnet` overlaps (none when it is outside the pool).
    fn indexes_of(&self, subnet: Ipv4Net) -> std::ops::Range<u32> {
        if !subnet.overlaps(self.pool) {
            return 0..0;
        }
        let shift = 32 - self.block_prefix;
        let first = subnet.base.max(self.pool.base) - self.pool.base;
        let last = subnet.last().min(self.pool.last()) - self.pool.base;
        (first >> shift)..(last >> shift) + 1
    }

    /// The pool itself.
    pub fn pool(&self) -> Ipv4Net {
        self.pool
    }
}

/// Which blocks are taken: by an agent's network (known, so it can be given back when the network
/// is removed) or by anything else on the engine.
#[derive(Debug)]
pub struct Allocator {
    pool: SubnetPool,
    taken: HashSet<u32>,
    by_agent: HashMap<AgentId, u32>,
    /// Where the next search starts (so a block just given back is not handed out at once).
    cursor: u32,
}

impl Allocator {
    /// Nothing taken.
    pub fn new(pool: SubnetPool) -> Self {
        Self { pool, taken: HashSet::new(), by_agent: HashMap::new(), cursor: 0 }
    }

    /// The pool.
    pub fn pool(&self) -> SubnetPool {
        self.pool
    }

    /// Replaces what is known with what the engine holds: the subnets of its networks, with the
    /// agent each belongs to when it is one of ours. Subnets outside the pool are ignored;
    /// unparsable ones (IPv6) too.
    pub fn sync<'a>(&mut self, networks: impl IntoIterator<Item = (&'a str, Option<AgentId>)>) {
        self.taken.clear();
        self.by_agent.clear();
        for (subnet, agent) in networks {
            let Ok(subnet) = Ipv4Net::parse(subnet) else { continue };
            let indexes = self.pool.indexes_of(subnet);
            if let (Some(agent), true) = (agent, indexes.len() == 1) {
                self.by_agent.insert(agent, indexes.start);
            }
            self.taken.extend(indexes);
        }
    }

    /// How many blocks are free.
    pub fn free(&self) -> u32 {
        self.pool.blocks() - self.taken.len() as u32
    }

    /// Takes a free block for `agent` (the one it has, if any); `None` when the pool is full.
    pub fn allocate(&mut self, agent: AgentId) -> Option<Ipv4Net> {
        if let Some(index) = self.by_agent.get(&agent) {
            return Some(self.pool.block(*index));
        }
        let blocks = self.pool.blocks();
        let index = (0..blocks).map(|i| (self.cursor + i) % blocks).find(|i| !self.taken.contains(i))?;
        self.taken.insert(index);
        self.by_agent.insert(agent, index);
        self.cursor = (index + 1) % blocks;
        Some(self.pool.block(index))
    }

    /// The engine refused `agent`'s block (it overlaps a network made meanwhile): the block stays
    /// taken, but no longer as the agent's.
    pub fn refused(&mut self, agent: AgentId) {
        self.by_agent.remove(&agent);
    }

    /// Gives `agent`'s block back (its network was removed, or never made).
    pub fn release(&mut self, agent: AgentId) {
        if let Some(index) = self.by_agent.remove(&agent) {
            self.taken.remove(&index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_pool_is_checked_with_its_prefix() {
        let mut config = crate::config::parse(&[]).expect("parses");
        (config.sandbox_subnet_pool, config.sandbox_subnet_prefix) = ("10.214.0.0/16".to_owned(), 28);
        assert_eq!(SubnetPool::of(&config).expect("valid").map(|p| p.blocks()), Some(4096));
        config.sandbox_subnet_prefix = 12;
        assert!(SubnetPool::of(&config).expect_err("too large").contains("between the pool's /16 and /29"));
        config.sandbox_subnet_pool = "engine".to_owned();
        assert_eq!(SubnetPool::of(&config), Ok(None));
        config.sandbox_subnet_pool = "10.214.0.1/16".to_owned();
        config.sandbox_subnet_prefix = 28;
        assert!(SubnetPool::of(&config).expect_err("host bits").contains("AGENTHOLD_SANDBOX_SUBNET_POOL"));
    }

    #[test]
    fn pools_and_prefixes_are_validated() {
        let pool = SubnetPool::new(DEFAULT_POOL, DEFAULT_BLOCK_PREFIX).expect("the default is valid");
        assert_eq!(pool.blocks(), 4096);
        assert_eq!(pool.block(0).to_string(), "10.214.0.0/28");
        assert_eq!(pool.block(1).to_string(), "10.214.0.16/28");
        assert_eq!(pool.block(4095).to_string(), "10.214.255.240/28");
        assert_eq!(pool.block(1).gateway(), Ipv4Addr::new(10, 214, 0, 17));
        assert!(SubnetPool::new("10.214.0.0/16", 15).is_err(), "a block larger than the pool");
        assert!(SubnetPool::new("10.214.0.0/16", 30).is_err(), "a block too small for a gateway and hosts");
        assert!(SubnetPool::new("10.214.0.0/16", 29).is_ok());
        assert!(SubnetPool::new("10.214.0.0/16", 16).is_ok(), "one block: the whole pool");
        assert!(SubnetPool::new("10.0.0.0/8", 29).is_err(), "2^21 blocks");
        let err = SubnetPool::new("10.214.3.0/16", 28).expect_err("host bits");
        assert!(err.contains("did you mean 10.214.0.0/16"), "{err}");
        for bad in ["10.214.0.0", "fd00::/8", "10.214.0.0/33", "x/16", ""] {
            assert!(SubnetPool::new(bad, 28).is_err(), "{bad}");
        }
    }

    #[test]
    fn blocks_are_handed_out_once_and_given_back() {
        let mut alloc = Allocator::new(SubnetPool::new("10.214.0.0/26", 28).expect("valid"));
        let agents: Vec<AgentId> = (0..5).map(|_| AgentId::new()).collect();
        let got: Vec<_> = agents[..4].iter().map(|a| alloc.allocate(*a).expect("free").to_string()).collect();
        assert_eq!(got, ["10.214.0.0/28", "10.214.0.16/28", "10.214.0.32/28", "10.214.0.48/28"]);
        assert_eq!(alloc.allocate(agents[1]).map(|n| n.to_string()).as_deref(), Some("10.214.0.16/28"), "same agent");
        assert_eq!(alloc.free(), 0);
        assert_eq!(alloc.allocate(agents[4]), None, "full");
        alloc.release(agents[2]);
        assert_eq!(alloc.allocate(agents[4]).map(|n| n.to_string()).as_deref(), Some("10.214.0.32/28"));
        alloc.refused(agents[4]);
        assert_eq!(alloc.allocate(AgentId::new()), None, "a refused block stays taken");
    }

    #[test]
    fn what_is_taken_comes_from_the_engine_s_networks() {
        let mut alloc = Allocator::new(SubnetPool::new("10.214.0.0/24", 28).expect("valid"));
        let ours = AgentId::new();
        alloc.sync([
            ("10.214.0.16/28", Some(ours)),
            ("10.214.0.128/25", None), // someone's large network: 8 blocks
            ("172.17.0.0/16", None),   // outside the pool
            ("fd00::/64", None),
        ]);
        assert_eq!(alloc.free(), 16 - 1 - 8);
        let got: Vec<_> = (0..7).filter_map(|_| alloc.allocate(AgentId::new())).map(|n| n.to_string()).collect();
        assert_eq!(got.len(), 7);
        let taken = [Ipv4Net::parse("10.214.0.16/28").expect("net"), Ipv4Net::parse("10.214.0.128/25").expect("net")];
        for net in &got {
            let net = Ipv4Net::parse(net).expect("net");
            assert!(!taken.iter().any(|t| t.overlaps(net)), "{net} was taken");
        }
        assert_eq!(alloc.allocate(AgentId::new()), None);
        alloc.release(ours);
        assert_eq!(alloc.allocate(AgentId::new()).map(|n| n.to_string()).as_deref(), Some("10.214.0.16/28"));
    }
}
