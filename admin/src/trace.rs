//! `flotilla bench trace`: a real trace replayed through the real daemons, side by side with
//! the simulator on the same trace (issue 21, deliverable 4).
//!
//! One run, for the ITP cluster `cluster` (`cluster04` by default), its first `jobs` jobs (all
//! by default), at offered load `load` (1.0) and queue policy `policy` (`flotilla`):
//!
//! 1. the jobs, the cluster and the arrival times exactly as `flotilla sim gang` builds them
//!    ([`flotilla_sim::gang`]: `itp_nodes` 8-GPU nodes in pods of 32, sized on the cluster's
//!    whole trace also when only its first jobs are replayed (cluster04: 64 nodes), arrivals
//!    scaled to the load, the walltime request of `gang::time_limit`, topology `node` for at most 8 GPUs or
//!    a multiple of 8, else `any`, `priority/basic`, `topo-bestfit`);
//! 2. the simulator's replay of that list ([`flotilla_sim::gang::replay`]);
//! 3. a real `slurmctld` ([`crate::dev::up`] with [`Emulate::Caller`]) whose clock runs
//!    `time_scale` times faster than real time (`slurmctld --time-scale`, the controller's
//!    `clock::ScaledClock`), and in this process the emulated nodes
//!    ([`crate::emulate`]) at the same scale, so that a job of `d` trace seconds ends `d /
//!    time_scale` real seconds after its launch reached its node. Each job is submitted through
//!    the controller's RPC (`SubmitJob`) when its arrival time, divided by the scale, has
//!    passed in real time, over `submitters` connections (job `i` on connection `i mod
//!    submitters`, so that one slow answer does not hold back the arrivals behind it); once
//!    every job has ended, the submit, start and end times are read back from the accounting
//!    records (`Request::QueryAcct`, what `sacct` reads).
//! 4. the simulator twice more, to measure what the replay's real-time latencies change:
//!    with each job holding its GPUs as long as it did on the controller
//!    ([`GangOptions::extra_hold_s`]: the controller's end − start − duration), then also with
//!    the controller's submit times as arrivals. The rest is cycle timing.
//!
//! Queue time is start − submit: on the controller both are its own stamps (so a submission
//! that reached it late does not count as waiting), in the simulator start − arrival. The
//! report gives p50/p90/p99/mean/max per gang-size bucket for both, the paired difference per
//! job, and the controller's submission lag (how far behind its arrival each submission was
//! stamped, relative to the first), the split of each job's end latency (launch, runtime on
//! the node, end report: the emulator's real instants against the controller's stamps, the
//! two clocks aligned on the submissions' round trips) and the two extra simulations. The
//! sources of difference are explained in `bench/results/trace-replay.md`.
//!
//! The controller stamps a job's end with its own clock when the node's report reaches it,
//! as Slurm's `_job_complete` (`src/slurmctld/job_mgr.c`, called by
//! `_slurm_rpc_complete_batch_script`) sets `end_time` to `time(NULL)`: Slurm's
//! complete-batch-script and epilog-complete messages carry no end time. The node's reported
//! end ([`JobExit::end_time`](flotilla_proto::JobExit), the emulator's job clock) is not used
//! for accounting, so the replay compares the controller's own stamps and measures the
//! latency instead of hiding it.

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use flotilla_proto::acct::AcctQuery;
use flotilla_proto::client::Client;
use flotilla_proto::{GpuCount, Request, Response, Role, SubmitJob, TimeLimitWire};
use flotilla_sim::gang::{self, GangOptions, TraceJob, BUCKETS};
use flotilla_sim::traces::TraceDir;

use crate::bench::wait_for;
use crate::dev::{self, DevCluster, Emulate, UpOptions};
use crate::emulate::{EmuStats, Emulator, EmulatorOptions, EndTiming};

/// The most nodes a replay emulates (a window of few jobs sizes a huge cluster).
pub const MAX_NODES: usize = 2_000;

/// What `flotilla bench trace` runs.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// The trace directory (`../shared/traces`).
    pub traces: PathBuf,
    /// The ITP cluster.
    pub cluster: String,
    /// Only the first N jobs (by arrival); `None`: all.
    pub jobs: Option<usize>,
    /// Offered load (as `flotilla sim gang --loads`).
    pub load: f64,
    /// Queue policy (`flotilla`, `easy`, `fifo`).
    pub policy: String,
    /// Controller (and emulated job) seconds per real second.
    pub time_scale: f64,
    /// The state directory (created).
    pub dir: PathBuf,
    /// Where `slurmctld` is (`None`: [`dev::find_bin`]).
    pub bin_dir: Option<PathBuf>,
    /// The emulated nodes' heartbeat period (real time).
    pub heartbeat: Duration,
    /// Connections submitting the jobs (at least 1).
    pub submitters: usize,
}

impl TraceOptions {
    /// The full `cluster04` trace at load 1.0 under `flotilla`, 20,000 times faster than real
    /// time (about 5 minutes here), in state directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> TraceOptions {
        TraceOptions {
            traces: PathBuf::from(TraceDir::DEFAULT),
            cluster: "cluster04".into(),
            jobs: None,
            load: 1.0,
            policy: "flotilla".into(),
            time_scale: 20_000.0,
            dir: dir.into(),
            bin_dir: None,
            heartbeat: Duration::from_millis(500),
            submitters: 8,
        }
    }
}

/// One job's times in the two runs (seconds of replay time for the simulator, controller
/// time for the daemons).
#[derive(Debug, Clone, PartialEq)]
pub struct JobTimes {
    /// GPUs asked for.
    pub gpus: u32,
    /// Trace duration (s).
    pub duration_s: u64,
    /// Arrival in replay time (s from the first arrival).
    pub arrival: u64,
    /// Simulator: start and end.
    pub sim_start: Option<u64>,
    /// Simulator end.
    pub sim_end: Option<u64>,
    /// Simulator with the controller's hold times: start.
    pub held_start: Option<u64>,
    /// Simulator with the controller's hold times and submit times: start, and the arrival
    /// it was given (the controller's submit − the first submit).
    pub held_sub_start: Option<u64>,
    /// That run's arrival.
    pub held_sub_arrival: u64,
    /// Controller: job id, submit, start, end, state.
    pub job_id: u64,
    /// Controller submit time.
    pub ctl_submit: i64,
    /// Controller start.
    pub ctl_start: Option<i64>,
    /// Controller end.
    pub ctl_end: Option<i64>,
    /// Controller final state (`COMPLETED`, `TIMEOUT`, ...).
    pub ctl_state: String,
}

