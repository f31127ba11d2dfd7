//! The creation figures and their floors, measured on the same engine in the same run:
//!
//! - `docker_run_50_parallel_s`, the floor under `burst_create_50_s`: 50 × (an internal network
//!   created, then `docker run --rm` of the test image on it until its first line of output), all
//!   started together — the engine doing the same container and network work as the burst
//!   without agenthold. Each network gets a /28 of its own (as the server gives each agent), from
//!   [`FLOOR_SUBNETS`], and the label `agenthold.instance=<instance>`, so the bench's cleanup
//!   finds any left behind; they are removed when the floor is measured.
//! - `cold_start_p95_ms`: 20 cold starts (fresh agents of the cold image, no warm pool) begun one
//!   second apart, p95 of their create → first update, against `docker_run_ms`: a creation rate
//!   the ready networks must stay ahead of, not only a median.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::api::Api;
use crate::progress;
use crate::startup;

/// Containers and networks in the parallel floor (the burst's size).
pub const PARALLEL: usize = 50;
/// Cold starts in the spaced burst.
pub const SPACED: usize = 20;
/// Between the spaced cold starts.
pub const SPACING: Duration = Duration::from_secs(1);
/// The floor's networks: /28 number `n` of this /16 (apart from the server's default pool,
/// 10.214.0.0/16).
const FLOOR_SUBNETS: [u8; 2] = [10, 198];
/// The longest one floor step (a network create, a run) may take.
const STEP_DEADLINE: Duration = Duration::from_secs(300);

/// Creates [`PARALLEL`] internal networks and runs the image once on each, all at once; returns
/// the seconds until the last run printed its line. The networks are removed afterwards.
pub async fn docker_run_parallel(image: &str, instance: &str, tag: &str) -> Result<f64> {
    progress(&format!(
        "floor: {PARALLEL} × (docker network create --internal + docker run --rm {image} echo hi) at once"
    ));
    let names: Vec<String> = (0..PARALLEL).map(|n| format!("{instance}-floor-{tag}-{n}")).collect();
    let started = Instant::now();
    let runs = futures_util::future::join_all(
        names.iter().enumerate().map(|(n, name)| async move { network_and_run(image, instance, name, n).await }),
    )
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let removed = Command::new("docker")
        .arg("network")
        .arg("rm")
        .args(&names)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if !removed.is_ok_and(|s| s.success()) {
        progress("  (some floor networks were not removed; the bench's cleanup removes them by label)");
    }
    for run in runs {
        run.context("a run of the parallel floor")?;
    }
    progress(&format!("  all {PARALLEL} printed after {seconds:.2} s"));
    Ok(seconds)
}

