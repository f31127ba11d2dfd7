//! sudo in a sandbox (issue 32, item 1), on whichever engine the tests use (`DOCKER_HOST`) and
//! under `AGENTHOLD_SANDBOX_RUNTIME` if set. Where root in a sandbox is contained (an engine
//! that remaps user namespaces, or gVisor) the `agent` user has sudo: `sudo -n true`, `sudo id -u`
//! is 0, `sudo apt-get install -y ./local.deb` installs, root writes `/usr`; and root there still
//! cannot mount, make device nodes, load modules or change the network (its capabilities hold
//! none of those, and each command is refused with the kernel's reason), sees no host device,
//! no host process, no Docker socket, no host file, and is no root on the host. Where root is not
//! contained (plain runc, no remap) sudo is off and says so (the container's `agenthold.sudo`).

use std::time::Duration;

use agenthold_server::sandbox::docker::{SUDO_CAP_ADD, SUDO_LABEL};
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::docker::docker;
use crate::support::skip::skip_unless_docker;

const TURN: Duration = Duration::from_secs(180);
/// The image with sudo (images/test-sudo, `make images`).
const SUDO_IMAGE: &str = "agenthold/test-sudo:latest";

/// A capability's bit (linux/capability.h).
fn cap_bit(name: &str) -> u64 {
    let bit = match name {
        "CHOWN" => 0,
        "DAC_OVERRIDE" => 1,
        "FOWNER" => 3,
        "FSETID" => 4,
        "KILL" => 5,
        "SETGID" => 6,
        "SETUID" => 7,
        "NET_ADMIN" => 12,
        "NET_RAW" => 13,
        "SYS_MODULE" => 16,
        "SYS_PTRACE" => 19,
        "SYS_ADMIN" => 21,
        "MKNOD" => 27,
        "AUDIT_WRITE" => 29,
        "SETFCAP" => 31,
        other => panic!("unknown capability {other}"),
    };
    1 << bit
}

/// Whether root in this engine's sandboxes is contained: the engine remaps user namespaces, or
/// the tests ask for gVisor.
fn contained() -> (bool, &'static str) {
    let (ok, options) = docker(&["info", "--format", "{{json .SecurityOptions}}"]);
    assert!(ok, "docker info");
    if options.contains("name=userns") {
        return (true, "userns-remap");
    }
    if std::env::var("AGENTHOLD_SANDBOX_RUNTIME").is_ok_and(|r| r.starts_with("runsc")) {
        return (true, "gvisor");
    }
    (false, "none")
}

fn outputs(events: &[Value]) -> String {
    events.iter().filter_map(|e| e["payload"]["content"][0]["content"]["text"].as_str()).collect()
}

