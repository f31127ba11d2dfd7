//! Several Docker engines behind one driver (docs/engines.md): each engine is a [`DockerDriver`]
//! of its own (its networks, subnets and tools volume), new agents are placed on the engine with
//! the most room ([`super::engines::place`]), and every call for an agent goes to the engine
//! recorded with it in Postgres (`agents.engine`: its home volume lives there, so it stays).
//!
//! - **Availability**: each engine is pinged at start, and the chosen one again at each
//!   placement; one that does not answer (a refused client certificate, an unreachable host) gets
//!   no new agent, is logged with the reason, and is asked again at most every [`RECHECK`].
//!   Calls for its agents fail with the engine's error until it answers.
//! - **Exits** are followed on every engine at once; the **orphan sweep** lists and removes per
//!   engine, skipping one that does not answer.
//! - Ids no agent has (a warm-pool sandbox, made on the local engine only) go to the local engine.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use sqlx::PgPool;

use super::Labelled;
use super::docker::DockerDriver;
use super::engines::Load;
use super::{
    DiskCheck, DiskEnforcement, DriverError, LOCAL_ENGINE, Placement, SandboxDriver, SandboxSpec, SandboxStatus,
};
use crate::ids::AgentId;

/// How often an engine that did not answer is asked again, at most.
pub const RECHECK: Duration = Duration::from_secs(10);

/// One engine.
pub struct Engine {
    /// Its name (recorded with its agents).
    pub name: String,
    /// How many agents it may hold.
    pub capacity: u32,
    /// The driver that talks to it.
    pub driver: DockerDriver,
    /// Where its sandboxes reach the egress proxy (`None`: the server's setting).
    pub proxy_addr: Option<String>,
    /// Whether it answered when last asked.
    available: AtomicBool,
    /// When it was last asked.
    checked: Mutex<Option<Instant>>,
}

impl Engine {
    /// An engine, taken as available until it is first asked.
    pub fn new(name: String, capacity: u32, driver: DockerDriver, proxy_addr: Option<String>) -> Self {
        Self { name, capacity, driver, proxy_addr, available: AtomicBool::new(true), checked: Mutex::new(None) }
    }

    /// Asks the engine whether it answers, and records it (logging a change).
    async fn check(&self) -> bool {
        *self.checked.lock() = Some(Instant::now());
        let answer = self.driver.ping().await;
        let ok = answer.is_ok();
        let was = self.available.swap(ok, Ordering::SeqCst);
        match answer {
            Ok(()) if !was => tracing::info!(engine = %self.name, "the Docker engine answers again"),
            Ok(()) => {}
            // Said once, when it stops answering (every engine is taken as answering until asked).
            Err(error) if !was => {
                tracing::debug!(engine = %self.name, %error, "the Docker engine still does not answer")
            }
            Err(error) => tracing::error!(
                engine = %self.name,
                %error,
                "the Docker engine does not answer: it gets no new agents, and its agents cannot start, until it does"
            ),
        }
        ok
    }

    /// Whether it is available, asking again when it was not and [`RECHECK`] has passed.
    async fn available(&self) -> bool {
        if self.available.load(Ordering::SeqCst) {
            return true;
        }
        let due = self.checked.lock().is_none_or(|at| at.elapsed() >= RECHECK);
        if due { self.check().await } else { false }
    }
}

/// The driver over several engines.
pub struct MultiEngineDriver {
    engines: Vec<Engine>,
    /// The index of the local engine.
    local: usize,
    pool: PgPool,
    /// Agents' engines as read from Postgres (an agent never moves).
    homes: Mutex<HashMap<AgentId, usize>>,
}

impl MultiEngineDriver {
    /// The driver over `engines`, one of which must be named [`LOCAL_ENGINE`].
    pub fn new(engines: Vec<Engine>, pool: PgPool) -> Result<Self, DriverError> {
        let local = engines
            .iter()
            .position(|e| e.name == LOCAL_ENGINE)
            .ok_or_else(|| DriverError::Engine(format!("no engine named {LOCAL_ENGINE}")))?;
        Ok(Self { engines, local, pool, homes: Mutex::new(HashMap::new()) })
    }

    /// The engines.
    pub fn engines(&self) -> &[Engine] {
        &self.engines
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.engines.iter().position(|e| e.name == name)
    }

