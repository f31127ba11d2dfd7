//! Start-up latencies: a bare `docker run`, a cold agent (no container yet), a warm prompt, a
//! harness start on an awake sandbox, a wake from sleep; and the idle sandboxd's memory.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::api::Api;
use crate::progress;
use crate::watch::Watcher;

/// How long any single start-up step may take.
const STEP_DEADLINE: Duration = Duration::from_secs(180);

fn deadline() -> Instant {
    Instant::now() + STEP_DEADLINE
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// `docker run --rm <image> echo hi` until the first line of output; milliseconds.
pub async fn docker_run(image: &str) -> Result<f64> {
    let started = Instant::now();
    let mut child = Command::new("docker")
        .args(["run", "--rm", image, "echo", "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running docker")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let line = tokio::time::timeout(STEP_DEADLINE, BufReader::new(stdout).lines().next_line())
        .await
        .context("docker run took too long")??;
    let elapsed = started.elapsed();
    let status = child.wait_with_output().await?;
    if line.as_deref() != Some("hi") {
        bail!("docker run printed {line:?} ({}): {}", status.status, String::from_utf8_lossy(&status.stderr).trim());
    }
    Ok(ms(elapsed))
}

/// One warm-up and `repeats` [`docker_run`]s, reporting each.
pub async fn docker_runs(image: &str, repeats: usize) -> Result<Vec<f64>> {
    progress(&format!("docker run --rm {image} echo hi (1 warm-up + {repeats})"));
    docker_run(image).await.context("docker run warm-up")?;
    let mut runs = Vec::new();
    for _ in 0..repeats {
        let ms = docker_run(image).await?;
        report("  docker run → first line", ms);
        runs.push(ms);
    }
    Ok(runs)
}

/// `repeats` [`cold_start`]s of fresh agents (recorded in `agents`), reporting each.
pub async fn cold_starts(api: &Api, tag: &str, repeats: usize, agents: &mut Vec<String>) -> Result<Vec<ColdAgent>> {
    progress(&format!("cold start: create agent + first prompt → first update ({repeats} fresh agents)"));
    let mut colds = Vec::new();
    for n in 0..repeats {
        let cold = cold_start(api, &format!("bench-cold-{tag}-{n}")).await.context("cold start")?;
        agents.push(cold.agent_id.clone());
        report("  cold start", cold.cold_start_ms);
        colds.push(cold);
    }
    Ok(colds)
}

/// `repeats` [`harness_start`]s on an awake agent, reporting each.
pub async fn harness_starts(api: &Api, agent: &ColdAgent, repeats: usize) -> Result<Vec<f64>> {
    progress("harness start: crash the harness, then prompt a new session → first update");
    let mut starts = Vec::new();
    for _ in 0..repeats {
        let ms = harness_start(api, &agent.agent_id, &agent.session_id).await?;
        report("  harness start", ms);
        starts.push(ms);
    }
    Ok(starts)
}

/// The timing of one prompt.
#[derive(Debug, Clone, Copy)]
pub struct PromptTiming {
    /// From the start instant to the first `update` of the turn.
    pub first_update_ms: f64,
    /// From the start instant to the turn's `turn_end`.
    pub turn_end_ms: f64,
    /// `created_at` of the first update minus `created_at` of the prompt event: the part of the
    /// time spent before the update was stored (server, tunnel, sandboxd, harness).
    pub stored_gap_ms: Option<f64>,
    /// Arrival of the first update minus arrival of the prompt event, at the watcher.
    pub received_gap_ms: Option<f64>,
}

/// Sends `script` to a session and waits for the turn to end, timing from `since` (default:
/// just before the prompt is sent; the stream is open by then).
pub async fn prompt_and_wait(
    api: &Api,
    session_id: &str,
    script: &str,
    since: Option<Instant>,
) -> Result<PromptTiming> {
    let last = api.last_seq(session_id).await?;
    let mut watcher = Watcher::connect(api, session_id, last).await?.keep_payloads();
    let started = since.unwrap_or_else(Instant::now);
    api.prompt(session_id, script).await?;
    let deadline = deadline();
    let mut prompt_event = None;
    let first = loop {
        let event = watcher.next_event(deadline).await?;
        match event.kind.as_str() {
            "update" => break event,
            "prompt" => prompt_event = Some(event),
            "turn_end" => bail!("the turn ended without an update; errors: {:?}", watcher.errors),
            _ => {}
        }
    };
    let rest = watcher.until_turn_end(deadline).await?;
    let end = rest.last().map_or(first.at, |e| e.at);
    watcher.close().await;
    let stored =
        |e: &crate::watch::Received| e.created_at.as_deref().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let stored_gap_ms =
        prompt_event.as_ref().and_then(|p| Some((stored(&first)? - stored(p)?).num_microseconds()? as f64 / 1000.0));
    let received_gap_ms = prompt_event.as_ref().map(|p| ms(first.at - p.at));
    Ok(PromptTiming {
        first_update_ms: ms(first.at - started),
        turn_end_ms: ms(end - started),
        stored_gap_ms,
        received_gap_ms,
    })
}

/// An agent and a session created for a cold start.
#[derive(Debug, Clone)]
pub struct ColdAgent {
    /// The agent.
    pub agent_id: String,
    /// Its first session.
    pub session_id: String,
    /// Create agent + first prompt → first update, ms.
    pub cold_start_ms: f64,
}

/// Creates an agent (no container yet) and a session, prompts it, and times until the first
/// `update`.
pub async fn cold_start(api: &Api, name: &str) -> Result<ColdAgent> {
    start_of(api, name, Some(COLD_IMAGE)).await
}

/// The bench image under another name ([`tag_cold_image`]): agents of it never take a warm pool
/// sandbox (the pool holds the server's default image), so their start is the cold one.
pub const COLD_IMAGE: &str = "agenthold/test:bench-cold";

/// Tags `image` as [`COLD_IMAGE`].
pub async fn tag_cold_image(image: &str) -> Result<()> {
    let status = Command::new("docker").args(["tag", image, COLD_IMAGE]).status().await.context("docker tag")?;
    anyhow::ensure!(status.success(), "docker tag {image} {COLD_IMAGE} failed");
    Ok(())
}

/// Create agent (of the default image, so from the warm pool when it has a sandbox) + session +
/// stream + prompt → first update.
pub async fn pooled_start(api: &Api, name: &str) -> Result<ColdAgent> {
    start_of(api, name, None).await
}

async fn start_of(api: &Api, name: &str, image: Option<&str>) -> Result<ColdAgent> {
    let started = Instant::now();
    let agent_id = api.create_agent_of(name, image).await?;
    let session_id = api.create_session(&agent_id).await?;
    let timing = prompt_and_wait(api, &session_id, "text hello", Some(started)).await?;
    Ok(ColdAgent { agent_id, session_id, cold_start_ms: timing.first_update_ms })
}

/// Crashes the harness of an awake agent, then times a prompt on a new session: the server
/// starts a fresh harness on the connected sandboxd (spawn, `initialize`, `session/new`,
/// prompt) — the harness start as seen from outside.
pub async fn harness_start(api: &Api, agent_id: &str, crash_session: &str) -> Result<f64> {
    prompt_and_wait(api, crash_session, "crash 1", None).await.ok();
    let session = api.create_session(agent_id).await?;
    Ok(prompt_and_wait(api, &session, "text hi", None).await?.first_update_ms)
}

/// The timing of one sleep and wake.
#[derive(Debug, Clone, Copy)]
pub struct Wake {
    /// `POST …/sleep` until answered, ms.
    pub sleep_ms: f64,
    /// Prompt to the sleeping agent → first update, ms.
    pub wake_ms: f64,
}

/// Puts the agent to sleep, then times a prompt to it until the first update.
pub async fn sleep_and_wake(api: &Api, agent_id: &str, session_id: &str) -> Result<Wake> {
    let started = Instant::now();
    api.sleep(agent_id).await?;
    let sleep_ms = ms(started.elapsed());
    let timing = prompt_and_wait(api, session_id, "text good morning", None).await?;
    Ok(Wake { sleep_ms, wake_ms: timing.first_update_ms })
}

/// Several wakes, and the engine's part of them.
#[derive(Debug, Clone)]
pub struct Wakes {
    /// Each sleep and wake.
    pub each: Vec<Wake>,
    /// The server's mean time in the engine's start call per wake (its
    /// `agenthold_sandbox_engine_start_duration_seconds{from="stopped"}`), ms; `None` without
    /// the metrics listener.
    pub engine_ms: Option<f64>,
}

/// The series of the engine's start of a stopped sandbox.
const ENGINE_START: &str = r#"agenthold_sandbox_engine_start_duration_seconds{from="stopped"}"#;

/// `repeats` sleeps and wakes of an awake agent, reporting each.
pub async fn wakes(
    api: &Api,
    agent_id: &str,
    session_id: &str,
    repeats: usize,
    metrics_url: Option<&str>,
) -> Result<Wakes> {
    let before = match metrics_url {
        Some(url) => Some(crate::metrics_scrape::histogram_totals(url, ENGINE_START).await?),
        None => None,
    };
    let mut each = Vec::new();
    for _ in 0..repeats {
        let wake = sleep_and_wake(api, agent_id, session_id).await?;
        progress(&format!("  sleep {:.0} ms, wake → first update {:.1} ms", wake.sleep_ms, wake.wake_ms));
        each.push(wake);
    }
    let engine_ms = match (metrics_url, before) {
        (Some(url), Some((count_before, sum_before))) => {
            let (count, sum) = crate::metrics_scrape::histogram_totals(url, ENGINE_START).await?;
            let starts = count - count_before;
            (starts > 0.0).then(|| (sum - sum_before) / starts * 1000.0)
        }
        _ => None,
    };
    if let Some(engine) = engine_ms {
        progress(&format!("  of a wake, the engine's start: {engine:.1} ms (mean)"));
    }
    Ok(Wakes { each, engine_ms })
}

/// Memory of the sandboxd in an agent's container.
#[derive(Debug, Clone, Copy)]
pub struct Rss {
    /// VmRSS, KiB.
    pub rss_kib: u64,
    /// VmHWM (peak RSS), KiB.
    pub hwm_kib: u64,
}

/// Reads `/proc/1/status` (sandboxd is the container's entrypoint) in the agent's container.
pub async fn sandboxd_rss(container: &str) -> Result<Rss> {
    let output = Command::new("docker")
        .args(["exec", container, "cat", "/proc/1/status"])
        .stdin(Stdio::null())
        .output()
        .await
        .context("docker exec")?;
    if !output.status.success() {
        bail!("docker exec {container}: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    let status = String::from_utf8_lossy(&output.stdout);
    let field = |name: &str| -> Option<&str> {
        status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim_start_matches(':').trim())
    };
    let process = field("Name").unwrap_or_default();
    if process != "sandboxd" {
        bail!("pid 1 of {container} is {process:?}, not sandboxd");
    }
    let kib = |name: &str| -> Result<u64> {
        field(name)
            .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("no {name} in /proc/1/status"))
    };
    Ok(Rss { rss_kib: kib("VmRSS")?, hwm_kib: kib("VmHWM")? })
}

/// The resident memory of every process in `container` together (sandboxd, the harness and
/// whatever it started), KiB: what an awake agent costs the host while idle.
pub async fn container_rss_kib(container: &str) -> Result<u64> {
    let output = Command::new("docker")
        .args(["exec", container, "sh", "-c", "cat /proc/[0-9]*/status 2>/dev/null"])
        .stdin(Stdio::null())
        .output()
        .await
        .context("docker exec")?;
    let status = String::from_utf8_lossy(&output.stdout);
    let total: u64 = status
        .lines()
        .filter_map(|l| l.strip_prefix("VmRSS:"))
        .filter_map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .sum();
    if total == 0 {
        bail!("no process memory readable in {container}");
    }
    Ok(total)
}

/// What an agent's network holder costs the host, KiB: the proportional set size (shared pages
/// split among their users) of its process and of the `containerd-shim` that is its parent,
/// read from the host's `/proc` (the benchmark runs on the engine's host).
pub async fn holder_pss_kib(holder: &str) -> Result<u64> {
    let output = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}", holder])
        .stdin(Stdio::null())
        .output()
        .await
        .context("docker inspect")?;
    let pid: u32 =
        String::from_utf8_lossy(&output.stdout).trim().parse().with_context(|| format!("no pid of {holder}"))?;
    if pid == 0 {
        bail!("{holder} does not run");
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).context("reading the holder's stat")?;
    // The parent's pid is the second field after the command's closing parenthesis.
    let shim: u32 = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .context("no parent in the holder's stat")?;
    let pss = |pid: u32| -> Result<u64> {
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).context("reading smaps_rollup")?;
        rollup
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no Pss in smaps_rollup")
    };
    Ok(pss(pid)? + pss(shim)?)
}

/// Logs a step's result.
pub fn report(what: &str, value_ms: f64) {
    progress(&format!("{what}: {value_ms:.1} ms"));
}
