//! Metrics served by the controller itself over HTTP on its own TCP port, as Slurm 25.11's
//! `slurmctld` does (`MetricsType=metrics/openmetrics`; `src/slurmctld/http.c`, the
//! `metrics/openmetrics` plugin and `src/slurmctld/statistics.c`, reimplemented from what they
//! count and print).
//!
//! The TCP listener tells an HTTP request from a proto frame by the connection's first byte
//! ([`looks_like_http`]) and hands HTTP peers to [`serve`]. Endpoints (`GET` only):
//! `/` and `/metrics` (plain-text indexes), `/livez` and `/healthz` (204 while the process
//! runs), `/readyz` (204 once the owner task answers, 500 otherwise), and the metric sets
//! `/metrics/jobs`, `/metrics/nodes`, `/metrics/partitions`, `/metrics/scheduler`,
//! `/metrics/jobs-users-accts` ([`MetricsKind`]). Anything else is 404 with Slurm's text.
//!
//! On a standby (a controller waiting for the leader lease, [`Standing::Standby`]), as Slurm
//! 25.11's backup (`src/slurmctld/http.c`, `_metrics_redirect_to_primary` and `_req_readyz`):
//! `/metrics` and every metric set answer `303 See Other` with `Location` the same path and
//! query on the leader, or `503` with Slurm's text when the leader's address is not known;
//! `/readyz` is 500 (not the primary); `/livez`, `/healthz` and `/` as on the leader. Slurm
//! sends the client to the first `SlurmctldHost` (its primary always leads when up); here the
//! leader is whichever controller holds the lease, so `Location` is the address the lease row
//! names (`ha_lease.addr`, the leader's `host:port`), never this standby itself.
//!
//! What it must never do: block or slow the scheduler, or trust an HTTP peer. The owner task
//! only *counts* (an [`Event::Metrics`] answered with a [`Snapshot`] of aggregated numbers,
//! O(jobs + nodes), no text); the text is rendered here, in the connection's task. HTTP peers
//! are unauthenticated: they have their own small pool ([`HttpGate`], per source address and
//! in all, the oldest closed for a newcomer), each set's text is reused for [`MAX_AGE`] (the
//! owner counts a set at most about twice a second however many ask), a request head of at most
//! [`MAX_REQUEST_HEAD`] bytes read within [`HEADER_TIMEOUT`], no body, and a connection lives
//! at most [`CONNECTION_LIFETIME`].
//!
//! Authorisation: Slurm 25.11 (`_check_metrics_authorized`) answers every metrics request 401
//! when `PrivateData` is set, and serves everyone otherwise. Slurm 26.05 adds
//! `MetricsAuthUsers` and `MetricsParameters=ignore_private_data`: the metrics need a JWT
//! (`X-SLURM-USER-TOKEN` or `Authorization: Bearer`) of root, `SlurmUser` or a listed user when
//! `MetricsAuthUsers` is set, or `PrivateData` is without `ignore_private_data`. Here the
//! token is verified with the controller's `auth/jwt` key ([`flotilla_proto::jwt`], as
//! slurmrestd's are): no token, or one that does not verify (or no key), is 401; a verified
//! user other than root, `SlurmUser` and (when set) the `MetricsAuthUsers` names is 403
//! (Slurm's `EPERM`). Health endpoints stay open, as in Slurm.
//!
//! Format: Slurm's metric names (all gauges, as its plugin exposes) plus a `flotilla_` family.
//! One body is valid both as OpenMetrics 1.0 (it ends with `# EOF`, has no counters) and as
//! Prometheus text 0.0.4 (where `# EOF` is a comment); the `Content-Type` says OpenMetrics when
//! the client's `Accept` asks for it, else `text/plain` as Slurm sends.

use crate::ctld::Event;
use bytes::Bytes;
use flotilla_proto::diag::Diag;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, StatusCode};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tracing::debug;

/// Largest request head (request line and headers) in bytes; hyper's smallest read buffer.
pub const MAX_REQUEST_HEAD: usize = 8192;
/// Most request headers.
pub const MAX_HEADERS: usize = 32;
/// The request head must arrive within this after the connection (or the previous answer).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the owner task may take to count before the answer is 503.
pub const OWNER_TIMEOUT: Duration = Duration::from_secs(10);
/// An HTTP connection (keep-alive included) is closed this long after it was accepted.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// `Content-Type` of an OpenMetrics body.
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of a Prometheus text body (Slurm sends `text/plain`).
pub const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether a connection whose first byte is `b` speaks HTTP: every HTTP/1 method begins with
/// an upper-case ASCII letter (`A` is 0x41), and a proto frame begins with its big-endian u32
/// length, whose first byte is under 0x41 for every frame under 1 GiB (the default limit is
/// 16 MiB: 0x00 or 0x01; see [`flotilla_proto::decode_frame_max`]). A TLS hello (0x16) goes
/// the proto way and is refused there. Slurm 25.11 decides the same way, from the bytes
/// (`http_switch_on_data`: an RPC header is recognised, anything else is HTTP).
pub fn looks_like_http(b: u8) -> bool {
    b.is_ascii_uppercase()
}

/// One metric set, by its path under `/metrics/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsKind {
    /// `/metrics/jobs`: job counts by state and what running jobs hold.
    Jobs,
    /// `/metrics/nodes`: per-node resources and node counts by state.
    Nodes,
    /// `/metrics/partitions`: per partition, its jobs and nodes; Flotilla's placeable sizes.
    Partitions,
    /// `/metrics/scheduler`: `sdiag`'s numbers; Flotilla's reservations, preemptions, pages and
    /// the scheduling cycle's time histogram.
    Scheduler,
    /// `/metrics/jobs-users-accts`: job counts by user and by account.
    UsersAccounts,
}

impl MetricsKind {
    /// Every set, in the order of Slurm's index.
    pub const ALL: [MetricsKind; 5] =
        [MetricsKind::Jobs, MetricsKind::Nodes, MetricsKind::Partitions, MetricsKind::UsersAccounts, MetricsKind::Scheduler];

    /// The URL path.
    pub fn path(self) -> &'static str {
        match self {
            MetricsKind::Jobs => "/metrics/jobs",
            MetricsKind::Nodes => "/metrics/nodes",
            MetricsKind::Partitions => "/metrics/partitions",
            MetricsKind::Scheduler => "/metrics/scheduler",
            MetricsKind::UsersAccounts => "/metrics/jobs-users-accts",
        }
    }

    /// The set a path names.
    pub fn from_path(path: &str) -> Option<MetricsKind> {
        MetricsKind::ALL.into_iter().find(|k| k.path() == path)
    }
}

/// The metrics settings of slurm.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsConf {
    /// `MetricsType=metrics/openmetrics`.
    pub enabled: bool,
    /// A token is required (`MetricsAuthUsers` set, or `PrivateData` without
    /// `MetricsParameters=ignore_private_data`; Slurm 26.05 `read_config.c` `metrics_auth`).
    pub auth_required: bool,
    /// `MetricsAuthUsers=` names (besides root and `SlurmUser`); `None`: unset.
    pub auth_users: Option<Vec<String>>,
}

impl MetricsConf {
    /// From the parsed slurm.conf.
    pub fn from_config(c: &flotilla_core::config::ClusterConfig) -> MetricsConf {
        let ignore_private = c.metrics_parameters.iter().any(|p| p == "ignore_private_data");
        let private = !c.private_data.is_empty();
        MetricsConf {
            enabled: c.metrics_type.as_deref() == Some("metrics/openmetrics"),
            auth_required: c.metrics_auth_users.is_some() || (private && !ignore_private),
            auth_users: c.metrics_auth_users.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// What the owner task counts.

/// A job's base state in Slurm's terms (`JOB_STATE_BASE`, in Slurm's order: the ones after
/// `Suspended` are finished).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BaseState {
    /// `JOB_PENDING`.
    Pending,
    /// `JOB_RUNNING`.
    Running,
    /// `JOB_SUSPENDED`.
    Suspended,
    /// `JOB_COMPLETE`.
    Complete,
    /// `JOB_CANCELLED`.
    Cancelled,
    /// `JOB_FAILED`.
    Failed,
    /// `JOB_TIMEOUT`.
    Timeout,
    /// `JOB_NODE_FAIL`.
    NodeFail,
    /// `JOB_PREEMPTED`.
    Preempted,
    /// `JOB_BOOT_FAIL`.
    BootFail,
    /// `JOB_DEADLINE`.
    Deadline,
    /// `JOB_OOM`.
    OutOfMemory,
}

/// One job record as the counts see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    /// Base state (a completing job's is the state it ends in).
    pub base: BaseState,
    /// Ended, its nodes not yet confirmed clean (`JOB_COMPLETING`).
    pub completing: bool,
    /// Pending and held (user or admin hold).
    pub held: bool,
    /// Jobs this record stands for: the pending tasks of an array record, else 1.
    pub tasks: u64,
    /// CPUs allocated (running jobs).
    pub cpus: u64,
    /// Memory allocated, bytes (running jobs).
    pub mem_bytes: u64,
    /// Nodes allocated (running jobs).
    pub nodes: u64,
    /// Nodes requested (pending jobs; Flotilla's requests have one node count, min = max).
    pub req_nodes: u64,
    /// Pending because of the partition's node limits (`PartitionNodeLimit`).
    pub wait_part_node_limit: bool,
}

/// Job counts in the shape of Slurm's `jobs_stats_t`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// `jobs`: records (a pending array record counts its tasks in `/metrics/jobs`).
    pub jobs: u64,
    /// Not finished, or finished but completing (a partition's `jobs`).
    pub active: u64,
    /// Per base state, [`BaseState`] order.
    pub by_state: [u64; 12],
    /// Pending and held.
    pub hold: u64,
    /// Completing.
    pub completing: u64,
    /// Finished (base state after `Suspended`).
    pub finished: u64,
    /// Started (base state after `Pending`).
    pub started: u64,
    /// Pending for the partition's node limit.
    pub wait_part_node_limit: u64,
    /// CPUs of running jobs.
    pub cpus_alloc: u64,
    /// Memory of running jobs, bytes.
    pub memory_alloc: u64,
    /// Nodes of running jobs.
    pub nodes_alloc: u64,
    /// Most nodes any pending job asks for, held jobs included / left out.
    pub max_job_nodes: u64,
    /// As `max_job_nodes`, held jobs left out.
    pub max_job_nodes_nohold: u64,
}