    /// The engine of an agent: the one recorded with it; the local one for an id no agent has.
    async fn engine_of(&self, agent_id: AgentId) -> Result<&Engine, DriverError> {
        if let Some(index) = self.homes.lock().get(&agent_id) {
            return Ok(&self.engines[*index]);
        }
        let recorded = crate::store::agents::engine_of(&self.pool, agent_id)
            .await
            .map_err(|e| DriverError::Engine(format!("reading the agent's engine: {e}")))?;
        let Some(name) = recorded else { return Ok(&self.engines[self.local]) };
        let index = self.index_of(&name).ok_or_else(|| {
            DriverError::Engine(format!(
                "the agent's sandbox is on the Docker engine {name}, which AGENTHOLD_DOCKER_ENGINES no longer lists"
            ))
        })?;
        self.homes.lock().insert(agent_id, index);
        Ok(&self.engines[index])
    }

    async fn driver_of(&self, agent_id: AgentId) -> Result<&DockerDriver, DriverError> {
        Ok(&self.engine_of(agent_id).await?.driver)
    }
}

impl SandboxDriver for MultiEngineDriver {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn next_agent_id(&self) -> AgentId {
        self.engines[self.local].driver.next_agent_id()
    }

    fn next_agent_id_on(&self, engine: &str) -> AgentId {
        let index = self.index_of(engine).unwrap_or(self.local);
        let agent_id = self.engines[index].driver.next_agent_id();
        self.homes.lock().insert(agent_id, index);
        agent_id
    }

