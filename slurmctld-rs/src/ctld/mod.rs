//! The controller's owner task: one task owns the scheduler core, the job table and the store,
//! and handles a closed set of [`Event`]s (STYLE.md "one owner per daemon").
//!
//! Each turn of the loop takes every event waiting (group commit), handles them, runs the
//! timer work and — debounced — a scheduling cycle of the core, then **commits the whole
//! batch in one SQLite transaction before any reply or node message goes out** (decisions,
//! then effects). A crash between commit and effects is healed by the reconciler: node
//! daemons report what runs where (level-triggered), and the controller re-sends binds,
//! kills orphans and requeues what a rebooted node lost.
//!
//! The module holds the types and the event dispatch; its children hold the work, one seam
//! each: `lifecycle` (recovery, the owner loop and its turn, timer work, the scheduling
//! cycle, carrying out the core's decisions, the commit and its effects), `job_rpcs`
//! (submit, `--test-only`, cancel, hold/release, requeue, update), `queries` (job views,
//! node and partition queries, statistics), `nodes` (node sessions, the reconciler, health,
//! job exits), `arrays` (array tasks and dependencies), [`steps`] (job steps and interactive
//! allocations) and `services` (inference services, preemption, alerts).

use crate::admission::AdmissionConf;
use crate::deps::Dependency;
use crate::job::{JobRecord, JobState};
use crate::store::{Store, WriteBatch};
use flotilla_core::job::HoldKind;
use flotilla_core::sched::Scheduler;
use flotilla_proto::errno::*;
use flotilla_proto::{CtlToNode, NodeToCtl, Register, Request, Response, SlurmError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tracing::info;

/// A key of [`Controller::prio_index`]: (priority highest first, job id).
type PrioKey = (std::cmp::Reverse<u32>, u64);

/// Pending record `rec`'s key in [`Controller::prio_index`].
fn prio_key(rec: &JobRecord) -> PrioKey {
    (std::cmp::Reverse(rec.priority), rec.id)
}

mod acctmgr;
mod arrays;
mod diag;
mod durability;
mod elastic;
mod job_rpcs;
mod lifecycle;
mod metrics;
mod nodes;
mod partitions;
mod queries;
mod services;
mod share;
pub mod steps;
mod update_times;

/// Bit marking a core job id as a pending array task: `PROV | array_id << 20 | task`.
const PROV: u64 = 1 << 62;
/// SIGTERM.
const SIGTERM: i32 = 15;
/// Turn durations kept for `Request::QueryTurnTimes`.
const TURN_TIMES_KEPT: usize = 4096;
/// Most events handled in one turn (one transaction).
const MAX_BATCH: usize = 8192;

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
/// being built as owned `JobInfo`s first — or an answer in parts.
#[derive(Debug)]
pub enum Reply {
    /// A message, encoded by the connection task.
    Msg(Response),
    /// The postcard encoding of a `Response`.
    Encoded(Vec<u8>),
    /// Messages the owner task sends while it makes them, one frame each, in order, until it
    /// drops the sender ([`flotilla_proto::Request::QueryQueueParts`]: the parts, then the
    /// last `Queue`).
    Parts(mpsc::UnboundedReceiver<Response>),
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
    /// An HTTP peer asks for a metric set ([`crate::metrics`]): the owner counts, the
    /// connection task renders. `kind: None` only asks whether the owner answers (`/readyz`).
    /// Not a proto request: HTTP peers are not authenticated and have no [`Ident`].
    Metrics {
        /// Which set.
        kind: Option<crate::metrics::MetricsKind>,
        /// Answered at once, during the turn (it changes nothing).
        reply: oneshot::Sender<Option<crate::metrics::Snapshot>>,
    },
}

/// The events that arrive while a turn runs ([`Controller::turn_answering`]): between the
/// turn's phases (after its timer work, after its cycle) the queries among them that read
/// jobs, nodes or partitions ([`answers_between_phases`]) are answered at once, so that a
/// `squeue` waits for at most the phase in progress, not for the rest of the turn and its
/// commit; every other event goes to `held`, in order, for the next turn. Answering a query
/// ahead of a held change keeps read-your-writes: a change is replied to only after the
/// commit of the turn that handled it, so no client has seen a held one.
#[derive(Debug)]
pub struct Inbox<'a> {
    /// Where the events arrive.
    pub rx: &'a mut mpsc::Receiver<Event>,
    /// Events taken from `rx` and not handled yet (the next turn's first).
    pub held: &'a mut Vec<Event>,
}