impl JobCounts {
    /// Counts `j`; `tasks_in_total`: whether a pending array record adds its tasks to `jobs`
    /// (Slurm's `/metrics/jobs` does, its per-user and per-account sets count records).
    pub fn add(&mut self, j: &JobFacts, tasks_in_total: bool) {
        let pending = j.base == BaseState::Pending;
        let n = if pending { j.tasks } else { 1 };
        self.by_state[j.base as usize] += n;
        if pending && j.held {
            self.hold += n;
        }
        if j.completing {
            self.completing += 1;
        }
        if j.base > BaseState::Suspended {
            self.finished += 1;
        }
        if j.base > BaseState::Pending {
            self.started += 1;
        }
        if pending && j.wait_part_node_limit {
            self.wait_part_node_limit += 1;
        }
        if matches!(j.base, BaseState::Running | BaseState::Suspended) {
            self.cpus_alloc += j.cpus;
            self.memory_alloc += j.mem_bytes;
            self.nodes_alloc += j.nodes;
        }
        if j.base <= BaseState::Suspended || j.completing {
            self.active += 1;
        }
        if pending {
            self.max_job_nodes = self.max_job_nodes.max(j.req_nodes);
            if !j.held {
                self.max_job_nodes_nohold = self.max_job_nodes_nohold.max(j.req_nodes);
            }
        }
        self.jobs += if tasks_in_total { n } else { 1 };
    }

    fn state(&self, s: BaseState) -> u64 {
        self.by_state[s as usize]
    }
}

/// A node's base state in Slurm's terms (`MIXED` inferred from its allocations, as
/// `statistics_get_nodes` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeBase {
    /// Nothing allocated.
    Idle,
    /// Some CPUs or any GPU allocated.
    Mixed,
    /// Every CPU allocated.
    Allocated,
    /// Down.
    Down,
    /// Not heard from since the controller started.
    Unknown,
}

/// One node as the counts see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// Node name.
    pub name: String,
    /// Base state.
    pub base: NodeBase,
    /// Drained or draining (`DRAIN` flag; a GPU quarantine counts).
    pub drain: bool,
    /// No node-daemon session (`NOT_RESPONDING`).
    pub no_resp: bool,
    /// CPUs.
    pub cpus: u64,
    /// CPUs allocated.
    pub cpus_alloc: u64,
    /// Memory, MiB (`RealMemory`).
    pub mem_mib: u64,
    /// Memory allocated, MiB.
    pub mem_alloc_mib: u64,
    /// GPUs.
    pub gpus: u64,
    /// GPUs free.
    pub gpus_free: u64,
}

impl NodeFacts {
    fn busy(&self) -> bool {
        matches!(self.base, NodeBase::Mixed | NodeBase::Allocated)
    }

    /// Schedulable and nothing of it allocated: a whole node a job could take now.
    pub fn fully_free(&self) -> bool {
        self.base == NodeBase::Idle && !self.drain && !self.no_resp && self.cpus_alloc == 0 && self.gpus_free == self.gpus
    }
}

/// Node counts in the shape of Slurm's `nodes_stats_t`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCounts {
    /// Nodes counted.
    pub total: u64,
    /// Base `IDLE`.
    pub idle: u64,
    /// Base `MIXED`.
    pub mixed: u64,
    /// Base `ALLOCATED`.
    pub alloc: u64,
    /// Base `DOWN`.
    pub down: u64,
    /// Base `UNKNOWN`.
    pub unknown: u64,
    /// `DRAIN` flag on a node with nothing running (Slurm counts draining ones apart).
    pub drain: u64,
    /// `DRAIN` and nothing running.
    pub drained: u64,
    /// `DRAIN` with jobs still running.
    pub draining: u64,
    /// `NOT_RESPONDING`.
    pub no_resp: u64,
    /// CPUs allocated.
    pub cpus_alloc: u64,
    /// CPUs (all are effective: no `CoreSpecCount`).
    pub cpus: u64,
    /// CPUs not allocated.
    pub cpus_idle: u64,
    /// Memory allocated, bytes.
    pub mem_alloc: u64,
    /// Memory, bytes.
    pub mem_total: u64,
    /// Fully free schedulable nodes ([`NodeFacts::fully_free`]).
    pub free_full: u64,
}

impl NodeCounts {
    /// Counts `n`.
    pub fn add(&mut self, n: &NodeFacts) {
        self.total += 1;
        match n.base {
            NodeBase::Idle => self.idle += 1,
            NodeBase::Mixed => self.mixed += 1,
            NodeBase::Allocated => self.alloc += 1,
            NodeBase::Down => self.down += 1,
            NodeBase::Unknown => self.unknown += 1,
        }
        if n.drain && n.busy() {
            self.draining += 1;
        } else if n.drain {
            self.drain += 1;
            self.drained += 1;
        }
        if n.no_resp {
            self.no_resp += 1;
        }
        self.cpus_alloc += n.cpus_alloc;
        self.cpus += n.cpus;
        self.cpus_idle += n.cpus - n.cpus_alloc.min(n.cpus);
        self.mem_alloc += n.mem_alloc_mib << 20;
        self.mem_total += n.mem_mib << 20;
        if n.fully_free() {
            self.free_full += 1;
        }
    }
}

/// One partition's numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionFacts {
    /// Partition name.
    pub name: String,
    /// Its jobs.
    pub jobs: JobCounts,
    /// Its nodes.
    pub nodes: NodeCounts,
    /// Largest GPU request that could start now inside one node, one pod, anywhere
    /// (`sinfo -O LargestPlaceable`).
    pub largest_placeable: (u32, u32, u32),
    /// GPUs elastic jobs hold above their minimum on the partition's nodes that may be taken
    /// back (`sinfo --largest`'s `GROWN`).
    pub elastic_reclaimable_gpus: u32,
    /// `largest_placeable` if that growth were taken back (`sinfo -O LargestReclaimable`).
    pub largest_if_reclaimed: (u32, u32, u32),
}

/// Durations bucketed by upper bounds in µs (cumulative since the start, never reset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// Upper bounds of the buckets, µs, increasing.
    pub bounds: &'static [u64],
    /// Observations at or under each bound (and over the one before), not cumulative.
    pub counts: Vec<u64>,
    /// Observations over the last bound.
    pub over: u64,
    /// Sum of observations, µs.
    pub sum_us: u64,
}

/// Upper bounds of the scheduling cycle histogram's buckets, µs (100 µs to 10 s).
pub const CYCLE_BUCKETS_US: &[u64] = &[100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000, 10_000_000];

/// Upper bounds of the queue-wait histograms' buckets, µs (1 s to 1 day).
pub const WAIT_BUCKETS_US: &[u64] = &[
    1_000_000,
    10_000_000,
    60_000_000,
    300_000_000,
    900_000_000,
    3_600_000_000,
    14_400_000_000,
    86_400_000_000,
];

/// The gang sizes (GPUs a job starts with) the queue-wait histograms are kept for: the
/// label, and the most GPUs it covers.
pub const GANG_SIZES: [(&str, u64); 5] = [("0", 0), ("1", 1), ("2-8", 8), ("9-64", 64), ("65+", u64::MAX)];

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new(CYCLE_BUCKETS_US)
    }
}

impl Histogram {
    /// An empty histogram over `bounds` (µs, increasing).
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len()], over: 0, sum_us: 0 }
    }

    /// Records one observation of `us` µs.
    pub fn observe_us(&mut self, us: u64) {
        match self.bounds.iter().position(|&b| us <= b) {
            Some(i) => self.counts[i] += 1,
            None => self.over += 1,
        }
        self.sum_us += us;
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.over
    }
}

/// Time from eligibility (submission, or `--begin` when later) to start, per gang size
/// ([`GANG_SIZES`]), of the jobs started since the controller did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueWait(pub [Histogram; GANG_SIZES.len()]);

impl Default for QueueWait {
    fn default() -> QueueWait {
        QueueWait(std::array::from_fn(|_| Histogram::new(WAIT_BUCKETS_US)))
    }
}

impl QueueWait {
    /// Records a job that started with `gpus` GPUs after waiting `wait_s` seconds.
    pub fn observe(&mut self, gpus: u64, wait_s: u64) {
        let i = GANG_SIZES.iter().position(|&(_, most)| gpus <= most).unwrap_or(GANG_SIZES.len() - 1);
        self.0[i].observe_us(wait_s.saturating_mul(1_000_000));
    }
}

