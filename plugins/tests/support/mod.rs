//! Builders and a decision renderer shared by the scheduler's scenario, property and
//! fragmentation tests.
#![allow(dead_code)]

use flotilla_core::cluster::{Cluster, Time};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobSpec, Request};
use flotilla_core::sched::{Decision, QueueMode, SchedConfig, Scheduler};
use std::fmt::Write;
use std::path::PathBuf;

/// A scheduler with Flotilla's default policies over `cluster`.
pub fn scheduler(cluster: Cluster, queue: QueueMode) -> Scheduler {
    Scheduler::new(
        cluster,
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/basic").unwrap(),
        SchedConfig {
            queue,
            ..SchedConfig::default()
        },
    )
}

/// A job of `gpus` GPUs with `topology`, submitted at `t`, with a time limit in minutes.
pub fn job(id: u64, t: Time, gpus: u32, topology: TopologyKind, limit_min: u64) -> JobSpec {
    JobSpec::simple(id, t, Request::gpus(gpus, topology), Some(limit_min * 60))
}

/// Renders decisions one per line with node names, times relative to `now`.
pub fn render(s: &Scheduler, decisions: &[Decision], now: Time) -> String {
    let mut out = String::new();
    let name = |n: flotilla_core::cluster::NodeId| s.cluster().node(n).name.clone();
    for d in decisions {
        match d {
            Decision::Bind { job, allocs, backfill_for } => {
                let parts: Vec<String> = allocs.iter().map(|a| format!("{}:{}", name(a.part.node), a.part.gpus)).collect();
                write!(out, "bind job={job} {}", parts.join(",")).unwrap();
                if !backfill_for.is_empty() {
                    let b: Vec<String> = backfill_for.iter().map(|j| j.to_string()).collect();
                    write!(out, " backfill-for={}", b.join(",")).unwrap();
                }
            }
            Decision::Reserve { job, gpus, est_fill } => {
                let parts: Vec<String> = gpus.iter().map(|(n, g)| format!("{}:{}", name(*n), g)).collect();
                let est = if *est_fill == u64::MAX { "never".to_string() } else { format!("+{}s", est_fill - now) };
                write!(out, "reserve job={job} est={est} {}", parts.join(",")).unwrap();
            }
            Decision::ReleaseReservation { job } => write!(out, "release-reservation job={job}").unwrap(),
            Decision::PreemptBackfill { job, for_job } => write!(out, "preempt-backfill job={job} for={for_job}").unwrap(),
            Decision::Requeue { job, reason } => write!(out, "requeue job={job} {reason:?}").unwrap(),
            Decision::Alert { kind, job, message } => {
                write!(out, "alert {kind:?} job={job:?}: {message}").unwrap()
            }
            Decision::Preempt { job, for_job, for_service, deadline, checkpoint_bytes, cost_gpu_hours, .. } => {
                write!(
                    out,
                    "preempt job={job} for={for_job}{} deadline=+{}s ckpt={checkpoint_bytes}B cost={cost_gpu_hours:.2}gpuh",
                    for_service.map(|s| format!(" service={s}")).unwrap_or_default(),
                    deadline - now
                )
                .unwrap()
            }
            Decision::BindReplica { service, replica, allocs } => {
                let parts: Vec<String> = allocs.iter().map(|a| format!("{}:{}", name(a.part.node), a.part.gpus)).collect();
                write!(out, "bind-replica service={service} replica={} {}", replica.0 - flotilla_core::sched::REPLICA_ID_BASE, parts.join(",")).unwrap()
            }
            Decision::StopReplica { service, replica } => {
                write!(out, "stop-replica service={service} replica={}", replica.0 - flotilla_core::sched::REPLICA_ID_BASE).unwrap()
            }
            Decision::Relocate { service, from, to, allocs, for_job } => {
                let parts: Vec<String> = allocs.iter().map(|a| format!("{}:{}", name(a.part.node), a.part.gpus)).collect();
                write!(
                    out,
                    "relocate service={service} replica={} -> replica={} {} for job={for_job}",
                    from.0 - flotilla_core::sched::REPLICA_ID_BASE,
                    to.0 - flotilla_core::sched::REPLICA_ID_BASE,
                    parts.join(",")
                )
                .unwrap()
            }
            Decision::Grow { job, allocs } => {
                let parts: Vec<String> = allocs.iter().map(|a| format!("{}:{}", name(a.part.node), a.part.gpus)).collect();
                write!(out, "grow job={job} {} (now {})", parts.join(","), size_of(s, *job)).unwrap();
            }
            Decision::Shrink { job, allocs, for_job, deadline } => {
                let parts: Vec<String> = s
                    .running()
                    .get(job)
                    .map(|r| r.allocs.iter().filter(|a| allocs.contains(&a.id)).map(|a| format!("{}:{}", name(a.part.node), a.part.gpus)).collect())
                    .unwrap_or_default();
                let for_job = for_job.map_or("scontrol".to_string(), |j| j.to_string());
                write!(out, "shrink job={job} {} for={for_job} deadline=+{}s", parts.join(","), deadline - now).unwrap();
            }
            Decision::MembersLost { job, allocs, reason } => {
                let parts: Vec<String> = allocs.iter().map(|a| format!("{}:{}", name(a.part.node), a.part.gpus)).collect();
                write!(out, "members-lost job={job} {} {reason:?} (now {})", parts.join(","), size_of(s, *job)).unwrap();
            }
            Decision::Page(p) => {
                write!(
                    out,
                    "page service={} wanted={} have={} min={} blocked={}gpus rate={}%/{}% would-preempt={:?} preempt-cost={:.2}gpuh degraded-cost={:.2}gpuh actions={:?}",
                    p.name,
                    p.wanted,
                    p.have,
                    p.min,
                    p.gpus_blocked,
                    p.rate_pct,
                    p.limit_pct,
                    p.would_preempt.iter().map(|v| format!("{}({},{}gpu,{}m run,{}m since ckpt)", v.job, v.account, v.gpus, v.runtime_s / 60, v.since_checkpoint_s / 60)).collect::<Vec<_>>(),
                    p.preempt_cost_gpu_hours,
                    p.degraded_cost_gpu_hours,
                    p.actions
                )
                .unwrap()
            }
        }
        out.push('\n');
    }
    out
}

/// A running job's size in its elastic unit and its nodes, e.g. `3 nodes n0001,n0002,n0003`.
fn size_of(s: &Scheduler, job: flotilla_core::job::JobId) -> String {
    let Some(r) = s.running().get(&job) else {
        return "gone".into();
    };
    let unit = match r.spec.elastic.map(|e| e.unit) {
        Some(flotilla_core::job::ElasticUnit::Gpus) => "GPUs",
        _ => "nodes",
    };
    format!("{} {unit}", r.size())
}

/// Compares `actual` with the golden file `plugins/tests/goldens/<name>.txt`; with
/// `UPDATE_GOLDENS=1` re-records it instead (review the diff).
pub fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/goldens")
        .join(format!("{name}.txt"));
    if std::env::var("UPDATE_GOLDENS").as_deref() == Ok("1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "missing golden {} ({e}); record it with UPDATE_GOLDENS=1",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "golden {} differs (re-record with UPDATE_GOLDENS=1 and review the diff)\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }
}
