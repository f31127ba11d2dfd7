//! The engine objects a driver lists as its own (labelled for this instance and an agent): what
//! the orphan sweep (`crate::fleet::orphans`) decides over.

use chrono::{DateTime, Utc};

use crate::ids::AgentId;

/// What kind of engine object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A sandbox container (the Kubernetes driver: its Pod).
    Container,
    /// A home volume (the Kubernetes driver: its PersistentVolumeClaim).
    Volume,
    /// An agent network (the Kubernetes driver: its NetworkPolicy).
    Network,
    /// The Kubernetes driver's Secret holding a sandbox token.
    Secret,
}

impl ObjectKind {
    /// Its name in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Container => "container",
            Self::Volume => "volume",
            Self::Network => "network",
            Self::Secret => "secret",
        }
    }
}

/// An engine object labelled for this instance and an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// What it is.
    pub kind: ObjectKind,
    /// Its name (or id).
    pub name: String,
    /// The agent its label names.
    pub agent_id: AgentId,
    /// When it was made (`None`: the engine did not say; never swept).
    pub created: Option<DateTime<Utc>>,
    /// The engine it is on, when the driver has several (`None`: the driver's only one).
    pub engine: Option<String>,
    /// The replica that made it ahead for an agent not created yet (a ready network and its
    /// holder): another replica's to hand out while that replica is alive, never swept then.
    pub made_by: Option<uuid::Uuid>,
}
