//! Whether the engine killed a process of a container for want of memory since the container
//! last started. `State.OOMKilled` alone does not say so: engines before Docker 25 set it only
//! once the container has exited, and only for its first process. The engine's `oom` events do,
//! for any process of the container (a harness killed while sandboxd lives on), so both are read:
//! the flag, then the container's `oom` events from its start until now.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::EventsOptions;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;

use super::DriverError;

/// The longest the engine is given to list a container's `oom` events.
const EVENTS_TIMEOUT: Duration = Duration::from_secs(10);
/// Most events read (`oom` events of one container; one is enough to answer).
const MAX_EVENTS: usize = 16;

/// Whether `container` (a name) had a process OOM-killed since it last started; false if it
/// does not exist.
pub async fn oom_killed(docker: &Docker, container: &str) -> Result<bool, DriverError> {
    let info = match docker.inspect_container(container, None).await {
        Ok(info) => info,
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => return Ok(false),
        Err(error) => return Err(DriverError::Engine(error.to_string())),
    };
    let Some(state) = info.state else { return Ok(false) };
    if state.oom_killed == Some(true) {
        return Ok(true);
    }
    let Some(started) = state.started_at.as_deref().and_then(|s| DateTime::parse_from_rfc3339(s).ok()) else {
        return Ok(false);
    };
    let started = started.with_timezone(&Utc);
    if started.timestamp() <= 0 {
        // Never started ("0001-01-01T00:00:00Z").
        return Ok(false);
    }
    let until = Utc::now() + chrono::Duration::seconds(1);
    let options = EventsOptions {
        since: Some(unix(started)),
        until: Some(unix(until)),
        filters: Some(HashMap::from([
            ("type".to_owned(), vec!["container".to_owned()]),
            ("container".to_owned(), vec![container.to_owned()]),
            ("event".to_owned(), vec!["oom".to_owned()]),
        ])),
    };
    let events = docker.events(Some(options)).take(MAX_EVENTS);
    let found = tokio::time::timeout(EVENTS_TIMEOUT, async {
        futures_util::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) if event.action.as_deref() == Some("oom") => return Ok(true),
                Ok(_) => {}
                Err(error) => return Err(DriverError::Engine(error.to_string())),
            }
        }
        Ok(false)
    })
    .await;
    found.unwrap_or_else(|_| {
        Err(DriverError::Engine("the engine did not list the container's events in time".to_owned()))
    })
}

/// A time as the events API takes it: Unix seconds with nanoseconds.
fn unix(at: DateTime<Utc>) -> String {
    format!("{}.{:09}", at.timestamp(), at.timestamp_subsec_nanos())
}