impl JobTimes {
    /// Simulator queue time (s).
    pub fn sim_queue(&self) -> Option<f64> {
        self.sim_start.map(|s| (s - self.arrival) as f64)
    }
    /// Controller queue time (s).
    pub fn ctl_queue(&self) -> Option<f64> {
        self.ctl_start.map(|s| (s - self.ctl_submit) as f64)
    }
    /// Queue time in the simulation of `run`.
    pub fn queue(&self, run: SimRun) -> Option<f64> {
        match run {
            SimRun::Trace => self.sim_queue(),
            SimRun::Held => self
                .held_start
                .map(|s| s.saturating_sub(self.arrival) as f64),
            SimRun::HeldSubmitted => self
                .held_sub_start
                .map(|s| s.saturating_sub(self.held_sub_arrival) as f64),
        }
    }
    /// How long the job held its GPUs on the controller beyond its duration (end − start −
    /// duration, at least 0; its last run), or `None` without both times.
    pub fn ctl_overrun(&self) -> Option<u64> {
        Some(u64::try_from(self.ctl_end? - self.ctl_start? - self.duration_s as i64).unwrap_or(0))
    }
}

/// Which simulation a comparison uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimRun {
    /// The trace as `flotilla sim gang` replays it.
    Trace,
    /// Each job holding its GPUs as long as on the controller.
    Held,
    /// That, with the controller's submit times as arrivals.
    HeldSubmitted,
}

/// A distribution's summary (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dist {
    /// Values.
    pub n: usize,
    /// Percentiles 50, 90, 99.
    pub p50: f64,
    /// p90.
    pub p90: f64,
    /// p99.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// Largest.
    pub max: f64,
}

impl Dist {
    /// The summary of `v` (nearest-rank percentiles, as `flotilla sim`'s); NaN when empty.
    pub fn of(v: &[f64]) -> Dist {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if s.is_empty() {
                return f64::NAN;
            }
            s[(((p / 100.0) * (s.len() - 1) as f64).round() as usize).min(s.len() - 1)]
        };
        Dist {
            n: s.len(),
            p50: pct(50.0),
            p90: pct(90.0),
            p99: pct(99.0),
            mean: if s.is_empty() {
                f64::NAN
            } else {
                s.iter().sum::<f64>() / s.len() as f64
            },
            max: s.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Mean idle GPUs while at least one job is pending: the integral of `total_gpus` − busy
/// GPUs over the time some job has arrived and not yet started, divided by that time (s).
/// `jobs`: (arrival, start, end, GPUs) in one clock; busy counts a job from its start to its
/// end. NaN when no job ever waits.
pub fn idle_while_pending(total_gpus: u64, jobs: &[(i64, i64, i64, u32)]) -> f64 {
    // (time, pending change, busy change)
    let mut ev: Vec<(i64, i64, i64)> = Vec::with_capacity(jobs.len() * 3);
    for &(a, s, e, g) in jobs {
        ev.push((a, 1, 0));
        ev.push((s, -1, i64::from(g)));
        ev.push((e, 0, -i64::from(g)));
    }
    ev.sort_unstable();
    let (mut pending, mut busy) = (0i64, 0i64);
    let (mut idle, mut waited) = (0f64, 0f64);
    let mut last = ev.first().map_or(0, |e| e.0);
    for (t, dp, db) in ev {
        if pending > 0 {
            let dt = (t - last) as f64;
            idle += (total_gpus as f64 - busy as f64) * dt;
            waited += dt;
        }
        last = t;
        pending += dp;
        busy += db;
    }
    if waited > 0.0 {
        idle / waited
    } else {
        f64::NAN
    }
}

/// The result of one run.
#[derive(Debug, Default)]
pub struct TraceReport {
    /// `itp/<cluster>`, jobs, nodes, load, policy, scale.
    pub title: String,
    /// GPUs of the cluster.
    pub total_gpus: u64,
    /// Every job, in arrival order.
    pub jobs: Vec<JobTimes>,
    /// Measurements without a comparison (real time taken, submission lag, cycles).
    pub notes: Vec<String>,
    /// What did not happen as it must (a job that never ended, a count off).
    pub failures: Vec<String>,
}

/// The report's rows: `all`, then the simulator's gang-size buckets (name, least and most
/// GPUs).
fn buckets() -> Vec<(&'static str, u32, u32)> {
    let mut b = vec![("all", 0, u32::MAX)];
    b.extend_from_slice(BUCKETS);
    b
}

fn secs(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.0}")
    }
}

impl TraceReport {
    /// [`idle_while_pending`] of the simulation `run` (`None`: the controller): a job holds
    /// its GPUs from its last start to its end (sim+hold: start + duration + the controller's
    /// hold).
    pub fn idle_gpus(&self, run: Option<SimRun>) -> f64 {
        let held = |j: &JobTimes, s: u64| (s + j.duration_s + j.ctl_overrun().unwrap_or(0)) as i64;
        let jobs: Vec<(i64, i64, i64, u32)> = self
            .jobs
            .iter()
            .filter_map(|j| {
                Some(match run {
                    None => (j.ctl_submit, j.ctl_start?, j.ctl_end?, j.gpus),
                    Some(SimRun::Trace) => (
                        j.arrival as i64,
                        j.sim_start? as i64,
                        j.sim_end? as i64,
                        j.gpus,
                    ),
                    Some(SimRun::Held) => (
                        j.arrival as i64,
                        j.held_start? as i64,
                        held(j, j.held_start?),
                        j.gpus,
                    ),
                    Some(SimRun::HeldSubmitted) => (
                        j.held_sub_arrival as i64,
                        j.held_sub_start? as i64,
                        held(j, j.held_sub_start?),
                        j.gpus,
                    ),
                })
            })
            .collect();
        idle_while_pending(self.total_gpus, &jobs)
    }

