//! The controller's time for a metrics scrape at scale: the owner task's snapshot of each set
//! (`Event::Metrics`, answered during the event: one pass over the jobs or nodes) and the
//! connection task's rendering of it, with N held jobs (default 100,000) submitted in process
//! through the controller's turns, as the daemon would handle them. Median of 5 per set.
//! Prints a table; asserts nothing.
//!
//! `cargo bench -p flotilla-slurmctld --bench metrics [--profile dev] [-- N]`

use flotilla_core::config::{no_includes, parse_cluster};
use flotilla_proto::{Request, SubmitJob};
use flotilla_slurmctld::ctld::{CtlOptions, Due, Event, Ident};
use flotilla_slurmctld::metrics::{render, MetricsKind};
use flotilla_slurmctld::store::{Store, SyncMode};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

const CONF: &str = "ClusterName=bench\nSlurmctldHost=localhost\nGresTypes=gpu\n\
NodeName=gpu[001-128] Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN\n\
PartitionName=batch Nodes=gpu[001-128] Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP\n";

fn main() {
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(100_000);
    let cluster = parse_cluster(("slurm.conf", CONF), None, None, &mut no_includes).expect("slurm.conf");
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), SyncMode::Normal).unwrap();
    let opts = CtlOptions { max_job_count: n as u64 + 10, ..CtlOptions::default() };
    let now = 1_800_000_000;
    let mut ctl = flotilla_slurmctld::daemon::controller(&cluster, store, opts, Arc::new(AtomicU64::new(0)), now).expect("controller");
    let alice = Ident { uid: 2001, gid: 2001, admin: false };
    let t = Instant::now();
    let mut left = n;
    while left > 0 {
        let batch = left.min(1000);
        left -= batch;
        let events: Vec<Event> = (0..batch)
            .map(|i| {
                let (reply, _rx) = tokio::sync::oneshot::channel();
                let s = SubmitJob {
                    name: Some(format!("b{i}")),
                    script: "#!/bin/sh\ntrue\n".into(),
                    hold: true,
                    uid: 2001,
                    gid: 2001,
                    user: "alice".into(),
                    work_dir: "/tmp".into(),
                    ..SubmitJob::default()
                };
                Event::Rpc { ident: alice, req: Request::SubmitJob(Box::new(s)), reply }
            })
            .collect();
        ctl.turn(events, now, Due::NONE);
    }
    let fill = t.elapsed().as_secs_f64();
    println!("| set ({n} held jobs, 128 nodes) | snapshot (owner task), median of 5 | render, median of 5 | bytes |\n|---|---|---|---|");
    for kind in MetricsKind::ALL {
        let (mut snaps, mut renders, mut bytes) = (Vec::new(), Vec::new(), 0);
        for _ in 0..5 {
            let (reply, mut rx) = tokio::sync::oneshot::channel();
            let t = Instant::now();
            ctl.handle(Event::Metrics { kind: Some(kind), reply }, now);
            let snap = rx.try_recv().expect("answered during the event").expect("a snapshot");
            snaps.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            bytes = render(&snap).len();
            renders.push(t.elapsed().as_secs_f64() * 1e3);
        }
        snaps.sort_by(f64::total_cmp);
        renders.sort_by(f64::total_cmp);
        println!("| `{}` | {:.2} ms | {:.2} ms | {bytes} |", kind.path(), snaps[2], renders[2]);
    }
    println!("\n(filling: {n} submissions in {fill:.1} s, in turns of 1,000)");
}
