//! Usage really collected (issue 18): a job that allocates 200 MiB and burns about 2 s of CPU
//! reports its own truth (its `/proc/self/stat` CPU ticks and `/proc/self/status` `VmHWM`, read
//! by the job itself just before it exits), and `sacct` must show `TotalCPU` and `MaxRSS`
//! within 10 % of it — for the batch step (the script execs the burner) and for an `srun`
//! step, on a cluster whose node daemons confine jobs in cgroups (`--cgroup auto`, root only:
//! `FLOTILLA_TEST_ROOT=1`) and on one that does not (`--cgroup none`, the `/proc` and
//! `getrusage` fallback).
//!
//! The burner is this test binary itself, re-run by the job in the `burn` role
//! (`FLOTILLA_USAGE_ROLE=burn`, test `usage_role_burn`), so the test needs nothing but the
//! workspace's binaries. `seff` reports the same batch job's CPU and memory; `sstat` a running
//! one's.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_until;
use std::path::Path;
use std::time::Duration;

/// What the burner allocates (bytes).
const ALLOC: usize = 200 << 20;
/// User CPU it burns (ticks of 10 ms).
const BURN_TICKS: u64 = 200;

fn proc_self() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).map(|v| v.parse().unwrap()).collect();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap();
    (f[0] + f[1], hwm_kb)
}

/// The job's burner: not a test of its own (returns at once unless the job runs it).
#[test]
fn usage_role_burn() {
    if std::env::var("FLOTILLA_USAGE_ROLE").as_deref() != Ok("burn") {
        return;
    }
    let mut v = vec![1u8; ALLOC];
    // Touch every page (the allocation may be lazily zero-filled).
    for i in (0..v.len()).step_by(4096) {
        v[i] = (i % 251) as u8;
    }
    let mut x: u64 = 0;
    loop {
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i ^ u64::from(v[(i as usize * 4096) % ALLOC]));
        }
        if proc_self().0 >= BURN_TICKS {
            break;
        }
    }
    std::hint::black_box(x);
    let (ticks, hwm_kb) = proc_self();
    println!("TRUTH cpu_us={} maxrss_bytes={}", ticks * 10_000, hwm_kb * 1024);
    if std::env::var("FLOTILLA_USAGE_HOLD").as_deref() == Ok("1") {
        // Holds its memory until the job is cancelled (the sstat check).
        loop {
            std::thread::park();
            std::hint::black_box(&v);
        }
    }
    drop(v);
}

/// `[D-][HH:]MM:SS[.mmm]` to microseconds.
fn parse_cpu(s: &str) -> u64 {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().unwrap(), r),
        None => (0, s),
    };
    let (hms, frac) = match rest.split_once('.') {
        Some((a, b)) => (a, b.parse::<u64>().unwrap() * 1000),
        None => (rest, 0),
    };
    let parts: Vec<u64> = hms.split(':').map(|p| p.parse().unwrap()).collect();
    let secs = parts.iter().fold(0, |acc, p| acc * 60 + p);
    (days * 86_400 + secs) * 1_000_000 + frac
}

fn within(got: u64, truth: u64, what: &str) {
    let diff = got.abs_diff(truth) as f64 / truth as f64;
    assert!(diff <= 0.10, "{what}: sacct {got}, truth {truth} ({:.1} % off)", diff * 100.0);
}

