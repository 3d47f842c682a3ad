//! The Prometheus exporters sites run against Flotilla: each exporter's exact command line
//! (compat-tests/goldens/accounting/EXPORTERS.md: vpenso/prometheus-slurm-exporter and
//! rivosinc/prometheus-slurm-exporter) runs against a local cluster with a running and a
//! pending job, and every line it prints must parse the way the exporter parses it (its Go
//! regular expressions and field splitting, reimplemented here by hand), so that no metric is
//! lost or zeroed. The same parsers first read real Slurm's output of those lines (the `exp_*`
//! goldens), which shows they accept what Slurm prints.
//!
//! Also `sdiag` as the controller fills it: the job counters count the submissions, and
//! `sdiag --reset` is refused to an ordinary user (Slurm's text and exit 255) and clears the
//! counters for root.
//!
//! vpenso's `sshare -n -P -o account,fairshare` and rivosinc's `sacctmgr show assoc ...` run
//! live on a cluster of the recording's phase 2 (multifactor, enforced accounting), with
//! accounts made by `sacctmgr` (`exporters_parse_flotilla_accounting`).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_settled;
use flotilla_compat_tests::{load_goldens_from, workspace_root};
use flotilla_proto::client::Client;
use flotilla_proto::{JobQuery, JobStateWire, Request, Response, Role};
use std::process::Command;
use std::time::{Duration, Instant};

/// vpenso nodes.go: the state prefixes it counts, in its order.
const NODE_STATES: &[&str] = &[
    "alloc", "comp", "down", "drain", "fail", "err", "idle", "maint", "mix", "res",
];

/// vpenso queue.go: the states it counts.
const QUEUE_STATES: &[&str] = &[
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "CANCELLED",
    "COMPLETING",
    "COMPLETED",
    "CONFIGURING",
    "FAILED",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
];

/// Go's `strconv.ParseFloat(s, 64)` for the decimal forms Slurm prints.
fn go_float(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .map_err(|_| format!("ParseFloat({s:?}) fails"))
}

/// Go's `strconv.ParseUint(s, 10, 64)`.
fn go_uint(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("ParseUint({s:?}) fails"))
}

fn lines(out: &str) -> impl Iterator<Item = &str> {
    out.split('\n').filter(|l| !l.is_empty())
}

/// nodes.go: `count,state` with a state one of [`NODE_STATES`] starts with (`^alloc`, ...).
fn vpenso_nodes(out: &str) -> Result<usize, String> {
    let mut n = 0;
    for l in lines(out).filter(|l| l.contains(',')) {
        let f: Vec<&str> = l.split(',').collect();
        go_float(f[0].trim())?;
        if !NODE_STATES.iter().any(|p| f[1].starts_with(p)) {
            return Err(format!(
                "node state {:?} matches none of the exporter's prefixes",
                f[1]
            ));
        }
        n += 1;
    }
    Ok(n)
}

/// node.go: `strings.Fields`: name, AllocMem, Memory, CPUsState a/i/o/t, StateLong.
fn vpenso_node(out: &str) -> Result<usize, String> {
    let mut n = 0;
    for l in lines(out) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 5 {
            return Err(format!(
                "line {l:?} has {} fields, node.go reads 5",
                f.len()
            ));
        }
        go_uint(f[1])?;
        go_uint(f[2])?;
        let cpu: Vec<&str> = f[3].split('/').collect();
        if cpu.len() != 4 {
            return Err(format!("CPUsState {:?} is not a/i/o/t", f[3]));
        }
        for c in cpu {
            go_uint(c)?;
        }
        n += 1;
    }
    Ok(n)
}

/// cpus.go (`-o %C`): the whole output, `TrimSpace`d, split on `/` into alloc, idle,
/// other, total (`ParseFloat` each; several lines make a field such as `"64\n0"` fail).
fn vpenso_cpus(out: &str) -> Result<[f64; 4], String> {
    let f: Vec<&str> = out.trim().split('/').collect();
    if f.len() < 4 {
        return Err(format!("{out:?}: no alloc/idle/other/total"));
    }
    Ok([go_float(f[0])?, go_float(f[1])?, go_float(f[2])?, go_float(f[3])?])
}

