//! The Docker driver's part of the orphan sweep ([`crate::housekeeping`]): every container,
//! volume and network labelled with this instance and an agent (a ready network and its holder,
//! not yet anyone's, left out), and removing one of them.

use std::collections::HashMap;

use bollard::errors::Error as BollardError;

use super::{DockerDriver, engine, remove_container, status_of};
use crate::ids::AgentId;
use crate::sandbox::{DriverError, Labelled, ObjectKind};

impl DockerDriver {
    /// This instance's labelled containers, volumes and networks.
    pub(super) async fn list_labelled(&self) -> Result<Vec<Labelled>, DriverError> {
        let filters = || {
            let labels = vec![format!("agenthold.instance={}", self.instance), "agenthold.agent".to_owned()];
            Some(HashMap::from([("label".to_owned(), labels)]))
        };
        let agent_of = |labels: Option<&HashMap<String, String>>| {
            labels.and_then(|l| l.get("agenthold.agent")).and_then(|a| a.parse::<AgentId>().ok())
        };
        // The replica that made a ready network or holder.
        let made_by = |labels: Option<&HashMap<String, String>>| {
            labels.and_then(|l| l.get(crate::sandbox::docker_networks::REPLICA_LABEL)).and_then(|r| r.parse().ok())
        };
        let date = |text: Option<&String>| {
            text.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(|d| d.with_timezone(&chrono::Utc))
        };
        let mut found = Vec::new();
        let options =
            bollard::query_parameters::ListContainersOptions { all: true, filters: filters(), ..Default::default() };
        for container in self.docker.list_containers(Some(options)).await.map_err(engine)? {
            let (Some(agent_id), Some(id)) = (agent_of(container.labels.as_ref()), container.id) else { continue };
            // A ready network's holder goes with it.
            if self.networks.is_ready(agent_id) {
                continue;
            }
            let created = container.created.and_then(|s| chrono::DateTime::from_timestamp(s, 0));
            let made_by = made_by(container.labels.as_ref());
            found.push(Labelled { kind: ObjectKind::Container, name: id, agent_id, created, engine: None, made_by });
        }
        let options = bollard::query_parameters::ListVolumesOptions { filters: filters() };
        let volumes = self.docker.list_volumes(Some(options)).await.map_err(engine)?.volumes.unwrap_or_default();
        for volume in volumes {
            let Some(agent_id) = agent_of(Some(&volume.labels)) else { continue };
            let created = date(volume.created_at.as_ref());
            let (name, made_by) = (volume.name, None);
            found.push(Labelled { kind: ObjectKind::Volume, name, agent_id, created, engine: None, made_by });
        }
        let options = bollard::query_parameters::ListNetworksOptions { filters: filters() };
        for network in self.docker.list_networks(Some(options)).await.map_err(engine)? {
            let (Some(agent_id), Some(name)) = (agent_of(network.labels.as_ref()), network.name) else { continue };
            if self.networks.is_ready(agent_id) {
                continue;
            }
            let created = date(network.created.as_ref());
            let made_by = made_by(network.labels.as_ref());
            found.push(Labelled { kind: ObjectKind::Network, name, agent_id, created, engine: None, made_by });
        }
        Ok(found)
    }

    /// Removes one of them (gone already is fine).
    pub(super) async fn remove_labelled(&self, object: &Labelled) -> Result<(), DriverError> {
        let gone = |result: Result<(), BollardError>| match result {
            Ok(()) => Ok(()),
            Err(error) if status_of(&error) == Some(404) => Ok(()),
            Err(error) => Err(engine(error)),
        };
        match object.kind {
            ObjectKind::Container => remove_container(&self.docker, &object.name).await,
            ObjectKind::Volume => gone(
                self.docker.remove_volume(&object.name, None::<bollard::query_parameters::RemoveVolumeOptions>).await,
            ),
            // By the agent's network name, which also gives its subnet back.
            ObjectKind::Network if object.name == self.network(object.agent_id) => {
                self.networks.remove(object.agent_id).await
            }
            ObjectKind::Network => gone(self.docker.remove_network(&object.name).await),
            // Kubernetes objects only; never listed here.
            ObjectKind::Secret => Ok(()),
        }
    }
}