    /// Queue-time distributions per bucket: (bucket, simulator, controller, |difference| per
    /// job).
    pub fn distributions(&self) -> Vec<(&'static str, Dist, Dist, Dist)> {
        self.distributions_of(SimRun::Trace)
    }

    /// As [`TraceReport::distributions`], against the simulation `run`.
    pub fn distributions_of(&self, run: SimRun) -> Vec<(&'static str, Dist, Dist, Dist)> {
        buckets()
            .into_iter()
            .map(|(name, lo, hi)| {
                let js: Vec<&JobTimes> = self
                    .jobs
                    .iter()
                    .filter(|j| j.gpus >= lo && j.gpus <= hi)
                    .collect();
                let sim: Vec<f64> = js.iter().filter_map(|j| j.queue(run)).collect();
                let ctl: Vec<f64> = js.iter().filter_map(|j| j.ctl_queue()).collect();
                let diff: Vec<f64> = js
                    .iter()
                    .filter_map(|j| Some((j.ctl_queue()? - j.queue(run)?).abs()))
                    .collect();
                (name, Dist::of(&sim), Dist::of(&ctl), Dist::of(&diff))
            })
            .collect()
    }

    /// The per-job CSV: `job,gpus,duration_s,arrival,sim_start,sim_end,held_start,
    /// held_sub_arrival,held_sub_start,ctl_job_id,ctl_submit,ctl_start,ctl_end,ctl_state`
    /// (empty for a time that does not exist).
    pub fn csv(&self) -> String {
        let o = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut s = String::from("job,gpus,duration_s,arrival,sim_start,sim_end,held_start,held_sub_arrival,held_sub_start,ctl_job_id,ctl_submit,ctl_start,ctl_end,ctl_state\n");
        for (i, j) in self.jobs.iter().enumerate() {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                i + 1,
                j.gpus,
                j.duration_s,
                j.arrival,
                o(j.sim_start.map(|x| x as i64)),
                o(j.sim_end.map(|x| x as i64)),
                o(j.held_start.map(|x| x as i64)),
                j.held_sub_arrival,
                o(j.held_sub_start.map(|x| x as i64)),
                j.job_id,
                j.ctl_submit,
                o(j.ctl_start),
                o(j.ctl_end),
                j.ctl_state
            );
        }
        s
    }
}

impl fmt::Display for TraceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "## {}\n", self.title)?;
        for n in &self.notes {
            writeln!(f, "- {n}")?;
        }
        for (run, what) in [
            (SimRun::Trace, "simulator"),
            (SimRun::Held, "simulator with the controller's hold times"),
            (
                SimRun::HeldSubmitted,
                "simulator with the controller's hold and submit times",
            ),
        ] {
            if run != SimRun::Trace && self.jobs.iter().all(|j| j.queue(run).is_none()) {
                continue;
            }
            self.table(f, run, what)?;
        }
        for x in &self.failures {
            writeln!(f, "\nFAILED: {x}")?;
        }
        Ok(())
    }
}

impl TraceReport {
    fn table(&self, f: &mut fmt::Formatter<'_>, run: SimRun, what: &str) -> fmt::Result {
        writeln!(
            f,
            "\nQueue time (s), {what} | controller through the daemons; |diff| is per job:\n"
        )?;
        writeln!(f, "| gang | jobs | p50 sim | p50 ctl | p90 sim | p90 ctl | p99 sim | p99 ctl | mean sim | mean ctl | max sim | max ctl | \\|diff\\| p50 / p90 / p99 |")?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
        for (name, s, c, d) in self.distributions_of(run) {
            writeln!(
                f,
                "| {name} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} |",
                s.n,
                c.n,
                secs(s.p50),
                secs(c.p50),
                secs(s.p90),
                secs(c.p90),
                secs(s.p99),
                secs(c.p99),
                secs(s.mean),
                secs(c.mean),
                secs(s.max),
                secs(c.max),
                secs(d.p50),
                secs(d.p90),
                secs(d.p99)
            )?;
        }
        Ok(())
    }
}

/// The trace's jobs as `flotilla sim gang` replays them: sorted by arrival, the first `n`,
/// durations at least 1 s; and the cluster's size in 8-GPU nodes, [`gang::itp_nodes`] of
/// the cluster's whole trace (as `flotilla sim gang --max-jobs`: a window of a few jobs does
/// not size its own cluster). Errors: the trace cannot be read, or the cluster is unknown.
pub fn trace_jobs(
    traces: &Path,
    cluster: &str,
    n: Option<usize>,
) -> Result<(Vec<TraceJob>, usize)> {
    let all = TraceDir::new(traces)
        .itp_cluster_jobs(cluster)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if all.is_empty() {
        bail!("no job of ITP cluster {cluster} in {}", traces.display());
    }
    let mut jobs: Vec<TraceJob> = all
        .iter()
        .map(|j| TraceJob {
            submit_s: j.submit_s,
            gpus: j.gpus,
            duration_s: j.duration_s.max(1),
        })
        .collect();
    jobs.sort_by_key(|j| j.submit_s);
    let nodes = gang::itp_nodes(&jobs) as usize;
    if let Some(n) = n {
        jobs.truncate(n);
    }
    Ok((jobs, nodes))
}

/// `SchedulerType=` of a queue policy name.
fn scheduler_type(policy: &str) -> Result<&'static str> {
    Ok(match policy {
        "flotilla" => "sched/backfill",
        "fifo" => "sched/builtin",
        "easy" => "easy",
        other => bail!("unknown queue policy {other} (flotilla, fifo, easy)"),
    })
}

/// Node `i` (1-based) of the replay's cluster: `n0001`..., as the simulator names them.
fn node_name(i: usize) -> String {
    format!("n{i:04}")
}

