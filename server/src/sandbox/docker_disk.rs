//! Disk limits of Docker sandboxes (docs/security.md, "Disk"): the home volume gets the local
//! volume driver's `size` option and the container a `StorageOpt size`, each the agent's
//! `disk_mib`, where the engine can enforce them — the local volume driver does with project
//! quotas (its data-root on xfs mounted with `pquota`); a writable layer's size needs overlay2
//! on such an xfs, or btrfs with quotas (with simple quotas, as scripts/dev/docker.sh sets them
//! up, a container's writes count; with full qgroups its image's files count too). Whether the
//! engine can is asked once per driver by trying: a volume with a `size` and a never-started
//! container with a `StorageOpt size` are made, then removed (and those an earlier server, killed
//! meanwhile, left are removed first).
//!
//! When a turn reported ENOSPC or EDQUOT, [`check`] asks the sandbox itself whether a small write
//! still succeeds in its home and in `/tmp` (its writable layer), as the `agent` user.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, ListVolumesOptions, RemoveContainerOptions,
};
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use super::docker::{HOME_DIR, engine, status_of};
use super::{DiskCheck, DiskEnforcement, DiskLimits, DriverError, Fullness, says_disk_full};

/// The size (MiB) of a sandbox whose spec names none, until the server sets its own.
pub const DEFAULT_MIB: i32 = 10_240;
/// The label of a container naming the size (MiB) its writable layer was given.
pub const DISK_LABEL: &str = "agenthold.disk-mib";
/// The volume option holding a local volume's size.
const SIZE_OPTION: &str = "size";
/// The longest [`check`] waits for the sandbox's answer.
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);
/// The most output of the check read.
const MAX_CHECK_OUTPUT: usize = 16 * 1024;
/// Writes one MiB in the home (`$1`) and in `/tmp`, each line saying `<part> ok` or
/// `<part> failed: <dd's error>`, and removes what it wrote.
const CHECK_SCRIPT: &str = r#"probe() {
  f="$2/.agenthold-disk-check.$$"
  if out=$(dd if=/dev/zero of="$f" bs=65536 count=16 2>&1); then echo "$1 ok"; else echo "$1 failed: $out" | tr '\n' ' '; echo; fi
  rm -f "$f"
}
probe home "$1"
probe writable /tmp"#;

/// What an engine can limit, as found by trying.
#[derive(Debug, Clone)]
pub struct Support {
    /// The engine's storage driver (`overlay2`, `btrfs`, …).
    pub storage_driver: String,
    /// The filesystem under it (`Backing Filesystem`, when the engine says).
    pub backing_fs: Option<String>,
    /// A volume's `size` is enforced (`Err`: the engine's answer).
    pub home: Result<(), String>,
    /// A container's `StorageOpt size` is (`Err`: the engine's answer).
    pub writable_layer: Result<(), String>,
}

impl Support {
    /// What it enforces, with why not where it does not.
    pub fn enforcement(&self) -> DiskEnforcement {
        let on = match &self.backing_fs {
            Some(fs) => format!("{} on {fs}", self.storage_driver),
            None => self.storage_driver.clone(),
        };
        let mut notes = Vec::new();
        if let Err(why) = &self.home {
            notes.push(format!(
                "the engine ({on}) cannot limit a volume's size, so homes are not limited ({why}); \
                 it needs its data-root on xfs mounted with pquota"
            ));
        }
        if let Err(why) = &self.writable_layer {
            notes.push(format!(
                "the engine ({on}) cannot limit a container's writable layer ({why}); it needs overlay2 on xfs \
                 mounted with pquota, or btrfs"
            ));
        }
        DiskEnforcement {
            home: self.home.is_ok(),
            writable_layer: self.writable_layer.is_ok(),
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        }
    }
}

/// A driver's disk limits: the setting, the default size, and what its engine supports.
#[derive(Debug, Default)]
pub struct Disk {
    /// `AGENTHOLD_SANDBOX_DISK_LIMITS`.
    pub mode: DiskLimits,
    /// The size of a sandbox whose spec names none (MiB).
    pub default_mib: i32,
    /// What the engine supports, once asked.
    support: OnceCell<Support>,
}

/// The sizes one sandbox is made with (`None`: no limit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The home volume's `size` option (a new home only: an existing one keeps its own).
    pub home: Option<String>,
    /// The container's `StorageOpt size`.
    pub writable_layer: Option<String>,
    /// The writable layer's limit as labelled ([`DISK_LABEL`]).
    pub label: Option<String>,
}