/// partitions.go (`-o%R,%C`): per line `partition,alloc/idle/other/total`.
fn vpenso_partitions(out: &str) -> Result<usize, String> {
    let mut n = 0;
    for l in lines(out) {
        let (_, cpus) = l.split_once(',').ok_or_else(|| format!("{l:?}: no comma"))?;
        let f: Vec<&str> = cpus.split('/').collect();
        if f.len() != 4 {
            return Err(format!("{l:?}: no alloc/idle/other/total"));
        }
        for x in f {
            go_float(x)?;
        }
        n += 1;
    }
    Ok(n)
}

/// accounts.go / users.go: `id|name|state|cpus`, the state lowercased matching `^pending`,
/// `^running` or `^suspended` for the jobs it counts; returns (pending, running).
fn vpenso_accounts(out: &str) -> Result<(usize, usize), String> {
    let (mut pd, mut r) = (0, 0);
    for l in lines(out).filter(|l| l.contains('|')) {
        let f: Vec<&str> = l.split('|').collect();
        if f.len() < 4 {
            return Err(format!("{l:?}: fewer than 4 fields"));
        }
        go_float(f[3])?;
        let st = f[2].to_lowercase();
        if st.starts_with("pending") {
            pd += 1;
        } else if st.starts_with("running") {
            r += 1;
        }
    }
    Ok((pd, r))
}

/// queue.go: `id,STATE,reason` with a state among [`QUEUE_STATES`].
fn vpenso_queue(out: &str) -> Result<usize, String> {
    let mut n = 0;
    for l in lines(out).filter(|l| l.contains(',')) {
        let f: Vec<&str> = l.split(',').collect();
        if !QUEUE_STATES.contains(&f[1]) {
            return Err(format!("state {:?} is not one queue.go counts", f[1]));
        }
        n += 1;
    }
    Ok(n)
}

/// A named label matcher of scheduler.go.
type Pattern<'a> = (&'static str, &'a dyn Fn(&str) -> bool);

/// scheduler.go: the label before the first `:` matched with its patterns, the value
/// `ParseFloat(TrimSpace(...))`; returns the labels matched.
fn vpenso_sdiag(out: &str) -> Result<Vec<&'static str>, String> {
    // (name, matcher) for `^Server thread`, `^Agent queue`, `^DBD Agent`, `^[\s]+Last cycle$`,
    // `^[\s]+Mean cycle$`, `^[\s]+Cycles per`, `^[\s]+Depth Mean$`, and the three
    // `^[\s]+Total backfilled ...` patterns.
    let indented = |s: &str| s.starts_with(char::is_whitespace);
    let pats: [Pattern<'_>; 10] = [
        ("Server thread", &|s| s.starts_with("Server thread")),
        ("Agent queue", &|s| s.starts_with("Agent queue")),
        ("DBD Agent", &|s| s.starts_with("DBD Agent")),
        ("Last cycle", &|s| {
            indented(s) && s.trim_start() == "Last cycle"
        }),
        ("Mean cycle", &|s| {
            indented(s) && s.trim_start() == "Mean cycle"
        }),
        ("Cycles per", &|s| {
            indented(s) && s.trim_start().starts_with("Cycles per")
        }),
        ("Depth Mean", &|s| {
            indented(s) && s.trim_start() == "Depth Mean"
        }),
        ("since start", &|s| {
            indented(s)
                && s.trim_start()
                    .starts_with("Total backfilled jobs (since last slurm start)")
        }),
        ("since cycle", &|s| {
            indented(s)
                && s.trim_start()
                    .starts_with("Total backfilled jobs (since last stats cycle start)")
        }),
        ("het", &|s| {
            indented(s)
                && s.trim_start()
                    .starts_with("Total backfilled heterogeneous job components")
        }),
    ];
    let mut seen = Vec::new();
    for l in lines(out).filter(|l| l.contains(':')) {
        let mut parts = l.split(':');
        let label = parts.next().unwrap_or("");
        let value = parts.next().unwrap_or("");
        if let Some((name, _)) = pats.iter().find(|(_, m)| m(label)) {
            go_float(value.trim()).map_err(|e| format!("{name}: {e} in {l:?}"))?;
            seen.push(*name);
        }
    }
    Ok(seen)
}

/// sshare.go: lines not starting with two blanks holding `|`: account, `ParseFloat` of the
/// fair share (an empty one is 0 with an error the exporter ignores); returns the accounts.
fn vpenso_sshare(out: &str) -> Vec<String> {
    lines(out)
        .filter(|l| !l.starts_with("  ") && l.contains('|'))
        .map(|l| {
            l.split('|')
                .next()
                .unwrap_or("")
                .trim_matches(' ')
                .to_string()
        })
        .collect()
}

