//! The composition root: [`build`] turns the configuration into services and their background
//! tasks ([`App`], whose `crate::state::AppState` every handler reaches), [`serve`] runs them on the bound
//! [`Listeners`] until shutdown. `api::router` is the route table; tests drive it in-process on a
//! built app (`tower::ServiceExt::oneshot`).

mod build;
mod drivers;
mod listeners;
mod serve;
mod settings;
pub mod tasks;

pub use build::{App, build};
pub use listeners::{Listeners, shutdown_signal};
pub use serve::serve;

/// Builds the server from `config` and serves it until `shutdown` resolves.
pub async fn run(
    config: crate::config::Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = build(config, &listeners).await?;
    serve(app, listeners, shutdown).await
}
