//! Experiment `gang`: gang scheduling, held reservations and backfill on time-driven replays
//! of Microsoft ITP (one cluster, 8-GPU nodes) and Philly (its real 552 machines, 2 and 8
//! GPUs), through [`flotilla_core::sched::Scheduler`] with a virtual clock.
//!
//! Discrete events: arrivals and job ends (start + the trace's duration). After each batch of
//! same-time events the scheduler runs one cycle at that time; its decisions are carried out
//! at once (a bind schedules the job's end; a `PreemptBackfill` stops the job and sends
//! `Event::Requeued`, after which the cycle is repeated at the same time). A requeued job
//! restarts from the beginning: its lost GPU-seconds are counted.
//!
//! Assumptions (the traces do not say): ITP nodes have 8 GPUs (as ElasticFlow's simulator);
//! every node has 96 CPUs and 1 TiB, jobs ask 1 CPU and no memory per node; a job of at most
//! 8 GPUs, or a multiple of 8, has topology `node` (one node, or whole nodes), anything else
//! `any`; the time limit (walltime request) is twice the duration rounded up to an hour, capped
//! at 7 days but never below the duration rounded up to an hour; priorities are FIFO
//! (`priority/basic`) for every queue policy, so the queue discipline is the only difference;
//! placement is `topo-bestfit` for all.
//!
//! Offered load ρ = Σ(gpus × duration) / (cluster GPUs × span), where span is the time from the
//! first to the last arrival. Inter-arrival times are scaled by f = W / (G × T × ρ) (W the
//! GPU-seconds, G the GPUs, T the unscaled span) to get each requested ρ. ITP's cluster size
//! is the smallest number of 8-GPU nodes (a multiple of 4, and enough for its largest gang)
//! that the unscaled trace loads at most to 1.0: N = max(⌈W / (8·T)⌉, ⌈max gang / 8⌉),
//! rounded up to a multiple of 4, computed on the whole cluster's trace: `--max-jobs N` replays
//! the first N jobs on that same cluster (cluster04: 64 nodes), never on one sized from the
//! window (the first 10 jobs of cluster04 alone would size 472 nodes). Philly keeps its real
//! 552 machines.
//!
//! Elastic jobs (`GangOptions::elastic_min_gpus`, `flotilla sim gang --elastic-min-gpus N`):
//! every job of at least N GPUs is elastic between half its size (rounded up) and its size,
//! through `core::sched`'s elastic stages. A job of whole 8-GPU nodes counts in nodes (it
//! starts on ⌈nodes/2⌉ and grows by whole nodes), any other one in GPUs (`any` topology).
//! Work is conserved and scales linearly with size: a job holds `gpus × duration`
//! GPU-seconds of work and does `size` GPU-seconds of it per second (an upper bound on real
//! scaling, as ElasticFlow's simulator assumes), so its end moves at every grow and shrink.
//! Its walltime request covers running at its minimum size throughout. A shrink is carried
//! out at once (its tasks exit at SIGTERM; `Event::Shrunk` at the same time), as a backfill
//! preemption is.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;

use flotilla_core::cluster::{Cluster, NodeId, NodeSpec, Time};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{Elastic, ElasticUnit, JobId, JobSpec, Request};
use flotilla_core::sched::{AllocId, Decision, Event, Scheduler};
use serde::Serialize;

use crate::progress::{run_parallel, Progress};
use crate::report::{self, Series};
use crate::traces::TraceDir;
use crate::SimError;

/// The queue policies compared, in report order (names of `flotilla_plugins::queue`).
pub const POLICIES: &[&str] = &["fifo", "easy", "flotilla"];

