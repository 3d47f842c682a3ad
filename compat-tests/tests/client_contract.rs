//! The client contract (`../shared/clients/CONTRACT.md`): every command line the real client
//! libraries run (§B) and the top-20 behaviours they depend on (§A), each checked against
//! Flotilla's binaries on a local cluster (the same code as `flotilla dev up`, OS-chosen ports,
//! `--cgroup none`).
//!
//! Test names: `aNN_*` is behaviour §A-NN; `b1_*` … `b6_*` are the command lines of table
//! §B1 (sbatch) … §B6 (sinfo/scontrol). Behaviours that need `sacct` or `srun` are written
//! against the contract and print `SKIPPED: <reason>` only while that binary is not built
//! (other branches add them); they turn on by themselves when it lands.
//!
//! The binaries are built by the first test that needs them (`cargo build --bins -p
//! flotilla-commands -p flotilla-slurmctld -p flotilla-slurmd`) in this test's target dir.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_until;

/// What a command line printed.
#[derive(Debug)]
struct Out {
    code: i32,
    out: String,
    err: String,
}

/// A local cluster, a work directory, and Flotilla's binaries first on `PATH`.
struct Env {
    c: LocalCluster,
    work: tempfile::TempDir,
    bin: PathBuf,
}

impl Env {
    fn new() -> Env {
        flotilla_compat_tests::build_binaries();
        // A requeued job may start again at once (Slurm holds it back 121 s).
        let c = LocalCluster::start_with(None, |o| o.ctld_args = vec!["--requeue-holdoff".into(), "0".into()]);
        let work = tempfile::Builder::new().prefix("flt-contract").tempdir_in("/tmp").unwrap();
        Env { c, work, bin: flotilla_compat_tests::bin_dir() }
    }

    fn work(&self) -> &Path {
        self.work.path()
    }

    /// True when `name` is built (sacct and srun come from other branches).
    fn has(&self, name: &str) -> bool {
        self.bin.join(name).is_file()
    }

    /// Prints `SKIPPED: ...` and returns true when `name` is not built yet.
    fn skip_without(&self, name: &str, what: &str) -> bool {
        if self.has(name) {
            return false;
        }
        println!("SKIPPED: {what}: `{name}` is not built yet (it lands with its own branch)");
        true
    }

    /// `bash -c cmd` in the work dir with PATH = our binaries first, SLURM_CONF, TZ=UTC, and
    /// `extra` variables; nothing else inherited but HOME/USER/LOGNAME.
    fn sh_env(&self, cmd: &str, extra: &[(&str, &str)], stdin: Option<&str>) -> Out {
        let mut c = Command::new("/bin/bash");
        c.arg("-c").arg(cmd).env_clear();
        for k in ["HOME", "USER", "LOGNAME"] {
            if let Some(v) = std::env::var_os(k) {
                c.env(k, v);
            }
        }
        c.env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display()))
            .env("SLURM_CONF", self.c.slurm_conf())
            .env("TZ", "UTC")
            .envs(extra.iter().copied())
            .current_dir(self.work())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = c.spawn().expect("bash");
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use std::io::Write;
            let _ = pipe.write_all(input.as_bytes());
        }
        let o = child.wait_with_output().expect("bash runs");
        Out {
            code: o.status.code().unwrap_or(128),
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    fn sh(&self, cmd: &str) -> Out {
        self.sh_env(cmd, &[], None)
    }

    /// Runs `cmd`, asserting exit 0; returns stdout.
    fn ok(&self, cmd: &str) -> String {
        let o = self.sh(cmd);
        assert_eq!(o.code, 0, "`{cmd}` failed: {o:?}");
        o.out
    }

    /// `sbatch --parsable ARGS` → the job id.
    fn submit(&self, args: &str) -> u64 {
        let out = self.ok(&format!("sbatch --parsable {args}"));
        out.trim().parse().unwrap_or_else(|_| panic!("sbatch --parsable printed {out:?}"))
    }

    /// The long state of `id` from `squeue -t all` (empty when squeue does not list it).
    fn state(&self, id: &str) -> String {
        self.sh(&format!("squeue -h -t all -j {id} -o %T")).out.trim().to_string()
    }

    /// Waits until `id` is in one of `states` (squeue -t all), at most `secs`.
    fn wait_state(&self, id: &str, states: &[&str], secs: u64) -> String {
        let t = Instant::now();
        loop {
            let s = self.state(id);
            if states.iter().any(|w| s == *w) {
                return s;
            }
            assert!(t.elapsed() < Duration::from_secs(secs), "job {id}: state {s:?}, waited for {states:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until `path` (relative to the work dir) exists and is non-empty.
    fn wait_file(&self, path: &str, secs: u64) -> String {
        let p = self.work().join(path);
        let t = Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(&p) {
                if !s.is_empty() {
                    return s;
                }
            }
            assert!(t.elapsed() < Duration::from_secs(secs), "{} did not appear", p.display());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work().join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// Seconds since the epoch, now.
fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// `(pid, parent pid)` of the processes `slurmd --stepd <dir>/spool/...` of the cluster in
/// `dir`: its job supervisors, and a job's own process between its supervisor's fork and the
/// exec of its script (same command line, its parent a supervisor).
fn stepd_processes(dir: &Path) -> Vec<(i32, i32)> {
    let spool = dir.join("spool").to_string_lossy().into_owned();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let args: Vec<String> = cmd.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if args.get(1).map(String::as_str) != Some("--stepd") || !args.get(2).is_some_and(|d| d.starts_with(&spool)) {
            continue;
        }
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let ppid = status.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|p| p.trim().parse().ok()).unwrap_or(0);
        v.push((pid, ppid));
    }
    v
}

fn user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| nix::unistd::getuid().to_string(), |u| u.name)
}

fn first_digits(s: &str) -> Option<&str> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let rest = &s[start..];
    Some(&rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())])
}

// ---------------------------------------------------------------------------------------------
// §A. Top-20 behaviours
// ---------------------------------------------------------------------------------------------

