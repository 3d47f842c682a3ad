//! Job steps end to end on a local cluster (4 nodes × 8 fake GPUs, `--cgroup none`): `srun`
//! inside an `sbatch` job (16 ranks over 2 nodes with a GPU each, labels, exit status of the
//! worst task, `-o` patterns, an environment stripped of every `SLURM_*` variable but
//! `SLURM_JOB_ID`, a step larger than the allocation, signal forwarding, `squeue -s`), `salloc`
//! running a command, and `srun` outside an allocation.
//!
//! The commands must be built beside the daemons (`cargo build -p flotilla-commands --bins
//! -p flotilla-slurmctld -p flotilla-slurmd`; `cargo test --workspace` does it).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_until;

/// Our command `name` run on cluster `c`, after checking that the commands were built.
fn checked_run(c: &LocalCluster, name: &str, args: &[&str], cwd: &Path) -> Output {
    flotilla_compat_tests::bin_dir_with(&["srun", "salloc", "sbatch", "squeue"]);
    c.run(name, args, cwd)
}
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Waits for a marker file (`touch`) to exist; fails after `secs`.
fn wait_file(p: &Path, secs: u64) {
    wait_until(&format!("{} to exist", p.display()), Duration::from_secs(secs), || p.exists(), String::new);
}

/// Waits for file `p` to hold a whole line (a shell's `echo x > p` creates the file empty
/// before it writes); returns its text; fails after `secs`.
fn wait_line(p: &Path, secs: u64) -> String {
    let mut text = String::new();
    let read = || {
        text = std::fs::read_to_string(p).unwrap_or_default();
        text.ends_with('\n')
    };
    wait_until(&format!("a line in {}", p.display()), Duration::from_secs(secs), read, String::new);
    text
}

fn work(c: &LocalCluster) -> PathBuf {
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    w
}

