//! What a Docker sandbox may do and use: its limits (CPU, memory, PIDs, open files:
//! [`limit`]), and what root inside may do: the OCI runtime its containers run under
//! (`AGENTHOLD_SANDBOX_RUNTIME`), whether root there is root on the host, and from that the
//! container's capabilities and `no-new-privileges`.
//!
//! Root in a sandbox is *contained* when the engine remaps user namespaces
//! (`dockerd --userns-remap`: uid 0 inside is an unprivileged uid outside) or the runtime is
//! gVisor (`runsc`: a kernel in user space between the sandbox and the host's). Then the sandbox
//! gets sudo: `no-new-privileges` is lifted (sudo is set-uid) and root inside keeps the few
//! capabilities package installs need ([`SUDO_CAP_ADD`]). Otherwise (plain runc, no remap) the
//! sandbox stays locked down ([`CAP_ADD`], `no-new-privileges`) and sudo is off. The container
//! carries which in [`SUDO_LABEL`]; the server logs it at start.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{HostConfig, ResourcesUlimits};

use super::{DriverError, SandboxSpec};

/// The capabilities a locked-down sandbox keeps (all others are dropped): the fewest sandboxd,
/// running as root, needs to run harnesses and terminals as the `agent` user. It creates that
/// user and hands it a home it made (`CHOWN`; `/etc/passwd` is root's own, so no
/// `DAC_OVERRIDE`), switches to it (`SETUID`, `SETGID`: plain syscalls, which
/// `no-new-privileges` allows), and signals its process groups (`KILL`: root may not signal
/// another user's processes without it).
pub const CAP_ADD: [&str; 4] = ["CHOWN", "KILL", "SETGID", "SETUID"];
/// The capabilities a sandbox with sudo keeps, measured with `sudo apt-get install ./x.deb`:
/// [`CAP_ADD`], plus `AUDIT_WRITE` (sudo writes an audit record of each command and refuses
/// without), `DAC_OVERRIDE` and `FOWNER` (root writing and chmodding files it does not own:
/// dpkg's database, the agent's home), `FSETID` (dpkg keeps set-uid bits of what it unpacks) and
/// `SETFCAP` (packages that give a binary file capabilities). No `NET_ADMIN`, `NET_RAW`,
/// `SYS_ADMIN`, `SYS_MODULE`, `MKNOD`: root still cannot change the network, mount or load modules.
pub const SUDO_CAP_ADD: [&str; 9] =
    ["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETFCAP", "SETGID", "SETUID"];
/// Open files per process in a sandbox (soft and hard limit), unless the server's own hard limit
/// is lower (see [`nofile_limit`]).
pub const NOFILE_LIMIT: i64 = 65_536;
/// The label saying whether a container was made with sudo (`on`) or locked down (`off`).
pub const SUDO_LABEL: &str = "agenthold.sudo";
pub use crate::config::sandbox::{DEFAULT_RUNTIME, parse_runtime};

/// Why root in a sandbox is not root on the host, if it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containment {
    /// The engine remaps user namespaces: uid 0 inside is an unprivileged uid outside.
    UsernsRemap,
    /// gVisor (`runsc`): the sandbox's syscalls go to a kernel in user space.
    Gvisor,
    /// Plain runc and no remap: root inside is the host's uid 0 (sudo off).
    None,
}

impl Containment {
    /// Its name, for logs and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UsernsRemap => "userns-remap",
            Self::Gvisor => "gvisor",
            Self::None => "none",
        }
    }
}

/// A sandbox's security settings on one engine, learned from it once ([`probe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posture {
    /// The OCI runtime its containers ask for (`None`: the engine's default, `runc`).
    pub runtime: Option<String>,
    /// Why root inside is not root outside, if it is not.
    pub containment: Containment,
}

impl Posture {
    /// Whether the agent gets sudo.
    pub fn sudo(&self) -> bool {
        self.containment != Containment::None
    }

    /// `on` or `off`, for [`SUDO_LABEL`].
    pub fn sudo_word(&self) -> &'static str {
        if self.sudo() { "on" } else { "off" }
    }

    /// Sets the container's runtime, capabilities and security options.
    pub fn apply(&self, host: &mut HostConfig) {
        let caps: &[&str] = if self.sudo() { &SUDO_CAP_ADD } else { &CAP_ADD };
        host.cap_drop = Some(vec!["ALL".to_owned()]);
        host.cap_add = Some(caps.iter().map(|c| (*c).to_owned()).collect());
        // sudo is set-uid: it needs no-new-privileges off. Only where root is contained.
        host.security_opt = (!self.sudo()).then(|| vec!["no-new-privileges:true".to_owned()]);
        host.runtime.clone_from(&self.runtime);
    }
}

/// The default open-files limit of a sandbox: [`NOFILE_LIMIT`], or the server's own hard limit if
/// that is lower. The engine usually runs with no higher a limit than the server (a container
/// cannot be given more than the engine has: its start would fail); `AGENTHOLD_SANDBOX_NOFILE`
/// overrides it.
pub fn nofile_limit() -> i64 {
    let own = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    own.and_then(|max| i64::try_from(max).ok()).map_or(NOFILE_LIMIT, |max| max.min(NOFILE_LIMIT))
}

