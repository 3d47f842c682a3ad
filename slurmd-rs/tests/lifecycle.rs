//! End-to-end: the real controller and real node daemons on localhost run batch scripts:
//! exit codes and signals as sacct shows them, output file names, restarts of the daemon.

mod common;

use common::*;
use flotilla_proto::JobStateWire;

#[test]
fn exits_and_outputs() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(2);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();

    let ok = c.submit(job("#!/bin/sh\necho hello from $SLURMD_NODENAME\n", &work));
    let j = c.wait_done(ok, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Completed), 0, 0));
    let out = std::fs::read_to_string(work.join(format!("slurm-{ok}.out"))).unwrap();
    assert!(out.starts_with("hello from gpu0"), "{out}");

    let mut s = job("#!/bin/sh\necho about to fail\nexit 3\n", &work);
    s.stdout = Some("o-%j-%x.out".into());
    s.stderr = Some("e-%5j.err".into());
    s.name = Some("fail".into());
    let fail = c.submit(s);
    let j = c.wait_done(fail, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Failed), 3, 0), "sacct 3:0");
    assert_eq!(std::fs::read_to_string(work.join(format!("o-{fail}-fail.out"))).unwrap(), "about to fail\n");
    assert!(work.join(format!("e-{fail:05}.err")).exists());

    let killed = c.submit(job("#!/bin/sh\necho about to die by SIGKILL\nkill -9 $$\n", &work));
    let j = c.wait_done(killed, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Failed), 0, 9), "sacct 0:9");
}
