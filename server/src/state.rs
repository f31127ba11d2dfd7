//! What every handler can reach: the services the composition root builds.

use std::sync::Arc;

use sqlx::PgPool;

use crate::config::Config;
use crate::events::appender::Appender;
use crate::events::hub::Hub;
use crate::sandbox::SandboxDriver;
use crate::secrets::master_key::MasterKey;
use crate::store;
use crate::supervisor::Supervisors;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The database.
    pub pool: PgPool,
    /// The event log's page reads (`store::connect_log_reader`: generic plans).
    pub log_reads: PgPool,
    /// The live feed of stored events.
    pub hub: Arc<Hub>,
    /// The event log's writer.
    pub appender: Appender,
    /// One supervisor per agent (this replica's).
    pub supervisors: Arc<Supervisors>,
    /// Where a command for an agent goes: here, the replica holding its lease, or nowhere.
    pub dispatch: Arc<crate::dispatch::Dispatch>,
    /// Where sandboxes run.
    pub driver: Arc<dyn SandboxDriver>,
    /// The configuration.
    pub config: Arc<Config>,
    /// The master key that encrypts secret values.
    pub master_key: Arc<MasterKey>,
    /// The server's permission settings.
    pub postures: crate::supervisor::Postures,
    /// Checks provider logins on connect.
    pub login_probe: crate::logins::probe::Probe,
    /// Whether Postgres answers (API calls are refused at once while it does not).
    pub availability: store::availability::Availability,
    /// Sandboxes started ahead for new agents (`None`: no pool).
    pub warm_pool: Option<crate::fleet::warm_pool::WarmPool>,
    /// Turns `true` when the server begins to shut down: open WebSockets close with 1012.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    /// The server's permission settings.
    pub fn postures(&self) -> &crate::supervisor::Postures {
        &self.postures
    }
}
