//! The local-cluster fixture: two clusters at once, each fully stopped on drop.

use flotilla_admin::dev;
use flotilla_compat_tests::cluster::LocalCluster;

#[test]
fn two_clusters_in_parallel_and_nothing_left() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| LocalCluster::start(None));
        let b = s.spawn(|| LocalCluster::start(None));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_ne!(a.ctld_addr(), b.ctld_addr());
    for c in [&a, &b] {
        let nodes = c.query_nodes();
        let names: Vec<&str> = nodes.iter().map(|n| n.0.as_str()).collect();
        assert_eq!(names, ["gpu01", "gpu02", "gpu03", "gpu04"]);
        assert!(nodes.iter().all(|n| n.1 == "IDLE" && !n.2), "{nodes:?}");
        assert_eq!(c.env()[0].1, c.slurm_conf().to_string_lossy());
    }
    let pids: Vec<i32> = a.pids().into_iter().chain(b.pids()).collect();
    assert_eq!(pids.len(), 10);
    let starts: Vec<u64> = pids
        .iter()
        .map(|p| dev::start_time(*p).expect("running"))
        .collect();
    drop(a);
    drop(b);
    for (p, s) in pids.iter().zip(starts) {
        assert!(!dev::alive(*p, s), "pid {p} still runs");
    }
}

/// A real batch job runs on the cluster; dropping the cluster also ends its supervisor.
#[test]
fn a_job_runs_and_drop_ends_its_supervisor() {
    use flotilla_proto::client::Client;
    use flotilla_proto::{ClusterKey, Request, Response, Role, SubmitJob};
    let c = LocalCluster::start(None);
    let work = c.dir().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    let job = SubmitJob {
        name: Some("wrap".into()),
        script: "#!/bin/sh\necho started > started\nsleep 300\n".into(),
        work_dir: work.to_string_lossy().into_owned(),
        uid,
        gid,
        user,
        submit_host: "localhost".into(),
        environment: vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
        ..SubmitJob::default()
    };
    let key = ClusterKey::load(&c.dir().join("slurm.key")).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut client = Client::connect_tcp(c.ctld_addr(), Role::Command).unwrap();
    match client.call(
        Some(key.sign(uid, gid, "localhost", now, 60)),
        Request::SubmitJob(Box::new(job)),
    ) {
        Ok(Response::Submitted(_)) => {}
        other => panic!("submit: {other:?}"),
    }
    let t0 = std::time::Instant::now();
    while !work.join("started").exists() {
        assert!(t0.elapsed().as_secs() < 30, "the job did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sups = dev::supervisors(c.dir());
    assert_eq!(sups.len(), 1, "{sups:?}");
    // The supervisor, the job's shell and its `sleep`.
    let procs: Vec<(i32, u64)> = dev::job_processes(c.dir())
        .into_iter()
        .filter_map(|p| Some((p, dev::start_time(p)?)))
        .collect();
    assert!(procs.len() >= 3, "{procs:?}");
    let dir = c.dir().to_path_buf();
    drop(c);
    for (p, start) in procs {
        assert!(!dev::alive(p, start), "job process {p} still runs");
    }
    assert_eq!(dev::job_processes(&dir), Vec::<i32>::new());
}
