//! GPU health end to end: the real controller and four real node daemons whose health
//! sources read events the test appends (`--health fake:PATH`).

mod common;

use common::*;
use flotilla_core::health::HealthEvent;
use flotilla_proto::JobStateWire;

/// Xid 79 on the node running a job: the node daemon's policy quarantines, the controller
/// drains the node with the policy's reason, kills the job's run there and requeues it; the
/// job completes on another node, and no new job is placed on the quarantined node.
#[test]
fn xid_79_quarantines_the_node_and_requeues_its_job() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(4);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let runs = work.join("runs.txt");
    let marker = "271828.18";
    let mut spec = job(
        &format!(
            "#!/bin/sh\necho \"$SLURMD_NODENAME ${{SLURM_RESTART_COUNT:-0}}\" >> {}\n\
             if [ -z \"$SLURM_RESTART_COUNT\" ]; then sleep {marker}; fi\necho done\n",
            runs.display()
        ),
        &work,
    );
    spec.requeue = Some(true);
    let id = c.submit(spec);
    let first = c.wait_running(id, 30).nodes;
    let x: usize = first.strip_prefix("gpu").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("node {first}"));
    assert!(wait_for(10, || !processes_with(marker).is_empty()), "run 0 did not start");

    c.inject_health(x, &HealthEvent::Temperature { gpu: 0, celsius: 50 });
    c.inject_health(x, &HealthEvent::Xid { gpu: 3, xid: 79 });
    let reason = "Xid 79 on gpu 3: GPU has fallen off the bus";
    let mut last = None;
    let drained = wait_for(30, || {
        last = c.nodes().into_iter().find(|n| n.name == first);
        last.as_ref().is_some_and(|n| n.state.starts_with("DRAIN") && n.reason.as_deref() == Some(reason))
    });
    assert!(drained, "node {first} not quarantined: {last:?}\n{}", c.logs());

    // The run on the quarantined node is killed; the job runs again elsewhere and completes.
    assert!(wait_for(20, || processes_with(marker).is_empty()), "run 0 survives: {:?}\n{}", processes_with(marker), c.logs());
    let j = c.wait_done(id, 60);
    assert_eq!((j.state, j.exit_code, j.restarts), (Some(JobStateWire::Completed), 0, 1), "{}", c.logs());
    assert_ne!(j.nodes, first, "the requeued job ran on the quarantined node");
    let lines = std::fs::read_to_string(&runs).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], format!("{first} 0"));
    assert_eq!(lines[1], format!("{} 1", j.nodes));
    let out = std::fs::read_to_string(work.join(format!("slurm-{id}.out"))).unwrap();
    assert!(out.ends_with("done\n"), "{out:?}");

    // Four whole-node jobs on a cluster with one node quarantined: none lands there (the
    // fourth waits for one of the others).
    let placed = work.join("placed.txt");
    let ids: Vec<u64> = (0..4)
        .map(|_| {
            let mut s = job(&format!("#!/bin/sh\necho \"$SLURMD_NODENAME\" >> {}\nsleep 1\n", placed.display()), &work);
            s.exclusive = true;
            c.submit(s)
        })
        .collect();
    for id in ids {
        let j = c.wait_done(id, 60);
        assert_eq!(j.state, Some(JobStateWire::Completed), "{j:?}\n{}", c.logs());
        assert_ne!(j.nodes, first, "job {id} placed on the quarantined node");
    }
    let placed = std::fs::read_to_string(&placed).unwrap();
    assert_eq!(placed.lines().count(), 4, "{placed}");
    assert!(placed.lines().all(|n| n != first), "{placed}");

    // Still quarantined, with the first reason, after all that: a repeated report changes
    // nothing (the daemon acts on a reason once), nor does another reason (the controller
    // keeps the first). The repeated event goes with a line that is not an event, which the
    // daemon's health source logs when it reads them; the other reason follows once it did,
    // and the controller logs that it keeps the node as it is.
    {
        use std::io::Write;
        let again = serde_json::to_string(&HealthEvent::Xid { gpu: 3, xid: 79 }).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(c.path(&format!("health.{first}.jsonl"))).unwrap();
        f.write_all(format!("{again}\nnot an event\n").as_bytes()).unwrap();
    }
    let daemon_log = format!("slurmd-{first}.log");
    assert!(wait_for(20, || c.log_lines(&daemon_log, "skipping \"not an event\"") == 1), "the daemon did not read the repeated event\n{}", c.logs());
    let kept = c.log_lines("slurmctld.log", "node already quarantined");
    c.inject_health(x, &HealthEvent::Xid { gpu: 5, xid: 79 });
    assert!(
        wait_for(20, || c.log_lines("slurmctld.log", "node already quarantined") > kept),
        "the controller did not get the second reason\n{}",
        c.logs()
    );
    let n = c.nodes().into_iter().find(|n| n.name == first).unwrap();
    assert_eq!((n.state.as_str(), n.reason.as_deref()), ("DRAINED", Some(reason)), "{}", c.logs());

    // The quarantine is node state in the controller's database: it survives a restart.
    c.restart_ctld(&[]);
    let n = c.nodes().into_iter().find(|n| n.name == first).unwrap();
    assert_eq!((n.state.as_str(), n.reason.as_deref()), ("DRAINED", Some(reason)), "{}", c.logs());
}
