//! Experiment `shared-fleet` (Lyra-like ablation, ANCHORS "Fair side-by-side" item 3): the
//! Alibaba DLRM inference services (NSDI'25) as Flotilla services over one ITP cluster's
//! training jobs, replayed by time through [`flotilla_core::sched::Scheduler`] with a virtual
//! clock (the structure of [`crate::gang`]).
//!
//! Two configurations on the same GPUs and the same workload:
//! - `static`: a dedicated inference pool (nodes flagged `inference_pool`, in their own
//!   partition that the services use) sized to the services' peak; training is not
//!   preemptible and runs in its own partition on the other nodes, so it never touches the pool.
//! - `shared`: one partition over every node, training preemptible, services preempt training
//!   under the default [`SchedConfig`] budget (warn 10 %, page 25 %, 10 min minimum runtime).
//!
//! Assumptions (the traces do not say):
//! - Services: `user_or_group` is the service; each instance is one 1-GPU replica
//!   (`Request::gpus(1, node)`). `max_per_node` (anti-affinity) is **ignored**: `Request` has no
//!   per-service spread limit. An instance lives from `creation_s` (0 when empty) to
//!   `deletion_s`; instances still alive at the trace end stay alive until the replay ends.
//!   Level-triggered: at every creation or deletion time the service gets `ServiceScale` to its
//!   current concurrent count. `min_replicas` = the service's minimum concurrent count over the
//!   window (its floor, never throttled by the budget); `max_replicas` = its peak. Replicas are
//!   never preempted (the core guarantees it; the replay checks it).
//! - Time: DLRM covers 31 days (2,677,541 s). ITP spans ~2 months: the window is the 31 days
//!   from `window_start_s` (default: the cluster's first arrival); ITP arrivals inside it are
//!   shifted to start at 0, with no time scaling. The DLRM clock starts at 0 at the same moment.
//! - Training: ITP jobs of the window on 8-GPU nodes, request and time limit as in
//!   [`crate::gang`] (walltime 2 × duration rounded up to an hour, capped at 7 days), FIFO
//!   priorities, queue `flotilla` (held reservations), placement `topo-bestfit`.
//! - Cluster size: training nodes = [`crate::gang::itp_nodes`] of the window's jobs (the
//!   unscaled window loads them to at most 1.0); pool nodes = ⌈service peak / 8⌉. The shared
//!   fleet has exactly the same nodes (training + pool), one partition.
//! - Checkpoints: each training job checkpoints every `ckpt_interval_s` (30 min) of run time;
//!   a preempted job loses the progress since its last periodic checkpoint (the "lost
//!   GPU-hours") and resumes from it. `ckpt_interval_s` = 0 means the job checkpoints at
//!   SIGTERM and loses nothing. Checkpoint size = `ckpt_bytes_per_gpu` (4 GiB) × GPUs; the
//!   victim releases its GPUs ⌈bytes / bandwidth⌉ s (at least 1 s) after the preemption, which
//!   is within the core's deadline. Periodic checkpoints are not reported to the core
//!   (`CheckpointAck`), so its page cost estimates count from the job's start.
//! - A backfill preemption (`PreemptBackfill` of held reservations) restarts the job from its
//!   last periodic checkpoint as well; it is counted apart from service preemptions.
//! - A scale-up is "satisfied within 60 s" when, within 60 s of the `ServiceScale` that raised
//!   the desired count to n, the service runs at least min(n, its desired count then) replicas.
//!   The initial deployment at t = 0 is not a scale-up.
//! - Utilisation = busy GPU-seconds / (GPUs × window) over the 31-day window only.
//! - The driver carries decisions out at once: a stopped replica (`StopReplica`) and the old
//!   replica of a `Relocate` end at the same instant (`JobEnded`), and the cycle repeats.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;

use flotilla_core::cluster::{Cluster, NodeId, NodeSpec, PartId, Time};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::sched::{Decision, Event, Scheduler, ServiceId, ServiceSpec, REPLICA_ID_BASE};
use serde::Serialize;

use crate::gang::{self, job_request, time_limit, Stats, TraceJob};
use crate::progress::{run_parallel, Progress};
use crate::report::{self, Series};
use crate::traces::TraceDir;
use crate::SimError;

/// DLRM trace end (s): the largest timestamp of `instances.csv`.
pub const DLRM_END_S: u64 = 2_677_541;

/// The configurations compared, in report order.
pub const CONFIGS: &[&str] = &["static", "shared"];