/// Gang-size buckets (GPUs): 1, 2–4, 5–8, 9–64, 65+.
pub const BUCKETS: &[(&str, u32, u32)] = &[("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), ("9-64", 9, 64), ("65+", 65, u32::MAX)];

/// Which trace to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GangTrace {
    /// `itp/jobs.csv`, one cluster (or all).
    Itp,
    /// `philly/jobs.csv` on `philly/machines.csv`.
    Philly,
}

impl std::str::FromStr for GangTrace {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, SimError> {
        match s {
            "itp" => Ok(GangTrace::Itp),
            "philly" => Ok(GangTrace::Philly),
            _ => Err(SimError::BadOption(format!("unknown trace `{s}` (expected itp or philly)"))),
        }
    }
}

/// Options of the experiment.
#[derive(Debug, Clone)]
pub struct GangOptions {
    /// Which trace to replay.
    pub trace: GangTrace,
    /// ITP cluster (`cluster04`; `all` = every job).
    pub cluster: String,
    /// Offered loads.
    pub loads: Vec<f64>,
    /// Keep only the first N jobs (on the whole trace's cluster).
    pub max_jobs: Option<usize>,
    /// Threads (results do not depend on it).
    pub jobs: usize,
    /// Queue policies.
    pub policies: Vec<String>,
    /// Placement policy.
    pub placement: String,
    /// Seconds between samples of `largest_placeable` and free nodes.
    pub sample_s: u64,
    /// Check the scheduler's invariants after every cycle (default: debug builds).
    pub check_invariants: bool,
    /// Walltime request as a multiple of the real duration (before rounding up to an hour).
    pub walltime_factor: f64,
    /// Jobs of at least this many GPUs are elastic between half their size and their size
    /// (module doc); `None`: every job is a rigid gang.
    pub elastic_min_gpus: Option<u32>,
    /// Re-run every placement search every cycle (`Scheduler::set_full_scan`, the old cycle)
    /// instead of the incremental cycle; the decisions are the same, only the time differs.
    pub full_scan: bool,
    /// Extra seconds each job holds its GPUs after its work is done, per job of the list
    /// (missing entries: 0): a job started at `s` ends at `s + duration + extra` while its
    /// walltime request stays that of `duration` (added to every run's end: meant for rigid
    /// jobs). `flotilla bench trace` replays the trace a
    /// second time with the controller's measured end latency per job to show how much of
    /// the queue-time difference that latency makes. Empty: none (every other use).
    pub extra_hold_s: Vec<u64>,
}

impl Default for GangOptions {
    fn default() -> Self {
        GangOptions {
            trace: GangTrace::Itp,
            cluster: "cluster04".into(),
            loads: vec![0.5, 0.7, 0.9, 1.0],
            max_jobs: None,
            jobs: 1,
            policies: POLICIES.iter().map(|s| s.to_string()).collect(),
            placement: "topo-bestfit".into(),
            sample_s: 3600,
            check_invariants: cfg!(debug_assertions),
            walltime_factor: 2.0,
            elastic_min_gpus: None,
            full_scan: false,
            extra_hold_s: Vec::new(),
        }
    }
}

/// One job of a replay: arrival (s, unscaled), GPUs, run time (s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceJob {
    /// Arrival, seconds from the trace origin (before scaling).
    pub submit_s: u64,
    /// GPUs asked for.
    pub gpus: u32,
    /// Run time (s), at least 1.
    pub duration_s: u64,
}

/// The walltime request assumed for a job of `duration_s`: `factor` (2 by default) times the
/// duration rounded up to an hour, capped at 7 days, never below the duration rounded up to
/// an hour.
pub fn time_limit(duration_s: u64, factor: f64) -> u64 {
    let hour = |s: u64| s.div_ceil(3600).max(1) * 3600;
    hour((duration_s as f64 * factor).ceil() as u64).min((7 * 24 * 3600).max(hour(duration_s))).max(hour(duration_s))
}

/// The request of a job of `gpus` GPUs on a cluster whose largest node has `size` GPUs.
pub fn job_request(gpus: u32, size: u32) -> Request {
    let topology = if gpus <= size || (size > 0 && gpus % size == 0) {
        TopologyKind::Node
    } else {
        TopologyKind::Any
    };
    Request::gpus(gpus, topology)
}

/// The elastic range of a job of `gpus` GPUs on a cluster whose largest node has `size` GPUs
/// when jobs of at least `threshold` GPUs are elastic (module doc): half its size (rounded
/// up) to its size, in nodes for a job of whole nodes, else in GPUs. `None`: rigid.
pub fn elastic_of(gpus: u32, size: u32, threshold: Option<u32>) -> Option<Elastic> {
    let t = threshold?;
    if gpus < t.max(2) {
        return None;
    }
    let (unit, n) = if size > 0 && gpus > size && gpus % size == 0 { (ElasticUnit::Nodes, gpus / size) } else { (ElasticUnit::Gpus, gpus) };
    (n >= 2).then_some(Elastic { unit, min: n.div_ceil(2), max: n, step: 1 })
}

/// GPUs of an elastic job at size `n` of its unit on nodes of `size` GPUs.
pub fn elastic_gpus(e: &Elastic, n: u32, size: u32) -> u32 {
    match e.unit {
        ElasticUnit::Nodes => n * size,
        ElasticUnit::Gpus => n,
    }
}

/// A cluster of nodes with the given GPU counts, pods of 32 nodes, 96 CPUs and 1 TiB each.
pub fn gpu_cluster(gpus: &[u32]) -> Cluster {
    let specs: Vec<NodeSpec> = gpus
        .iter()
        .enumerate()
        .map(|(i, &g)| NodeSpec {
            name: format!("n{:04}", i + 1),
            gpus: g,
            gpu_type: None,
            cpu_milli: 96_000,
            mem_mib: 1 << 20,
            pod: format!("pod{}", i / 32),
        })
        .collect();
    let mut c = Cluster::from_specs(&specs);
    let all = (0..gpus.len() as u32).map(NodeId).collect();
    c.add_partition("batch", all, true);
    c
}