impl Disk {
    /// Limits per `mode`, of `default_mib` for a sandbox whose spec names none.
    pub fn new(mode: DiskLimits, default_mib: i32) -> Self {
        Self { mode, default_mib, support: OnceCell::new() }
    }

    /// What the engine enforces (`None`: not asked yet).
    pub fn enforcement(&self) -> Option<DiskEnforcement> {
        if self.mode == DiskLimits::Off {
            let note = Some("disk limits are off (AGENTHOLD_SANDBOX_DISK_LIMITS=off)".to_owned());
            return Some(DiskEnforcement { note, ..Default::default() });
        }
        self.support.get().map(Support::enforcement)
    }

    /// What the engine supports, asked once (trying with `image`, which must exist: when it
    /// does not, the answer is not kept and the next call asks again). Logged once.
    pub async fn support(&self, docker: &Docker, instance: &str, image: &str) -> Result<&Support, DriverError> {
        self.support
            .get_or_try_init(|| async {
                let support = detect(docker, instance, image).await?;
                let enforcement = support.enforcement();
                match (&enforcement.note, self.mode) {
                    (None, _) => tracing::info!(
                        storage_driver = %support.storage_driver,
                        "the Docker engine enforces sandboxes' disk limits (home and writable layer)"
                    ),
                    (Some(note), DiskLimits::Required) => tracing::error!(
                        note,
                        "AGENTHOLD_SANDBOX_DISK_LIMITS=required and the Docker engine cannot enforce them: no sandbox starts on it"
                    ),
                    (Some(note), _) => tracing::warn!(
                        note,
                        "the Docker engine cannot enforce every disk limit: sandboxes get those it can (docs/security.md, \"Disk\")"
                    ),
                }
                Ok(support)
            })
            .await
    }

    /// The sizes of a sandbox of `image` limited to `mib` (`None`: the default): what the engine
    /// enforces, unless limits are off; an error when they are required and it cannot. (`image`
    /// is only what the engine is asked with, the first time.)
    pub async fn plan(
        &self,
        docker: &Docker,
        instance: &str,
        image: &str,
        mib: Option<i32>,
    ) -> Result<Plan, DriverError> {
        if self.mode == DiskLimits::Off {
            return Ok(Plan::default());
        }
        let support = self.support(docker, instance, image).await?;
        let enforcement = support.enforcement();
        if self.mode == DiskLimits::Required
            && let Some(note) = enforcement.note
        {
            return Err(DriverError::Unsupported(format!(
                "this server requires disk limits (AGENTHOLD_SANDBOX_DISK_LIMITS=required) and its Docker engine \
                 cannot enforce them: {note}"
            )));
        }
        let mib = i64::from(mib.unwrap_or(self.default_mib));
        let mut plan = Plan::default();
        if enforcement.home {
            plan.home = Some(format!("{mib}M"));
        }
        if enforcement.writable_layer {
            plan.writable_layer = Some(format!("{mib}M"));
            plan.label = Some(mib.to_string());
        }
        Ok(plan)
    }
}

/// The name every probe of `instance` starts with.
fn probe_prefix(instance: &str) -> String {
    format!("{instance}-diskprobe-")
}

/// Removes the probe containers and volumes of `instance` that an earlier server left (one killed
/// between making a probe and removing it). A probe lives for milliseconds and is never started,
/// so any found is left over — or another replica's in flight, which has its answer once the
/// probe is made (its own removal then only warns).
async fn remove_leftover_probes(docker: &Docker, instance: &str) {
    let prefix = probe_prefix(instance);
    let filters = || {
        Some(HashMap::from([
            ("label".to_owned(), vec![format!("agenthold.instance={instance}")]),
            ("name".to_owned(), vec![prefix.clone()]),
        ]))
    };
    let options = ListContainersOptions { all: true, filters: filters(), ..Default::default() };
    let containers = docker.list_containers(Some(options)).await.unwrap_or_default();
    for container in containers {
        let names = container.names.unwrap_or_default();
        if !names.iter().any(|n| n.trim_start_matches('/').starts_with(&prefix)) {
            continue;
        }
        let Some(id) = container.id else { continue };
        let remove = RemoveContainerOptions { force: true, v: true, ..Default::default() };
        match docker.remove_container(&id, Some(remove)).await {
            Ok(()) => tracing::info!(container = ?names, "removed a disk-limit probe an earlier server left"),
            Err(error) => {
                tracing::warn!(%error, container = ?names, "removing a disk-limit probe an earlier server left")
            }
        }
    }
    let options = ListVolumesOptions { filters: filters() };
    let volumes = docker.list_volumes(Some(options)).await.map(|v| v.volumes.unwrap_or_default()).unwrap_or_default();
    for volume in volumes.into_iter().filter(|v| v.name.starts_with(&prefix)) {
        match docker.remove_volume(&volume.name, None::<bollard::query_parameters::RemoveVolumeOptions>).await {
            Ok(()) => tracing::info!(volume = volume.name, "removed a disk-limit probe volume an earlier server left"),
            Err(error) => {
                tracing::warn!(%error, volume = volume.name, "removing a disk-limit probe volume an earlier server left")
            }
        }
    }
}