/// Sets a sandbox's limits: its CPUs, memory (no swap beyond it: a memory hog is stopped at the
/// limit), PIDs and open files (`nofile`, soft and hard).
pub fn limit(host: &mut HostConfig, spec: &SandboxSpec, nofile: i64) {
    let memory = i64::from(spec.memory_mib) * 1024 * 1024;
    host.nano_cpus = Some((spec.cpus * 1e9) as i64);
    host.memory = Some(memory);
    host.memory_swap = Some(memory);
    host.pids_limit = Some(i64::from(spec.pids_limit));
    host.ulimits =
        Some(vec![ResourcesUlimits { name: Some("nofile".to_owned()), soft: Some(nofile), hard: Some(nofile) }]);
}

/// What `runtime` means on an engine with these security options and runtimes (name → path), as
/// `docker info` reports them. Pure, for tests.
pub fn posture_of(
    runtime: &str,
    security_options: &[String],
    runtimes: &HashMap<String, Option<String>>,
) -> Result<Posture, String> {
    let path = match runtimes.get(runtime) {
        Some(path) => path.clone().unwrap_or_default(),
        // Engines name runc in their list; one that does not still runs it by default.
        None if runtime == DEFAULT_RUNTIME => "runc".to_owned(),
        None => {
            let mut known: Vec<&str> = runtimes.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(format!(
                "AGENTHOLD_SANDBOX_RUNTIME={runtime}: the Docker engine has no such runtime (it has {}); \
                 register it with the engine (dockerd --add-runtime {runtime}=/usr/bin/{runtime}, or \
                 scripts/dev/docker.sh with AGENTHOLD_DOCKER_RUNTIMES={runtime}) or unset the setting",
                known.join(", ")
            ));
        }
    };
    let remapped = security_options.iter().any(|o| o.split(',').any(|part| part == "name=userns"));
    let gvisor = runtime.starts_with("runsc") || path.rsplit('/').next().is_some_and(|f| f.starts_with("runsc"));
    let containment = if gvisor {
        Containment::Gvisor
    } else if remapped {
        Containment::UsernsRemap
    } else {
        Containment::None
    };
    Ok(Posture { runtime: (runtime != DEFAULT_RUNTIME).then(|| runtime.to_owned()), containment })
}

/// Asks the engine what `runtime` means there ([`posture_of`]); an engine without it is an
/// [`DriverError::Engine`] that says what to do.
pub async fn probe(docker: &Docker, runtime: &str) -> Result<Posture, DriverError> {
    let info = docker.info().await.map_err(|e| DriverError::Engine(super::docker::describe(&e)))?;
    let runtimes: HashMap<String, Option<String>> =
        info.runtimes.unwrap_or_default().into_iter().map(|(name, r)| (name, r.path)).collect();
    posture_of(runtime, &info.security_options.unwrap_or_default(), &runtimes).map_err(DriverError::Engine)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtimes(list: &[(&str, &str)]) -> HashMap<String, Option<String>> {
        list.iter().map(|(n, p)| ((*n).to_owned(), Some((*p).to_owned()))).collect()
    }

    #[test]
    fn plain_runc_keeps_sandboxes_locked_down() {
        let posture = posture_of("runc", &["name=seccomp,profile=default".to_owned()], &runtimes(&[("runc", "runc")]))
            .expect("runc");
        assert_eq!(posture, Posture { runtime: None, containment: Containment::None });
        let mut host = HostConfig::default();
        posture.apply(&mut host);
        assert_eq!(host.security_opt, Some(vec!["no-new-privileges:true".to_owned()]));
        assert_eq!(host.cap_add.map(|c| c.len()), Some(CAP_ADD.len()));
        assert_eq!(host.runtime, None);
        assert_eq!(posture.sudo_word(), "off");
    }

    #[test]
    fn a_remapping_engine_gives_sudo() {
        let options = ["name=seccomp,profile=default".to_owned(), "name=userns".to_owned()];
        let posture = posture_of("runc", &options, &runtimes(&[("runc", "runc")])).expect("runc");
        assert_eq!(posture.containment, Containment::UsernsRemap);
        let mut host = HostConfig::default();
        posture.apply(&mut host);
        assert_eq!(host.security_opt, None, "no-new-privileges lifted");
        let caps = host.cap_add.unwrap_or_default();
        assert!(caps.iter().any(|c| c == "AUDIT_WRITE") && !caps.iter().any(|c| c == "NET_ADMIN" || c == "SYS_ADMIN"));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
    }

    #[test]
    fn runsc_is_gvisor_by_name_or_path_and_asked_for() {
        let engine = runtimes(&[("runc", "runc"), ("runsc", "/usr/bin/runsc"), ("gv", "/opt/runsc")]);
        let posture = posture_of("runsc", &[], &engine).expect("runsc");
        assert_eq!(posture, Posture { runtime: Some("runsc".to_owned()), containment: Containment::Gvisor });
        assert_eq!(posture_of("gv", &[], &engine).expect("gv").containment, Containment::Gvisor);
        let mut host = HostConfig::default();
        posture.apply(&mut host);
        assert_eq!(host.runtime.as_deref(), Some("runsc"));
    }

    #[test]
    fn a_runtime_the_engine_lacks_is_refused_with_what_to_do() {
        let error = posture_of("runsc", &[], &runtimes(&[("runc", "runc")])).expect_err("no runsc");
        assert!(error.contains("no such runtime (it has runc)") && error.contains("--add-runtime"), "{error}");
        assert!(parse_runtime("runsc").is_ok());
        assert!(parse_runtime("run sc").is_err() && parse_runtime("").is_err() && parse_runtime("a;b").is_err());
    }
}