/// §A-1: the success line satisfies every client's parser.
#[test]
fn a01_sbatch_success_line_parses_for_every_client() {
    let e = Env::new();
    e.write("job.sh", "#!/bin/sh\ntrue\n");
    let o = e.sh("sbatch job.sh");
    assert_eq!(o.code, 0, "{o:?}");
    let line = o.out.strip_suffix('\n').expect("one line ending in a newline");
    assert!(!line.contains('\n'), "{:?}", o.out);
    let id = line.strip_prefix("Submitted batch job ").expect("the success line");
    assert!(!id.is_empty() && id.chars().all(|c| c.is_ascii_digit()), "{line}");
    // PSL re.match at line start; SS split(" ")[3]; SPY/TOIL/PSIJ last token; DJQ/IPP first digits.
    assert_eq!(line.split(' ').nth(3), Some(id));
    assert_eq!(line.split_whitespace().last(), Some(id));
    assert_eq!(first_digits(&o.out), Some(id));
    assert!(o.out.starts_with("Submitted batch"));
}

/// §A-2: `--parsable` prints the bare id.
#[test]
fn a02_sbatch_parsable_is_the_bare_id() {
    let e = Env::new();
    let o = e.sh("sbatch --parsable --wrap true");
    assert_eq!(o.code, 0, "{o:?}");
    let id = o.out.strip_suffix('\n').unwrap();
    assert!(id.chars().all(|c| c.is_ascii_digit()) && !id.is_empty(), "{:?}", o.out);
    // SMK split(";")[0], SS split(":")[0]: both the whole id.
    assert_eq!(o.out.trim().split(';').next(), Some(id));
    assert_eq!(o.out.trim().split(':').next(), Some(id));
}

/// §A-3: the script is captured at submission, from a file, stdin, `/dev/stdin` and `--wrap`;
/// a script without `#!` is refused.
#[test]
fn a03_script_captured_at_submit_time() {
    let e = Env::new();
    // A file deleted right after sbatch returns (dask-jobqueue).
    let p = e.write("tmp.sh", "#!/bin/sh\necho from-file\n");
    let id1 = e.submit("-o f.out tmp.sh");
    std::fs::remove_file(&p).unwrap();
    // stdin with no argument (simple_slurm heredoc), /dev/stdin (snakemake), --wrap.
    let o = e.sh_env("sbatch -o s.out", &[], Some("#!/bin/sh\necho from-stdin\n"));
    assert_eq!(o.code, 0, "{o:?}");
    let o2 = e.sh_env("sbatch --parsable -o d.out /dev/stdin", &[], Some("#!/bin/sh\necho from-dev-stdin\n"));
    assert_eq!(o2.code, 0, "{o2:?}");
    let id4 = e.submit("-o w.out --wrap='echo from-wrap'");
    assert_eq!(e.wait_file("f.out", 30), "from-file\n");
    assert_eq!(e.wait_file("s.out", 30), "from-stdin\n");
    assert_eq!(e.wait_file("d.out", 30), "from-dev-stdin\n");
    assert_eq!(e.wait_file("w.out", 30), "from-wrap\n");
    let _ = (id1, id4);
    // No #! line.
    e.write("bad.sh", "echo no shebang\n");
    let o = e.sh("sbatch bad.sh");
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.err.starts_with("sbatch: error: This does not look like a batch script."),
        "{o:?}"
    );
    assert_eq!(o.out, "");
}

/// §A-4: `#SBATCH` tokenizing: quotes, padding, comments, indented and late directives ignored,
/// command line wins, unknown option → 255.
#[test]
fn a04_sbatch_directive_parsing() {
    let e = Env::new();
    e.write(
        "d.sh",
        "#!/bin/sh\n\
         #SBATCH --job-name=\"quoted name\"\n\
         #SBATCH --time          00:07:00   # a comment\n\
         #SBATCH -o d.out --comment 'two words'\n\
         #SBATCH --export=PATH,HOME,\n\
         \x20 #SBATCH --job-name=indented\n\
         echo body\n\
         #SBATCH --job-name=late\n",
    );
    let id = e.submit("-H d.sh");
    let o = e.ok(&format!("squeue -h -j {id} -o '%j|%l|%k'"));
    assert_eq!(o, "quoted name|7:00|two words\n");
    let id2 = e.submit("-H -J cli d.sh");
    assert_eq!(e.ok(&format!("squeue -h -j {id2} -o %j")), "cli\n");
    e.write("bad.sh", "#!/bin/sh\n#SBATCH --x\ntrue\n");
    let o = e.sh("sbatch bad.sh");
    assert_eq!(o.code, 255, "{o:?}");
    assert!(o.err.starts_with("sbatch: unrecognized option '--x'\n"), "{o:?}");
    assert!(o.err.contains("Try \"sbatch --help\" for more information"), "{o:?}");
}

/// §A-5: long and compact state names.
#[test]
fn a05_state_vocabulary() {
    let e = Env::new();
    let held = e.submit("-H --wrap true");
    assert_eq!(e.ok(&format!("squeue -h -j {held} -o '%T %t'")), "PENDING PD\n");
    let run = e.submit("--wrap 'sleep 300'");
    e.wait_state(&run.to_string(), &["RUNNING"], 30);
    assert_eq!(e.ok(&format!("squeue -h -j {run} -o '%T %t'")), "RUNNING R\n");
    let ok = e.submit("--wrap true");
    let bad = e.submit("--wrap 'exit 3'");
    e.wait_state(&ok.to_string(), &["COMPLETED"], 30);
    e.wait_state(&bad.to_string(), &["FAILED"], 30);
    e.ok(&format!("scancel {run}"));
    e.wait_state(&run.to_string(), &["CANCELLED"], 30);
    let o = e.ok(&format!("squeue -h -t all -j {ok},{bad},{run} -o '%i %T %t' --sort=i"));
    assert_eq!(o, format!("{run} CANCELLED CA\n{ok} COMPLETED CD\n{bad} FAILED F\n"));
}