/// GPU-seconds and arrival span of a job list.
pub fn work_and_span(jobs: &[TraceJob]) -> (f64, f64) {
    let w: f64 = jobs.iter().map(|j| f64::from(j.gpus) * j.duration_s as f64).sum();
    let first = jobs.iter().map(|j| j.submit_s).min().unwrap_or(0);
    let last = jobs.iter().map(|j| j.submit_s).max().unwrap_or(0);
    (w, (last - first).max(1) as f64)
}

/// ITP cluster size in 8-GPU nodes (see the module docs).
pub fn itp_nodes(jobs: &[TraceJob]) -> u32 {
    let (w, t) = work_and_span(jobs);
    let by_load = (w / (8.0 * t)).ceil() as u32;
    let by_gang = jobs.iter().map(|j| j.gpus.div_ceil(8)).max().unwrap_or(1);
    by_load.max(by_gang).max(1).div_ceil(4) * 4
}

/// Per-bucket statistics (seconds).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stats {
    /// Jobs completed.
    pub jobs: usize,
    /// Job completion time (end − submit): mean, p50, p95.
    pub jct_mean_s: f64,
    /// p50 JCT.
    pub jct_p50_s: f64,
    /// p95 JCT.
    pub jct_p95_s: f64,
    /// Queueing time (last start − submit): mean, p50, p95.
    pub queue_mean_s: f64,
    /// p50 queueing.
    pub queue_p50_s: f64,
    /// p95 queueing.
    pub queue_p95_s: f64,
    /// Longest queueing time.
    pub queue_max_s: f64,
}

pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(crate) fn stats(jct: &[f64], queue: &[f64]) -> Stats {
    let mut j = jct.to_vec();
    let mut q = queue.to_vec();
    j.sort_by(f64::total_cmp);
    q.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 };
    Stats {
        jobs: j.len(),
        jct_mean_s: mean(&j),
        jct_p50_s: pct(&j, 50.0),
        jct_p95_s: pct(&j, 95.0),
        queue_mean_s: mean(&q),
        queue_p50_s: pct(&q, 50.0),
        queue_p95_s: pct(&q, 95.0),
        queue_max_s: q.last().copied().unwrap_or(f64::NAN),
    }
}

/// One sample of the cluster over time.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Sample {
    /// Virtual time (s) from the first arrival.
    pub t: u64,
    /// `largest_placeable.node`.
    pub largest_node: u32,
    /// `largest_placeable.any`.
    pub largest_any: u32,
    /// Fully free nodes of the largest size.
    pub free_nodes: usize,
    /// GPUs in use.
    pub busy_gpus: u64,
    /// Pending jobs.
    pub pending: usize,
}

/// The result of one replay (one policy, one load).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSummary {
    /// Queue policy.
    pub policy: String,
    /// Offered load asked for.
    pub load: f64,
    /// Inter-arrival scale factor used.
    pub arrival_scale: f64,
    /// Jobs replayed.
    pub jobs: usize,
    /// Statistics over all jobs, then by gang-size bucket.
    pub all: Stats,
    /// By gang-size bucket, in [`BUCKETS`] order.
    pub by_gang_size: Vec<(String, Stats)>,
    /// Busy GPU-seconds / (GPUs × makespan), percent.
    pub utilisation_pct: f64,
    /// Makespan: first arrival to last end (s).
    pub makespan_s: u64,
    /// Time-weighted mean of `largest_placeable.node` over the samples.
    pub largest_node_mean: f64,
    /// Time-weighted mean of fully free nodes over the samples.
    pub free_nodes_mean: f64,
    /// Backfill starts (binds that borrow reserved GPUs).
    pub backfill_starts: u64,
    /// Backfill preemptions (`PreemptBackfill` carried out).
    pub backfill_preemptions: u64,
    /// GPU-hours lost to preemptions (work redone).
    pub lost_gpu_hours: f64,
    /// Reservations made.
    pub reservations: u64,
    /// Scheduling cycles run.
    pub cycles: u64,
    /// Elastic jobs in the replay.
    pub elastic_jobs: usize,
    /// Growth rounds carried out (`Decision::Grow`).
    pub grows: u64,
    /// Shrinks for a pending job (`Decision::Shrink` with a `for_job`): grown parts given
    /// back instead of a job waiting or a whole job stopping.
    pub shrinks: u64,
    /// Elastic jobs that reached their MAX at some point.
    pub elastic_reached_max: usize,
    /// Times the driver saw an elastic job below its MIN or above its MAX (must be 0).
    pub elastic_size_violations: u64,
    /// Samples over time.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Per job, in arrival order: (arrival, start of its last run, end) in replay time (s);
    /// `None` for a job that did not start or end (trace replay through the daemons compares
    /// these, `flotilla bench trace`).
    #[serde(skip)]
    pub job_times: Vec<(Time, Option<Time>, Option<Time>)>,
    /// What the scheduler's cycles did: `(visited, skipped)` pending jobs
    /// ([`Scheduler::visit_counts`]) and `(searched, reused)` placement searches
    /// ([`Scheduler::placement_counts`]). Not in `summary.json`: the incremental cycle and the
    /// full scan differ here by design, and nowhere else.
    #[serde(skip)]
    pub cycle_work: ((u64, u64), (u64, u64)),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A job ends (job index, generation).
    End(usize, u32),
    /// A job arrives (job index).
    Arrive(usize),
}

