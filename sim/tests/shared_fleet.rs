//! Experiment `shared-fleet`: a hand fixture (one scale-up preempts the newest training job)
//! and a reduced run on the real traces (a few hundred rows; seconds in a debug build).

use std::path::PathBuf;

use flotilla_sim::fleet::{self, FleetOptions, Instance};
use flotilla_sim::gang::TraceJob;
use flotilla_sim::progress::NoProgress;
use flotilla_sim::traces::TraceDir;

fn traces() -> TraceDir {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ has a parent").to_owned();
    TraceDir::new(workspace.join(TraceDir::DEFAULT))
}

#[test]
fn one_scale_up_preempts_the_newest_training_job() {
    // 2 nodes × 8 GPUs. 16 one-GPU training jobs arrive at t = 0..15 and fill the shared fleet;
    // at t = 2000 a service goes from 0 to 1 replica. The newest job (id 16, started at 15)
    // yields: it ran 1985 s, kept its checkpoint at 1800 s, lost 185 GPU-seconds; it exits 1 s
    // later (4 GiB at 200 GB/s) and the replica starts within 60 s.
    let jobs: Vec<TraceJob> = (0..16).map(|i| TraceJob { submit_s: i, gpus: 1, duration_s: 100_000 }).collect();
    let inst = vec![Instance { service: "svc".into(), start_s: 2000, end_s: None }];
    let opts = FleetOptions { train_nodes: Some(1), pool_nodes: Some(1), window_s: 10_000, check_invariants: true, ..FleetOptions::default() };
    let r = fleet::run_with("fixture", &jobs, &inst, 0, &opts, &NoProgress).expect("runs");
    let shared = r.runs.iter().find(|r| r.config == "shared").expect("shared");
    assert_eq!(shared.victims, vec![(2000, 16)]);
    assert_eq!(shared.bad_preemptions, 0);
    assert!((shared.lost_gpu_hours - 185.0 / 3600.0).abs() < 1e-9, "{}", shared.lost_gpu_hours);
    assert_eq!((shared.scale_ups, shared.scale_ups_within_60s), (1, 1));
    assert_eq!(shared.pages, 0);
    assert_eq!(shared.training.jobs, 16);
    // Static split: 8 training GPUs, half the jobs wait; the pool serves the replica; nothing
    // is preempted.
    let st = r.runs.iter().find(|r| r.config == "static").expect("static");
    assert_eq!(st.preemptions + st.backfill_preemptions, 0);
    assert_eq!((st.scale_ups, st.scale_ups_within_60s), (1, 1));
    assert!(st.training.queue_mean_s > shared.training.queue_mean_s);
}

#[test]
fn reduced_real_run_is_deterministic_and_sane() {
    // 40 training nodes: the 300 jobs (about a day) overload them, so the shared fleet lends pool
    // GPUs to training and the services' scale-ups must preempt.
    let opts = FleetOptions { max_jobs: Some(300), train_nodes: Some(40), check_invariants: true, ..FleetOptions::default() };
    let (w0, jobs, inst) = fleet::load(&traces(), &opts).expect("traces load");
    // Every 25th instance row: ~300 rows over many services, with their creations and deletions.
    let inst: Vec<Instance> = inst.into_iter().step_by(25).collect();
    assert!(inst.len() > 250 && inst.len() < 320, "{}", inst.len());
    assert_eq!(jobs.len(), 300);
    let a = fleet::run_with("reduced", &jobs, &inst, w0, &opts, &NoProgress).expect("runs");
    let b = fleet::run_with("reduced", &jobs, &inst, w0, &FleetOptions { jobs: 2, ..opts.clone() }, &NoProgress).expect("runs");
    eprint!("{}", a.table());
    assert_eq!(a.summary_json(), b.summary_json());
    assert_eq!(a.runs, b.runs);
    let st = &a.runs[0];
    let sh = &a.runs[1];
    assert_eq!((st.config.as_str(), sh.config.as_str()), ("static", "shared"));
    // Static split: never preempts for services; the pool (sized to the peak) serves every
    // scale-up at once.
    assert_eq!(st.preemptions, 0);
    assert_eq!(st.scale_ups_within_60s, st.scale_ups);
    assert_eq!(st.pages, 0);
    // Shared fleet: only preemptible training is preempted, never a replica.
    assert_eq!(sh.bad_preemptions, 0);
    assert!(sh.preemptions > 0 && sh.victims.len() as u64 == sh.preemptions);
    assert!(sh.victims.iter().all(|&(_, j)| j >= 1 && j <= jobs.len() as u64));
    // Every training job completes in both; usage within bounds.
    for r in &a.runs {
        assert_eq!(r.training.jobs, jobs.len(), "{}", r.config);
        assert!(r.utilisation_pct > 0.0 && r.utilisation_pct <= 100.0 + 1e-9, "{}", r.utilisation_pct);
        assert!(r.training.queue_mean_s >= 0.0 && r.training.jct_mean_s >= r.training.queue_mean_s);
    }
    // Same services both ways.
    assert!((st.service_utilisation_pct - sh.service_utilisation_pct).abs() < 1.0, "{} {}", st.service_utilisation_pct, sh.service_utilisation_pct);
    // The shared fleet lends idle pool GPUs to training: queueing does not get worse.
    assert!(sh.training.queue_mean_s <= st.training.queue_mean_s, "{} > {}", sh.training.queue_mean_s, st.training.queue_mean_s);
    let dir = std::env::temp_dir().join(format!("flotilla-shared-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    a.write(&dir).expect("writes");
    for f in ["summary.json", "shared_fleet_summary.csv", "shared_fleet_timeseries.csv"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("read")).expect("json");
    assert!(v["policies"]["static"].is_object() && v["policies"]["shared"].is_object());
    let _ = std::fs::remove_dir_all(&dir);
}