/// §A-6: sacct basics (needs sacct).
#[test]
fn a06_sacct_basics() {
    let e = Env::new();
    if e.skip_without("sacct", "§A-6 sacct basics") {
        return;
    }
    let a = e.submit("--wrap true");
    let b = e.submit("--wrap 'exit 2'");
    e.wait_state(&a.to_string(), &["COMPLETED"], 30);
    e.wait_state(&b.to_string(), &["FAILED"], 30);
    // -j repeated and comma lists; -X drops steps; -P no trailing |; -p trailing |; -n no header.
    let o = e.ok(&format!("sacct -X -P -j {a} -j {b} -o JobID,State,ExitCode"));
    assert_eq!(o, format!("JobID|State|ExitCode\n{a}|COMPLETED|0:0\n{b}|FAILED|2:0\n"));
    let o = e.ok(&format!("sacct -X -p -n -j {a},{b} -o JobID,State"));
    assert_eq!(o, format!("{a}|COMPLETED|\n{b}|FAILED|\n"));
    let o = e.ok(&format!("sacct -X -P -n --delimiter=, -j {a} -o JobID,State"));
    assert_eq!(o, format!("{a},COMPLETED\n"));
    // Step rows without -X.
    let o = e.ok(&format!("sacct -P -n -j {a} -o JobID"));
    assert!(o.lines().any(|l| l == format!("{a}.batch")), "{o}");
    // Unknown ids: exit 0, no rows.
    assert_eq!(e.ok("sacct -X -P -n -j 999999 -o JobID"), "");
    // Fixed widths and `+` truncation; field%N widens.
    let c = e.submit("--wrap 'sleep 300'");
    e.wait_state(&c.to_string(), &["RUNNING"], 30);
    e.ok(&format!("scancel {c}"));
    e.wait_state(&c.to_string(), &["CANCELLED"], 30);
    let o = e.ok(&format!("sacct -X -n -j {c} -o State"));
    assert_eq!(o.trim(), "CANCELLED+", "{o:?}");
    let o = e.ok(&format!("sacct -X -n -j {c} -o state%20"));
    assert!(o.trim().starts_with("CANCELLED by "), "{o:?}");
}

/// §A-7: a job is in sacct from the moment sbatch returns, and stays after it ends.
#[test]
fn a07_sacct_sees_jobs_at_once_and_keeps_them() {
    let e = Env::new();
    if e.skip_without("sacct", "§A-7 sacct visibility") {
        return;
    }
    let id = e.submit("-H --wrap true");
    let o = e.ok(&format!("sacct -o JobID,State,NodeList --parsable2 -j {id}"));
    assert!(o.lines().any(|l| l.starts_with(&format!("{id}|PENDING|"))), "{o}");
    e.ok(&format!("scontrol release {id}"));
    e.wait_state(&id.to_string(), &["COMPLETED"], 30);
    let o = e.ok(&format!("sacct -X -P -n -j {id} -o JobID,State"));
    assert_eq!(o, format!("{id}|COMPLETED\n"));
}

/// §A-8: `squeue -j` / `scontrol show job` error semantics.
#[test]
fn a08_squeue_unknown_job_semantics() {
    let e = Env::new();
    let o = e.sh("squeue -j 999999");
    assert_eq!((o.code, o.out.as_str()), (1, ""), "{o:?}");
    assert_eq!(o.err, "slurm_load_jobs error: Invalid job id specified\n");
    let id = e.submit("-H --wrap true");
    let o = e.sh(&format!("squeue -h -j {id},999999 -o %i"));
    assert_eq!((o.code, o.out.as_str()), (0, format!("{id}\n").as_str()), "{o:?}");
    let o = e.sh("scontrol show job 999999");
    assert_eq!((o.code, o.out.as_str()), (1, ""), "{o:?}");
    assert_eq!(o.err, "slurm_load_jobs error: Invalid job id specified\n");
    // CRW's liveness check: exit code of `squeue -j ID`.
    assert_eq!(e.sh(&format!("squeue -j {id}")).code, 0);
}

/// §A-9: the `-o` format engine with the clients' templates.
#[test]
fn a09_squeue_format_engine() {
    let e = Env::new();
    let id = e.submit("-H -J nm --wrap true");
    let u = user();
    for (fmt, want) in [
        ("'%i %t'", format!("JOBID ST\n{id} PD\n")),
        ("'%i|%T'", format!("JOBID|STATE\n{id}|PENDING\n")),
        ("'%i;%j;%t;%T;%r'", format!("JOBID;NAME;ST;STATE;REASON\n{id};nm;PD;PENDING;JobHeldUser\n")),
        ("%A,%t", format!("JOBID,ST\n{id},PD\n")),
        ("'%.10i|%4j|%u'", format!("     JOBID|NAME|USER\n{id:>10}|nm  |{u}\n")),
        ("'\"%i\",\"%j\",\"%t\"'", format!("\"JOBID\",\"NAME\",\"ST\"\n\"{id}\",\"nm\",\"PD\"\n")),
    ] {
        assert_eq!(e.ok(&format!("squeue -j {id} -o {fmt}")), want, "{fmt}");
    }
    // Glued short option (MLF) and -h.
    assert_eq!(e.ok(&format!("squeue --state=all --job={id} -o%A,%t")), format!("JOBID,ST\n{id},PD\n"));
    assert_eq!(e.ok(&format!("squeue -h -j {id} -o '%T %B'")).split_whitespace().next(), Some("PENDING"));
}

/// §A-10: default state filter applies with `-j`; `-t all` shows finished jobs; `-t PD,R`.
#[test]
fn a10_squeue_state_filter_and_retention() {
    let e = Env::new();
    let done = e.submit("--wrap true");
    e.wait_state(&done.to_string(), &["COMPLETED"], 30);
    let o = e.sh(&format!("squeue -h -j {done}"));
    assert_eq!((o.code, o.out.as_str()), (0, ""), "{o:?}");
    assert_eq!(e.ok(&format!("squeue -h -t all -j {done} -o %T")), "COMPLETED\n");
    assert_eq!(e.ok(&format!("squeue --state=all --job={done} -o%A,%t")), format!("JOBID,ST\n{done},CD\n"));
    let held = e.submit("-H --wrap true");
    let o = e.ok(&format!("squeue -h -t PD,R -j {held},{done} -o %i"));
    assert_eq!(o, format!("{held}\n"));
}

/// §A-11: `srun` inside an allocation (needs srun).
#[test]
fn a11_srun_inside_allocation() {
    let e = Env::new();
    if e.skip_without("srun", "§A-11 srun inside an allocation") {
        return;
    }
    e.write(
        "s.sh",
        "#!/bin/bash\n#SBATCH -n 2 -o s.out\n\
         env -i PATH=\"$PATH\" SLURM_JOB_ID=$SLURM_JOB_ID FLOTILLA_CONF=$FLOTILLA_CONF srun -n1 echo alone\n\
         srun -l bash -c 'echo $SLURM_PROCID/$SLURM_NTASKS' | sort\n",
    );
    let id = e.submit("s.sh");
    e.wait_state(&id.to_string(), &["COMPLETED", "FAILED"], 60);
    assert_eq!(e.wait_file("s.out", 5), "alone\n0: 0/2\n1: 1/2\n");
}