/// Flotilla's scheduler numbers beside `sdiag`'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlotillaSched {
    /// Reservations held now.
    pub reservations: u64,
    /// GPUs those reservations hold.
    pub reservation_gpus: u64,
    /// Cycle durations since the start.
    pub cycle: Histogram,
    /// Queue waits of the jobs started since the start, by gang size.
    pub wait: QueueWait,
    /// Age of the oldest held reservation (s; 0 without one).
    pub reservation_oldest_s: u64,
    /// Running jobs backfilled on reserved GPUs (invariant 6: preempted when the reservation
    /// completes).
    pub backfill_jobs: u64,
    /// GPUs those backfill jobs hold.
    pub backfill_gpus: u64,
    /// Preempted share of running training GPUs over the trailing hour (%).
    pub budget_share_pct: u64,
    /// The share above which a preemption warns (`budget_warn_pct`).
    pub budget_warn_pct: u64,
    /// The share above which a preemption pages instead (`budget_page_pct`).
    pub budget_page_pct: u64,
    /// Checkpoint bandwidth the preemption deadline assumes (bytes/s).
    pub checkpoint_bw: u64,
    /// Nodes the health policy quarantined, by cause ([`quarantine_cause`]), sorted by cause.
    pub quarantined: Vec<(String, u64)>,
}

/// The cause of a quarantine, from its reason (`health/nvidia`'s texts): `Xid N`, `ECC`,
/// `NVLink`, `RetiredPages`, `Temperature`, else `Other`.
pub fn quarantine_cause(reason: &str) -> String {
    if let Some(rest) = reason.strip_prefix("Xid ") {
        let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !n.is_empty() {
            return format!("Xid {n}");
        }
    }
    let cause = if reason.contains("ECC") {
        "ECC"
    } else if reason.contains("NVLink") {
        "NVLink"
    } else if reason.contains("retired pages") {
        "RetiredPages"
    } else if reason.starts_with("gpu ") && reason.contains(" C (limit ") {
        "Temperature"
    } else {
        "Other"
    };
    cause.to_string()
}

/// What the owner task counted for one [`MetricsKind`].
#[derive(Debug, Clone, PartialEq)]
pub enum Snapshot {
    /// `/metrics/jobs`.
    Jobs(JobCounts),
    /// `/metrics/nodes`: per node, and the counts of all.
    Nodes(Vec<NodeFacts>, NodeCounts),
    /// `/metrics/partitions`.
    Partitions(Vec<PartitionFacts>),
    /// `/metrics/scheduler`: `sdiag`'s answer and Flotilla's numbers.
    Scheduler(Box<Diag>, Box<FlotillaSched>),
    /// `/metrics/jobs-users-accts`: by user name and by account, sorted by name.
    UsersAccounts(Vec<(String, JobCounts)>, Vec<(String, JobCounts)>),
}

// ---------------------------------------------------------------------------------------
// Rendering.