fn sbatch(c: &LocalCluster, w: &Path, script: &str) -> u64 {
    std::fs::write(w.join("job.sh"), script).unwrap();
    let o = checked_run(c, "sbatch", &["--parsable", "job.sh"], w);
    assert!(o.status.success(), "sbatch: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

/// Waits until job `id` is in a finished state (`squeue -t all`); returns it.
fn wait_finished(c: &LocalCluster, w: &Path, id: u64) -> String {
    let state = || {
        let o = checked_run(c, "squeue", &["-t", "all", "-h", "-j", &id.to_string(), "-o", "%T"], w);
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let done = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"];
    wait_until(&format!("job {id} to finish"), Duration::from_secs(30), || done.contains(&state().as_str()), || {
        format!("state {:?}", state())
    });
    state()
}

fn read(w: &Path, f: &str) -> String {
    std::fs::read_to_string(w.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

#[test]
fn srun_inside_a_batch_job() {
    let c = LocalCluster::start(None);
    let w = work(&c);
    let id = sbatch(
        &c,
        &w,
        r#"#!/bin/sh
#SBATCH -N 2 --ntasks-per-node=8 --gpus-per-node=8 -o batch.out
srun --gpus-per-task=1 sh -c 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $SLURM_NTASKS $SLURM_STEP_ID $SLURM_STEP_NODELIST $SLURM_STEP_TASKS_PER_NODE"' > ranks.txt
echo "ranks=$?" > status.txt
srun -l -n 12 sh -c 'echo hello' > labels.txt
srun -n 3 sh -c 'exit $((SLURM_PROCID + 3))' 2> worst.err
echo "worst=$?" >> status.txt
srun -n 2 -o 'out_%j_%t.txt' sh -c 'echo "task $SLURM_PROCID"'
# What snakemake's jobstep does: every SLURM_* variable but SLURM_JOB_ID deleted.
for v in $(env | sed -n 's/^\(SLURM_[A-Z_]*\)=.*/\1/p'); do [ "$v" = SLURM_JOB_ID ] || unset "$v"; done
srun -n 1 sh -c 'echo "stripped $SLURM_JOB_ID $SLURM_NTASKS $SLURM_STEP_ID"' > stripped.txt
srun -n 200 true 2> toolarge.err
echo "toolarge=$?" >> status.txt
touch done
"#,
    );
    wait_file(&w.join("done"), 90);
    let batch_out = read(&w, "batch.out");
    // 16 ranks: each id once, LOCALID and NODEID from the block layout, one GPU each, all of
    // a node's GPUs used once, two different nodes.
    let ranks = read(&w, "ranks.txt");
    let mut rows: Vec<Vec<String>> = ranks.lines().map(|l| l.split(' ').map(String::from).collect()).collect();
    assert_eq!(rows.len(), 16, "{ranks}\n{batch_out}");
    rows.sort_by_key(|r| r[0].parse::<u32>().unwrap());
    for (i, r) in rows.iter().enumerate() {
        let i = i as u32;
        assert_eq!(r[0], i.to_string(), "{ranks}");
        assert_eq!(r[1], (i % 8).to_string(), "SLURM_LOCALID: {ranks}");
        assert_eq!(r[2], (i / 8).to_string(), "SLURM_NODEID: {ranks}");
        assert_eq!(r[4], (i % 8).to_string(), "CUDA_VISIBLE_DEVICES: {ranks}");
        assert_eq!(&r[5..], ["16", "0", "gpu[01-02]", "8(x2)"].map(String::from), "{ranks}");
    }
    assert!(rows[..8].iter().all(|r| r[3] == rows[0][3]) && rows[8..].iter().all(|r| r[3] == rows[8][3]));
    assert_ne!(rows[0][3], rows[8][3], "two nodes: {ranks}");
    // -l: ` 0: hello` .. `11: hello` (width of the highest task id).
    let labels = read(&w, "labels.txt");
    let mut got: Vec<&str> = labels.lines().collect();
    got.sort_by_key(|l| l.split(':').next().unwrap().trim().parse::<u32>().unwrap());
    let want: Vec<String> = (0..12).map(|t| format!("{t:>2}: hello")).collect();
    assert_eq!(got, want);
    let status = read(&w, "status.txt");
    assert!(status.contains("ranks=0\n"), "{status}");
    // The worst task (exit 5) is srun's status; each failed task is reported on its node.
    assert!(status.contains("worst=5\n"), "{status}");
    let worst = read(&w, "worst.err");
    for t in 0..3 {
        assert!(worst.contains(&format!(": task {t}: Exited with exit code {}\n", t + 3)), "{worst}");
    }
    assert_eq!(read(&w, &format!("out_{id}_0.txt")), "task 0\n");
    assert_eq!(read(&w, &format!("out_{id}_1.txt")), "task 1\n");
    // Only SLURM_JOB_ID left: srun still finds its controller and its job.
    assert_eq!(read(&w, "stripped.txt"), format!("stripped {id} 1 4\n"));
    // More tasks than the allocation's CPUs: Slurm's message, exit 1.
    assert!(status.contains("toolarge=1\n"), "{status}");
    assert_eq!(
        read(&w, "toolarge.err"),
        format!("srun: error: Unable to create step for job {id}: More processors requested than permitted\n")
    );
}

#[test]
fn signals_reach_the_tasks_and_squeue_shows_the_step() {
    let c = LocalCluster::start(None);
    let w = work(&c);
    let id = sbatch(
        &c,
        &w,
        r#"#!/bin/sh
#SBATCH -n 2 -o batch.out
srun sh -c 'trap "echo got USR1 $SLURM_PROCID; exit 7" USR1; echo ready; while :; do sleep 0.1; done' > sig.txt &
pid=$!
while [ "$(grep -c ready sig.txt 2>/dev/null)" != 2 ]; do sleep 0.1; done
touch ready
while [ ! -f go ]; do sleep 0.1; done
kill -USR1 $pid
wait $pid
echo "rc=$?" >> sig.txt
touch done
"#,
    );
    wait_file(&w.join("ready"), 60);
    let sq = checked_run(&c, "squeue", &["-s", "-h"], &w);
    let text = String::from_utf8_lossy(&sq.stdout).into_owned();
    let step: Vec<&str> = text
        .lines()
        .map(str::split_whitespace)
        .map(|mut f| (f.next().unwrap_or(""), f.next().unwrap_or("")))
        .filter(|(i, _)| *i == format!("{id}.0"))
        .map(|(_, n)| n)
        .collect();
    assert_eq!(step, ["sh"], "squeue -s: {text}");
    std::fs::write(w.join("go"), "").unwrap();
    wait_file(&w.join("done"), 60);
    let sig = read(&w, "sig.txt");
    let mut lines: Vec<&str> = sig.lines().collect();
    lines.sort();
    assert_eq!(lines, ["got USR1 0", "got USR1 1", "rc=7", "ready", "ready"], "{}", read(&w, "batch.out"));
}

#[test]
fn salloc_runs_a_command_and_srun_allocates_outside_a_job() {
    let c = LocalCluster::start(None);
    let w = work(&c);
    let o = checked_run(&c,
        "salloc",
        &["-N", "2", "sh", "-c", "echo \"$SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST\"; srun sh -c 'echo in $SLURM_JOB_ID'; exit 3"],
        &w,
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(3), "{err}");
    let id: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .unwrap_or_else(|| panic!("{err}"))
        .parse()
        .unwrap();
    assert!(err.ends_with(&format!("salloc: Relinquishing job allocation {id}\n")), "{err}");
    let mut lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.remove(0), "2 gpu[01-02]", "{out}");
    assert_eq!(lines, [format!("in {id}"), format!("in {id}")], "{out}");
    // Cancelled under its command: revoked, the command hung up.
    let child = std::thread::spawn({
        let bins = flotilla_compat_tests::bin_dir_with(&["srun", "salloc", "sbatch", "squeue"]);
        let env = c.env();
        let w = w.clone();
        move || {
            Command::new(bins.join("salloc"))
                .args(["sh", "-c", "echo $SLURM_JOB_ID > salloc.id; exec sleep 60"])
                .current_dir(&w)
                .env("PATH", format!("{}:/usr/bin:/bin", bins.display()))
                .envs(env)
                .output()
                .unwrap()
        }
    });
    let rid = wait_line(&w.join("salloc.id"), 30);
    let o = checked_run(&c, "scancel", &[rid.trim()], &w);
    assert!(o.status.success());
    let o = child.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(129), "{err}");
    assert!(err.contains(&format!("salloc: Job allocation {} has been revoked.\n", rid.trim())), "{err}");
    // A job id from the environment that names no job.
    let bins = flotilla_compat_tests::bin_dir_with(&["srun", "salloc", "sbatch", "squeue"]);
    let o = Command::new(bins.join("srun"))
        .args(["true"])
        .current_dir(&w)
        .env("SLURM_JOB_ID", "999999")
        .envs(c.env())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "srun: error: Unable to confirm allocation for job 999999: Invalid job id specified\n\
         srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 999999\n"
    );
    // srun outside any allocation: allocate, run, release.
    let o = checked_run(&c, "srun", &["-N", "2", "-l", "sh", "-c", "echo $SLURMD_NODENAME $SLURM_NTASKS"], &w);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("0: gpu0") && lines[0].ends_with(" 2"), "{out}");
    assert!(lines[1].starts_with("1: gpu0") && lines[1].ends_with(" 2"), "{out}");
    // Both allocations ended: COMPLETED for srun, FAILED (exit 3) for salloc's command.
    let t0 = Instant::now();
    loop {
        let q = checked_run(&c, "squeue", &["-t", "all", "-h", "-o", "%i %T"], &w);
        let text = String::from_utf8_lossy(&q.stdout).into_owned();
        let mut states: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(i, st)| (i.parse().unwrap(), st))
            .collect();
        states.sort();
        if states == [(id, "FAILED"), (id + 1, "CANCELLED"), (id + 2, "COMPLETED")] {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `scancel --signal=USR1` without `-b`/`-f` reaches the step's tasks, not the batch shell
/// (Slurm 22.05, checked live: the batch job keeps running); `-b` reaches the shell.
#[test]
fn scancel_signal_reaches_the_steps_not_the_batch_shell() {
    let c = LocalCluster::start(None);
    let w = work(&c);
    let id = sbatch(
        &c,
        &w,
        r#"#!/bin/bash
#SBATCH -n 1 -o batch.out
trap 'echo usr1 >> shell.txt' USR1
trap 'echo usr2 >> shell.txt' USR2
srun sh -c 'trap "echo task > task.txt; exit 0" USR1; touch ready; while :; do sleep 0.1; done'
echo "srun=$?" > after.txt
while [ ! -e shell.txt ]; do sleep 0.1; done
"#,
    );
    wait_file(&w.join("ready"), 30);
    let o = checked_run(&c, "scancel", &["--signal=USR1", &id.to_string()], &w);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(wait_line(&w.join("task.txt"), 30), "task\n");
    assert_eq!(wait_line(&w.join("after.txt"), 30), "srun=0\n");
    // A USR1 that reached the shell while srun ran is written before after.txt (bash runs the
    // trap when the foreground command returns, before the next command).
    assert!(!w.join("shell.txt").exists(), "the batch shell got the signal too");
    // `-b`: the shell (its trap lets the script end). A USR1 that reached the shell later,
    // through the same path, came before this USR2: the shell saw USR2 only.
    let o = checked_run(&c, "scancel", &["-b", "--signal=USR2", &id.to_string()], &w);
    assert!(o.status.success(), "{o:?}");
    wait_line(&w.join("shell.txt"), 30);
    assert_eq!(wait_finished(&c, &w, id), "COMPLETED");
    assert_eq!(read(&w, "shell.txt"), "usr2\n", "the batch shell got the first signal too");
}

/// `--signal=USR1@T` (no `B:`): T seconds before the time limit the job's steps get the
/// signal and the batch shell does not (the controller sends it, as Slurm's slurmctld);
/// submitit's `--signal=USR2@90` relies on it reaching the `srun` task.
#[test]
fn signal_before_the_time_limit_reaches_the_steps_not_the_batch_shell() {
    let c = LocalCluster::start(None);
    let w = work(&c);
    let id = sbatch(
        &c,
        &w,
        r#"#!/bin/bash
#SBATCH -n 1 -t 1 --signal=USR1@57 -o batch.out
trap 'echo shell >> shell.txt' USR1
srun sh -c 'trap "echo task > task.txt; exit 0" USR1; while :; do sleep 0.1; done'
echo "srun=$?" > after.txt
"#,
    );
    assert_eq!(wait_line(&w.join("task.txt"), 30), "task\n");
    assert_eq!(wait_line(&w.join("after.txt"), 30), "srun=0\n");
    // The script ends after srun: once the shell is gone, every signal it got was trapped.
    assert_eq!(wait_finished(&c, &w, id), "COMPLETED");
    assert!(!w.join("shell.txt").exists(), "the batch shell got the warning signal");
}
