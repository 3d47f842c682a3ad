//! `flotilla demo`: a local cluster running a real workload end to end, through the real
//! commands.
//!
//! [`run`] starts the default local cluster ([`crate::dev::up`]: 4 nodes × 8 fake GPUs in 2
//! pods), writes the example jobs of `examples/jobs/` (compiled into this binary, so the demo
//! needs nothing beside it) into `<dir>/demo/`, and drives them with `sbatch`, `sdeploy`,
//! `squeue`, `sinfo`, `scontrol` and `sacct` as a user would:
//!
//! 1. a preemptible checkpointing job on one whole node;
//! 2. a 4-GPU inference service with 6 replicas, filling the other three nodes;
//! 3. a 2-node × 8-GPU training job whose 16 ranks `srun` launches, a dependency chain
//!    (preprocess → fit → evaluate) and an array of 8 tasks with a throttle of 2: all queue;
//! 4. the service scaled to 7: the core preempts the checkpointing job, which writes its
//!    checkpoint, acknowledges it and is requeued (PREEMPTED → REQUEUED);
//! 5. the service scaled back to 1 (as an autoscaler would): training, the chain and the array
//!    run, and the requeued job resumes from its checkpoint and completes.
//!
//! It prints `squeue`, `sinfo` with `largest_placeable`, and `sacct` for the run, checks every
//! outcome (final states from `sacct`, the files the jobs wrote, the service's replicas) and
//! stops the cluster unless `keep`. [`DemoReport::failures`] lists every check that failed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::dev::{self, UpOptions};

/// The controller's settings for the demo, shortened from production defaults so the run
/// takes minutes: a job may be preempted after 5 s (slurm.conf `PreemptExemptTime`, default
/// 10 min), a requeued job may start again after 5 s (Slurm holds it 121 s), and the
/// preemption budget pages only past 100 % (default 25 %: on this small cluster the one
/// checkpointing job is all the training running, so preempting it would page a human).
pub const CTLD_ARGS: &[&str] = &["--preempt-exempt-s", "5", "--requeue-holdoff", "5", "--preempt-budget-pct", "100"];

/// Job states that are not final (the job still needs the cluster).
const ACTIVE: &[&str] = &["PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "PREEMPTED", "SUSPENDED"];

/// The example jobs, as `(file name, contents)`: the sources in `examples/jobs/`.
pub const EXAMPLES: &[(&str, &str)] = &[
    ("train.py", include_str!("../../examples/jobs/train.py")),
    ("train-2x8.sbatch", include_str!("../../examples/jobs/train-2x8.sbatch")),
    ("checkpointing.sbatch", include_str!("../../examples/jobs/checkpointing.sbatch")),
    ("preprocess.sbatch", include_str!("../../examples/jobs/preprocess.sbatch")),
    ("fit.sbatch", include_str!("../../examples/jobs/fit.sbatch")),
    ("evaluate.sbatch", include_str!("../../examples/jobs/evaluate.sbatch")),
    ("primes.sbatch", include_str!("../../examples/jobs/primes.sbatch")),
    ("serve.py", include_str!("../../examples/jobs/serve.py")),
];

/// What [`run`] does.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The cluster's options (state directory, binaries, cgroup mode).
    pub up: UpOptions,
    /// Leave the cluster running at the end.
    pub keep: bool,
    /// How long the whole workload may take before the demo gives up.
    pub timeout: Duration,
}

/// What [`run`] saw.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// `(role, job id, final state as sacct shows it)`.
    pub jobs: Vec<(String, String, String)>,
    /// Every check that failed, in words; empty when the demo succeeded.
    pub failures: Vec<String>,
    /// The directory the jobs ran in (their output files).
    pub work_dir: PathBuf,
}

struct Cli<'a> {
    bin_dir: Option<&'a Path>,
    conf: PathBuf,
    cwd: PathBuf,
    cancel: &'a AtomicBool,
}