#[tokio::test]
async fn root_in_a_sandbox_has_sudo_only_where_contained_and_still_cannot_escape() {
    if skip_unless_docker("sudo in a sandbox is the Docker driver's") {
        return;
    }
    if !docker(&["image", "inspect", SUDO_IMAGE]).0 {
        panic!("{SUDO_IMAGE} is missing: run `make images`");
    }
    let (contained, how) = contained();
    eprintln!("root in a sandbox contained: {contained} ({how})");
    // A file of the host's that no sandbox may read.
    let marker = format!("ah-sudo-marker-{}", uuid::Uuid::new_v4().simple());
    let marker_path = std::env::temp_dir().join(&marker);
    std::fs::write(&marker_path, &marker).expect("the host's marker file");

    let server = TestServer::start().await;
    let agent = server.create_agent(json!({"image": SUDO_IMAGE})).await;
    let session = server.create_session(&agent).await;
    let script = format!(
        "run sudo -n true 2>&1 && echo SUDO_TRUE_OK; echo uid=$(sudo -n id -u 2>/dev/null)\n\
         run mkdir -p /tmp/p/DEBIAN /tmp/p/usr/local/bin && printf 'Package: hello-ah\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: t <t@example.invalid>\\nDescription: t\\n' > /tmp/p/DEBIAN/control && printf '#!/bin/sh\\necho HELLO_AH_RAN\\n' > /tmp/p/usr/local/bin/hello-ah && chmod 755 /tmp/p/usr/local/bin/hello-ah && dpkg-deb --build /tmp/p /tmp/hello-ah.deb >/dev/null && cd /tmp && sudo -n apt-get install -y ./hello-ah.deb >/dev/null 2>&1; hello-ah; dpkg -s hello-ah 2>&1 | grep Status\n\
         run sudo -n touch /usr/local/bin/root-wrote-this 2>&1 && echo USR_WRITABLE; sudo -n grep CapEff /proc/self/status\n\
         run sudo -n mount -t tmpfs none /mnt 2>&1; echo mount_rc=$?; sudo -n mknod /tmp/vda b 254 0 2>&1; echo mknod_rc=$?\n\
         run sudo -n sh -c 'echo 0 > /proc/sys/net/ipv4/conf/all/forwarding' 2>&1; echo net_rc=$?; sudo -n sh -c 'echo /x > /proc/sys/kernel/modprobe' 2>&1; echo modprobe_rc=$?\n\
         run echo devices: $(ls /dev 2>&1 | tr '\\n' ' '); echo pid1: $(cat /proc/1/cmdline 2>&1 | tr '\\0' ' '); sudo -n ls /var/run/docker.sock /run/docker.sock 2>&1; echo host_file: $(sudo -n grep -rl {marker} /tmp /root /var/tmp /etc /mnt 2>/dev/null | head -n 3)"
    );
    server.prompt(&session, &script).await;
    let events = server.wait_turns(&session, 1, TURN).await;
    let output = outputs(&events);
    let (ok, label) = docker(&[
        "inspect",
        "-f",
        &format!("{{{{index .Config.Labels \"{SUDO_LABEL}\"}}}}"),
        &server.container(&agent),
    ]);
    assert!(ok, "docker inspect");
    let _ = std::fs::remove_file(&marker_path);

    // Wherever it runs: no host device, process, socket or file.
    for device in ["kvm", "vda", "sda", "nvme", "mem "] {
        assert!(!output.contains(&format!(" {device}")), "a host device ({device}) is visible: {output}");
    }
    assert!(output.contains("pid1: /opt/agenthold/sandboxd"), "its own process namespace: {output}");
    assert!(!output.contains("host_file: /"), "the host's file was found: {output}");

    if !contained {
        assert_eq!(label, "off", "{output}");
        assert!(output.contains("no new privileges"), "sudo refused for no-new-privileges: {output}");
        assert!(!output.contains("SUDO_TRUE_OK") && output.contains("uid=\n"), "{output}");
        return;
    }
    assert_eq!(label, "on", "{output}");
    assert!(output.contains("SUDO_TRUE_OK") && output.contains("uid=0\n"), "sudo works: {output}");
    assert!(
        output.contains("HELLO_AH_RAN") && output.contains("Status: install ok installed"),
        "apt installs: {output}"
    );
    assert!(output.contains("USR_WRITABLE"), "root inside writes /usr: {output}");
    let capeff = output
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .expect("root's effective capabilities");
    let expected: u64 = SUDO_CAP_ADD.iter().map(|c| cap_bit(c)).sum();
    assert_eq!(capeff, expected, "root holds exactly the sudo capabilities: {output}");
    for cap in ["NET_ADMIN", "NET_RAW", "SYS_MODULE", "SYS_ADMIN", "SYS_PTRACE", "MKNOD"] {
        assert_eq!(capeff & cap_bit(cap), 0, "root holds {cap}");
    }
    // Each refusal with its reason (and a non-zero status): no mount, no device node, no
    // network setting, no module loader.
    assert!(output.contains("mount: /mnt: permission denied") && !output.contains("mount_rc=0"), "{output}");
    assert!(output.contains("Operation not permitted") && !output.contains("mknod_rc=0"), "{output}");
    assert!(!output.contains("net_rc=0") && !output.contains("modprobe_rc=0"), "{output}");
    assert!(output.contains("forwarding: Read-only file system"), "/proc/sys is read-only: {output}");
    assert!(
        output.contains("'/var/run/docker.sock': No such file") && output.contains("'/run/docker.sock': No such file"),
        "no Docker socket: {output}"
    );
    if how == "userns-remap" {
        // sandboxd runs as root inside: outside, its uid is an unprivileged one.
        let (ok, pid) = docker(&["inspect", "-f", "{{.State.Pid}}", &server.container(&agent)]);
        assert!(ok, "the sandbox's pid");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the sandbox's process");
        let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).expect("Uid").split_whitespace().next();
        assert!(uid.is_some_and(|u| u != "0"), "root inside is not the host's root: {status}");
    }
}