/// Options of the experiment.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// ITP cluster.
    pub cluster: String,
    /// Start of the ITP window (s on the ITP clock); `None` = the cluster's first arrival.
    pub window_start_s: Option<u64>,
    /// Window length (s); default the DLRM span.
    pub window_s: u64,
    /// Training nodes (8 GPUs); `None` = [`gang::itp_nodes`] of the window's jobs.
    pub train_nodes: Option<u32>,
    /// Inference pool nodes (8 GPUs); `None` = ⌈service peak / 8⌉.
    pub pool_nodes: Option<u32>,
    /// Periodic checkpoint interval of training (s of run time); 0 = checkpoint at SIGTERM.
    pub ckpt_interval_s: u64,
    /// Checkpoint bytes per training GPU.
    pub ckpt_bytes_per_gpu: u64,
    /// Walltime request factor (as `gang`).
    pub walltime_factor: f64,
    /// Keep only the first N training jobs of the window.
    pub max_jobs: Option<usize>,
    /// Keep only the first N service instances (rows).
    pub max_instances: Option<usize>,
    /// Seconds between samples.
    pub sample_s: u64,
    /// Check the scheduler's invariants after every cycle (default: debug builds).
    pub check_invariants: bool,
    /// Worker threads the configurations run on.
    pub jobs: usize,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            cluster: "cluster04".into(),
            window_start_s: None,
            window_s: DLRM_END_S,
            train_nodes: None,
            pool_nodes: None,
            ckpt_interval_s: 1800,
            ckpt_bytes_per_gpu: 4 << 30,
            walltime_factor: 2.0,
            max_jobs: None,
            max_instances: None,
            sample_s: 3600,
            check_invariants: cfg!(debug_assertions),
            jobs: 1,
        }
    }
}

/// One service instance: alive on `[start_s, end_s)`; `end_s` `None` = until the replay ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Service name.
    pub service: String,
    /// Creation (s).
    pub start_s: u64,
    /// Deletion (s).
    pub end_s: Option<u64>,
}

/// A service's desired-count timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceTimeline {
    /// The service (the trace's `user_or_group`).
    pub name: String,
    /// Count at t = 0.
    pub initial: u32,
    /// (time, count) at each change after 0.
    pub changes: Vec<(u64, u32)>,
    /// Minimum concurrent count.
    pub min: u32,
    /// Peak concurrent count.
    pub max: u32,
}

/// Per-service timelines from instances (services in name order).
pub fn timelines(instances: &[Instance]) -> Vec<ServiceTimeline> {
    let mut by: BTreeMap<&str, BTreeMap<u64, i64>> = BTreeMap::new();
    for i in instances {
        if i.end_s.is_some_and(|e| e <= i.start_s) {
            continue;
        }
        let m = by.entry(i.service.as_str()).or_default();
        *m.entry(i.start_s).or_default() += 1;
        if let Some(e) = i.end_s {
            *m.entry(e).or_default() -= 1;
        }
    }
    by.into_iter()
        .map(|(name, deltas)| {
            let mut n: i64 = 0;
            let mut initial = 0;
            let mut changes = Vec::new();
            for (t, d) in deltas {
                n += d;
                if t == 0 {
                    initial = n as u32;
                } else if d != 0 {
                    changes.push((t, n.max(0) as u32));
                }
            }
            let all = std::iter::once(initial).chain(changes.iter().map(|c| c.1));
            let min = all.clone().min().unwrap_or(0);
            let max = all.max().unwrap_or(0);
            ServiceTimeline { name: name.to_owned(), initial, changes, min, max }
        })
        .collect()
}

/// Peak concurrent replicas of all services together.
pub fn service_peak(tl: &[ServiceTimeline]) -> u32 {
    let mut deltas: BTreeMap<u64, i64> = BTreeMap::new();
    for s in tl {
        *deltas.entry(0).or_default() += i64::from(s.initial);
        let mut prev = i64::from(s.initial);
        for &(t, c) in &s.changes {
            *deltas.entry(t).or_default() += i64::from(c) - prev;
            prev = i64::from(c);
        }
    }
    let (mut n, mut peak) = (0i64, 0i64);
    for d in deltas.values() {
        n += d;
        peak = peak.max(n);
    }
    peak as u32
}

/// One sample over time.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Sample {
    /// Virtual time (s).
    pub t: u64,
    /// GPUs held by training.
    pub train_gpus: u64,
    /// GPUs held by replicas.
    pub replica_gpus: u64,
    /// Pending training jobs.
    pub pending: usize,
    /// `Scheduler::preempted_share_pct`.
    pub preempted_share_pct: u32,
}

