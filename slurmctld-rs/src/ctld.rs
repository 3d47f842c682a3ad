//! The controller's owner task: one task owns the scheduler core, the job table and the store,
//! and handles a closed set of [`Event`]s (STYLE.md "one owner per daemon").
//!
//! Each turn of the loop takes every event waiting (group commit), handles them, runs the
//! timer work and — debounced — a scheduling cycle of the core, then **commits the whole
//! batch in one SQLite transaction before any reply or node message goes out** (decisions,
//! then effects). A crash between commit and effects is healed by the reconciler: node
//! daemons report what runs where (level-triggered), and the controller re-sends binds,
//! kills orphans and requeues what a rebooted node lost.

use crate::admission::{self, AdmissionConf, Reject};
use crate::deps::{self, DepStatus, DepTarget, Dependency};
use crate::job::{compress_hostlist, JobRecord, JobState, StopWhy, Stopping};
use crate::store::{AllocOp, NodeRow, Store, WriteBatch};
use flotilla_core::cluster::{GpuMask, NodeAvail, NodeId};
use flotilla_core::job::{HoldKind, JobId};
use flotilla_core::placement::{self, PlaceCtx, PlacementPolicy};
use flotilla_core::sched::{Allocation, Decision, Event as CoreEvent, RequeueReason, RunningJob, Scheduler};
use flotilla_proto::errno::*;
use flotilla_proto::{
    Bind, CancelJob, CtlToNode, HoldOp, HoldRelease, JobChange, JobExit, JobFilter, JobQuery, JobRef,
    HealthLevel, JobResult, LaunchDetails, NodeInfo, NodeJob, NodeQuery, NodeToCtl, PartitionInfo, Register, Request, RequeueJob, Response,
    SlurmError, Stats, Str, SubmitJob, Submitted, TestOnly, TimeLimitWire, UpdateJob, JobView, FieldSet,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, error, info, info_span, warn};

#[path = "steps.rs"]
pub mod steps;

/// Bit marking a core job id as a pending array task: `PROV | array_id << 20 | task`.
const PROV: u64 = 1 << 62;
/// SIGTERM.
const SIGTERM: i32 = 15;
/// Most events handled in one turn (one transaction).
const MAX_BATCH: usize = 8192;

mod services;

fn prov_id(array_id: u64, task: u32) -> u64 {
    PROV | (array_id << 20) | u64::from(task)
}

fn prov_decode(core: u64) -> Option<(u64, u32)> {
    (core & PROV != 0).then_some(((core & !PROV) >> 20, (core & 0xF_FFFF) as u32))
}

/// Who is asking: from `SO_PEERCRED` on the Unix socket or a verified credential on TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ident {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Root or `SlurmUser`: may act on every job.
    pub admin: bool,
}

/// An answer to a request: a message, or a `Response` already encoded (postcard) by the owner
/// task — job queries are encoded from borrowed views ([`flotilla_proto::jobview`]) instead of
/// being built as owned `JobInfo`s first.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A message, encoded by the connection task.
    Msg(Response),
    /// The postcard encoding of a `Response`.
    Encoded(Vec<u8>),
}

impl From<Response> for Reply {
    fn from(r: Response) -> Reply {
        Reply::Msg(r)
    }
}

/// Everything the owner task handles. Closed: every variant is matched exhaustively.
#[derive(Debug)]
pub enum Event {
    /// A request from a command.
    Rpc {
        /// Who.
        ident: Ident,
        /// What.
        req: Request,
        /// Where the answer goes (after the commit).
        reply: oneshot::Sender<Reply>,
    },
    /// A node daemon registers on connection `conn`; `tx` carries frames to it.
    NodeRegister {
        /// Connection id.
        conn: u64,
        /// The registration.
        reg: Register,
        /// Frames to the node.
        tx: mpsc::UnboundedSender<CtlToNode>,
        /// Answer.
        reply: oneshot::Sender<Reply>,
    },
    /// A node-session message.
    NodeMsg {
        /// Connection id.
        conn: u64,
        /// Node name.
        node: String,
        /// Message.
        msg: NodeToCtl,
    },
    /// A node session ended.
    NodeGone {
        /// Connection id.
        conn: u64,
        /// Node name.
        node: String,
    },
}

/// Tunables of the controller.
#[derive(Debug, Clone)]
pub struct CtlOptions {
    /// Timer period: time limits, kill escalation, node timeouts.
    pub tick: Duration,
    /// A scheduling cycle runs at least this often.
    pub sched_interval: Duration,
    /// Minimum gap between event-triggered cycles.
    pub debounce: Duration,
    /// `SlurmdTimeout` (s): a node daemon silent this long is marked down.
    pub slurmd_timeout_s: i64,
    /// `KillWait` (s): between SIGTERM and SIGKILL.
    pub kill_wait_s: i64,
    /// `MinJobAge` (s): finished jobs stay visible this long.
    pub min_job_age_s: i64,
    /// `MaxJobCount`.
    pub max_job_count: u64,
    /// Admission settings.
    pub admission: AdmissionConf,
    /// Check the core's invariants after every cycle (fail stop on a violation).
    pub check_invariants: bool,
    /// Seconds in one minute of a time limit: 60, except in tests that cannot wait minutes.
    pub minute_s: i64,
    /// `AlertProgram=`: run with each alert or page as JSON on its standard input.
    pub alert_program: Option<std::path::PathBuf>,
    /// Seconds a job runs before it may be preempted (Slurm's `PreemptExemptTime`); `None`:
    /// the core's default (10 min, DESIGN.md §5).
    pub preempt_exempt_s: Option<u64>,
    /// The preemption budget's paging limit in percent (`--preempt-budget-pct`); `None`: the
    /// core's default (25 %).
    pub preempt_budget_pct: Option<u32>,
    /// How long a requeued job is held back before it may start again (s); Slurm's
    /// `cred_expire` + 1 = 121 ([`requeue_begin`]).
    pub requeue_holdoff_s: i64,
    /// The account tree of `quota.conf` (guarantees, ceilings), handed to the scheduler at
    /// start; empty: quotas off.
    pub quotas: flotilla_core::quota::QuotaTree,
}

impl Default for CtlOptions {
    fn default() -> Self {
        CtlOptions {
            tick: Duration::from_secs(1),
            sched_interval: Duration::from_secs(1),
            debounce: Duration::from_millis(20),
            slurmd_timeout_s: 300,
            kill_wait_s: 30,
            min_job_age_s: 300,
            max_job_count: 1_000_000,
            admission: AdmissionConf {
                def_mem_per_cpu_mib: None,
                max_array_size: 1001,
                default_accounts: Default::default(),
            },
            check_invariants: true,
            minute_s: 60,
            alert_program: None,
            preempt_exempt_s: None,
            preempt_budget_pct: None,
            requeue_holdoff_s: 121,
            quotas: Default::default(),
        }
    }
}

#[derive(Debug)]
struct NodeSess {
    conn: u64,
    tx: mpsc::UnboundedSender<CtlToNode>,
}

#[derive(Debug, Default)]
struct NodeRt {
    sess: Option<NodeSess>,
    down_since: Option<i64>,
    marked_down: bool,
    jobs: BTreeSet<u64>,
}

#[derive(Debug)]
enum Outgoing {
    Msg(CtlToNode),
    Bind(u64),
}

#[derive(Debug, Default)]
struct StatsAcc {
    cycles: u64,
    cycle_us_total: u64,
    last_cycle_us: u64,
    max_cycle_us: u64,
    submitted: u64,
    started: u64,
    completed: u64,
    failed: u64,
    cancelled: u64,
    requeued: u64,
    commits: u64,
    commit_us_total: u64,
    batch_events_total: u64,
    rpc: BTreeMap<&'static str, u64>,
}

/// The controller state, owned by one task.
#[derive(Debug)]
pub struct Controller {
    sched: Scheduler,
    store: Store,
    opts: CtlOptions,
    test_placement: Box<dyn PlacementPolicy>,
    jobs: BTreeMap<u64, JobRecord>,
    core_map: HashMap<u64, u64>,
    deps: BTreeMap<u64, Dependency>,
    in_core_tasks: BTreeMap<u64, BTreeSet<u32>>,
    /// Ids of array metas (records with pending tasks), so that a cycle need not scan every
    /// job to find them (see `refresh_arrays`). A superset: ids leave it lazily.
    array_metas: BTreeSet<u64>,
    next_job_id: u64,
    nodes: Vec<NodeRt>,
    batch: WriteBatch,
    replies: Vec<(oneshot::Sender<Reply>, Reply)>,
    node_out: Vec<(usize, Outgoing)>,
    sched_dirty: bool,
    stats: StatsAcc,
    started_at: i64,
    auth_failures: Arc<AtomicU64>,
    steps: steps::StepTable,
    svc: services::SvcState,
    /// `sacct` queries, answered after this turn's commit so they see it.
    acct_queries: Vec<(flotilla_proto::AcctQuery, oneshot::Sender<Reply>)>,
    /// Turns of the owner loop ([`Controller::run`]) completed since start: batches of events
    /// handled, with their timers, cycle and commit (`Request::QueryTurns`).
    turns: u64,
}

/// Wall clock in seconds since the epoch (read only at the edge, here).
pub fn wall_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn job_state_ok(s: JobState) -> DepTarget {
    match s {
        JobState::Pending => DepTarget::Pending,
        JobState::Running | JobState::Completing => DepTarget::Running,
        JobState::Completed => DepTarget::Ended { ok: true },
        _ => DepTarget::Ended { ok: false },
    }
}

impl Controller {
    /// A controller over `sched` (built from the cluster config) and `store`, recovering the
    /// stored state. `test_placement` answers `--test-only` (the same policy as the core's).
    pub fn new(
        sched: Scheduler,
        test_placement: Box<dyn PlacementPolicy>,
        store: Store,
        opts: CtlOptions,
        auth_failures: Arc<AtomicU64>,
        now: i64,
    ) -> Result<Controller, crate::store::StoreError> {
        let n = sched.cluster.nodes.len();
        let mut c = Controller {
            sched,
            store,
            opts,
            test_placement,
            jobs: BTreeMap::new(),
            core_map: HashMap::new(),
            deps: BTreeMap::new(),
            in_core_tasks: BTreeMap::new(),
            array_metas: BTreeSet::new(),
            next_job_id: 1,
            nodes: (0..n).map(|_| NodeRt::default()).collect(),
            batch: WriteBatch::default(),
            replies: Vec::new(),
            node_out: Vec::new(),
            sched_dirty: true,
            stats: StatsAcc::default(),
            started_at: now,
            auth_failures,
            steps: steps::StepTable::default(),
            svc: services::SvcState::default(),
            acct_queries: Vec::new(),
            turns: 0,
        };
        c.recover(now)?;
        Ok(c)
    }

