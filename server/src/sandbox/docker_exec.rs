//! Running one command in a Docker sandbox and waiting for it (`docker exec`): the Docker
//! driver's [`super::SandboxDriver::run`], used for an agent's repository clone before its
//! harness starts. The output is kept bounded ([`super::MAX_RUN_OUTPUT`]); the exit status is
//! read from the engine once the output ends.

use bollard::Docker;
use futures_util::StreamExt;

use super::{DriverError, RunOutput};

/// Runs `argv` in `container` as `user` (the image's default user when `None`) in `workdir`,
/// with `env` added to the container's own, and waits for it to exit.
pub async fn run(
    docker: &Docker,
    container: &str,
    user: Option<&str>,
    workdir: &str,
    argv: Vec<String>,
    env: Vec<(String, String)>,
) -> Result<RunOutput, DriverError> {
    let engine = |e: bollard::errors::Error| DriverError::Engine(e.to_string());
    let env: Vec<String> = env.into_iter().map(|(name, value)| format!("{name}={value}")).collect();
    let config = bollard::exec::CreateExecOptions {
        cmd: Some(argv),
        env: Some(env),
        user: user.map(str::to_owned),
        working_dir: Some(workdir.to_owned()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker.create_exec(container, config).await.map_err(engine)?;
    let started = docker.start_exec(&exec.id, None).await.map_err(engine)?;
    let bollard::exec::StartExecResults::Attached { mut output, .. } = started else {
        return Err(DriverError::Engine("the command's output was not attached".to_owned()));
    };
    let mut ran = RunOutput::default();
    while let Some(chunk) = output.next().await {
        ran.push(&chunk.map_err(engine)?.into_bytes());
    }
    ran.exit_code = docker.inspect_exec(&exec.id).await.map_err(engine)?.exit_code;
    Ok(ran)
}