/// Replays `jobs` (sorted by arrival) on a cluster of nodes with `node_gpus` GPUs each, with
/// queue policy `policy`, inter-arrival times scaled by `scale`.
///
/// Panics if the scheduler breaks an invariant (checked after every cycle when
/// `opts.check_invariants`): a bug in the core, fail stop.
pub fn replay(jobs: &[TraceJob], node_gpus: &[u32], policy: &str, load: f64, scale: f64, opts: &GangOptions) -> Result<RunSummary, SimError> {
    let cluster = gpu_cluster(node_gpus);
    let size = node_gpus.iter().copied().max().unwrap_or(0);
    let total_gpus: u64 = node_gpus.iter().map(|&g| u64::from(g)).sum();
    let config = flotilla_plugins::queue(policy).ok_or_else(|| SimError::UnknownPolicy { name: policy.to_owned() })?;
    let placement = flotilla_plugins::placement(&opts.placement).ok_or_else(|| SimError::UnknownPolicy { name: opts.placement.clone() })?;
    let priority = flotilla_plugins::priority("priority/basic").expect("registered");
    let mut sched = Scheduler::new(cluster, placement, priority, config);
    sched.set_full_scan(opts.full_scan);
    let mut g = Gang::new(sched, jobs, size, scale, opts);
    while let Some(Reverse((t, _))) = g.heap.peek().copied() {
        g.advance_to(t);
        while let Some(Reverse((t2, ev))) = g.heap.peek().copied() {
            if t2 != t {
                break;
            }
            g.heap.pop();
            g.fire(ev, t);
        }
        g.run_cycles(t);
    }
    Ok(g.summary(policy, load, scale, total_gpus))
}

/// The replay's driver: the virtual world the scheduler's decisions act on (job starts and
/// ends) and what it measures.
struct Gang<'a> {
    sched: Scheduler,
    jobs: &'a [TraceJob],
    opts: &'a GangOptions,
    /// GPUs of the largest node.
    size: u32,
    /// Trace time of the first arrival, and the inter-arrival scale factor.
    origin: u64,
    scale: f64,
    heap: BinaryHeap<Reverse<(Time, Ev)>>,
    /// Per job: generation (bumped when preempted), start and end of its last run.
    gen: Vec<u32>,
    start: Vec<Option<Time>>,
    end: Vec<Option<Time>>,
    backfill_starts: u64,
    preemptions: u64,
    lost: f64,
    reservations: u64,
    cycles: u64,
    busy_gpu_s: f64,
    samples: Vec<Sample>,
    next_sample: Time,
    last_t: Time,
    busy: u64,
    /// Per job: its elastic range (`None`: rigid), GPUs held now, GPU-seconds of work left
    /// as of `since`.
    elastic: Vec<Option<Elastic>>,
    cur: Vec<u32>,
    left: Vec<u64>,
    since: Vec<Time>,
    /// GPUs of each grown allocation, to count a shrink's.
    grown_gpus: BTreeMap<AllocId, u32>,
    grows: u64,
    shrinks: u64,
    reached_max: Vec<bool>,
    violations: u64,
}