    fn recover(&mut self, now: i64) -> Result<(), crate::store::StoreError> {
        let mut loaded = self.store.load(now - self.opts.min_job_age_s)?;
        self.next_job_id = loaded.next_job_id;
        self.recover_services(std::mem::take(&mut loaded.svc), now);
        let mut known: HashSet<String> = HashSet::new();
        for row in &loaded.nodes {
            if let Some(id) = self.sched.cluster.node_id(&row.name) {
                self.sched.cluster.nodes[id.0 as usize].boot_epoch = row.boot_epoch;
                if let Ok(avail) = serde_json::from_str::<NodeAvail>(&row.avail) {
                    let avail = match avail {
                        NodeAvail::Down { reason } if reason == "Not responding" => NodeAvail::Up,
                        a => a,
                    };
                    self.sched.cluster.set_avail(id, avail);
                }
                known.insert(row.name.clone());
            }
        }
        // A node never registered waits for its daemon before it takes work.
        for i in 0..self.sched.cluster.nodes.len() {
            let name = self.sched.cluster.nodes[i].name.clone();
            if !known.contains(&name) && self.sched.cluster.nodes[i].avail == NodeAvail::Up {
                self.sched.cluster.set_avail(NodeId(i as u32), NodeAvail::Unknown);
            }
            self.nodes[i].down_since = Some(now);
        }
        let (mut pending, mut running) = (0, 0);
        for mut rec in loaded.jobs {
            if let Some(p) = self.sched.cluster.partition_id(&rec.partition) {
                rec.spec.partition = p;
            }
            match rec.state {
                JobState::Pending => {
                    pending += 1;
                    if let Some(d) = rec.dependency.as_deref().and_then(|d| deps::parse(d).ok()) {
                        self.deps.insert(rec.id, d);
                    }
                    if !rec.is_array_meta() {
                        self.sched.handle(CoreEvent::Submit(rec.spec.clone()), now as u64);
                    }
                }
                JobState::Running | JobState::Completing => {
                    running += 1;
                    let mut allocs = rec.allocs.clone();
                    for (a, name) in allocs.iter_mut().zip(&rec.nodes) {
                        let Some(nid) = self.sched.cluster.node_id(name) else {
                            panic!("job {} runs on node {name} that is no longer configured", rec.id);
                        };
                        a.part.node = nid;
                        self.nodes[nid.0 as usize].jobs.insert(rec.id);
                    }
                    rec.allocs = allocs.clone();
                    let start = rec.start_time.unwrap_or(now).max(0) as u64;
                    let preempting = rec.stopping.filter(|s| s.why == StopWhy::Preempt);
                    let running = RunningJob {
                        spec: rec.spec.clone(),
                        allocs,
                        start,
                        end: rec.spec.time_limit_s.map(|l| start + l),
                        backfill_for: Vec::new(),
                        preempt_pending: preempting.is_some(),
                        stopping: rec.service.is_some() && rec.stopping.is_some(),
                        last_checkpoint: rec.last_checkpoint_ack.map(|t| t.max(0) as u64),
                        preempt_deadline: preempting.and_then(|s| s.kill_at).map(|t| t.max(0) as u64),
                    };
                    match rec.service {
                        Some(s) => self.sched.restore_replica(flotilla_core::sched::ServiceId(s), running),
                        None => self.sched.restore_running(running),
                    }
                }
                _ => {}
            }
            if rec.spec.id.0 != rec.id {
                self.core_map.insert(rec.spec.id.0, rec.id);
            }
            if rec.is_array_meta() {
                self.array_metas.insert(rec.id);
            }
            self.jobs.insert(rec.id, rec);
        }
        check_core_invariants(&self.sched);
        info!(next_job_id = self.next_job_id, pending, running, "recovered state");
        Ok(())
    }

