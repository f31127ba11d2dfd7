//! The tools volume: sandboxd and fakeagent from the server's own binaries, in a volume named by
//! the archive's content hash, filled once through a never-started helper container (Docker's
//! archive upload, which works for local and remote engines alike) and mounted read-only by every
//! sandbox at [`super::TOOLS_DIR`].

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions, UploadToContainerOptions};
use bytes::Bytes;
use sha2::Digest;

use super::{DockerDriver, TOOLS_DIR, TOOLS_LABEL, engine, status_of};
use crate::sandbox::DriverError;

impl DockerDriver {
    /// The tools volume, created and filled on first use: a never-started helper container
    /// mounts it and receives the archive (Docker's archive upload, which works for local and
    /// remote engines alike). Sandboxes then mount it instead of each receiving an upload.
    pub(super) async fn tools_volume(&self, image: &str) -> Result<String, DriverError> {
        let cell = self.tools_volume.get_or_try_init(|| async {
            let name = self.tools_name().await?;
            // A volume a sandbox was made with is filled already (its name is its content's
            // hash): filling it again would rewrite binaries running sandboxes execute ("text
            // file busy"), as another replica, or this server restarted, would.
            if self.tools_in_use(&name).await? {
                return Ok(name);
            }
            let tar = self.tools_tar().await?;
            let volume = VolumeCreateRequest {
                name: Some(name.clone()),
                labels: Some(self.labels_of_instance()),
                ..Default::default()
            };
            self.docker.create_volume(volume).await.map_err(engine)?;
            let helper = format!("{name}-fill-{}", uuid::Uuid::new_v4().simple());
            let body = ContainerCreateBody {
                image: Some(image.to_owned()),
                entrypoint: Some(vec!["/bin/true".to_owned()]),
                labels: Some(self.labels_of_instance()),
                host_config: Some(HostConfig {
                    mounts: Some(vec![Mount {
                        target: Some(TOOLS_DIR.to_owned()),
                        source: Some(name.clone()),
                        typ: Some(MountType::VOLUME),
                        ..Default::default()
                    }]),
                    network_mode: Some("none".to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let options = CreateContainerOptions { name: Some(helper.clone()), ..Default::default() };
            let created = match self.docker.create_container(Some(options), body).await {
                Ok(created) => created,
                Err(error) if status_of(&error) == Some(404) => {
                    return Err(DriverError::ImageNotFound(image.to_owned()));
                }
                Err(error) => return Err(engine(error)),
            };
            let upload = UploadToContainerOptions { path: "/".to_owned(), ..Default::default() };
            let uploaded = self.docker.upload_to_container(&created.id, Some(upload), bollard::body_full(tar)).await;
            let remove = RemoveContainerOptions { force: true, ..Default::default() };
            let _ = self.docker.remove_container(&created.id, Some(remove)).await;
            uploaded.map_err(engine)?;
            Ok::<_, DriverError>(name)
        });
        cell.await.cloned()
    }

    /// Whether a container (a sandbox, running or not) was made with this tools volume.
    async fn tools_in_use(&self, name: &str) -> Result<bool, DriverError> {
        let options = bollard::query_parameters::ListContainersOptions {
            all: true,
            limit: Some(1),
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![format!("agenthold.instance={}", self.instance), format!("{TOOLS_LABEL}={name}")],
            )])),
            ..Default::default()
        };
        Ok(!self.docker.list_containers(Some(options)).await.map_err(engine)?.is_empty())
    }

    /// The tools volume's name, from the content hash of the tools archive (which is built
    /// again to fill the volume rather than kept in memory).
    pub(super) async fn tools_name(&self) -> Result<String, DriverError> {
        let name = self.tools_name.get_or_try_init(|| async {
            let tar = self.tools_tar().await?;
            let digest = sha2::Sha256::digest(&tar);
            Ok::<_, DriverError>(format!("{}-tools-{}", self.instance, hex::encode(&digest[..8])))
        });
        name.await.cloned()
    }

    async fn tools_tar(&self) -> Result<Bytes, DriverError> {
        let bin_dir = self.bin_dir.clone();
        tokio::task::spawn_blocking(move || crate::sandbox::docker_tools::build_tools_tar(&bin_dir))
            .await
            .map_err(|e| DriverError::Engine(e.to_string()))?
    }
}