/// Text being rendered: families with `# HELP`/`# TYPE`, then samples.
struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(val));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {v}");
    }

    fn gauge(&mut self, name: &str, help: &str, v: impl std::fmt::Display) {
        self.family(name, "gauge", help);
        self.sample(name, &[], v);
    }

    /// One gauge family with one sample per row, labelled `label=<row name>`.
    fn gauges<T>(&mut self, name: &str, help: &str, label: &str, rows: &[T], key: impl Fn(&T) -> &str, v: impl Fn(&T) -> u64) {
        if rows.is_empty() {
            return;
        }
        self.family(name, "gauge", help);
        for r in rows {
            self.sample(name, &[(label, key(r))], v(r));
        }
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The job families Slurm prints for `/metrics/jobs` and, prefixed, per user and account:
/// (name after the prefix, help, value).
type JobFamily = (&'static str, &'static str, fn(&JobCounts) -> u64);

const JOB_FAMILIES: &[JobFamily] = &[
    ("jobs", "Jobs in the controller (a pending array counts its tasks)", |c| c.jobs),
    ("jobs_bootfail", "Jobs in state BOOT_FAIL", |c| c.state(BaseState::BootFail)),
    ("jobs_cancelled", "Jobs in state CANCELLED", |c| c.state(BaseState::Cancelled)),
    ("jobs_completed", "Jobs in state COMPLETED", |c| c.state(BaseState::Complete)),
    ("jobs_completing", "Jobs with the COMPLETING flag", |c| c.completing),
    ("jobs_configuring", "Jobs with the CONFIGURING flag", |_| 0),
    ("jobs_cpus_alloc", "CPUs allocated to running jobs", |c| c.cpus_alloc),
    ("jobs_deadline", "Jobs in state DEADLINE", |c| c.state(BaseState::Deadline)),
    ("jobs_expediting", "Jobs with the EXPEDITING flag", |_| 0),
    ("jobs_failed", "Jobs in state FAILED", |c| c.state(BaseState::Failed)),
    ("jobs_fed_requeued", "Jobs requeued by a federation", |_| 0),
    ("jobs_finished", "Jobs that have finished", |c| c.finished),
    ("jobs_hold", "Pending jobs that are held", |c| c.hold),
    ("jobs_memory_alloc", "Memory allocated to running jobs, bytes", |c| c.memory_alloc),
    ("jobs_node_failed", "Jobs in state NODE_FAIL", |c| c.state(BaseState::NodeFail)),
    ("jobs_nodes_alloc", "Nodes allocated to running jobs", |c| c.nodes_alloc),
    ("jobs_outofmemory", "Jobs in state OUT_OF_MEMORY", |c| c.state(BaseState::OutOfMemory)),
    ("jobs_pending", "Jobs in state PENDING (held ones included)", |c| c.state(BaseState::Pending)),
    ("jobs_powerup_node", "Jobs waiting for nodes to power up", |_| 0),
    ("jobs_preempted", "Jobs in state PREEMPTED", |c| c.state(BaseState::Preempted)),
    ("jobs_requeued", "Jobs being requeued", |_| 0),
    ("jobs_resizing", "Jobs being resized", |_| 0),
    ("jobs_revoked", "Jobs revoked by a federation", |_| 0),
    ("jobs_running", "Jobs in state RUNNING", |c| c.state(BaseState::Running)),
    ("jobs_signaling", "Jobs being signalled", |_| 0),
    ("jobs_stageout", "Jobs staging out", |_| 0),
    ("jobs_started", "Jobs that have started", |c| c.started),
    ("jobs_suspended", "Jobs in state SUSPENDED", |c| c.state(BaseState::Suspended)),
    ("jobs_timeout", "Jobs in state TIMEOUT", |c| c.state(BaseState::Timeout)),
];

/// The partition families beyond the job ones: (name after `slurm_partition_`, help, value).
type PartFamily = (&'static str, &'static str, fn(&PartitionFacts) -> u64);

const PART_FAMILIES: &[PartFamily] = &[
    ("jobs_max_job_nodes", "Most nodes a pending job of the partition asks for", |p| p.jobs.max_job_nodes),
    ("jobs_max_job_nodes_nohold", "Most nodes a pending job of the partition asks for, held jobs left out", |p| {
        p.jobs.max_job_nodes_nohold
    }),
    ("jobs_min_job_nodes", "Largest minimum node count of a pending job of the partition", |p| p.jobs.max_job_nodes),
    ("jobs_min_job_nodes_nohold", "Largest minimum node count of a pending job of the partition, held jobs left out", |p| {
        p.jobs.max_job_nodes_nohold
    }),
    ("jobs_wait_part_node_limit", "Pending jobs waiting for the partition's node limits", |p| p.jobs.wait_part_node_limit),
    ("nodes_alloc", "Nodes in state ALLOCATED", |p| p.nodes.alloc),
    ("nodes_blocked", "Nodes in state BLOCKED", |_| 0),
    ("nodes_cg", "Nodes with the COMPLETING flag", |_| 0),
    ("nodes_cloud", "Cloud nodes", |_| 0),
    ("nodes_cpus_alloc", "CPUs allocated on the partition's nodes", |p| p.nodes.cpus_alloc),
    ("nodes_cpus_efctv", "CPUs of the partition's nodes usable by jobs", |p| p.nodes.cpus),
    ("nodes_cpus_idle", "CPUs not allocated on the partition's nodes", |p| p.nodes.cpus_idle),
    ("nodes_down", "Nodes in state DOWN", |p| p.nodes.down),
    ("nodes_drain", "Nodes with the DRAIN flag and nothing running", |p| p.nodes.drain),
    ("nodes_drained", "Nodes drained", |p| p.nodes.drained),
    ("nodes_draining", "Nodes with the DRAIN flag and jobs still running", |p| p.nodes.draining),
    ("nodes_dyn_future", "Dynamic nodes in state FUTURE", |_| 0),
    ("nodes_dyn_normal", "Dynamic nodes", |_| 0),
    ("nodes_external", "External nodes", |_| 0),
    ("nodes_fail", "Nodes with the FAIL flag", |_| 0),
    ("nodes_future", "Nodes in state FUTURE", |_| 0),
    ("nodes_idle", "Nodes in state IDLE", |p| p.nodes.idle),
    ("nodes_invalid_reg", "Nodes with the INVALID_REG flag", |_| 0),
    ("nodes_maint", "Nodes with the MAINTENANCE flag", |_| 0),
    ("nodes_mem_alloc", "Memory allocated on the partition's nodes, bytes", |p| p.nodes.mem_alloc),
    ("nodes_mem_avail", "Memory of the partition's nodes usable by jobs, bytes", |p| p.nodes.mem_total),
    ("nodes_mem_free", "Free memory the partition's nodes report, bytes (not reported: 0)", |_| 0),
    ("nodes_mem_tot", "Memory of the partition's nodes, bytes", |p| p.nodes.mem_total),
    ("nodes_mixed", "Nodes in state MIXED", |p| p.nodes.mixed),
    ("nodes_no_resp", "Nodes with the NOT_RESPONDING flag", |p| p.nodes.no_resp),
    ("nodes_planned", "Nodes with the PLANNED flag", |_| 0),
    ("nodes_power_down", "Nodes marked to power down", |_| 0),
    ("nodes_power_up", "Nodes marked to power up", |_| 0),
    ("nodes_powered_down", "Nodes powered down", |_| 0),
    ("nodes_powering_down", "Nodes powering down", |_| 0),
    ("nodes_powering_up", "Nodes powering up", |_| 0),
    ("nodes_reboot_issued", "Nodes with a reboot issued", |_| 0),
    ("nodes_reboot_requested", "Nodes with a reboot requested", |_| 0),
    ("nodes_resv", "Nodes in an advanced reservation", |_| 0),
    ("nodes_unknown", "Nodes in state UNKNOWN", |p| p.nodes.unknown),
    ("cpus", "CPUs of the partition's nodes", |p| p.nodes.cpus),
    ("nodes", "Nodes of the partition", |p| p.nodes.total),
];

/// The node-count families of `/metrics/nodes`: (name, help, value).
type NodeFamily = (&'static str, &'static str, fn(&NodeCounts) -> u64);

const NODE_FAMILIES: &[NodeFamily] = &[
    ("slurm_nodes", "Nodes in the cluster", |c| c.total),
    ("slurm_nodes_alloc", "Nodes in state ALLOCATED", |c| c.alloc),
    ("slurm_nodes_blocked", "Nodes in state BLOCKED", |_| 0),
    ("slurm_nodes_completing", "Nodes with the COMPLETING flag", |_| 0),
    ("slurm_nodes_cloud", "Cloud nodes", |_| 0),
    ("slurm_nodes_down", "Nodes in state DOWN", |c| c.down),
    ("slurm_nodes_drain", "Nodes with the DRAIN flag and nothing running", |c| c.drain),
    ("slurm_nodes_drained", "Nodes drained", |c| c.drained),
    ("slurm_nodes_draining", "Nodes with the DRAIN flag and jobs still running", |c| c.draining),
    ("slurm_nodes_dyn_future", "Dynamic nodes in state FUTURE", |_| 0),
    ("slurm_nodes_dyn_normal", "Dynamic nodes", |_| 0),
    ("slurm_nodes_external", "External nodes", |_| 0),
    ("slurm_nodes_fail", "Nodes with the FAIL flag", |_| 0),
    ("slurm_nodes_future", "Nodes in state FUTURE", |_| 0),
    ("slurm_nodes_idle", "Nodes in state IDLE", |c| c.idle),
    ("slurm_nodes_invalid_reg", "Nodes with the INVALID_REG flag", |_| 0),
    ("slurm_nodes_maint", "Nodes with the MAINTENANCE flag", |_| 0),
    ("slurm_nodes_mixed", "Nodes in state MIXED", |c| c.mixed),
    ("slurm_nodes_noresp", "Nodes with the NOT_RESPONDING flag", |c| c.no_resp),
    ("slurm_nodes_planned", "Nodes with the PLANNED flag", |_| 0),
    ("slurm_nodes_power_down", "Nodes marked to power down", |_| 0),
    ("slurm_nodes_power_up", "Nodes marked to power up", |_| 0),
    ("slurm_nodes_powered_down", "Nodes powered down", |_| 0),
    ("slurm_nodes_powering_up", "Nodes powering up", |_| 0),
    ("slurm_nodes_reboot_issued", "Nodes with a reboot issued", |_| 0),
    ("slurm_nodes_reboot_req", "Nodes with a reboot requested", |_| 0),
    ("slurm_nodes_resv", "Nodes in an advanced reservation", |_| 0),
    ("slurm_nodes_unknown", "Nodes in state UNKNOWN", |c| c.unknown),
];

/// The scheduler families: (name, help, value) from `sdiag`'s answer.
type SchedFamily = (&'static str, &'static str, fn(&Diag) -> u64);

fn mean(sum: u64, n: u64) -> u64 {
    sum.checked_div(n).unwrap_or(0)
}

const SCHED_FAMILIES: &[SchedFamily] = &[
    ("slurm_agent_cnt", "Nodes the pending node messages go to", |d| u64::from(d.agent_count)),
    ("slurm_agent_queue_size", "Node messages waiting to be sent", |d| u64::from(d.agent_queue_size)),
    ("slurm_agent_thread_cnt", "Agent threads (none: node sessions are tasks)", |d| u64::from(d.agent_thread_count)),
    ("slurm_bf_depth_mean", "Mean depth of backfill cycles", |d| mean(d.bf_depth_sum, d.bf_cycle_counter)),
    ("slurm_bf_mean_cycle", "Mean backfill cycle time, microseconds", |d| mean(d.bf_cycle_sum, d.bf_cycle_counter)),
    ("slurm_bf_mean_table_sz", "Mean backfill table size (reservations held)", |d| mean(d.bf_table_size_sum, d.bf_cycle_counter)),
    ("slurm_bf_queue_len_mean", "Mean backfill queue length", |d| mean(d.bf_queue_len_sum, d.bf_cycle_counter)),
    ("slurm_bf_try_depth_mean", "Mean depth tried by backfill cycles", |d| mean(d.bf_depth_try_sum, d.bf_cycle_counter)),
    ("slurm_backfilled_het_jobs", "Heterogeneous job components backfilled", |d| d.bf_backfilled_het_jobs),
    ("slurm_backfilled_jobs", "Jobs started by backfill since the controller started", |d| d.bf_backfilled_jobs),
    ("slurm_bf_active", "Whether a backfill cycle is running now", |d| u64::from(d.bf_active)),
    ("slurm_bf_cycle_cnt", "Backfill cycles", |d| d.bf_cycle_counter),
    ("slurm_bf_cycle_last", "Last backfill cycle time, microseconds", |d| d.bf_cycle_last),
    ("slurm_bf_cycle_max", "Longest backfill cycle time, microseconds", |d| d.bf_cycle_max),
    ("slurm_bf_cycle_tot", "Sum of backfill cycle times, microseconds", |d| d.bf_cycle_sum),
    ("slurm_bf_depth_tot", "Sum of backfill cycle depths", |d| d.bf_depth_sum),
    ("slurm_bf_depth_try_tot", "Sum of depths tried by backfill cycles", |d| d.bf_depth_try_sum),
    ("slurm_bf_last_depth", "Depth of the last backfill cycle", |d| d.bf_last_depth),
    ("slurm_bf_last_depth_try", "Depth tried by the last backfill cycle", |d| d.bf_last_depth_try),
    ("slurm_bf_queue_len", "Queue length of the last backfill cycle", |d| d.bf_queue_len),
    ("slurm_bf_queue_len_tot", "Sum of backfill queue lengths", |d| d.bf_queue_len_sum),
    ("slurm_bf_table_size", "Table size of the last backfill cycle", |d| d.bf_table_size),
    ("slurm_bf_table_size_tot", "Sum of backfill table sizes", |d| d.bf_table_size_sum),
    ("slurm_bf_when_last_cycle", "When the last backfill cycle ran, seconds since the epoch", |d| d.bf_when_last_cycle.max(0) as u64),
    ("slurm_sdiag_jobs_canceled", "Jobs cancelled since the statistics were reset", |d| d.jobs_canceled),
    ("slurm_sdiag_jobs_completed", "Jobs completed since the statistics were reset", |d| d.jobs_completed),
    ("slurm_sdiag_jobs_failed", "Jobs failed since the statistics were reset", |d| d.jobs_failed),
    ("slurm_sdiag_jobs_pending", "Jobs pending now", |d| d.jobs_pending),
    ("slurm_sdiag_jobs_running", "Jobs running now", |d| d.jobs_running),
    ("slurm_sdiag_jobs_started", "Jobs started since the statistics were reset", |d| d.jobs_started),
    ("slurm_sdiag_jobs_submitted", "Jobs submitted since the statistics were reset", |d| d.jobs_submitted),
    ("slurm_sdiag_job_states_ts", "When the job counts were taken, seconds since the epoch", |d| d.job_states_ts.max(0) as u64),
    ("slurm_last_backfilled_jobs", "Jobs started by backfill since the statistics were reset", |d| d.bf_last_backfilled_jobs),
    ("slurm_sdiag_latency", "Time of 1000 clock reads, microseconds", |d| u64::from(d.gettimeofday_latency)),
    ("slurm_schedule_cycle_cnt", "Scheduling cycles", |d| d.schedule_cycle_counter),
    ("slurm_schedule_cycle_depth", "Sum of the jobs scheduling cycles examined", |d| d.schedule_cycle_depth),
    ("slurm_schedule_cycle_last", "Last scheduling cycle time, microseconds", |d| d.schedule_cycle_last),
    ("slurm_schedule_cycle_max", "Longest scheduling cycle time, microseconds", |d| d.schedule_cycle_max),
    ("slurm_schedule_cycle_tot", "Sum of scheduling cycle times, microseconds", |d| d.schedule_cycle_sum),
    ("slurm_schedule_queue_len", "Pending jobs at the start of the last scheduling cycle", |d| d.schedule_queue_len),
    ("slurm_sched_exit_end", "Scheduling cycles that reached the end of the queue (all of them)", |d| d.schedule_cycle_counter),
    ("slurm_sched_exit_max_depth", "Scheduling cycles stopped at the queue depth limit", |_| 0),
    ("slurm_sched_exit_max_job_start", "Scheduling cycles stopped at the job start limit", |_| 0),
    ("slurm_sched_exit_lic", "Scheduling cycles blocked on licenses", |_| 0),
    ("slurm_sched_exit_rpc_cnt", "Scheduling cycles stopped for pending RPCs", |_| 0),
    ("slurm_sched_exit_timeout", "Scheduling cycles stopped at their time limit", |_| 0),
    ("slurm_bf_exit_end", "Backfill cycles that reached the end of the queue (all of them)", |d| d.bf_cycle_counter),
    ("slurm_bf_exit_max_job_start", "Backfill cycles stopped at the job start limit", |_| 0),
    ("slurm_bf_exit_max_job_test", "Backfill cycles stopped at the job test limit", |_| 0),
    ("slurm_bf_exit_state_changed", "Backfill cycles stopped by a state change", |_| 0),
    ("slurm_bf_exit_table_limit", "Backfill cycles stopped at the table size limit", |_| 0),
    ("slurm_bf_exit_timeout", "Backfill cycles stopped at their time limit", |_| 0),
    ("slurm_sched_mean_cycle", "Mean scheduling cycle time, microseconds", |d| mean(d.schedule_cycle_sum, d.schedule_cycle_counter)),
    ("slurm_sched_mean_depth_cycle", "Mean depth of scheduling cycles", |d| mean(d.schedule_cycle_depth, d.schedule_cycle_counter)),
    ("slurm_server_thread_cnt", "Requests the owner task is serving in its current turn", |d| u64::from(d.server_thread_count)),
    ("slurm_slurmdbd_queue_size", "Replies held while the state database cannot commit", |d| u64::from(d.dbd_agent_queue_size)),
    ("slurm_last_proc_req_start", "When the statistics were last reset (or the controller started), seconds since the epoch", |d| {
        d.req_time_start.max(0) as u64
    }),
    ("slurm_sched_stats_timestamp", "When these statistics were taken, seconds since the epoch", |d| d.req_time.max(0) as u64),
];

/// Per-node families of `/metrics/nodes`: (name, help, value).
type PerNodeFamily = (&'static str, &'static str, fn(&NodeFacts) -> u64);

const PER_NODE_FAMILIES: &[PerNodeFamily] = &[
    ("slurm_node_cpus", "CPUs of the node", |n| n.cpus),
    ("slurm_node_cpus_alloc", "CPUs of the node allocated to jobs", |n| n.cpus_alloc),
    ("slurm_node_cpus_effective", "CPUs of the node usable by jobs", |n| n.cpus),
    ("slurm_node_cpus_idle", "CPUs of the node not allocated", |n| n.cpus - n.cpus_alloc.min(n.cpus)),
    ("slurm_node_memory_alloc_bytes", "Memory of the node allocated to jobs, bytes", |n| n.mem_alloc_mib << 20),
    ("slurm_node_memory_effective_bytes", "Memory of the node usable by jobs, bytes", |n| n.mem_mib << 20),
    ("slurm_node_memory_free_bytes", "Free memory the node reports, bytes (not reported: 0)", |_| 0),
    ("slurm_node_memory_bytes", "Memory of the node, bytes", |n| n.mem_mib << 20),
];

/// The text of a snapshot: OpenMetrics 1.0 (and Prometheus text 0.0.4), ending `# EOF`.
pub fn render(s: &Snapshot) -> String {
    let mut o = Out(String::with_capacity(4096));
    match s {
        Snapshot::Jobs(c) => {
            for (name, help, v) in JOB_FAMILIES {
                o.gauge(&format!("slurm_{name}"), help, v(c));
            }
        }
        Snapshot::Nodes(nodes, c) => {
            for (name, help, v) in PER_NODE_FAMILIES {
                o.gauges(name, help, "node", nodes, |n| &n.name, v);
            }
            for (name, help, v) in NODE_FAMILIES {
                o.gauge(name, help, v(c));
            }
        }
        Snapshot::Partitions(parts) => {
            o.gauge("slurm_partitions", "Partitions", parts.len());
            let jobs_help = |help: &str| format!("{help}, of the partition");
            for (name, help, v) in JOB_FAMILIES {
                let fam = if *name == "jobs" { "slurm_partition_jobs".to_string() } else { format!("slurm_partition_{name}") };
                let help = if *name == "jobs" { "Jobs of the partition not yet completed".to_string() } else { jobs_help(help) };
                o.gauges(&fam, &help, "partition", parts, |p| &p.name, |p| if *name == "jobs" { p.jobs.active } else { v(&p.jobs) });
            }
            for (name, help, v) in PART_FAMILIES {
                o.gauges(&format!("slurm_partition_{name}"), help, "partition", parts, |p| &p.name, v);
            }
            if !parts.is_empty() {
                let name = "flotilla_largest_placeable";
                o.family(name, "gauge", "Largest GPU request that could start now in the partition, inside one node, one pod, or anywhere");
                for p in parts {
                    let (node, pod, any) = p.largest_placeable;
                    for (topo, v) in [("node", node), ("pod", pod), ("any", any)] {
                        o.sample(name, &[("partition", &p.name), ("topology", topo)], v);
                    }
                }
            }
            if !parts.is_empty() {
                let name = "flotilla_largest_placeable_if_reclaimed";
                o.family(
                    name,
                    "gauge",
                    "Largest GPU request that could start in the partition, inside one node, one pod, or anywhere, if elastic jobs gave back their growth above their minimum",
                );
                for p in parts {
                    let (node, pod, any) = p.largest_if_reclaimed;
                    for (topo, v) in [("node", node), ("pod", pod), ("any", any)] {
                        o.sample(name, &[("partition", &p.name), ("topology", topo)], v);
                    }
                }
            }
            o.gauges(
                "flotilla_elastic_reclaimable_gpus",
                "GPUs elastic jobs hold above their minimum in the partition, taken back before any whole job is preempted",
                "partition",
                parts,
                |p| &p.name,
                |p| u64::from(p.elastic_reclaimable_gpus),
            );
            o.gauges("flotilla_free_nodes_full", "Schedulable nodes of the partition with nothing allocated", "partition", parts, |p| &p.name, |p| {
                p.nodes.free_full
            });
        }
        Snapshot::Scheduler(d, f) => {
            for (name, help, v) in SCHED_FAMILIES {
                o.gauge(name, help, v(d));
            }
            render_flotilla_sched(&mut o, d, f);
        }
        Snapshot::UsersAccounts(users, accounts) => {
            for (rows, prefix, label) in [(users, "slurm_user_", "username"), (accounts, "slurm_account_", "account")] {
                for (name, help, v) in JOB_FAMILIES {
                    let help = if *name == "jobs" { "Jobs in the controller" } else { help };
                    o.gauges(&format!("{prefix}{name}"), help, label, rows, |r| &r.0, |r| v(&r.1));
                }
            }
        }
    }
    o.0.push_str("# EOF\n");
    o.0
}

fn render_flotilla_sched(o: &mut Out, d: &Diag, f: &FlotillaSched) {
    o.gauge("flotilla_reservations_held", "Pending jobs holding a reservation of GPUs", f.reservations);
    o.gauge("flotilla_reservation_gpus_held", "GPUs held by reservations", f.reservation_gpus);
    let name = "flotilla_preemptions";
    o.family(name, "gauge", "Preemptions decided since the statistics were reset, by reason");
    for reason in ["PendingJob", "ReservationComplete", "ServiceReplica"] {
        let n = d.flotilla.preemptions.iter().find(|(r, _)| r == reason).map_or(0, |(_, n)| *n);
        o.sample(name, &[("reason", reason)], n);
    }
    o.gauge("flotilla_pages", "Pages raised since the statistics were reset", d.flotilla.pages);
    o.gauge("flotilla_alerts", "Alerts other than pages raised since the statistics were reset", d.flotilla.alerts);
    o.gauge("flotilla_reservation_oldest_age_seconds", "Age of the oldest held reservation, seconds (0 without one)", f.reservation_oldest_s);
    o.gauge("flotilla_backfill_jobs_on_reserved", "Running jobs backfilled on GPUs a reservation holds", f.backfill_jobs);
    o.gauge("flotilla_backfill_gpus_on_reserved", "GPUs of running jobs backfilled on a reservation's GPUs", f.backfill_gpus);
    o.gauge(
        "flotilla_preemption_budget_share_percent",
        "Preempted share of running training GPUs over the trailing hour, percent",
        f.budget_share_pct,
    );
    let name = "flotilla_preemption_budget_tier";
    o.family(name, "gauge", "The preemption budget's tier now: free, warn (a preemption raises an alert) or page (only services below min_replicas may preempt, and a page is raised)");
    let tier = if f.budget_share_pct > f.budget_page_pct {
        "page"
    } else if f.budget_share_pct > f.budget_warn_pct {
        "warn"
    } else {
        "free"
    };
    for t in ["free", "warn", "page"] {
        o.sample(name, &[("tier", t)], u8::from(t == tier));
    }
    o.gauge("flotilla_checkpoint_bandwidth_bytes_per_second", "Checkpoint bandwidth the preemption deadline assumes, bytes per second", f.checkpoint_bw);
    let name = "flotilla_nodes_quarantined";
    o.family(name, "gauge", "Nodes the GPU health policy quarantined, by cause (Xid N, ECC, NVLink, RetiredPages, Temperature, Other)");
    for (cause, n) in &f.quarantined {
        o.sample(name, &[("cause", cause)], n);
    }
    let name = "flotilla_sched_cycle_seconds";
    o.family(name, "histogram", "Time of the scheduling cycles since the controller started, seconds");
    o.histogram(name, None, &f.cycle);
    let name = "flotilla_queue_wait_seconds";
    o.family(name, "histogram", "Time from eligibility to start of the jobs started since the controller did, by GPUs started with");
    for ((gang, _), h) in GANG_SIZES.iter().zip(&f.wait.0) {
        o.histogram(name, Some(("gang_gpus", gang)), h);
    }
}

impl Out {
    /// The samples of histogram `name` (its family line written already), with `label`.
    fn histogram(&mut self, name: &str, label: Option<(&str, &str)>, h: &Histogram) {
        let bucket = format!("{name}_bucket");
        let with = |le: &str| -> Vec<(&str, String)> { label.iter().map(|&(k, v)| (k, v.to_string())).chain([("le", le.to_string())]).collect() };
        let mut cum = 0;
        for (i, b) in h.bounds.iter().enumerate() {
            cum += h.counts[i];
            let l = with(&seconds(*b));
            self.sample(&bucket, &l.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>(), cum);
        }
        let l = with("+Inf");
        self.sample(&bucket, &l.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>(), h.count());
        let l: Vec<(&str, &str)> = label.into_iter().collect();
        self.sample(&format!("{name}_sum"), &l, seconds(h.sum_us));
        self.sample(&format!("{name}_count"), &l, h.count());
    }
}

/// Microseconds as seconds, with no trailing zeros (`2500` → `0.0025`, `1000000` → `1.0`).
fn seconds(us: u64) -> String {
    let s = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
    let t = s.trim_end_matches('0');
    if t.ends_with('.') { format!("{t}0") } else { t.to_string() }
}

// ---------------------------------------------------------------------------------------
// The HTTP side.

/// Caps of the HTTP pool (Slurm has no such keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// HTTP connections at once, all peers; the oldest is closed for a newcomer.
    pub total: usize,
    /// HTTP connections at once per source address (a Prometheus keeps one per target).
    pub per_ip: usize,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits { total: 64, per_ip: 16 }
    }
}