    /// The owner loop: runs until `shutdown` turns true or every sender is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Event>, mut shutdown: watch::Receiver<bool>) {
        let mut next_tick = tokio::time::Instant::now();
        let mut next_cycle: Option<tokio::time::Instant> = Some(next_tick);
        let mut last_cycle = tokio::time::Instant::now() - self.opts.debounce;
        let mut last_periodic = last_cycle;
        let mut events = Vec::with_capacity(1024);
        loop {
            let deadline = next_cycle.map_or(next_tick, |c| c.min(next_tick));
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(e) => events.push(e),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => {}
                _ = shutdown.changed() => break,
            }
            while events.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(e) => events.push(e),
                    Err(_) => break,
                }
            }
            let now = wall_now();
            let n_events = events.len() as u64;
            for e in events.drain(..) {
                self.handle(e, now);
            }
            let inst = tokio::time::Instant::now();
            if inst >= next_tick {
                self.tick(now);
                next_tick = inst + self.opts.tick;
            }
            if inst >= last_periodic + self.opts.sched_interval {
                self.sched_dirty = true;
                last_periodic = inst;
                next_cycle = Some(inst);
            }
            if self.sched_dirty && next_cycle.is_none() {
                next_cycle = Some((last_cycle + self.opts.debounce).max(inst));
            }
            if next_cycle.is_some_and(|c| inst >= c) {
                self.schedule(now);
                last_cycle = inst;
                next_cycle = None;
            }
            self.flush(n_events, now);
            self.turns += 1;
        }
        info!("controller owner task stopped");
    }

    /// Handles one event at `now`.
    pub fn handle(&mut self, event: Event, now: i64) {
        match event {
            Event::Rpc {
                req: Request::QueryAcct(q),
                reply,
                ..
            } => {
                *self.stats.rpc.entry("DBD_GET_JOBS_COND").or_default() += 1;
                self.acct_queries.push((q, reply));
            }
            Event::Rpc {
                req: Request::QueryJobs(q),
                reply,
                ..
            } => {
                *self.stats.rpc.entry("REQUEST_JOB_INFO").or_default() += 1;
                let resp = self.query_jobs_encoded(&q);
                self.replies.push((reply, resp));
            }
            Event::Rpc { ident, req, reply } => {
                *self.stats.rpc.entry(req.kind()).or_default() += 1;
                let resp = self.rpc(ident, req, now);
                self.replies.push((reply, resp.into()));
            }
            Event::NodeRegister { conn, reg, tx, reply } => {
                *self.stats.rpc.entry("MESSAGE_NODE_REGISTRATION_STATUS").or_default() += 1;
                let resp = self.node_register(conn, reg, tx, now);
                self.replies.push((reply, resp.into()));
            }
            Event::NodeMsg { conn, node, msg } => self.node_msg(conn, &node, msg, now),
            Event::NodeGone { conn, node } => {
                if let Some(nid) = self.sched.cluster.node_id(&node) {
                    let rt = &mut self.nodes[nid.0 as usize];
                    if rt.sess.as_ref().is_some_and(|s| s.conn == conn) {
                        rt.sess = None;
                        rt.down_since = Some(now);
                        info!(node = %node, "node daemon disconnected");
                    }
                }
            }
        }
    }

    fn rpc(&mut self, ident: Ident, req: Request, now: i64) -> Response {
        match req {
            Request::SubmitJob(s) => self.submit(ident, *s, now),
            Request::CancelJob(c) => self.cancel(ident, c, now),
            Request::HoldRelease(h) => self.hold_release(ident, h),
            Request::Requeue(r) => self.requeue_rpc(ident, r, now),
            Request::UpdateJob(u) => self.update(ident, u),
            Request::QueryQueue(q) => self.query_queue(&q),
            Request::QueryNodes(q) => Response::Nodes(self.query_nodes(&q)),
            Request::QueryPartitions => Response::Partitions(self.query_partitions()),
            Request::Stats => Response::Stats(self.stats(now)),
            Request::Ping => Response::Pong,
            Request::UpdateNode(u) => self.update_node(ident, u, now),
            Request::CreateStep(r) => self.create_step(ident, *r, now),
            Request::StepComplete(c) => self.step_complete(ident, c, now),
            Request::QuerySteps(q) => Response::Steps(self.query_steps(&q)),
            Request::ReleaseAllocation(r) => self.release_allocation(ident, r, now),
            Request::QueryTurns => Response::Turns { turns: self.turns, cycles: self.stats.cycles, cycle_due: self.sched_dirty },
            r @ (Request::ServiceCreate(_)
            | Request::ServiceScale { .. }
            | Request::ServiceDelete { .. }
            | Request::QueryServices { .. }
            | Request::QueryAlerts) => self.service_rpc(ident, r, now),
            // Job and accounting queries are answered by `handle` (encoded, or after the
            // commit); credentials and registrations by the connection task.
            Request::QueryJobs(_) | Request::IssueCredential | Request::Register(_) | Request::QueryAcct(_) => {
                Response::Error(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR))
            }
        }
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_job_id;
        self.next_job_id += 1;
        self.batch.next_job_id = Some(self.next_job_id);
        id
    }

    fn dirty(&mut self, id: u64) {
        self.batch.jobs.insert(id);
    }

    fn submit(&mut self, ident: Ident, s: SubmitJob, now: i64) -> Response {
        if !ident.admin && s.uid != ident.uid {
            warn!(uid = ident.uid, claimed = s.uid, "submission for another uid refused");
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        // MaxJobCount counts every job in memory, finished ones until MinJobAge purges them.
        if self.jobs.len() as u64 >= self.opts.max_job_count {
            return Response::Error(SlurmError::new(ESLURM_MAX_JOB_COUNT));
        }
        match admission::admit(&s, &self.sched.cluster, &self.opts.admission, now) {
            Err(Reject::BeforeId(e)) => Response::Error(e),
            Err(Reject::AfterId { error, failed }) => {
                let id = self.take_id();
                if let Some(mut f) = failed {
                    f.id = id;
                    f.spec.id = JobId(id);
                    crate::acct::failed_at_submit(&mut f, now);
                    self.jobs.insert(id, *f);
                    self.dirty(id);
                    self.batch.acct.insert(id);
                    self.stats.failed += 1;
                }
                info!(job = id, code = error.code, "submission refused after id: {}", error.text);
                Response::Error(error)
            }
            Ok(a) => {
                let id = self.take_id();
                let mut rec = a.record;
                rec.id = id;
                rec.spec.id = JobId(id);
                if s.test_only {
                    return self.test_only(id, &rec, now);
                }
                let env = serde_json::to_string(&s.environment).unwrap_or_else(|_| "[]".into());
                self.batch.scripts.push((id, s.script, env));
                if let Some((tasks, throttle)) = a.array {
                    rec.array_job_id = Some(id);
                    rec.array_pending = tasks;
                    rec.array_max_running = throttle;
                    self.array_metas.insert(id);
                } else {
                    self.sched.handle(CoreEvent::Submit(rec.spec.clone()), now as u64);
                }
                // A held job (not an array, no dependency) cannot change what a cycle decides:
                // no event-triggered cycle for it (its hold shows at once; the periodic cycle
                // refreshes its priority). `sbatch --hold` floods stay cheap (issue #6).
                let inert = rec.spec.held.is_some() && !rec.is_array_meta() && a.dependency.is_none();
                if let Some(d) = a.dependency {
                    self.deps.insert(id, d);
                }
                debug!(job = id, user = %rec.user, "job submitted");
                self.jobs.insert(id, rec);
                self.dirty(id);
                self.batch.acct.insert(id);
                self.sched_dirty |= !inert;
                self.stats.submitted += 1;
                Response::Submitted(Submitted { job_id: id })
            }
        }
    }

    fn held_by_reservations(&self) -> Vec<GpuMask> {
        let mut held = vec![GpuMask::EMPTY; self.sched.cluster.nodes.len()];
        for r in self.sched.reservations() {
            for (n, g) in &r.gpus {
                held[n.0 as usize] = held[n.0 as usize].union(*g);
            }
        }
        held
    }

    fn test_only(&self, id: u64, rec: &JobRecord, now: i64) -> Response {
        let held = self.held_by_reservations();
        let blocked = |n: NodeId| held[n.0 as usize];
        let ctx = PlaceCtx {
            cluster: &self.sched.cluster,
            blocked: &blocked,
            tie_rank: None,
            partition: rec.spec.partition,
            job_end: None,
            busy_until: None,
        };
        let (start, parts) = match placement::place(&ctx, self.test_placement.as_ref(), &rec.spec.request) {
            Ok(parts) => (now, parts),
            Err(_) => self.will_run(rec, &blocked, now),
        };
        let names: Vec<String> = parts.iter().map(|p| self.sched.cluster.node(p.node).name.clone()).collect();
        let cpus = if parts.is_empty() {
            (rec.spec.request.cpu_milli_per_node / 1000) as u32 * rec.num_nodes.max(1)
        } else {
            parts.iter().map(|p| (p.cpu_milli / 1000) as u32).sum()
        };
        Response::TestOnly(TestOnly {
            job_id: id,
            start_time: start,
            cpus,
            nodes: compress_hostlist(&names),
            partition: rec.partition.clone(),
        })
    }

    /// When and where `rec` could start if nothing new arrived (Slurm's will-run test behind
    /// `sbatch --test-only`): running jobs end at their time limits, earliest first, each
    /// giving its resources back, until the job fits. Without a fit (unlimited jobs in the
    /// way) the latest known end, and no nodes.
    fn will_run(&self, rec: &JobRecord, blocked: &dyn Fn(NodeId) -> GpuMask, now: i64) -> (i64, Vec<flotilla_core::cluster::NodeAlloc>) {
        let mut ends: Vec<(u64, &RunningJob)> = self.sched.running().values().filter_map(|r| Some((r.end?, r))).collect();
        ends.sort_by_key(|(e, _)| *e);
        let mut cluster = self.sched.cluster.clone();
        for (end, r) in &ends {
            for a in &r.allocs {
                cluster.give_back(&a.part);
            }
            let ctx = PlaceCtx {
                cluster: &cluster,
                blocked,
                tie_rank: None,
                partition: rec.spec.partition,
                job_end: None,
                busy_until: None,
            };
            if let Ok(parts) = placement::place(&ctx, self.test_placement.as_ref(), &rec.spec.request) {
                return ((*end as i64).max(now), parts);
            }
        }
        (ends.last().map_or(now, |(e, _)| *e as i64).max(now), Vec::new())
    }

    /// Jobs a reference names: record ids, and pending tasks of array records.
    fn resolve(&self, r: &JobRef) -> Vec<Target> {
        let mut out = Vec::new();
        let Some(rec) = self.jobs.get(&r.job_id) else {
            // A started task named by its array id and index only.
            if let Some(ts) = &r.tasks {
                for rec in self.jobs.values() {
                    if rec.array_job_id == Some(r.job_id) && rec.array_task_id.is_some_and(|t| ts.contains(&t)) {
                        out.push(Target::Job(rec.id));
                    }
                }
            }
            return out;
        };
        let is_array = rec.array_job_id == Some(r.job_id);
        match (&r.tasks, is_array) {
            (None, false) => out.push(Target::Job(rec.id)),
            (None, true) => {
                for j in self.jobs.values() {
                    if j.array_job_id == Some(r.job_id) {
                        out.push(Target::Job(j.id));
                    }
                }
            }
            (Some(_), false) => {}
            (Some(ts), true) => {
                let mut pend = Vec::new();
                for &t in ts {
                    if let Some(j) = self
                        .jobs
                        .values()
                        .find(|j| j.array_job_id == Some(r.job_id) && j.array_task_id == Some(t) && j.array_pending.is_empty())
                    {
                        out.push(Target::Job(j.id));
                    } else if rec.array_pending.contains(&t) && rec.state == JobState::Pending {
                        pend.push(t);
                    }
                }
                if !pend.is_empty() {
                    out.push(Target::Tasks(r.job_id, pend));
                }
            }
        }
        out
    }

    fn owner_ok(&self, ident: Ident, id: u64) -> bool {
        ident.admin || self.jobs.get(&id).is_some_and(|r| r.uid == ident.uid)
    }

    fn targets(&self, jobs: &[JobRef], filter: &JobFilter) -> Vec<(JobRef, Vec<Target>)> {
        if jobs.is_empty() {
            return self
                .jobs
                .values()
                .filter(|r| !r.state.is_finished() && matches_filter(r, filter, &self.sched))
                .map(|r| (JobRef::id(r.id), vec![Target::Job(r.id)]))
                .collect();
        }
        jobs.iter()
            .map(|r| {
                let t = self
                    .resolve(r)
                    .into_iter()
                    .filter(|t| self.jobs.get(&t.id()).is_some_and(|rec| matches_filter(rec, filter, &self.sched)))
                    .collect();
                (r.clone(), t)
            })
            .collect()
    }

    fn cancel(&mut self, ident: Ident, c: CancelJob, now: i64) -> Response {
        let mut results = Vec::new();
        for (jref, targets) in self.targets(&c.jobs, &c.filter) {
            let mut error = None;
            if targets.is_empty() {
                error = Some(SlurmError::new(ESLURM_INVALID_JOB_ID));
            }
            for t in targets {
                if !self.owner_ok(ident, t.id()) {
                    warn!(job = t.id(), uid = ident.uid, "cancel of another user's job refused");
                    error.get_or_insert(SlurmError::new(ESLURM_ACCESS_DENIED));
                    continue;
                }
                let r = match c.signal {
                    Some(sig) => self.signal_target(&t, sig, c.batch_only, c.full),
                    None => {
                        self.cancel_target(&t, ident.uid, now);
                        Ok(())
                    }
                };
                if let Err(e) = r {
                    error.get_or_insert(e);
                }
            }
            results.push(JobResult { job: jref, error });
        }
        Response::JobResults(results)
    }

    /// `scancel --signal`: `-b` the batch shell only, `-f` the shell and every step, neither
    /// the steps only (Slurm 22.05, checked live: the batch shell of a job signalled with
    /// `scancel --signal=USR1` keeps running).
    fn signal_target(&mut self, t: &Target, sig: i32, batch_only: bool, full: bool) -> Result<(), SlurmError> {
        let Target::Job(id) = t else {
            return Err(SlurmError::new(ESLURM_JOB_PENDING));
        };
        let rec = &self.jobs[id];
        match rec.state {
            JobState::Pending => Err(SlurmError::new(ESLURM_JOB_PENDING)),
            JobState::Running => {
                let nodes: Vec<String> = if batch_only {
                    rec.nodes.iter().take(1).cloned().collect()
                } else {
                    rec.nodes.clone()
                };
                for n in nodes {
                    let m = if batch_only || full {
                        CtlToNode::Signal { job_id: *id, signal: sig, batch_only }
                    } else {
                        CtlToNode::SignalSteps { job_id: *id, signal: sig }
                    };
                    self.send(&n, m);
                }
                Ok(())
            }
            _ => Err(SlurmError::new(ESLURM_ALREADY_DONE)),
        }
    }

    fn send(&mut self, node: &str, msg: CtlToNode) {
        if let Some(nid) = self.sched.cluster.node_id(node) {
            self.node_out.push((nid.0 as usize, Outgoing::Msg(msg)));
        }
    }

    fn cancel_target(&mut self, t: &Target, by: u32, now: i64) {
        if let Some(rec) = self.jobs.get_mut(&t.id()) {
            rec.acct.cancelled_by = Some(by);
        }
        match t {
            Target::Tasks(aid, tasks) => {
                let set: BTreeSet<u32> = tasks.iter().copied().collect();
                for &task in tasks {
                    if self.in_core_tasks.get_mut(aid).is_some_and(|s| s.remove(&task)) {
                        self.sched.handle(CoreEvent::Cancel(JobId(prov_id(*aid, task))), now as u64);
                    }
                }
                let rec = self.jobs.get_mut(aid).expect("resolved");
                rec.array_pending.retain(|t| !set.contains(t));
                if rec.array_pending.is_empty() {
                    rec.state = JobState::Cancelled;
                    rec.end_time = Some(now);
                    self.batch.acct.insert(*aid);
                    self.stats.cancelled += 1;
                }
                self.dirty(*aid);
                self.sched_dirty = true;
            }
            Target::Job(id) => {
                let id = *id;
                let state = self.jobs[&id].state;
                match state {
                    JobState::Pending => {
                        // A cancelled pending job keeps the reason it was waiting for, as in
                        // Slurm (`squeue -t all`: `62 later CANCELLED BeginTime`).
                        let last = self.job_view(&self.jobs[&id], FieldSet::of(&[flotilla_proto::JobField::Reason])).reason.into_string();
                        let rec = self.jobs.get_mut(&id).expect("resolved");
                        if last != "None" {
                            rec.reason = Some(last);
                        }
                        if rec.is_array_meta() {
                            for task in self.in_core_tasks.remove(&id).unwrap_or_default() {
                                self.sched.handle(CoreEvent::Cancel(JobId(prov_id(id, task))), now as u64);
                            }
                        } else {
                            self.sched.handle(CoreEvent::Cancel(rec.spec.id), now as u64);
                        }
                        let rec = self.jobs.get_mut(&id).expect("resolved");
                        rec.state = JobState::Cancelled;
                        rec.end_time = Some(now);
                        self.deps.remove(&id);
                        self.batch.acct.insert(id);
                        self.dirty(id);
                        self.stats.cancelled += 1;
                        self.sched_dirty = true;
                        info!(job = id, "pending job cancelled");
                    }
                    JobState::Running if self.jobs[&id].stopping.is_none() => {
                        self.start_stop(id, StopWhy::Cancel, now);
                    }
                    // Cancelled while it is being stopped to be requeued (`scontrol requeue`):
                    // it ends cancelled, not pending again (Slurm 22.05 likewise does not
                    // requeue a job cancelled before its requeue completed). The signals
                    // already sent stand; only how the stop ends changes.
                    JobState::Running | JobState::Completing
                        if self.jobs[&id].stopping.is_some_and(|s| matches!(s.why, StopWhy::Requeue { .. })) =>
                    {
                        let rec = self.jobs.get_mut(&id).expect("resolved");
                        if let Some(s) = rec.stopping.as_mut() {
                            s.why = StopWhy::Cancel;
                        }
                        if rec.end_state == Some(JobState::Pending) {
                            rec.end_state = Some(JobState::Cancelled);
                        }
                        self.dirty(id);
                        info!(job = id, "job being stopped for a requeue cancelled: it ends cancelled");
                    }
                    _ => {}
                }
            }
        }
    }

    fn start_stop(&mut self, id: u64, why: StopWhy, now: i64) {
        let rec = self.jobs.get_mut(&id).expect("job exists");
        rec.stopping = Some(Stopping {
            why,
            term_at: now,
            kill_sent: false,
            kill_at: None,
        });
        let _span = info_span!("job", job = id).entered();
        info!(?why, "stopping running job: SIGTERM, SIGKILL after KillWait");
        let nodes = rec.nodes.clone();
        self.dirty(id);
        let cause = crate::job::stop_cause(why);
        for n in nodes {
            self.send(&n, CtlToNode::StopNotice { job_id: id, at: now, cause });
            self.send(&n, CtlToNode::Signal {
                job_id: id,
                signal: SIGTERM,
                batch_only: false,
            });
        }
    }

    /// A run ends in a requeue: its accounting record becomes `run_state` (`REQUEUED` or
    /// `PREEMPTED`; see [`crate::acct`]).
    fn acct_requeued(&mut self, id: u64, now: i64, step_state: Option<&str>, run_state: &str) {
        let (row, step) = crate::acct::requeued_rows(&self.jobs[&id], now, step_state, run_state);
        self.batch.acct_rows.push(row);
        self.batch.steps.remove(&id);
        self.batch.step_rows.extend(step);
    }

    fn push_core_update(&mut self, id: u64) {
        let rec = &self.jobs[&id];
        if rec.state != JobState::Pending {
            return;
        }
        if rec.is_array_meta() {
            let tasks: Vec<u32> = self.in_core_tasks.get(&id).map(|s| s.iter().copied().collect()).unwrap_or_default();
            for t in tasks {
                let mut sp = self.jobs[&id].spec.clone();
                sp.id = JobId(prov_id(id, t));
                self.sched.handle(CoreEvent::Update(sp), 0);
            }
        } else {
            let sp = rec.spec.clone();
            self.sched.handle(CoreEvent::Update(sp), 0);
        }
        self.sched_dirty = true;
    }

    fn hold_release(&mut self, ident: Ident, h: HoldRelease) -> Response {
        let mut results = Vec::new();
        for (jref, targets) in self.targets(&h.jobs, &JobFilter::default()) {
            let mut error = None;
            if targets.is_empty() {
                error = Some(SlurmError::new(ESLURM_INVALID_JOB_ID));
            }
            for t in targets {
                let id = t.id();
                if !self.owner_ok(ident, id) {
                    warn!(job = id, uid = ident.uid, "hold/release of another user's job refused");
                    error.get_or_insert(SlurmError::new(ESLURM_USER_ID_MISSING));
                    continue;
                }
                let rec = self.jobs.get_mut(&id).expect("resolved");
                if rec.state != JobState::Pending {
                    error.get_or_insert(SlurmError::new(ESLURM_JOB_NOT_PENDING));
                    continue;
                }
                if rec.reason.as_deref() == Some(REQUEUE_HOLD_REASON) {
                    // A new hold shows as such; a release shows what the job waits for next.
                    rec.reason = None;
                }
                match h.op {
                    HoldOp::Hold => rec.spec.held = Some(if ident.admin { HoldKind::Admin } else { HoldKind::User }),
                    HoldOp::UserHold => rec.spec.held = Some(HoldKind::User),
                    HoldOp::Release => {
                        if rec.spec.held == Some(HoldKind::Admin) && !ident.admin {
                            error.get_or_insert(SlurmError::new(ESLURM_ACCESS_DENIED));
                            continue;
                        }
                        rec.spec.held = None;
                    }
                }
                self.dirty(id);
                self.push_core_update(id);
            }
            results.push(JobResult { job: jref, error });
        }
        Response::JobResults(results)
    }

    fn requeue_rpc(&mut self, ident: Ident, r: RequeueJob, now: i64) -> Response {
        let mut results = Vec::new();
        for (jref, targets) in self.targets(&r.jobs, &JobFilter::default()) {
            let mut error = None;
            if targets.is_empty() {
                error = Some(SlurmError::new(ESLURM_INVALID_JOB_ID));
            }
            for t in targets {
                let id = t.id();
                if !self.owner_ok(ident, id) {
                    error.get_or_insert(SlurmError::new(ESLURM_ACCESS_DENIED));
                    continue;
                }
                if self.jobs[&id].service.is_some() {
                    // A replica belongs to its service: `sdeploy` scales it, `scancel` replaces it.
                    error.get_or_insert(SlurmError::new(ESLURM_NOT_SUPPORTED));
                    continue;
                }
                let state = self.jobs[&id].state;
                match state {
                    JobState::Pending => {
                        if r.hold {
                            error.get_or_insert(SlurmError::new(ESLURM_JOB_PENDING));
                        } else if !self.jobs[&id].is_array_meta() {
                            let rec = self.jobs.get_mut(&id).expect("resolved");
                            rec.spec.begin_time = Some(requeue_begin(now, self.opts.requeue_holdoff_s));
                            self.dirty(id);
                            self.push_core_update(id);
                            self.sched_dirty = true;
                        }
                    }
                    JobState::Running => {
                        if self.jobs[&id].stopping.is_none() {
                            let rec = self.jobs.get_mut(&id).expect("resolved");
                            rec.spec.begin_time = Some(requeue_begin(now, self.opts.requeue_holdoff_s));
                            self.start_stop(id, StopWhy::Requeue { hold: r.hold }, now);
                        }
                    }
                    JobState::Completing => {
                        error.get_or_insert(SlurmError::new(ESLURM_TRANSITION_STATE_NO_UPDATE));
                    }
                    _ if self.jobs[&id].is_array_meta() => {
                        error.get_or_insert(SlurmError::new(ESLURM_JOB_FINISHED));
                    }
                    _ => {
                        let rec = self.jobs.get_mut(&id).expect("resolved");
                        reset_for_requeue(rec, r.hold);
                        let spec = rec.spec.clone();
                        self.sched.handle(CoreEvent::Submit(spec), now as u64);
                        self.dirty(id);
                        self.stats.requeued += 1;
                        self.sched_dirty = true;
                    }
                }
            }
            results.push(JobResult { job: jref, error });
        }
        Response::JobResults(results)
    }

    fn update(&mut self, ident: Ident, u: UpdateJob) -> Response {
        let targets = self.resolve(&u.job);
        if targets.is_empty() {
            return Response::Error(SlurmError::new(ESLURM_INVALID_JOB_ID));
        }
        for t in &targets {
            if !self.owner_ok(ident, t.id()) {
                warn!(job = t.id(), uid = ident.uid, "update of another user's job refused");
                return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
            }
        }
        let ids: BTreeSet<u64> = targets.iter().map(Target::id).collect();
        let mut updated = Vec::new();
        for id in ids {
            let mut rec = self.jobs[&id].clone();
            let mut new_dep: Option<Option<Dependency>> = None;
            if let Err(e) = apply_changes(&mut rec, &u.changes, ident, &self.sched, &mut new_dep) {
                return Response::Error(e);
            }
            updated.push((id, rec, new_dep));
        }
        for (id, rec, new_dep) in updated {
            self.jobs.insert(id, rec);
            match new_dep {
                Some(Some(d)) => {
                    self.deps.insert(id, d);
                }
                Some(None) => {
                    self.deps.remove(&id);
                }
                None => {}
            }
            self.dirty(id);
            self.push_core_update(id);
        }
        Response::JobResults(vec![JobResult { job: u.job, error: None }])
    }

    /// `scontrol update NodeName=`: drain, resume or down nodes (admins only, as Slurm).
    fn update_node(&mut self, ident: Ident, u: flotilla_proto::UpdateNode, now: i64) -> Response {
        if !ident.admin {
            warn!(uid = ident.uid, "node update by a non-admin refused");
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        let mut ids = Vec::new();
        for n in &u.names {
            match self.sched.cluster.node_id(n) {
                Some(id) => ids.push(id),
                None => return Response::Error(SlurmError::new(ESLURM_INVALID_NODE_NAME)),
            }
        }
        let reason = u.reason.clone().unwrap_or_default();
        let avail = match u.state.as_deref().map(str::to_ascii_uppercase).as_deref() {
            None => return Response::JobResults(Vec::new()),
            Some("DRAIN") => NodeAvail::Drain { reason },
            Some("DOWN") => NodeAvail::Down { reason },
            Some("RESUME" | "IDLE" | "UNDRAIN") => NodeAvail::Up,
            Some(_) => return Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED)),
        };
        for id in ids {
            info!(node = %self.sched.cluster.node(id).name, ?avail, "node availability updated by an admin");
            let d = self.sched.handle(CoreEvent::NodeAvail { node: id, avail: avail.clone() }, now as u64);
            self.apply(d, now);
            self.save_node(id);
        }
        self.sched_dirty = true;
        Response::JobResults(Vec::new())
    }

    /// A job as queries show it, borrowing from its record and the scheduler: `squeue` over
    /// 10,000 jobs encodes views without cloning a string of theirs. Only the fields in `want`
    /// are filled (the others default): the rest of the record is not even read, and a record
    /// is a kilobyte of memory that is rarely in cache.
    fn job_view<'a>(&'a self, rec: &'a JobRecord, want: FieldSet) -> JobView<'a> {
        use flotilla_proto::JobField as F;
        macro_rules! pick {
            ($f:ident, $e:expr) => {
                if want.has(F::$f) {
                    $e
                } else {
                    Default::default()
                }
            };
        }
        let (mut reason, mut detail, mut expected, mut sched_nodes, mut priority) = (Str::b("None"), None, None, Str::default(), 0);
        let pending_fields = [F::Reason, F::ReasonDetail, F::SchedNodes, F::Priority, F::StartTime, F::EndTime];
        if rec.state == JobState::Pending && want.any(&pending_fields) {
            let core_id = if rec.is_array_meta() {
                self.in_core_tasks.get(&rec.id).and_then(|s| s.iter().next()).map(|&t| prov_id(rec.id, t))
            } else {
                Some(rec.spec.id.0)
            };
            match core_id.and_then(|c| self.sched.pending_state(JobId(c))) {
                Some((info, prio)) => {
                    reason = match &info.slurm_detail {
                        // Slurm's `ReqNodeNotAvail, UnavailableNodes:gpu04`.
                        Some(d) if !d.is_empty() => Str::from(format!("{}, {d}", info.reason.as_str())),
                        _ => Str::b(info.reason.as_str()),
                    };
                    detail = info.detail.as_deref().map(Str::b);
                    expected = info.expected_start.filter(|&t| t != u64::MAX).map(|t| t as i64);
                    if !info.sched_nodes.is_empty() && want.has(F::SchedNodes) {
                        let names: Vec<String> = info.sched_nodes.iter().map(|n| self.sched.cluster.node(*n).name.clone()).collect();
                        sched_nodes = Str::from(compress_hostlist(&names));
                    }
                    priority = prio;
                }
                None if rec.is_array_meta() => reason = Str::b("JobArrayTaskLimit"),
                None => {}
            }
        }
        if rec.state == JobState::Pending && reason == "None" && want.has(F::Reason) {
            // Not evaluated by a cycle yet: the reasons known without one (a hold is below).
            if rec.spec.dependency_pending {
                reason = Str::b("Dependency");
            } else if rec.spec.begin_time.is_some_and(|b| b as i64 > wall_now()) {
                reason = Str::b("BeginTime");
            }
        }
        if rec.state == JobState::Pending {
            // A hold shows at once, as in Slurm, not after the next scheduling cycle.
            match rec.spec.held {
                Some(HoldKind::User) => reason = Str::b("JobHeldUser"),
                Some(HoldKind::Admin) => reason = Str::b("JobHeldAdmin"),
                None => {}
            }
        }
        if let Some(r) = &rec.reason {
            reason = Str::b(r);
        }
        // A pending job shows when it is expected to start; without an estimate, its begin
        // time (`--begin`, a requeue's hold-off), as Slurm sets `start_time` to it. Either
        // way the end shown is that start plus the time limit.
        let shown_start = rec.start_time.or(expected).or_else(|| {
            (rec.state == JobState::Pending).then_some(rec.spec.begin_time.map(|b| b as i64)).flatten()
        });
        let gpu_alloc = pick!(GpuAlloc, rec.allocs.iter().zip(&rec.nodes).map(|(a, n)| (Str::b(n), a.part.gpus.0)).collect());
        let num_cpus = pick!(
            NumCpus,
            if rec.allocs.is_empty() {
                (rec.spec.request.cpu_milli_per_node / 1000) as u32 * rec.num_nodes.max(1)
            } else {
                rec.allocs.iter().map(|a| (a.part.cpu_milli / 1000) as u32).sum()
            }
        );
        JobView {
            job_id: pick!(JobId, rec.id),
            array_job_id: pick!(ArrayJobId, rec.array_job_id),
            array_task_id: pick!(ArrayTaskId, if rec.is_array_meta() { None } else { rec.array_task_id }),
            array_task_str: pick!(ArrayTaskStr, rec.array_task_str().map(Str::from)),
            name: pick!(Name, Str::b(&rec.name)),
            user: pick!(User, Str::b(&rec.user)),
            uid: pick!(Uid, rec.uid),
            gid: pick!(Gid, rec.gid),
            account: pick!(Account, Str::b(&rec.account)),
            partition: pick!(Partition, Str::b(&rec.partition)),
            qos: pick!(Qos, Str::b(&rec.qos)),
            state: pick!(State, Some(rec.state.to_wire())),
            reason: pick!(Reason, reason),
            reason_detail: pick!(ReasonDetail, detail),
            priority: pick!(Priority, priority),
            nice: pick!(Nice, rec.spec.nice),
            submit_time: pick!(SubmitTime, rec.submit_time),
            eligible_time: pick!(EligibleTime, rec.spec.begin_time.map(|b| b as i64)),
            start_time: pick!(StartTime, shown_start),
            end_time: pick!(EndTime, rec.end_time.or_else(|| shown_start.zip(rec.time_limit_min).map(|(s, l)| s + i64::from(l) * 60))),
            time_limit: pick!(TimeLimit, Some(rec.time_limit_min.map_or(TimeLimitWire::Unlimited, TimeLimitWire::Minutes))),
            nodes: pick!(Nodes, if rec.nodes.is_empty() { Str::default() } else { Str::from(compress_hostlist(&rec.nodes)) }),
            sched_nodes: pick!(SchedNodes, sched_nodes),
            num_nodes: pick!(NumNodes, if rec.nodes.is_empty() { rec.num_nodes } else { rec.nodes.len() as u32 }),
            num_cpus,
            num_tasks: pick!(NumTasks, rec.ntasks),
            cpus_per_task: pick!(CpusPerTask, rec.cpus_per_task),
            mem_per_node_mib: pick!(MemPerNodeMib, rec.mem_per_node_mib),
            gpus: pick!(Gpus, rec.gpus),
            gres: pick!(Gres, rec
                .gres
                .iter()
                .map(|(n, t, c)| flotilla_proto::GresView {
                    name: Str::b(n),
                    gpu_type: t.as_deref().map(Str::b),
                    count: *c,
                })
                .collect()),
            gpu_alloc,
            work_dir: pick!(WorkDir, Str::b(&rec.work_dir)),
            stdout: pick!(Stdout, rec.stdout.as_deref().map(Str::b)),
            stderr: pick!(Stderr, rec.stderr.as_deref().map(Str::b)),
            dependency: pick!(Dependency, rec.dependency.as_deref().map(Str::b)),
            exit_code: pick!(ExitCode, rec.exit_code),
            exit_signal: pick!(ExitSignal, rec.exit_signal),
            restarts: pick!(Restarts, rec.restarts),
            requeue: pick!(Requeue, rec.requeue),
            batch_host: pick!(BatchHost, rec.nodes.first().map_or_else(Str::default, |n| Str::b(n))),
            topology: pick!(Topology, Str::b(&rec.topology)),
            preemptible: pick!(Preemptible, rec.spec.preemptible),
            held: pick!(Held, rec.spec.held.is_some()),
            exclusive: pick!(Exclusive, rec.exclusive),
            required_nodes: pick!(RequiredNodes, rec.required_nodes.iter().map(|s| Str::b(s)).collect()),
            excluded_nodes: pick!(ExcludedNodes, rec.excluded_nodes.iter().map(|s| Str::b(s)).collect()),
            comment: pick!(Comment, rec.comment.as_deref().map(Str::b)),
            preempt_count: pick!(PreemptCount, rec.spec.preempt_count),
            last_checkpoint_ack: pick!(LastCheckpointAck, rec.last_checkpoint_ack),
            borrowed: pick!(Borrowed, self
                .sched
                .running()
                .get(&rec.spec.id)
                .is_some_and(|r| r.allocs.iter().any(|a| a.borrowed))),
            service_id: pick!(ServiceId, rec.service),
            command: pick!(Command, rec.command.as_deref().map(Str::b)),
            tres_per_job: pick!(TresPerJob, rec.tres_per_job.as_deref().map(Str::b)),
            tres_per_task: pick!(TresPerTask, rec.tres_per_task.as_deref().map(Str::b)),
            mem_per_cpu_mib: pick!(MemPerCpuMib, rec.mem_per_cpu_mib),
        }
    }

    /// The records a job query selects, in job-id order.
    fn query_matches<'a>(&'a self, q: &'a JobQuery) -> impl Iterator<Item = &'a JobRecord> + 'a {
        self.jobs
            .values()
            .filter(|r| q.include_finished || !r.state.is_finished())
            .filter(|r| q.jobs.is_empty() || q.jobs.iter().any(|j| ref_matches(j, r)))
            .filter(|r| matches_filter(r, &q.filter, &self.sched))
    }

    /// `squeue`'s query: the fields asked for of each job `q.query` selects, encoded from
    /// views of the records.
    fn query_queue(&self, q: &flotilla_proto::QueueQuery) -> Response {
        let want = FieldSet::of(&q.fields);
        match flotilla_proto::QueueRows::encode(&q.fields, self.query_matches(&q.query).map(|r| self.job_view(r, want))) {
            Ok(rows) => Response::Queue(rows),
            Err(e) => {
                error!("cannot encode a queue query's answer: {e}");
                Response::Error(SlurmError::new(ESLURM_INTERNAL))
            }
        }
    }

    /// `Response::Jobs` for `q`, encoded straight from views of the records.
    fn query_jobs_encoded(&self, q: &JobQuery) -> Reply {
        let recs: Vec<&JobRecord> = self.query_matches(q).collect();
        match flotilla_proto::jobview::encode_jobs_response(recs.iter().map(|r| self.job_view(r, FieldSet::ALL))) {
            Ok(bytes) => Reply::Encoded(bytes),
            Err(e) => {
                error!("cannot encode a job query's answer: {e}");
                Reply::Msg(Response::Error(SlurmError::new(ESLURM_INTERNAL)))
            }
        }
    }

    fn query_nodes(&self, q: &NodeQuery) -> Vec<NodeInfo> {
        let c = &self.sched.cluster;
        c.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| q.names.is_empty() || q.names.contains(&n.name))
            .map(|(i, n)| {
                let used_gpus = GpuMask::all(n.gpus).minus(n.free_gpus);
                let busy = n.free_cpu_milli < n.cpu_milli || !used_gpus.is_empty();
                // Slurm (cons_tres): ALLOCATED when every CPU is allocated, MIXED when some are
                // or any GPU is (goldens 0200-0204: all 8 GPUs and 2 of 64 CPUs in use: mixed).
                let full = n.free_cpu_milli == 0;
                let (state, reason) = match &n.avail {
                    NodeAvail::Down { reason } => ("DOWN".to_string(), Some(reason.clone())),
                    NodeAvail::Drain { reason } | NodeAvail::Quarantined { reason } => {
                        (if busy { "DRAINING" } else { "DRAINED" }.to_string(), Some(reason.clone()))
                    }
                    NodeAvail::Unknown => ("UNKNOWN".to_string(), None),
                    NodeAvail::Up => ((if full {
                        "ALLOCATED"
                    } else if busy {
                        "MIXED"
                    } else {
                        "IDLE"
                    })
                    .to_string(), None),
                };
                NodeInfo {
                    name: n.name.clone(),
                    state,
                    not_responding: self.nodes[i].sess.is_none(),
                    reason,
                    cpus: (n.cpu_milli / 1000) as u32,
                    cpus_alloc: ((n.cpu_milli - n.free_cpu_milli) / 1000) as u32,
                    mem_mib: n.mem_mib,
                    mem_alloc_mib: n.mem_mib - n.free_mem_mib,
                    gpus: n.gpus,
                    gpu_type: n.gpu_type.clone(),
                    gpu_alloc_mask: used_gpus.0,
                    partitions: n.partitions.iter().map(|p| c.partitions[p.0 as usize].name.clone()).collect(),
                    pod: c.pods[n.pod.0 as usize].name.clone(),
                    boot_epoch: n.boot_epoch,
                }
            })
            .collect()
    }

    fn query_partitions(&self) -> Vec<PartitionInfo> {
        let c = &self.sched.cluster;
        c.partitions
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let names: Vec<String> = p.nodes.iter().map(|n| c.node(*n).name.clone()).collect();
                PartitionInfo {
                    name: p.name.clone(),
                    nodes: compress_hostlist(&names),
                    default: p.default,
                    max_time_min: p.max_time_min,
                    default_time_min: p.default_time_min,
                    up: p.up,
                    total_nodes: p.nodes.len() as u32,
                    total_cpus: p.nodes.iter().map(|n| (c.node(*n).cpu_milli / 1000) as u32).sum(),
                    total_gpus: p.nodes.iter().map(|n| c.node(*n).gpus).sum(),
                    default_topology: p.default_topology.as_str().to_string(),
                    largest_placeable: Some(self.largest_placeable_of(i)),
                }
            })
            .collect()
    }

    fn stats(&self, now: i64) -> Stats {
        let s = &self.stats;
        Stats {
            started_at: self.started_at,
            now,
            cycles: s.cycles,
            last_cycle_us: s.last_cycle_us,
            mean_cycle_us: s.cycle_us_total / s.cycles.max(1),
            max_cycle_us: s.max_cycle_us,
            jobs_submitted: s.submitted,
            jobs_started: s.started,
            jobs_completed: s.completed,
            jobs_failed: s.failed,
            jobs_cancelled: s.cancelled,
            jobs_requeued: s.requeued,
            jobs_pending: self.jobs.values().filter(|j| j.state == JobState::Pending).count() as u64,
            jobs_running: self.jobs.values().filter(|j| j.state == JobState::Running).count() as u64,
            db_commits: s.commits,
            mean_commit_us: s.commit_us_total / s.commits.max(1),
            mean_batch: s.batch_events_total / s.commits.max(1),
            rpc_counts: s.rpc.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            auth_failures: self.auth_failures.load(Ordering::Relaxed),
            nodes_connected: self.nodes.iter().filter(|n| n.sess.is_some()).count() as u32,
        }
    }

    // ---- node sessions and the reconciler ----

    fn node_register(&mut self, conn: u64, reg: Register, tx: mpsc::UnboundedSender<CtlToNode>, now: i64) -> Response {
        let Some(nid) = self.sched.cluster.node_id(&reg.node) else {
            warn!(node = %reg.node, "registration of an unknown node refused");
            return Response::Error(SlurmError::new(ESLURM_INVALID_NODE_NAME));
        };
        let _span = info_span!("node", node = %reg.node).entered();
        let i = nid.0 as usize;
        self.nodes[i].sess = Some(NodeSess { conn, tx });
        self.nodes[i].down_since = None;
        if self.nodes[i].marked_down {
            self.nodes[i].marked_down = false;
            let ds = self.sched.handle(CoreEvent::NodeAvail { node: nid, avail: NodeAvail::Up }, now as u64);
            self.apply(ds, now);
        }
        let old = self.sched.cluster.node(nid).boot_epoch;
        let ds = self.sched.handle(
            CoreEvent::NodeRegistered {
                node: nid,
                boot_epoch: reg.boot_epoch,
            },
            now as u64,
        );
        if old != reg.boot_epoch {
            info!(old, new = reg.boot_epoch, requeued = ds.len(), "node registered with a new boot epoch");
        }
        self.apply(ds, now);
        self.save_node(nid);
        self.reconcile(nid, &reg.running, &reg.finished, now);
        self.sched_dirty = true;
        Response::Registered
    }

    fn save_node(&mut self, nid: NodeId) {
        let n = self.sched.cluster.node(nid);
        self.batch.nodes.push(NodeRow {
            name: n.name.clone(),
            boot_epoch: n.boot_epoch,
            avail: serde_json::to_string(&n.avail).unwrap_or_default(),
        });
    }

    fn node_msg(&mut self, conn: u64, node: &str, msg: NodeToCtl, now: i64) {
        let Some(nid) = self.sched.cluster.node_id(node) else { return };
        if self.nodes[nid.0 as usize].sess.as_ref().is_none_or(|s| s.conn != conn) {
            return;
        }
        match msg {
            NodeToCtl::Heartbeat {
                boot_epoch,
                running,
                finished,
            } => {
                if boot_epoch != self.sched.cluster.node(nid).boot_epoch {
                    let ds = self.sched.handle(CoreEvent::NodeRegistered { node: nid, boot_epoch }, now as u64);
                    self.apply(ds, now);
                    self.save_node(nid);
                }
                self.reconcile(nid, &running, &finished, now);
            }
            NodeToCtl::JobExited(exit) => {
                self.job_exited(nid, &exit, now);
                self.node_out.push((nid.0 as usize, Outgoing::Msg(CtlToNode::AckExits { job_ids: vec![exit.job_id] })));
            }
            NodeToCtl::CheckpointAck { job_id, run, at } => self.checkpoint_ack(job_id, run, at),
            NodeToCtl::Health { verdict, reason, events } => self.node_health(nid, verdict, reason, &events, now),
        }
    }

    /// A node's GPU health verdict. Quarantine: the node is drained with the reason (persisted
    /// with the node, so it survives a restart; re-registering does not lift it), the core
    /// requeues its jobs (killed there, like a node failure) and places nothing there again
    /// until an admin resumes it. A node already quarantined keeps its first reason. Warn:
    /// logged.
    fn node_health(&mut self, nid: NodeId, verdict: HealthLevel, reason: String, events: &[String], now: i64) {
        let name = self.sched.cluster.node(nid).name.clone();
        let _span = info_span!("node", node = %name).entered();
        match verdict {
            HealthLevel::Warn => warn!(reason = %reason, ?events, "GPU health warning"),
            HealthLevel::Quarantine => {
                if matches!(self.sched.cluster.node(nid).avail, NodeAvail::Quarantined { .. }) {
                    info!(reason = %reason, "GPU health: node already quarantined");
                    return;
                }
                error!(reason = %reason, ?events, "GPU health: node quarantined");
                let ds = self.sched.handle(
                    CoreEvent::NodeAvail {
                        node: nid,
                        avail: NodeAvail::Quarantined { reason },
                    },
                    now as u64,
                );
                self.apply(ds, now);
                self.save_node(nid);
                self.sched_dirty = true;
            }
        }
    }

    /// A job being stopped saved its checkpoint: SIGKILL now instead of at the deadline.
    fn checkpoint_ack(&mut self, id: u64, run: u32, at: i64) {
        let Some(rec) = self.jobs.get_mut(&id) else { return };
        if rec.restarts != run || rec.state != JobState::Running {
            return;
        }
        rec.last_checkpoint_ack = Some(at);
        let core = rec.spec.id;
        self.dirty(id);
        self.sched.handle(CoreEvent::CheckpointAck { job: core, at: at.max(0) as u64 }, at.max(0) as u64);
        let rec = self.jobs.get_mut(&id).expect("present");
        let Some(s) = rec.stopping.as_mut().filter(|s| !s.kill_sent) else { return };
        s.kill_sent = true;
        let _span = info_span!("job", job = id).entered();
        info!(acked_at = at, "checkpoint acknowledged: killing without waiting for the deadline");
        let nodes = rec.nodes.clone();
        self.dirty(id);
        for n in nodes {
            self.send(&n, CtlToNode::Kill { job_id: id });
        }
    }

    /// Level-triggered: converges the node on the table. Ended jobs are recorded; jobs the
    /// table runs there but the node does not are bound again (a bind lost in a crash between
    /// commit and send); jobs the node runs but the table does not are killed; completing
    /// jobs the node no longer runs are finished.
    fn reconcile(&mut self, nid: NodeId, running: &[NodeJob], finished: &[JobExit], now: i64) {
        let i = nid.0 as usize;
        let name = self.sched.cluster.node(nid).name.clone();
        for exit in finished {
            self.job_exited(nid, exit, now);
        }
        if !finished.is_empty() {
            self.node_out.push((i, Outgoing::Msg(CtlToNode::AckExits {
                job_ids: finished.iter().map(|e| e.job_id).collect(),
            })));
        }
        let reported: HashMap<u64, u32> = running.iter().map(|r| (r.job_id, r.run)).collect();
        let ended: HashSet<u64> = finished.iter().map(|e| e.job_id).collect();
        let active: Vec<u64> = self.nodes[i].jobs.iter().copied().collect();
        for id in &active {
            let Some(rec) = self.jobs.get(id) else { continue };
            let here = reported.get(id).is_some_and(|&run| run == rec.restarts);
            match rec.state {
                JobState::Running => {
                    if here {
                        if rec.stopping.is_some_and(|s| s.kill_sent) {
                            self.node_out.push((i, Outgoing::Msg(CtlToNode::Kill { job_id: *id })));
                        }
                    } else if !ended.contains(id) {
                        debug!(job = id, node = %name, "bind not acknowledged by the node: sending it again");
                        self.node_out.push((i, Outgoing::Bind(*id)));
                    }
                }
                JobState::Completing if rec.completing_nodes.contains(&name) => {
                    if reported.contains_key(id) {
                        self.node_out.push((i, Outgoing::Msg(CtlToNode::Kill { job_id: *id })));
                    } else {
                        let rec = self.jobs.get_mut(id).expect("present");
                        rec.completing_nodes.retain(|n| *n != name);
                        let done = rec.completing_nodes.is_empty();
                        self.dirty(*id);
                        if done {
                            self.finalize(*id, now);
                        }
                    }
                }
                _ => {}
            }
        }
        for r in running {
            let ours = self.jobs.get(&r.job_id).is_some_and(|rec| {
                matches!(rec.state, JobState::Running | JobState::Completing)
                    && rec.restarts == r.run
                    && rec.nodes.contains(&name)
            });
            if !ours {
                warn!(job = r.job_id, node = %name, "node runs a job the controller does not place there: killing it");
                self.node_out.push((i, Outgoing::Msg(CtlToNode::Kill { job_id: r.job_id })));
            }
        }
    }

    fn job_exited(&mut self, nid: NodeId, exit: &JobExit, now: i64) {
        let name = &self.sched.cluster.node(nid).name;
        let Some(rec) = self.jobs.get_mut(&exit.job_id) else { return };
        if rec.restarts != exit.run || rec.state != JobState::Running || rec.nodes.first() != Some(name) || rec.interactive {
            // (An interactive allocation has no batch script: it ends when given back.)
            return;
        }
        let _span = info_span!("job", job = rec.id).entered();
        rec.exit_code = exit.exit_code;
        rec.exit_signal = exit.signal;
        rec.end_time = Some(now);
        rec.end_state = Some(match rec.stopping.map(|s| s.why) {
            Some(StopWhy::Cancel) => JobState::Cancelled,
            Some(StopWhy::Timeout) => JobState::Timeout,
            Some(StopWhy::Preempt | StopWhy::Requeue { .. }) => JobState::Pending,
            None if exit.oom => JobState::OutOfMemory,
            None if exit.signal != 0 || exit.exit_code != 0 => JobState::Failed,
            None => JobState::Completed,
        });
        info!(exit_code = exit.exit_code, signal = exit.signal, state = ?rec.end_state, "batch script ended");
        rec.completing_nodes = rec.nodes.iter().skip(1).cloned().collect();
        rec.state = JobState::Completing;
        let others = rec.completing_nodes.clone();
        let id = rec.id;
        self.dirty(id);
        for n in others {
            self.send(&n, CtlToNode::Kill { job_id: id });
        }
        if self.jobs[&id].completing_nodes.is_empty() {
            self.finalize(id, now);
        }
    }

    /// A job's processes are gone everywhere: release its resources, then finish or requeue.
    fn finalize(&mut self, id: u64, now: i64) {
        let rec = self.jobs.get_mut(&id).expect("job exists");
        let core = rec.spec.id;
        let nodes = rec.nodes.clone();
        let why = rec.stopping.map(|s| s.why);
        self.batch.allocs.push(AllocOp::DeleteJob(id));
        for n in &nodes {
            if let Some(nid) = self.sched.cluster.node_id(n) {
                self.nodes[nid.0 as usize].jobs.remove(&id);
            }
        }
        self.batch.steps.insert(id);
        self.batch.acct.insert(id);
        self.end_steps(id, now);
        let run_state = match why {
            Some(StopWhy::Preempt) => JobState::Preempted.as_str(),
            Some(StopWhy::Requeue { .. }) => "REQUEUED",
            _ => self.jobs[&id].end_state.unwrap_or(JobState::Completed).as_str(),
        };
        self.record_run(id, run_state);
        if matches!(why, Some(StopWhy::Preempt | StopWhy::Requeue { .. })) {
            self.acct_requeued(id, now, None, run_state);
        }
        match why {
            Some(StopWhy::Preempt) => {
                self.sched.handle(CoreEvent::Requeued(core), now as u64);
                let rec = self.jobs.get_mut(&id).expect("job exists");
                reset_for_requeue(rec, false);
                rec.spec.preempt_count += 1;
                self.stats.requeued += 1;
            }
            Some(StopWhy::Requeue { hold }) => {
                self.sched.handle(CoreEvent::JobEnded(core), now as u64);
                let rec = self.jobs.get_mut(&id).expect("job exists");
                reset_for_requeue(rec, hold);
                let spec = rec.spec.clone();
                self.sched.handle(CoreEvent::Submit(spec), now as u64);
                self.stats.requeued += 1;
            }
            _ => {
                self.sched.handle(CoreEvent::JobEnded(core), now as u64);
                let rec = self.jobs.get_mut(&id).expect("job exists");
                let st = rec.end_state.take().unwrap_or(JobState::Completed);
                rec.state = st;
                rec.allocs.clear();
                rec.completing_nodes.clear();
                rec.stopping = None;
                match st {
                    JobState::Completed => self.stats.completed += 1,
                    JobState::Cancelled => self.stats.cancelled += 1,
                    _ => self.stats.failed += 1,
                }
                if core.0 != id {
                    self.core_map.remove(&core.0);
                }
            }
        }
        self.dirty(id);
        self.sched_dirty = true;
    }

    fn apply(&mut self, decisions: Vec<Decision>, now: i64) {
        for d in decisions {
            match d {
                Decision::Bind { job, allocs, .. } => self.bind_job(job.0, allocs, now),
                Decision::Reserve { .. } | Decision::ReleaseReservation { .. } => {}
                Decision::PreemptBackfill { job, for_job } => {
                    if let Some(id) = self.job_of_core(job.0) {
                        if self.jobs[&id].stopping.is_none() && self.jobs[&id].state == JobState::Running {
                            info!(job = id, for_job = for_job.0, "preempting backfill job for a completed reservation");
                            self.start_stop(id, StopWhy::Preempt, now);
                        }
                    }
                }
                Decision::Preempt { job, for_job, deadline, .. } => self.preempt(job.0, for_job.0, deadline, now),
                Decision::Requeue { job, reason } => self.core_requeued(job.0, &reason, now),
                d @ (Decision::Alert { .. } | Decision::Page(_)) => self.raise_alert(&d, now),
                Decision::BindReplica { service, replica, allocs } => self.bind_replica(service, replica, allocs, now),
                Decision::StopReplica { replica, .. } => self.stop_replica(replica, now),
                Decision::Relocate { service, from, to, allocs, .. } => {
                    // Start the new replica, then drain the old one.
                    self.bind_replica(service, to, allocs, now);
                    self.stop_replica(from, now);
                }
            }
        }
    }

    fn job_of_core(&self, core: u64) -> Option<u64> {
        if let Some(&id) = self.core_map.get(&core) {
            return Some(id);
        }
        (core & PROV == 0 && self.jobs.contains_key(&core)).then_some(core)
    }

    fn bind_job(&mut self, core: u64, allocs: Vec<Allocation>, now: i64) {
        let id = match self.job_of_core(core) {
            Some(id) => id,
            None => match prov_decode(core) {
                Some((aid, task)) => self.start_array_task(aid, task, core),
                None => panic!("the core bound job {core}, which the controller does not know"),
            },
        };
        let names: Vec<String> = allocs.iter().map(|a| self.sched.cluster.node(a.part.node).name.clone()).collect();
        for (a, n) in allocs.iter().zip(&names) {
            self.batch.allocs.push(AllocOp::Insert {
                job_id: id,
                node: n.clone(),
                alloc: a.clone(),
            });
            let i = a.part.node.0 as usize;
            self.nodes[i].jobs.insert(id);
            self.node_out.push((i, Outgoing::Bind(id)));
        }
        let rec = self.jobs.get_mut(&id).expect("job exists");
        info!(job = id, nodes = %compress_hostlist(&names), "job started");
        rec.state = JobState::Running;
        rec.start_time = Some(now);
        rec.end_time = None;
        rec.allocs = allocs;
        rec.nodes = names;
        rec.stopping = None;
        rec.end_state = None;
        rec.exit_code = 0;
        rec.exit_signal = 0;
        rec.reason = None;
        crate::acct::on_start(rec, now);
        self.deps.remove(&id);
        self.dirty(id);
        self.batch.acct.insert(id);
        self.batch.steps.insert(id);
        self.stats.started += 1;
    }

    fn start_array_task(&mut self, aid: u64, task: u32, core: u64) -> u64 {
        if let Some(s) = self.in_core_tasks.get_mut(&aid) {
            s.remove(&task);
        }
        let meta = self.jobs.get_mut(&aid).expect("array record exists");
        meta.array_pending.retain(|&t| t != task);
        let id = if meta.array_pending.is_empty() {
            // The last task reuses the array's id.
            meta.array_task_id = Some(task);
            meta.array_max_running = None;
            meta.spec.id = JobId(core);
            aid
        } else {
            let mut t = meta.clone();
            self.dirty(aid);
            let nid = self.take_id();
            t.id = nid;
            t.array_task_id = Some(task);
            t.array_pending = Vec::new();
            t.array_max_running = None;
            t.spec.id = JobId(core);
            self.jobs.insert(nid, t);
            nid
        };
        self.core_map.insert(core, id);
        id
    }

    fn core_requeued(&mut self, core: u64, reason: &RequeueReason, now: i64) {
        let Some(id) = self.job_of_core(core) else { return };
        let rec = self.jobs.get_mut(&id).expect("job exists");
        let nodes = rec.nodes.clone();
        let _span = info_span!("job", job = id).entered();
        info!(?reason, requeue = rec.requeue, "node lost: job requeued by the core");
        rec.end_time = Some(now);
        self.record_run(id, JobState::NodeFail.as_str());
        self.batch.allocs.push(AllocOp::DeleteJob(id));
        for n in &nodes {
            if let Some(nid) = self.sched.cluster.node_id(n) {
                self.nodes[nid.0 as usize].jobs.remove(&id);
            }
            self.send(n, CtlToNode::Kill { job_id: id });
        }
        if self.jobs[&id].requeue {
            self.acct_requeued(id, now, Some("NODE_FAIL"), "REQUEUED");
        }
        let rec = self.jobs.get_mut(&id).expect("job exists");
        if rec.requeue {
            reset_for_requeue(rec, false);
            self.stats.requeued += 1;
        } else {
            rec.state = JobState::NodeFail;
            rec.end_time = Some(now);
            rec.allocs.clear();
            self.sched.handle(CoreEvent::Cancel(JobId(core)), now as u64);
            self.batch.acct.insert(id);
            self.batch.steps.insert(id);
            self.stats.failed += 1;
        }
        self.dirty(id);
        self.sched_dirty = true;
    }

    // ---- timer work and the scheduling cycle ----

    fn tick(&mut self, now: i64) {
        let mut to_stop = Vec::new();
        let mut to_kill = Vec::new();
        let mut to_warn = Vec::new();
        for rec in self.jobs.values() {
            if rec.state != JobState::Running {
                continue;
            }
            match rec.stopping {
                Some(s) => {
                    if !s.kill_sent && now >= s.kill_at.unwrap_or(s.term_at + self.opts.kill_wait_s) {
                        to_kill.push(rec.id);
                    }
                }
                None => {
                    if let (Some(st), Some(l)) = (rec.start_time, rec.time_limit_min) {
                        let end = st + i64::from(l) * self.opts.minute_s;
                        if now >= end {
                            to_stop.push(rec.id);
                        } else if let Some(w) = rec.signal.as_ref().filter(|w| !w.batch_only && !rec.warn_sent) {
                            // `--signal=SIG@T` without `B:` goes to the job's steps, from the
                            // controller (Slurm's slurmctld sends it to the steps only; `B:` is
                            // the batch host's supervisor's).
                            if now >= end - i64::from(w.secs_before) {
                                to_warn.push((rec.id, w.signal));
                            }
                        }
                    }
                }
            }
        }
        for (id, signal) in to_warn {
            let rec = self.jobs.get_mut(&id).expect("job exists");
            rec.warn_sent = true;
            let nodes = rec.nodes.clone();
            self.dirty(id);
            for n in nodes {
                self.send(&n, CtlToNode::SignalSteps { job_id: id, signal });
            }
        }
        for id in to_stop {
            self.start_stop(id, StopWhy::Timeout, now);
        }
        for id in to_kill {
            let rec = self.jobs.get_mut(&id).expect("job exists");
            if let Some(s) = rec.stopping.as_mut() {
                s.kill_sent = true;
            }
            let nodes = rec.nodes.clone();
            self.dirty(id);
            for n in nodes {
                self.send(&n, CtlToNode::Kill { job_id: id });
            }
            if self.jobs[&id].interactive {
                // No batch script reports an end: the allocation ends with the kill.
                let admin = Ident { uid: 0, gid: 0, admin: true };
                let release = flotilla_proto::step::ReleaseAllocation { job_id: id, exit_code: 0, signal: 9 };
                self.release_allocation(admin, release, now);
            }
        }
        for i in 0..self.nodes.len() {
            let rt = &self.nodes[i];
            let silent = rt.sess.is_none() && rt.down_since.is_some_and(|d| now - d >= self.opts.slurmd_timeout_s);
            let nid = NodeId(i as u32);
            if silent && !rt.marked_down && self.sched.cluster.node(nid).avail == NodeAvail::Up {
                self.nodes[i].marked_down = true;
                warn!(node = %self.sched.cluster.node(nid).name, "node not responding: marked down");
                let ds = self.sched.handle(
                    CoreEvent::NodeAvail {
                        node: nid,
                        avail: NodeAvail::Down {
                            reason: "Not responding".into(),
                        },
                    },
                    now as u64,
                );
                self.apply(ds, now);
                self.save_node(nid);
            }
        }
        let cutoff = now - self.opts.min_job_age_s;
        let old: Vec<u64> = self
            .jobs
            .values()
            .filter(|r| r.state.is_finished() && r.end_time.is_some_and(|e| e < cutoff))
            .map(|r| r.id)
            .collect();
        for id in old {
            if let Some(r) = self.jobs.remove(&id) {
                self.core_map.remove(&r.spec.id.0);
            }
            self.deps.remove(&id);
        }
    }

    fn refresh_arrays(&mut self, now: i64) {
        // A record stops being a meta for good (its pending tasks only shrink) or is purged.
        let jobs = &self.jobs;
        self.array_metas.retain(|id| jobs.get(id).is_some_and(JobRecord::is_array_meta));
        let metas: Vec<u64> = self
            .array_metas
            .iter()
            .filter(|id| self.jobs[id].state == JobState::Pending)
            .copied()
            .collect();
        if metas.is_empty() {
            return;
        }
        let mut running: HashMap<u64, u32> = HashMap::new();
        for r in self.jobs.values() {
            if let Some(a) = r.array_job_id {
                if matches!(r.state, JobState::Running | JobState::Completing) {
                    *running.entry(a).or_default() += 1;
                }
            }
        }
        for aid in metas {
            let rec = &self.jobs[&aid];
            let limit = rec
                .array_max_running
                .map_or(usize::MAX, |m| m.saturating_sub(running.get(&aid).copied().unwrap_or(0)) as usize)
                .min(1024);
            let want: BTreeSet<u32> = rec.array_pending.iter().copied().take(limit).collect();
            let have = self.in_core_tasks.entry(aid).or_default().clone();
            for t in have.difference(&want) {
                self.sched.handle(CoreEvent::Cancel(JobId(prov_id(aid, *t))), now as u64);
            }
            for t in want.difference(&have) {
                let mut sp = self.jobs[&aid].spec.clone();
                sp.id = JobId(prov_id(aid, *t));
                self.sched.handle(CoreEvent::Submit(sp), now as u64);
            }
            self.in_core_tasks.insert(aid, want);
        }
    }

    fn dep_target(&self, job: u64, task: Option<u32>) -> DepTarget {
        let Some(rec) = self.jobs.get(&job) else { return DepTarget::Unknown };
        if rec.array_job_id != Some(job) {
            return job_state_ok(rec.state);
        }
        // An array: one task, or all of them.
        let members = self.jobs.values().filter(|j| j.array_job_id == Some(job));
        let mut any_pending = false;
        let mut any_running = false;
        let mut all_ok = true;
        let mut found = false;
        for m in members {
            if let Some(t) = task {
                if m.array_pending.contains(&t) {
                    return DepTarget::Pending;
                }
                if m.array_task_id != Some(t) || m.is_array_meta() {
                    continue;
                }
            }
            found = true;
            match job_state_ok(m.state) {
                DepTarget::Pending => any_pending = true,
                DepTarget::Running => any_running = true,
                DepTarget::Ended { ok } => all_ok &= ok,
                DepTarget::Unknown => {}
            }
        }
        if !found {
            DepTarget::Unknown
        } else if any_pending {
            DepTarget::Pending
        } else if any_running {
            DepTarget::Running
        } else {
            DepTarget::Ended { ok: all_ok }
        }
    }

    fn refresh_deps(&mut self) {
        let mut results = Vec::new();
        for (id, dep) in &self.deps {
            let Some(rec) = self.jobs.get(id) else { continue };
            if rec.state != JobState::Pending {
                continue;
            }
            let blocked = dep.has_singleton()
                && self.jobs.values().any(|o| {
                    o.id != rec.id
                        && o.uid == rec.uid
                        && o.name == rec.name
                        && (matches!(o.state, JobState::Running | JobState::Completing)
                            || (o.state == JobState::Pending && o.id < rec.id))
                });
            results.push((*id, dep.evaluate(&|j, t| self.dep_target(j, t), blocked)));
        }
        for (id, st) in results {
            let rec = self.jobs.get_mut(&id).expect("present");
            let pending = st != DepStatus::Satisfied;
            let reason = (st == DepStatus::Never).then(|| "DependencyNeverSatisfied".to_string());
            let changed = rec.spec.dependency_pending != pending || rec.reason != reason;
            rec.spec.dependency_pending = pending;
            rec.reason = reason;
            if st == DepStatus::Satisfied {
                rec.dependency = None;
                self.deps.remove(&id);
            }
            if changed {
                self.dirty(id);
                self.push_core_update(id);
            }
        }
    }

    fn schedule(&mut self, now: i64) {
        self.sched_dirty = false;
        self.refresh_arrays(now);
        self.refresh_deps();
        let t = Instant::now();
        let ds = self.sched.cycle(now as u64);
        let us = t.elapsed().as_micros() as u64;
        self.stats.cycles += 1;
        self.stats.last_cycle_us = us;
        self.stats.cycle_us_total += us;
        self.stats.max_cycle_us = self.stats.max_cycle_us.max(us);
        self.apply(ds, now);
        if self.opts.check_invariants {
            check_core_invariants(&self.sched);
        }
    }

    fn bind_msg(&self, job_id: u64, nid: usize) -> Option<Bind> {
        let rec = self.jobs.get(&job_id)?;
        if rec.state != JobState::Running {
            return None;
        }
        let name = &self.sched.cluster.nodes[nid].name;
        let pos = rec.nodes.iter().position(|n| n == name)?;
        let a = &rec.allocs[pos];
        let key = rec.array_job_id.unwrap_or(rec.id);
        let (script, env) = match self.store.script(key) {
            Ok(Some(s)) => s,
            Ok(None) => (String::new(), "[]".into()),
            Err(e) => panic!("cannot read job script: {e}"),
        };
        Some(Bind {
            job_id,
            run: rec.restarts,
            array: rec.array_job_id.zip(rec.array_task_id),
            name: rec.name.clone(),
            gpu_mask: a.part.gpus.0,
            cpus: (a.part.cpu_milli / 1000) as u32,
            mem_mib: a.part.mem_mib,
            batch_host: pos == 0,
            nodes: compress_hostlist(&rec.nodes),
            uid: rec.uid,
            gid: rec.gid,
            user: rec.user.clone(),
            script,
            argv: rec.argv.clone(),
            environment: serde_json::from_str(&env).unwrap_or_default(),
            work_dir: rec.work_dir.clone(),
            stdout: rec.stdout.clone(),
            stderr: rec.stderr.clone(),
            time_limit_s: rec.spec.time_limit_s,
            partition: rec.partition.clone(),
        })
    }

    fn launch_details(&self, job_id: u64) -> LaunchDetails {
        let rec = &self.jobs[&job_id];
        LaunchDetails {
            account: rec.account.clone(),
            qos: rec.qos.clone(),
            submit_host: rec.submit_host.clone(),
            cpus_per_node: rec.allocs.iter().map(|a| (a.part.cpu_milli / 1000) as u32).collect(),
            cpus_per_task: rec.cpus_per_task.max(1),
            mem_per_cpu_mib: rec.mem_per_cpu_mib,
            mem_per_node_mib: rec.mem_per_node_mib,
            array_tasks: rec.array_tasks,
            signal: rec.signal.clone(),
            interactive: rec.interactive,
        }
    }

    /// Commits the batch, then sends replies and node messages (decisions, then effects).
    fn flush(&mut self, events: u64, now: i64) {
        let dirty: Vec<u64> = self.batch.jobs.iter().copied().collect();
        for id in dirty {
            // An array's pending remainder is accounted as `A_[tasks]`: rewritten as tasks
            // start or are cancelled.
            if self
                .jobs
                .get_mut(&id)
                .is_some_and(|r| crate::acct::refresh_eligible(r, now) || r.is_array_meta())
            {
                self.batch.acct.insert(id);
            }
        }
        let batch = std::mem::take(&mut self.batch);
        if !batch.is_empty() {
            let t = Instant::now();
            let jobs = &self.jobs;
            if let Err(e) = self.store.commit(&batch, &|id| jobs.get(&id)) {
                // Fail stop: restart recovers from the last commit.
                panic!("cannot commit controller state: {e}");
            }
            self.stats.commits += 1;
            self.stats.commit_us_total += t.elapsed().as_micros() as u64;
            self.stats.batch_events_total += events;
        }
        for (tx, r) in self.replies.drain(..) {
            let _ = tx.send(r);
        }
        self.run_alert_programs();
        for (q, tx) in std::mem::take(&mut self.acct_queries) {
            let r = match crate::acct::query(self.store.conn(), &q) {
                Ok(jobs) => Response::Acct(jobs),
                Err(e) => {
                    error!("accounting query failed: {e}");
                    Response::Error(SlurmError::new(ESLURM_INTERNAL))
                }
            };
            let _ = tx.send(r.into());
        }
        let out = std::mem::take(&mut self.node_out);
        for (nid, o) in out {
            if self.nodes[nid].sess.is_none() {
                continue;
            }
            let msg = match o {
                Outgoing::Msg(m) => m,
                Outgoing::Bind(id) => match self.bind_msg(id, nid) {
                    Some(b) => CtlToNode::Launch {
                        bind: Box::new(b),
                        details: Box::new(self.launch_details(id)),
                    },
                    None => continue,
                },
            };
            if let Some(s) = &self.nodes[nid].sess {
                let _ = s.tx.send(msg);
            }
        }
    }

    /// The scheduling core (tests, benchmarks).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }
}

