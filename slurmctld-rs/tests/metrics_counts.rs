//! What the owner task counts for the metrics endpoints (`ctld::metrics`), in process through
//! [`harness::Harness`]: the counts agree with the jobs and nodes the controller shows, with
//! Slurm's rules (a pending array counts its tasks in `/metrics/jobs` and once per user; held
//! jobs are pending and held; a completing job counts in its end state too).

mod harness;

use flotilla_proto::*;
use flotilla_slurmctld::ctld::Event;
use flotilla_slurmctld::metrics::{render, MetricsKind, Snapshot};
use harness::*;

fn snapshot(h: &mut Harness, kind: MetricsKind) -> Snapshot {
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let now = T0 + h.at();
    h.ctl_mut().handle(Event::Metrics { kind: Some(kind), reply: tx }, now);
    rx.try_recv().expect("answered during the event").expect("a snapshot")
}

/// The value of sample `series` in `text`.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

fn gpu_job(who: User, gpus: u64, runtime_s: Option<i64>, exit: i32) -> SubmitJob {
    let mut j = job(who, runtime_s, exit);
    j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: gpus }];
    j
}

#[test]
fn counts_agree_with_the_jobs_and_nodes_shown() {
    let mut h = Harness::two_nodes("metrics_counts");
    let running = h.submit(gpu_job(User::Alice, 4, Some(600), 0));
    let failed = h.submit(gpu_job(User::Bob, 1, Some(10), 3));
    // Three tasks waiting for the first job (a dependency): pending in their one record.
    let mut array = gpu_job(User::Bob, 8, Some(10), 0);
    array.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 2, step: 1 }], max_running: None });
    array.dependency = Some(format!("afterok:{running}"));
    let array = h.submit(array);
    // Held at submission (`sbatch -H`).
    let mut held = gpu_job(User::Alice, 8, Some(10), 0);
    held.hold = true;
    let held = h.submit(held);
    h.advance(10);
    h.turn();
    assert_eq!(h.job(running).state, Some(JobStateWire::Running));
    assert_eq!(h.job(failed).state, Some(JobStateWire::Failed));
    assert_eq!(h.job(array).state, Some(JobStateWire::Pending));
    assert_eq!(h.job(held).state, Some(JobStateWire::Pending));

    let jobs = render(&snapshot(&mut h, MetricsKind::Jobs));
    assert_eq!(sample(&jobs, "slurm_jobs_running"), 1);
    assert_eq!(sample(&jobs, "slurm_jobs_failed"), 1);
    assert_eq!(sample(&jobs, "slurm_jobs_pending"), 4, "the array's 3 tasks and the held job");
    assert_eq!(sample(&jobs, "slurm_jobs_hold"), 1);
    assert_eq!(sample(&jobs, "slurm_jobs"), 6, "4 records, the array counting its 3 tasks");
    assert_eq!((sample(&jobs, "slurm_jobs_started"), sample(&jobs, "slurm_jobs_finished")), (2, 1));
    assert_eq!(sample(&jobs, "slurm_jobs_nodes_alloc"), 1);
    let cpus = h.job(running).num_cpus;
    assert_eq!(sample(&jobs, "slurm_jobs_cpus_alloc"), u64::from(cpus));

    let ua = render(&snapshot(&mut h, MetricsKind::UsersAccounts));
    let (alice, bob) = (User::Alice.name(), User::Bob.name());
    assert_eq!(sample(&ua, &format!("slurm_user_jobs{{username=\"{bob}\"}}")), 2, "records, not tasks");
    assert_eq!(sample(&ua, &format!("slurm_user_jobs_pending{{username=\"{bob}\"}}")), 3);
    assert_eq!(sample(&ua, &format!("slurm_user_jobs_hold{{username=\"{alice}\"}}")), 1);

    let nodes = render(&snapshot(&mut h, MetricsKind::Nodes));
    assert_eq!((sample(&nodes, "slurm_nodes"), sample(&nodes, "slurm_nodes_mixed"), sample(&nodes, "slurm_nodes_idle")), (2, 1, 1));
    let busy = &h.job(running).nodes.clone();
    assert_eq!(sample(&nodes, &format!("slurm_node_cpus_alloc{{node=\"{busy}\"}}")), u64::from(cpus));

    let parts = render(&snapshot(&mut h, MetricsKind::Partitions));
    assert_eq!(sample(&parts, "slurm_partition_jobs{partition=\"batch\"}"), 3, "the finished job is left out");
    assert_eq!(sample(&parts, "slurm_partition_jobs_max_job_nodes_nohold{partition=\"batch\"}"), 1);
    assert_eq!(sample(&parts, "slurm_partition_jobs_hold{partition=\"batch\"}"), 1);
    assert_eq!(sample(&parts, "flotilla_largest_placeable{partition=\"batch\",topology=\"node\"}"), 8);
    assert_eq!(sample(&parts, "flotilla_largest_placeable{partition=\"batch\",topology=\"any\"}"), 12);
    assert_eq!(sample(&parts, "flotilla_free_nodes_full{partition=\"batch\"}"), 1);

    let sched = render(&snapshot(&mut h, MetricsKind::Scheduler));
    assert_eq!(sample(&sched, "flotilla_sched_cycle_seconds_count"), sample(&sched, "slurm_schedule_cycle_cnt"));
    assert_eq!(sample(&sched, "flotilla_queue_wait_seconds_count{gang_gpus=\"2-8\"}"), 1, "the 4-GPU job");
    assert_eq!(sample(&sched, "flotilla_queue_wait_seconds_count{gang_gpus=\"1\"}"), 1, "the job that failed");
    assert_eq!(sample(&sched, "flotilla_queue_wait_seconds_count{gang_gpus=\"9-64\"}"), 0);
    assert_eq!(sample(&sched, "flotilla_reservation_oldest_age_seconds"), 0, "no reservation held");
    assert_eq!(sample(&sched, "flotilla_backfill_jobs_on_reserved"), 0);
    assert_eq!(sample(&sched, "flotilla_preemption_budget_share_percent"), 0);
    assert_eq!(sample(&sched, "flotilla_preemption_budget_tier{tier=\"free\"}"), 1);
    assert_eq!(sample(&sched, "flotilla_preemption_budget_tier{tier=\"page\"}"), 0);
    assert!(!sched.contains("flotilla_nodes_quarantined{"), "{sched}");

    // The idle node is quarantined (Xid 79): counted by its cause; an 8-GPU job then waits
    // for the busy node's GPUs, holding a reservation whose age grows with the clock.
    let idle = h.ctl().scheduler().cluster().nodes.iter().map(|n| n.name.clone()).find(|n| n != busy).unwrap();
    h.health(&idle, HealthLevel::Quarantine, "Xid 79 on gpu 3: GPU has fallen off the bus");
    h.turn();
    let waits = h.submit(gpu_job(User::Alice, 8, Some(10), 0));
    h.turn();
    h.advance(30);
    h.turn();
    assert_eq!(h.job(waits).state, Some(JobStateWire::Pending));
    let sched = render(&snapshot(&mut h, MetricsKind::Scheduler));
    assert_eq!(sample(&sched, "flotilla_nodes_quarantined{cause=\"Xid 79\"}"), 1, "{sched}");
    assert_eq!(sample(&sched, "flotilla_reservations_held"), 1, "{sched}");
    let age = sample(&sched, "flotilla_reservation_oldest_age_seconds");
    assert!((30..=31).contains(&age), "reservation age {age}");
}

#[test]
fn readiness_probe_gets_no_snapshot() {
    let mut h = Harness::two_nodes("metrics_ready");
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    h.ctl_mut().handle(Event::Metrics { kind: None, reply: tx }, T0);
    assert_eq!(rx.try_recv().expect("answered"), None);
}