/// The result of one configuration.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSummary {
    /// `static` or `shared`.
    pub config: String,
    /// Training jobs.
    pub jobs: usize,
    /// Training statistics (queueing = JCT − time holding GPUs).
    pub training: Stats,
    /// All GPUs busy over the window, percent.
    pub utilisation_pct: f64,
    /// Training share of the window's GPU-seconds, percent.
    pub train_utilisation_pct: f64,
    /// Replica share of the window's GPU-seconds, percent.
    pub service_utilisation_pct: f64,
    /// Service preemptions (`Decision::Preempt`).
    pub preemptions: u64,
    /// Per hour of the window.
    pub preemptions_per_hour: f64,
    /// GPU-hours lost to service preemptions (progress since the last checkpoint).
    pub lost_gpu_hours: f64,
    /// Backfill preemptions (`PreemptBackfill`).
    pub backfill_preemptions: u64,
    /// GPU-hours lost to backfill preemptions.
    pub backfill_lost_gpu_hours: f64,
    /// Preemptions of replicas or of non-preemptible jobs (must be 0).
    pub bad_preemptions: u64,
    /// Scale-ups (`ServiceScale` raising the desired count), after t = 0.
    pub scale_ups: u64,
    /// Of which satisfied within 60 s.
    pub scale_ups_within_60s: u64,
    /// `scale_ups_within_60s` as a share of `scale_ups`, in percent (100 when none).
    pub scale_ups_within_60s_pct: f64,
    /// Pages raised (`Decision::Page`).
    pub pages: u64,
    /// Budget warnings.
    pub budget_warnings: u64,
    /// Highest sampled preempted share (%).
    pub max_preempted_share_pct: u32,
    /// Replica relocations.
    pub relocations: u64,
    /// Replicas started.
    pub replicas_started: u64,
    /// Cycles run.
    pub cycles: u64,
    /// Last event (s).
    pub makespan_s: u64,
    /// Samples every `sample_s` (not serialised).
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Service preemptions: (time, job id), in order.
    #[serde(skip)]
    pub victims: Vec<(Time, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A training job ends (index, generation).
    End(usize, u32),
    /// A preempted job has written its checkpoint and exits (index, generation).
    Exit(usize, u32),
    /// A service's desired count changes (service index, count).
    Scale(usize, u32),
    /// A training job arrives.
    Arrive(usize),
    /// The 60 s check of scale-ups.
    Check,
}

/// The fleet: `train` 8-GPU nodes then `pool` 8-GPU nodes. `static` splits them into
/// partition 0 (training) and partition 1 (the inference pool, flagged); `shared` has one.
pub fn fleet_cluster(train: u32, pool: u32, split: bool) -> (Cluster, PartId, PartId) {
    let n = (train + pool) as usize;
    let specs: Vec<NodeSpec> = (0..n)
        .map(|i| NodeSpec {
            name: format!("n{:04}", i + 1),
            gpus: 8,
            gpu_type: None,
            cpu_milli: 96_000,
            mem_mib: 1 << 20,
            pod: format!("pod{}", i / 32),
        })
        .collect();
    let mut c = Cluster::from_specs(&specs);
    if split {
        let t = c.add_partition("batch", (0..train).map(NodeId).collect(), true);
        let p = c.add_partition("infer", (train..train + pool).map(NodeId).collect(), false);
        for i in train..train + pool {
            c.nodes[i as usize].inference_pool = true;
        }
        (c, t, p)
    } else {
        let t = c.add_partition("batch", (0..n as u32).map(NodeId).collect(), true);
        (c, t, t)
    }
}

/// Replays one configuration (`static` or `shared`). `jobs` sorted by arrival, times from 0.
///
/// Panics if the scheduler breaks an invariant (checked when `opts.check_invariants`).
pub fn replay(jobs: &[TraceJob], services: &[ServiceTimeline], train_nodes: u32, pool_nodes: u32, config: &str, opts: &FleetOptions) -> Result<RunSummary, SimError> {
    let split = match config {
        "static" => true,
        "shared" => false,
        _ => return Err(SimError::UnknownPolicy { name: config.to_owned() }),
    };
    let (cluster, train_part, svc_part) = fleet_cluster(train_nodes, pool_nodes, split);
    let sched_config = flotilla_plugins::queue("flotilla").expect("registered");
    let placement = flotilla_plugins::placement("topo-bestfit").expect("registered");
    let priority = flotilla_plugins::priority("priority/basic").expect("registered");
    let sched = Scheduler::new(cluster, placement, priority, sched_config);
    let mut fleet = Fleet::new(sched, jobs, services, train_part, split, opts);
    // Services at t = 0 (the trace clock's origin).
    let t0: Time = 0;
    for (k, s) in services.iter().enumerate() {
        fleet.event(
            Event::ServiceUpsert(ServiceSpec {
                id: ServiceId(k as u32),
                name: s.name.clone(),
                partition: svc_part,
                account: "inference".into(),
                user: s.name.clone(),
                replica: Request::gpus(1, TopologyKind::Node),
                min_replicas: s.min,
                max_replicas: s.max,
                desired_replicas: s.initial,
                priority: 0,
            }),
            t0,
        );
    }
    let mut t: Time = t0;
    loop {
        fleet.advance_to(t);
        while let Some(Reverse((t2, ev))) = fleet.heap.peek().copied() {
            if t2 != t {
                break;
            }
            fleet.heap.pop();
            fleet.fire(ev, t);
        }
        fleet.run_cycles(t);
        fleet.settle_scale_ups(t);
        match fleet.heap.peek() {
            Some(Reverse((t2, _))) => t = *t2,
            None => break,
        }
    }
    Ok(fleet.summary(config, u64::from(train_nodes + pool_nodes) * 8))
}