/// Submits a job whose script runs the burner (`via_srun`: as `srun` step 0), waits for its
/// step's usage in sacct, and compares it with the truth the burner printed.
fn check(c: &LocalCluster, via_srun: bool) {
    let exe = std::env::current_exe().unwrap();
    let work = c.dir().join(if via_srun { "srun" } else { "batch" });
    std::fs::create_dir_all(&work).unwrap();
    let burn = format!("FLOTILLA_USAGE_ROLE=burn {}{} --exact usage_role_burn --nocapture --test-threads=1", if via_srun { "srun " } else { "exec " }, exe.display());
    let script = format!("#!/bin/sh\n{burn}\n");
    std::fs::write(work.join("job.sh"), script).unwrap();
    let out = c.run("sbatch", &["--parsable", "-o", "out.txt", "job.sh"], &work);
    assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
    let id: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let step = if via_srun { format!("{id}.0") } else { format!("{id}.batch") };
    let sacct = || {
        let o = c.run("sacct", &["-j", &id.to_string(), "-n", "-P", "--noconvert", "-o", "JobID,State,TotalCPU,MaxRSS,MaxRSSNode"], &work);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let row = || sacct().lines().find(|l| l.starts_with(&format!("{step}|"))).map(str::to_string);
    wait_until(
        &format!("{step} COMPLETED with usage"),
        Duration::from_secs(120),
        || row().is_some_and(|r| r.contains("|COMPLETED|") && !r.ends_with('|')),
        || format!("sacct:\n{}\nlog: {}", sacct(), std::fs::read_to_string(work.join("out.txt")).unwrap_or_default()),
    );
    let job_out = std::fs::read_to_string(work.join("out.txt")).unwrap();
    // libtest prints the test's name and then, on the same line, what the test printed.
    let truth = job_out.lines().find_map(|l| Some(&l[l.find("TRUTH ")? + 6..])).unwrap_or_else(|| panic!("no truth in {job_out}"));
    let field = |k: &str| -> u64 {
        truth.split_whitespace().find_map(|kv| kv.strip_prefix(k)?.strip_prefix('=')?.parse().ok()).unwrap()
    };
    let (cpu, rss) = (field("cpu_us"), field("maxrss_bytes"));
    let r = row().unwrap();
    let f: Vec<&str> = r.split('|').collect();
    println!("{step}: sacct {r:?}, truth cpu {cpu} us, rss {rss} B");
    within(parse_cpu(f[2]), cpu, &format!("{step} TotalCPU"));
    within(f[3].parse().unwrap(), rss, &format!("{step} MaxRSS"));
    assert!(c.nodes().iter().any(|n| n == f[4]), "MaxRSSNode {:?} is a node of the cluster", f[4]);
    if !via_srun {
        // seff over the same record: CPU utilized (rounded to the second) and the peak.
        let o = c.run("seff", &[&id.to_string()], &work);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "seff: {text}{}", String::from_utf8_lossy(&o.stderr));
        assert!(text.contains(&format!("Job ID: {id}\n")) && text.contains("State: COMPLETED (exit code 0)\n"), "{text}");
        let cpu_line = format!("CPU Utilized: 00:00:{:02}\n", (cpu + 500_000) / 1_000_000);
        assert!(text.contains(&cpu_line), "{text}");
        let mb: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("Memory Utilized: ")?.strip_suffix(" MB")?.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        within((mb * 1024.0 * 1024.0) as u64, rss, "seff Memory Utilized");
    }
    // The job line sums its steps' CPU and has no memory of its own (Slurm's sacct).
    let job = sacct().lines().find(|l| l.starts_with(&format!("{id}|"))).unwrap().to_string();
    let jf: Vec<&str> = job.split('|').collect();
    assert!(parse_cpu(jf[2]) >= parse_cpu(f[2]), "{job}");
    assert_eq!(jf[3], "", "{job}");
}