impl<'a> Gang<'a> {
    fn new(sched: Scheduler, jobs: &'a [TraceJob], size: u32, scale: f64, opts: &'a GangOptions) -> Gang<'a> {
        let origin = jobs.iter().map(|j| j.submit_s).min().unwrap_or(0);
        let mut g = Gang {
            sched,
            jobs,
            opts,
            size,
            origin,
            scale,
            heap: BinaryHeap::new(),
            gen: vec![0; jobs.len()],
            start: vec![None; jobs.len()],
            end: vec![None; jobs.len()],
            backfill_starts: 0,
            preemptions: 0,
            lost: 0.0,
            reservations: 0,
            cycles: 0,
            busy_gpu_s: 0.0,
            samples: Vec::new(),
            next_sample: 0,
            last_t: 0,
            busy: 0,
            elastic: jobs.iter().map(|j| elastic_of(j.gpus, size, opts.elastic_min_gpus)).collect(),
            cur: vec![0; jobs.len()],
            left: vec![0; jobs.len()],
            since: vec![0; jobs.len()],
            grown_gpus: BTreeMap::new(),
            grows: 0,
            shrinks: 0,
            reached_max: vec![false; jobs.len()],
            violations: 0,
        };
        g.heap = jobs.iter().enumerate().map(|(i, j)| Reverse((g.arrival(j), Ev::Arrive(i)))).collect();
        g
    }

    /// A job's arrival in replay time (s): its trace submit time after the first arrival,
    /// scaled.
    fn arrival(&self, j: &TraceJob) -> Time {
        ((j.submit_s - self.origin) as f64 * self.scale).round() as Time
    }

    /// Job `i`'s spec: its trace request and the walltime limit; an elastic job asks for its
    /// minimum, with a walltime that covers running at it.
    fn spec(&self, i: usize) -> JobSpec {
        let j = &self.jobs[i];
        let Some(e) = self.elastic[i] else {
            return JobSpec::simple(i as u64 + 1, self.arrival(j), job_request(j.gpus, self.size), Some(time_limit(j.duration_s, self.opts.walltime_factor)));
        };
        let min_gpus = elastic_gpus(&e, e.min, self.size);
        let at_min = self.work(i).div_ceil(u64::from(min_gpus));
        let request = match e.unit {
            ElasticUnit::Nodes => Request::gpus(min_gpus, TopologyKind::Node),
            ElasticUnit::Gpus => Request::gpus(min_gpus, TopologyKind::Any),
        };
        let mut spec = JobSpec::simple(i as u64 + 1, self.arrival(j), request, Some(time_limit(at_min, self.opts.walltime_factor)));
        spec.elastic = Some(e);
        spec
    }

    /// Job `i`'s work, GPU-seconds.
    fn work(&self, i: usize) -> u64 {
        u64::from(self.jobs[i].gpus) * self.jobs[i].duration_s
    }

    /// Counts job `i`'s work done up to `t` at its current size.
    fn settle(&mut self, i: usize, t: Time) {
        self.left[i] = self.left[i].saturating_sub(u64::from(self.cur[i]) * (t - self.since[i]));
        self.since[i] = t;
    }

    /// Job `i` now holds `gpus` GPUs (work settled up to `t`): busy GPUs follow, its end is
    /// rescheduled (older end events go stale) and an elastic job's size is checked.
    fn resize(&mut self, i: usize, gpus: u32, t: Time) {
        self.busy = self.busy - u64::from(self.cur[i]) + u64::from(gpus);
        self.cur[i] = gpus;
        self.gen[i] += 1;
        // A preempted job holds nothing (0 is not a size below MIN).
        if let Some(e) = self.elastic[i].filter(|_| gpus > 0) {
            let (lo, hi) = (elastic_gpus(&e, e.min, self.size), elastic_gpus(&e, e.max, self.size));
            if gpus < lo || gpus > hi {
                self.violations += 1;
            }
            self.reached_max[i] |= gpus == hi;
        }
        if gpus > 0 {
            let extra = self.opts.extra_hold_s.get(i).copied().unwrap_or(0);
            let end = t + self.left[i].div_ceil(u64::from(gpus)).max(1) + extra;
            self.heap.push(Reverse((end, Ev::End(i, self.gen[i]))));
        }
    }

    /// Integrates busy GPUs up to `t` and takes the samples due.
    fn advance_to(&mut self, t: Time) {
        self.busy_gpu_s += self.busy as f64 * (t - self.last_t) as f64;
        while self.next_sample <= t {
            let lp = self.sched.largest_placeable();
            self.samples.push(Sample {
                t: self.next_sample,
                largest_node: lp.node,
                largest_any: lp.any,
                free_nodes: self.sched.cluster().fully_free_gpu_nodes(self.size),
                busy_gpus: self.busy,
                pending: self.sched.pending_len(),
            });
            self.next_sample += self.opts.sample_s.max(1);
        }
        self.last_t = t;
    }

    /// Feeds the scheduler an event at `t`; its decisions go through [`Gang::apply`].
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
                if g == self.gen[i] && self.end[i].is_none() && self.start[i].is_some() {
                    self.event(Event::JobEnded(JobId(i as u64 + 1)), t);
                    self.end[i] = Some(t);
                    self.busy -= u64::from(self.cur[i]);
                    self.cur[i] = 0;
                }
            }
        }
    }

    /// Cycles at `t`, carries out the decisions, and cycles again (at most 8 times) while
    /// preemptions free GPUs.
    fn run_cycles(&mut self, t: Time) {
        for _round in 0..8 {
            let decisions = self.sched.cycle(t);
            self.cycles += 1;
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

    /// The driver's one path for decisions, carried out at `t`: a bind starts the job (its
    /// end scheduled after its duration; a backfill start is counted), a backfill preemption
    /// stops it at once (its work so far is lost) and requeues it, reservations are counted.
    /// Returns true when a preemption freed GPUs (cycle again).
    fn apply(&mut self, decisions: Vec<Decision>, t: Time) -> bool {
        let mut requeued = false;
        for d in decisions {
            match d {
                Decision::Bind { job, allocs, backfill_for } => {
                    let i = (job.0 - 1) as usize;
                    self.start[i] = Some(t);
                    if !backfill_for.is_empty() {
                        self.backfill_starts += 1;
                    }
                    self.left[i] = self.work(i);
                    self.since[i] = t;
                    let gpus = allocs.iter().map(|a| a.part.gpus.count()).sum();
                    self.resize(i, gpus, t);
                }
                Decision::PreemptBackfill { job, .. } => {
                    let i = (job.0 - 1) as usize;
                    if self.start[i].take().is_some() {
                        self.settle(i, t);
                        self.lost += (self.work(i) - self.left[i]) as f64 / 3600.0;
                    }
                    self.resize(i, 0, t);
                    self.preemptions += 1;
                    self.event(Event::Requeued(job), t);
                    requeued = true;
                }
                Decision::Grow { job, allocs } => {
                    let i = (job.0 - 1) as usize;
                    self.settle(i, t);
                    let mut gpus = self.cur[i];
                    for a in &allocs {
                        let g = a.part.gpus.count();
                        self.grown_gpus.insert(a.id, g);
                        gpus += g;
                    }
                    self.grows += 1;
                    self.resize(i, gpus, t);
                }
                Decision::Shrink { job, allocs, for_job, .. } => {
                    // Carried out at once: the leaving tasks exit at SIGTERM.
                    let i = (job.0 - 1) as usize;
                    self.settle(i, t);
                    let gone: u32 = allocs.iter().map(|a| self.grown_gpus.remove(a).unwrap_or(0)).sum();
                    if for_job.is_some() {
                        self.shrinks += 1;
                    }
                    self.resize(i, self.cur[i] - gone, t);
                    self.event(Event::Shrunk { job, allocs }, t);
                    requeued = true;
                }
                Decision::Reserve { .. } => self.reservations += 1,
                _ => {}
            }
        }
        requeued
    }

    /// The replay's summary for queue policy `policy` at offered `load` and arrival `scale`
    /// on `total_gpus` GPUs.
    fn summary(self, policy: &str, load: f64, scale: f64, total_gpus: u64) -> RunSummary {
        let mut jct_by: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        let (mut all_j, mut all_q) = (Vec::new(), Vec::new());
        for (i, j) in self.jobs.iter().enumerate() {
            let (Some(s), Some(e)) = (self.start[i], self.end[i]) else { continue };
            let sub = self.arrival(j);
            let (jct, q) = ((e - sub) as f64, (s - sub) as f64);
            all_j.push(jct);
            all_q.push(q);
            if let Some(b) = BUCKETS.iter().find(|b| j.gpus >= b.1 && j.gpus <= b.2) {
                let e = jct_by.entry(b.0).or_default();
                e.0.push(jct);
                e.1.push(q);
            }
        }
        let by_gang_size = BUCKETS
            .iter()
            .map(|b| {
                let (j, q) = jct_by.get(b.0).cloned().unwrap_or_default();
                (b.0.to_string(), stats(&j, &q))
            })
            .collect();
        let makespan = self.last_t.max(1);
        let n = self.samples.len().max(1) as f64;
        let job_times = self.jobs.iter().enumerate().map(|(i, j)| (self.arrival(j), self.start[i], self.end[i])).collect();
        RunSummary {
            policy: policy.to_owned(),
            load,
            arrival_scale: scale,
            jobs: self.jobs.len(),
            all: stats(&all_j, &all_q),
            by_gang_size,
            utilisation_pct: self.busy_gpu_s * 100.0 / (total_gpus as f64 * makespan as f64),
            makespan_s: makespan,
            largest_node_mean: self.samples.iter().map(|s| f64::from(s.largest_node)).sum::<f64>() / n,
            free_nodes_mean: self.samples.iter().map(|s| s.free_nodes as f64).sum::<f64>() / n,
            backfill_starts: self.backfill_starts,
            backfill_preemptions: self.preemptions,
            lost_gpu_hours: self.lost,
            reservations: self.reservations,
            cycles: self.cycles,
            elastic_jobs: self.elastic.iter().filter(|e| e.is_some()).count(),
            grows: self.grows,
            shrinks: self.shrinks,
            elastic_reached_max: self.reached_max.iter().filter(|&&b| b).count(),
            elastic_size_violations: self.violations,
            cycle_work: (self.sched.visit_counts(), self.sched.placement_counts()),
            samples: self.samples,
            job_times,
        }
    }
}

/// The experiment's results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GangReport {
    /// `itp/<cluster>` or `philly`.
    pub workload: String,
    /// Nodes by GPU count.
    pub nodes: BTreeMap<u32, usize>,
    /// Total GPUs.
    pub total_gpus: u64,
    /// GPU-seconds of the jobs.
    pub work_gpu_s: f64,
    /// Unscaled arrival span (s).
    pub span_s: f64,
    /// Offered load of the unscaled trace on this cluster.
    pub native_load: f64,
    /// Runs, policy-major then load.
    pub runs: Vec<RunSummary>,
    /// Queue policies.
    pub policies: Vec<String>,
    /// Offered loads run (busy GPU-seconds asked for / GPU-seconds available).
    pub loads: Vec<f64>,
    /// Walltime request factor used.
    pub walltime_factor: f64,
    /// Jobs of at least this many GPUs were elastic (`None`: all rigid).
    pub elastic_min_gpus: Option<u32>,
}