/// Counters of one replay, reported in [`RunSummary`].
#[derive(Debug, Default)]
struct Counts {
    scale_ups: u64,
    satisfied: u64,
    preemptions: u64,
    lost: f64,
    bf_preemptions: u64,
    bf_lost: f64,
    bad: u64,
    pages: u64,
    warnings: u64,
    relocations: u64,
    started_repl: u64,
    cycles: u64,
}

/// The replay's driver: the virtual world the scheduler's decisions act on (training jobs'
/// run segments, replicas, scale-ups being checked) and what it measures.
struct Fleet<'a> {
    sched: Scheduler,
    jobs: &'a [TraceJob],
    opts: &'a FleetOptions,
    train_part: PartId,
    split: bool,
    /// Checkpoint bandwidth the victims write at (bytes/s).
    bw: u64,
    window: Time,
    heap: BinaryHeap<Reverse<(Time, Ev)>>,
    /// Per job: generation (bumped when a run segment is interrupted), remaining work (s),
    /// start of the current run segment, seconds holding GPUs, end.
    gen: Vec<u32>,
    remaining: Vec<u64>,
    seg_start: Vec<Option<Time>>,
    held_s: Vec<u64>,
    end: Vec<Option<Time>>,
    desired: Vec<u32>,
    running_repl: Vec<u32>,
    replica_of: BTreeMap<JobId, usize>,
    /// Outstanding scale-ups: (deadline, service, wanted).
    outstanding: Vec<(Time, usize, u32)>,
    n: Counts,
    busy_train: u64,
    busy_repl: u64,
    train_gpu_s: f64,
    repl_gpu_s: f64,
    samples: Vec<Sample>,
    victims: Vec<(Time, u64)>,
    next_sample: Time,
    last_t: Time,
}