/// §A-12: commands inside a job find the controller with every `SLURM_*` variable removed
/// (snakemake's jobstep does this): the node daemon sets `FLOTILLA_CONF`.
#[test]
fn a12_commands_work_without_slurm_variables() {
    let e = Env::new();
    e.write(
        "nos.sh",
        "#!/bin/bash\n\
         jid=$SLURM_JOB_ID\n\
         for v in $(compgen -e | grep '^SLURM_'); do unset $v; done\n\
         env | grep -c '^SLURM_' || true\n\
         squeue -h -j $jid -o '%i %T'\n\
         scontrol show config | grep -E '^MinJobAge'\n",
    );
    let id = e.submit("-o nos.out nos.sh");
    e.wait_state(&id.to_string(), &["COMPLETED", "FAILED"], 30);
    assert_eq!(
        e.wait_file("nos.out", 5),
        format!("0\n{id} RUNNING\nMinJobAge               = 300 sec\n")
    );
}

/// §A-13: the batch environment.
#[test]
fn a13_batch_environment() {
    let e = Env::new();
    let id = e.submit("-n 2 -c 2 -J envjob -o env.out --wrap 'env | sort'");
    e.wait_state(&id.to_string(), &["COMPLETED"], 30);
    let out = e.wait_file("env.out", 5);
    let get = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} missing from the batch environment:\n{out}"))
            .to_string()
    };
    let ids = id.to_string();
    assert_eq!(get("SLURM_JOB_ID"), ids);
    assert_eq!(get("SLURM_JOBID"), ids);
    assert_eq!(get("SLURM_JOB_NAME"), "envjob");
    assert_eq!(get("SLURM_NTASKS"), "2");
    assert_eq!(get("SLURM_NPROCS"), "2");
    assert_eq!(get("SLURM_CPUS_PER_TASK"), "2");
    for k in ["SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"] {
        assert_eq!(get(k), "0", "{k}");
    }
    let nodes = e.c.nodes().to_vec();
    let nl = get("SLURM_JOB_NODELIST");
    assert!(nodes.contains(&nl), "{nl} is not a node name ({nodes:?})");
    assert_eq!(get("SLURM_NODELIST"), nl);
    assert_eq!(get("SLURMD_NODENAME"), nl);
    assert_eq!(get("SLURM_JOB_NUM_NODES"), "1");
    assert_eq!(get("SLURM_NNODES"), "1");
    assert_eq!(get("SLURM_SUBMIT_DIR"), e.work().to_string_lossy());
    for k in ["SLURM_CPUS_ON_NODE", "SLURM_TASKS_PER_NODE", "SLURM_SUBMIT_HOST", "SLURM_CLUSTER_NAME", "SLURM_JOB_PARTITION"] {
        assert!(!get(k).is_empty(), "{k}");
    }
    assert_eq!(get("FLOTILLA_CONF"), e.c.slurm_conf().to_string_lossy());
}

/// §A-13 / §B1 (OOD's `SBATCH_EXPORT=NONE`, MLF's `--export=A,B,`): `--export` decides which
/// submitted variables the job sees; `SLURM_*` always pass.
#[test]
fn a13_export_rules() {
    let e = Env::new();
    let show = "--wrap 'echo ${FOO:-unset} ${BAR:-unset} ${SLURM_SUBMIT_DIR:+dir} ${HOME:+home}'";
    let extra = [("FOO", "1"), ("BAR", "2")];
    let run = |args: &str, env: &[(&str, &str)], out: &str| -> String {
        let o = e.sh_env(&format!("sbatch --parsable -o {out} {args} {show}"), env, None);
        assert_eq!(o.code, 0, "{o:?}");
        e.wait_file(out, 30)
    };
    assert_eq!(run("", &extra, "all.out"), "1 2 dir home\n");
    assert_eq!(run("--export=NONE", &extra, "none.out"), "unset unset dir home\n");
    let mut with_sbatch_export = extra.to_vec();
    with_sbatch_export.push(("SBATCH_EXPORT", "NONE"));
    assert_eq!(run("", &with_sbatch_export, "sbx.out"), "unset unset dir home\n");
    assert_eq!(run("--export=FOO,", &extra, "list.out"), "1 unset dir home\n");
    assert_eq!(run("--export=ALL,BAR=9", &extra, "allset.out"), "1 9 dir home\n");
}

/// §A-14: output files: default name, patterns, stderr into stdout, append, `/dev/null`.
#[test]
fn a14_output_files() {
    let e = Env::new();
    let id = e.submit("--wrap 'echo out; echo err >&2'");
    assert_eq!(e.wait_file(&format!("slurm-{id}.out"), 30), "out\nerr\n");
    std::fs::create_dir_all(e.work().join("sub")).unwrap();
    let id2 = e.submit("-D sub -J pat -o '%x-%j-%%.o' -e '%J.e' --wrap 'echo o; echo e >&2'");
    assert_eq!(e.wait_file(&format!("sub/pat-{id2}-%.o"), 30), "o\n");
    assert_eq!(e.wait_file(&format!("sub/{id2}.e"), 30), "e\n");
    e.write("app.log", "before\n");
    let id3 = e.submit("--open-mode=append -o app.log --wrap 'echo after'");
    e.wait_state(&id3.to_string(), &["COMPLETED"], 30);
    assert_eq!(e.wait_file("app.log", 5), "before\nafter\n");
    let id4 = e.submit("-o /dev/null -e /dev/null --wrap 'echo x; echo y >&2'");
    assert_eq!(e.wait_state(&id4.to_string(), &["COMPLETED", "FAILED"], 30), "COMPLETED");
}

/// §A-14 / §G-1, the fast-scheduler guard: a job whose output directory (holding `%j`) is
/// created only after sbatch returned (submitit, hydra) waits for it instead of failing.
#[test]
fn a14_output_directory_created_after_submission_is_waited_for() {
    let e = Env::new();
    let id = e.submit("-o 'logs/%j/%j_0_log.out' --wrap 'echo made it'");
    // The job's process is forked by its supervisor and opens the output files before it runs
    // the script: until then it is a second `slurmd --stepd` under the first. Seen there with
    // the directory missing, it is waiting for it (or about to).
    wait_until("the job's process to wait for its output directory", Duration::from_secs(30), || {
        let stepds = stepd_processes(e.c.dir());
        stepds.iter().any(|(_, parent)| stepds.iter().any(|(p, _)| p == parent))
    }, || format!("job {id}: {}", e.state(&id.to_string())));
    std::fs::create_dir_all(e.work().join(format!("logs/{id}"))).unwrap();
    assert_eq!(e.wait_file(&format!("logs/{id}/{id}_0_log.out"), 30), "made it\n");
    assert_eq!(e.wait_state(&id.to_string(), &["COMPLETED", "FAILED"], 30), "COMPLETED");
}