/// The HTTP side's shared state: settings, the pool, the owner task's inbox.
#[derive(Debug)]
pub struct HttpGate {
    /// slurm.conf's metrics settings.
    pub conf: MetricsConf,
    /// Pool caps.
    pub limits: HttpLimits,
    /// Requests answered (any status).
    pub requests: AtomicU64,
    /// Times the owner task was asked for a metric set (cache misses).
    pub owner_asks: AtomicU64,
    pool: Mutex<HttpPool>,
    /// The last text of each set and when it was counted ([`MAX_AGE`]).
    cache: Mutex<HashMap<&'static str, (tokio::time::Instant, Bytes)>>,
    next: AtomicU64,
    /// The `auth/jwt` key and `SlurmUser`'s uid, when tokens are on ([`HttpGate::with_jwt`]).
    jwt: Option<(flotilla_proto::jwt::JwtKey, u32)>,
    /// Token users' uids.
    users: crate::users::UserNames,
}

/// A metric set's text is served from the last count for this long: however many peers ask,
/// the owner task counts each set at most about once per this (a scrape every second still
/// sees every change).
pub const MAX_AGE: Duration = Duration::from_millis(500);

#[derive(Debug, Default)]
struct HttpPool {
    /// Connection id → (address, notified when evicted), oldest first.
    conns: BTreeMap<u64, (IpAddr, Arc<Notify>)>,
    by_ip: HashMap<IpAddr, usize>,
}