impl<'a> Fleet<'a> {
    fn new(sched: Scheduler, jobs: &'a [TraceJob], services: &[ServiceTimeline], train_part: PartId, split: bool, opts: &'a FleetOptions) -> Fleet<'a> {
        let bw = sched.config().storage_bw_bytes_per_s.max(1);
        let mut heap: BinaryHeap<Reverse<(Time, Ev)>> = jobs.iter().enumerate().map(|(i, j)| Reverse((j.submit_s, Ev::Arrive(i)))).collect();
        for (k, s) in services.iter().enumerate() {
            for &(t, c) in &s.changes {
                heap.push(Reverse((t, Ev::Scale(k, c))));
            }
        }
        let n = jobs.len();
        Fleet {
            sched,
            jobs,
            opts,
            train_part,
            split,
            bw,
            window: opts.window_s.max(1),
            heap,
            gen: vec![0; n],
            remaining: jobs.iter().map(|j| j.duration_s.max(1)).collect(),
            seg_start: vec![None; n],
            held_s: vec![0; n],
            end: vec![None; n],
            desired: services.iter().map(|s| s.initial).collect(),
            running_repl: vec![0; services.len()],
            replica_of: BTreeMap::new(),
            outstanding: Vec::new(),
            n: Counts::default(),
            busy_train: 0,
            busy_repl: 0,
            train_gpu_s: 0.0,
            repl_gpu_s: 0.0,
            samples: Vec::new(),
            victims: Vec::new(),
            next_sample: 0,
            last_t: 0,
        }
    }

    /// Training job `i`'s spec: its trace request, the walltime limit, preemptible when the
    /// fleet is shared, checkpoint bytes by GPUs.
    fn spec(&self, i: usize) -> JobSpec {
        let j = &self.jobs[i];
        let mut s = JobSpec::simple(i as u64 + 1, j.submit_s, job_request(j.gpus, 8), Some(time_limit(j.duration_s, self.opts.walltime_factor)));
        s.partition = self.train_part;
        s.preemptible = !self.split;
        s.checkpoint_bytes = self.opts.ckpt_bytes_per_gpu * u64::from(j.gpus);
        s
    }

    /// Progress kept when a run segment of `ran` seconds is interrupted.
    fn saved(&self, ran: u64) -> u64 {
        if self.opts.ckpt_interval_s == 0 {
            ran
        } else {
            ran - ran % self.opts.ckpt_interval_s
        }
    }

    /// Integrates busy GPUs over [last event, `t`) inside the window and takes the samples due.
    fn advance_to(&mut self, t: Time) {
        let (a, b) = (self.last_t.min(self.window), t.min(self.window));
        self.train_gpu_s += self.busy_train as f64 * (b - a) as f64;
        self.repl_gpu_s += self.busy_repl as f64 * (b - a) as f64;
        while self.next_sample <= t {
            self.samples.push(Sample {
                t: self.next_sample,
                train_gpus: self.busy_train,
                replica_gpus: self.busy_repl,
                pending: self.sched.pending_ids().filter(|id| id.0 < REPLICA_ID_BASE).count(),
                preempted_share_pct: self.sched.preempted_share_pct(self.next_sample),
            });
            self.next_sample += self.opts.sample_s.max(1);
        }
        self.last_t = t;
    }

    /// Feeds the scheduler an event at `t`; its decisions go through [`Fleet::apply`].
    /// Returns true when they ask for another cycle.
    fn event(&mut self, e: Event, t: Time) -> bool {
        let d = self.sched.handle(e, t);
        self.apply(d, t)
    }

    /// One timed event of the replay at `t`.
    fn fire(&mut self, ev: Ev, t: Time) {
        match ev {
            Ev::Arrive(i) => {
                let spec = self.spec(i);
                self.event(Event::Submit(spec), t);
            }
            Ev::End(i, g) => {
                if g == self.gen[i] && self.end[i].is_none() {
                    if let Some(s) = self.seg_start[i].take() {
                        self.event(Event::JobEnded(JobId(i as u64 + 1)), t);
                        self.end[i] = Some(t);
                        self.held_s[i] += t - s;
                        self.busy_train -= u64::from(self.jobs[i].gpus);
                    }
                }
            }
            Ev::Exit(i, g) => {
                if g == self.gen[i] {
                    if let Some(s) = self.seg_start[i].take() {
                        self.event(Event::Requeued(JobId(i as u64 + 1)), t);
                        self.held_s[i] += t - s;
                        self.busy_train -= u64::from(self.jobs[i].gpus);
                    }
                }
            }
            Ev::Scale(k, c) => {
                if c > self.desired[k] {
                    self.n.scale_ups += 1;
                    self.outstanding.push((t + 60, k, c));
                    self.heap.push(Reverse((t + 60, Ev::Check)));
                }
                self.desired[k] = c;
                self.event(Event::ServiceScale { service: ServiceId(k as u32), desired: c }, t);
            }
            Ev::Check => {}
        }
    }

    /// Cycles at `t`, carrying out the decisions, and cycles again (at most 16 times) while
    /// carrying them out freed GPUs at once.
    fn run_cycles(&mut self, t: Time) {
        for _round in 0..16 {
            let decisions = self.sched.cycle(t);
            self.n.cycles += 1;
            if self.opts.check_invariants {
                if let Err(e) = self.sched.check_invariants() {
                    panic!("scheduler invariant broken at t={t}: {e}");
                }
            }
            if !self.apply(decisions, t) {
                break;
            }
        }
    }

    /// The driver's one path for decisions, carried out at `t`: a bind starts a run segment
    /// (its end scheduled after the remaining work), a replica bind counts the replica, a
    /// stopped replica and the old replica of a relocation end at once, a preemption's
    /// victim exits when its checkpoint is written (keeping the progress of its last
    /// periodic checkpoint), a backfill preemption requeues the job at once; pages and
    /// budget warnings are counted. Returns true when GPUs were freed at once (cycle again).
    fn apply(&mut self, decisions: Vec<Decision>, t: Time) -> bool {
        let mut again = false;
        for d in decisions {
            match d {
                Decision::Bind { job, .. } => {
                    let i = (job.0 - 1) as usize;
                    self.seg_start[i] = Some(t);
                    self.busy_train += u64::from(self.jobs[i].gpus);
                    self.heap.push(Reverse((t + self.remaining[i], Ev::End(i, self.gen[i]))));
                }
                Decision::BindReplica { service, replica, .. } => {
                    let k = service.0 as usize;
                    self.replica_of.insert(replica, k);
                    self.running_repl[k] += 1;
                    self.busy_repl += 1;
                    self.n.started_repl += 1;
                }
                Decision::StopReplica { replica, .. } => {
                    if let Some(k) = self.replica_of.remove(&replica) {
                        self.running_repl[k] -= 1;
                        self.busy_repl -= 1;
                    }
                    self.event(Event::JobEnded(replica), t);
                    again = true;
                }
                Decision::Relocate { service, from, to, .. } => {
                    self.n.relocations += 1;
                    self.replica_of.insert(to, service.0 as usize);
                    self.replica_of.remove(&from);
                    self.event(Event::JobEnded(from), t);
                    again = true;
                }
                Decision::Preempt { job, checkpoint_bytes, deadline, .. } => self.preempt(job, checkpoint_bytes, deadline, t),
                Decision::PreemptBackfill { job, .. } => {
                    self.n.bf_preemptions += 1;
                    let i = (job.0 - 1) as usize;
                    if let Some(s) = self.seg_start[i].take() {
                        let ran = t - s;
                        let keep = self.saved(ran).min(self.remaining[i].saturating_sub(1));
                        self.n.bf_lost += f64::from(self.jobs[i].gpus) * (ran - keep) as f64 / 3600.0;
                        self.remaining[i] -= keep;
                        self.held_s[i] += ran;
                        self.busy_train -= u64::from(self.jobs[i].gpus);
                    }
                    self.gen[i] += 1;
                    self.event(Event::Requeued(job), t);
                    again = true;
                }
                Decision::Page(_) => self.n.pages += 1,
                Decision::Alert { kind: flotilla_core::sched::AlertKind::PreemptionBudgetWarn, .. } => self.n.warnings += 1,
                _ => {}
            }
        }
        again
    }

    /// A service preemption of `job` decided at `t`: it keeps the progress of its last
    /// periodic checkpoint and exits once its checkpoint is written (within `deadline`). A
    /// replica or, in the static fleet, any job preempted is counted as bad.
    fn preempt(&mut self, job: JobId, checkpoint_bytes: u64, deadline: Time, t: Time) {
        self.n.preemptions += 1;
        self.victims.push((t, job.0));
        if job.0 >= REPLICA_ID_BASE || self.split {
            self.n.bad += 1;
            return;
        }
        let i = (job.0 - 1) as usize;
        if let Some(s) = self.seg_start[i] {
            let ran = t - s;
            let keep = self.saved(ran).min(self.remaining[i].saturating_sub(1));
            self.n.lost += f64::from(self.jobs[i].gpus) * (ran - keep) as f64 / 3600.0;
            self.remaining[i] -= keep;
        }
        self.gen[i] += 1;
        let exit = (t + checkpoint_bytes.div_ceil(self.bw).max(1)).min(deadline.max(t + 1));
        self.heap.push(Reverse((exit, Ev::Exit(i, self.gen[i]))));
    }

    /// Scale-ups: satisfied when the service runs what was wanted (or what is wanted now);
    /// dropped unsatisfied at their deadline.
    fn settle_scale_ups(&mut self, t: Time) {
        let (running_repl, desired, n) = (&self.running_repl, &self.desired, &mut self.n);
        self.outstanding.retain(|&(deadline, k, want)| {
            if running_repl[k] >= want.min(desired[k]) {
                n.satisfied += 1;
                false
            } else {
                deadline > t
            }
        });
    }

    /// The replay's summary for configuration `config` on `total_gpus` GPUs.
    fn summary(self, config: &str, total_gpus: u64) -> RunSummary {
        let (mut all_j, mut all_q) = (Vec::new(), Vec::new());
        for (i, j) in self.jobs.iter().enumerate() {
            let Some(e) = self.end[i] else { continue };
            let jct = (e - j.submit_s) as f64;
            all_j.push(jct);
            all_q.push(jct - self.held_s[i] as f64);
        }
        let window = self.window;
        let denom = total_gpus as f64 * window as f64;
        let hours = window as f64 / 3600.0;
        let n = &self.n;
        RunSummary {
            config: config.to_owned(),
            jobs: self.jobs.len(),
            training: gang::stats(&all_j, &all_q),
            utilisation_pct: (self.train_gpu_s + self.repl_gpu_s) * 100.0 / denom,
            train_utilisation_pct: self.train_gpu_s * 100.0 / denom,
            service_utilisation_pct: self.repl_gpu_s * 100.0 / denom,
            preemptions: n.preemptions,
            preemptions_per_hour: n.preemptions as f64 / hours,
            lost_gpu_hours: n.lost,
            backfill_preemptions: n.bf_preemptions,
            backfill_lost_gpu_hours: n.bf_lost,
            bad_preemptions: n.bad,
            scale_ups: n.scale_ups,
            scale_ups_within_60s: n.satisfied,
            scale_ups_within_60s_pct: if n.scale_ups == 0 { 100.0 } else { n.satisfied as f64 * 100.0 / n.scale_ups as f64 },
            pages: n.pages,
            budget_warnings: n.warnings,
            max_preempted_share_pct: self.samples.iter().map(|s| s.preempted_share_pct).max().unwrap_or(0),
            relocations: n.relocations,
            replicas_started: n.started_repl,
            cycles: n.cycles,
            makespan_s: self.last_t,
            samples: self.samples,
            victims: self.victims,
        }
    }
}