/// The `slurm.conf` body and `topology.conf` of `nodes` nodes as the simulator's ITP cluster:
/// 8 GPUs, 96 CPUs and 1 TiB each, pods (leaf switches) of 32 under one spine, one partition
/// without a time limit, `priority/basic` (FIFO) and the queue policy's `SchedulerType`.
/// `SlurmdTimeout` is left to the command line (it is in controller time, see [`run`]).
pub fn replay_config(nodes: usize, policy: &str, max_jobs: usize) -> Result<(String, String)> {
    let nodes = nodes.max(1);
    let mut conf = format!(
        "SchedulerType={}\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n\
         PriorityType=priority/basic\nTopologyPlugin=topology/tree\nGresTypes=gpu\n\
         KillWait=30\nMinJobAge=300\nMaxJobCount={}\n\
         NodeName=DEFAULT Sockets=2 CoresPerSocket=48 ThreadsPerCore=1 RealMemory=1048576 Gres=gpu:h100:8 State=UNKNOWN\n",
        scheduler_type(policy)?,
        (max_jobs * 2).max(10_000)
    );
    let range = |a: usize, b: usize| {
        if a == b {
            node_name(a)
        } else {
            format!("n[{:04}-{:04}]", a, b)
        }
    };
    let pods = nodes.div_ceil(dev::POD_NODES);
    let mut topo = String::new();
    for p in 0..pods {
        let (a, b) = (
            p * dev::POD_NODES + 1,
            ((p + 1) * dev::POD_NODES).min(nodes),
        );
        let _ = writeln!(conf, "NodeName={} NodeAddr=127.0.0.1", range(a, b));
        let _ = writeln!(topo, "SwitchName=pod{p} Nodes={}", range(a, b));
    }
    if pods > 1 {
        let _ = writeln!(topo, "SwitchName=spine Switches=pod[0-{}]", pods - 1);
    }
    conf.push_str("PartitionName=batch Nodes=ALL Default=YES MaxTime=UNLIMITED State=UP\n");
    Ok((conf, topo))
}

fn who() -> (u32, u32, String) {
    let uid = nix::unistd::getuid();
    let name = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    (uid.as_raw(), nix::unistd::getgid().as_raw(), name)
}

/// Job `i`'s submission: its GPUs with the simulator's topology, the simulator's walltime
/// request, and a script whose `sleep` gives the emulated node its runtime.
fn submission(
    work: &Path,
    i: usize,
    j: &TraceJob,
    node_gpus: u32,
    walltime_factor: f64,
) -> SubmitJob {
    let (uid, gid, user) = who();
    let topology = if j.gpus <= node_gpus || j.gpus % node_gpus == 0 {
        "node"
    } else {
        "any"
    };
    let limit_s = gang::time_limit(j.duration_s, walltime_factor);
    SubmitJob {
        name: Some(format!("trace{}", i + 1)),
        script: format!("#!/bin/sh\nsleep {}\n", j.duration_s),
        work_dir: work.to_string_lossy().into_owned(),
        environment: vec![("PATH".into(), "/usr/bin:/bin".into())],
        uid,
        gid,
        user,
        submit_host: "localhost".into(),
        gpus: Some(GpuCount {
            gpu_type: None,
            count: j.gpus,
        }),
        topology: Some(topology.into()),
        time_limit: Some(TimeLimitWire::Minutes(
            u32::try_from(limit_s.div_ceil(60)).unwrap_or(u32::MAX),
        )),
        ..SubmitJob::default()
    }
}