impl Cli<'_> {
    fn output(&self, cmd: &str, args: &[&str]) -> Result<Output> {
        if self.cancel.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        let bin = dev::find_bin(cmd, self.bin_dir)?;
        // The jobs inherit this environment (sbatch exports it): their `srun` and `scontrol`
        // must be ours, whatever else is on PATH.
        let mut path = std::ffi::OsString::from(bin.parent().unwrap_or(Path::new(".")));
        if let Some(p) = std::env::var_os("PATH") {
            path.push(":");
            path.push(p);
        }
        Command::new(&bin)
            .args(args)
            .current_dir(&self.cwd)
            .env("PATH", path)
            .env("SLURM_CONF", &self.conf)
            .output()
            .with_context(|| format!("running {}", bin.display()))
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, cmd: &str, args: &[&str]) -> Result<String> {
        let out = self.output(cmd, args)?;
        if !out.status.success() {
            bail!(
                "`{cmd} {}` failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Prints `$ cmd args` and the command's output (the demo's transcript).
    fn show(&self, cmd: &str, args: &[&str]) -> Result<()> {
        let out = self.output(cmd, args)?;
        println!("$ {cmd} {}", args.join(" "));
        print!("{}", String::from_utf8_lossy(&out.stdout));
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }

    fn submit(&self, args: &[&str]) -> Result<String> {
        let mut a = vec!["--parsable"];
        a.extend_from_slice(args);
        let id = self.ok("sbatch", &a)?.trim().to_string();
        println!("submitted {} -> job {id}", args.join(" "));
        Ok(id)
    }

    /// The job's state as `squeue` shows it (`%T`), or `None` once it left the queue; for an
    /// array, the state of a task still queued or running if there is one.
    fn queue_state(&self, id: &str) -> Result<Option<String>> {
        let out = self.output("squeue", &["-h", "-j", id, "-t", "all", "-o", "%T"])?;
        let s = String::from_utf8_lossy(&out.stdout);
        let states: Vec<&str> = s.lines().map(str::trim).collect();
        Ok(states
            .iter()
            .find(|s| ACTIVE.contains(s))
            .or(states.first())
            .map(|s| s.to_string()))
    }

    fn wait_for(&self, what: &str, timeout: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
        let t0 = Instant::now();
        while !done()? {
            if t0.elapsed() > timeout {
                bail!("timed out after {} s waiting for {what}", timeout.as_secs());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        println!("[{:>5.1} s] {what}", t0.elapsed().as_secs_f64());
        Ok(())
    }

    /// Running replicas of a service (`sdeploy show`'s `Replicas=`).
    fn running_replicas(&self, service: &str) -> Result<u32> {
        let out = self.ok("sdeploy", &["show", service])?;
        Ok(field(&out, "Replicas").and_then(|v| v.parse().ok()).unwrap_or(0))
    }
}

/// `Key=Value` lookup in `scontrol show`-style output.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// Runs the demo (see the module documentation). Errors are failures to run at all (the
/// cluster did not start, a command could not run, a wait timed out); failed checks are in
/// the report. The cluster is stopped on every path unless `keep`, and on cancellation always.
pub fn run(opts: &DemoOptions, cancel: &AtomicBool) -> Result<DemoReport> {
    let mut cluster = dev::up(&opts.up, cancel)?;
    println!("{}", cluster.export_line());
    let result = workload(opts, &cluster.dir, cancel);
    if !opts.keep || cancel.load(Ordering::SeqCst) {
        cluster.stop(Duration::from_secs(5));
    } else {
        println!("cluster kept running: {}", cluster.export_line());
        println!("stop it with: flotilla dev down --dir {}", cluster.dir.display());
        // Keep the daemons alive past this process.
        std::mem::forget(cluster);
    }
    result
}

fn workload(opts: &DemoOptions, dir: &Path, cancel: &AtomicBool) -> Result<DemoReport> {
    let work = dir.join("demo");
    std::fs::create_dir_all(&work)?;
    for (name, text) in EXAMPLES {
        std::fs::write(work.join(name), text)?;
    }
    // Jobs may run as another user than the one who started the cluster.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o1777))?;
    }
    let cli = Cli {
        bin_dir: opts.up.bin_dir.as_deref(),
        conf: dir.join("slurm.conf"),
        cwd: work.clone(),
        cancel,
    };
    let mut report = DemoReport { work_dir: work.clone(), ..DemoReport::default() };
    let step = Duration::from_secs(120);

    println!("\n== 1. a preemptible checkpointing job takes one whole node");
    let ckpt = cli.submit(&["checkpointing.sbatch"])?;
    cli.wait_for(&format!("job {ckpt} running"), step, || {
        Ok(cli.queue_state(&ckpt)?.as_deref() == Some("RUNNING"))
    })?;

    println!("\n== 2. a 4-GPU inference service with 6 replicas fills the other three nodes");
    let created = cli.ok(
        "sdeploy",
        &["create", "--name", "infer", "--gpus", "4", "--topology", "node", "--min", "1", "--max", "8",
          "--replicas", "6", "--", "python3", "serve.py"],
    )?;
    print!("{created}");
    let svc = created
        .split_whitespace()
        .last()
        .filter(|id| id.parse::<u32>().is_ok())
        .with_context(|| format!("sdeploy create printed no service id: {created:?}"))?
        .to_string();
    cli.wait_for("6 replicas of service infer running", step, || Ok(cli.running_replicas(&svc)? >= 6))?;

    println!("\n== 3. training (2 nodes x 8 GPUs, 16 ranks by srun), a dependency chain and a throttled array queue");
    let train = cli.submit(&["train-2x8.sbatch"])?;
    let pre = cli.submit(&["preprocess.sbatch"])?;
    let dep = format!("--dependency=afterok:{pre}");
    let fit = cli.submit(&[&dep, "fit.sbatch"])?;
    let dep = format!("--dependency=afterok:{fit}");
    let eval = cli.submit(&[&dep, "evaluate.sbatch"])?;
    let primes = cli.submit(&["primes.sbatch"])?;
    cli.show("squeue", &[])?;
    cli.show("sinfo", &["--largest"])?;

    println!("\n== 4. the service scales to 7: inference preempts the checkpointing job");
    cli.ok("sdeploy", &["scale", &svc, "--replicas", "7"])?;
    let mut seen_preempted = false;
    cli.wait_for("7 replicas of service infer running", step, || {
        if cli.queue_state(&ckpt)?.as_deref() != Some("RUNNING") {
            seen_preempted = true;
        }
        Ok(cli.running_replicas(&svc)? >= 7)
    })?;
    cli.show("sdeploy", &["show", &svc])?;
    cli.show("squeue", &[])?;

    println!("\n== 5. the autoscaler scales the service to 1: training, the chain, the array and the requeued job run");
    cli.ok("sdeploy", &["scale", &svc, "--replicas", "1"])?;
    let all = [&ckpt, &train, &pre, &fit, &eval, &primes];
    cli.wait_for("every job finished", opts.timeout, || {
        for id in all {
            if let Some(s) = cli.queue_state(id)? {
                if ACTIVE.contains(&s.as_str()) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    })?;

    println!("\n== the run");
    cli.show("squeue", &["-t", "all"])?;
    cli.show("sinfo", &["--largest"])?;
    let ids: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
    let idlist = ids.join(",");
    cli.show("sacct", &["-D", "-j", &idlist, "-o", "JobID,JobName%12,Partition,AllocTRES%30,State,ExitCode"])?;
    cli.show("sdeploy", &["list"])?;
    cli.ok("sdeploy", &["delete", &svc])?;

    // Checks.
    let acct = cli.ok("sacct", &["-X", "-n", "-P", "-D", "-j", &idlist, "-o", "JobID,State"])?;
    let states = |id: &str| -> Vec<String> {
        acct.lines()
            .filter_map(|l| l.split_once('|'))
            .filter(|(j, _)| *j == id || j.starts_with(&format!("{id}_")) || array_of(j, id))
            .map(|(_, s)| s.to_string())
            .collect()
    };
    let mut fail = |f: String| report.failures.push(f);
    for (role, id) in [("training", &train), ("preprocess", &pre), ("fit", &fit), ("evaluate", &eval)] {
        let s = states(id);
        if s.last().map(String::as_str) != Some("COMPLETED") {
            fail(format!("{role} job {id} ended {s:?}, not COMPLETED"));
        }
    }
    // Each array task's last record (earlier runs: a backfilled task preempted when the
    // reservation it borrowed from filled, then requeued).
    let mut last: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for l in acct.lines() {
        if let Some((j, s)) = l.split_once('|') {
            if array_of(j, &primes) {
                last.insert(j, s);
            }
        }
    }
    if last.len() != 8 || last.values().any(|s| *s != "COMPLETED") {
        fail(format!("array {primes}: tasks ended {last:?}, not 8 x COMPLETED"));
    }
    let ck = states(&ckpt);
    if !(seen_preempted && ck.iter().any(|s| s == "PREEMPTED") && ck.last().map(String::as_str) == Some("COMPLETED")) {
        fail(format!("checkpointing job {ckpt}: records {ck:?}, wanted PREEMPTED then COMPLETED"));
    }
    // The files the jobs wrote.
    let read = |name: String| std::fs::read_to_string(work.join(&name)).unwrap_or_default();
    let t = read(format!("train-2x8-{train}.out"));
    let ranks = (0..16).filter(|r| t.contains(&format!("{r}: rank {r}/16 "))).count();
    if ranks != 16 || !t.contains("trained 60 steps on 16 ranks") {
        fail(format!("training output: {ranks}/16 ranks reported, or no convergence line"));
    }
    let c = read(format!("ckpt-train-{ckpt}.out"));
    if !(c.contains("checkpoint written and acknowledged") && c.contains("resumed from checkpoint") && c.contains("done after")) {
        fail(format!("checkpointing job output lacks checkpoint/resume/done lines:\n{c}"));
    }
    if !read(format!("evaluate-{eval}.out")).contains("test MSE") {
        fail("evaluate wrote no test MSE".into());
    }
    let arrays = std::fs::read_dir(&work)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("primes-{primes}_")))
        .filter(|e| std::fs::read_to_string(e.path()).unwrap_or_default().contains("primes in"))
        .count();
    if arrays != 8 {
        fail(format!("array wrote {arrays}/8 output files with a result"));
    }
    for (role, id) in [("checkpointing", &ckpt), ("training", &train), ("preprocess", &pre),
        ("fit", &fit), ("evaluate", &eval), ("array", &primes)] {
        report.jobs.push((role.into(), id.to_string(), states(id).join(" -> ")));
    }
    Ok(report)
}

/// Whether sacct's `A_i` names a task of array `id` (the array id is the first task's).
fn array_of(jobid: &str, id: &str) -> bool {
    jobid.split_once('_').is_some_and(|(a, _)| a == id)
}