/// §A-14: a directory that never appears fails the job (as Slurm fails it), after the bounded
/// wait.
#[test]
fn a14_output_directory_that_never_appears_fails_the_job() {
    let e = Env::new();
    let id = e.submit("-o 'nowhere/%j.out' --wrap 'touch ran'");
    assert_eq!(e.wait_state(&id.to_string(), &["COMPLETED", "FAILED"], 60), "FAILED");
    assert!(!e.work().join("ran").exists(), "the script must not run");
}

/// §A-15: scancel semantics.
#[test]
fn a15_scancel_semantics() {
    let e = Env::new();
    // Unknown/finished ids without --signal: exit 0, silent.
    let o = e.sh("scancel 999999");
    assert_eq!((o.code, o.out.as_str(), o.err.as_str()), (0, "", ""), "{o:?}");
    // With --signal: exit 1 and the message; -Q hides the message but keeps the status.
    let o = e.sh("scancel --signal=TERM 999999");
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.err, "scancel: error: Kill job error on job id 999999: Invalid job id specified\n");
    let o = e.sh("scancel -Q -s TERM 999999");
    assert_eq!((o.code, o.err.as_str()), (1, ""), "{o:?}");
    // Options after ids, names with and without SIG, numbers.
    let id = e.submit("--wrap 'trap \"\" USR2 INT; sleep 300'");
    e.wait_state(&id.to_string(), &["RUNNING"], 30);
    e.ok(&format!("scancel {id} --signal SIGUSR2"));
    e.ok(&format!("scancel {id} --signal USR2"));
    e.ok(&format!("scancel -s 2 {id}"));
    assert_eq!(e.state(&id.to_string()), "RUNNING");
    // Several ids in one call, --me.
    let a = e.submit("-H --wrap true");
    let b = e.submit("-H --wrap true");
    e.ok(&format!("scancel {a} {b}"));
    e.wait_state(&a.to_string(), &["CANCELLED"], 30);
    e.wait_state(&b.to_string(), &["CANCELLED"], 30);
    e.ok("scancel --me");
    e.wait_state(&id.to_string(), &["CANCELLED"], 30);
}

/// §A-16: job arrays.
#[test]
fn a16_job_arrays() {
    let e = Env::new();
    let id = e.submit("--array=0-2%3 -o 'arr_%A_%a.out' --wrap 'echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID'");
    for t in 0..3 {
        assert_eq!(e.wait_file(&format!("arr_{id}_{t}.out"), 30), format!("{id} {t}\n"));
    }
    // Pending tasks fold as A_[..%1].
    let h = e.submit("-H --array=1-3%1 --wrap true");
    assert_eq!(e.ok(&format!("squeue -h -j {h} -o %i")), format!("{h}_[1-3%1]\n"));
    // Tasks A_i are addressable.
    let o = e.sh(&format!("squeue -h -t all -j {id}_1 -o %i"));
    assert_eq!(o.out, format!("{id}_1\n"), "{o:?}");
}

/// §A-17: time formats accepted; `--signal=B:SIG@secs` reaches the batch shell.
#[test]
fn a17_time_limits_and_signal() {
    let e = Env::new();
    for (t, want) in [
        ("5", "5:00"),
        ("00:10:00", "10:00"),
        ("0:3600", "1:00:00"),
        // Seconds round up to a minute (Slurm's time_str2mins).
        ("1-02:03:04", "1-02:04:00"),
        ("2-3", "2-03:00:00"),
    ] {
        let id = e.submit(&format!("-H -p batch --time={t} --wrap true"));
        assert_eq!(e.ok(&format!("squeue -h -j {id} -o %l")), format!("{want}\n"), "--time={t}");
    }
    // 1 minute limit, USR2 55 s before it: the trap fires within seconds.
    e.write(
        "sig.sh",
        "#!/bin/bash\n#SBATCH -t 1 --signal B:USR2@55 -o sig.out\n\
         trap 'echo got USR2; exit 0' USR2\nfor i in $(seq 1 300); do sleep 0.2; done\necho no signal\n",
    );
    let id = e.submit("sig.sh");
    assert_eq!(e.wait_file("sig.out", 40), "got USR2\n");
    assert_eq!(e.wait_state(&id.to_string(), &["COMPLETED", "FAILED"], 10), "COMPLETED");
}

/// §A-18: sinfo formats the clients parse.
#[test]
fn a18_sinfo_formats() {
    let e = Env::new();
    let o = e.ok("sinfo -o %P");
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "PARTITION");
    assert_eq!(lines.iter().filter(|l| l.contains('*')).count(), 1, "{o}");
    let o = e.ok("sinfo -o %C");
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines[0], "CPUS(A/I/O/T)");
    let f: Vec<u64> = lines[1].split('/').map(|v| v.parse().unwrap()).collect();
    assert_eq!(f.len(), 4, "{o}");
    assert_eq!(f[0] + f[1] + f[2], f[3]);
    assert!(f[1] >= 4, "DJQ's tests need >= 4 idle CPUs: {o}");
    // TOIL: header then exactly 6 single-space fields.
    let o = e.ok("sinfo -a -o \"%P %G %l %p %c %m\"");
    for l in o.lines().skip(1) {
        assert_eq!(l.split(' ').count(), 6, "{l:?}");
    }
    // OOD bundles: -aho.
    let o = e.ok("sinfo -aho %F/%C");
    assert_eq!(o.lines().next().unwrap().split('/').count(), 8, "{o}");
}