/// The experiment's results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetReport {
    /// `itp/<cluster> + dlrm`.
    pub workload: String,
    /// ITP window start (s, ITP clock).
    pub window_start_s: u64,
    /// Window (s).
    pub window_s: u64,
    /// Training nodes (8 GPUs).
    pub train_nodes: u32,
    /// Pool nodes (8 GPUs).
    pub pool_nodes: u32,
    /// Services in the DLRM trace.
    pub services: usize,
    /// Service peak (replicas).
    pub service_peak: u32,
    /// Training GPU-seconds.
    pub train_work_gpu_s: f64,
    /// Training offered load on the training nodes.
    pub train_load: f64,
    /// Checkpoint interval (s).
    pub ckpt_interval_s: u64,
    /// Checkpoint bytes per GPU.
    pub ckpt_bytes_per_gpu: u64,
    /// Runs in [`CONFIGS`] order.
    pub runs: Vec<RunSummary>,
}

/// Runs both configurations on explicit inputs (fixtures, reduced runs). `jobs` times from 0;
/// node counts from `opts` or the defaults (see the module docs).
pub fn run_with(workload: &str, jobs: &[TraceJob], instances: &[Instance], window_start_s: u64, opts: &FleetOptions, progress: &dyn Progress) -> Result<FleetReport, SimError> {
    let mut jobs = jobs.to_vec();
    jobs.sort_by_key(|j| j.submit_s);
    for j in &mut jobs {
        j.duration_s = j.duration_s.max(1);
    }
    let tl = timelines(instances);
    let peak = service_peak(&tl);
    let train = opts.train_nodes.unwrap_or_else(|| gang::itp_nodes(&jobs));
    let pool = opts.pool_nodes.unwrap_or(peak.div_ceil(8).max(1));
    let (w, _) = gang::work_and_span(&jobs);
    progress.add_total(CONFIGS.len() as u64);
    let runs = run_parallel(CONFIGS, opts.jobs, |c| {
        let r = replay(&jobs, &tl, train, pool, c, opts);
        progress.advance(1, &format!("{workload} {c}"));
        r
    });
    let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok(FleetReport {
        workload: workload.to_owned(),
        window_start_s,
        window_s: opts.window_s,
        train_nodes: train,
        pool_nodes: pool,
        services: tl.len(),
        service_peak: peak,
        train_work_gpu_s: w,
        train_load: w / (f64::from(train) * 8.0 * opts.window_s.max(1) as f64),
        ckpt_interval_s: opts.ckpt_interval_s,
        ckpt_bytes_per_gpu: opts.ckpt_bytes_per_gpu,
        runs,
    })
}