/// rivosinc utils.go `MemToFloat`: a float, else `^(?P<num>([0-9]*[.])?[0-9]+)(?P<memunit>G|M|T)$`.
fn mem_to_float(mem: &str) -> Result<f64, String> {
    if let Ok(v) = mem.parse::<f64>() {
        return Ok(v);
    }
    let err = || format!("mem string {mem:?} doesn't match the exporter's regex nor is a float");
    let (num, unit) = mem.split_at(mem.len().checked_sub(1).ok_or_else(err)?);
    let scale = match unit {
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return Err(err()),
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (num, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let ok = digits(int)
        && frac.is_none_or(|f| !f.is_empty() && digits(f))
        && (frac.is_some() || !int.is_empty());
    if !ok {
        return Err(err());
    }
    Ok(num.parse::<f64>().map_err(|_| err())? * scale)
}

/// rivosinc jobs.go fallback: one JSON object a line; pending reasons `^\((?P<reason>(.+))\)$`.
fn rivosinc_squeue(out: &str) -> Result<(usize, usize), String> {
    let (mut pd, mut n) = (0, 0);
    for l in lines(out.trim()) {
        let v: serde_json::Value = serde_json::from_str(l).map_err(|e| format!("{l:?}: {e}"))?;
        for k in ["a", "end_time", "state", "p", "u", "mem", "r"] {
            if !v[k].is_string() {
                return Err(format!("{l:?}: {k} is not a string"));
            }
        }
        if !v["id"].is_number() || !v["cpu"].is_i64() {
            return Err(format!("{l:?}: id or cpu is not a number"));
        }
        let end = v["end_time"].as_str().unwrap_or("");
        if end != "N/A" && !(end.len() == 19 && end.as_bytes()[10] == b'T') {
            return Err(format!("end_time {end:?} is neither a time nor N/A"));
        }
        mem_to_float(v["mem"].as_str().unwrap_or(""))?;
        if v["state"] == "PENDING" {
            let r = v["r"].as_str().unwrap_or("");
            if !(r.len() > 2 && r.starts_with('(') && r.ends_with(')')) {
                return Err(format!("pending reason {r:?} does not match ^\\((.+)\\)$"));
            }
            pd += 1;
        }
        n += 1;
    }
    Ok((n, pd))
}

/// rivosinc nodes.go fallback: one JSON object a line; `l`, `fmem` a float or `N/A`;
/// `cstate` four `/`-separated fields.
fn rivosinc_sinfo(out: &str) -> Result<usize, String> {
    let mut n = 0;
    for l in lines(out.trim_matches('\n')) {
        let v: serde_json::Value = serde_json::from_str(l).map_err(|e| format!("{l:?}: {e}"))?;
        for k in ["n", "s", "p", "cstate"] {
            if !v[k].is_string() {
                return Err(format!("{l:?}: {k} is not a string"));
            }
        }
        if !v["mem"].is_number() || !v["w"].is_number() {
            return Err(format!("{l:?}: mem or w is not a number"));
        }
        for k in ["l", "fmem"] {
            let s = v[k]
                .as_str()
                .ok_or_else(|| format!("{l:?}: {k} is not a string"))?;
            if s != "N/A" {
                go_float(s)?;
            }
        }
        if v["cstate"].as_str().unwrap_or("").split('/').count() != 4 {
            return Err(format!("{l:?}: cstate is not a/i/o/t"));
        }
        n += 1;
    }
    Ok(n)
}

/// rivosinc limits.go: `|`-separated rows of 6 fields, each limit empty or a float; returns the
/// account rows (empty User).
fn rivosinc_sacctmgr(out: &str) -> Result<usize, String> {
    let mut n = 0;
    for l in lines(out) {
        let f: Vec<&str> = l.split('|').collect();
        if f.len() != 6 {
            return Err(format!("{l:?}: {} fields, limits.go wants 6", f.len()));
        }
        if !f[0].is_empty() {
            continue;
        }
        for x in &f[2..] {
            if !x.is_empty() {
                go_float(x)?;
            }
        }
        n += 1;
    }
    Ok(n)
}

/// Real Slurm's outputs of the exporters' lines parse (the parsers accept what they must).
#[test]
fn parsers_accept_real_slurm_output() {
    let cases = load_goldens_from(&workspace_root().join("compat-tests/goldens/accounting"))
        .expect("goldens");
    let out = |name: &str| -> String {
        cases
            .iter()
            .find(|c| c.case == name)
            .unwrap_or_else(|| panic!("golden {name}"))
            .stdout
            .clone()
    };
    assert_eq!(vpenso_nodes(&out("exp_vpenso_nodes")), Ok(2));
    assert_eq!(vpenso_node(&out("exp_vpenso_node")), Ok(6));
    assert_eq!(vpenso_cpus(&out("exp_vpenso_cpus")), Ok([5.0, 251.0, 0.0, 256.0]));
    assert!(vpenso_cpus("1/63/0/64\n0/64/0/64\n").is_err(), "two lines are no metric");
    assert_eq!(vpenso_partitions(&out("exp_vpenso_partitions_sinfo")), Ok(2));
    assert_eq!(vpenso_accounts(&out("exp_vpenso_accounts")), Ok((4, 5)));
    assert_eq!(vpenso_accounts(&out("exp_vpenso_users")), Ok((4, 5)));
    assert_eq!(vpenso_queue(&out("exp_vpenso_queue")), Ok(9));
    let seen = vpenso_sdiag(&out("exp_vpenso_sdiag")).unwrap();
    for want in [
        "Server thread",
        "Agent queue",
        "DBD Agent",
        "Last cycle",
        "Mean cycle",
        "since start",
        "since cycle",
        "het",
    ] {
        assert!(seen.contains(&want), "{want} not in real sdiag: {seen:?}");
    }
    assert_eq!(
        vpenso_sshare(&out("exp_vpenso_sshare")),
        ["root", "root", "chem", "gj", "gpuq", "mj", "ms", "research"]
    );
    assert_eq!(rivosinc_squeue(&out("exp_rivosinc_squeue")), Ok((9, 4)));
    assert_eq!(rivosinc_sinfo(&out("exp_rivosinc_sinfo")), Ok(6));
    assert!(rivosinc_sacctmgr(&out("exp_rivosinc_sacctmgr")).unwrap() >= 5);
    // The parsers can fail.
    assert!(vpenso_nodes("1,weird\n").is_err());
    assert!(vpenso_sdiag("Server thread count:  three\n").is_err());
    assert!(rivosinc_squeue("{\"a\": \"x\", \"id\": 1, \"end_time\": \"N/A\", \"u\": \"u\", \"state\": \"PENDING\", \"p\": \"b\", \"cpu\": 1, \"mem\": \"1G\", \"r\": \"Priority\"}\n").is_err());
    assert_eq!(mem_to_float("1.5G"), Ok(1.5e9));
    assert!(
        mem_to_float("1.G").is_err() && mem_to_float("G").is_err() && mem_to_float("1K").is_err()
    );
    assert!(rivosinc_sacctmgr("a|b|c\n").is_err());
}

/// Runs `cmd` with bash as `user` (root or an ordinary one through runuser) against `c`.
fn bash(c: &LocalCluster, user: &str, cmd: &str) -> (i32, String, String) {
    let bins = flotilla_compat_tests::bin_dir();
    let mut argv: Vec<String> = Vec::new();
    if user != "root" {
        argv.extend(["runuser", "-u", user, "--"].map(String::from));
    }
    argv.extend(
        [
            "env",
            "-i",
            &format!("PATH={}:/usr/bin:/bin", bins.display()),
            "HOME=/",
            "TZ=UTC",
            "LANG=C.UTF-8",
        ]
        .map(String::from),
    );
    argv.extend(c.env().into_iter().map(|(k, v)| format!("{k}={v}")));
    argv.extend(["/bin/bash", "-c", cmd].map(String::from));
    let o = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir("/tmp")
        .output()
        .expect("bash runs");
    (
        o.status.code().unwrap_or(128),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The value after `label` in sdiag's text.
fn sdiag_value(text: &str, label: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn exporters_parse_flotilla() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("SKIPPED: runs sdiag --reset as an ordinary user (runuser): needs root");
        return;
    }
    flotilla_compat_tests::build_binaries();
    let conf = workspace_root().join("compat-tests/goldens/accounting/conf-phase1");
    let tmp = tempfile::tempdir().unwrap();
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(conf.join(f), tmp.path().join(f)).unwrap();
    }
    let c = LocalCluster::start(Some(tmp.path()));
    // An ordinary user reads the cluster's slurm.conf and reaches its socket (authz.rs does
    // the same).
    assert!(Command::new("chmod")
        .arg("755")
        .arg(c.dir())
        .status()
        .is_ok_and(|s| s.success()));
    let (rc, _, err) = bash(
        &c,
        "root",
        "sbatch --wrap 'sleep 300' >/dev/null && sbatch -H --wrap 'sleep 1' >/dev/null",
    );
    assert_eq!(rc, 0, "{err}");
    let socket = c.socket();
    let t0 = Instant::now();
    // The first job starts in a scheduling cycle: checked after each one (a barrier).
    wait_settled(&socket, Duration::from_secs(30)).expect("cycles");
    loop {
        let jobs = match Client::connect_unix(&socket, Role::Command)
            .map(|mut k| k.call(None, Request::QueryJobs(JobQuery::default())))
        {
            Ok(Ok(Response::Jobs(j))) => j,
            _ => Vec::new(),
        };
        if jobs.iter().any(|j| j.state == Some(JobStateWire::Running)) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no job runs: {jobs:?}"
        );
        c.wait_cycles(1);
    }
    let run = |cmd: &str| {
        let (rc, out, err) = bash(&c, "root", cmd);
        assert_eq!(rc, 0, "{cmd}: exit {rc}: {err}");
        out
    };
    // vpenso (argv as exec.Command passes it: "-o %D,%T" is one word).
    assert_eq!(
        vpenso_nodes(&run("sinfo -h '-o %D,%T'")).map(|n| n > 0),
        Ok(true)
    );
    assert_eq!(
        vpenso_node(&run(
            "sinfo -h -N -O NodeList,AllocMem,Memory,CPUsState,StateLong"
        ))
        .map(|n| n > 0),
        Ok(true)
    );
    // cpus.go reads one line: sinfo merges partitions and states a format does not print.
    let cpus = run("sinfo -h '-o %C'");
    assert_eq!(lines(&cpus).count(), 1, "{cpus}");
    let v = vpenso_cpus(&cpus).unwrap_or_else(|e| panic!("{e}: {cpus}"));
    assert!(v[0] >= 1.0 && v[3] == v[0] + v[1] + v[2], "alloc/idle/other/total: {v:?}");
    assert_eq!(vpenso_partitions(&run("sinfo -h -o%R,%C")).map(|n| n >= 2), Ok(true));
    assert_eq!(run("squeue -a -r -h -o%P --states=PENDING"), "batch\n");
    assert_eq!(
        vpenso_accounts(&run("squeue -a -r -h '-o %A|%a|%T|%C'")),
        Ok((1, 1))
    );
    assert_eq!(
        vpenso_accounts(&run("squeue -a -r -h '-o %A|%u|%T|%C'")),
        Ok((1, 1))
    );
    assert_eq!(
        vpenso_queue(&run("squeue -a -r -h '-o %A,%T,%r' --states=all")),
        Ok(2)
    );
    let gpus = run("sinfo -h '-o \"%n %G\"'");
    assert!(
        lines(&gpus).all(|l| l
            .trim_matches('"')
            .split_whitespace()
            .nth(1)
            .is_some_and(|g| g.starts_with("gpu:"))),
        "{gpus}"
    );
    let sdiag = run("sdiag");
    let seen = vpenso_sdiag(&sdiag).unwrap_or_else(|e| panic!("{e}\n{sdiag}"));
    for want in [
        "Server thread",
        "Agent queue",
        "DBD Agent",
        "Last cycle",
        "Mean cycle",
        "since start",
        "since cycle",
        "het",
    ] {
        assert!(seen.contains(&want), "{want} not in our sdiag:\n{sdiag}");
    }
    // rivosinc (cli fallback).
    let sq = run(
        r#"squeue --states=all -h -r -o '{"a": "%a", "id": %A, "end_time": "%e", "u": "%u", "state": "%T", "p": "%P", "cpu": %C, "mem": "%m", "array_id": "%K", "r": "%R"}'"#,
    );
    assert_eq!(rivosinc_squeue(&sq), Ok((2, 1)), "{sq}");
    let si = run(
        r#"sinfo -h -o '{"s": "%T", "mem": %m, "n": "%n", "l": "%O", "p": "%R", "fmem": "%e", "cstate": "%C", "w": %w}'"#,
    );
    assert_eq!(rivosinc_sinfo(&si).map(|n| n > 0), Ok(true), "{si}");

    // sdiag's counters are the controller's: two submissions, one start.
    assert_eq!(sdiag_value(&sdiag, "Jobs submitted:"), Some(2), "{sdiag}");
    assert_eq!(sdiag_value(&sdiag, "Jobs started:"), Some(1), "{sdiag}");
    assert_eq!(sdiag_value(&sdiag, "Jobs pending:"), Some(1), "{sdiag}");
    assert!(
        sdiag.contains("\tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:2 "),
        "{sdiag}"
    );
    assert!(sdiag.contains("\nFlotilla statistics\n"), "{sdiag}");
    // --reset: refused to an ordinary user, as Slurm; root's clears the counters.
    let (rc, out, err) = bash(&c, "nobody", "sdiag --reset");
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (
            255,
            "",
            "slurm_reset_statistics: Access/permission denied\n"
        )
    );
    assert_eq!(sdiag_value(&run("sdiag"), "Jobs submitted:"), Some(2));
    assert_eq!(run("sdiag --reset"), "Reset scheduling statistics\n");
    let after = run("sdiag");
    assert_eq!(sdiag_value(&after, "Jobs submitted:"), Some(0), "{after}");
    assert_eq!(sdiag_value(&after, "Jobs pending:"), Some(1), "{after}");
}

