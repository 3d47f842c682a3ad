//! The client contract of `sacct` (`../shared/clients/CONTRACT.md` §A-6, §A-7 and the sacct
//! part of §A-20) on a local cluster: the real `sbatch` and `sacct` binaries, the real
//! controller and node daemons ([`LocalCluster`]), commands run as argv without a shell, as the
//! client libraries run them.

use flotilla_compat_tests::cluster::LocalCluster;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn bin(name: &str) -> PathBuf {
    flotilla_admin::dev::find_bin(name, std::env::var_os("FLOTILLA_BIN_DIR").as_deref().map(std::path::Path::new))
        .expect("binary built")
}

/// Runs `prog args` with the cluster's environment: (exit code, stdout, stderr).
fn run(c: &LocalCluster, prog: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin(prog))
        .args(args)
        .env_clear()
        .envs(c.env())
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .current_dir(c.dir())
        .output()
        .expect("command runs");
    (
        out.status.code().unwrap_or(128),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sbatch(c: &LocalCluster, wrap: &str) -> u64 {
    let (code, out, err) = run(c, "sbatch", &["--parsable", "-J", "contract", "--wrap", wrap]);
    assert_eq!(code, 0, "sbatch: {err}");
    out.trim().parse().expect("job id")
}

#[test]
fn sacct_client_contract() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let me = flotilla_commands::common::user_name(nix::unistd::getuid().as_raw());

    // §A-7: the id is in sacct the moment sbatch returns (submitit polls at once; a missing
    // id is UNKNOWN = not done), with `-j` and without -S.
    let quick = sbatch(&c, "exit 3");
    let (code, out, err) = run(&c, "sacct", &["-o", "JobID,State,NodeList", "--parsable2", "-j", &quick.to_string()]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("JobID|State|NodeList"));
    let first = lines.next().expect("a row for the job");
    assert!(first.starts_with(&format!("{quick}|")), "{out}");

    // It ends: FAILED with ExitCode 3:0, its batch step too (§A-6: `N.batch` rows, -X drops them).
    let long = sbatch(&c, "sleep 300");
    let t0 = Instant::now();
    let want = format!("{quick}|FAILED|3:0\n");
    loop {
        let (_, out, _) = run(&c, "sacct", &["-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", &quick.to_string()]);
        if out == want {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "job {quick} never accounted FAILED 3:0: {out:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, out, _) = run(&c, "sacct", &["-n", "-P", "-o", "JobID,JobName,State,ExitCode", "-j", &quick.to_string()]);
    assert_eq!(out, format!("{quick}|contract|FAILED|3:0\n{quick}.batch|batch|FAILED|3:0\n"));

    // -j repeated and comma lists select exactly the ids asked for (parsl raises KeyError on
    // any other id); -p ends rows with the delimiter, --delimiter changes it.
    let (q, l) = (quick.to_string(), long.to_string());
    let ids = |out: &str| -> Vec<String> { out.lines().map(|l| l.split('|').next().unwrap_or("").to_string()).collect() };
    let (_, a, _) = run(&c, "sacct", &["-X", "-n", "-P", "-o", "JobID", "-j", &q, "-j", &l]);
    let (_, b, _) = run(&c, "sacct", &["-X", "-n", "-P", "-o", "JobID", &format!("--jobs={q},{l}")]);
    assert_eq!(ids(&a), vec![q.clone(), l.clone()]);
    assert_eq!(a, b);
    let (_, out, _) = run(&c, "sacct", &["-X", "-p", "-o", "JobID,JobName", "-j", &q]);
    assert_eq!(out, format!("JobID|JobName|\n{q}|contract|\n"));
    let (_, out, _) = run(&c, "sacct", &["-X", "-n", "-P", "--delimiter", "\x1f", "-o", "JobID,JobName", "-j", &q]);
    assert_eq!(out, format!("{q}\x1fcontract\n"));

    // Unknown ids: exit 0, no rows.
    let (code, out, _) = run(&c, "sacct", &["-X", "-n", "-P", "-j", "999999"]);
    assert_eq!((code, out.as_str()), (0, ""));

    // Without -j: since midnight, own jobs; the fixed-width default shows `CANCELLED by <uid>`
    // cut to `CANCELLED+` (§A-5, §A-6).
    let (code, _, err) = run(&c, "scancel", &[&l]);
    assert_eq!(code, 0, "{err}");
    let t0 = Instant::now();
    loop {
        let (_, out, _) = run(&c, "sacct", &["-X", "-n"]);
        let row = out.lines().find(|r| r.starts_with(&format!("{l} "))).unwrap_or("").to_string();
        if row.contains("CANCELLED+") {
            assert!(out.lines().any(|r| r.starts_with(&format!("{q} "))), "{out}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no CANCELLED row for {l}: {out:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let uid = nix::unistd::getuid().as_raw();
    let (_, out, _) = run(&c, "sacct", &["-X", "-n", "-P", "-o", "State", "-j", &l]);
    assert_eq!(out, format!("CANCELLED by {uid}\n"));

    // §A-20: snakemake's account probe, run without a shell.
    let (code, out, err) = run(&c, "sacct", &["-nu", &me, "-o", "Account%256", "|", "tail", "-1"]);
    assert_eq!((code, out.as_str(), err.as_str()), (1, "", "sacct: invalid option -- '1'\n"));
}