/// Asks the engine what it can limit, by trying (see the module's doc), after removing the
/// probes an earlier server left.
async fn detect(docker: &Docker, instance: &str, image: &str) -> Result<Support, DriverError> {
    remove_leftover_probes(docker, instance).await;
    let info = docker.info().await.map_err(engine)?;
    let backing_fs = info
        .driver_status
        .unwrap_or_default()
        .into_iter()
        .find(|pair| pair.first().is_some_and(|k| k == "Backing Filesystem"))
        .and_then(|pair| pair.get(1).cloned());
    let probe = format!("{}{}", probe_prefix(instance), uuid::Uuid::new_v4().simple());
    let labels = HashMap::from([("agenthold.instance".to_owned(), instance.to_owned())]);
    let volume = VolumeCreateRequest {
        name: Some(probe.clone()),
        driver_opts: Some(HashMap::from([(SIZE_OPTION.to_owned(), "16M".to_owned())])),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let home = match docker.create_volume(volume).await {
        Ok(_) => {
            let removed = docker.remove_volume(&probe, None::<bollard::query_parameters::RemoveVolumeOptions>).await;
            if let Err(error) = removed {
                tracing::warn!(%error, volume = probe, "removing the disk-limit probe volume");
            }
            Ok(())
        }
        Err(error) => Err(engine(error).to_string()),
    };
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        entrypoint: Some(vec!["/bin/true".to_owned()]),
        labels: Some(labels),
        host_config: Some(HostConfig {
            storage_opt: Some(HashMap::from([(SIZE_OPTION.to_owned(), "1G".to_owned())])),
            network_mode: Some("none".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptions { name: Some(probe.clone()), ..Default::default() };
    let writable_layer = match docker.create_container(Some(options), body).await {
        Ok(created) => {
            let remove = RemoveContainerOptions { force: true, v: true, ..Default::default() };
            if let Err(error) = docker.remove_container(&created.id, Some(remove)).await {
                tracing::warn!(%error, container = probe, "removing the disk-limit probe container");
            }
            Ok(())
        }
        Err(error) if status_of(&error) == Some(404) => return Err(DriverError::ImageNotFound(image.to_owned())),
        Err(error) => Err(engine(error).to_string()),
    };
    Ok(Support { storage_driver: info.driver.unwrap_or_default(), backing_fs, home, writable_layer })
}

/// Whether writes fail for want of space in the home and the writable layer of `container`
/// (running), whose home volume is `volume`.
pub async fn check(docker: &Docker, container: &str, volume: &str) -> Result<DiskCheck, DriverError> {
    let output = tokio::time::timeout(CHECK_TIMEOUT, run_check(docker, container)).await.map_err(|_| {
        DriverError::Engine(format!("the sandbox did not answer the disk check within {CHECK_TIMEOUT:?}"))
    })??;
    let (home_full, writable_full) = parse_check(&output);
    let mut found = DiskCheck::default();
    if home_full {
        let info = docker.inspect_volume(volume).await.map_err(engine)?;
        found.home = match info.options.get(SIZE_OPTION).and_then(|size| parse_size_mib(size)) {
            Some(mib) => Fullness::AtLimit(mib),
            None => Fullness::EngineFull,
        };
    }
    if writable_full {
        let info = docker.inspect_container(container, None).await.map_err(engine)?;
        let label = info.config.and_then(|c| c.labels).and_then(|l| l.get(DISK_LABEL).cloned());
        found.writable_layer = match label.and_then(|l| l.parse().ok()) {
            Some(mib) => Fullness::AtLimit(mib),
            None => Fullness::EngineFull,
        };
    }
    Ok(found)
}

async fn run_check(docker: &Docker, container: &str) -> Result<String, DriverError> {
    let config = bollard::exec::CreateExecOptions {
        cmd: Some(vec!["sh", "-c", CHECK_SCRIPT, "sh", HOME_DIR]),
        user: Some("agent"),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker.create_exec(container, config).await.map_err(engine)?;
    let started = docker.start_exec(&exec.id, None).await.map_err(engine)?;
    let bollard::exec::StartExecResults::Attached { mut output, .. } = started else {
        return Err(DriverError::Engine("the disk check's output was not attached".to_owned()));
    };
    let mut text = String::new();
    while let Some(chunk) = output.next().await {
        let chunk = chunk.map_err(engine)?;
        if text.len() < MAX_CHECK_OUTPUT {
            text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
    }
    Ok(text)
}

/// Whether the check's output says the home, and the writable layer, are full (a write failed
/// with ENOSPC or EDQUOT; any other failure says nothing).
pub fn parse_check(output: &str) -> (bool, bool) {
    let full = |part: &str| {
        output.lines().any(|line| {
            line.strip_prefix(part).and_then(|rest| rest.strip_prefix(" failed:")).is_some_and(says_disk_full)
        })
    };
    (full("home"), full("writable"))
}

/// A local volume's `size` option in MiB (`10240M`, `10G`, `1073741824`; units are binary, as
/// the engine reads them); `None` when it is not one.
pub fn parse_size_mib(size: &str) -> Option<i64> {
    let lower = size.trim().to_ascii_lowercase();
    let mut size = lower.as_str();
    size = size.strip_suffix('b').unwrap_or(size);
    size = size.strip_suffix('i').unwrap_or(size);
    let split = size.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(size.len());
    let (number, unit) = size.split_at(split);
    let number: f64 = number.parse().ok()?;
    let bytes = number
        * match unit {
            "" => 1.0,
            "k" => 1024.0,
            "m" => 1024.0 * 1024.0,
            "g" => 1024.0 * 1024.0 * 1024.0,
            "t" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
    Some((bytes / (1024.0 * 1024.0)).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_reads_enospc_and_edquot_per_part_and_nothing_else() {
        let output = "home failed: dd: error writing '/home/agent/x': No space left on device 1+0 records in \n\
                      writable ok\n";
        assert_eq!(parse_check(output), (true, false));
        let output = "home ok\nwritable failed: dd: error writing '/tmp/x': Disk quota exceeded\n";
        assert_eq!(parse_check(output), (false, true));
        // Another failure (no such directory, permission) is not a full disk.
        let output = "home failed: dd: failed to open '/home/agent/x': Permission denied\nwritable ok\n";
        assert_eq!(parse_check(output), (false, false));
        assert_eq!(parse_check(""), (false, false));
    }

    #[test]
    fn sizes_are_read_in_binary_units() {
        assert_eq!(parse_size_mib("10240M"), Some(10240));
        assert_eq!(parse_size_mib("10G"), Some(10240));
        assert_eq!(parse_size_mib("10GiB"), Some(10240));
        assert_eq!(parse_size_mib("1073741824"), Some(1024));
        assert_eq!(parse_size_mib("512k"), Some(1)); // rounded
        assert_eq!(parse_size_mib("lots"), None);
    }

    #[test]
    fn support_says_what_is_not_enforced_and_why() {
        let support = Support {
            storage_driver: "btrfs".to_owned(),
            backing_fs: None,
            home: Err("quota size requested but no quota support".to_owned()),
            writable_layer: Ok(()),
        };
        let enforcement = support.enforcement();
        assert!(!enforcement.home && enforcement.writable_layer);
        let note = enforcement.note.expect("a note");
        assert!(note.contains("homes are not limited") && note.contains("no quota support"), "{note}");
        let both = Support { home: Ok(()), ..support };
        assert_eq!(both.enforcement(), DiskEnforcement { home: true, writable_layer: true, note: None });
    }

    #[test]
    fn limits_off_are_said_to_be_off() {
        let disk = Disk::new(DiskLimits::Off, 1024);
        let enforcement = disk.enforcement().expect("known");
        assert!(!enforcement.home && !enforcement.writable_layer);
        assert!(enforcement.note.expect("note").contains("off"));
        assert_eq!(Disk::new(DiskLimits::Auto, 1024).enforcement(), None, "not asked yet");
    }
}