async fn network_and_run(image: &str, instance: &str, name: &str, n: usize) -> Result<()> {
    let label = format!("agenthold.instance={instance}");
    let subnet = floor_subnet(n);
    let created = tokio::time::timeout(
        STEP_DEADLINE,
        Command::new("docker")
            .args(["network", "create", "--internal", "--label", &label, "--subnet", &subnet, name])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .context("docker network create took too long")??;
    if !created.status.success() {
        bail!("docker network create {name}: {}", String::from_utf8_lossy(&created.stderr).trim());
    }
    let mut child = Command::new("docker")
        .args(["run", "--rm", "--network", name, "--label", &label, image, "echo", "hi"])
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
    let output = child.wait_with_output().await?;
    if line.as_deref() != Some("hi") {
        bail!("docker run on {name} printed {line:?}: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

/// The floor's `n`th network's subnet: the `n`th /28 of [`FLOOR_SUBNETS`]'s /16.
fn floor_subnet(n: usize) -> String {
    format!("{}.{}.{}.{}/28", FLOOR_SUBNETS[0], FLOOR_SUBNETS[1], n / 16, (n % 16) * 16)
}

/// [`SPACED`] cold starts begun [`SPACING`] apart (each a fresh agent of the cold image, recorded
/// in `agents`); each one's create → first update, ms, in the order they began.
pub async fn spaced_cold_starts(api: &Api, tag: &str, agents: &mut Vec<String>) -> Result<Vec<f64>> {
    progress(&format!("cold starts under a creation rate: {SPACED} agents, one every {} ms", SPACING.as_millis()));
    let started = tokio::time::Instant::now();
    let colds = futures_util::future::join_all((0..SPACED).map(|n| async move {
        tokio::time::sleep_until(started + SPACING * u32::try_from(n).unwrap_or(u32::MAX)).await;
        startup::cold_start(api, &format!("bench-spaced-{tag}-{n}")).await
    }))
    .await;
    let mut each = Vec::new();
    let mut failed = None;
    for cold in colds {
        match cold {
            Ok(cold) => {
                agents.push(cold.agent_id);
                each.push(cold.cold_start_ms);
            }
            Err(error) => failed = Some(error),
        }
    }
    if let Some(error) = failed {
        return Err(error).context("a spaced cold start");
    }
    progress(&format!(
        "  p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms",
        crate::stats::median(&each),
        crate::stats::percentile(&each, 95.0),
        each.iter().copied().fold(0.0, f64::max)
    ));
    Ok(each)
}

/// `BENCH_ONLY=creation`: a bare `docker run`, the parallel floor, a burst of 50 agents, and the
/// spaced cold starts, with their targets — a few minutes, for work on the create path.
pub async fn only(config: &crate::config::Config, api: &Api, agents: &mut Vec<String>) -> Result<serde_json::Value> {
    use crate::stats::{median, percentile, round};
    use crate::targets::{BURST_AGENTS, BURST_VS_PARALLEL, COLD_P95_FACTOR};
    use serde_json::json;

    let tag = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let docker_runs = startup::docker_runs(&config.image, config.repeats.max(1)).await?;
    let docker_run = median(&docker_runs);
    startup::tag_cold_image(&config.image).await?;
    let parallel_s = docker_run_parallel(&config.image, &config.instance, tag).await?;
    progress(&format!("burst: {BURST_AGENTS} agents created at once, each prompted, until all are awake"));
    let burst = crate::burst::create(api, BURST_AGENTS, tag, agents).await?;
    progress(&format!("  all awake after {:.2} s", burst.all_awake_s));
    let spaced = spaced_cold_starts(api, tag, agents).await?;
    let p95 = percentile(&spaced, 95.0);
    let burst_limit = BURST_VS_PARALLEL * parallel_s;
    let cold_limit = COLD_P95_FACTOR * docker_run;
    let targets = json!({
        "burst_create_50_s": {"target": format!("<= {BURST_VS_PARALLEL} * docker_run_50_parallel_s"), "limit_s": round(burst_limit, 2), "value": round(burst.all_awake_s, 2), "pass": burst.all_awake_s <= burst_limit},
        "cold_start_p95_ms": {"target": format!("<= {COLD_P95_FACTOR} * docker_run_ms"), "limit_ms": round(cold_limit, 1), "value": round(p95, 1), "pass": p95 <= cold_limit},
    });
    let all_pass = targets.as_object().is_some_and(|t| t.values().all(|v| v["pass"] == json!(true)));
    Ok(json!({
        "docker_run_ms": round(docker_run, 1),
        "docker_run_50_parallel_s": round(parallel_s, 2),
        "burst_create_50_s": round(burst.all_awake_s, 2),
        "burst_vs_parallel": round(burst.all_awake_s / parallel_s, 2),
        "cold_start_p95_ms": round(p95, 1),
        "targets": targets,
        "all_pass": all_pass,
        "details": {
            "docker_run": docker_runs.iter().map(|v| round(*v, 1)).collect::<Vec<_>>(),
            "burst_each_create_to_first_update_p50_ms": round(median(&burst.each_ms), 1),
            "burst_each_create_to_first_update_max_ms": round(burst.each_ms.iter().copied().fold(0.0, f64::max), 1),
            "cold_start_spaced_1s": spaced.iter().map(|v| round(*v, 1)).collect::<Vec<_>>(),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_subnets_are_distinct_28s() {
        assert_eq!(floor_subnet(0), "10.198.0.0/28");
        assert_eq!(floor_subnet(15), "10.198.0.240/28");
        assert_eq!(floor_subnet(16), "10.198.1.0/28");
        let all: std::collections::HashSet<String> = (0..PARALLEL).map(floor_subnet).collect();
        assert_eq!(all.len(), PARALLEL);
    }
}