/// Runs `f` on this thread as blocking work when it is a worker of a multi-threaded tokio
/// runtime ([`tokio::task::block_in_place`]: the worker's queued tasks move to another thread,
/// and tasks `f` wakes are run by the other workers meanwhile); otherwise (an in-process
/// driver, a single-threaded runtime) just runs it.
fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Whether `e` is answered between a turn's phases ([`Inbox`]): the requests that read the
/// job table, the nodes or the partitions and change nothing (`squeue`, `scontrol show job`
/// and its elastic half, `sinfo` and its `--largest` half, `scontrol show node|partition`,
/// `squeue -s`). Everything else (changes, node messages, `sacct`, which reads the committed
/// database, and the counters tests and `sdiag` read) waits for the next turn.
pub fn answers_between_phases(e: &Event) -> bool {
    matches!(
        e,
        Event::Rpc {
            req: Request::QueryQueue(_)
                | Request::QueryQueueParts(_)
                | Request::QueryJobs(_)
                | Request::QueryElastic { .. }
                | Request::QueryNodes(_)
                | Request::QueryPartitions
                | Request::QueryPartitionStates
                | Request::QueryReclaimable
                | Request::QuerySteps(_),
            ..
        }
    )
}

/// The timer work due in one turn of the owner loop. [`Controller::run`] computes it from its
/// tokio timers after the turn's events are handled; an in-process driver passes its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Due {
    /// Timer work: time limits, kill escalation after `KillWait`, node timeouts
    /// (`SlurmdTimeout`), purging finished jobs after `MinJobAge`. Due every
    /// [`CtlOptions::tick`].
    pub tick: bool,
    /// The periodic scheduling cycle, run even when nothing changed (priorities age, begin
    /// times pass). Due every [`CtlOptions::sched_interval`].
    pub periodic: bool,
    /// The debounce gap ([`CtlOptions::debounce`]) since the last cycle has passed: a cycle
    /// runs if an event or the timer work changed something the core decides on.
    pub debounced: bool,
}

impl Due {
    /// Everything due: timer work and a scheduling cycle.
    pub const ALL: Due = Due {
        tick: true,
        periodic: true,
        debounced: true,
    };
    /// Nothing but the events: no timer work, no cycle.
    pub const NONE: Due = Due {
        tick: false,
        periodic: false,
        debounced: false,
    };
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
    /// `SchedulerParameters=batch_sched_delay`, or `slurmctld --batch-sched-delay-ms` when
    /// `Some` ([`crate::daemon::controller`] fills a `None` from slurm.conf, Slurm's default
    /// 3 s when unset; a `None` left, as in-process drivers have it, is zero): a cycle asked
    /// for by a submission, an update, a release, a cancel or a node's change runs at the earliest this long after the last cycle; one
    /// asked for by a job's end runs after the debounce gap. Slurm 22.05 never starts a
    /// batch job inside its submission (`_slurm_rpc_submit_batch_job` calls `job_allocate`
    /// with `allocate=0`: the job is only tested) nor an array (not `independent`);
    /// `queue_job_scheduler()` leaves them to `schedule()`, which `_slurmctld_background`
    /// runs when `batch_sched_delay` has passed since its last pass, and
    /// `_slurm_rpc_epilog_complete` runs at once after a job's end. So a script's quick
    /// submissions take their job ids before an array's started tasks take theirs, and a job
    /// submitted behind others shows its submission's reason until that pass.
    pub batch_sched_delay: Option<Duration>,
    /// `SchedulerParameters=bf_max_job_test=N`: how many jobs the backfill plan that queries
    /// show tests (Slurm's default 500; `refresh_start_plan`).
    pub bf_max_job_test: u32,
    /// `DependencyParameters=kill_invalid_depend`: a job whose dependency can never be met is
    /// cancelled unless it asked `--kill-on-invalid-dep=no`.
    pub kill_invalid_depend: bool,
    /// `RequeueExit=` and `RequeueExitHold=` by exit code 0-255: whether a batch job whose
    /// script exits with it is requeued (`Some`), and whether held (`Some(true)`; Slurm's
    /// `job_hold_requeue`, where `RequeueExit` wins for a code in both).
    pub requeue_on_exit: Box<[Option<bool>; 256]>,
    /// `SlurmdTimeout` (s): a node daemon silent this long is marked down.
    pub slurmd_timeout_s: i64,
    /// `KillWait` (s): between SIGTERM and SIGKILL.
    pub kill_wait_s: i64,
    /// `MinJobAge` (s): finished jobs stay visible this long.
    pub min_job_age_s: i64,
    /// `MaxJobCount`.
    pub max_job_count: u64,
    /// `FirstJobId`: the first job id given (Slurm 22.05 `read_config.c`; the id counter
    /// never goes below it, also after a restart).
    pub first_job_id: u64,
    /// `MaxJobId`: job ids stay below it and wrap to `first_job_id`, skipping ids in use
    /// (Slurm's `get_next_job_id`).
    pub max_job_id: u64,
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
    /// Why `quota.conf` could not be read, if it could not: fatal at the first start (it is
    /// to be imported), a warning once the accounting database has imported it (the database
    /// is the source of truth then, so a bad edit of the file cannot keep the controller down).
    pub quota_error: Option<String>,
    /// The site's slurmdbd database to import at the first start
    /// ([`crate::assoc::slurmdbd::source`]; `None`: slurm.conf does not name
    /// `accounting_storage/slurmdbd`).
    pub slurmdbd: crate::assoc::slurmdbd::Source,
    /// Authorisation rules (partitions' access keys, associations, `PrivateData`, services),
    /// assembled by [`crate::daemon::controller`] from slurm.conf and `quotas`.
    pub access: crate::authz::Access,
    /// Per-user job limits (`MaxSubmitJobs`) checked at submission; `None`: none
    /// ([`crate::limits::JobLimitSource`]; [`crate::daemon::controller`] takes them from
    /// `quotas` when it sets any).
    pub job_limits: Option<Arc<dyn crate::limits::JobLimitSource>>,
    /// The accounting database as [`crate::daemon::controller`] loaded it (taken by the
    /// controller, which rebuilds the scheduler's accounting from it after every change).
    pub assoc_db: crate::assoc::AssocDb,
    /// `AccountingStorageEnforce`.
    pub enforce: flotilla_core::assoc::Enforce,
    /// The leader lease: how long a renewal keeps it (`SlurmctldTimeout`, [`crate::store::lease`]).
    pub lease_ttl: Duration,
    /// Where this controller listens (`host:port`), recorded with the lease for standbys and
    /// commands to follow.
    pub advertise: String,
    /// `--full-scan`: the scheduler searches a placement for every pending job every cycle
    /// (the old cycle, `Scheduler::set_full_scan`), to compare with the incremental one.
    pub full_scan: bool,
    /// A standby follows the store's job rows while it waits for the lease (PostgreSQL;
    /// [`crate::store::follow`]), so that its takeover reads only what changed; `false`
    /// (`--no-follow`): it reads everything at takeover, to compare.
    pub follow_store: bool,
    /// Where the controller's time comes from ([`crate::clock`]): the wall clock, or a
    /// scaled one for trace replay (`--time-scale`, test-only).
    pub clock: Arc<dyn crate::clock::Clock>,
    /// Each configured node's sockets, cores and threads (slurm.conf), by node name: which
    /// cores a job's CPUs are (`CPU_IDs=`, [`flotilla_core::cores`]). A node not here (or
    /// whose `CPUs=` is not sockets x cores x threads) counts as one socket of single-thread
    /// cores.
    pub core_layouts: HashMap<String, flotilla_core::cores::CoreLayout>,
}

