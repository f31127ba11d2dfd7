//! agenthold's in-sandbox side: the tunnel wire protocol (shared with the server) and the
//! sandboxd daemon that carries processes and terminals over it.

pub mod daemon;
pub mod fakeagent;
pub mod hold;
pub mod protocol;