/// Runs the replay (module documentation); the cluster is stopped at the end, also on error.
/// `progress` gets one line per step.
///
/// Errors: the trace cannot be read, the daemons do not start, a submission is refused, or
/// `cancel` turned true. A job that never ends within the expected time is a failure of the
/// report, not an error.
pub fn trace(
    opts: &TraceOptions,
    cancel: &AtomicBool,
    progress: &dyn Fn(&str),
) -> Result<TraceReport> {
    if !(opts.load > 0.0 && opts.load.is_finite()) {
        bail!("--load must be positive");
    }
    let (jobs, nodes) = trace_jobs(&opts.traces, &opts.cluster, opts.jobs)?;
    if nodes > MAX_NODES {
        bail!(
            "ITP cluster {} sizes {nodes} nodes (more than {MAX_NODES})",
            opts.cluster
        );
    }
    let node_gpus = vec![8u32; nodes];
    let total_gpus = nodes as f64 * 8.0;
    let (w, t) = gang::work_and_span(&jobs);
    let native = w / (total_gpus * t);
    let arrival_scale = native / opts.load;
    let gopts = GangOptions {
        check_invariants: false,
        ..GangOptions::default()
    };

    progress(&format!("simulating {} jobs on {nodes} nodes", jobs.len()));
    let t_sim = Instant::now();
    let sim = gang::replay(
        &jobs,
        &node_gpus,
        &opts.policy,
        opts.load,
        arrival_scale,
        &gopts,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let sim_real = t_sim.elapsed();

    let src = opts.dir.join("conf");
    std::fs::create_dir_all(&src)?;
    let (conf, topo) = replay_config(nodes, &opts.policy, jobs.len())?;
    std::fs::write(
        src.join("slurm.conf"),
        format!("ClusterName=replay\n{conf}"),
    )?;
    std::fs::write(src.join("topology.conf"), topo)?;
    let mut up = UpOptions::new(opts.dir.join("cluster"));
    up.config = Some(src);
    up.emulate = Some(Emulate::Caller);
    up.bin_dir = opts.bin_dir.clone();
    up.timeout = Duration::from_secs(120);
    // A node is "not responding" after SlurmdTimeout of controller time without a message:
    // 20 heartbeats of real time, scaled.
    let slurmd_timeout = (opts.heartbeat.as_secs_f64() * 20.0 * opts.time_scale)
        .ceil()
        .max(300.0) as i64;
    up.ctld_args = vec![
        "--time-scale".into(),
        opts.time_scale.to_string(),
        "--slurmd-timeout".into(),
        slurmd_timeout.to_string(),
        // The simulator runs a cycle at every event: so does this controller, without
        // Slurm's `batch_sched_delay` pacing, so that the two runs compare like for like.
        "--batch-sched-delay-ms".into(),
        "0".into(),
    ];
    progress(&format!(
        "starting slurmctld --time-scale {} for {nodes} emulated nodes",
        opts.time_scale
    ));
    let mut cluster = dev::up(&up, cancel)?;
    let result = run(opts, &jobs, arrival_scale, &mut cluster, cancel, progress);
    cluster.stop(Duration::from_secs(10));
    let CtlRun {
        times: ctl,
        mut notes,
        failures,
    } = result?;

    let mut rep = TraceReport {
        title: format!(
            "itp/{}: {} jobs, {nodes} nodes × 8 GPUs, load {}, {}, controller clock × {}",
            opts.cluster,
            jobs.len(),
            opts.load,
            opts.policy,
            opts.time_scale
        ),
        failures,
        total_gpus: nodes as u64 * 8,
        ..TraceReport::default()
    };
    notes.insert(
        0,
        format!(
            "simulator: {} cycles, {} backfill starts, {} backfill preemptions, in {:.1} s real",
            sim.cycles,
            sim.backfill_starts,
            sim.backfill_preemptions,
            sim_real.as_secs_f64()
        ),
    );
    for (i, j) in jobs.iter().enumerate() {
        let (arrival, sim_start, sim_end) = sim.job_times[i];
        let c = ctl.get(i).cloned().unwrap_or_default();
        rep.jobs.push(JobTimes {
            gpus: j.gpus,
            duration_s: j.duration_s,
            arrival,
            sim_start,
            sim_end,
            held_start: None,
            held_sub_start: None,
            held_sub_arrival: 0,
            job_id: c.0,
            ctl_submit: c.1,
            ctl_start: c.2,
            ctl_end: c.3,
            ctl_state: c.4,
        });
    }

    // The simulator again with what the replay's latencies changed: each job holding its
    // GPUs as long as on the controller, then also arriving when the controller stamped it.
    if rep.failures.is_empty() {
        progress("simulating again with the controller's hold times, then its submit times");
        let held = GangOptions {
            extra_hold_s: rep
                .jobs
                .iter()
                .map(|j| j.ctl_overrun().unwrap_or(0))
                .collect(),
            ..gopts.clone()
        };
        let r = gang::replay(
            &jobs,
            &node_gpus,
            &opts.policy,
            opts.load,
            arrival_scale,
            &held,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let first = rep.jobs.iter().map(|j| j.ctl_submit).min().unwrap_or(0);
        let submitted: Vec<TraceJob> = jobs
            .iter()
            .zip(&rep.jobs)
            .map(|(j, c)| TraceJob {
                submit_s: u64::try_from(c.ctl_submit - first).unwrap_or(0),
                ..*j
            })
            .collect();
        let r2 = gang::replay(&submitted, &node_gpus, &opts.policy, opts.load, 1.0, &held)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (i, j) in rep.jobs.iter_mut().enumerate() {
            j.held_start = r.job_times[i].1;
            j.held_sub_arrival = r2.job_times[i].0;
            j.held_sub_start = r2.job_times[i].1;
        }
        notes.insert(
            1,
            format!(
                "simulator with the controller's hold times: {} backfill preemptions; with its hold and submit times: {}",
                r.backfill_preemptions, r2.backfill_preemptions
            ),
        );
    }
    notes.push(format!(
        "idle GPUs while a job is pending (mean): simulator {:.1}, with the controller's hold times {:.1}, with its hold and submit times {:.1}, controller {:.1}",
        rep.idle_gpus(Some(SimRun::Trace)),
        rep.idle_gpus(Some(SimRun::Held)),
        rep.idle_gpus(Some(SimRun::HeldSubmitted)),
        rep.idle_gpus(None)
    ));
    rep.notes = notes;
    Ok(rep)
}

/// A job as the controller accounted it: id, submit, start, end, state.
type CtlTimes = (u64, i64, Option<i64>, Option<i64>, String);

/// What the run through the daemons gives back.
struct CtlRun {
    /// Per job, in arrival order.
    times: Vec<CtlTimes>,
    notes: Vec<String>,
    failures: Vec<String>,
}

/// One submission as its connection saw it: the job id, and the real instants (from the
/// replay's start) when it was due, sent and answered.
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    id: u64,
    due: f64,
    sent: f64,
    answered: f64,
}

/// Submits `jobs` over `n` connections to `sock`, job `i` on connection `i mod n` when
/// `due(i)` (real time after `t0`) has come. Errors: a connection fails, a submission is
/// refused, or `cancel` turned true.
fn submit_all(
    sock: &Path,
    n: usize,
    subs: Vec<SubmitJob>,
    due: &[Duration],
    t0: Instant,
    cancel: &AtomicBool,
    progress: &dyn Fn(&str),
) -> Result<Vec<Sent>> {
    let n = n.clamp(1, subs.len().max(1));
    let total = subs.len();
    let mut per: Vec<Vec<(usize, SubmitJob)>> = (0..n).map(|_| Vec::new()).collect();
    for (i, s) in subs.into_iter().enumerate() {
        per[i % n].push((i, s));
    }
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<Vec<(usize, Sent)>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = per
            .into_iter()
            .map(|mine| {
                let done = &done;
                sc.spawn(move || -> Result<Vec<(usize, Sent)>> {
                    let mut client = Client::connect_unix(sock, Role::Command)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", sock.display()))?;
                    let mut out = Vec::with_capacity(mine.len());
                    for (i, sub) in mine {
                        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
                            bail!("interrupted");
                        }
                        if let Some(wait) = due[i].checked_sub(t0.elapsed()) {
                            std::thread::sleep(wait);
                        }
                        let sent = t0.elapsed().as_secs_f64();
                        let id = match client.call(None, Request::SubmitJob(Box::new(sub))) {
                            Ok(Response::Submitted(s)) => s.job_id,
                            other => bail!("submission of job {} answered {other:?}", i + 1),
                        };
                        let answered = t0.elapsed().as_secs_f64();
                        out.push((
                            i,
                            Sent {
                                id,
                                due: due[i].as_secs_f64(),
                                sent,
                                answered,
                            },
                        ));
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(out)
                })
            })
            .collect();
        // One progress line per thousand submissions (`progress` stays on this thread).
        let mut told = 0;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(200));
            let d = done.load(std::sync::atomic::Ordering::Relaxed) / 1000;
            if d > told {
                told = d;
                progress(&format!("{} submitted", d * 1000));
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a submitter panicked")))
            })
            .collect()
    });
    let mut sent = vec![Sent::default(); total];
    for r in results {
        for (i, s) in r? {
            sent[i] = s;
        }
    }
    Ok(sent)
}