/// Loads the inputs from the trace files: (window start, training jobs from 0, instances).
pub fn load(traces: &TraceDir, opts: &FleetOptions) -> Result<(u64, Vec<TraceJob>, Vec<Instance>), SimError> {
    let itp = traces.itp_cluster_jobs(&opts.cluster)?;
    if itp.is_empty() {
        return Err(SimError::UnknownItpCluster { cluster: opts.cluster.clone() });
    }
    let w0 = opts.window_start_s.unwrap_or_else(|| itp.iter().map(|j| j.submit_s).min().unwrap_or(0));
    let mut jobs: Vec<TraceJob> = itp
        .iter()
        .filter(|j| j.submit_s >= w0 && j.submit_s < w0 + opts.window_s)
        .map(|j| TraceJob { submit_s: j.submit_s - w0, gpus: j.gpus, duration_s: j.duration_s })
        .collect();
    jobs.sort_by_key(|j| j.submit_s);
    if let Some(m) = opts.max_jobs {
        jobs.truncate(m);
    }
    let mut inst: Vec<Instance> = traces
        .dlrm_instances()?
        .iter()
        .map(|d| Instance {
            service: d.service().to_owned(),
            start_s: d.creation_s.map_or(0, |c| c.max(0.0).round() as u64),
            end_s: d.deletion_s.map(|e| e.max(0.0).round() as u64),
        })
        .collect();
    if let Some(m) = opts.max_instances {
        inst.truncate(m);
    }
    Ok((w0, jobs, inst))
}

/// Runs the experiment on the real trace files.
pub fn run(traces: &TraceDir, opts: &FleetOptions, progress: &dyn Progress) -> Result<FleetReport, SimError> {
    let (w0, jobs, inst) = load(traces, opts)?;
    run_with(&format!("itp/{} + dlrm", opts.cluster), &jobs, &inst, w0, opts, progress)
}

impl FleetReport {
    fn get(&self, c: &str) -> Option<&RunSummary> {
        self.runs.iter().find(|r| r.config == c)
    }

    /// static / shared ratios of mean queueing and mean JCT (Lyra: 1.53× and 1.48×).
    pub fn ratios(&self) -> (f64, f64) {
        match (self.get("static"), self.get("shared")) {
            (Some(s), Some(f)) => (s.training.queue_mean_s / f.training.queue_mean_s, s.training.jct_mean_s / f.training.jct_mean_s),
            _ => (f64::NAN, f64::NAN),
        }
    }