impl Default for CtlOptions {
    fn default() -> Self {
        CtlOptions {
            tick: Duration::from_secs(1),
            sched_interval: Duration::from_secs(1),
            debounce: Duration::from_millis(20),
            batch_sched_delay: None,
            bf_max_job_test: flotilla_core::sched::BF_MAX_JOB_TEST,
            kill_invalid_depend: false,
            requeue_on_exit: Box::new([None; 256]),
            slurmd_timeout_s: 300,
            kill_wait_s: 30,
            min_job_age_s: 300,
            max_job_count: 1_000_000,
            first_job_id: 1,
            max_job_id: flotilla_core::config::DEFAULT_MAX_JOB_ID,
            admission: AdmissionConf {
                def_mem_per_cpu_mib: None,
                max_array_size: 1001,
                default_accounts: Default::default(),
                max_script_size: crate::limits::DEFAULT_MAX_SCRIPT_SIZE,
                node_kinds: Vec::new(),
            },
            check_invariants: true,
            minute_s: 60,
            alert_program: None,
            preempt_exempt_s: None,
            preempt_budget_pct: None,
            requeue_holdoff_s: 121,
            quotas: Default::default(),
            quota_error: None,
            slurmdbd: None,
            access: Default::default(),
            job_limits: None,
            assoc_db: Default::default(),
            enforce: Default::default(),
            lease_ttl: Duration::from_secs(6),
            advertise: String::new(),
            full_scan: false,
            follow_store: true,
            clock: Arc::new(crate::clock::RealClock),
            core_layouts: HashMap::new(),
        }
    }
}

#[derive(Debug)]
struct NodeSess {
    conn: u64,
    tx: mpsc::UnboundedSender<CtlToNode>,
    /// When the session last registered or sent a message (s since the epoch).
    last_heard: i64,
}

#[derive(Debug, Default)]
struct NodeRt {
    sess: Option<NodeSess>,
    down_since: Option<i64>,
    marked_down: bool,
    jobs: BTreeSet<u64>,
    /// When and by whom (uid) the node's reason was last set: Slurm's `reason_time` and
    /// `reason_uid` (sinfo `%H`, `%u`, `-R`; scontrol's `Reason=... [user@time]`).
    reason_set: Option<(i64, u32)>,
    /// The available and active features as `scontrol update` last set them (Slurm's
    /// `features`, `features_act`: `None` is `(null)`; active ones emptied by an update are
    /// `Some("")`); `None` while slurm.conf's `Features=` stand (both are the core node's).
    /// Not kept across a restart, as in Slurm without `-R`.
    shown_features: Option<(Option<String>, Option<String>)>,
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
    /// Scheduling cycle times since the start (`/metrics/scheduler`).
    cycle_hist: crate::metrics::Histogram,
    /// Queue waits of started jobs by gang size (`/metrics/scheduler`).
    queue_wait: crate::metrics::QueueWait,
}