/// vpenso's `sshare -n -P -o account,fairshare` and rivosinc's `sacctmgr show assoc
/// format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit --noheader --parsable2`, live, on a
/// cluster of the recording's phase 2 (priority/multifactor, `AccountingStorageEnforce=
/// associations,limits,qos,safe`) whose accounting was made with `sacctmgr` as on the
/// reference: every account appears in the exporters' metrics and every limit parses.
#[test]
fn exporters_parse_flotilla_accounting() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("SKIPPED: the local cluster's daemons run as root (production mode): needs root");
        return;
    }
    flotilla_compat_tests::build_binaries();
    let conf = workspace_root().join("compat-tests/goldens/accounting/conf-phase2");
    let tmp = tempfile::tempdir().unwrap();
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(conf.join(f), tmp.path().join(f)).unwrap();
    }
    let c = LocalCluster::start(Some(tmp.path()));
    let run = |cmd: &str| {
        let (rc, out, err) = bash(&c, "root", cmd);
        assert_eq!(rc, 0, "{cmd}: exit {rc}: {err}");
        out
    };
    run("sacctmgr -i add account research Description=research Organization=oracle >/dev/null");
    run("sacctmgr -i add account chem Description=chem Organization=oracle >/dev/null");
    run("sacctmgr -i add user alice Account=research GrpJobs=4 GrpSubmit=8 GrpTRES=cpu=64,mem=500G >/dev/null");
    run("sacctmgr -i add user bob Account=chem >/dev/null");
    wait_settled(&c.socket(), Duration::from_secs(30)).expect("cycles");

    let share = run("sshare -n -P -o account,fairshare");
    let accounts = vpenso_sshare(&share);
    for want in ["root", "research", "chem"] {
        assert!(accounts.iter().any(|a| a == want), "{want} not among sshare's accounts {accounts:?}:\n{share}");
    }
    // Every fair share the exporter reads parses (ParseFloat), or is empty as Slurm's are for
    // accounts.
    for l in lines(&share).filter(|l| !l.starts_with("  ")) {
        let v = l.split('|').nth(1).unwrap_or("");
        assert!(v.is_empty() || go_float(v).is_ok(), "{l:?}");
    }
    let limits = run("sacctmgr show assoc format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit --noheader --parsable2");
    let rows = rivosinc_sacctmgr(&limits).unwrap_or_else(|e| panic!("{e}\n{limits}"));
    assert!(rows >= 3, "account rows root, research, chem:\n{limits}");
    let alice: Vec<&str> = limits.lines().find(|l| l.starts_with("alice|research|")).unwrap_or_else(|| panic!("{limits}")).split('|').collect();
    assert_eq!((alice[4], alice[5]), ("4", "8"), "alice's GrpJobs and GrpSubmit:\n{limits}");
}