/// Fail stop on a broken invariant of the core, except the known false positive of its
/// invariant-6 check on a reservation re-planned in the same second as a backfill start
/// (`core/tests/backfill_rank.rs`), which is logged.
fn check_core_invariants(sched: &Scheduler) {
    // Fail stop (STYLE.md): a broken invariant aborts; the restart recovers from SQLite.
    if let Err(e) = sched.check_invariants() {
        panic!("scheduling invariant broken: {e}");
    }
}

/// What a job reference resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A record.
    Job(u64),
    /// Pending tasks of an array record.
    Tasks(u64, Vec<u32>),
}

impl Target {
    fn id(&self) -> u64 {
        match self {
            Target::Job(id) | Target::Tasks(id, _) => *id,
        }
    }
}

/// When a job requeued at `now` may start again: `now + holdoff`. Slurm holds a requeued job
/// back for the job credential's lifetime plus one second (`AuthInfo` `cred_expire`, default
/// 120 s; `job_mgr.c` `_job_requeue_op`), so that its old processes are surely gone; it shows
/// as `PENDING` with reason `BeginTime` meanwhile. The golden
/// `0241_scontrol_show_job_requeued`: requeued 09:41:12, EligibleTime 09:43:13.
pub fn requeue_begin(now: i64, holdoff: i64) -> u64 {
    (now + holdoff.max(0)).max(0) as u64
}