/// Runs the experiment on an explicit job list and node list (fixtures, reduced runs).
pub fn run_with(workload: &str, jobs: &[TraceJob], node_gpus: &[u32], opts: &GangOptions, progress: &dyn Progress) -> Result<GangReport, SimError> {
    if opts.loads.iter().any(|&l| !(l > 0.0 && l.is_finite())) {
        return Err(SimError::BadOption("loads must be positive".into()));
    }
    for p in &opts.policies {
        flotilla_plugins::queue(p).ok_or_else(|| SimError::UnknownPolicy { name: p.clone() })?;
    }
    let mut jobs = jobs.to_vec();
    jobs.sort_by_key(|j| j.submit_s);
    for j in &mut jobs {
        j.duration_s = j.duration_s.max(1);
    }
    let total_gpus: u64 = node_gpus.iter().map(|&g| u64::from(g)).sum();
    let (w, t) = work_and_span(&jobs);
    let native = w / (total_gpus as f64 * t);
    let work: Vec<(usize, f64)> = (0..opts.policies.len())
        .flat_map(|p| opts.loads.iter().map(move |&l| (p, l)))
        .collect();
    progress.add_total(work.len() as u64);
    let runs = run_parallel(&work, opts.jobs, |&(p, load)| {
        let scale = native / load;
        let r = replay(&jobs, node_gpus, &opts.policies[p], load, scale, opts);
        progress.advance(1, &format!("{workload} {} load {load}", opts.policies[p]));
        r
    });
    let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut nodes = BTreeMap::new();
    for &g in node_gpus {
        *nodes.entry(g).or_insert(0) += 1;
    }
    Ok(GangReport {
        workload: workload.to_owned(),
        nodes,
        total_gpus,
        work_gpu_s: w,
        span_s: t,
        native_load: native,
        runs,
        policies: opts.policies.clone(),
        loads: opts.loads.clone(),
        walltime_factor: opts.walltime_factor,
        elastic_min_gpus: opts.elastic_min_gpus,
    })
}

