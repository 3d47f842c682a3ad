//! The node emulator (`flotilla emulate`, started by `flotilla dev up --emulate-nodes N`)
//! against a real controller: 64 emulated nodes in 2 pods register, run jobs for their
//! runtime and report their ends (completed, failed with an exit code, timed out, cancelled),
//! and, told through the emulator's control socket, reboot (a new boot epoch: the job there is
//! requeued), fail a GPU (the node is drained with the reason), lose their connection (the
//! job keeps running and completes once the node is back) and go down and up again (marked
//! down after `SlurmdTimeout`, idle again once it registers).

use std::time::Duration;

use flotilla_admin::dev::Emulate;
use flotilla_admin::emulate::send_control;
use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_until;

const WAIT: Duration = Duration::from_secs(60);

struct Emu {
    c: LocalCluster,
    work: std::path::PathBuf,
}

impl Emu {
    fn out(&self, cmd: &str, args: &[&str]) -> String {
        let o = self.c.run(cmd, args, &self.work);
        assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn sbatch(&self, args: &[&str]) -> u64 {
        let out = self.out("sbatch", &[&["--parsable"], args].concat());
        out.trim().parse().unwrap_or_else(|_| panic!("sbatch printed {out:?}"))
    }

    /// `sacct` state and exit code of a job (`COMPLETED 0:0`).
    fn acct(&self, id: u64) -> String {
        let j = id.to_string();
        self.out("sacct", &["-X", "-n", "-P", "-j", &j, "-o", "state,exitcode"]).trim().replace('|', " ")
    }

    /// `squeue` state and nodes of a job (`RUNNING gpu01`), empty when it left the queue.
    fn queue(&self, id: u64) -> String {
        let j = id.to_string();
        self.out("squeue", &["-h", "-j", &j, "-o", "%T %N"]).trim().to_string()
    }

    fn node_of_running(&self, id: u64) -> String {
        let mut node = String::new();
        wait_until(&format!("job {id} running"), WAIT, || {
            let q = self.queue(id);
            match q.strip_prefix("RUNNING ") {
                Some(n) => {
                    node = n.to_string();
                    true
                }
                None => false,
            }
        }, || self.diag());
        node
    }

    fn wait_acct(&self, id: u64, want: &str) {
        wait_until(&format!("job {id} {want}"), WAIT, || self.acct(id) == want, || format!("sacct: {}\n{}", self.acct(id), self.diag()));
    }

    /// `sinfo` state and reason of one node (`drained Xid ...`), first partition's line.
    fn node(&self, name: &str) -> String {
        let out = self.out("sinfo", &["-h", "-N", "-n", name, "-o", "%N|%T|%E"]);
        assert!(out.lines().all(|l| l.split('|').next() == Some(name)), "sinfo -n {name}: {out}");
        let line = out.lines().next().unwrap_or_else(|| panic!("no {name} in {out}"));
        line.split_once('|').map_or("", |x| x.1).replace('|', " ").trim().to_string()
    }

    fn restarts(&self, id: u64) -> u32 {
        let out = self.out("scontrol", &["show", "job", &id.to_string()]);
        out.split_whitespace()
            .find_map(|w| w.strip_prefix("Restarts="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no Restarts= in {out}"))
    }

    fn ctl(&self, line: &str) {
        let answer = send_control(&self.c.dir().join("emulator.sock"), line).unwrap_or_else(|e| panic!("{line}: {e:#}"));
        assert_eq!(answer, "ok 1", "{line}");
    }

    fn diag(&self) -> String {
        format!(
            "squeue:\n{}\nemulator.log:\n{}\nslurmctld.log:\n{}",
            String::from_utf8_lossy(&self.c.run("squeue", &[], &self.work).stdout),
            flotilla_admin::dev::log_tail(self.c.dir(), "emulator.log", 10),
            flotilla_admin::dev::log_tail(self.c.dir(), "slurmctld.log", 20)
        )
    }
}

fn start() -> Emu {
    let c = LocalCluster::start_with(None, |o| {
        o.emulate = Some(Emulate::Process);
        o.nodes = 64;
        o.ctld_args = ["--minute-s", "1", "--slurmd-timeout", "3"].iter().map(|s| s.to_string()).collect();
    });
    let work = c.dir().join("work");
    std::fs::create_dir_all(&work).unwrap();
    Emu { c, work }
}

#[test]
fn emulated_nodes_register_run_jobs_and_report_their_ends() {
    let e = start();
    let nodes = e.c.query_nodes();
    assert_eq!(nodes.len(), 64);
    assert_eq!(nodes[0].0, "gpu001");
    assert!(nodes.iter().all(|n| n.1 == "IDLE" && !n.2), "{nodes:?}");
    // Inventory as configured: 8 GPUs, 64 CPUs on every node, two leaf switches.
    let show = e.out("scontrol", &["show", "node", "gpu064"]);
    assert!(show.contains("CPUTot=64") && show.contains("gpu:h100:8"), "{show}");
    let topo = std::fs::read_to_string(e.c.dir().join("topology.conf")).unwrap();
    assert_eq!(topo, "SwitchName=leaf1 Nodes=gpu[001-032]\nSwitchName=leaf2 Nodes=gpu[033-064]\nSwitchName=spine Switches=leaf[1-2]\n");

    // Runtime from the script's sleep, then from the environment with an exit code.
    let two = e.sbatch(&["-N2", "--gres=gpu:8", "--wrap", "sleep 1"]);
    let failed = e.sbatch(&["--gres=gpu:1", "--export=ALL,FLOTILLA_EMULATE_RUNTIME=0.5,FLOTILLA_EMULATE_EXIT=3", "--wrap", "true"]);
    // A time limit of one (one-second) minute: SIGTERM ends the job.
    let timeout = e.sbatch(&["-t", "1", "--gres=gpu:1", "--wrap", "sleep 1000"]);
    let cancelled = e.sbatch(&["--gres=gpu:1", "--wrap", "sleep 1000"]);
    e.node_of_running(cancelled);
    e.out("scancel", &[&cancelled.to_string()]);
    e.wait_acct(two, "COMPLETED 0:0");
    e.wait_acct(failed, "FAILED 3:0");
    e.wait_acct(timeout, "TIMEOUT 0:0");
    e.wait_acct(cancelled, &format!("CANCELLED by {} 0:0", nix::unistd::getuid()));
    let nodes = e.out("sacct", &["-X", "-n", "-P", "-j", &two.to_string(), "-o", "nnodes"]);
    assert_eq!(nodes.trim(), "2");

    // sinfo -n (Slurm 22.05 sinfo.c `_filter_out`): only the named nodes, in each of their
    // partitions.
    let parts = e.out("sinfo", &["-h", "-N", "-o", "%N %P"]).lines().filter(|l| l.starts_with("gpu002 ")).count();
    assert!(parts >= 1);
    let out = e.out("sinfo", &["-h", "-N", "-n", "gpu002", "-o", "%N %P"]);
    assert_eq!(out.lines().count(), parts, "{out}");
    assert!(out.lines().all(|l| l.starts_with("gpu002 ")), "{out}");
    let out = e.out("sinfo", &["-h", "-N", "--nodes=gpu[040-041],gpu007", "-o", "%N"]);
    let mut names: Vec<&str> = out.lines().collect();
    names.dedup();
    assert_eq!(names, ["gpu007", "gpu040", "gpu041"], "{out}");
    let out = e.out("sinfo", &["-h", "-n", "gpu[001-004]", "-o", "%D %N"]);
    assert!(out.lines().any(|l| l == "4 gpu[001-004]"), "{out}");
    // An unknown single name: the header alone, exit 0 (22.05, goldens-extra 0707).
    let o = e.c.run("sinfo", &["-N", "-n", "gpu999", "-o", "%N|%t"], &e.work);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stdout).as_ref(), String::from_utf8_lossy(&o.stderr).as_ref()),
        (Some(0), "NODELIST|STATE\n", "")
    );
    let o = e.c.run("sinfo", &["-N", "-n", "gpu[3-1]"], &e.work);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).as_ref()),
        (Some(1), "sinfo: error: 'gpu[3-1]' invalid entry for --nodes\n"),
        "sinfo -n gpu[3-1]"
    );
    assert!(o.stdout.is_empty(), "sinfo -n gpu[3-1]: {}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn emulated_nodes_reboot_fail_disconnect_and_go_down() {
    let e = start();
    // Reboot: a new boot epoch, the job there is requeued and runs again.
    let rebooted = e.sbatch(&["--gres=gpu:8", "--wrap", "sleep 1000"]);
    let node = e.node_of_running(rebooted);
    e.ctl(&format!("reboot {node}"));
    wait_until("the rebooted node's job requeued", WAIT, || e.restarts(rebooted) == 1, || e.diag());
    e.node_of_running(rebooted);
    e.out("scancel", &[&rebooted.to_string()]);

    // A GPU fails: the node is drained with the reason, its job requeued elsewhere.
    let on_failed = e.sbatch(&["--gres=gpu:8", "--wrap", "sleep 1000"]);
    let node = e.node_of_running(on_failed);
    e.ctl(&format!("fail {node} Xid 79 on gpu 3: GPU has fallen off the bus"));
    wait_until("the node drained", WAIT, || e.node(&node) == "drained Xid 79 on gpu 3: GPU has fallen off the bus", || {
        format!("{}\n{}", e.node(&node), e.diag())
    });
    wait_until("the job requeued", WAIT, || e.restarts(on_failed) == 1, || e.diag());
    let again = e.node_of_running(on_failed);
    assert_ne!(again, node);
    e.out("scancel", &[&on_failed.to_string()]);

    // A lost connection: the node is not responding for a while, its job keeps running and
    // completes once the node is back (reported in its registration's running jobs).
    let kept = e.sbatch(&["--gres=gpu:8", "--wrap", "sleep 8"]);
    let node = e.node_of_running(kept);
    e.ctl(&format!("disconnect {node} 2"));
    wait_until("the node not responding", WAIT, || e.node(&node).contains('*'), || e.diag());
    wait_until("the node responding again", WAIT, || !e.node(&node).contains('*'), || e.diag());
    e.wait_acct(kept, "COMPLETED 0:0");
    assert_eq!(e.restarts(kept), 0);

    // Powered off: marked down after SlurmdTimeout (3 s), idle again once powered on.
    let idle = "gpu064";
    e.ctl(&format!("down {idle}"));
    wait_until("the node marked down", WAIT, || e.node(idle) == "down* Not responding", || format!("{}\n{}", e.node(idle), e.diag()));
    e.ctl(&format!("up {idle}"));
    wait_until("the node idle again", WAIT, || e.node(idle) == "idle none", || format!("{}\n{}", e.node(idle), e.diag()));

    // Bad control lines are refused with a reason.
    let sock = e.c.dir().join("emulator.sock");
    assert!(send_control(&sock, "explode gpu001").unwrap_err().to_string().contains("unknown command"));
    assert!(send_control(&sock, "reboot nosuchnode").unwrap_err().to_string().contains("not emulated here"));
}