/// A running job's batch step (`via_srun`: its srun step 0) in `sstat` (the node daemon's
/// polls, every second here): its MaxRSS within 10 % of the truth while it holds its memory,
/// AveCPU within a second of its CPU.
fn check_sstat(c: &LocalCluster, via_srun: bool) {
    let exe = std::env::current_exe().unwrap();
    let work = c.dir().join(if via_srun { "sstat-srun" } else { "sstat" });
    std::fs::create_dir_all(&work).unwrap();
    let script = format!(
        "#!/bin/sh\nFLOTILLA_USAGE_ROLE=burn FLOTILLA_USAGE_HOLD=1 {} {} --exact usage_role_burn --nocapture --test-threads=1\n",
        if via_srun { "srun" } else { "exec" },
        exe.display()
    );
    std::fs::write(work.join("job.sh"), script).unwrap();
    let out = c.run("sbatch", &["--parsable", "-o", "out.txt", "job.sh"], &work);
    assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let step = if via_srun { format!("{id}.0") } else { format!("{id}.batch") };
    let truth = || {
        let t = std::fs::read_to_string(work.join("out.txt")).unwrap_or_default();
        let t = t.lines().find_map(|l| Some(l[l.find("TRUTH ")? + 6..].to_string()))?;
        let field = |k: &str| -> Option<u64> { t.split_whitespace().find_map(|kv| kv.strip_prefix(k)?.strip_prefix('=')?.parse().ok()) };
        Some((field("cpu_us")?, field("maxrss_bytes")?))
    };
    let sstat = || {
        // A job named without a step: its lowest-numbered srun step.
        let which = if via_srun { id.clone() } else { step.clone() };
        let o = c.run("sstat", &["-j", &which, "-n", "-P", "--noconvert", "-o", "JobID,MaxRSS,AveCPU,NTasks,MaxRSSNode"], &work);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // A poll after the burner printed its truth (it then only sleeps): its peak and CPU.
    let close = || -> bool {
        let Some((cpu, rss)) = truth() else { return false };
        let line = sstat();
        let f: Vec<&str> = line.trim_end().split('|').collect();
        f.len() == 5
            && f[1].parse::<u64>().is_ok_and(|got| got.abs_diff(rss) as f64 <= rss as f64 * 0.10)
            && parse_cpu(f[2]).abs_diff(cpu) <= 1_000_000
    };
    wait_until(&format!("sstat of {step} near the truth"), Duration::from_secs(120), close, || {
        format!("sstat: {:?}, truth: {:?}", sstat(), truth())
    });
    let (cpu, _) = truth().unwrap();
    let line = sstat();
    let f: Vec<&str> = line.trim_end().split('|').collect();
    println!("sstat {line:?}, truth cpu {cpu} us");
    assert_eq!(f[0], step);
    assert!(parse_cpu(f[2]).abs_diff(cpu) <= 1_000_000, "AveCPU {} vs truth {cpu} us", f[2]);
    assert_eq!(f[3], "1");
    let out = c.run("scancel", &[&id], &work);
    assert!(out.status.success());
    // Not running any more: sstat says so, as Slurm's.
    wait_until(&format!("{id} no longer running in sstat"), Duration::from_secs(60), || {
        let o = c.run("sstat", &["-j", &id, "-n", "-P"], &work);
        String::from_utf8_lossy(&o.stderr) == format!("sstat: error: No steps running for job {id}\n")
    }, String::new);
}

fn run_both(c: &LocalCluster) {
    check(c, false);
    check(c, true);
    check_sstat(c, false);
    check_sstat(c, true);
}

/// A cluster of two nodes whose daemons poll usage every second.
fn start(cgroup: &str) -> LocalCluster {
    let conf = tempfile::tempdir().unwrap();
    let (slurm_conf, topology) = flotilla_admin::dev::default_config(2, 8);
    std::fs::write(conf.path().join("slurm.conf"), format!("{slurm_conf}JobAcctGatherFrequency=task=1\n")).unwrap();
    std::fs::write(conf.path().join("topology.conf"), topology).unwrap();
    let cgroup = cgroup.to_string();
    LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = cgroup)
}

#[test]
fn usage_unconfined_within_ten_percent() {
    flotilla_compat_tests::build_binaries();
    let c = start("none");
    run_both(&c);
}

#[test]
fn usage_confined_within_ten_percent() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        println!("SKIPPED: needs root and FLOTILLA_TEST_ROOT=1 (job cgroups)");
        return;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but the test does not run as root");
    flotilla_compat_tests::build_binaries();
    let c = start("auto");
    assert!(Path::new("/sys/fs/cgroup").exists());
    run_both(&c);
}
