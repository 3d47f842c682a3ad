//! Elastic jobs end to end on a local cluster (3 nodes × 8 fake GPUs, real daemons, cgroups on
//! as root with `FLOTILLA_TEST_ROOT=1`): `sbatch -N 1-3 --elastic` starts at one node, grows
//! into the free node, grows again when a rigid job ends, and shrinks back to its minimum when
//! a rigid 2-node job needs the nodes; the rigid job starts and the elastic job keeps running.
//! Its launch command is a small Python stand-in for torchrun's agent (one a node, `srun`):
//! rank 0 serves the rendezvous at `FLOTILLA_RDZV_ENDPOINT`, the agents on joining nodes
//! connect to it, and it reports the world size it saw at each change (1, 2, 3, then down to
//! 1 as the grown agents are stopped), surviving the grow and the shrink.
//! The job sees every change in its membership file (`FLOTILLA_NODES_FILE`, polled by the
//! script as a torchrun agent would watch it), gets its rendezvous endpoint
//! (`FLOTILLA_RDZV_ENDPOINT`) and range (`FLOTILLA_ELASTIC_NNODES`), its launch command (an
//! `srun` step, one worker a node) is started on each node that joins and its worker 0 hears
//! each change (`--elastic-signal=USR1`), and `scontrol show job` lists the resize history.
//!
//! The commands must be built beside the daemons (`cargo build -p flotilla-commands --bins
//! -p flotilla-slurmctld -p flotilla-slurmd`; `cargo test --workspace` does it).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_until;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn run(c: &LocalCluster, name: &str, args: &[&str], cwd: &Path) -> Output {
    flotilla_compat_tests::bin_dir_with(&["sbatch", "squeue", "scontrol", "srun"]);
    c.run(name, args, cwd)
}