    fn room_for_agent(&self) -> BoxFuture<'_, Result<(), DriverError>> {
        self.place().map(|placed| placed.map(|_| ())).boxed()
    }

    fn place(&self) -> BoxFuture<'_, Result<Placement, DriverError>> {
        async move {
            let counts = crate::store::agents::engine_counts(&self.pool)
                .await
                .map_err(|e| DriverError::Engine(format!("counting agents per engine: {e}")))?;
            let mut available = Vec::with_capacity(self.engines.len());
            for engine in &self.engines {
                available.push(engine.available().await);
            }
            // An engine whose subnet pool is full has no room whatever its capacity says.
            let mut full: Vec<bool> = vec![false; self.engines.len()];
            loop {
                let loads: Vec<Load<'_>> = self
                    .engines
                    .iter()
                    .enumerate()
                    .map(|(i, e)| Load {
                        name: &e.name,
                        capacity: if full[i] { 0 } else { e.capacity },
                        agents: counts.iter().find(|(name, _)| *name == e.name).map_or(0, |(_, n)| *n),
                        available: available[i],
                    })
                    .collect();
                let index = super::engines::place(&loads).map_err(DriverError::Capacity)?;
                let engine = &self.engines[index];
                // Asked now: an engine that stopped answering since is found before an agent is
                // placed on it for life.
                if !engine.check().await {
                    available[index] = false;
                    continue;
                }
                match engine.driver.room_for_agent().await {
                    Ok(()) => {
                        return Ok(Placement { engine: engine.name.clone(), capacity: Some(engine.capacity) });
                    }
                    Err(DriverError::Capacity(why)) => {
                        tracing::warn!(engine = %engine.name, %why, "no room on the engine for another agent network");
                        full[index] = true;
                    }
                    Err(error) => {
                        tracing::warn!(engine = %engine.name, %error, "checking the engine's room; placing elsewhere");
                        available[index] = false;
                    }
                }
            }
        }
        .boxed()
    }

    fn proxy_addr(&self, agent_id: AgentId) -> BoxFuture<'_, Result<Option<String>, DriverError>> {
        async move { Ok(self.engine_of(agent_id).await?.proxy_addr.clone()) }.boxed()
    }

    fn prepare<'a>(&'a self, image: &'a str) -> BoxFuture<'a, ()> {
        async move {
            let each = self.engines.iter().map(|engine| async move {
                if engine.check().await {
                    engine.driver.prepare(image).await;
                    tracing::info!(engine = %engine.name, capacity = engine.capacity, "Docker engine ready");
                }
            });
            futures_util::future::join_all(each).await;
        }
        .boxed()
    }

    fn isolated(&self) -> bool {
        true
    }

    fn home_dir(&self, agent_id: AgentId) -> String {
        self.engines[self.local].driver.home_dir(agent_id)
    }

    fn sandbox_user(&self) -> Option<String> {
        self.engines[self.local].driver.sandbox_user()
    }

    fn tools_dir(&self) -> String {
        self.engines[self.local].driver.tools_dir()
    }

    fn create(&self, spec: SandboxSpec) -> BoxFuture<'_, Result<String, DriverError>> {
        async move { self.driver_of(spec.agent_id).await?.create(spec).await }.boxed()
    }

    fn start(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move { self.driver_of(agent_id).await?.start(agent_id).await }.boxed()
    }

    fn stop(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move { self.driver_of(agent_id).await?.stop(agent_id).await }.boxed()
    }

    fn destroy(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move {
            self.driver_of(agent_id).await?.destroy(agent_id).await?;
            self.homes.lock().remove(&agent_id);
            Ok(())
        }
        .boxed()
    }

    fn status(&self, agent_id: AgentId) -> BoxFuture<'_, Result<SandboxStatus, DriverError>> {
        async move { self.driver_of(agent_id).await?.status(agent_id).await }.boxed()
    }

    fn remove_container(&self, agent_id: AgentId) -> BoxFuture<'_, Result<(), DriverError>> {
        async move { self.driver_of(agent_id).await?.remove_container(agent_id).await }.boxed()
    }

    fn source_addr(&self, agent_id: AgentId) -> BoxFuture<'_, Result<Option<std::net::IpAddr>, DriverError>> {
        async move { self.driver_of(agent_id).await?.source_addr(agent_id).await }.boxed()
    }

    fn follow_exits(
        &self,
        exits: tokio::sync::mpsc::Sender<(AgentId, chrono::DateTime<chrono::Utc>)>,
    ) -> BoxFuture<'static, ()> {
        let each: Vec<_> = self.engines.iter().map(|e| e.driver.follow_exits(exits.clone())).collect();
        futures_util::future::join_all(each).map(|_| ()).boxed()
    }

    fn labelled_objects(&self) -> BoxFuture<'_, Result<Vec<Labelled>, DriverError>> {
        async move {
            let mut found = Vec::new();
            for engine in &self.engines {
                if !engine.available().await {
                    continue;
                }
                match engine.driver.labelled_objects().await {
                    Ok(objects) => found.extend(objects.into_iter().map(|mut o| {
                        o.engine = Some(engine.name.clone());
                        o
                    })),
                    Err(error) => tracing::warn!(engine = %engine.name, %error, "listing the engine's objects"),
                }
            }
            Ok(found)
        }
        .boxed()
    }

    fn remove_object<'a>(&'a self, object: &'a Labelled) -> BoxFuture<'a, Result<(), DriverError>> {
        async move {
            let name = object.engine.as_deref().unwrap_or(LOCAL_ENGINE);
            let index = self
                .index_of(name)
                .ok_or_else(|| DriverError::Engine(format!("no Docker engine named {name} is configured")))?;
            self.engines[index].driver.remove_object(object).await
        }
        .boxed()
    }

    fn update_limits(
        &self,
        agent_id: AgentId,
        cpus: f64,
        memory_mib: i32,
        pids_limit: i32,
    ) -> BoxFuture<'_, Result<(), DriverError>> {
        async move { self.driver_of(agent_id).await?.update_limits(agent_id, cpus, memory_mib, pids_limit).await }
            .boxed()
    }

    fn oom_killed(&self, agent_id: AgentId) -> BoxFuture<'_, Result<bool, DriverError>> {
        async move { self.driver_of(agent_id).await?.oom_killed(agent_id).await }.boxed()
    }

    fn disk_enforcement(&self, engine: &str) -> Option<DiskEnforcement> {
        self.engines.iter().find(|e| e.name == engine)?.driver.disk_enforcement(engine)
    }

    fn disk_check(&self, agent_id: AgentId) -> BoxFuture<'_, Result<DiskCheck, DriverError>> {
        async move { self.driver_of(agent_id).await?.disk_check(agent_id).await }.boxed()
    }

    fn run(
        &self,
        agent_id: AgentId,
        argv: Vec<String>,
        env: Vec<(String, String)>,
    ) -> BoxFuture<'_, Result<super::RunOutput, DriverError>> {
        async move { self.driver_of(agent_id).await?.run(agent_id, argv, env).await }.boxed()
    }
}