/// The controller state, owned by one task.
#[derive(Debug)]
pub struct Controller {
    sched: Scheduler,
    store: Store,
    opts: CtlOptions,
    jobs: BTreeMap<u64, JobRecord>,
    core_map: HashMap<u64, u64>,
    deps: BTreeMap<u64, Dependency>,
    in_core_tasks: BTreeMap<u64, BTreeSet<u32>>,
    /// Ids of array metas (records with pending tasks), so that a cycle need not scan every
    /// job to find them (see `refresh_arrays`). A superset: ids leave it lazily.
    array_metas: BTreeSet<u64>,
    /// Pending records of single array tasks (split off by an update or a hold, see
    /// `split_array_task`; an array record left with its last task, see
    /// `array_record_to_task`; a task requeued, see `requeue_to_core`; or recovered) with
    /// whether the core has them: the array's `ArrayTaskThrottle` decides, in
    /// `refresh_arrays`. Not persisted (rebuilt at recovery).
    split_tasks: BTreeMap<u64, bool>,
    /// Arrays a started task left with one pending task in this turn: `flush` makes each
    /// array record that task's record (`settle_last_tasks`), once every bind of the turn is
    /// carried out.
    last_task_splits: BTreeSet<u64>,
    /// Slurm's backfill plan of the pending records the core expects to start (record id ->
    /// planned start and nodes, `Scheduler::backfill_plan`), what queries show as their
    /// start and `SchedNodeList`; made again at the first query after each cycle
    /// (`refresh_start_plan`). The cycle it was made after, and the last cycle's time.
    start_plan: BTreeMap<u64, flotilla_core::sched::PlannedStart>,
    start_plan_cycle: Option<u64>,
    last_cycle_at: i64,
    next_job_id: u64,
    nodes: Vec<NodeRt>,
    batch: WriteBatch,
    /// Answers to requests that changed state: sent after this turn's commit.
    replies: Vec<(oneshot::Sender<Reply>, Reply)>,
    /// Answers to queries, and refusals that changed nothing: sent at the end of the turn
    /// even when its commit failed.
    answers: Vec<(oneshot::Sender<Reply>, Reply)>,
    node_out: Vec<(usize, Outgoing)>,
    /// While the store cannot commit ([`durability`]): why, the replies and node messages
    /// of the uncommitted turns, held until a commit succeeds.
    degraded: Option<durability::Degraded>,
    sched_dirty: bool,
    /// The reason of pending jobs submitted, released or updated since the last scheduling
    /// cycle, shown until that cycle evaluates them: Slurm sets it outside its scheduler
    /// pass and only the next pass sets another. A release or an update: `None`
    /// (`_release_job_rec` and `_update_job`, `job_mgr.c`, set `WAIT_NO_REASON`; goldens
    /// 0218, 0221, 0231); a submission: what `job_allocate`'s test of it found
    /// ([`Controller::submit_reason`]). Not stored: a restarted controller runs a cycle first.
    reason_until_cycle: BTreeMap<u64, &'static str>,
    /// Unfinished jobs with a `--deadline`: the pending ones are checked before each
    /// scheduling cycle ([`Controller::end_missed_deadlines`]); a job leaves the set at the
    /// first check after it finished.
    deadlines: BTreeSet<u64>,
    /// Jobs being requeued for their exit code (`RequeueExit`, `RequeueExitHold`) until their
    /// nodes are done: the code they exited with (kept, as Slurm keeps `ExitCode=`) and
    /// whether held. Not kept across a restart (the requeue itself is, in the record).
    exit_requeues: HashMap<u64, (i32, bool)>,
    /// Pending job records by (priority, highest first, job id): the candidates of
    /// [`Controller::submit_reason`]'s `Priority` test, so a submission reads only the jobs
    /// ranked above it, not every pending job (a flood of submissions stays linear). A superset: every pending record's current key is in it (put there when the
    /// record is marked dirty, [`Controller::dirty`], and again when the turn's batch is
    /// written, after every change of the turn); keys a record no longer has are checked
    /// against the record when read, dropped then, and all at once when they outnumber the
    /// pending jobs. `None`: not built yet (a new controller or one that restored its
    /// records); built at its first use.
    prio_index: Option<BTreeSet<PrioKey>>,
    /// The jobs held per (user, account, partition, QOS) for the submit limits
    /// ([`crate::limits::SubmitCharges`]): built at the first submission under a job-count
    /// limit, then kept by [`Controller::dirty`] and the removals of records.
    submit_charges: crate::limits::SubmitCharges,
    /// The next cycle waits only for the debounce gap, not for
    /// [`CtlOptions::batch_sched_delay`]: since the last cycle a job's batch script ended, or
    /// an `srun`/`salloc` allocation was asked for (Slurm 22.05's `job_allocate` tries to
    /// place an allocation at once: `allocate` set, not only a test as for a batch job).
    cycle_unpaced: bool,
    stats: StatsAcc,
    started_at: i64,
    auth_failures: Arc<AtomicU64>,
    steps: steps::StepTable,
    svc: services::SvcState,
    /// `sacct` queries, answered after this turn's commit so they see it.
    acct_queries: Vec<(flotilla_proto::AcctQuery, oneshot::Sender<Reply>)>,
    /// Turns completed (see [`Controller::turns`]).
    turns: u64,
    /// Durations (µs) of the most recent turns that ran a scheduling cycle, from the first
    /// event handled to the effects sent ([`TURN_TIMES_KEPT`] at most; `Request::QueryTurnTimes`).
    turn_times: std::collections::VecDeque<u64>,
    /// `sdiag`'s counters ([`diag`]).
    diag: diag::DiagAcc,
    /// The accounting database (`sacctmgr`).
    assoc: crate::assoc::AssocDb,
    /// When fair-share usage was last put in a batch (s), and whether it was empty then.
    usage_saved: Option<(i64, bool)>,
    /// When jobs, nodes and partitions last changed ([`update_times`]).
    update: update_times::Tracker,
    /// The lowest priority given so far (Slurm's `lowest_prio`, from `TOP_PRIORITY`
    /// `0xffff0000`; numbering starts again there at recovery): see `set_job_prio`.
    lowest_prio: u32,
}