/// §A-19: scontrol sub-commands.
#[test]
fn a19_scontrol_subcommands() {
    let e = Env::new();
    let cfg = e.ok("scontrol show config");
    assert!(cfg.lines().any(|l| l == "MinJobAge               = 300 sec"), "{cfg}");
    // snakemake: `MaxArraySize\s*=?\s*(\d+)`; the dev cluster configures 10001.
    assert!(cfg.lines().any(|l| l == "MaxArraySize            = 10001"), "{cfg}");
    assert_eq!(e.ok("scontrol show hostnames 'gpu[01-02]'"), "gpu01\ngpu02\n");
    assert_eq!(
        e.sh_env("scontrol show hostnames", &[("SLURM_NODELIST", "n[1-2]"), ("SLURM_JOB_NODELIST", "x")], None).out,
        "n1\nn2\n"
    );
    let id = e.submit("-H -J sj --wrap true");
    let job = e.ok(&format!("scontrol show job {id}"));
    assert!(job.starts_with(&format!("JobId={id} JobName=sj")), "{job}");
    assert!(job.lines().any(|l| l.starts_with("   JobState=PENDING")), "{job}");
    assert!(job.contains("ExitCode=0:0"), "{job}");
    e.ok(&format!("scontrol release {id}"));
    e.wait_state(&id.to_string(), &["COMPLETED"], 30);
    let held = e.submit("--wrap true -H");
    e.ok(&format!("scontrol hold {held}"));
    let part = e.ok("scontrol show partition");
    assert!(part.starts_with("PartitionName="), "{part}");
    let one = e.ok("scontrol show part -o");
    assert!(one.lines().all(|l| l.starts_with("PartitionName=") && l.contains(" TRES=")), "{one}");
    // requeue: the job runs again under its id with SLURM_RESTART_COUNT.
    let r = e.submit("-o rq.out --open-mode=append --wrap 'echo run ${SLURM_RESTART_COUNT:-0}; sleep 300'");
    e.wait_file("rq.out", 30);
    e.ok(&format!("scontrol requeue {r}"));
    let t = Instant::now();
    while e.wait_file("rq.out", 5).lines().count() < 3 {
        assert!(t.elapsed() < Duration::from_secs(60), "not run again");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Between the runs, slurmstepd's notice in the job's stderr (here the same file).
    let out = e.wait_file("rq.out", 5);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!((lines[0], lines[2]), ("run 0", "run 1"), "{out}");
    assert!(lines[1].starts_with("slurmstepd-gpu0") && lines[1].ends_with("DUE TO JOB REQUEUE ***"), "{out}");
    assert!(lines[1].contains(&format!("*** JOB {r} ON gpu0")), "{out}");
    e.ok(&format!("scancel {r}"));
}

/// §A-20: getopt-strict parsing; glued and bundled short options.
#[test]
fn a20_strict_getopt() {
    let e = Env::new();
    let id = e.submit("-H --wrap true");
    assert_eq!(e.ok(&format!("squeue --job={id} -o%A,%t")), format!("JOBID,ST\n{id},PD\n"));
    assert_eq!(e.ok(&format!("squeue -ho %i -j {id}")), format!("{id}\n"));
    let o = e.sh("squeue --bogus");
    assert_ne!(o.code, 0, "{o:?}");
    if e.skip_without("sacct", "§A-20 `sacct -nu user -o Account%256 | tail -1` as argv") {
        return;
    }
    let u = user();
    let o = e.sh(&format!("sacct -nu {u} -o Account%256 '|' tail -1"));
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.out, "");
    assert!(o.err.contains("sacct: invalid option -- '1'"), "{o:?}");
}

// ---------------------------------------------------------------------------------------------
// §B. Every command line of the clients, with the parse each client applies
// ---------------------------------------------------------------------------------------------

/// §B1: every sbatch command line shape.
#[test]
fn b1_sbatch_command_lines() {
    let e = Env::new();
    let parse_std = |o: &Out| -> u64 {
        assert_eq!(o.code, 0, "{o:?}");
        o.out.trim().strip_prefix("Submitted batch job ").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{o:?}"))
    };
    let parse_parsable = |o: &Out| -> u64 {
        assert_eq!(o.code, 0, "{o:?}");
        o.out.trim().lines().last().unwrap().split(';').next().unwrap().parse().unwrap_or_else(|_| panic!("{o:?}"))
    };
    let abs = e.write("sub.sh", "#!/bin/bash\n#SBATCH --job-name=submitit\n#SBATCH --time=5\n#SBATCH --wckey=submitit\n#SBATCH --open-mode=append\n#SBATCH --mem=1GB\n#SBATCH --nodes=1\n#SBATCH --cpus-per-task=1\n#SBATCH --signal=USR2@90\ntrue\n");
    // SUB, PSL, PSIJ, IPP, RAY, MLF: sbatch <abs path>.
    parse_std(&e.sh(&format!("sbatch {}", abs.display())));
    // DJQ: sbatch /tmp/tmpXXXX.sh (a DJQ-shaped script).
    e.write("djq.sh", "#!/usr/bin/env bash\n#SBATCH -J dask-worker\n#SBATCH -e dask-worker-%J.err\n#SBATCH -o dask-worker-%J.out\n#SBATCH -p batch\n#SBATCH -n 1\n#SBATCH --cpus-per-task=1\n#SBATCH --mem=954M\n#SBATCH -t 00:30:00\ntrue\n");
    let o = e.sh("sbatch djq.sh");
    assert_eq!(o.code, 0, "{o:?}");
    assert!(first_digits(&o.out).is_some());
    // NF: cwd = task dir, .command.run with its directives.
    e.write("nf/.command.run", "#!/bin/bash\n#SBATCH -J nf-x\n#SBATCH -o /dev/null\n#SBATCH --no-requeue\n#SBATCH --signal B:USR2@30\n#SBATCH -c 1\n#SBATCH -t 00:10:00\n#SBATCH --mem 100M\ntrue\n");
    parse_std(&e.sh("cd nf && sbatch .command.run"));
    // SMK (observed shape), --wrap and the script form on /dev/stdin.
    let smk = "sbatch --parsable --job-name 0b5e --output logs/rule_a/%j.log --export=ALL --comment rule_a \
               -p batch -t 10 --mem 100 --nodes=1 --ntasks=1 --cpus-per-task=1 -D .";
    std::fs::create_dir_all(e.work().join("logs/rule_a")).unwrap();
    parse_parsable(&e.sh(&format!("{smk} --wrap=\"echo smk\"")));
    parse_parsable(&e.sh_env(&format!("{smk} /dev/stdin"), &[], Some("#!/bin/sh\necho smk\n")));
    parse_parsable(&e.sh(&format!("{smk} --array=1-2 --wrap=\"echo smk\"")));
    // CRW.
    parse_std(&e.sh("sbatch -J crw -D . -o crw.out -e crw.err -t 5 -p batch -n 1 --mem-per-cpu=100 --wrap \"/usr/bin/env bash -c true\""));
    // TOIL.
    parse_std(&e.sh("sbatch -J toil_job_1_x --signal=B:USR1@30 --export=ALL --partition=batch --mem=100 --cpus-per-task=1 --time=0:3600 -o t.%j.out -e t.%j.err --wrap='exec true'"));
    // OOD: options, script on stdin, SBATCH_EXPORT=NONE.
    let o = e.sh_env("sbatch -H --no-requeue -D . -J ood -o ood.out -p batch -t 00:05:00 --export NONE --parsable", &[("SBATCH_EXPORT", "NONE")], Some("#!/bin/bash\ntrue\n"));
    parse_parsable(&o);
    // BSP: --parsable, stdin, last line.
    parse_parsable(&e.sh_env("sbatch --parsable", &[], Some("#!/bin/bash\n#SBATCH --job-name=spawner-jupyterhub\n#SBATCH --chdir=.\n#SBATCH --export=PATH,HOME\n#SBATCH --get-user-env=L\ntrue\n")));
    // SS: heredoc (no args), padded keys; --parsable read with split(":").
    let o = e.sh_env("sbatch", &[], Some("#!/bin/sh\n\n#SBATCH --job-name          ss\n#SBATCH --time              5\ntrue\n"));
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.out.contains("Submitted batch job"));
    assert!(o.out.split(' ').nth(3).unwrap().trim().parse::<u64>().is_ok());
    // SPY / MLF: dependencies.
    let a = parse_std(&e.sh("sbatch --wrap true"));
    let o = e.sh(&format!("sbatch --dependency=afterok:{a} {}", abs.display()));
    assert!(o.out.starts_with("Submitted batch"), "{o:?}");
    assert!(o.out.split_whitespace().last().unwrap().parse::<u64>().is_ok());
    // MLF: trailing comma in --export.
    parse_std(&e.sh("sbatch --export=PATH,HOME, --wrap true"));
}

