//! Whether Postgres answers, known without waiting on it: a monitor with a connection of its own
//! (never one of the pool's, so a busy pool is not taken for an outage) pings every
//! [`PING_EVERY`] with a [`PING_TIMEOUT`]. While the last ping failed, API requests that need the
//! database are answered `503 DATABASE_UNAVAILABLE` at once instead of waiting for the pool's
//! acquire timeout (docs/operations.md, "Postgres outages").

use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio::sync::watch;

/// How often the monitor pings while Postgres answers…
pub const PING_EVERY: Duration = Duration::from_millis(500);
/// …and while it does not (to notice its return quickly; a refused connect is cheap).
pub const PING_EVERY_WHILE_DOWN: Duration = Duration::from_millis(100);
/// How long a ping (or a reconnect) may take before the database counts as unavailable.
pub const PING_TIMEOUT: Duration = Duration::from_millis(1000);

/// The monitor's latest verdict, shared; supervisors follow its changes.
#[derive(Clone, Debug)]
pub struct Availability {
    up: Arc<watch::Sender<bool>>,
}

impl Default for Availability {
    fn default() -> Self {
        Self { up: Arc::new(watch::Sender::new(true)) }
    }
}

impl Availability {
    /// Whether the last ping succeeded (true until the first one fails).
    pub fn is_up(&self) -> bool {
        *self.up.borrow()
    }

    /// Resolves once Postgres is (or goes) down.
    pub async fn went_down(&self) {
        let mut changes = self.up.subscribe();
        let _ = changes.wait_for(|up| !*up).await;
    }

    /// Follows the verdict's changes.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.up.subscribe()
    }

    fn set(&self, up: bool) {
        if self.up.send_replace(up) != up {
            if up {
                tracing::info!("Postgres answers again");
            } else {
                tracing::warn!("Postgres does not answer: API calls that need it get 503 DATABASE_UNAVAILABLE");
            }
        }
    }

    /// Pings until the task is aborted.
    pub fn spawn(&self, database_url: String) -> tokio::task::JoinHandle<()> {
        let availability = self.clone();
        tokio::spawn(async move {
            let mut connection: Option<PgConnection> = None;
            loop {
                let up = ping(&mut connection, &database_url).await;
                availability.set(up);
                // Every round (a recorder installed later still gets it).
                crate::metrics::database_up(up);
                tokio::time::sleep(if up { PING_EVERY } else { PING_EVERY_WHILE_DOWN }).await;
            }
        })
    }
}

/// One ping on the monitor's connection, (re)connecting first when there is none; a failed ping
/// drops the connection so the next one starts afresh.
async fn ping(connection: &mut Option<PgConnection>, database_url: &str) -> bool {
    let attempt = async {
        if connection.is_none() {
            *connection = Some(PgConnection::connect(database_url).await?);
        }
        match connection.as_mut() {
            Some(open) => open.ping().await,
            None => Ok(()),
        }
    };
    match tokio::time::timeout(PING_TIMEOUT, attempt).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) | Err(_) => {
            *connection = None;
            false
        }
    }
}

/// Whether an error means "the database cannot be reached right now" (as opposed to a bad
/// query or a constraint): the pool timed out or is closed, the connection broke, or Postgres
/// refuses connections or is shutting down (SQLSTATE classes 08 and 57P).
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Io(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(database) => {
            database.code().is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
        }
        _ => false,
    }
}

/// [`is_unavailable`] for an error anywhere in an `anyhow` chain.
pub fn chain_is_unavailable(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<sqlx::Error>().is_some_and(is_unavailable))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_are_told_from_query_errors() {
        assert!(is_unavailable(&sqlx::Error::PoolTimedOut));
        assert!(is_unavailable(&sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))));
        assert!(!is_unavailable(&sqlx::Error::RowNotFound));
        let wrapped = anyhow::Error::from(sqlx::Error::PoolTimedOut).context("reading the agent");
        assert!(chain_is_unavailable(&wrapped));
        assert!(!chain_is_unavailable(&anyhow::anyhow!("something else")));
    }
}
