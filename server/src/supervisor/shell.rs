//! The supervisor's async shell around its [`core`](super::core): it owns the IO — the command
//! channel, the current sandboxd link and its inbox, the appender, the database, the driver — turns
//! what happens into [`Input`]s, and performs the core's [`Effect`]s in order. Persists are
//! submitted without waiting for their commit; jobs run concurrently; the loop never awaits a
//! consumer it does not control.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use agenthold_sandboxd::protocol::{Control, DataKind};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot};

use super::alarm::Alarm;
use super::core::{
    Core, Effect, Input, Job, Launch, LinkId, Now, OpenWork, Outbound, Outcome, ProcessStart, ReplyId, SlotChange,
    StoreFailure, WakeError,
};
use super::observed::Observations;
use super::slots::{Claimant, Slot};
use super::{Command, Deps, LifecycleError, TerminalAccess};
use crate::ids::{AgentId, TurnId};
use crate::sandbox::{SandboxSpec, SandboxStatus};
use crate::secret::Secret;
use crate::store;
use crate::tunnel::link::{Incoming, Link};

/// A caller waiting for an answer.
enum Waiter {
    Cancel(oneshot::Sender<bool>),
    Lifecycle(oneshot::Sender<Result<(), LifecycleError>>),
    Terminal(oneshot::Sender<Result<TerminalAccess, LifecycleError>>),
    Answer(oneshot::Sender<Result<(), super::core::AnswerError>>),
}

struct Shell {
    agent_id: AgentId,
    deps: Arc<Deps>,
    /// The sandbox was stopped (sleep) and no wake came since: a connection still arriving was
    /// made before the stop and is no reason to count the sandbox awake.
    stopped: bool,
    link: Option<Link>,
    inbox: Option<(LinkId, mpsc::Receiver<Incoming>)>,
    waiters: HashMap<ReplyId, Waiter>,
    next_reply: ReplyId,
    tasks: FuturesUnordered<BoxFuture<'static, Option<Input>>>,
    /// The slots the agent's turns hold under the server's limit on running turns.
    slots: HashMap<TurnId, Slot>,
    /// Turns waiting in the server's queue for a slot (abort: leave the queue).
    queued: HashMap<TurnId, futures_util::future::AbortHandle>,
    /// Their tickets: the slot, or `None` when the wait was aborted.
    tickets: FuturesUnordered<BoxFuture<'static, (TurnId, Option<Slot>)>>,
    /// The read of the open turns in flight (retried until it succeeds). One at a time: a read that
    /// started earlier could otherwise be merged after a later one and drop the turns it
    /// predates.
    turn_load: Option<BoxFuture<'static, (OpenWork, Option<Claimant>)>>,
    /// Whose turns these are under the limits on running turns (as of the last read).
    claimant: Claimant,
    /// Another read was asked for while one ran: it starts when that one is done.
    reload_turns: bool,
}

/// How long a destroy waits for jobs in flight.
const DESTROY_DRAIN: std::time::Duration = std::time::Duration::from_secs(60);

fn now() -> Now {
    Now { mono: Instant::now(), wall: chrono::Utc::now() }
}