/// §B2: every squeue command line shape.
#[test]
fn b2_squeue_command_lines() {
    let e = Env::new();
    let u = user();
    let id = e.submit("-H -J nmq --wrap true");
    let done = e.submit("-J nmq --wrap true");
    e.wait_state(&done.to_string(), &["COMPLETED"], 30);
    // NF: merged stderr, each line exactly 2 columns.
    let o = e.ok(&format!("squeue --noheader -o '%i %t' -t all -p batch -u {u} 2>&1"));
    assert!(o.lines().all(|l| l.split_whitespace().count() == 2), "{o}");
    assert!(o.lines().any(|l| l == format!("{id} PD")) && o.lines().any(|l| l == format!("{done} CD")), "{o}");
    // SMK: by name, all states.
    let o = e.ok("squeue --format='%i|%T' --states=all --noheader --name nmq");
    assert_eq!(o.lines().count(), 2, "{o}");
    assert!(o.lines().any(|l| l == format!("{id}|PENDING")) && o.lines().any(|l| l == format!("{done}|COMPLETED")), "{o}");
    // BSP.
    let o = e.ok(&format!("squeue -h -j {id} -o '%T %B'"));
    assert!(o.starts_with("PENDING"), "{o}");
    // CRW.
    assert_eq!(e.sh(&format!("squeue -j {id}")).code, 0);
    // SS: csv header with the titles.
    let o = e.ok("squeue --me -o '\"%i\",\"%j\",\"%t\",\"%M\",\"%L\",\"%D\",\"%C\",\"%m\",\"%b\",\"%R\"'");
    assert_eq!(
        o.lines().next().unwrap(),
        "\"JOBID\",\"NAME\",\"ST\",\"TIME\",\"TIME_LEFT\",\"NODES\",\"CPUS\",\"MIN_MEMORY\",\"TRES_PER_NODE\",\"NODELIST(REASON)\""
    );
    assert!(o.lines().any(|l| l.starts_with(&format!("\"{id}\",\"nmq\",\"PD\""))), "{o}");
    // PSIJ: -O with 3 columns.
    let o = e.ok("squeue -O JobArrayID,StateCompact,Reason -t all --me");
    assert!(o.lines().skip(1).all(|l| l.split_whitespace().count() == 3), "{o:?}");
    let o = e.ok("squeue --me -o %i -h -r -t all");
    assert!(o.lines().any(|l| l == id.to_string()), "{o}");
    // OOD: -O name:[.][size][suffix] with \x1F.
    let o = e.ok(&format!("squeue --all --states=all --noconvert -O 'JobID:\x1F,StateCompact:\x1F,Name:\x1F' -j {id}"));
    let body = o.split_once("\x1F\n").map(|(_, b)| b).unwrap_or_else(|| panic!("{o:?}"));
    assert_eq!(body, format!("{id}\x1FPD\x1Fnmq\x1F\n"));
    // MLF.
    assert_eq!(e.ok(&format!("squeue --state=all --job={done} -o%A,%t")).lines().nth(1), Some(format!("{done},CD").as_str()));
    // AIR (the -a -n form; positional ids are an error in Slurm too).
    let o = e.ok("squeue --states=all -h '--format=%i;%j;%t;%T;%r' -a -n nmq");
    assert!(o.lines().all(|l| l.split(';').count() == 5), "{o}");
    // TOIL.
    let o = e.ok("squeue -h --format '%i %t %M'");
    assert!(o.lines().all(|l| l.split(' ').count() == 3), "{o}");
    // PSL fallback.
    let o = e.ok(&format!("squeue --noheader --format='%i %t' --job '{id},{done}'"));
    assert_eq!(o, format!("{id} PD\n"));
}