/// The reason a job requeued with a hold shows until it is released (Slurm 22.05
/// `job_requeue`'s `state_desc`; `scontrol` prints it with underscores, `squeue` as is).
pub const REQUEUE_HOLD_REASON: &str = "job requeued in held state";

fn reset_for_requeue(rec: &mut JobRecord, hold: bool) {
    rec.state = JobState::Pending;
    rec.restarts += 1;
    rec.warn_sent = false;
    rec.start_time = None;
    rec.end_time = None;
    rec.allocs.clear();
    rec.nodes.clear();
    rec.completing_nodes.clear();
    rec.stopping = None;
    rec.end_state = None;
    rec.exit_code = 0;
    rec.exit_signal = 0;
    rec.reason = None;
    rec.acct.eligible_time = None;
    if hold {
        rec.spec.held = Some(HoldKind::User);
        rec.reason = Some(REQUEUE_HOLD_REASON.into());
    }
}

fn ref_matches(r: &JobRef, rec: &JobRecord) -> bool {
    if r.job_id != rec.id && rec.array_job_id != Some(r.job_id) {
        return false;
    }
    match &r.tasks {
        None => true,
        Some(ts) => {
            rec.array_task_id.is_some_and(|t| ts.contains(&t) && !rec.is_array_meta())
                || rec.array_pending.iter().any(|t| ts.contains(t))
        }
    }
}