/// Slurm's `TOP_PRIORITY`: where priority/basic's numbering starts.
const TOP_PRIORITY: u32 = 0xffff_0000;

/// Another controller took the leader lease (`e` says who): this one must not write or send
/// anything again. It steps down at once by failing stop (STYLE.md): the process ends, and
/// restarted (systemd's `Restart=`, `flotilla dev up --ha`) it comes back as a standby.
pub(crate) fn step_down(e: &crate::store::StoreError) -> ! {
    tracing::error!("{e}: stepping down");
    panic!("stepping down: {e}");
}

/// Wall clock in seconds since the epoch (read only at the edge, here): credentials and
/// tokens. The controller's own time is [`CtlOptions::clock`]'s.
pub fn wall_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Controller {
    /// A controller over `sched` (built from the cluster config) and `store`, recovering the
    /// stored state.
    pub fn new(
        sched: Scheduler,
        store: Store,
        mut opts: CtlOptions,
        auth_failures: Arc<AtomicU64>,
        now: i64,
    ) -> Result<Controller, crate::store::StoreError> {
        let assoc = std::mem::take(&mut opts.assoc_db);
        let first_job_id = opts.first_job_id.max(1);
        let n = sched.cluster().nodes.len();
        let mut c = Controller {
            sched,
            store,
            opts,
            jobs: BTreeMap::new(),
            core_map: HashMap::new(),
            lowest_prio: TOP_PRIORITY,
            deps: BTreeMap::new(),
            in_core_tasks: BTreeMap::new(),
            array_metas: BTreeSet::new(),
            split_tasks: BTreeMap::new(),
            last_task_splits: BTreeSet::new(),
            start_plan: BTreeMap::new(),
            start_plan_cycle: None,
            last_cycle_at: now,
            next_job_id: first_job_id,
            nodes: (0..n).map(|_| NodeRt::default()).collect(),
            batch: WriteBatch::default(),
            replies: Vec::new(),
            answers: Vec::new(),
            node_out: Vec::new(),
            degraded: None,
            sched_dirty: true,
            reason_until_cycle: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            exit_requeues: HashMap::new(),
            prio_index: None,
            submit_charges: crate::limits::SubmitCharges::default(),
            cycle_unpaced: false,
            stats: StatsAcc::default(),
            started_at: now,
            auth_failures,
            steps: steps::StepTable::default(),
            svc: services::SvcState::default(),
            acct_queries: Vec::new(),
            turns: 0,
            turn_times: std::collections::VecDeque::new(),
            diag: diag::DiagAcc::default(),
            assoc,
            usage_saved: None,
            update: update_times::Tracker::new(now),
        };
        c.apply_accounting();
        c.recover(now)?;
        Ok(c)
    }

    /// Handles one event at `now` (s since the epoch) without committing: its reply and node
    /// messages wait for the end of the turn ([`Controller::turn`]), after the commit.
    pub fn handle(&mut self, event: Event, now: i64) {
        match event {
            Event::Rpc {
                req: Request::QueryAcct(mut q),
                reply,
                ident,
            } => {
                *self.stats.rpc.entry("DBD_GET_JOBS_COND").or_default() += 1;
                self.diag.rpc("DBD_GET_JOBS_COND", ident.uid, 0);
                // PrivateData=jobs: a user's accounting query sees their own jobs only (as
                // slurmdbd narrows the query to the caller's uid).
                if self.opts.access.hides_others_jobs(ident) {
                    q.uids = vec![ident.uid];
                }
                self.acct_queries.push((q, reply));
            }
            // The job queries (Slurm's REQUEST_JOB_INFO): `scontrol show job` encoded from
            // views, `squeue`'s fields whole or in parts, each after a look at the pending jobs
            // and with the backfill plan their start times show.
            Event::Rpc {
                req: req @ (Request::QueryJobs(_) | Request::QueryQueue(_) | Request::QueryQueueParts(_)),
                reply,
                ident,
            } => {
                let kind = "REQUEST_JOB_INFO";
                *self.stats.rpc.entry(kind).or_default() += 1;
                let t = std::time::Instant::now();
                self.look_at_pending();
                self.refresh_start_plan();
                match req {
                    // In parts: the connection task writes each as it comes (the reply leaves
                    // now, not with the phase's other answers), so that squeue reads the first
                    // jobs while the rest are encoded. Off the runtime's worker: a task woken
                    // from a worker waits in that worker's own slot until the running task
                    // (this one, encoding) yields, so the parts would leave only after the
                    // last is made; woken from elsewhere, the other worker writes each.
                    Request::QueryQueueParts(q) => {
                        let (tx, rx) = mpsc::unbounded_channel();
                        off_worker(|| {
                            if reply.send(Reply::Parts(rx)).is_ok() {
                                self.query_queue_parts(ident, &q, now, &tx);
                            }
                        });
                    }
                    Request::QueryJobs(q) => self.answers.push((reply, self.query_jobs_encoded(ident, &q, now))),
                    Request::QueryQueue(q) => self.answers.push((reply, self.query_queue(ident, &q, now).into())),
                    _ => self.answers.push((reply, Response::Error(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR)).into())),
                }
                self.diag.rpc(kind, ident.uid, t.elapsed().as_micros() as u64);
            }
            // `scontrol show job`'s second half (Slurm answers the whole record in one
            // REQUEST_JOB_INFO): not counted on its own, so that sdiag and the metrics read
            // as they did before elastic jobs.
            Event::Rpc {
                req: Request::QueryElastic { job_ids },
                reply,
                ident,
            } => {
                let resp = Response::Elastic(self.query_elastic(ident, &job_ids));
                self.answers.push((reply, resp.into()));
            }
            // Second halves of REQUEST_PARTITION_INFO, not counted either: `sinfo --largest`'s
            // reclaimable growth, and the states of partitions that are not up.
            Event::Rpc {
                req: req @ (Request::QueryReclaimable | Request::QueryPartitionStates),
                reply,
                ident,
            } => {
                let resp = match req {
                    Request::QueryReclaimable => Response::Reclaimable(self.query_reclaimable(ident)),
                    _ => Response::PartitionStates(self.query_partition_states(ident)),
                };
                self.answers.push((reply, resp.into()));
            }
            Event::Rpc { ident, req, reply } => {
                *self.stats.rpc.entry(req.kind()).or_default() += 1;
                let (kind, t) = (req.kind(), std::time::Instant::now());
                match durability::class(&req) {
                    durability::Class::Query => {
                        let resp = self.rpc(ident, req, now);
                        self.answers.push((reply, resp.into()));
                    }
                    durability::Class::NewWork if self.degraded.is_some() => {
                        let resp = Response::Error(SlurmError::new(ESLURM_WRITING_TO_FILE));
                        self.answers.push((reply, resp.into()));
                    }
                    _ => {
                        let resp = self.rpc(ident, req, now);
                        self.replies.push((reply, resp.into()));
                    }
                }
                self.diag.rpc(kind, ident.uid, t.elapsed().as_micros() as u64);
            }
            Event::NodeRegister { conn, reg, tx, reply } => {
                *self.stats.rpc.entry("MESSAGE_NODE_REGISTRATION_STATUS").or_default() += 1;
                self.diag.rpc("MESSAGE_NODE_REGISTRATION_STATUS", 0, 0);
                let resp = self.node_register(conn, reg, tx, now);
                self.replies.push((reply, resp.into()));
            }
            Event::NodeMsg { conn, node, msg } => self.node_msg(conn, &node, msg, now),
            Event::Metrics { kind, reply } => {
                let _ = reply.send(kind.map(|k| self.metrics_snapshot(k, now)));
            }
            Event::NodeGone { conn, node } => {
                if let Some(nid) = self.sched.cluster().node_id(&node) {
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
            Request::SubmitElastic(s) => self.submit_elastic(ident, *s, now),
            Request::CancelJob(c) => self.cancel(ident, c, now),
            Request::SignalStep(s) => self.signal_step(ident, s, now),
            Request::HoldRelease(h) => self.hold_release(ident, h, now),
            Request::Requeue(r) => self.requeue_rpc(ident, r, false, now),
            Request::RequeueSpecialExit(r) => self.requeue_rpc(ident, r, true, now),
            Request::UpdateJob(u) => self.update(ident, u, now),
            Request::QueryUpdateTimes => Response::UpdateTimes(self.update_times()),
            // PrivateData=nodes: node state is for admins (Slurm's `_slurm_rpc_dump_nodes`).
            Request::QueryNodes(_) if self.opts.access.private.nodes && !ident.admin => {
                Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED))
            }
            Request::QueryNodes(q) => Response::Nodes(self.query_nodes(&q)),
            Request::QueryPartitions => Response::Partitions(self.query_partitions(ident)),
            Request::Stats => Response::Stats(self.stats(now)),
            Request::Ping => Response::Pong,
            Request::UpdateNode(u) => self.update_node(ident, u, now),
            Request::UpdatePartition(u) => self.update_partition(ident, u, now),
            Request::CreateStep(r) => self.create_step(ident, *r, now),
            Request::StepComplete(c) => self.step_complete(ident, c, now),
            Request::QuerySteps(q) => Response::Steps(self.query_steps(ident, &q)),
            Request::ReleaseAllocation(r) => self.release_allocation(ident, r, now),
            Request::Diag => Response::Diag(Box::new(self.diag(now))),
            Request::DiagReset => {
                // Root, SlurmUser, or AdminLevel=Operator or above in the accounting database
                // (golden 0223: an Operator may reset, as slurmctld's validate_operator).
                let admin = ident.admin || self.assoc.is_operator(&crate::users::lookup(ident.uid));
                self.diag_reset(admin, now)
            }
            Request::AcctMgrShow => Response::AcctMgrData(self.assoc.data()),
            Request::AcctMgrChange(ch) => self.acctmgr_change(ident, ch),
            Request::QueryShares(q) => self.query_shares(&q),
            Request::QueryPriorities(q) => self.query_priorities(&q, now),
            Request::QueryTurns => Response::Turns { turns: self.turns, cycles: self.stats.cycles, cycle_due: self.sched_dirty },
            Request::QueryTurnTimes => Response::TurnTimes {
                turns_us: self.turn_times.iter().copied().collect(),
                cycles: self.stats.cycles,
            },
            r @ (Request::ServiceCreate(_)
            | Request::ServiceScale { .. }
            | Request::ServiceDelete { .. }
            | Request::QueryServices { .. }
            | Request::QueryAlerts) => self.service_rpc(ident, r, now),
            // Job and accounting queries and the uncounted second halves of others are
            // answered by `handle` (encoded, in parts, or after the commit); credentials,
            // tokens, registrations and takeovers by the connection task.
            Request::QueryJobs(_)
            | Request::QueryQueue(_)
            | Request::QueryQueueParts(_)
            | Request::QueryElastic { .. }
            | Request::QueryReclaimable
            | Request::QueryPartitionStates
            | Request::Takeover
            | Request::IssueCredential
            | Request::IssueToken { .. }
            | Request::Register(_)
            | Request::QueryAcct(_) => {
                Response::Error(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR))
            }
        }
    }

    /// The next job id for a record about to be made (Slurm's `get_next_job_id`, `job_mgr.c`):
    /// one sequence from `FirstJobId`, wrapping from `MaxJobId` (never given) and skipping
    /// ids in use, shared with the replicas the core makes ([`Scheduler::take_job_id`], see
    /// `Scheduler::share_job_ids`), the id held until its record is purged. `None` when every
    /// id is in use (Slurm refuses the submission with `EAGAIN`).
    fn take_id(&mut self) -> Option<u64> {
        let id = self.sched.take_job_id()?;
        self.sched.hold_job_id(id);
        self.sync_job_ids();
        Some(id)
    }

    /// The job id sequence where the core left it (past the replica ids it gave; persisted
    /// with the turn's commit, so a restart goes on from there).
    fn sync_job_ids(&mut self) {
        let next = self.sched.next_replica_id();
        if next != self.next_job_id && next < flotilla_core::sched::REPLICA_ID_BASE {
            self.next_job_id = next;
            self.batch.next_job_id = Some(next);
        }
    }

    fn dirty(&mut self, id: u64) {
        self.batch.jobs.insert(id);
        self.submit_charges.mark(id);
        self.set_job_prio(id);
        self.index_prio(id);
    }

    /// Drops [`Controller::prio_index`] when its keys outnumber twice the pending jobs (and
    /// a floor): rebuilt at its next use from the records, so keys of jobs that left the
    /// queue cost at most the pending jobs' own number.
    fn trim_prio_index(&mut self) {
        if self.prio_index.as_ref().is_some_and(|i| i.len() > 2 * self.sched.pending_len() + 4096) {
            self.prio_index = None;
        }
    }

    /// Puts pending record `id`'s current key into [`Controller::prio_index`] (when built).
    fn index_prio(&mut self, id: u64) {
        if let (Some(index), Some(rec)) = (self.prio_index.as_mut(), self.jobs.get(&id)) {
            if rec.state == JobState::Pending && !rec.is_array_meta() {
                index.insert(prio_key(rec));
            }
        }
    }

    /// Slurm 22.05's `set_job_prio` (`job_mgr.c`) with `priority/basic`'s `priority_p_set`:
    /// a pending job without a priority ([`crate::job::PRIO_UNSET`]: just submitted, released
    /// or requeued) gets one below every number given before, lowered further by its nice
    /// (never below 1); the lowest number given moves down by one, nice aside. So under
    /// `priority/basic` the first job is 4294901759 (`0xffff0000 - 1`), the next one less.
    fn set_job_prio(&mut self, id: u64) {
        if self.jobs.get(&id).is_some_and(|r| r.priority == crate::job::PRIO_UNSET && r.state == JobState::Pending) {
            self.number_job(id);
        }
    }

    /// Gives job `id` the next number of [`Controller::set_job_prio`] (whatever its state).
    fn number_job(&mut self, id: u64) {
        let Some(nice) = self.jobs.get(&id).map(|r| r.spec.nice) else { return };
        let p = self.next_prio(nice);
        if let Some(rec) = self.jobs.get_mut(&id) {
            rec.priority = p;
        }
    }

    /// The next number of [`Controller::set_job_prio`] for a job of `nice`, taken. Slurm
    /// takes one for every job record `job_allocate` creates, also for one it then refuses
    /// (`--test-only`'s `will_run`, a node configuration no node satisfies): they move the
    /// numbers of later jobs down as well.
    fn next_prio(&mut self, nice: i32) -> u32 {
        let last = self.lowest_prio;
        let mut p = if last >= 2 { i64::from(last) - 1 } else { 1 };
        let offset = i64::from(nice);
        if offset <= 0 || p > offset + 1 {
            p -= offset;
        }
        let prio = p.clamp(1, i64::from(u32::MAX - 2)) as u32;
        let relative = i64::from(prio) + offset;
        self.lowest_prio = relative.clamp(0, i64::from(u32::MAX)).min(i64::from(self.lowest_prio)) as u32;
        prio
    }

    fn send(&mut self, node: &str, msg: CtlToNode) {
        if let Some(nid) = self.sched.cluster().node_id(node) {
            self.node_out.push((nid.0 as usize, Outgoing::Msg(msg)));
        }
    }

    /// The scheduling core (tests, benchmarks).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// The state database (tests: what it holds).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Tests: whether the submit limits' charges, once built, equal a count of every record
    /// ([`crate::limits::SubmitCharges::scan`]), their count of keys holding jobs included;
    /// `Ok(false)` when not built. The error shows both.
    ///
    /// # Errors
    /// The two totals when they differ.
    pub fn submit_charges_match_records(&mut self) -> Result<bool, String> {
        if !self.submit_charges.is_built() {
            return Ok(false);
        }
        let kept: BTreeMap<crate::limits::ChargeKey, u64> =
            self.submit_charges.totals(&self.jobs).map(|(k, n)| (k.clone(), n)).collect();
        let scanned = crate::limits::SubmitCharges::scan(self.jobs.values());
        if kept == scanned && kept.len() == self.submit_charges.live() {
            Ok(true)
        } else {
            Err(format!("kept {kept:?} ({} live)\nscan {scanned:?}", self.submit_charges.live()))
        }
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
    rec.cores.clear();
    rec.completing_nodes.clear();
    rec.stopping = None;
    rec.end_state = None;
    rec.exit_code = 0;
    rec.exit_signal = 0;
    rec.reason = None;
    rec.acct.eligible_time = None;
    // Slurm's `_job_requeue_op`/`job_requeue` clear `state_reason_prev_db` (the requeued
    // run's accounting row keeps the value it had).
    rec.acct.reason_prev = None;
    // An elastic job starts again at its minimum: a new run, a new history.
    if let Some(e) = rec.elastic.as_mut() {
        e.grown.clear();
        e.resizes.clear();
    }
    // A node range starts again at its minimum, and takes what fits at its next start.
    if let Some(min) = rec.spec.request.nodes {
        rec.set_range_nodes(min);
    }
    rec.num_nodes = rec.spec.request.nodes.unwrap_or(rec.num_nodes);
    // A requeued job keeps its priority, 0 if held: Slurm 22.05 renumbers none (neither
    // `_job_requeue_op` nor the node-failure requeue of `kill_running_job_by_node_name`
    // calls `set_job_prio`; golden 0241 shows job 54's number from before, goldens-extra
    // 1013).
    if hold {
        rec.spec.held = Some(HoldKind::User);
        rec.reason = Some(REQUEUE_HOLD_REASON.into());
        rec.priority = 0;
    }
}