/// Runs an agent's supervisor until the agent is destroyed or the registry drops it.
pub async fn run(
    agent_id: AgentId,
    deps: Arc<Deps>,
    observed: Arc<Observations>,
    logs: Arc<super::harness_log::HarnessLogs>,
    mut commands: mpsc::Receiver<Command>,
) {
    let home = deps.driver.home_dir(agent_id);
    let prefix = format!("ah-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let mut core = Core::new(agent_id, home, deps.timeouts, prefix);
    let mut shell = Shell {
        agent_id,
        deps,
        stopped: false,
        link: None,
        inbox: None,
        waiters: HashMap::new(),
        next_reply: 1,
        tasks: FuturesUnordered::new(),
        slots: HashMap::new(),
        queued: HashMap::new(),
        tickets: FuturesUnordered::new(),
        turn_load: None,
        reload_turns: false,
        claimant: Claimant::default(),
    };
    shell.load_turns();
    let mut database = shell.deps.database.subscribe();
    if !*database.borrow_and_update() {
        core.handle(Input::Database { up: false }, now());
    }
    // Forgets the published state however the loop ends.
    let publisher = observed.publisher();
    let _published = Published { agent_id, publisher, observed: Arc::clone(&observed) };
    let mut alarm = Alarm::new();
    loop {
        observed.publish(agent_id, publisher, &core.observed());
        while let Some(effect) = core.poll_effect() {
            if shell.perform(effect).await {
                return;
            }
        }
        let deadline = core.poll_timeout().map(|(at, _)| at);
        if deadline.is_some_and(|at| at <= Instant::now()) {
            core.handle_timeout(now());
            continue;
        }
        alarm.set(deadline);
        tokio::select! {
            command = commands.recv() => match command {
                None => break,
                Some(command) => {
                    if let Some(input) = shell.command(command) {
                        core.handle(input, now());
                    }
                }
            },
            incoming = next_incoming(&mut shell.inbox) => {
                // The running harness's stderr, for its admins (the core keeps its own tail).
                if let (_, Some(Incoming::Data(frame))) = &incoming
                    && frame.kind == DataKind::Stderr
                    && let Some((channel, generation)) = core.harness_channel()
                    && channel == frame.channel
                {
                    logs.append(agent_id, generation, frame.offset, &frame.payload);
                }
                if let Some(input) = shell.incoming(incoming) {
                    core.handle(input, now());
                }
            }
            Some(done) = shell.tasks.next() => {
                if let Some(input) = done {
                    if let Input::Stopped { result: Ok(()), .. } = &input {
                        // Given back here, in order with the connections the loop attaches.
                        shell.deps.host.give_back(agent_id);
                        shell.stopped = true;
                    }
                    core.handle(input, now());
                }
            }
            Some((turn_id, slot)) = shell.tickets.next() => {
                shell.queued.remove(&turn_id);
                if let Some(slot) = slot {
                    shell.slots.insert(turn_id, slot);
                    core.handle(Input::SlotGranted { turn_id }, now());
                }
            }
            (work, claimant) = next_load(&mut shell.turn_load) => {
                shell.turn_load = None;
                if let Some(claimant) = claimant {
                    shell.claimant = claimant;
                }
                if std::mem::take(&mut shell.reload_turns) {
                    shell.load_turns();
                }
                core.handle(Input::OpenTurns(work), now());
            }
            Ok(()) = database.changed() => {
                let up = *database.borrow_and_update();
                core.handle(Input::Database { up }, now());
            }
            () = alarm.fired() => core.handle_timeout(now()),
        }
    }
}

/// Forgets an agent's published state when its supervisor ends.
struct Published {
    agent_id: AgentId,
    publisher: super::observed::Publisher,
    observed: Arc<Observations>,
}

impl Drop for Published {
    fn drop(&mut self) {
        self.observed.forget(self.agent_id, self.publisher);
    }
}

/// The read of the open turns in flight, when it is done; never without one.
async fn next_load(
    load: &mut Option<BoxFuture<'static, (OpenWork, Option<Claimant>)>>,
) -> (OpenWork, Option<Claimant>) {
    match load {
        Some(read) => read.await,
        None => std::future::pending().await,
    }
}

async fn next_incoming(inbox: &mut Option<(LinkId, mpsc::Receiver<Incoming>)>) -> (LinkId, Option<Incoming>) {
    match inbox {
        Some((link, inbox)) => (*link, inbox.recv().await),
        None => std::future::pending().await,
    }
}

impl Shell {
    fn waiter(&mut self, waiter: Waiter) -> ReplyId {
        let id = self.next_reply;
        self.next_reply += 1;
        self.waiters.insert(id, waiter);
        id
    }

    fn command(&mut self, command: Command) -> Option<Input> {
        Some(match command {
            Command::Attach { link, hello, inbox } => {
                let Control::Hello { processes, .. } = hello else { return None };
                let id = link.id;
                // A connected sandbox is awake, whoever started it (this server's wake, or an
                // earlier server process's: after a restart it counts against the cap and can
                // be auto-slept like any other).
                if !self.stopped {
                    self.deps.host.take_running(self.agent_id, Instant::now());
                }
                if let Some(previous) = self.link.replace(link) {
                    previous.close();
                }
                self.inbox = Some((id, inbox));
                Input::Attached { link: id, processes: processes.into_iter().map(super::wire::process_state).collect() }
            }
            Command::Prompt => {
                self.load_turns();
                return None;
            }
            Command::Cancel { session_id, reply } => {
                Input::Cancel { session_id, reply: self.waiter(Waiter::Cancel(reply)) }
            }
            Command::Sleep { reply } => Input::Sleep { reply: self.waiter(Waiter::Lifecycle(reply)) },
            Command::Wake { reply } => Input::Wake { reply: self.waiter(Waiter::Lifecycle(reply)) },
            Command::Destroy { reply } => Input::Destroy { reply: self.waiter(Waiter::Lifecycle(reply)) },
            Command::Terminal { reply } => Input::Terminal { reply: self.waiter(Waiter::Terminal(reply)) },
            Command::EnvironmentChanged => Input::EnvironmentChanged,
            Command::SandboxExited(at) => {
                // Whether the engine killed it for want of memory, then the core decides.
                let (deps, agent_id) = (Arc::clone(&self.deps), self.agent_id);
                self.tasks.push(Box::pin(async move {
                    // Its slot on the host is free, unless a wake has started it again since.
                    if !matches!(deps.driver.status(agent_id).await, Ok(SandboxStatus::Running)) {
                        deps.host.give_back(agent_id);
                    }
                    Some(Input::SandboxExited { at, oom: explain_kill(&deps, agent_id).await })
                }));
                return None;
            }
            Command::AnswerPermission { permission_id, choice, by, reply } => {
                Input::AnswerPermission { permission_id, choice, by, reply: self.waiter(Waiter::Answer(reply)) }
            }
            Command::RevokeGrant { permission_id, session_id, by, reply } => {
                Input::RevokeGrant { permission_id, session_id, by, reply: self.waiter(Waiter::Answer(reply)) }
            }
            Command::GateChanged => {
                let (deps, agent_id) = (Arc::clone(&self.deps), self.agent_id);
                self.tasks.push(Box::pin(async move { changed_gate(&deps, agent_id).await }));
                return None;
            }
            Command::AuthMethodChanged => {
                let (deps, agent_id) = (Arc::clone(&self.deps), self.agent_id);
                self.tasks.push(Box::pin(async move { changed_auth_method(&deps, agent_id).await }));
                return None;
            }
        })
    }

    fn incoming(&mut self, (link, incoming): (LinkId, Option<Incoming>)) -> Option<Input> {
        let Some(incoming) = incoming else {
            self.inbox = None;
            if self.link.as_ref().is_some_and(|l| l.id == link) {
                self.link = None;
            }
            return Some(Input::LinkClosed { link });
        };
        match incoming {
            Incoming::Data(frame) => match frame.kind {
                DataKind::Stdout => {
                    Some(Input::Stdout { link, channel: frame.channel, offset: frame.offset, bytes: frame.payload })
                }
                DataKind::Stderr => Some(Input::Stderr { link, channel: frame.channel, bytes: frame.payload }),
                _ => None,
            },
            Incoming::Control(msg) => {
                if let Control::Exited { status, .. } = &msg {
                    crate::metrics::harness_exited(status.code, status.signal);
                }
                match super::wire::from_sandboxd(msg) {
                    Ok(msg) => Some(Input::Control { link, msg }),
                    Err(other) => {
                        tracing::debug!(agent.id = %self.agent_id, ?other, "unexpected control message");
                        None
                    }
                }
            }
        }
    }

    /// Reads the open turns (after the read in flight, if there is one).
    fn load_turns(&mut self) {
        if self.turn_load.is_some() {
            self.reload_turns = true;
            return;
        }
        let (pool, agent_id) = (self.deps.pool.clone(), self.agent_id);
        self.turn_load = Some(Box::pin(async move {
            // A failed read is tried again: a turn it would have brought must not stay unsent
            // until the next command happens to read again.
            loop {
                let read = async {
                    let work = super::reads::open_work(&pool, agent_id).await?;
                    let agent = store::agents::get(&pool, agent_id).await?;
                    let claimant = agent.map(|a| Claimant { workspace: a.workspace_id, user: a.created_by });
                    Ok::<_, sqlx::Error>((work, claimant))
                };
                match read.await {
                    Ok(read) => return read,
                    Err(error) => {
                        tracing::error!(%error, agent.id = %agent_id, "loading open turns; trying again in 1 s");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        }));
    }

    /// Performs one effect; `true` when the supervisor ends (destroyed).
    async fn perform(&mut self, effect: Effect) -> bool {
        match effect {
            Effect::Persist { id, events, side, ended } => {
                let committed = self.deps.appender.submit(events, side).await;
                self.tasks.push(Box::pin(async move {
                    let result = match committed.await {
                        Ok(Ok(_)) => {
                            for turn in ended {
                                crate::metrics::turn_ended(&turn.stop_reason, turn.duration.as_secs_f64());
                            }
                            Ok(())
                        }
                        Ok(Err(failed)) if failed.rejected => Err(StoreFailure::Rejected),
                        _ => Err(StoreFailure::Transient),
                    };
                    Some(Input::Persisted { id, result })
                }));
            }
            Effect::Send { link, out } => {
                if let Some(current) = self.link.as_ref().filter(|l| l.id == link) {
                    match out {
                        Outbound::Control(order) => current.send(&super::wire::to_sandboxd(order)),
                        Outbound::Stdin { channel, offset, bytes } => {
                            current.send_data(DataKind::Stdin, channel, offset, bytes)
                        }
                    };
                }
            }
            Effect::DropLink { link } => {
                if let Some(current) = self.link.take_if(|l| l.id == link) {
                    current.close();
                }
                if self.inbox.as_ref().is_some_and(|(id, _)| *id == link) {
                    // Dropping the inbox ends the connection's reader, which closes it.
                    self.inbox = None;
                }
            }
            Effect::LoadTakeover { link } => {
                let (pool, agent_id, postures) = (self.deps.pool.clone(), self.agent_id, self.deps.postures.clone());
                let home_dir = self.deps.driver.home_dir(agent_id);
                let mcp = self.deps.mcp.clone();
                self.tasks.push(Box::pin(async move {
                    let snapshot =
                        match super::reads::load_snapshot(&pool, agent_id, &postures, &home_dir, mcp.as_ref()).await {
                            Ok(snapshot) => Some(Box::new(snapshot)),
                            Err(error) => {
                                tracing::error!(%error, agent.id = %agent_id, "reading the takeover snapshot");
                                None
                            }
                        };
                    Some(Input::Loaded { link, snapshot })
                }));
            }
            Effect::Job(job) => return self.job(job).await,
            Effect::Reply { to, outcome } => self.reply(to, outcome),
            Effect::Slot(change) => self.slot(change),
        }
        false
    }

    /// Asks for, takes or gives back a turn's slot.
    fn slot(&mut self, change: SlotChange) {
        let slots = &self.deps.turn_slots;
        match change {
            SlotChange::Ask(turn_id) => match slots.take(self.claimant) {
                Ok(slot) => {
                    self.slots.insert(turn_id, slot);
                    self.tasks.push(Box::pin(async move { Some(Input::SlotGranted { turn_id }) }));
                }
                Err(queued) => {
                    let (running, ahead, limit, scope) = (queued.running, queued.ahead, queued.limit, queued.scope);
                    let (ticket, abort) = futures_util::future::abortable(queued.ticket);
                    self.queued.insert(turn_id, abort);
                    self.tickets.push(Box::pin(async move { (turn_id, ticket.await.ok().and_then(Result::ok)) }));
                    self.tasks.push(Box::pin(async move {
                        Some(Input::SlotQueued { turn_id, running, ahead, limit, scope })
                    }));
                }
            },
            SlotChange::Take(turn_id) => {
                let slot = slots.force(self.claimant);
                self.slots.insert(turn_id, slot);
            }
            SlotChange::Release(turn_id) => {
                self.slots.remove(&turn_id);
                if let Some(abort) = self.queued.remove(&turn_id) {
                    abort.abort();
                }
            }
        }
    }

    fn reply(&mut self, to: ReplyId, outcome: Outcome) {
        let Some(waiter) = self.waiters.remove(&to) else { return };
        match (waiter, outcome) {
            (Waiter::Cancel(reply), Outcome::Cancelled(cancelled)) => {
                let _ = reply.send(cancelled);
            }
            (Waiter::Lifecycle(reply), Outcome::Lifecycle(outcome)) => {
                let _ = reply.send(outcome);
            }
            (Waiter::Answer(reply), Outcome::Answered(outcome)) => {
                let _ = reply.send(outcome);
            }
            (Waiter::Terminal(reply), Outcome::TerminalFailed(message)) => {
                let _ = reply.send(Err(LifecycleError::Failed(message)));
            }
            (_, outcome) => tracing::warn!(agent.id = %self.agent_id, ?outcome, "a reply of the wrong kind"),
        }
    }

    async fn job(&mut self, job: Job) -> bool {
        let (deps, agent_id) = (Arc::clone(&self.deps), self.agent_id);
        match job {
            Job::Wake { job } => {
                self.stopped = false;
                // Whether the wake has to wait for a slot on the host: said as soon as it does.
                let (queued, waits) = oneshot::channel();
                self.tasks.push(Box::pin(async move { waits.await.ok().map(|()| Input::WakeQueued { job }) }));
                self.tasks.push(Box::pin(async move {
                    Some(Input::Woken { job, result: wake(&deps, agent_id, queued).await })
                }))
            }
            Job::StartHarness { job } => self
                .tasks
                .push(Box::pin(async move { Some(Input::Launched { job, result: launch(&deps, agent_id).await }) })),
            Job::LoadTurns => self.load_turns(),
            Job::CheckSandbox => self.tasks.push(Box::pin(async move {
                match deps.driver.status(agent_id).await {
                    Ok(SandboxStatus::Running) => None,
                    Ok(_) => {
                        Some(Input::SandboxExited { at: chrono::Utc::now(), oom: explain_kill(&deps, agent_id).await })
                    }
                    Err(error) => {
                        tracing::warn!(%error, agent.id = %agent_id, "asking the engine whether the sandbox runs");
                        None
                    }
                }
            })),
            Job::ExplainKill { job } => self.tasks.push(Box::pin(async move {
                Some(Input::KillExplained { job, oom: explain_kill(&deps, agent_id).await })
            })),
            Job::CheckDisk { turns } => self.tasks.push(Box::pin(async move {
                Some(Input::DiskChecked { turns, finding: super::disk::check(&deps, agent_id).await })
            })),
            Job::CheckProviderStream { turns } => self.tasks.push(Box::pin(async move {
                let since = turns.iter().map(|(_, _, started)| *started).min()?;
                let finding = super::provider::check(deps.proxy_report.as_deref(), agent_id, since).await;
                let turns = turns.into_iter().map(|(turn_id, session_id, _)| (turn_id, session_id)).collect();
                Some(Input::ProviderStreamChecked { turns, finding })
            })),
            Job::Stop { job, reply } => {
                self.link = None;
                self.inbox = None;
                self.tasks.push(Box::pin(async move {
                    let result =
                        deps.driver.stop(agent_id).await.map_err(|e| format!("the sandbox could not stop: {e}"));
                    Some(Input::Stopped { job, reply, result })
                }));
            }
            Job::Destroy { reply } => {
                self.link = None;
                self.inbox = None;
                // Let jobs in flight (a wake creating the container) finish first, so nothing they
                // make outlives the removal.
                let drained = async { while self.tasks.next().await.is_some() {} };
                if tokio::time::timeout(DESTROY_DRAIN, drained).await.is_err() {
                    tracing::warn!(agent.id = %agent_id, "jobs still running when the sandbox is removed");
                }
                let outcome = deps
                    .driver
                    .destroy(agent_id)
                    .await
                    .map_err(|e| LifecycleError::Failed(format!("the sandbox could not be removed: {e}")));
                deps.host.give_back(agent_id);
                self.reply(reply, Outcome::Lifecycle(outcome));
                return true;
            }
            Job::Terminal { reply, link } => {
                let Some(Waiter::Terminal(sender)) = self.waiters.remove(&reply) else { return false };
                let Some(link) = self.link.clone().filter(|l| l.id == link) else {
                    let _ = sender.send(Err(LifecycleError::Failed("the sandbox disconnected".to_owned())));
                    return false;
                };
                self.tasks.push(Box::pin(async move {
                    let access = match store::sandboxes::allocate_channel(&deps.pool, agent_id).await {
                        Ok(channel) => Ok(TerminalAccess {
                            link,
                            channel,
                            home_dir: deps.driver.home_dir(agent_id),
                            user: deps.driver.sandbox_user(),
                        }),
                        Err(error) => {
                            tracing::error!(%error, agent.id = %agent_id, "allocating a terminal channel");
                            Err(LifecycleError::Failed("the terminal could not be opened".to_owned()))
                        }
                    };
                    let _ = sender.send(access);
                    None
                }));
            }
        }
        false
    }
}

/// Whether the engine killed the sandbox's harness for want of memory: the message naming the
/// limit, or `None`.
async fn explain_kill(deps: &Deps, agent_id: AgentId) -> Option<String> {
    match deps.driver.oom_killed(agent_id).await {
        Ok(true) => {
            let limit = match store::agents::get(&deps.pool, agent_id).await {
                Ok(Some(agent)) => format!(" (limit {} MiB)", agent.memory_mib),
                _ => String::new(),
            };
            Some(format!("the harness ran out of memory{limit} and was killed"))
        }
        Ok(false) => None,
        Err(error) => {
            tracing::warn!(%error, agent.id = %agent_id, "asking the engine why the harness was killed");
            None
        }
    }
}

/// Makes sure the sandbox exists and runs (recreating it, with the same home, if it was deleted
/// behind the server's back). sandboxd then dials in. When the host is full it says so on
/// `queued` (the core tells the waiting sessions) and waits for a slot.
async fn wake(deps: &Deps, agent_id: AgentId, queued: oneshot::Sender<()>) -> Result<(), WakeError> {
    let began = Instant::now();
    let status = deps.driver.status(agent_id).await.map_err(|e| {
        tracing::error!(error = %e, agent.id = %agent_id, "starting the sandbox");
        WakeError::StartFailed("the sandbox could not start (see the server log)".to_owned())
    })?;
    if status == SandboxStatus::Running {
        deps.host.take_running(agent_id, Instant::now());
        return start(deps, agent_id, status, began).await;
    }
    // A slot on the host before anything is made or started; when the host is full, the turns
    // waiting for this wake say so and the wake waits for a sandbox to sleep.
    if !deps.host.try_take(agent_id, Instant::now()) {
        let _ = queued.send(());
        deps.host.take(agent_id, || {}).await;
        tracing::info!(agent.id = %agent_id, waited_ms = began.elapsed().as_millis() as u64, "a slot on the host is free");
    }
    let result = start(deps, agent_id, status, began).await;
    if result.is_err() {
        deps.host.give_back(agent_id);
    }
    result
}

/// The rest of a wake, once the sandbox has a slot: makes the container if needed, starts it.
async fn start(deps: &Deps, agent_id: AgentId, mut status: SandboxStatus, began: Instant) -> Result<(), WakeError> {
    let failed = |e: crate::sandbox::DriverError| {
        tracing::error!(error = %e, agent.id = %agent_id, "starting the sandbox");
        match e {
            crate::sandbox::DriverError::Capacity(message) => WakeError::Capacity(message),
            // What the server's settings require and the engine cannot do: said as it is.
            crate::sandbox::DriverError::Unsupported(message) => WakeError::StartFailed(message),
            _ => WakeError::StartFailed("the sandbox could not start (see the server log)".to_owned()),
        }
    };
    let database = |e: sqlx::Error| {
        tracing::error!(error = %e, agent.id = %agent_id, "starting the sandbox");
        WakeError::StartFailed("the sandbox could not start (database error)".to_owned())
    };
    let driver = Arc::clone(&deps.driver);
    if status == SandboxStatus::Stale {
        // Made by another server version: make it again around the same home, so sandboxd
        // never drifts from this server's.
        tracing::info!(agent.id = %agent_id, "the sandbox was made by another server version; recreating it");
        driver.remove_container(agent_id).await.map_err(failed)?;
        status = SandboxStatus::Missing;
    }
    if status == SandboxStatus::Missing {
        let agent = store::agents::get(&deps.pool, agent_id)
            .await
            .map_err(database)?
            .ok_or_else(|| WakeError::StartFailed("the agent was deleted".to_owned()))?;
        let token = mint_token();
        let hash = store::tokens::hash_token(token.expose());
        store::sandboxes::set_token(&deps.pool, agent_id, &hash).await.map_err(database)?;
        let spec = SandboxSpec {
            agent_id,
            image: agent.image,
            tunnel_url: deps.tunnel_url.clone(),
            tunnel_ca_pem: deps.tunnel_ca_pem.clone(),
            token,
            cpus: agent.cpus,
            memory_mib: agent.memory_mib,
            pids_limit: agent.pids_limit,
            disk_mib: agent.disk_mib,
        };
        let handle = driver.create(spec).await.map_err(failed)?;
        store::sandboxes::set_handle(&deps.pool, agent_id, Some(&handle)).await.map_err(database)?;
    }
    let created = Instant::now();
    if status != SandboxStatus::Running {
        driver.start(agent_id).await.map_err(failed)?;
        let from = if status == SandboxStatus::Missing { "missing" } else { "stopped" };
        crate::metrics::sandbox_started(from, began.elapsed().as_secs_f64());
        crate::metrics::sandbox_engine_started(from, created.elapsed().as_secs_f64());
    }
    let engine_started = Instant::now();
    record_source_addr(deps, agent_id).await.map_err(database)?;
    tracing::info!(
        agent.id = %agent_id,
        was = ?status,
        create_ms = (created - began).as_millis() as u64,
        start_ms = (engine_started - created).as_millis() as u64,
        address_ms = engine_started.elapsed().as_millis() as u64,
        "sandbox started"
    );
    Ok(())
}

/// How long a starting sandbox waits for the proxy feed to write its new address.
const FEED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Records where the sandbox's traffic comes from; when that changed and the proxy feed runs,
/// waits (at most [`FEED_WAIT`]) until the feed has written it, so the harness's first request
/// finds it in the file (the proxy checks the file at once for credentials it does not know).
/// Past the wait the harness starts anyway: until the proxy has the address it refuses the
/// sandbox (never the other way round).
async fn record_source_addr(deps: &Deps, agent_id: AgentId) -> Result<(), sqlx::Error> {
    let addr = match deps.driver.source_addr(agent_id).await {
        Ok(addr) => addr,
        Err(error) => {
            // Keep what is recorded: clearing it would let the proxy admit the sandbox's
            // credentials from any address.
            tracing::warn!(%error, agent.id = %agent_id, "reading the sandbox's address; the recorded one stays");
            return Ok(());
        }
    };
    let changed = store::sandboxes::set_source_addr(&deps.pool, agent_id, addr).await?;
    let (Some(addr), true) = (addr, changed) else { return Ok(()) };
    let Some(mut written) = deps.proxy.as_ref().and_then(|p| p.written.clone()) else { return Ok(()) };
    let has = |w: &crate::proxy_feed::task::Written| w.agent_from(agent_id, addr);
    if tokio::time::timeout(FEED_WAIT, written.wait_for(has)).await.is_err() {
        tracing::warn!(agent.id = %agent_id, "the proxy feed has not written the sandbox's address yet; starting anyway");
    }
    Ok(())
}

/// The login method the agent names as it is now stored, for a running harness (none when the
/// agent is gone; a database error keeps the one it has, logged).
async fn changed_auth_method(deps: &Deps, agent_id: AgentId) -> Option<Input> {
    match store::agents::get(&deps.pool, agent_id).await {
        Ok(agent) => Some(Input::AuthMethodChanged(agent.and_then(|a| a.auth_method))),
        Err(error) => {
            tracing::error!(%error, agent.id = %agent_id, "reading the agent's changed login method; the harness keeps its own");
            None
        }
    }
}

/// The agent's gate as it is now stored, for a running harness; when it cannot be made (the
/// agent is gone, or its posture cannot run), the harness restarts instead, which says why.
async fn changed_gate(deps: &Deps, agent_id: AgentId) -> Option<Input> {
    let agent = match store::agents::get(&deps.pool, agent_id).await {
        Ok(agent) => agent?,
        Err(error) => {
            tracing::error!(%error, agent.id = %agent_id, "reading the agent's changed posture; restarting its harness");
            return Some(Input::EnvironmentChanged);
        }
    };
    match deps.postures.gate(&agent, &deps.driver.home_dir(agent_id)) {
        Ok(gate) => Some(Input::GateChanged(Box::new(gate))),
        Err(error) => {
            tracing::warn!(agent.id = %agent_id, %error, "the agent's new posture cannot run; restarting its harness");
            Some(Input::EnvironmentChanged)
        }
    }
}

/// Loads the agent, computes the adapter's launch, allocates the channel and generation.
async fn launch(deps: &Deps, agent_id: AgentId) -> Result<Option<Launch>, String> {
    let database = |e: sqlx::Error| {
        tracing::error!(error = %e, agent.id = %agent_id, "starting the harness");
        "the harness could not start (database error)".to_owned()
    };
    let Some(agent) = store::agents::get(&deps.pool, agent_id).await.map_err(database)? else { return Ok(None) };
    let tools_dir = deps.driver.tools_dir();
    let gate = deps.postures.gate(&agent, &deps.driver.home_dir(agent_id)).map_err(|e| e.to_string())?;
    let home_dir = deps.driver.home_dir(agent_id);
    let context = crate::harness::LaunchContext { agent: &agent, tools_dir: &tools_dir, home_dir: &home_dir };
    // Its secrets' and logins' placeholders, the egress proxy and its CA: what the terminal gets
    // too (`sandbox_env`).
    let shared = super::sandbox_env::shared(&deps.pool, deps.proxy.as_ref(), deps.driver.as_ref(), &agent)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, agent.id = %agent_id, "starting the harness: its sandbox environment");
            "the harness could not start (see the server log)".to_owned()
        })?;
    let composed = super::sandbox_env::harness_start(&context, shared)?;
    let (env, logins) = (composed.env, composed.logins);
    // Using the logins is audited.
    if !logins.is_empty() {
        let kinds: Vec<&str> = logins.iter().map(|(kind, _)| kind.as_str()).collect();
        let record = store::audit::AuditRecord {
            workspace_id: agent.workspace_id,
            actor_user_id: agent.login_user_id,
            action: "login.used",
            resource_type: "agent",
            resource_id: agent_id.to_string(),
            detail: serde_json::json!({"name": agent.name, "kinds": kinds}),
        };
        store::audit::append(&deps.pool, record).await.map_err(database)?;
    }
    // The agent's repository, cloned with this environment (the proxy, git's helper) first.
    let session_cwd = super::repo::prepare(deps, agent_id, &home_dir, &env).await;
    let channel = store::sandboxes::allocate_channel(&deps.pool, agent_id).await.map_err(database)?;
    let env_names: Vec<String> = env.iter().map(|(name, _)| name.clone()).collect();
    let generation =
        store::sandboxes::start_harness(&deps.pool, agent_id, channel, &env_names).await.map_err(database)?;
    tracing::info!(agent.id = %agent_id, channel, generation, program = ?composed.program, "starting the harness");
    crate::metrics::harness_started();
    // How it is signed in when it asks: the agent's named method, else one the adapter may call
    // itself whose key the harness has, else the only advertised one whose key it has (the
    // variables' names only, never their values).
    let auto_auth = crate::harness::automatic_methods(&agent.harness, &env_names);
    let auth = crate::supervisor::core::Auth::new(agent.auth_method.clone(), auto_auth, env_names);
    let argv = composed.argv;
    let cwd = session_cwd.clone().unwrap_or(home_dir);
    let start = ProcessStart { channel, argv, env, cwd, user: deps.driver.sandbox_user() };
    let session_mode = session_mode(&agent.harness);
    let mcp_servers = offered_mcp(deps.mcp.as_ref(), agent_id);
    Ok(Some(Launch { generation, channel, start, session_mode, gate, auth, mcp_servers, session_cwd }))
}

/// agenthold's MCP server for the agent, when harnesses are offered one.
pub(crate) fn offered_mcp(
    endpoint: Option<&crate::mcp::servers::Endpoint>,
    agent_id: AgentId,
) -> crate::mcp::servers::Offered {
    crate::mcp::servers::Offered(endpoint.map(|e| e.server_for(agent_id)).into_iter().collect())
}

/// The mode the agent's harness adapter puts sessions in.
pub(super) fn session_mode(harness: &str) -> Option<String> {
    crate::harness::adapter(harness).and_then(|a| a.profile().session_mode).map(str::to_owned)
}

/// A fresh sandbox token: 32 random bytes, hex.
pub(crate) fn mint_token() -> Secret {
    Secret::new(hex::encode(rand::random::<[u8; 32]>()))
}
