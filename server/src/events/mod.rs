//! The event log: appending with group commit ([`appender`], small batches waiting for company
//! while many sessions trickle: [`gather`]) and handing each committed batch on ([`publisher`]),
//! live fan-out ([`hub`]) and the
//! cursor stream ([`stream`]). What an event is before it is stored ([`EventKind`],
//! [`NewEvent`]) is `agenthold_core::events`; what a stored one is ([`StoredEvent`],
//! [`SharedEvent`]) and the size budget ([`budget`]) are the store's (`crate::store::events`).

pub mod appender;
mod gather;
pub mod hub;
mod publisher;
pub mod stream;

pub use agenthold_core::events::{EventKind, NewEvent, NoticeCode};

pub use crate::store::events::budget;
pub use crate::store::events::stored::{SharedEvent, StoredEvent};