fn sbatch(c: &LocalCluster, w: &Path, file: &str, script: &str) -> u64 {
    std::fs::write(w.join(file), script).unwrap();
    let o = run(c, "sbatch", &["--parsable", file], w);
    assert!(
        o.status.success(),
        "sbatch: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

/// `squeue` state and node list of job `id`.
fn state(c: &LocalCluster, w: &Path, id: u64) -> (String, String) {
    let o = run(
        c,
        "squeue",
        &["-t", "all", "-h", "-j", &id.to_string(), "-o", "%T %N"],
        w,
    );
    let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let (a, b) = s.split_once(' ').unwrap_or((&s, ""));
    (a.to_string(), b.to_string())
}

/// The lines the elastic job's watcher wrote: one per membership it saw, `N list`.
fn seen(w: &Path) -> Vec<String> {
    std::fs::read_to_string(w.join("members.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A stand-in for torchrun's elastic agent, one a node: rank 0 serves the rendezvous at
/// `FLOTILLA_RDZV_ENDPOINT` and writes the world size (the agents connected to it) at each
/// change to `world.txt`, and each `--elastic-signal` to `signals.txt`; every agent joins the
/// rendezvous, notes itself in `workers.txt` and runs until `stop_e` exists.
const AGENT: &str = r#"import os, signal, socket, threading, time
host, port = os.environ["FLOTILLA_RDZV_ENDPOINT"].rsplit(":", 1)
rank, me = int(os.environ["SLURM_PROCID"]), os.environ["SLURMD_NODENAME"]
def changed(*_):
    if rank == 0:
        with open("signals.txt", "a") as f:
            f.write("changed\n")
signal.signal(signal.SIGUSR1, changed)
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("", int(port)))
    srv.listen(16)
    members, lock = {}, threading.Lock()
    def report():
        with open("world.txt", "a") as f:
            f.write("%d %s\n" % (len(members), ",".join(sorted(members))))
    def serve(c):
        name = c.recv(64).decode().strip()
        with lock:
            members[name] = c
            report()
        while c.recv(64):
            pass
        with lock:
            del members[name]
            report()
    def accept():
        while True:
            c = srv.accept()[0]
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
for _ in range(200):
    try:
        s = socket.create_connection((host, int(port)))
        break
    except OSError:
        time.sleep(0.1)
s.sendall(me.encode() + b"\n")
with open("workers.txt", "a") as f:
    f.write("%d %s\n" % (rank, me))
while not os.path.exists("stop_e"):
    time.sleep(0.1)
"#;

/// The world sizes rank 0's rendezvous saw, in order.
fn world(w: &Path) -> Vec<usize> {
    std::fs::read_to_string(w.join("world.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect()
}

/// A config directory: the default 3-node cluster, elastic jobs growing once a second.
fn config(dir: &Path) -> PathBuf {
    let (body, topo) = flotilla_admin::dev::default_config(3, 8);
    let c = dir.join("conf");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(
        c.join("slurm.conf"),
        format!("ClusterName=elastic\nElasticGrowInterval=1\n{body}"),
    )
    .unwrap();
    std::fs::write(c.join("topology.conf"), topo).unwrap();
    std::fs::write(
        c.join("cgroup.conf"),
        flotilla_admin::dev::DEFAULT_CGROUP_CONF,
    )
    .unwrap();
    c
}

#[test]
fn elastic_job_grows_into_free_nodes_and_shrinks_for_a_rigid_job() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = config(tmp.path());
    let c = LocalCluster::start(Some(&conf));
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("agent.py"), AGENT).unwrap();
    // Jobs run as the user that runs the test; the work directory must be hers.
    let a = sbatch(&c, &w, "a.sh", "#!/bin/sh\n#SBATCH -N 1 --gres=gpu:8 -o a.out\nwhile [ ! -e stop_a ]; do sleep 0.1; done\n");
    wait_until(
        "the rigid job to start",
        Duration::from_secs(30),
        || state(&c, &w, a).0 == "RUNNING",
        || format!("{:?}", state(&c, &w, a)),
    );
    // The watcher: the endpoint and range once, then every membership it sees.
    let e = sbatch(
        &c,
        &w,
        "e.sh",
        r#"#!/bin/sh
#SBATCH -N 1-3 --elastic --elastic-signal=USR1 --gres=gpu:8 -o e.out
echo "$FLOTILLA_RDZV_ENDPOINT $FLOTILLA_ELASTIC_NNODES $SLURMD_NODENAME" > endpoint.txt
# The job's launch command: one agent a node (a stand-in for torchrun's), started on each
# node that joins.
srun --ntasks-per-node=1 python3 agent.py &
last=
while [ ! -e stop_e ]; do
  now="$(wc -l < "$FLOTILLA_NODES_FILE") $(paste -sd, "$FLOTILLA_NODES_FILE")"
  if [ "$now" != "$last" ]; then echo "$now" >> members.txt; last="$now"; fi
  sleep 0.1
done
wait
exit 0
"#,
    );
    let wp: &Path = &w;
    let count = |n: usize| {
        move || {
            seen(wp)
                .last()
                .is_some_and(|l| l.starts_with(&format!("{n} ")))
        }
    };
    let diag = || {
        format!(
            "members seen {:?}, squeue {:?}\n{}",
            seen(&w),
            state(&c, &w, e),
            String::from_utf8_lossy(
                &run(&c, "scontrol", &["show", "job", &e.to_string()], &w).stdout
            )
        )
    };
    // It starts at 1 (its step running), then grows into the free node.
    wait_until(
        "the step to start",
        Duration::from_secs(30),
        || w.join("workers.txt").exists(),
        diag,
    );
    wait_until(
        "the elastic job to grow to 2 nodes",
        Duration::from_secs(30),
        count(2),
        diag,
    );
    assert!(seen(&w)[0].starts_with("1 "), "{:?}", seen(&w));
    let endpoint = std::fs::read_to_string(w.join("endpoint.txt")).unwrap();
    let (rdzv, rest) = endpoint.trim().split_once(' ').unwrap();
    assert_eq!(
        rdzv.rsplit_once(':').map(|x| x.1),
        Some((29400 + e % 1000).to_string().as_str()),
        "{endpoint}"
    );
    let (range, first) = rest.split_once(' ').unwrap();
    assert_eq!(range, "1:3");
    assert!(
        seen(&w)
            .iter()
            .all(|l| l.split(' ').nth(1).is_some_and(|m| m.starts_with(first))),
        "the first node stays first: {:?}",
        seen(&w)
    );
    // The rigid job ends: the elastic job takes its node too.
    std::fs::write(w.join("stop_a"), "").unwrap();
    wait_until(
        "the elastic job to grow to 3 nodes",
        Duration::from_secs(30),
        count(3),
        diag,
    );
    assert_eq!(state(&c, &w, e).1, "gpu[01-03]");
    // The launch command runs on every member: workers 0, 1, 2 on three nodes.
    let workers = || std::fs::read_to_string(w.join("workers.txt")).unwrap_or_default();
    wait_until(
        "a worker on each node",
        Duration::from_secs(30),
        || workers().lines().count() == 3,
        workers,
    );
    let mut on: Vec<String> = workers()
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap_or_default().to_string())
        .collect();
    let mut ranks: Vec<String> = workers()
        .lines()
        .map(|l| l.split(' ').next().unwrap_or_default().to_string())
        .collect();
    on.sort();
    ranks.sort();
    assert_eq!(
        (on, ranks),
        (
            vec!["gpu01".to_string(), "gpu02".into(), "gpu03".into()],
            vec!["0".to_string(), "1".into(), "2".into()]
        )
    );
    // Every agent joined rank 0's rendezvous at the exported endpoint.
    wait_until(
        "a world of 3",
        Duration::from_secs(30),
        || world(wp).last() == Some(&3),
        || format!("{:?}", world(wp)),
    );
    // A rigid 2-node job: the growth is taken back (SIGTERM, then the deadline), it starts,
    // the elastic job runs on at its minimum.
    let b = sbatch(&c, &w, "b.sh", "#!/bin/sh\n#SBATCH -N 2 --gres=gpu:8 -o b.out\nwhile [ ! -e stop_b ]; do sleep 0.1; done\n");
    wait_until(
        "the rigid 2-node job to start",
        Duration::from_secs(60),
        || state(&c, &w, b).0 == "RUNNING",
        diag,
    );
    wait_until(
        "the elastic job to see 1 member",
        Duration::from_secs(30),
        count(1),
        diag,
    );
    // Rank 0's agent survived the shrink: the agents that left dropped out of its world.
    wait_until(
        "a world of 1",
        Duration::from_secs(30),
        || world(wp).last() == Some(&1),
        || format!("{:?}", world(wp)),
    );
    let sizes = world(wp);
    assert_eq!(sizes[..3], [1, 2, 3], "{sizes:?}");
    assert!(
        sizes[3..].windows(2).all(|p| p[1] == p[0] - 1) && sizes[3] == 2,
        "{sizes:?}"
    );
    let (st, nodes) = state(&c, &w, e);
    assert_eq!(
        (st.as_str(), nodes.as_str()),
        ("RUNNING", first),
        "{}",
        diag()
    );
    let show =
        String::from_utf8_lossy(&run(&c, "scontrol", &["show", "job", &e.to_string()], &w).stdout)
            .to_string();
    assert!(show.contains("Elastic=nodes MinSize=1 MaxSize=3"), "{show}");
    let history = show
        .lines()
        .find_map(|l| l.trim().strip_prefix("ResizeHistory="))
        .unwrap_or_default()
        .to_string();
    // `<time>:<change>:<nodes>:<count>,...`: the changes in order (the two grown nodes may
    // leave in one change or two).
    let mut changes: Vec<(usize, &str)> = ["grow", "shrink", "lost"]
        .iter()
        .flat_map(|k| {
            history
                .match_indices(&format!(":{k}:"))
                .map(move |(i, _)| (i, *k))
                .collect::<Vec<_>>()
        })
        .collect();
    changes.sort();
    let changes: Vec<&str> = changes.into_iter().map(|(_, k)| k).collect();
    assert!(
        changes.len() >= 3
            && changes[..2] == ["grow", "grow"]
            && changes[2..].iter().all(|k| *k == "shrink"),
        "{show}"
    );
    // The step on the first node hears every change (one signal per change).
    let signals = || {
        std::fs::read_to_string(w.join("signals.txt"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    wait_until(
        "the step to hear every change",
        Duration::from_secs(10),
        || signals() == changes.len(),
        || format!("{} signals for {changes:?}", signals()),
    );
    std::fs::write(w.join("stop_e"), "").unwrap();
    std::fs::write(w.join("stop_b"), "").unwrap();
    for id in [e, b] {
        wait_until(
            "the jobs to end",
            Duration::from_secs(30),
            || state(&c, &w, id).0 == "COMPLETED",
            || format!("{:?}", state(&c, &w, id)),
        );
    }
}