/// The controller's clock at the replay's start (controller seconds at real time 0), from
/// the submissions: job `i`, stamped `submit[i]` (whole seconds, down) by a clock running
/// `scale` times faster, was handled between its sending and its answer, so the offset lies
/// in `[submit − scale · answered, submit + 1 − scale · sent]` for every job. Returns the
/// middle of the intersection and its half-width. A submit time stamped later than its
/// handling (a requeue that restamped it) only raises its own bounds: the upper bound is the
/// least of all, the lower the greatest of those that do not exceed it. `None` without any
/// job.
fn clock_offset(sent: &[Sent], submit: &[i64], scale: f64) -> Option<(f64, f64)> {
    let hi = sent
        .iter()
        .zip(submit)
        .map(|(s, &c)| c as f64 + 1.0 - scale * s.sent)
        .fold(f64::INFINITY, f64::min);
    let lo = sent
        .iter()
        .zip(submit)
        .map(|(s, &c)| c as f64 - scale * s.answered)
        .filter(|&l| l <= hi)
        .fold(f64::NEG_INFINITY, f64::max);
    (lo.is_finite() && hi.is_finite()).then(|| ((lo + hi) / 2.0, (hi - lo) / 2.0))
}

/// A job's end latency split in three (controller seconds): from its start stamp to its
/// launch reaching the node, its runtime on the node beyond its duration (the node's timer),
/// and from the node's end report to the controller's end stamp. `offset`: the controller's
/// clock at `t0`.
fn end_split(
    t: &CtlTimes,
    duration_s: u64,
    e: &EndTiming,
    t0: Instant,
    offset: f64,
    scale: f64,
) -> Option<(f64, f64, f64)> {
    let (start, end) = (t.2?, t.3?);
    let at = |i: Instant| offset + scale * i.saturating_duration_since(t0).as_secs_f64();
    Some((
        at(e.launched) - start as f64,
        scale * e.ended.saturating_duration_since(e.launched).as_secs_f64() - duration_s as f64,
        end as f64 - at(e.ended),
    ))
}