impl HttpPool {
    fn remove(&mut self, id: u64) {
        if let Some((ip, _)) = self.conns.remove(&id) {
            if let Some(n) = self.by_ip.get_mut(&ip) {
                *n -= 1;
                if *n == 0 {
                    self.by_ip.remove(&ip);
                }
            }
        }
    }
}

/// A connection's place in the HTTP pool, given back when dropped.
struct HttpSlot {
    gate: Arc<HttpGate>,
    id: u64,
    evicted: Arc<Notify>,
}

impl Drop for HttpSlot {
    fn drop(&mut self) {
        self.gate.pool().remove(self.id);
    }
}

impl HttpGate {
    /// A gate with default caps.
    pub fn new(conf: MetricsConf) -> HttpGate {
        HttpGate {
            conf,
            limits: HttpLimits::default(),
            requests: AtomicU64::new(0),
            owner_asks: AtomicU64::new(0),
            pool: Mutex::new(HttpPool::default()),
            cache: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            jwt: None,
            users: crate::users::UserNames::new(),
        }
    }

    /// Verifies metrics tokens with `key`; root and `slurm_uid` are always allowed.
    pub fn with_jwt(mut self, key: Option<flotilla_proto::jwt::JwtKey>, slurm_uid: u32) -> HttpGate {
        self.jwt = key.map(|k| (k, slurm_uid));
        self
    }

    /// Whether a request with `headers` may read the metrics (Slurm's
    /// `_check_metrics_authorized`): `Err(status)` 401 without a token that verifies, 403 for a
    /// user not allowed.
    async fn authorize(&self, headers: &hyper::HeaderMap) -> Result<(), StatusCode> {
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::trim);
        let token = header("x-slurm-user-token")
            .or_else(|| header("authorization").and_then(|a| a.strip_prefix("Bearer ")).map(str::trim))
            .filter(|t| !t.is_empty())
            .ok_or(StatusCode::UNAUTHORIZED)?;
        let (key, slurm_uid) = self.jwt.as_ref().ok_or(StatusCode::UNAUTHORIZED)?;
        let claims = key.verify(token, crate::ctld::wall_now()).map_err(|e| {
            tracing::warn!("metrics token refused: {e}");
            StatusCode::UNAUTHORIZED
        })?;
        let (uid, _) = self.users.user(&claims.user).await.ok_or(StatusCode::UNAUTHORIZED)?;
        // Root and SlurmUser always (the same two a token may act for others as).
        if flotilla_proto::jwt::may_act_as(uid, *slurm_uid) || self.conf.auth_users.as_ref().is_some_and(|l| l.contains(&claims.user)) {
            Ok(())
        } else {
            Err(StatusCode::FORBIDDEN)
        }
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, HttpPool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// HTTP connections held now.
    pub fn connections(&self) -> usize {
        self.pool().conns.len()
    }

    /// Admits a connection from `ip`, closing the oldest one of `ip` (or of anyone, when the
    /// pool is full) to make room.
    fn admit(self: &Arc<HttpGate>, ip: IpAddr) -> HttpSlot {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let mut p = self.pool();
        let victim = if p.by_ip.get(&ip).copied().unwrap_or(0) >= self.limits.per_ip {
            p.conns.iter().find(|(_, (i, _))| *i == ip).map(|(c, _)| *c)
        } else if p.conns.len() >= self.limits.total {
            p.conns.keys().next().copied()
        } else {
            None
        };
        if let Some(v) = victim {
            if let Some((_, n)) = p.conns.get(&v) {
                n.notify_one();
            }
            p.remove(v);
        }
        p.conns.insert(id, (ip, evicted.clone()));
        *p.by_ip.entry(ip).or_insert(0) += 1;
        drop(p);
        HttpSlot { gate: self.clone(), id, evicted }
    }
}

/// Serves one HTTP/1.1 connection from `ip` until the peer closes it, it is evicted, its
/// lifetime ends or the controller shuts down. `tx` is the owner task's inbox.
/// `standing` says, at each request, whether this controller leads
/// ([`crate::server::Shared::standing`]).
pub async fn serve(
    stream: TcpStream,
    ip: IpAddr,
    gate: Arc<HttpGate>,
    tx: Option<mpsc::Sender<Event>>,
    standing: Arc<dyn Fn() -> Standing + Send + Sync>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slot = gate.admit(ip);
    let io = hyper_util::rt::TokioIo::new(stream);
    let svc_gate = gate.clone();
    let svc = hyper::service::service_fn(move |req| {
        let (gate, tx, now) = (svc_gate.clone(), tx.clone(), standing());
        async move { Ok::<_, Infallible>(answer(req, &gate, tx.as_ref(), &now).await) }
    });
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_REQUEST_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let conn = b.serve_connection(io, svc);
    tokio::pin!(conn);
    let evicted = slot.evicted.clone();
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                debug!(%ip, "HTTP connection ended: {e}");
            }
        }
        _ = evicted.notified() => debug!(%ip, "HTTP connection closed to make room"),
        _ = tokio::time::sleep(CONNECTION_LIFETIME) => {}
        _ = shutdown.changed() => {}
    }
    drop(slot);
}

type HttpResponse = hyper::Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: Option<&str>, body: String) -> HttpResponse {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Some(t) = content_type {
        if let Ok(v) = hyper::header::HeaderValue::from_str(t) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
    }
    r
}

/// Slurm's error body (`_reply_error`): the request, and the failure's text.
fn error_body(method: &Method, path: &str, why: &str) -> String {
    format!("slurmctld HTTP server request for '{method} {path}':\nFailed: {why}\n")
}

const ROOT_INDEX: &str = "slurmctld index of endpoints:\n\
    \x20 '/readyz': check slurmctld is servicing RPCs\n\
    \x20 '/livez': check slurmctld is running\n\
    \x20 '/healthz': check slurmctld is running\n\
    \x20 '/metrics': print available metric endpoints\n";
const METRICS_INDEX: &str = "slurmctld index of metrics endpoints:\n\
    \x20 '/metrics/jobs': get job metrics\n\
    \x20 '/metrics/nodes': get node metrics\n\
    \x20 '/metrics/partitions': get partition metrics\n\
    \x20 '/metrics/jobs-users-accts': get user and account jobs metrics\n\
    \x20 '/metrics/scheduler': get scheduler metrics\n";

/// Asks the owner task for `kind` (`None`: only whether it answers).
async fn ask_owner(tx: Option<&mpsc::Sender<Event>>, kind: Option<MetricsKind>) -> Option<Option<Snapshot>> {
    let tx = tx?;
    let (reply, rx) = oneshot::channel();
    let asked = async {
        tx.send(Event::Metrics { kind, reply }).await.ok()?;
        rx.await.ok()
    };
    tokio::time::timeout(OWNER_TIMEOUT, asked).await.ok().flatten()
}

