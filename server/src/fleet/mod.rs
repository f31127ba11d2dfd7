//! Policies over the fleet of sandboxes, above the drivers and the supervisors: idle agents put
//! to sleep ([`auto_sleep`]), sandboxes started ahead for new agents ([`warm_pool`]), containers,
//! volumes and networks whose agent is gone removed ([`orphans`]), deletions interrupted by a
//! restart finished ([`deletion`]), this replica's heartbeat (its leases renewed, lost agents
//! let go, dead replicas' unfinished turns taken over: [`heartbeat`]).

pub mod auto_sleep;
pub mod deletion;
pub mod heartbeat;
pub mod orphans;
pub mod pooled_harness;
pub mod warm_pool;