/// §B3: every sacct command line shape (needs sacct).
#[test]
fn b3_sacct_command_lines() {
    let e = Env::new();
    if e.skip_without("sacct", "§B3 sacct command lines") {
        return;
    }
    let a = e.submit("-J uuid1 --comment rule_a --wrap true");
    let submitted_by = unix_now();
    let b = e.submit("-J other --wrap 'exit 1'");
    e.wait_state(&a.to_string(), &["COMPLETED"], 30);
    e.wait_state(&b.to_string(), &["FAILED"], 30);
    // SUB.
    let o = e.ok(&format!("sacct -o JobID,State,NodeList --parsable2 -j {a} -j {b}"));
    assert_eq!(o.lines().next(), Some("JobID|State|NodeList"));
    let top: Vec<&str> = o.lines().skip(1).filter(|l| !l.split('|').next().unwrap().contains('.')).collect();
    assert_eq!(top.len(), 2, "{o}");
    // SMK status and efficiency report. The window [S, E) holds jobs eligible before E, so
    // `--endtime now` misses a job submitted within the same second (as in slurmdbd); SMK's
    // first poll comes seconds later.
    wait_until("the clock to pass the second of the submission", Duration::from_secs(5), || unix_now() > submitted_by, String::new);
    let o = e.ok("sacct -X --parsable2 --clusters all --noheader --format=JobIdRaw,State --starttime 2000-01-01T00:00 --endtime now --name uuid1");
    assert_eq!(o, format!("{a}|COMPLETED\n"));
    let o = e.ok("sacct --name=uuid1 --parsable2 --noheader --format=JobID,JobName,Comment,Elapsed,TotalCPU,NNodes,NCPUS,MaxRSS,ReqMem");
    assert!(o.lines().all(|l| l.split('|').count() == 9), "{o}");
    for s in 0..10 {
        e.ok(&format!("sacct -j {b}.{s} --format=Reason --noheader"));
    }
    let o = e.ok(&format!("sacct -j {a} -n -X -o nodelist%-256"));
    assert!(e.c.nodes().iter().any(|n| o.trim() == n), "{o:?}");
    // PSL probe and status.
    e.ok("sacct -X");
    let o = e.ok(&format!("sacct -X --noheader --format=jobid,state%20 --job '{a},{b}'"));
    let rows: Vec<Vec<&str>> = o.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows, vec![vec![a.to_string().as_str(), "COMPLETED"], vec![b.to_string().as_str(), "FAILED"]]);
    // TOIL.
    let o = e.ok(&format!("sacct -n -j {a},{b} --format JobIDRaw,State,ExitCode -P -S 2000-01-01T00:00:00 -E now"));
    assert!(o.lines().any(|l| l == format!("{b}|FAILED|1:0")), "{o}");
    // OOD.
    let o = e.ok(&format!("sacct -P --delimiter $'\\x1F' -n --units G --allocations -o User,JobId,JobName,State -j {a}"));
    assert_eq!(o.split('\x1F').count(), 4, "{o:?}");
}

/// §B4: every scancel command line shape.
#[test]
fn b4_scancel_command_lines() {
    let e = Env::new();
    let ids: Vec<u64> = (0..4).map(|_| e.submit("--wrap 'sleep 300'")).collect();
    for id in &ids {
        e.wait_state(&id.to_string(), &["RUNNING"], 30);
    }
    // A signal without -b/-f goes to the job's steps: a job without steps keeps running
    // (Slurm 22.05, checked live; submitit's `_interrupt` relies on the job still existing).
    e.ok(&format!("scancel {} --signal SIGTERM", ids[0]));
    e.ok(&format!("scancel -s 15 {}", ids[1]));
    // Both signals reached the nodes (which log each delivery to a job's steps), and a
    // scheduling cycle ran after them: the jobs still run.
    let delivered = || {
        e.c.nodes().iter().map(|n| std::fs::read_to_string(e.c.dir().join(format!("slurmd-{n}.log"))).unwrap_or_default()).map(|l| l.matches("signal delivered to step tasks").count()).sum::<usize>()
    };
    wait_until("the nodes to deliver both signals", Duration::from_secs(30), || delivered() >= 2, || format!("{} delivered", delivered()));
    e.c.wait_cycles(1);
    assert_eq!(e.state(&ids[0].to_string()), "RUNNING");
    assert_eq!(e.state(&ids[1].to_string()), "RUNNING");
    e.ok(&format!("scancel {} {} --clusters=all", ids[2], ids[3]));
    e.ok(&format!("scancel -Q {}", ids[2]));
    e.ok(&format!("scancel {} {}", ids[0], ids[1]));
    for id in &ids {
        e.wait_state(&id.to_string(), &["CANCELLED"], 30);
    }
    let o = e.sh(&format!("scancel --signal=KILL {}", ids[2]));
    assert_eq!(o.code, 1, "{o:?}");
}

/// §B5: srun command lines (needs srun).
#[test]
fn b5_srun_command_lines() {
    let e = Env::new();
    if e.skip_without("srun", "§B5 srun command lines") {
        return;
    }
    e.write(
        "s.sh",
        "#!/bin/bash\n#SBATCH -n 2 -o s.out\n\
         srun --unbuffered --output 'st_%j_%t.out' --error 'st_%j_%t.err' bash -c 'echo $SLURM_PROCID'\n\
         srun -n1 --cpu-bind=q --cpus-per-task=1 --nodes=1 echo smk\n\
         srun --ntasks 1 -l echo psl\n\
         srun --export=ALL /bin/bash -c 'echo mlf'\n",
    );
    let id = e.submit("s.sh");
    assert_eq!(e.wait_state(&id.to_string(), &["COMPLETED", "FAILED"], 60), "COMPLETED");
    // The MLF step takes the job's 2 tasks (default task count = the allocation's ntasks).
    assert_eq!(e.wait_file("s.out", 5), "smk\n0: psl\nmlf\nmlf\n");
    assert_eq!(e.wait_file(&format!("st_{id}_0.out"), 5), "0\n");
    assert_eq!(e.wait_file(&format!("st_{id}_1.out"), 5), "1\n");
}

/// §B6: sinfo and scontrol command lines.
#[test]
fn b6_sinfo_scontrol_command_lines() {
    let e = Env::new();
    assert!(e.ok("sinfo -o %P").lines().any(|l| l.ends_with('*')));
    assert!(e.ok("sinfo -o %C").starts_with("CPUS(A/I/O/T)\n"));
    let o = e.ok("sinfo -a -o \"%P %G %l %p %c %m\"");
    assert!(o.lines().skip(1).all(|l| l.split(' ').count() == 6), "{o}");
    e.ok("sinfo -aho %F/%C");
    let o = e.ok("sinfo -ahNO nodehost:100,gres:512,gresused:512,statelong");
    assert!(!o.is_empty());
    let o = e.ok("sinfo -ho \"\x1E%c\x1F%n\x1F%f\"");
    assert!(o.starts_with('\x1E'), "{o:?}");
    let o = e.ok("scontrol show config");
    assert!(o.lines().any(|l| l.starts_with("MinJobAge") && l.ends_with("= 300 sec")), "{o}");
    let o = e.ok("scontrol show partition");
    assert!(o.starts_with("PartitionName="));
    let o = e.ok("scontrol show part -o");
    assert!(o.lines().all(|l| l.starts_with("PartitionName=")));
    let o = e.sh("scontrol show job");
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.out.starts_with("No jobs in the system"), "{o:?}");
    assert_eq!(e.ok("scontrol show hostname 'gpu[01-03]'"), "gpu01\ngpu02\ngpu03\n");
    let id = e.submit("-H --wrap true");
    e.ok(&format!("scontrol hold {id}"));
    e.ok(&format!("scontrol release {id}"));
    e.wait_state(&id.to_string(), &["COMPLETED"], 30);
}