/// What this controller is when an HTTP request comes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// It holds the leader lease (or runs alone).
    Leader,
    /// It waits for the lease; `leader` is the lease holder's `host:port` when known.
    Standby {
        /// The leader's address, as its lease row names it.
        leader: Option<String>,
    },
}

/// Slurm's text when a standby does not know where the leader is (`http.c`).
const NO_PRIMARY: &str = "slurmctld: primary mode controller address unavailable\n";

/// A standby's answer to `path` (`query`: the URI's query, if any), or `None` when the
/// request is answered as on the leader (Slurm 25.11 `_metrics_redirect_to_primary` for the
/// metrics paths, `_req_readyz` for `/readyz`). Only paths that exist are sent on: an unknown
/// one is still 404 here.
fn standby_answer(standing: &Standing, path: &str, query: Option<&str>) -> Option<HttpResponse> {
    let Standing::Standby { leader } = standing else { return None };
    if path == "/readyz" {
        return Some(respond(StatusCode::INTERNAL_SERVER_ERROR, None, String::new()));
    }
    if path != "/metrics" && MetricsKind::from_path(path).is_none() {
        return None;
    }
    // An address without a port (a leader with no TCP listener) is no place to send anyone.
    let Some(addr) = leader.as_deref().filter(|a| a.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())) else {
        return Some(respond(StatusCode::SERVICE_UNAVAILABLE, Some(TEXT_TYPE), NO_PRIMARY.to_string()));
    };
    let mut location = format!("http://{addr}{path}");
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        location.push('?');
        location.push_str(q);
    }
    let Ok(v) = hyper::header::HeaderValue::from_str(&location) else {
        return Some(respond(StatusCode::SERVICE_UNAVAILABLE, Some(TEXT_TYPE), NO_PRIMARY.to_string()));
    };
    debug!(%location, "HTTP metrics: standby sending 303 See Other to the leader");
    let mut r = respond(StatusCode::SEE_OTHER, None, String::new());
    r.headers_mut().insert(hyper::header::LOCATION, v);
    Some(r)
}

/// The answer to one request.
async fn answer(req: hyper::Request<Incoming>, gate: &HttpGate, tx: Option<&mpsc::Sender<Event>>, standing: &Standing) -> HttpResponse {
    use hyper::body::Body as _;
    gate.requests.fetch_add(1, Ordering::Relaxed);
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    // No request here has a body; one announced is refused and the connection closed (it
    // would have to be read to find the next request).
    if req.body().size_hint().upper() != Some(0) {
        let mut r = respond(StatusCode::BAD_REQUEST, Some(TEXT_TYPE), error_body(&method, &path, "a request body is not accepted"));
        r.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
        return r;
    }
    if method != Method::GET {
        return respond(StatusCode::NOT_FOUND, Some(TEXT_TYPE), error_body(&method, &path, "Invalid or unknown URL path"));
    }
    // A standby sends the metrics on to the leader before any token check, as Slurm's does.
    if let Some(r) = standby_answer(standing, &path, req.uri().query()) {
        return r;
    }
    if gate.conf.auth_required && (path == "/metrics" || MetricsKind::from_path(&path).is_some()) {
        if let Err(status) = gate.authorize(req.headers()).await {
            return refused(status, &method, &path);
        }
    }
    match path.as_str() {
        "/" => respond(StatusCode::OK, Some(TEXT_TYPE), ROOT_INDEX.to_string()),
        "/livez" | "/healthz" => respond(StatusCode::NO_CONTENT, None, String::new()),
        "/readyz" => match ask_owner(tx, None).await {
            Some(_) => respond(StatusCode::NO_CONTENT, None, String::new()),
            None => respond(StatusCode::INTERNAL_SERVER_ERROR, None, String::new()),
        },
        "/metrics" => respond(StatusCode::OK, Some(TEXT_TYPE), METRICS_INDEX.to_string()),
        p => match MetricsKind::from_path(p) {
            None => respond(StatusCode::NOT_FOUND, Some(TEXT_TYPE), error_body(&method, &path, "Invalid or unknown URL path")),
            // Without a metrics plugin Slurm answers an empty body.
            Some(_) if !gate.conf.enabled => respond(StatusCode::OK, Some(TEXT_TYPE), String::new()),
            Some(kind) => match metrics_text(gate, tx, kind).await {
                Some(text) => {
                    let om = req
                        .headers()
                        .get_all(hyper::header::ACCEPT)
                        .iter()
                        .any(|v| v.to_str().is_ok_and(|s| s.contains("application/openmetrics-text")));
                    let mut r = hyper::Response::new(Full::new(text));
                    let ct = hyper::header::HeaderValue::from_static(if om { OPENMETRICS_TYPE } else { TEXT_TYPE });
                    r.headers_mut().insert(hyper::header::CONTENT_TYPE, ct);
                    r
                }
                None => respond(StatusCode::SERVICE_UNAVAILABLE, Some(TEXT_TYPE), error_body(&method, &path, "the controller is busy")),
            },
        },
    }
}

/// The text of `kind`: the cached one if younger than [`MAX_AGE`], else counted by the owner
/// task and rendered here; `None` when the owner did not answer within [`OWNER_TIMEOUT`].
async fn metrics_text(gate: &HttpGate, tx: Option<&mpsc::Sender<Event>>, kind: MetricsKind) -> Option<Bytes> {
    let cached = |gate: &HttpGate| {
        let c = gate.cache.lock().unwrap_or_else(|p| p.into_inner());
        c.get(kind.path()).filter(|(at, _)| at.elapsed() < MAX_AGE).map(|(_, b)| b.clone())
    };
    if let Some(b) = cached(gate) {
        return Some(b);
    }
    gate.owner_asks.fetch_add(1, Ordering::Relaxed);
    let at = tokio::time::Instant::now();
    let snap = ask_owner(tx, Some(kind)).await??;
    let text = Bytes::from(render(&snap));
    gate.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(kind.path(), (at, text.clone()));
    Some(text)
}