fn run(
    opts: &TraceOptions,
    jobs: &[TraceJob],
    arrival_scale: f64,
    cluster: &mut DevCluster,
    cancel: &AtomicBool,
    progress: &dyn Fn(&str),
) -> Result<CtlRun> {
    let mut notes = Vec::new();
    let mut failures = Vec::new();
    let dir = cluster.dir.clone();
    let sock = dir.join("state").join("slurmctld.sock");
    let work = dir.join("work");
    std::fs::create_dir_all(&work)?;
    let conf =
        flotilla_conf::load_from(&dir.join("slurm.conf")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let key = flotilla_proto::ClusterKey::load(&dir.join("slurm.key"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    crate::emulate::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let n_nodes = conf.nodes.len() as u64;
    let emu = Arc::new(Emulator::start(
        EmulatorOptions {
            ctld: cluster.ctld_addr,
            key,
            nodes: EmulatorOptions::nodes_of(&conf, None)?,
            heartbeat: opts.heartbeat,
            default_runtime_s: 1.0,
            time_scale: opts.time_scale,
        },
        rt.handle(),
    ));
    emu.record_ends();
    let es = emu.stats().clone();
    wait_for(
        cancel,
        "every node registered",
        Duration::from_secs(120),
        || Ok(EmuStats::get(&es.sessions) == n_nodes && all_idle(cluster)?),
    )?;

    // Submit each job when its arrival, in real time, has come.
    progress(&format!(
        "replaying {} arrivals over {} connections",
        jobs.len(),
        opts.submitters
    ));
    let origin = jobs.first().map_or(0, |j| j.submit_s);
    let arrival = |j: &TraceJob| ((j.submit_s - origin) as f64 * arrival_scale).round() as u64;
    let walltime_factor = GangOptions::default().walltime_factor;
    let subs: Vec<SubmitJob> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| submission(&work, i, j, 8, walltime_factor))
        .collect();
    let due: Vec<Duration> = jobs
        .iter()
        .map(|j| Duration::from_secs_f64(arrival(j) as f64 / opts.time_scale))
        .collect();
    let t0 = Instant::now();
    let sent = submit_all(&sock, opts.submitters, subs, &due, t0, cancel, progress)?;
    let ids: Vec<u64> = sent.iter().map(|s| s.id).collect();
    let submit_real = t0.elapsed();

    // Wait for every job to end: the last arrival plus the longest job, in real time, with
    // room for a queue (twice, plus two minutes).
    let longest = jobs.iter().map(|j| j.duration_s).max().unwrap_or(0);
    let expect = Duration::from_secs_f64(
        (jobs.last().map_or(0, arrival) + longest) as f64 / opts.time_scale,
    );
    let limit = expect * 2 + Duration::from_secs(120);
    progress(&format!(
        "waiting for {} jobs to end (expected within {:.0} s)",
        jobs.len(),
        expect.as_secs_f64()
    ));
    // Nothing pending or running any more (the controller's counters, cheap to ask: the
    // accounting query is read once at the end, not polled, so as not to load the owner).
    let mut left = (0, 0);
    let ended = wait_for(cancel, "every job ended", limit, || {
        let s = stats(&sock)?;
        left = (s.jobs_pending, s.jobs_running);
        Ok(s.jobs_submitted >= ids.len() as u64 && left == (0, 0))
    });
    if let Err(e) = ended {
        failures.push(format!(
            "{e:#}: {} pending and {} running left",
            left.0, left.1
        ));
    }
    let run_real = t0.elapsed();
    // The accounting records, once every end is committed.
    let mut recs = Vec::new();
    let _ = wait_for(
        cancel,
        "every job's end accounted",
        Duration::from_secs(60),
        || {
            recs = acct(&sock)?;
            Ok(recs
                .iter()
                .filter(|r| ids.contains(&r.job_id) && r.end_time.is_some())
                .count()
                >= ids.len())
        },
    );
    let by_id: std::collections::HashMap<u64, &flotilla_proto::acct::AcctJob> =
        recs.iter().map(|r| (r.job_id, r)).collect();
    let mut out = Vec::with_capacity(ids.len());
    let mut states: std::collections::BTreeMap<String, usize> = Default::default();
    for &id in &ids {
        match by_id.get(&id) {
            Some(r) => {
                *states.entry(r.state.clone()).or_default() += 1;
                out.push((id, r.submit_time, r.start_time, r.end_time, r.state.clone()));
            }
            None => out.push((id, 0, None, None, "MISSING".into())),
        }
    }
    let unended = out.iter().filter(|c| c.3.is_none()).count();
    if unended > 0 {
        failures.push(format!(
            "{unended} of {} jobs have no end in the accounting records",
            out.len()
        ));
    }
    // Submission lag: how far behind its arrival the controller stamped each submission,
    // relative to the first one (controller seconds), and how late each was sent (real).
    let first = out.first().map_or(0, |c| c.1);
    let lag: Vec<f64> = jobs
        .iter()
        .zip(&out)
        .map(|(j, c)| ((c.1 - first) - arrival(j) as i64) as f64)
        .collect();
    let lag = Dist::of(&lag);
    let late = Dist::of(
        &sent
            .iter()
            .map(|s| (s.sent - s.due).max(0.0))
            .collect::<Vec<_>>(),
    );
    let rtt = Dist::of(&sent.iter().map(|s| s.answered - s.sent).collect::<Vec<_>>());
    let inversions = ids.windows(2).filter(|w| w[1] < w[0]).count();
    notes.push(format!(
        "daemons: {} jobs submitted in {:.1} s real, all ended after {:.1} s real (expected about {:.1} s); states {:?}",
        ids.len(),
        submit_real.as_secs_f64(),
        run_real.as_secs_f64(),
        expect.as_secs_f64(),
        states
    ));
    notes.push(format!(
        "submission over {} connections: sent behind schedule p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms real; round trip p50 {:.2} ms, p99 {:.2} ms; stamped behind the arrival (controller s, first job = 0) p50 {:.0}, p99 {:.0}, max {:.0}; {} jobs got a lower id than the job before them",
        opts.submitters.max(1),
        late.p50 * 1000.0,
        late.p99 * 1000.0,
        late.max * 1000.0,
        rtt.p50 * 1000.0,
        rtt.p99 * 1000.0,
        lag.p50,
        lag.p99,
        lag.max,
        inversions
    ));
    // The end latency, split with the emulator's real instants.
    let submits: Vec<i64> = out.iter().map(|c| c.1).collect();
    let ends = emu.take_ends();
    let mut last: std::collections::HashMap<u64, EndTiming> = Default::default();
    for e in ends.into_iter().filter(|e| e.signal == 0) {
        let k = last.entry(e.job_id).or_insert(e);
        if e.run >= k.run {
            *k = e;
        }
    }
    let over = Dist::of(
        &jobs
            .iter()
            .zip(&out)
            .filter(|(_, c)| c.4 == "COMPLETED")
            .filter_map(|(j, c)| Some((c.3? - c.2? - j.duration_s as i64) as f64))
            .collect::<Vec<_>>(),
    );
    let f = opts.time_scale;
    // A distribution in controller seconds with its real milliseconds (÷ F).
    let real = |d: &Dist| {
        format!(
            "p50 {:.0}, p90 {:.0}, p99 {:.0} s ({:.1} / {:.1} / {:.1} ms real)",
            d.p50,
            d.p90,
            d.p99,
            d.p50 / f * 1000.0,
            d.p90 / f * 1000.0,
            d.p99 / f * 1000.0
        )
    };
    notes.push(format!("end latency (controller end − start − duration, COMPLETED jobs): {}", real(&over)));
    match clock_offset(&sent, &submits, f) {
        Some((offset, err)) => {
            let split: Vec<(f64, f64, f64)> = jobs
                .iter()
                .zip(&out)
                .filter(|(_, c)| c.4 == "COMPLETED")
                .filter_map(|(j, c)| end_split(c, j.duration_s, last.get(&c.0)?, t0, offset, f))
                .collect();
            let part = |k: usize| real(&Dist::of(&split.iter().map(|s| [s.0, s.1, s.2][k]).collect::<Vec<_>>()));
            notes.push(format!(
                "end latency split over {} jobs (clocks aligned within ±{:.0} controller s): start stamp → launch on the node {}; node timer beyond the duration {}; end report → controller's end stamp {}",
                split.len(),
                err,
                part(0),
                part(1),
                part(2)
            ));
        }
        None => notes.push("end latency split: the submissions do not align the clocks".into()),
    }
    let s = stats(&sock)?;
    notes.push(format!(
        "controller: {} scheduling cycles, {} job starts, {} requeued (backfill preemptions; the simulator: see its line), {} launches and {} ends on the emulated nodes",
        s.cycles,
        s.jobs_started,
        s.jobs_requeued,
        EmuStats::get(&es.launches),
        EmuStats::get(&es.exits)
    ));
    emu.stop();
    drop(rt);
    Ok(CtlRun {
        times: out,
        notes,
        failures,
    })
}

fn stats(sock: &Path) -> Result<flotilla_proto::Stats> {
    let mut c = Client::connect_unix(sock, Role::Command)
        .map_err(|e| anyhow::anyhow!("{}: {e}", sock.display()))?;
    match c
        .call(None, Request::Stats)
        .map_err(|e| anyhow::anyhow!("{e}"))?
    {
        Response::Stats(s) => Ok(s),
        other => bail!("stats answered {other:?}"),
    }
}

/// Every accounting record (`sacct -a` with no time window), through the RPC.
fn acct(sock: &Path) -> Result<Vec<flotilla_proto::acct::AcctJob>> {
    let mut c = Client::connect_unix(sock, Role::Command)
        .map_err(|e| anyhow::anyhow!("{}: {e}", sock.display()))?;
    match c
        .call(None, Request::QueryAcct(AcctQuery::default()))
        .map_err(|e| anyhow::anyhow!("{e}"))?
    {
        Response::Acct(v) => Ok(v),
        other => bail!("accounting query answered {other:?}"),
    }
}

/// Whether every node is up and responding, as the controller reports them.
fn all_idle(c: &DevCluster) -> Result<bool> {
    Ok(dev::query_nodes(&c.dir, c.ctld_addr)?
        .iter()
        .all(|(_, st, nr)| !*nr && !st.starts_with("DOWN") && st != "UNKNOWN"))
}

/// Writes `report.md` and `jobs.csv` into `out` (created).
///
/// Errors: the directory or a file cannot be written.
pub fn write(rep: &TraceReport, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("report.md"), rep.to_string())?;
    std::fs::write(out.join("jobs.csv"), rep.csv())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_use_nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let d = Dist::of(&v);
        assert_eq!(
            (d.n, d.p50, d.p90, d.p99, d.max),
            (100, 51.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(d.mean, 50.5);
        assert!(Dist::of(&[]).p50.is_nan());
    }

    #[test]
    fn idle_gpus_count_only_while_a_job_waits() {
        // 8 GPUs. A holds them 0-100; B waits 10-100 (nothing idle), runs 100-150; D waits
        // 200-210 with all 8 idle, then runs on 4. Waiting: 100 s, idle GPU-seconds 80.
        let jobs = [(0, 0, 100, 8), (10, 100, 150, 8), (200, 210, 220, 4)];
        assert!((idle_while_pending(8, &jobs) - 0.8).abs() < 1e-12);
        assert!(
            idle_while_pending(8, &[(0, 0, 10, 8)]).is_nan(),
            "nothing waited"
        );
    }

    #[test]
    fn the_clocks_align_on_the_submissions_round_trips() {
        // Controller time = 1,000 + 100 × real s. Job 1 sent at 0.010 s, answered at
        // 0.012 s, handled at 0.011 s: stamped 1,001. Job 2 sent at 0.500 s, answered at
        // 0.5004 s, stamped 1,050. Job 3 was restamped later (a requeue): 9,999.
        let sent = [
            Sent {
                id: 1,
                due: 0.0,
                sent: 0.010,
                answered: 0.012,
            },
            Sent {
                id: 2,
                due: 0.5,
                sent: 0.500,
                answered: 0.5004,
            },
            Sent {
                id: 3,
                due: 0.6,
                sent: 0.600,
                answered: 0.601,
            },
        ];
        let (off, err) = clock_offset(&sent, &[1_001, 1_050, 9_999], 100.0).unwrap();
        // Bounds: lo = max(1001 − 1.2, 1050 − 50.04) = 999.96, hi = min(1002 − 1, 1051 − 50)
        // = 1001.
        assert!((off - (999.96 + 1_001.0) / 2.0).abs() < 1e-9, "{off}");
        assert!((err - (1_001.0 - 999.96) / 2.0).abs() < 1e-9, "{err}");
        assert!(clock_offset(&[], &[], 100.0).is_none());
    }

    #[test]
    fn an_end_latency_splits_into_launch_timer_and_report() {
        // Controller time = 1,000 + 100 × real s from t0. Started at 1,010 (real 0.1 s), the
        // launch reached the node at real 0.105 s (1,010.5), the script of 100 s ran 1.02 s
        // real (102 s), its end was stamped at 1,115 (the report sent at 1,112.5).
        let t0 = Instant::now();
        let e = EndTiming {
            job_id: 7,
            run: 0,
            launched: t0 + Duration::from_millis(105),
            ended: t0 + Duration::from_millis(1_125),
            signal: 0,
            end_time: 0,
        };
        let t: CtlTimes = (7, 1_000, Some(1_010), Some(1_115), "COMPLETED".into());
        let (launch, timer, report) = end_split(&t, 100, &e, t0, 1_000.0, 100.0).unwrap();
        assert!((launch - 0.5).abs() < 1e-6, "{launch}");
        assert!((timer - 2.0).abs() < 1e-6, "{timer}");
        assert!((report - 2.5).abs() < 1e-6, "{report}");
        assert!((launch + timer + report - (1_115.0 - 1_010.0 - 100.0)).abs() < 1e-6);
        let unstarted: CtlTimes = (7, 1_000, None, None, "CANCELLED".into());
        assert!(end_split(&unstarted, 100, &e, t0, 1_000.0, 100.0).is_none());
    }

    #[test]
    fn the_config_has_the_simulators_cluster() {
        let (conf, topo) = replay_config(64, "flotilla", 15_802).unwrap();
        assert!(conf.contains("SchedulerType=sched/backfill\n"));
        assert!(conf.contains("PriorityType=priority/basic\n"));
        assert!(conf.contains(
            "NodeName=n[0001-0032] NodeAddr=127.0.0.1\nNodeName=n[0033-0064] NodeAddr=127.0.0.1\n"
        ));
        assert_eq!(topo, "SwitchName=pod0 Nodes=n[0001-0032]\nSwitchName=pod1 Nodes=n[0033-0064]\nSwitchName=spine Switches=pod[0-1]\n");
        assert!(replay_config(4, "lottery", 10).is_err());
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("slurm.conf"),
            format!("ClusterName=x\nSlurmctldHost=h\n{conf}"),
        )
        .unwrap();
        std::fs::write(d.path().join("topology.conf"), topo).unwrap();
        let c = flotilla_conf::load_from(&d.path().join("slurm.conf")).unwrap();
        assert_eq!(c.nodes.len(), 64);
        assert!(c.nodes.iter().all(|n| n.gpus == 8 && n.cpus == 96));
    }

    #[test]
    fn a_submission_asks_what_the_simulator_asks() {
        let j = |gpus, duration_s| TraceJob {
            submit_s: 0,
            gpus,
            duration_s,
        };
        let s = submission(Path::new("/tmp"), 0, &j(16, 5_000), 8, 2.0);
        assert_eq!(s.topology.as_deref(), Some("node"));
        assert_eq!(s.gpus.as_ref().map(|g| g.count), Some(16));
        assert_eq!(s.time_limit, Some(TimeLimitWire::Minutes(180)));
        assert_eq!(s.script, "#!/bin/sh\nsleep 5000\n");
        assert_eq!(
            submission(Path::new("/tmp"), 0, &j(12, 60), 8, 2.0)
                .topology
                .as_deref(),
            Some("any")
        );
        assert_eq!(
            submission(Path::new("/tmp"), 0, &j(3, 60), 8, 2.0)
                .topology
                .as_deref(),
            Some("node")
        );
    }
}