    /// The `summary.json` value (`"policies"`: one object per configuration).
    pub fn summary_json(&self) -> serde_json::Value {
        let mut policies = serde_json::Map::new();
        for r in &self.runs {
            policies.insert(r.config.clone(), serde_json::to_value(r).unwrap_or_default());
        }
        let (q, j) = self.ratios();
        let num = |x: f64| if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null };
        serde_json::json!({
            "experiment": "shared-fleet",
            "workload": self.workload,
            "window_start_s": self.window_start_s,
            "window_s": self.window_s,
            "train_nodes": self.train_nodes,
            "pool_nodes": self.pool_nodes,
            "gpus_per_node": 8,
            "total_gpus": (self.train_nodes + self.pool_nodes) * 8,
            "services": self.services,
            "service_peak_replicas": self.service_peak,
            "train_work_gpu_hours": self.train_work_gpu_s / 3600.0,
            "train_offered_load_on_train_nodes": self.train_load,
            "ckpt_interval_s": self.ckpt_interval_s,
            "ckpt_bytes_per_gpu": self.ckpt_bytes_per_gpu,
            "improvement_static_over_shared": { "queue_mean": num(q), "jct_mean": num(j), "lyra_queue_mean": 1.53, "lyra_jct_mean": 1.48 },
            "policies": policies,
        })
    }

    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{}: {} training + {} pool nodes × 8 GPUs, {} services (peak {}), training load {:.2} on its nodes\n{:<7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6} {:>8} {:>8} {:>7} {:>6}\n",
            self.workload, self.train_nodes, self.pool_nodes, self.services, self.service_peak, self.train_load,
            "config", "jobs", "q_mean", "q_p50", "q_p95", "jct_mean", "jct_p50", "jct_p95", "util%", "trn%", "svc%", "preem/h", "lost_gh", "up60s%", "pages"
        );
        for r in &self.runs {
            let t = &r.training;
            s += &format!(
                "{:<7} {:>6} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>6.1} {:>6.1} {:>6.1} {:>8.2} {:>8.1} {:>7.2} {:>6}\n",
                r.config, t.jobs, t.queue_mean_s, t.queue_p50_s, t.queue_p95_s, t.jct_mean_s, t.jct_p50_s, t.jct_p95_s, r.utilisation_pct, r.train_utilisation_pct, r.service_utilisation_pct, r.preemptions_per_hour, r.lost_gpu_hours, r.scale_ups_within_60s_pct, r.pages
            );
        }
        let (q, j) = self.ratios();
        s += &format!("static/shared: queueing {q:.2}x, JCT {j:.2}x (Lyra: 1.53x, 1.48x; direction only)\n");
        s
    }

    /// Writes `summary.json`, `shared_fleet_summary.csv`, `shared_fleet_timeseries.csv` and
    /// `shared_fleet_training_gpus.png` into `out`.
    pub fn write(&self, out: &Path) -> Result<(), SimError> {
        report::write_json(&out.join("summary.json"), &self.summary_json())?;
        let head = [
            "config", "jobs", "completed", "queue_mean_s", "queue_p50_s", "queue_p95_s", "jct_mean_s", "jct_p50_s", "jct_p95_s", "utilisation_pct", "train_utilisation_pct", "service_utilisation_pct", "preemptions", "preemptions_per_hour", "lost_gpu_hours", "backfill_preemptions", "backfill_lost_gpu_hours", "scale_ups", "scale_ups_within_60s", "scale_ups_within_60s_pct", "pages", "budget_warnings", "max_preempted_share_pct",
        ];
        let mut rows = vec![head.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        let f = |x: f64| format!("{x:.2}");
        for r in &self.runs {
            let t = &r.training;
            rows.push(vec![
                r.config.clone(),
                r.jobs.to_string(),
                t.jobs.to_string(),
                f(t.queue_mean_s),
                f(t.queue_p50_s),
                f(t.queue_p95_s),
                f(t.jct_mean_s),
                f(t.jct_p50_s),
                f(t.jct_p95_s),
                f(r.utilisation_pct),
                f(r.train_utilisation_pct),
                f(r.service_utilisation_pct),
                r.preemptions.to_string(),
                format!("{:.4}", r.preemptions_per_hour),
                f(r.lost_gpu_hours),
                r.backfill_preemptions.to_string(),
                f(r.backfill_lost_gpu_hours),
                r.scale_ups.to_string(),
                r.scale_ups_within_60s.to_string(),
                f(r.scale_ups_within_60s_pct),
                r.pages.to_string(),
                r.budget_warnings.to_string(),
                r.max_preempted_share_pct.to_string(),
            ]);
        }
        report::write_csv(&out.join("shared_fleet_summary.csv"), &rows)?;
        let mut ts = vec![["config", "t_s", "train_gpus", "replica_gpus", "pending_training", "preempted_share_pct"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for r in &self.runs {
            for s in &r.samples {
                ts.push(vec![r.config.clone(), s.t.to_string(), s.train_gpus.to_string(), s.replica_gpus.to_string(), s.pending.to_string(), s.preempted_share_pct.to_string()]);
            }
        }
        report::write_csv(&out.join("shared_fleet_timeseries.csv"), &ts)?;
        let series: Vec<Series> = self
            .runs
            .iter()
            .flat_map(|r| {
                [
                    Series { name: format!("{} training", r.config), points: r.samples.iter().map(|s| (s.t as f64 / 86_400.0, s.train_gpus as f64)).collect() },
                    Series { name: format!("{} services", r.config), points: r.samples.iter().map(|s| (s.t as f64 / 86_400.0, s.replica_gpus as f64)).collect() },
                ]
            })
            .collect();
        report::plot_lines(&out.join("shared_fleet_gpus.png"), &format!("{}: GPUs in use", self.workload), "days", "GPUs", &series)?;
        let series: Vec<Series> = self
            .runs
            .iter()
            .map(|r| Series { name: r.config.clone(), points: r.samples.iter().map(|s| (s.t as f64 / 86_400.0, s.pending as f64)).collect() })
            .collect();
        report::plot_lines(&out.join("shared_fleet_pending.png"), &format!("{}: pending training jobs", self.workload), "days", "pending jobs", &series)?;
        Ok(())
    }
}