/// Runs the experiment on the real trace files.
pub fn run(traces: &TraceDir, opts: &GangOptions, progress: &dyn Progress) -> Result<GangReport, SimError> {
    let (workload, mut jobs, node_gpus) = match opts.trace {
        GangTrace::Itp => {
            let all = traces.itp_jobs()?;
            let sel: Vec<_> = if opts.cluster == "all" {
                all
            } else {
                let s = crate::traces::itp::select_cluster(all, &opts.cluster);
                if s.is_empty() {
                    return Err(SimError::UnknownItpCluster { cluster: opts.cluster.clone() });
                }
                s
            };
            let jobs: Vec<TraceJob> = sel
                .iter()
                .map(|j| TraceJob { submit_s: j.submit_s, gpus: j.gpus, duration_s: j.duration_s })
                .collect();
            (format!("itp/{}", opts.cluster), jobs, Vec::new())
        }
        GangTrace::Philly => {
            let machines = traces.philly_machines()?;
            let jobs: Vec<TraceJob> = traces
                .philly_jobs()?
                .iter()
                .filter(|j| j.gpus > 0)
                .map(|j| TraceJob { submit_s: j.submit_s, gpus: j.gpus, duration_s: j.duration_s })
                .collect();
            ("philly".to_string(), jobs, machines.iter().map(|m| m.gpus).collect())
        }
    };
    jobs.sort_by_key(|j| j.submit_s);
    // The cluster is the whole trace's (ITP: sized before the window is cut).
    let node_gpus = if node_gpus.is_empty() { vec![8; itp_nodes(&jobs) as usize] } else { node_gpus };
    if let Some(n) = opts.max_jobs {
        jobs.truncate(n);
    }
    run_with(&workload, &jobs, &node_gpus, opts, progress)
}

impl GangReport {
    /// The `summary.json` value: `"policies"` holds one object per queue policy, with its
    /// runs by load.
    pub fn summary_json(&self) -> serde_json::Value {
        let mut policies = serde_json::Map::new();
        for p in &self.policies {
            let mut loads = serde_json::Map::new();
            for r in self.runs.iter().filter(|r| &r.policy == p) {
                loads.insert(format!("{}", r.load), serde_json::to_value(r).unwrap_or_default());
            }
            policies.insert(p.clone(), serde_json::json!({ "loads": loads }));
        }
        serde_json::json!({
            "experiment": "gang",
            "workload": self.workload,
            "nodes_by_gpus": self.nodes,
            "total_gpus": self.total_gpus,
            "work_gpu_hours": self.work_gpu_s / 3600.0,
            "native_offered_load": self.native_load,
            "walltime_factor": self.walltime_factor,
            "elastic_min_gpus": self.elastic_min_gpus,
            "load_formula": "rho = sum(gpus*duration) / (cluster_gpus * arrival_span); arrivals scaled by native_load/rho",
            "policies": policies,
        })
    }

