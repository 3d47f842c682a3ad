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
    // Per cluster: slurmctld, 4 slurmd, slurmrestd.
    assert_eq!(pids.len(), 12);
    assert_ne!(a.restd_url(), b.restd_url());
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

/// The job's `echo started > started`, awaited as an event: `started` is a FIFO whose reader
/// (a thread opened before the job is submitted) hands over what the job wrote; [`wait`]
/// fails the test when nothing came within 30 s.
///
/// [`wait`]: Started::wait
struct Started(std::sync::mpsc::Receiver<String>);

impl Started {
    fn new(work: &std::path::Path) -> Started {
        let path = work.join("started");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Blocks until the job opens the FIFO to write, then reads to its close.
            if let Ok(text) = std::fs::read_to_string(&path) {
                let _ = tx.send(text);
            }
        });
        Started(rx)
    }

    fn wait(&self) {
        let got = self.0.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(got.as_deref().map(str::trim), Ok("started"), "the job did not start within 30 s");
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
    let started = Started::new(&work);
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
    started.wait();
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

/// Two clusters with the same ClusterName (the default `dev`) on one host, cgroups on: starting
/// the second leaves the first one's running job alone. Each has its own cgroup scope
/// (`dev::cgroup_scope`); with the cgroup paths named by ClusterName alone, the second's node
/// daemons took the first one's job cgroups for stale ones of their own at start and killed
/// the job. Root test (cgroups), gated by `FLOTILLA_TEST_ROOT=1`.
#[test]
fn a_second_cluster_with_cgroups_leaves_the_first_ones_job_alone() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        println!("SKIPPED: needs root and FLOTILLA_TEST_ROOT=1 (cgroups)");
        return;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but the test does not run as root");
    let bins = flotilla_compat_tests::bin_dir_with(&["sbatch", "squeue"]);
    assert!(bins.join("sbatch").exists());
    let a = LocalCluster::start_with(None, |o| o.cgroup = "auto".into());
    let work = a.dir().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let started = Started::new(&work);
    std::fs::write(work.join("job.sh"), "#!/bin/sh\n#SBATCH -w gpu01 -o out.txt\necho started > started\nexec sleep 300\n").unwrap();
    let o = a.run("sbatch", &["--parsable", "job.sh"], &work);
    assert!(o.status.success(), "sbatch: {}", String::from_utf8_lossy(&o.stderr));
    let id = String::from_utf8(o.stdout).unwrap().trim().to_string();
    started.wait();
    let procs: Vec<(i32, u64)> = dev::job_processes(a.dir())
        .into_iter()
        .filter_map(|p| Some((p, dev::start_time(p)?)))
        .collect();
    assert!(procs.len() >= 2, "{procs:?}");
    let state = |c: &LocalCluster| {
        let o = c.run("squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"], &work);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(state(&a), "RUNNING");
    // `start` returns once every node daemon of `b` registered, after its start-up sweep.
    let b = LocalCluster::start_with(None, |o| o.cgroup = "auto".into());
    assert_ne!(a.cgroup_scope(), b.cgroup_scope());
    assert!(a.cgroup_scope().starts_with("dev-") && b.cgroup_scope().starts_with("dev-"), "{} {}", a.cgroup_scope(), b.cgroup_scope());
    for (p, start) in &procs {
        assert!(dev::alive(*p, *start), "job process {p} of the first cluster was killed by the second's start");
    }
    assert_eq!(state(&a), "RUNNING");
    let scopes = [a.cgroup_scope().to_string(), b.cgroup_scope().to_string()];
    drop(b);
    drop(a);
    // Stopped, each cluster removed its (empty) cgroup directories.
    let root = std::path::Path::new("/sys/fs/cgroup");
    for base in [root.join("flotilla"), root.join("memory/flotilla"), root.join("devices/flotilla"), root.join("pids/flotilla")] {
        for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!scopes.iter().any(|s| name.starts_with(&format!("{s}_"))), "{} left behind", e.path().display());
        }
    }
}
