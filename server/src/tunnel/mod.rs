//! The tunnel sandboxd dials into: the connection's frames ([`link`]: a [`link::Link`] and its
//! inbox, handed over to whoever the accepting side names), bounded queues ([`byte_queue`]) and
//! the listener's TLS ([`tls`]). Who gets a connection is decided above, in
//! `crate::api::tunnel` (the tunnel listener's route).

pub mod byte_queue;
pub mod link;
pub mod tls;
