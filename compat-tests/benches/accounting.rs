//! `sacctmgr show assoc -P` and `sshare -a -P` with 10,000 users: Flotilla's figures, measured as
//! `bench/accounting-reference.py` measures real Slurm's (s18-ref's
//! `bench/accounting-reference.md`): on a local cluster in production mode (root), account
//! `bench` and `sacctmgr -i add user bu00001,... account=bench` in batches of 1000 names (total
//! time), then `sacctmgr show assoc -P` 5 times (median, min, max; output read from a pipe and
//! counted), `sshare -a -P` 5 times the same way, then the users and the account deleted
//! again (total time). Prints a Markdown
//! table; asserts nothing. Needs root (`FLOTILLA_TEST_ROOT=1`).
//!
//! `FLOTILLA_TEST_ROOT=1 cargo bench -p flotilla-compat-tests --bench accounting [--profile dev] [-- N]`

use flotilla_compat_tests::cluster::LocalCluster;
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        eprintln!("SKIPPED: the accounting benchmark runs a local cluster as root (FLOTILLA_TEST_ROOT=1)");
        return;
    }
    let n: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(10_000);
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    let run_cmd = |cmd: &str, args: &[&str]| -> (f64, usize) {
        let bin = flotilla_compat_tests::bin_dir().join(cmd);
        let t = Instant::now();
        let o = Command::new(&bin)
            .args(args)
            .current_dir(&w)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(c.env())
            .stdin(Stdio::null())
            .output()
            .expect("the command runs");
        let dt = t.elapsed().as_secs_f64();
        assert!(o.status.success(), "{cmd} {:?}: {}", &args[..args.len().min(4)], String::from_utf8_lossy(&o.stderr));
        (dt, o.stdout.iter().filter(|b| **b == b'\n').count())
    };
    let run = |args: &[&str]| run_cmd("sacctmgr", args);
    run(&["-i", "add", "account", "bench"]);
    let names: Vec<String> = (1..=n).map(|i| format!("bu{i:05}")).collect();
    let mut add = 0.0;
    for chunk in names.chunks(1000) {
        add += run(&["-i", "add", "user", &chunk.join(","), "account=bench"]).0;
    }
    let mut shows: Vec<f64> = Vec::new();
    let mut lines = 0;
    for _ in 0..5 {
        let (dt, l) = run(&["show", "assoc", "-P"]);
        shows.push(dt);
        lines = l;
    }
    shows.sort_by(f64::total_cmp);
    let mut shares: Vec<f64> = Vec::new();
    let mut share_lines = 0;
    for _ in 0..5 {
        let (dt, l) = run_cmd("sshare", &["-a", "-P"]);
        shares.push(dt);
        share_lines = l;
    }
    shares.sort_by(f64::total_cmp);
    let mut del = 0.0;
    for chunk in names.chunks(1000) {
        del += run(&["-i", "delete", "user", &chunk.join(",")]).0;
    }
    run(&["-i", "delete", "account", "bench"]);
    let profile = flotilla_compat_tests::bin_dir().file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    println!("## Flotilla ({profile} binaries), {n} users\n");
    println!("| step | median (s) | min (s) | max (s) | lines |\n|---|---|---|---|---|");
    println!("| `sacctmgr -i add user` x {n} (batches of 1000), total | {add:.3} | | | |");
    println!("| `sacctmgr show assoc -P` (5 runs) | {:.3} | {:.3} | {:.3} | {lines} |", shows[2], shows[0], shows[4]);
    println!("| `sshare -a -P` (5 runs) | {:.3} | {:.3} | {:.3} | {share_lines} |", shares[2], shares[0], shares[4]);
    println!("| `sacctmgr -i delete user` x {n} (batches of 1000), total | {del:.3} | | | |");
}