    /// A plain-text table of the runs (all jobs and by gang size).
    pub fn table(&self) -> String {
        let mut s = format!(
            "{} on {} GPUs ({:?} nodes by GPUs), native load {:.2}\n{:<9} {:>5} {:<5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>6} {:>6} {:>6} {:>6}\n",
            self.workload, self.total_gpus, self.nodes, self.native_load, "policy", "load", "gang", "jobs", "jct_mean", "jct_p95", "q_mean", "q_p50", "q_p95", "util%", "lp_n", "preem", "grow", "shrink"
        );
        for r in &self.runs {
            let rows = std::iter::once(("all".to_string(), &r.all)).chain(r.by_gang_size.iter().map(|(k, v)| (k.clone(), v)));
            for (b, st) in rows {
                s += &format!(
                    "{:<9} {:>5.2} {:<5} {:>6} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>6.1} {:>6.2} {:>6} {:>6} {:>6}\n",
                    r.policy, r.load, b, st.jobs, st.jct_mean_s, st.jct_p95_s, st.queue_mean_s, st.queue_p50_s, st.queue_p95_s, r.utilisation_pct, r.largest_node_mean, r.backfill_preemptions, r.grows, r.shrinks
                );
            }
        }
        s
    }

    /// Writes `summary.json`, `gang_summary.csv`, `gang_timeseries.csv`,
    /// `gang_queue_vs_load.png` and `gang_free_nodes.png` into `out`.
    pub fn write(&self, out: &Path) -> Result<(), SimError> {
        report::write_json(&out.join("summary.json"), &self.summary_json())?;
        let mut rows = vec![[
            "policy", "load", "gang_size", "jobs", "jct_mean_s", "jct_p50_s", "jct_p95_s", "queue_mean_s", "queue_p50_s", "queue_p95_s", "queue_max_s", "utilisation_pct", "largest_placeable_node_mean", "free_nodes_mean", "backfill_starts", "backfill_preemptions", "lost_gpu_hours", "elastic_jobs", "grows", "shrinks",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        let f = |x: f64| format!("{x:.1}");
        for r in &self.runs {
            let all = std::iter::once(("all".to_string(), &r.all)).chain(r.by_gang_size.iter().map(|(k, v)| (k.clone(), v)));
            for (b, st) in all {
                rows.push(vec![
                    r.policy.clone(),
                    format!("{}", r.load),
                    b,
                    st.jobs.to_string(),
                    f(st.jct_mean_s),
                    f(st.jct_p50_s),
                    f(st.jct_p95_s),
                    f(st.queue_mean_s),
                    f(st.queue_p50_s),
                    f(st.queue_p95_s),
                    f(st.queue_max_s),
                    format!("{:.2}", r.utilisation_pct),
                    format!("{:.3}", r.largest_node_mean),
                    format!("{:.2}", r.free_nodes_mean),
                    r.backfill_starts.to_string(),
                    r.backfill_preemptions.to_string(),
                    format!("{:.2}", r.lost_gpu_hours),
                    r.elastic_jobs.to_string(),
                    r.grows.to_string(),
                    r.shrinks.to_string(),
                ]);
            }
        }
        report::write_csv(&out.join("gang_summary.csv"), &rows)?;
        let mut ts = vec![["policy", "load", "t_s", "largest_placeable_node", "largest_placeable_any", "free_nodes", "busy_gpus", "pending"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for r in &self.runs {
            for s in &r.samples {
                ts.push(vec![
                    r.policy.clone(),
                    format!("{}", r.load),
                    s.t.to_string(),
                    s.largest_node.to_string(),
                    s.largest_any.to_string(),
                    s.free_nodes.to_string(),
                    s.busy_gpus.to_string(),
                    s.pending.to_string(),
                ]);
            }
        }
        report::write_csv(&out.join("gang_timeseries.csv"), &ts)?;
        let series: Vec<Series> = self
            .policies
            .iter()
            .map(|p| Series {
                name: p.clone(),
                points: self.runs.iter().filter(|r| &r.policy == p).map(|r| (r.load, r.all.queue_mean_s / 3600.0)).collect(),
            })
            .collect();
        report::plot_lines(&out.join("gang_queue_vs_load.png"), &format!("{}: mean queueing time", self.workload), "offered load", "mean queueing (hours)", &series)?;
        let top = self.loads.iter().copied().fold(f64::MIN, f64::max);
        let series: Vec<Series> = self
            .runs
            .iter()
            .filter(|r| r.load == top)
            .map(|r| Series {
                name: r.policy.clone(),
                points: r.samples.iter().map(|s| (s.t as f64 / 86_400.0, s.free_nodes as f64)).collect(),
            })
            .collect();
        report::plot_lines(&out.join("gang_free_nodes.png"), &format!("{}: fully free nodes at load {top}", self.workload), "days", "fully free nodes", &series)?;
        Ok(())
    }
}