/// 401 (no token that verifies) or 403 (a user not allowed): the metrics need a token (Slurm
/// 26.05 with `MetricsAuthUsers` or `PrivateData`).
fn refused(status: StatusCode, method: &Method, path: &str) -> HttpResponse {
    let why = if status == StatusCode::FORBIDDEN { "Operation not permitted" } else { "Authentication failure" };
    respond(status, Some(TEXT_TYPE), error_body(method, path, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(base: BaseState) -> JobFacts {
        JobFacts {
            base,
            completing: false,
            held: false,
            tasks: 1,
            cpus: 0,
            mem_bytes: 0,
            nodes: 0,
            req_nodes: 1,
            wait_part_node_limit: false,
        }
    }

    #[test]
    fn http_is_told_from_frames_by_the_first_byte() {
        for m in ["GET ", "HEAD ", "POST ", "PUT ", "OPTIONS ", "PRI * HTTP/2.0"] {
            assert!(looks_like_http(m.as_bytes()[0]), "{m}");
        }
        // A frame's length prefix, big-endian: 16 MiB at most, so 0x00 or 0x01 first.
        for len in [0u32, 9, 65_536, 16 << 20] {
            assert!(!looks_like_http(len.to_be_bytes()[0]), "{len}");
        }
    }

    #[test]
    fn paths_name_their_sets() {
        for k in MetricsKind::ALL {
            assert_eq!(MetricsKind::from_path(k.path()), Some(k));
        }
        assert_eq!(MetricsKind::from_path("/metrics/jobs/"), None);
    }

    #[test]
    fn metrics_need_a_token_as_slurm_decides() {
        use flotilla_core::config::ClusterConfig;
        let conf = |private: &[&str], users: Option<&[&str]>, params: &[&str]| {
            MetricsConf::from_config(&ClusterConfig {
                metrics_type: Some("metrics/openmetrics".into()),
                private_data: private.iter().map(|s| s.to_string()).collect(),
                metrics_auth_users: users.map(|u| u.iter().map(|s| s.to_string()).collect()),
                metrics_parameters: params.iter().map(|s| s.to_string()).collect(),
                ..ClusterConfig::default()
            })
        };
        assert!(!conf(&[], None, &[]).auth_required);
        assert!(conf(&["jobs"], None, &[]).auth_required);
        assert!(!conf(&["jobs"], None, &["ignore_private_data"]).auth_required);
        assert!(conf(&["jobs"], Some(&["alice"]), &["ignore_private_data"]).auth_required, "MetricsAuthUsers wins");
        assert!(conf(&[], Some(&["alice"]), &[]).auth_required);
        assert!(!MetricsConf::from_config(&ClusterConfig::default()).enabled);
    }

    #[test]
    fn job_counts_follow_slurms_state_tests() {
        let mut c = JobCounts::default();
        let mut array = job(BaseState::Pending);
        array.tasks = 4;
        array.held = true;
        c.add(&array, true);
        let mut run = job(BaseState::Running);
        (run.cpus, run.mem_bytes, run.nodes) = (8, 1 << 30, 2);
        c.add(&run, true);
        let mut cg = job(BaseState::Complete);
        cg.completing = true;
        c.add(&cg, true);
        c.add(&job(BaseState::Failed), true);
        assert_eq!(c.jobs, 7, "the array's four tasks and three records");
        assert_eq!((c.state(BaseState::Pending), c.hold), (4, 4));
        assert_eq!((c.started, c.finished, c.completing, c.active), (3, 2, 1, 3));
        assert_eq!((c.cpus_alloc, c.memory_alloc, c.nodes_alloc), (8, 1 << 30, 2));
        assert_eq!((c.max_job_nodes, c.max_job_nodes_nohold), (1, 0), "the only pending job is held");
        let mut per_user = JobCounts::default();
        per_user.add(&array, false);
        assert_eq!((per_user.jobs, per_user.state(BaseState::Pending)), (1, 4));
    }

    #[test]
    fn histogram_buckets_are_upper_bounds() {
        let mut h = Histogram::default();
        for us in [50, 100, 101, 20_000_000] {
            h.observe_us(us);
        }
        assert_eq!((h.counts[0], h.counts[1], h.over, h.count(), h.sum_us), (2, 1, 1, 4, 20_000_251));
        let mut w = QueueWait::default();
        for (gpus, wait) in [(0, 5), (1, 5), (8, 70), (9, 0), (512, 100_000)] {
            w.observe(gpus, wait);
        }
        let per_gang: Vec<(u64, u64)> = w.0.iter().map(|h| (h.count(), h.sum_us / 1_000_000)).collect();
        assert_eq!(per_gang, vec![(1, 5), (1, 5), (1, 70), (1, 0), (1, 100_000)]);
        assert_eq!((w.0[2].counts[3], w.0[4].over), (1, 1), "70 s is under 5 min; a day and more is over every bucket");
        assert_eq!((seconds(100), seconds(2_500), seconds(1_000_000), seconds(0)), ("0.0001".into(), "0.0025".into(), "1.0".into(), "0.0".into()));
    }

    fn node(name: &str, base: NodeBase, cpus_alloc: u64, gpus_free: u64) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            base,
            drain: false,
            no_resp: false,
            cpus: 16,
            cpus_alloc,
            mem_mib: 1024,
            mem_alloc_mib: cpus_alloc * 32,
            gpus: 4,
            gpus_free,
        }
    }

    #[test]
    fn quarantine_causes_from_the_health_policys_reasons() {
        for (reason, cause) in [
            ("Xid 79 on gpu 3: GPU has fallen off the bus", "Xid 79"),
            ("Xid 48 on gpu 0: double-bit ECC error", "Xid 48"),
            ("uncorrectable ECC errors on gpu 1: 2", "ECC"),
            ("NVLink errors on gpu 2 link 1: 101 (limit 100)", "NVLink"),
            ("retired pages pending on gpu 0: 1 (GPU reset needed)", "RetiredPages"),
            ("gpu 5 at 97 C (limit 95 C)", "Temperature"),
            ("Xid on gpu", "Other"),
            ("admin said so", "Other"),
        ] {
            assert_eq!(quarantine_cause(reason), cause, "{reason}");
        }
    }

    /// The exact text for a small fixed state (golden: `tests/goldens/metrics/*.txt`,
    /// regenerated with `UPDATE_GOLDENS=1`).
    #[test]
    fn rendering_matches_the_goldens() {
        let mut jobs = JobCounts::default();
        let mut run = job(BaseState::Running);
        (run.cpus, run.mem_bytes, run.nodes) = (4, 128 << 20, 1);
        jobs.add(&run, true);
        jobs.add(&job(BaseState::Pending), true);
        let nodes = vec![node("gpu01", NodeBase::Mixed, 4, 2), node("gpu02", NodeBase::Idle, 0, 4)];
        let mut nc = NodeCounts::default();
        nodes.iter().for_each(|n| nc.add(n));
        let part = PartitionFacts {
            name: "batch".into(),
            jobs: jobs.clone(),
            nodes: nc.clone(),
            largest_placeable: (4, 6, 6),
            elastic_reclaimable_gpus: 2,
            largest_if_reclaimed: (4, 8, 8),
        };
        let diag = Diag {
            req_time: 1_700_000_100,
            req_time_start: 1_700_000_000,
            schedule_cycle_counter: 2,
            schedule_cycle_sum: 3_000,
            flotilla: flotilla_proto::diag::FlotillaDiag {
                preemptions: vec![("PendingJob".into(), 1)],
                pages: 1,
                ..Default::default()
            },
            ..Diag::default()
        };
        let mut f = FlotillaSched {
            reservations: 1,
            reservation_gpus: 2,
            reservation_oldest_s: 95,
            backfill_jobs: 1,
            backfill_gpus: 2,
            budget_share_pct: 12,
            budget_warn_pct: 10,
            budget_page_pct: 25,
            checkpoint_bw: 200_000_000_000,
            quarantined: vec![("ECC".into(), 1), ("Xid 79".into(), 2)],
            ..FlotillaSched::default()
        };
        f.cycle.observe_us(800);
        f.cycle.observe_us(2_200);
        f.wait.observe(8, 42);
        f.wait.observe(0, 0);
        let ua = Snapshot::UsersAccounts(vec![("alice".into(), jobs.clone())], vec![("physics".into(), jobs.clone())]);
        let cases = [
            ("jobs", Snapshot::Jobs(jobs.clone())),
            ("nodes", Snapshot::Nodes(nodes, nc)),
            ("partitions", Snapshot::Partitions(vec![part])),
            ("scheduler", Snapshot::Scheduler(Box::new(diag), Box::new(f))),
            ("jobs-users-accts", ua),
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/metrics");
        for (name, snap) in cases {
            let text = render(&snap);
            assert!(text.ends_with("\n# EOF\n"), "{name}");
            let path = dir.join(format!("{name}.txt"));
            if std::env::var_os("UPDATE_GOLDENS").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDENS=1 writes it)", path.display()));
            assert_eq!(text, want, "{name} differs from {}", path.display());
        }
    }

    #[test]
    fn indexes_list_every_endpoint() {
        assert!(ROOT_INDEX.starts_with("slurmctld index of endpoints:\n  '/readyz': "), "{ROOT_INDEX}");
        for k in MetricsKind::ALL {
            assert!(METRICS_INDEX.contains(&format!("\n  '{}': ", k.path())), "{METRICS_INDEX}");
        }
    }

    /// However many ask, the owner counts a set once per [`MAX_AGE`].
    #[tokio::test]
    async fn the_owner_counts_a_set_once_per_max_age() {
        let gate = HttpGate::new(MetricsConf { enabled: true, auth_required: false, auth_users: None });
        let (tx, mut rx) = mpsc::channel(16);
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                if let Event::Metrics { reply, .. } = ev {
                    let _ = reply.send(Some(Snapshot::Jobs(JobCounts::default())));
                }
            }
        });
        for _ in 0..10 {
            let text = metrics_text(&gate, Some(&tx), MetricsKind::Jobs).await.expect("an answer");
            assert!(text.starts_with(b"# HELP slurm_jobs "));
        }
        assert_eq!(gate.owner_asks.load(Ordering::Relaxed), 1);
        metrics_text(&gate, Some(&tx), MetricsKind::Nodes).await.expect("an answer");
        assert_eq!(gate.owner_asks.load(Ordering::Relaxed), 2, "each set has its own text");
        // The Jobs text made MAX_AGE ago (aged in place rather than waited for).
        if let Some((at, _)) = gate.cache.lock().unwrap().get_mut(MetricsKind::Jobs.path()) {
            *at = tokio::time::Instant::now().checked_sub(MAX_AGE).expect("the clock is past MAX_AGE");
        }
        metrics_text(&gate, Some(&tx), MetricsKind::Jobs).await.expect("an answer");
        assert_eq!(gate.owner_asks.load(Ordering::Relaxed), 3, "counted again once the text is MAX_AGE old");
        assert!(metrics_text(&gate, None, MetricsKind::Scheduler).await.is_none(), "no owner (sackd): no text");
    }

    /// A standby: the metrics paths are sent to the leader (path and query kept), `/readyz` is
    /// 500, the rest answered as on the leader; with no usable leader address, 503.
    #[test]
    fn a_standby_sends_metrics_to_the_leader() {
        let leader = Standing::Standby { leader: Some("ctl-a:6817".into()) };
        for (path, query, location) in [
            ("/metrics", None, "http://ctl-a:6817/metrics"),
            ("/metrics/jobs", None, "http://ctl-a:6817/metrics/jobs"),
            ("/metrics/jobs-users-accts", Some("x=1&y=2"), "http://ctl-a:6817/metrics/jobs-users-accts?x=1&y=2"),
            ("/metrics/scheduler", Some(""), "http://ctl-a:6817/metrics/scheduler"),
        ] {
            let r = standby_answer(&leader, path, query).expect("a standby's answer");
            assert_eq!(r.status(), StatusCode::SEE_OTHER, "{path}");
            assert_eq!(r.headers()[hyper::header::LOCATION], location, "{path}");
        }
        let r = standby_answer(&leader, "/readyz", None).expect("a standby's answer");
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        for path in ["/", "/livez", "/healthz", "/metrics/nope", "/x"] {
            assert!(standby_answer(&leader, path, None).is_none(), "{path} is answered as on the leader");
        }
        for unknown in [None, Some(""), Some("ctl-a"), Some(":6817"), Some("ctl-a:port")] {
            let s = Standing::Standby { leader: unknown.map(str::to_string) };
            let r = standby_answer(&s, "/metrics/nodes", None).expect("a standby's answer");
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "{unknown:?}");
            assert!(r.headers().get(hyper::header::LOCATION).is_none());
        }
        for path in ["/metrics", "/metrics/jobs", "/readyz", "/livez"] {
            assert!(standby_answer(&Standing::Leader, path, None).is_none(), "the leader answers {path} itself");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut o = Out(String::new());
        o.sample("m", &[("node", "a\"b\\c\nd")], 1);
        assert_eq!(o.0, "m{node=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