fn matches_filter(rec: &JobRecord, f: &JobFilter, _sched: &Scheduler) -> bool {
    (f.users.is_empty() || f.users.contains(&rec.user))
        && (f.names.is_empty() || f.names.contains(&rec.name))
        && (f.states.is_empty() || f.states.contains(&rec.state.to_wire()))
        && (f.partitions.is_empty() || f.partitions.contains(&rec.partition))
        && (f.accounts.is_empty() || f.accounts.contains(&rec.account))
        && (f.nodes.is_empty() || rec.nodes.iter().any(|n| f.nodes.contains(n)))
}

/// Applies `scontrol update` changes to a copy of a record, with Slurm's permission rules: a
/// user may change only pending jobs (a running job's time limit may only go down), may not
/// raise a time limit above the partition's `MaxTime`, and may not set `Priority` or a
/// negative `Nice`.
fn apply_changes(
    rec: &mut JobRecord,
    changes: &[JobChange],
    ident: Ident,
    sched: &Scheduler,
    new_dep: &mut Option<Option<Dependency>>,
) -> Result<(), SlurmError> {
    let pending = rec.state == JobState::Pending;
    let need_pending = |p: bool| if p { Ok(()) } else { Err(SlurmError::new(ESLURM_JOB_NOT_PENDING)) };
    if rec.state.is_finished() {
        return Err(SlurmError::new(ESLURM_JOB_FINISHED));
    }
    for ch in changes {
        match ch {
            JobChange::TimeLimit(t) => {
                let new = match t {
                    TimeLimitWire::Unlimited => None,
                    TimeLimitWire::Minutes(m) => Some(*m),
                };
                if !ident.admin {
                    let above = |limit: Option<u64>| match (new, limit) {
                        (_, None) => false,
                        (None, Some(_)) => true,
                        (Some(n), Some(l)) => u64::from(n) > l,
                    };
                    if pending {
                        let max = sched.cluster.partitions[rec.spec.partition.0 as usize].max_time_min;
                        if above(max) {
                            return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
                        }
                    } else if above(rec.time_limit_min.map(u64::from)) {
                        return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
                    }
                }
                rec.time_limit_min = new;
                rec.spec.time_limit_s = new.map(|m| u64::from(m) * 60);
            }
            JobChange::Name(n) => rec.name = n.clone(),
            JobChange::Partition(p) => {
                need_pending(pending)?;
                let id = sched
                    .cluster
                    .partition_id(p)
                    .ok_or_else(|| SlurmError::new(ESLURM_INVALID_PARTITION_NAME))?;
                rec.partition = p.clone();
                rec.spec.partition = id;
            }
            JobChange::Priority(p) => {
                if !ident.admin {
                    return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
                }
                rec.spec.base_priority = *p;
            }
            JobChange::Nice(n) => {
                if *n < 0 && !ident.admin {
                    return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
                }
                rec.spec.nice = *n;
            }
            JobChange::Gres(g) => {
                need_pending(pending)?;
                let mut per_node = 0u32;
                let mut types = Vec::new();
                for x in g {
                    if x.name != "gpu" {
                        return Err(SlurmError::new(ESLURM_INVALID_GRES));
                    }
                    per_node = u32::try_from(x.count).map_err(|_| SlurmError::new(ESLURM_INVALID_GRES))?;
                    types = x.gpu_type.clone().into_iter().collect();
                }
                let nodes = rec.spec.request.nodes.unwrap_or(1);
                let r = &mut rec.spec.request;
                r.gpus_per_node = (per_node > 0).then_some(per_node);
                r.gpus = per_node * nodes;
                r.nodes = Some(nodes);
                r.gpu_types = types;
                rec.gpus = r.gpus;
                rec.gres = g.iter().map(|x| (x.name.clone(), x.gpu_type.clone(), x.count)).collect();
            }
            JobChange::NumNodes(n) => {
                need_pending(pending)?;
                if *n == 0 {
                    return Err(SlurmError::new(ESLURM_INVALID_NODE_COUNT));
                }
                let r = &mut rec.spec.request;
                r.nodes = Some(*n);
                if let Some(g) = r.gpus_per_node {
                    r.gpus = g * n;
                }
                rec.num_nodes = *n;
                rec.gpus = rec.spec.request.gpus;
            }
            JobChange::Dependency(d) => {
                need_pending(pending)?;
                if d.trim().is_empty() {
                    rec.dependency = None;
                    rec.spec.dependency_pending = false;
                    rec.reason = None;
                    *new_dep = Some(None);
                } else {
                    let parsed = deps::parse(d).map_err(|()| SlurmError::new(ESLURM_DEPENDENCY))?;
                    rec.dependency = Some(d.clone());
                    rec.spec.dependency_pending = true;
                    *new_dep = Some(Some(parsed));
                }
            }
            JobChange::Begin(b) => {
                need_pending(pending)?;
                rec.spec.begin_time = b.map(|t| t.max(0) as u64);
            }
            JobChange::Account(a) => {
                rec.account = a.clone();
                rec.spec.account = a.clone();
            }
            JobChange::Qos(q) => rec.qos = q.clone(),
            JobChange::Comment(c) => rec.comment = Some(c.clone()),
            JobChange::Topology(t) => {
                need_pending(pending)?;
                let k = flotilla_core::config::TopologyKind::parse(t)
                    .ok_or_else(|| SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE))?;
                rec.spec.request.topology = k;
                rec.topology = k.as_str().to_string();
            }
        }
    }
    Ok(())
}
