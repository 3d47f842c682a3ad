//! `sbatch`, as Slurm 22.05's `src/sbatch`: options from `#SBATCH` directives, then `SBATCH_*`
//! environment variables, then the command line (each overriding the one before); the script
//! from a file, `--wrap`, or standard input; Slurm's messages and exit codes (255 for a bad
//! option or value, 1 for a missing/invalid script and for everything the controller refuses).
//!
//! Flotilla options: `--topology=node|pod|any`, `--preemptible`, `--checkpoint-bytes=N[KMGT]`,
//! and elastic jobs: `--elastic` (with `-N MIN-MAX` or `--gpus=[type:]MIN-MAX`),
//! `--elastic-step=K`, `--elastic-signal=SIG`, sent as `Request::SubmitElastic`.

use crate::common::{self, Ctl, CtlError, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt, Opt};
use flotilla_core::time::{fmt_time, parse_time_limit, parse_time_spec, TimeLimit};
use flotilla_proto::errno::ESLURM_INVALID_GRES;
use flotilla_proto::{
    ArrayRange, ArraySpec, GpuCount, GresSpec, JobQuery, JobRef, Request, Response, SignalSpec, SubmitJob,
    TimeLimitWire,
};

/// What `sbatch --version` prints.
pub const VERSION_LINE: &str = "slurm-wlm 22.05.8";

// Ids of long-only options.
const O_WRAP: u32 = 1000;
const O_PARSABLE: u32 = 1001;
const O_TEST_ONLY: u32 = 1002;
const O_GRES: u32 = 1003;
const O_MEM: u32 = 1004;
const O_MEM_PER_CPU: u32 = 1005;
const O_GPUS_PER_NODE: u32 = 1006;
const O_GPUS_PER_TASK: u32 = 1007;
const O_EXCLUSIVE: u32 = 1008;
const O_NICE: u32 = 1009;
const O_NTASKS_PER_NODE: u32 = 1010;
const O_REQUEUE: u32 = 1011;
const O_NO_REQUEUE: u32 = 1012;
const O_SIGNAL: u32 = 1013;
const O_EXPORT: u32 = 1014;
const O_COMMENT: u32 = 1015;
const O_TIME_MIN: u32 = 1016;
const O_TOPOLOGY: u32 = 1017;
const O_PREEMPTIBLE: u32 = 1018;
const O_CHECKPOINT_BYTES: u32 = 1019;
const O_OPEN_MODE: u32 = 1020;
const O_IGNORED_ARG: u32 = 1021;
const O_IGNORED: u32 = 1022;
const O_HELP: u32 = 1023;
const O_USAGE: u32 = 1024;
const O_CPUS_PER_GPU: u32 = 1025;
const O_MEM_PER_GPU: u32 = 1026;
const O_NTASKS_PER_GPU: u32 = 1027;
const O_DEADLINE: u32 = 1028;
const O_PRIORITY: u32 = 1029;
const O_EXPORT_FILE: u32 = 1030;
const O_ELASTIC: u32 = 1031;
const O_ELASTIC_STEP: u32 = 1032;
const O_ELASTIC_SIGNAL: u32 = 1033;
const O_GPUS_PER_SOCKET: u32 = 1034;
const O_SOCKETS_PER_NODE: u32 = 1035;
const O_UID: u32 = 1036;
const O_GID: u32 = 1037;
const O_MINCPUS: u32 = 1038;
const O_NTASKS_PER_CORE: u32 = 1039;
const O_THREADS_PER_CORE: u32 = 1040;
const O_CORES_PER_SOCKET: u32 = 1041;
const O_THREAD_SPEC: u32 = 1042;
const O_SWITCHES: u32 = 1043;
const O_WAIT_ALL_NODES: u32 = 1044;
const O_MAIL_TYPE: u32 = 1045;
const O_TMP: u32 = 1046;
const O_KILL_ON_INVALID_DEP: u32 = 1047;
const O_GRES_FLAGS: u32 = 1048;
const O_DELAY_BOOT: u32 = 1049;
const O_RESERVATION: u32 = 1050;
const O_HINT: u32 = 1051;
const O_GET_USER_ENV: u32 = 1052;
const O_PROFILE: u32 = 1053;
const O_ACCTG_FREQ: u32 = 1054;
const O_PROPAGATE: u32 = 1055;
const O_GPU_BIND: u32 = 1056;
const O_NTASKS_PER_SOCKET: u32 = 1057;
const O_MAIL_USER: u32 = 1058;
const O_SPREAD_JOB: u32 = 1059;
const O_CPU_FREQ: u32 = 1060;
const O_MEM_BIND: u32 = 1061;
const O_GPU_FREQ: u32 = 1062;
const O_POWER: u32 = 1063;

const fn c(ch: char) -> u32 {
    ch as u32
}

/// sbatch's getopt string (Slurm 22.05 `opt.c`); `+`: stop at the script name.
pub const SHORTS: &str = "+a:A:b:B:c:C:d:D:e:F:G:hHi:IJ:k::L:m:M:n:N:o:Op:q:QsS:t:uvVw:Wx:";

/// sbatch's long options (Slurm 22.05 `opt.c` plus Flotilla's); ids are the short letter or an `O_*`.
pub const LONGS: &[LongOpt] = &[
    lo("account", HasArg::Required, c('A')),
    lo("acctg-freq", HasArg::Required, O_ACCTG_FREQ),
    lo("array", HasArg::Required, c('a')),
    lo("batch", HasArg::Required, O_IGNORED_ARG),
    lo("bb", HasArg::Required, O_IGNORED_ARG),
    lo("bbf", HasArg::Required, O_IGNORED_ARG),
    lo("begin", HasArg::Required, c('b')),
    lo("checkpoint-bytes", HasArg::Required, O_CHECKPOINT_BYTES),
    lo("chdir", HasArg::Required, c('D')),
    lo("cluster-constraint", HasArg::Required, O_IGNORED_ARG),
    lo("clusters", HasArg::Required, c('M')),
    lo("comment", HasArg::Required, O_COMMENT),
    lo("constraint", HasArg::Required, c('C')),
    lo("container", HasArg::Required, O_IGNORED_ARG),
    lo("contiguous", HasArg::No, O_IGNORED),
    lo("core-spec", HasArg::Required, c('S')),
    lo("cores-per-socket", HasArg::Required, O_CORES_PER_SOCKET),
    lo("cpu-freq", HasArg::Required, O_CPU_FREQ),
    lo("cpus-per-gpu", HasArg::Required, O_CPUS_PER_GPU),
    lo("cpus-per-task", HasArg::Required, c('c')),
    lo("deadline", HasArg::Required, O_DEADLINE),
    lo("delay-boot", HasArg::Required, O_DELAY_BOOT),
    lo("dependency", HasArg::Required, c('d')),
    lo("distribution", HasArg::Required, c('m')),
    lo("elastic", HasArg::No, O_ELASTIC),
    lo("elastic-signal", HasArg::Required, O_ELASTIC_SIGNAL),
    lo("elastic-step", HasArg::Required, O_ELASTIC_STEP),
    lo("error", HasArg::Required, c('e')),
    lo("exclude", HasArg::Required, c('x')),
    lo("exclusive", HasArg::Optional, O_EXCLUSIVE),
    lo("export", HasArg::Required, O_EXPORT),
    lo("export-file", HasArg::Required, O_EXPORT_FILE),
    lo("extra-node-info", HasArg::Required, c('B')),
    lo("get-user-env", HasArg::Optional, O_GET_USER_ENV),
    lo("gid", HasArg::Required, O_GID),
    lo("gpu-bind", HasArg::Required, O_GPU_BIND),
    lo("gpu-freq", HasArg::Required, O_GPU_FREQ),
    lo("gpus", HasArg::Required, c('G')),
    lo("gpus-per-node", HasArg::Required, O_GPUS_PER_NODE),
    lo("gpus-per-socket", HasArg::Required, O_GPUS_PER_SOCKET),
    lo("gpus-per-task", HasArg::Required, O_GPUS_PER_TASK),
    lo("gres", HasArg::Required, O_GRES),
    lo("gres-flags", HasArg::Required, O_GRES_FLAGS),
    lo("help", HasArg::No, O_HELP),
    lo("hint", HasArg::Required, O_HINT),
    lo("hold", HasArg::No, c('H')),
    lo("ignore-pbs", HasArg::No, O_IGNORED),
    lo("input", HasArg::Required, c('i')),
    lo("job-name", HasArg::Required, c('J')),
    lo("kill-on-invalid-dep", HasArg::Required, O_KILL_ON_INVALID_DEP),
    lo("licenses", HasArg::Required, c('L')),
    lo("mail-type", HasArg::Required, O_MAIL_TYPE),
    lo("mail-user", HasArg::Required, O_MAIL_USER),
    lo("mcs-label", HasArg::Required, O_IGNORED_ARG),
    lo("mem", HasArg::Required, O_MEM),
    lo("mem-bind", HasArg::Required, O_MEM_BIND),
    lo("mem-per-cpu", HasArg::Required, O_MEM_PER_CPU),
    lo("mem-per-gpu", HasArg::Required, O_MEM_PER_GPU),
    lo("mincpus", HasArg::Required, O_MINCPUS),
    lo("network", HasArg::Required, O_IGNORED_ARG),
    lo("nice", HasArg::Optional, O_NICE),
    lo("no-kill", HasArg::Optional, c('k')),
    lo("no-requeue", HasArg::No, O_NO_REQUEUE),
    lo("nodefile", HasArg::Required, c('F')),
    lo("nodelist", HasArg::Required, c('w')),
    lo("nodes", HasArg::Required, c('N')),
    lo("ntasks", HasArg::Required, c('n')),
    lo("ntasks-per-core", HasArg::Required, O_NTASKS_PER_CORE),
    lo("ntasks-per-gpu", HasArg::Required, O_NTASKS_PER_GPU),
    lo("ntasks-per-node", HasArg::Required, O_NTASKS_PER_NODE),
    lo("ntasks-per-socket", HasArg::Required, O_NTASKS_PER_SOCKET),
    lo("open-mode", HasArg::Required, O_OPEN_MODE),
    lo("output", HasArg::Required, c('o')),
    lo("overcommit", HasArg::No, c('O')),
    lo("oversubscribe", HasArg::No, c('s')),
    lo("parsable", HasArg::No, O_PARSABLE),
    lo("partition", HasArg::Required, c('p')),
    lo("power", HasArg::Required, O_POWER),
    lo("preemptible", HasArg::No, O_PREEMPTIBLE),
    lo("priority", HasArg::Required, O_PRIORITY),
    lo("profile", HasArg::Required, O_PROFILE),
    lo("propagate", HasArg::Optional, O_PROPAGATE),
    lo("qos", HasArg::Required, c('q')),
    lo("quiet", HasArg::No, c('Q')),
    lo("reboot", HasArg::No, O_IGNORED),
    lo("requeue", HasArg::No, O_REQUEUE),
    lo("reservation", HasArg::Required, O_RESERVATION),
    lo("signal", HasArg::Required, O_SIGNAL),
    lo("sockets-per-node", HasArg::Required, O_SOCKETS_PER_NODE),
    lo("spread-job", HasArg::No, O_SPREAD_JOB),
    lo("switches", HasArg::Required, O_SWITCHES),
    lo("test-only", HasArg::No, O_TEST_ONLY),
    lo("thread-spec", HasArg::Required, O_THREAD_SPEC),
    lo("threads-per-core", HasArg::Required, O_THREADS_PER_CORE),
    lo("time", HasArg::Required, c('t')),
    lo("time-min", HasArg::Required, O_TIME_MIN),
    lo("tmp", HasArg::Required, O_TMP),
    lo("topology", HasArg::Required, O_TOPOLOGY),
    lo("uid", HasArg::Required, O_UID),
    lo("usage", HasArg::No, O_USAGE),
    lo("use-min-nodes", HasArg::No, O_IGNORED),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("wait", HasArg::No, c('W')),
    lo("wait-all-nodes", HasArg::Required, O_WAIT_ALL_NODES),
    lo("wckey", HasArg::Required, O_IGNORED_ARG),
    lo("wrap", HasArg::Required, O_WRAP),
];

/// `SBATCH_*` input variables and the long option each stands for (sbatch(1) "INPUT
/// ENVIRONMENT VARIABLES").
const ENV_OPTS: &[(&str, &str)] = &[
    ("SBATCH_ACCOUNT", "account"),
    ("SBATCH_ARRAY_INX", "array"),
    ("SBATCH_CONSTRAINT", "constraint"),
    ("SBATCH_CPUS_PER_GPU", "cpus-per-gpu"),
    ("SBATCH_DELAY_BOOT", "delay-boot"),
    ("SBATCH_DEBUG", "verbose"),
    ("SBATCH_EXCLUSIVE", "exclusive"),
    ("SBATCH_EXPORT", "export"),
    ("SBATCH_GPUS", "gpus"),
    ("SBATCH_GPUS_PER_NODE", "gpus-per-node"),
    ("SBATCH_GPUS_PER_SOCKET", "gpus-per-socket"),
    ("SBATCH_GPUS_PER_TASK", "gpus-per-task"),
    ("SBATCH_GRES", "gres"),
    ("SBATCH_GRES_FLAGS", "gres-flags"),
    ("SBATCH_HOLD", "hold"),
    ("SBATCH_JOB_NAME", "job-name"),
    ("SBATCH_MEM_PER_CPU", "mem-per-cpu"),
    ("SBATCH_MEM_PER_GPU", "mem-per-gpu"),
    ("SBATCH_MEM_PER_NODE", "mem"),
    ("SBATCH_NO_REQUEUE", "no-requeue"),
    ("SBATCH_OPEN_MODE", "open-mode"),
    ("SBATCH_PARTITION", "partition"),
    ("SBATCH_QOS", "qos"),
    ("SBATCH_REQUEUE", "requeue"),
    ("SBATCH_RESERVATION", "reservation"),
    ("SBATCH_REQ_SWITCH", "switches"),
    ("SBATCH_SIGNAL", "signal"),
    ("SBATCH_THREAD_SPEC", "thread-spec"),
    ("SBATCH_THREADS_PER_CORE", "threads-per-core"),
    ("SBATCH_TIMELIMIT", "time"),
    ("SBATCH_TIME_MIN", "time-min"),
    ("SBATCH_WAIT", "wait"),
    ("SBATCH_WAIT_ALL_NODES", "wait-all-nodes"),
    ("SBATCH_WCKEY", "wckey"),
    ("SBATCH_TOPOLOGY", "topology"),
];

/// Everything the options set.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    /// The request being built.
    pub job: SubmitJob,
    /// `--wrap`.
    pub wrap: Option<String>,
    /// `--parsable`.
    pub parsable: bool,
    /// `--wait`.
    pub wait: bool,
    /// `-Q`.
    pub quiet: bool,
    /// `-D` as given.
    pub chdir: Option<String>,
    /// `--export`.
    pub export: Option<String>,
    /// `--open-mode`.
    pub open_mode: Option<String>,
    /// Flotilla `--elastic` with its `--gpus=MIN-MAX` maximum, `--elastic-step` and
    /// `--elastic-signal`; sent as `Request::SubmitElastic` when `elastic` is set.
    pub elastic: bool,
    /// What `--elastic` adds to the job.
    pub elastic_req: flotilla_proto::ElasticRequest,
    /// `--gpus-per-node` as given (for `TresPerNode=`).
    pub gpus_per_node_text: Option<String>,
    /// `--gres` as given (for `TresPerNode=`).
    pub gres_text: Option<String>,
    /// `--uid` and `--gid` (root only): the user and group the job is submitted as, the
    /// invoking ones when unset (Slurm 22.05 `slurm_opt.c`: each defaults to `getuid()` and
    /// `getgid()` separately, so `--uid` alone keeps root's group).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// `--hint` as given, checked and applied once every option is read ([`verify_node_options`]).
    pub hint: Option<String>,
    /// `-B` was given (Slurm's `extra_set`).
    pub extra_set: bool,
    /// `-S` and `--thread-spec`, each time one was given, by the name Slurm's warning uses.
    pub core_spec: Vec<&'static str>,
    /// `--propagate` (`ALL` when given without a value), checked once every option is read.
    pub propagate: Option<String>,
    /// `-m arbitrary` (or `hostfile`) was given: it needs `-w` (checked once every option is
    /// read).
    pub arbitrary: bool,
    /// Warnings of the options read (`--power`), printed on stderr after each pass over them.
    pub warnings: Vec<String>,
}

/// An early end: the message(s) to print on stderr and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatal {
    /// Lines for stderr, complete with their `sbatch: ` prefix.
    pub lines: Vec<String>,
    /// Exit status.
    pub code: i32,
}

fn fatal(msg: impl Into<String>, code: i32) -> Fatal {
    Fatal {
        lines: vec![format!("sbatch: error: {}", msg.into())],
        code,
    }
}

fn bad_option(msg: String) -> Fatal {
    Fatal {
        lines: vec![msg, "Try \"sbatch --help\" for more information".into()],
        code: 255,
    }
}

/// Runs `sbatch` with `args` (`args[0]` is the program name); returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    match main(args, io) {
        Ok(code) => code,
        Err(f) => {
            for l in &f.lines {
                io.err(&format!("{l}\n"));
            }
            f.code
        }
    }
}

fn main(args: &[String], io: &mut Io<'_>) -> Result<i32, Fatal> {
    let argv = args.get(1..).unwrap_or(&[]);
    // First pass: the command line alone, to find the script (and fail early on bad options).
    let cli = getopt_long("sbatch", argv, SHORTS, LONGS).map_err(bad_option)?;
    let mut first = Opts::default();
    for o in &cli.opts {
        if let Some(code) = early(o, io) {
            return Ok(code);
        }
        apply(&mut first, o)?;
    }
    for w in &first.warnings {
        io.err(&format!("{w}\n"));
    }
    let (script, argv_script, default_name) = read_script(&first, &cli.operands, io)?;
    // Second pass: directives, then the environment, then the command line again.
    let mut opts = Opts::default();
    let file = if first.wrap.is_some() { "(null)" } else { cli.operands.first().map_or("(null)", String::as_str) };
    let d = directives(&script, file)?;
    if d.slurm_prefix {
        io.err("sbatch: error: Change from #SLURM to #SBATCH in your script and verify the options are valid in sbatch\n");
    }
    let p = getopt_long("sbatch", &d.words, SHORTS, LONGS).map_err(bad_option)?;
    // `_opt_batch_script`: a word that is not an option fails the submission.
    if let Some(stray) = p.operands.first() {
        return Err(Fatal { lines: vec![format!("sbatch: error: Invalid directive found in batch script: {stray}")], code: 255 });
    }
    for o in &p.opts {
        apply(&mut opts, o)?;
    }
    for (var, long) in ENV_OPTS {
        if let Some(v) = (io.env)(var).filter(|v| !v.is_empty()) {
            let l = LONGS.iter().find(|l| l.name == *long).expect("table names a known option");
            let arg = (l.has_arg != HasArg::No).then_some(v);
            apply(
                &mut opts,
                &Opt {
                    id: l.id,
                    arg,
                    spelled: format!("--{long}"),
                },
            )?;
        }
    }
    for o in &cli.opts {
        apply(&mut opts, o)?;
    }
    for w in &opts.warnings {
        io.err(&format!("{w}\n"));
    }
    let hint_env = verify_node_options(&mut opts, io)?;
    // `_opt_verify`: a deadline before the begin time can never be met.
    if let (Some(d), Some(b)) = (opts.job.deadline, opts.job.begin) {
        if d < b {
            return Err(fatal("Incompatible begin and deadline time specification", 1));
        }
    }
    if let Some(p) = &opts.propagate {
        check_propagate(p)?;
    }
    // `slurm_opt_create_job_desc`: an arbitrary distribution names its nodes.
    if opts.arbitrary && opts.job.required_nodes.is_empty() {
        return Err(fatal("With Arbitrary distribution you need to specify a nodelist or hostfile with the -w option", 1));
    }
    let mut job = opts.job.clone();
    job.script = script;
    job.argv = argv_script;
    job.command = match (&opts.wrap, cli.operands.first()) {
        (None, Some(path)) => Some(absolute(path)),
        _ => None,
    };
    if job.name.is_none() {
        job.name = Some(default_name);
    }
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into());
    job.work_dir = match &opts.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) if d == "." => cwd.clone(),
        Some(d) => format!("{cwd}/{d}"),
        None => cwd.clone(),
    };
    job.uid = opts.uid.unwrap_or_else(common::my_uid);
    job.gid = opts.gid.unwrap_or_else(common::my_gid);
    // `job.user` stays empty: the controller names the user from the uid (another than the
    // one it authenticated only for an operator, `authz::valid_id`).
    job.submit_host = common::hostname();
    let host = job.submit_host.clone();
    let ctx = crate::sbatch_env::SubmitContext {
        export: opts.export.as_deref(),
        open_mode: opts.open_mode.as_deref(),
        cwd: &cwd,
        host: &host,
        umask: crate::sbatch_env::process_umask(),
    };
    // `verify_hint` sets `SLURM_HINT` in sbatch's own environment, which the job inherits.
    let hinted = hint_env.is_some();
    let vars = std::env::vars().filter(|(k, _)| !hinted || k != "SLURM_HINT").chain(hint_env).collect();
    job.environment = crate::sbatch_env::submit_environment(vars, &job, &ctx);
    job.tres_per_node = tres_per_node(opts.gpus_per_node_text.as_deref(), opts.gres_text.as_deref());
    check_elastic(&opts)?;
    let ctl = Ctl::new(io.env).map_err(|e| submit_failed(&e))?;
    let test_only = job.test_only;
    let req = if opts.elastic {
        Request::SubmitElastic(Box::new(flotilla_proto::SubmitElastic { job, elastic: opts.elastic_req.clone() }))
    } else {
        Request::SubmitJob(Box::new(job))
    };
    let resp = ctl.call(req).map_err(|e| refused(&e, test_only))?;
    match resp {
        Response::Submitted(s) => {
            if opts.parsable {
                io.out(&format!("{}\n", s.job_id));
            } else if !opts.quiet {
                io.out(&format!("Submitted batch job {}\n", s.job_id));
            }
            if opts.wait {
                let _ = std::io::Write::flush(io.out);
                return Ok(wait_for(&ctl, s.job_id, io));
            }
            Ok(0)
        }
        Response::TestOnly(t) => {
            io.err(&format!(
                "sbatch: Job {} to start at {} using {} processors on nodes {} in partition {}\n",
                t.job_id,
                fmt_time(t.start_time),
                t.cpus,
                t.nodes,
                t.partition
            ));
            Ok(0)
        }
        _ => Err(fatal("Batch job submission failed: Unexpected message received", 1)),
    }
}

fn submit_failed(e: &CtlError) -> Fatal {
    refused(e, false)
}

/// A refused submission, or `--test-only` (Slurm 22.05 `sbatch.c`:
/// `slurm_perror("allocation failure")`): the controller's messages, then the error; exit 1.
fn refused(e: &CtlError, test_only: bool) -> Fatal {
    let se = e.slurm();
    let mut lines: Vec<String> = se.messages.iter().map(|m| format!("sbatch: error: {m}")).collect();
    lines.push(if se.code == ESLURM_INVALID_GRES {
        // Slurm validates GRES names in the client and says so without the prefix.
        format!("sbatch: error: {}", se.text)
    } else if test_only {
        format!("allocation failure: {}", se.text)
    } else {
        format!("sbatch: error: Batch job submission failed: {}", se.text)
    });
    Fatal { lines, code: 1 }
}

/// `--wait`: polls until the job ends; its exit code becomes sbatch's.
fn wait_for(ctl: &Ctl, id: u64, io: &mut Io<'_>) -> i32 {
    let mut delay = std::time::Duration::from_secs(2);
    loop {
        std::thread::sleep(delay);
        delay = (delay * 2).min(std::time::Duration::from_secs(10));
        let q = JobQuery {
            jobs: vec![JobRef::id(id)],
            include_finished: true,
            ..JobQuery::default()
        };
        let jobs = match ctl.call(Request::QueryJobs(q)) {
            Ok(Response::Jobs(j)) => j,
            _ => continue,
        };
        let all_done = !jobs.is_empty() && jobs.iter().all(|j| j.state.is_some_and(|s| s.is_finished()));
        if all_done {
            let worst = jobs
                .iter()
                .map(|j| if j.exit_signal != 0 { 128 + j.exit_signal } else { j.exit_code })
                .max()
                .unwrap_or(0);
            if worst != 0 {
                io.err(&format!("sbatch: error: Batch job {id} failed with exit code {worst}\n"));
            }
            return worst;
        }
    }
}

/// Options that print and exit at once.
fn early(o: &Opt, io: &mut Io<'_>) -> Option<i32> {
    match o.id {
        x if x == c('V') => {
            io.out(&format!("{VERSION_LINE}\n"));
            Some(0)
        }
        // `--mem-bind=help` (`slurm_verify_mem_bind`): the list on stdout, then the error exit.
        O_MEM_BIND if matches!(mem_bind_check(o.arg.as_deref().unwrap_or("")), Ok(true)) => {
            io.out(MEM_BIND_HELP);
            Some(255)
        }
        O_HELP | O_USAGE => {
            io.out("Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]\n");
            Some(0)
        }
        x if x == c('u') => {
            io.out("Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]\n");
            Some(0)
        }
        _ => None,
    }
}

/// `path` made absolute against the current directory (Slurm's `search_path` for the script:
/// `env.sh` in `/home/alice/g` is `/home/alice/g/env.sh`).
fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_string();
    }
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into());
    format!("{}/{}", cwd.trim_end_matches('/'), path.strip_prefix("./").unwrap_or(path))
}

/// The script text, its arguments and the default job name.
fn read_script(opts: &Opts, operands: &[String], io: &mut Io<'_>) -> Result<(String, Vec<String>, String), Fatal> {
    if let Some(w) = &opts.wrap {
        if !operands.is_empty() {
            return Err(fatal("Script arguments not permitted with --wrap option", 1));
        }
        return Ok((
            format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{w}\n"),
            Vec::new(),
            "wrap".into(),
        ));
    }
    let (bytes, name, args) = match operands.first() {
        Some(path) => {
            let b = std::fs::read(path).map_err(|_| fatal(format!("Unable to open file {path}"), 1))?;
            let base = path.rsplit('/').next().unwrap_or(path).to_string();
            (b, base, operands[1..].to_vec())
        }
        None => (
            io.read_stdin().map_err(|_| fatal("Batch script is empty!", 1))?,
            "sbatch".to_string(),
            Vec::new(),
        ),
    };
    // Slurm 22.05 `sbatch.c` `_get_script_buffer`, in its order.
    if bytes.is_empty() {
        return Err(fatal("Batch script is empty!", 1));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(fatal("Batch script contains only whitespace!", 1));
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if !text.starts_with("#!") {
        return Err(Fatal {
            lines: vec![
                "sbatch: error: This does not look like a batch script.  The first".into(),
                "sbatch: error: line must start with #! followed by the path to an interpreter.".into(),
                "sbatch: error: For instance: #!/bin/sh".into(),
            ],
            code: 1,
        });
    }
    if text.contains('\0') {
        return Err(Fatal {
            lines: vec![
                "sbatch: error: The Slurm controller does not allow scripts that".into(),
                "sbatch: error: contain a NULL character '\\0'.".into(),
            ],
            code: 1,
        });
    }
    if text.contains("\r\n") {
        return Err(Fatal {
            lines: vec![
                "sbatch: error: Batch script contains DOS line breaks (\\r\\n)".into(),
                "sbatch: error: instead of expected UNIX line breaks (\\n).".into(),
            ],
            code: 1,
        });
    }
    Ok((text, args, name))
}

/// The directives of a batch script as Slurm 22.05's sbatch reads them (`src/sbatch/opt.c`
/// `_opt_batch_script`): lines starting with `#SBATCH` (or, with one error message,
/// `#SLURM`) at column 0, case-sensitive; other comment and blank lines are skipped; the first
/// line with anything else (a command) ends the scan. Each directive's words come from
/// [`get_argument`]; all of them form one option list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    /// The option words, in order.
    pub words: Vec<String>,
    /// A `#SLURM` line was used (Slurm prints "Change from #SLURM to #SBATCH ...").
    pub slurm_prefix: bool,
}

/// Scans `script` (read from `file`, named in fatal errors) for its directives. Errors:
/// Slurm's fatal `FILE: line N: Unmatched `"` in [REST]` and `Unexpected `:``, exit 1.
pub fn directives(script: &str, file: &str) -> Result<Directives, Fatal> {
    let mut out = Directives::default();
    for (n, line) in script.split('\n').enumerate() {
        let rest = if let Some(r) = line.strip_prefix("#SBATCH") {
            r
        } else if let Some(r) = line.strip_prefix("#SLURM") {
            out.slurm_prefix = true;
            r
        } else {
            match line.trim_start().chars().next() {
                None | Some('#') => continue,
                Some(_) => break,
            }
        };
        let mut rest = rest.trim_start();
        while let Some((word, skipped)) = get_argument(file, n + 1, rest)? {
            out.words.push(word);
            rest = &rest[skipped..];
        }
    }
    Ok(out)
}

/// One word of a directive (Slurm's `get_argument`): leading blanks skipped; quotes (`"` or
/// `'`) group characters, blanks included, and are removed; a backslash takes the next
/// character literally, except a blank, which still ends the word; an unquoted `#` ends the
/// line (a comment). Returns the word and the bytes of `line` it used, `None` at the end.
fn get_argument(file: &str, lineno: usize, line: &str) -> Result<Option<(String, usize)>, Fatal> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if b.get(i) == Some(&b':') {
        return Err(Fatal { lines: vec![format!("sbatch: fatal: {file}: line {lineno}: Unexpected `:` in [{line}]")], code: 1 });
    }
    if i == b.len() {
        return Ok(None);
    }
    let mut word: Vec<u8> = Vec::new();
    let mut any = false;
    let (mut quote, mut escape) = (None::<u8>, false);
    while i < b.len() && (quote.is_some() || !b[i].is_ascii_whitespace()) {
        let c = b[i];
        if escape {
            escape = false;
        } else if c == b'\\' {
            escape = true;
            i += 1;
            continue;
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
                i += 1;
                continue;
            }
        } else if c == b'"' || c == b'\'' {
            quote = Some(c);
            i += 1;
            continue;
        } else if c == b'#' {
            break;
        }
        word.push(c);
        any = true;
        i += 1;
    }
    if let Some(q) = quote {
        return Err(Fatal {
            lines: vec![format!("sbatch: fatal: {file}: line {lineno}: Unmatched `{}` in [{line}]", q as char)],
            code: 1,
        });
    }
    // Nothing copied (a comment, or only quotes): Slurm's `get_argument` returns no word,
    // which ends the scan of the line.
    if !any {
        return Ok(None);
    }
    Ok(Some((String::from_utf8_lossy(&word).into_owned(), i)))
}

/// What `srun` and `salloc` send as the job's or step's environment: this process's own, with
/// `SLURM_EXPORT_ENV` set when `--export` was given; the node applies the export rules, as it
/// does for `sbatch` (`flotilla_slurmd::env::exported`).
pub fn environment_for(export: Option<&str>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k != "SLURM_EXPORT_ENV").collect();
    if let Some(x) = export {
        env.push(("SLURM_EXPORT_ENV".into(), x.to_string()));
    }
    env
}

fn arg(o: &Opt) -> &str {
    o.arg.as_deref().unwrap_or("")
}

/// Applies one option; errors are Slurm's texts with exit status 255.
pub fn apply(opts: &mut Opts, o: &Opt) -> Result<(), Fatal> {
    let j = &mut opts.job;
    let a = arg(o);
    match o.id {
        x if x == c('A') => j.account = Some(a.into()),
        x if x == c('a') => j.array = Some(parse_array(a)),
        x if x == c('b') => j.begin = Some(time_spec(a, "--begin")?),
        x if x == c('c') => j.cpus_per_task = Some(parse_count(a, "--cpus-per-task")?),
        x if x == c('C') => j.constraint = Some(a.into()),
        x if x == c('d') => j.dependency = Some(a.into()),
        x if x == c('D') => opts.chdir = Some(a.into()),
        x if x == c('e') => j.stderr = Some(a.into()),
        x if x == c('G') => {
            // `--gpus=[type:]MIN-MAX`: a GPU-granular elastic job's range (checked once all
            // options are read: it needs `--elastic`).
            let (g, max) = parse_gpu_range(a);
            j.gpus = Some(g);
            opts.elastic_req.gpus_max = max;
        }
        x if x == c('H') => j.hold = true,
        // Slurm 22.05 `slurm_opt.c` `arg_set_uid`/`arg_set_gid`: root only (the real uid),
        // a name or a known number.
        O_UID | O_GID => {
            let (what, lookup, slot): (_, fn(&str) -> Option<u32>, _) =
                if o.id == O_UID { ("uid", common::uid_from_string, &mut opts.uid) } else { ("gid", common::gid_from_string, &mut opts.gid) };
            if common::my_uid() != 0 {
                return Err(fatal(format!("--{what} only permitted by root user"), 255));
            }
            *slot = Some(lookup(a).ok_or_else(|| fatal(format!("Invalid --{what} specification"), 255))?);
        }
        x if x == c('i') => j.stdin = Some(a.into()),
        x if x == c('J') => j.name = Some(a.into()),
        x if x == c('n') => j.ntasks = Some(parse_count(a, "--ntasks")?),
        x if x == c('N') => {
            let (min, max) = parse_nodes(a).ok_or_else(|| fatal(format!("\"{a}\" is not a valid node count"), 255))?;
            j.nodes_min = Some(min);
            j.nodes_max = max;
        }
        x if x == c('o') => j.stdout = Some(a.into()),
        x if x == c('p') => j.partition = Some(a.into()),
        x if x == c('q') => j.qos = Some(a.into()),
        x if x == c('Q') => opts.quiet = true,
        x if x == c('t') => j.time_limit = Some(parse_time(a, "--time")?),
        x if x == c('w') => j.required_nodes = expand_nodes(a),
        x if x == c('W') => opts.wait = true,
        x if x == c('x') => j.excluded_nodes = expand_nodes(a),
        O_WRAP => opts.wrap = Some(a.into()),
        O_PARSABLE => opts.parsable = true,
        O_TEST_ONLY => j.test_only = true,
        O_GRES => {
            j.gres = parse_gres(a).ok_or_else(|| fatal("Invalid generic resource (gres) specification", 255))?;
            opts.gres_text = Some(a.into());
        }
        O_MEM => j.mem_per_node_mib = Some(parse_mem(a).ok_or_else(|| fatal("Invalid --mem specification", 255))?),
        O_MEM_PER_CPU => {
            j.mem_per_cpu_mib = Some(parse_mem(a).ok_or_else(|| fatal("Invalid --mem-per-cpu specification", 255))?)
        }
        O_GPUS_PER_NODE => {
            j.gpus_per_node = Some(parse_gpu_count(a));
            opts.gpus_per_node_text = Some(a.into());
        }
        O_GPUS_PER_SOCKET => j.gpus_per_socket = Some(parse_gpu_count(a)),
        O_SOCKETS_PER_NODE => j.sockets_per_node = Some(parse_count(a, "--sockets-per-node")?),
        O_GPUS_PER_TASK => j.gpus_per_task = Some(parse_gpu_count(a)),
        // `arg_set_exclusive`; `-s` is `--exclusive=oversubscribe`.
        O_EXCLUSIVE => {
            use flotilla_proto::Oversubscribe as S;
            let share = match o.arg.as_deref().map(str::to_ascii_lowercase).as_deref() {
                None | Some("exclusive") => S::No,
                Some("oversubscribe") => S::Yes,
                Some("user") => S::User,
                Some("mcs") => S::Mcs,
                Some(_) => return Err(fatal("Invalid --exclusive specification", 255)),
            };
            j.exclusive = share != S::Yes;
            j.node_shape.oversubscribe = share;
        }
        x if x == c('s') => {
            j.exclusive = false;
            j.node_shape.oversubscribe = flotilla_proto::Oversubscribe::Yes;
        }
        // Slurm 22.05 `arg_set_nice`: `strtoll` of the value (no value: 100; digits not
        // needed, `--nice=x` is 0), refused beyond ±(NICE_OFFSET - 3).
        O_NICE => {
            let n = match o.arg.as_deref().filter(|v| !v.is_empty()) {
                None => 100,
                Some(v) => common::strtol_prefix(v),
            };
            if n.unsigned_abs() > 2_147_483_645 {
                return Err(fatal("Invalid --nice value, out of range (+/- 2147483645)", 255));
            }
            j.nice = Some(n as i32);
        }
        O_NTASKS_PER_NODE => j.ntasks_per_node = Some(parse_count(a, "--ntasks-per-node")?),
        O_REQUEUE => j.requeue = Some(true),
        O_NO_REQUEUE => j.requeue = Some(false),
        O_SIGNAL => j.signal = Some(parse_signal_spec(a).ok_or_else(|| fatal(format!("Invalid --signal specification: {a}"), 255))?),
        O_EXPORT => opts.export = Some(a.into()),
        // `arg_set_open_mode`: the first letter, `a` or `t` (any case).
        O_OPEN_MODE => {
            if !matches!(a.bytes().next(), Some(b'a' | b'A' | b't' | b'T')) {
                return Err(fatal("Invalid --open-mode specification", 255));
            }
            opts.open_mode = Some(a.into());
        }
        O_COMMENT => j.comment = Some(a.into()),
        O_TIME_MIN => j.time_min = Some(parse_time(a, "--time-min")?),
        O_TOPOLOGY => {
            if !matches!(a, "node" | "pod" | "any") {
                return Err(fatal(format!("Invalid --topology specification: {a} (node, pod or any)"), 255));
            }
            j.topology = Some(a.into());
        }
        O_PREEMPTIBLE => j.preemptible = true,
        O_ELASTIC => opts.elastic = true,
        O_ELASTIC_STEP => opts.elastic_req.step = Some(parse_count(a, "--elastic-step")?),
        O_ELASTIC_SIGNAL => {
            let sig = crate::signals::parse(a).ok_or_else(|| fatal(format!("Invalid --elastic-signal specification: {a}"), 255))?;
            opts.elastic_req.signal = Some(sig);
        }
        O_CHECKPOINT_BYTES => {
            j.checkpoint_bytes =
                Some(parse_bytes(a).ok_or_else(|| fatal(format!("Invalid --checkpoint-bytes specification: {a}"), 255))?)
        }
        O_MINCPUS => j.node_shape.min_cpus = parse_count(a, "--mincpus")?,
        O_NTASKS_PER_CORE => j.node_shape.ntasks_per_core = parse_count(a, "--ntasks-per-core")?,
        O_THREADS_PER_CORE => j.node_shape.threads_per_core = parse_count(a, "--threads-per-core")?,
        O_CORES_PER_SOCKET => j.node_shape.cores_per_socket = parse_count(a, "--cores-per-socket")?,
        O_TMP => j.node_shape.tmp_disk_mib = parse_mem(a).ok_or_else(|| fatal("Invalid --tmp specification", 255))?,
        x if x == c('B') => {
            let (s, c, t) = parse_extra_node_info(a)?;
            j.sockets_per_node = s;
            j.node_shape.cores_per_socket = c.unwrap_or(0);
            j.node_shape.threads_per_core = t.unwrap_or(0);
            opts.extra_set = true;
        }
        // Slurm 22.05 `slurm_opt.c` `arg_set_core_spec` (`parse_int`, 0 allowed) and
        // `arg_set_thread_spec`; Flotilla, like a site without `AllowSpecResourcesUsage`,
        // then ignores them with a warning ([`verify_node_options`]).
        x if x == c('S') => {
            parse_int(a, "--core-spec", false)?;
            opts.core_spec.push("-S");
        }
        O_THREAD_SPEC => {
            parse_int(a, "--thread-spec", true)?;
            opts.core_spec.push("--thread-spec");
        }
        O_HINT => opts.hint = Some(a.into()),
        // `parse_mail_type`: refused only when no word is known.
        O_MAIL_TYPE => {
            j.mail_type = flotilla_proto::mail_type::parse(a).ok_or_else(|| fatal("Invalid --mail-type specification", 255))?
        }
        O_MAIL_USER => j.mail_user = Some(a.into()),
        // `arg_set_kill_on_invalid_dep` sets a bit and clears none (yes then no sets both,
        // and yes wins); `arg_set_gres_flags` replaces the binding bit.
        O_KILL_ON_INVALID_DEP => {
            use flotilla_proto::job_flags::{KILL_INV_DEP, NO_KILL_INV_DEP};
            j.job_flags |= match a.to_ascii_lowercase().as_str() {
                "yes" => KILL_INV_DEP,
                "no" => NO_KILL_INV_DEP,
                _ => return Err(fatal("Invalid --kill-on-invalid-dep specification", 255)),
            };
        }
        O_GRES_FLAGS => {
            use flotilla_proto::job_flags::{GRES_DISABLE_BIND, GRES_ENFORCE_BIND};
            j.job_flags &= !(GRES_DISABLE_BIND | GRES_ENFORCE_BIND);
            j.job_flags |= match a.to_ascii_lowercase().as_str() {
                "disable-binding" => GRES_DISABLE_BIND,
                "enforce-binding" => GRES_ENFORCE_BIND,
                _ => return Err(fatal("Invalid --gres-flags specification", 255)),
            };
        }
        O_SPREAD_JOB => j.job_flags |= flotilla_proto::job_flags::SPREAD_JOB,
        O_PROPAGATE => opts.propagate = Some(o.arg.clone().unwrap_or_else(|| "ALL".into())),
        O_NTASKS_PER_SOCKET => drop(parse_count(a, "--ntasks-per-socket")?),
        O_CPUS_PER_GPU => drop(parse_count(a, "--cpus-per-gpu")?),
        O_NTASKS_PER_GPU => drop(parse_count(a, "--ntasks-per-gpu")?),
        O_MEM_PER_GPU => drop(parse_mem(a).ok_or_else(|| fatal("Invalid --mem-per-gpu specification", 255))?),
        O_GET_USER_ENV => {
            // `arg_set_get_user_env`: `[TIMEOUT][S|L]`, after `strtol`'s number.
            let rest = &a[common::strtol_prefix_len(a)..];
            if !(rest.is_empty() || matches!(rest.as_bytes()[0], b's' | b'S' | b'l' | b'L')) {
                return Err(fatal("Invalid --get-user-env specification", 255));
            }
        }
        O_PROFILE if !profile_valid(a) => return Err(fatal(format!("invalid --profile={a} option"), 255)),
        O_ACCTG_FREQ => {
            let bad: Vec<&str> = a.split(',').filter(|t| !t.is_empty() && !acctg_freq_valid(t)).collect();
            if !bad.is_empty() {
                return Err(Fatal {
                    lines: bad.iter().map(|t| format!("sbatch: error: Invalid --acctg-freq specification: {t}")).collect(),
                    code: 255,
                });
            }
        }
        O_GPU_BIND => {
            if let Err(detail) = gpu_bind_valid(a) {
                let mut lines: Vec<String> = detail.into_iter().map(|d| format!("sbatch: error: {d}")).collect();
                lines.push(format!("sbatch: error: Invalid --gpu-bind argument: gpu:{a}"));
                return Err(Fatal { lines, code: 255 });
            }
        }
        // Checked as Slurm 22.05 checks them, then unused: Flotilla has no use for their
        // values yet.
        O_SWITCHES | O_WAIT_ALL_NODES | O_DELAY_BOOT => check_unused(o.id, a)?,
        O_DEADLINE => j.deadline = Some(time_spec(a, "--deadline")?),
        // Checked as Slurm 22.05 checks them; Flotilla sets no frequencies, memory binding,
        // task distribution or power flags yet.
        O_CPU_FREQ => {
            if let Err(mut lines) = cpu_freq_check(a) {
                lines.push("Invalid --cpu-freq argument".into());
                return Err(Fatal { lines: lines.into_iter().map(|l| format!("sbatch: error: {l}")).collect(), code: 255 });
            }
        }
        O_MEM_BIND => match mem_bind_check(a) {
            Ok(false) => {}
            Ok(true) => return Err(Fatal { lines: Vec::new(), code: 255 }),
            Err(l) => return Err(fatal(l, 255)),
        },
        O_GPU_FREQ if !gpu_freq_valid(a) => return Err(fatal(format!("Invalid --gpu-freq argument: gpu:{a}"), 255)),
        O_POWER => opts.warnings.extend(
            a.split(',').filter(|t| !t.is_empty() && !t.eq_ignore_ascii_case("level")).map(|t| format!("sbatch: error: Ignoring unrecognized power option ({t})")),
        ),
        x if x == c('m') => match dist_check(a) {
            Ok(arbitrary) => opts.arbitrary = arbitrary,
            Err(plane) => {
                let mut lines = Vec::new();
                if plane {
                    lines.push("sbatch: error: Invalid plane size or size not specified".to_string());
                }
                lines.push("sbatch: error: Invalid --distribution specification".into());
                return Err(Fatal { lines, code: 255 });
            }
        },
        // The controller refuses a name: Flotilla has no advance reservations.
        O_RESERVATION => j.reservation = Some(a.into()),
        // Accepted for compatibility; Flotilla has no use for them yet.
        _ => {}
    }
    Ok(())
}

/// Parses sbatch options (no script) into [`Opts`]: how `salloc` and `srun` build the job
/// request of the allocation they create from their own allocation options. Errors are
/// sbatch's texts (the caller renames the program).
pub fn parse_options(words: &[String]) -> Result<Opts, Fatal> {
    let p = getopt_long("sbatch", words, SHORTS, LONGS).map_err(bad_option)?;
    let mut opts = Opts::default();
    for o in &p.opts {
        apply(&mut opts, o)?;
    }
    Ok(opts)
}

fn parse_time(a: &str, opt: &str) -> Result<TimeLimitWire, Fatal> {
    match parse_time_limit(a) {
        Ok(TimeLimit::Unlimited) => Ok(TimeLimitWire::Unlimited),
        Ok(TimeLimit::Minutes(m)) => Ok(TimeLimitWire::Minutes(m)),
        Err(_) => Err(fatal(format!("Invalid {opt} specification"), 255)),
    }
}

/// `--begin`/`--deadline` (`slurm_opt.c` `arg_set_begin`, `arg_set_deadline`): Slurm's
/// `parse_time` looking ahead ([`parse_time_spec`]); a time it refuses prints its own line,
/// `Invalid time specification (pos=N): VALUE`, before `Invalid OPT specification` (exit
/// 255), as does one that names no time (an empty value) without the first line.
fn time_spec(a: &str, opt: &str) -> Result<i64, Fatal> {
    match parse_time_spec(a, common::now(), false) {
        Ok(t) if t != 0 => Ok(t),
        r => {
            let mut lines = Vec::new();
            if let Err(pos) = r {
                lines.push(format!("Invalid time specification (pos={pos}): {a}"));
            }
            lines.push(format!("sbatch: error: Invalid {opt} specification"));
            Err(Fatal { lines, code: 255 })
        }
    }
}

fn parse_count(a: &str, opt: &str) -> Result<u32, Fatal> {
    parse_int(a, opt, true).map(|n| n as u32)
}

/// The value of an option Flotilla does not use, checked as Slurm 22.05's setter checks it
/// (`slurm_opt.c`): counts with `parse_int` (`Invalid numeric value ...`, exit 1:
/// `--switches` before any `@TIME`, `--wait-all-nodes`), the others against their setter's
/// rule, refused with `Invalid --OPTION specification` and exit 255: `--wait-all-nodes`
/// above 1, `--delay-boot`
/// (`time_str2secs`); any case where Slurm ignores it.
fn check_unused(id: u32, a: &str) -> Result<(), Fatal> {
    let name = LONGS.iter().find(|l| l.id == id).map_or("", |l| l.name);
    let ok = match id {
        O_SWITCHES => return parse_int(a.split('@').next().unwrap_or(""), "--switches", true).map(drop),
        O_WAIT_ALL_NODES => parse_int(a, "--wait-all-nodes", false)? <= 1,
        O_DELAY_BOOT => flotilla_core::time::time_str2secs(a).is_ok(),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(fatal(format!("Invalid --{name} specification"), 255))
    }
}

/// `-B S[:C[:T]]` as Slurm 22.05 reads it (`proc_args.c` `verify_socket_core_thread_count`
/// and `get_resource_arg_range`): up to three `:`-separated fields (more are ignored), each
/// empty or `*` (any: `None`) or `MIN[-MAX]`, numbers as `strtol` reads them with an optional
/// `k` (×1024) or `m` (×1048576) suffix; only MIN is kept. A bad field is fatal with exit 1:
/// `Invalid numeric value "FIELD" for first arg of -B.` (`second`, `third`), or `Numeric
/// argument (N) to big for ...` above `INT_MAX`.
#[allow(clippy::type_complexity)]
fn parse_extra_node_info(a: &str) -> Result<(Option<u32>, Option<u32>, Option<u32>), Fatal> {
    let mut fields = a.splitn(4, ':');
    let mut out = [None; 3];
    for (k, what) in ["first", "second", "third"].into_iter().enumerate() {
        let Some(f) = fields.next() else { break };
        out[k] = resource_arg_min(f, &format!("{what} arg of -B"))?;
    }
    Ok((out[0], out[1], out[2]))
}

/// One field of `-B` (`get_resource_arg_range`): `None` for any (empty, `*`, or the range
/// `1-INT_MAX` Slurm treats as any), else the minimum.
fn resource_arg_min(f: &str, what: &str) -> Result<Option<u32>, Fatal> {
    if f.is_empty() || f.starts_with('*') {
        return Ok(None);
    }
    let invalid = || fatal(format!("Invalid numeric value \"{f}\" for {what}."), 1);
    // strtol's number (0 and nothing read when there are no digits), then an optional k/m
    // suffix, looked for even after no digits: `-B k` is 0 sockets on the reference.
    let num = |s: &str| -> (i64, usize) {
        let (mut v, mut end) = (common::strtol_prefix(s), common::strtol_prefix_len(s));
        match s.as_bytes().get(end) {
            Some(b'k' | b'K') => {
                v = v.saturating_mul(1024);
                end += 1;
            }
            Some(b'm' | b'M') => {
                v = v.saturating_mul(1_048_576);
                end += 1;
            }
            _ => {}
        }
        (v, end)
    };
    let (min, end) = num(f);
    let rest = &f[end..];
    if !(rest.is_empty() || rest.starts_with('-')) || min < 0 {
        return Err(invalid());
    }
    if min > i64::from(i32::MAX) {
        return Err(fatal(format!("Numeric argument ({min}) to big for {what}."), 1));
    }
    if let Some(hi) = rest.strip_prefix('-') {
        let (max, end) = num(hi);
        if !(hi[end..].is_empty() || hi[end..].starts_with('-')) || max <= 0 {
            return Err(invalid());
        }
        if max > i64::from(i32::MAX) {
            return Err(fatal(format!("Numeric argument ({max}) to big for {what}."), 1));
        }
        if min == 1 && max == i64::from(i32::MAX) {
            return Ok(None);
        }
    }
    Ok(Some(min as u32))
}

/// What Slurm 22.05's sbatch checks and derives once every option is read (`opt.c`
/// `_opt_verify`), for the options of a node's shape:
///
/// 1. `-S` and `--thread-spec` (`slurm_opt.c` `_validate_spec_cores_options`): both given is
///    fatal (`-S/--core-spec and --thred-spec options are mutually exclusive`, Slurm's
///    spelling, exit 1); one is ignored with `Ignoring -S since it's not allowed by
///    configuration (AllowSpecResourcesUsage = No)` on stderr, as a site without
///    `AllowSpecResourcesUsage` does: Flotilla keeps no cores for the system.
/// 2. `--hint` (`validate_hint_option`, `proc_args.c` `verify_hint`): ignored when
///    `--ntasks-per-core`, `--threads-per-core` or `-B` is also given; else each word
///    (split at commas not followed by a digit, any case) is `compute_bound` (sockets and
///    cores any, one thread a core), `memory_bound` (one core a socket, one thread a core),
///    `multithread` (threads any), `nomultithread` (one thread a core), or `help` (the list on
///    stdout, exit 1); another word is `unrecognized --hint argument "W", see --hint=help`,
///    exit 1. A good hint is exported to the job as `SLURM_HINT` (`hint_env`).
/// 3. `--ntasks-per-node` without `-n`: that many tasks on each of `-N` nodes.
/// 4. Else without `-n`, with `-N` (or `-w`) or `-B` and a fixed node count, one task per node
///    times each of sockets, cores and threads that is set ("1 proc / min_[socket * core *
///    thread] default").
fn verify_node_options(opts: &mut Opts, io: &mut Io<'_>) -> Result<Option<(String, String)>, Fatal> {
    if opts.core_spec.contains(&"-S") && opts.core_spec.contains(&"--thread-spec") {
        return Err(Fatal {
            lines: vec!["sbatch: fatal: -S/--core-spec and --thred-spec options are mutually exclusive".into()],
            code: 1,
        });
    }
    if let Some(last) = opts.core_spec.last() {
        io.err(&format!("sbatch: error: Ignoring {last} since it's not allowed by configuration (AllowSpecResourcesUsage = No)\n"));
    }
    let j = &mut opts.job;
    // `-w` raises the minimum node count to its distinct nodes; above `-N`'s maximum (a
    // single `-N n` is n-n) Slurm 22.05 `_opt_verify` refuses: "invalid number of nodes".
    if !j.required_nodes.is_empty() {
        let named = j.required_nodes.iter().collect::<std::collections::BTreeSet<_>>().len() as u32;
        let min = j.nodes_min.unwrap_or(0).max(named);
        if let Some(max) = j.nodes_max.or(j.nodes_min).filter(|&m| m != 0 && m < min) {
            return Err(Fatal { lines: vec![format!("sbatch: error: invalid number of nodes (-N {min}-{max})")], code: 1 });
        }
    }
    let mut hint_env = None;
    let conflict = j.node_shape.ntasks_per_core > 0 || j.node_shape.threads_per_core > 0 || opts.extra_set;
    if let (Some(h), false) = (&opts.hint, conflict) {
        verify_hint(h, j, io)?;
        hint_env = Some(("SLURM_HINT".to_string(), h.clone()));
    }
    // --ntasks-per-node without -n asks for nodes × ntasks-per-node tasks (SLURM_NTASKS in
    // the job, srun's default task count), before the shape's count below.
    if j.ntasks.is_none() {
        if let Some(t) = j.ntasks_per_node {
            j.ntasks = Some(j.nodes_min.unwrap_or(1).saturating_mul(t));
        }
    }
    let nodes_set = j.nodes_min.is_some() || !j.required_nodes.is_empty();
    let min_nodes = j.nodes_min.unwrap_or(0).max(j.required_nodes.len() as u32);
    let fixed = j.nodes_max.is_none_or(|m| m == 0 || m == min_nodes);
    if (nodes_set || opts.extra_set) && fixed && j.ntasks.is_none() {
        let set: Vec<u32> =
            [j.sockets_per_node.unwrap_or(0), j.node_shape.cores_per_socket, j.node_shape.threads_per_core].into_iter().filter(|&n| n > 0).collect();
        if !set.is_empty() {
            j.ntasks = Some(set.into_iter().fold(min_nodes.max(1), u32::saturating_mul));
        }
    }
    Ok(hint_env)
}

/// Slurm 22.05's `verify_hint` (`proc_args.c`) on `h`, applied to `j`'s shape; see
/// [`verify_node_options`].
fn verify_hint(h: &str, j: &mut SubmitJob, io: &mut Io<'_>) -> Result<(), Fatal> {
    let b = h.as_bytes();
    let mut words = Vec::new();
    let mut start = 0;
    for (i, &ch) in b.iter().enumerate() {
        if ch == b',' && !b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            words.push(&h[start..i]);
            start = i + 1;
        }
    }
    words.push(&h[start..]);
    for w in words {
        let shape = &mut j.node_shape;
        match w.to_ascii_lowercase().as_str() {
            "help" => {
                io.out(HINT_HELP);
                return Err(Fatal { lines: Vec::new(), code: 1 });
            }
            "compute_bound" => {
                j.sockets_per_node = None;
                shape.cores_per_socket = 0;
                shape.threads_per_core = 1;
            }
            "memory_bound" => {
                shape.cores_per_socket = 1;
                shape.threads_per_core = 1;
            }
            // `ntasks_per_core` becomes INFINITE16, which Slurm shows as not set.
            "multithread" => shape.threads_per_core = 0,
            "nomultithread" => shape.threads_per_core = 1,
            _ => return Err(fatal(format!("unrecognized --hint argument \"{w}\", see --hint=help"), 1)),
        }
    }
    Ok(())
}

/// `--hint=help` (`proc_args.c` `verify_hint`).
const HINT_HELP: &str = "Application hint options:
    --hint=             Bind tasks according to application hints
        compute_bound   use all cores in each socket
        memory_bound    use only one core in each socket
        [no]multithread [don't] use extra threads with in-core multi-threading
        help            show this help message
";

/// Slurm 22.05's `acct_gather_profile_from_string` (`slurm_acct_gather_profile.c`): a value
/// that contains (any case) `none`, `all`, `energy`, `task`, `lustre` or `network`.
fn profile_valid(a: &str) -> bool {
    let l = a.to_ascii_lowercase();
    ["none", "all", "energy", "task", "lustre", "network"].iter().any(|w| l.contains(w))
}

/// One comma-separated item of `--acctg-freq` (`proc_args.c` `validate_acctg_freq`,
/// `slurm_acct_gather.c` `acct_gather_parse_freq`): a number (the task frequency, as before
/// the typed form), or somewhere in it `task=`, `energy=`, `network=` or `filesystem=`
/// (any case) followed by a number; a number is what `strtol` reads, and -1 is none.
fn acctg_freq_valid(t: &str) -> bool {
    let num = |s: &str| common::strtol_prefix_len(s) > 0 && common::strtol_prefix(s) != -1;
    let l = t.to_ascii_lowercase();
    num(t) || ["task=", "energy=", "network=", "filesystem="].iter().any(|k| l.find(k).is_some_and(|i| num(&t[i + k.len()..])))
}

/// `--gpu-bind` as Slurm 22.05's `tres_bind_verify_cmdline` checks `gpu:VALUE`
/// (`tres_bind.c` `_valid_gpu_bind`): after an optional `verbose,`, a value starting with
/// `c` (closest) or `n` (none), `map_gpu:` decimal numbers, `mask_gpu:` hexadecimal ones
/// (each optionally `0x`, `N*COUNT` repeats), `per_task:N` or `single:N` (any case).
/// Refused: `Err` with Slurm's `Failed to validate ITEM, offending character is C` for a list
/// item with a character that is not a digit.
fn gpu_bind_valid(a: &str) -> Result<(), Option<String>> {
    let v = if a.len() >= 8 && a[..8].eq_ignore_ascii_case("verbose,") { &a[8..] } else { a };
    let has = |p: &str| common::starts_with_ci(v, p);
    // `_valid_num`: not negative. Slurm reads it in base 0; base 10 gives the same sign
    // except for a negative hexadecimal or octal (`-0x5`), which is taken here.
    let num = |s: &str| common::strtol_prefix(s) >= 0;
    // `_valid_num_list`: each item's characters digits (hexadecimal ones after an optional
    // `0x` for masks) or `*`, and after a `*` a decimal repeat count.
    let list = |s: &str, hex: bool| -> Result<(), Option<String>> {
        for t in s.split(',').filter(|t| !t.is_empty()) {
            let t = if hex { t.strip_prefix("0x").unwrap_or(t) } else { t };
            let ok = |c: char| c == '*' || if hex { c.is_ascii_hexdigit() } else { c.is_ascii_digit() };
            if let Some(c) = t.chars().find(|&c| !ok(c)) {
                return Err(Some(format!("Failed to validate {t}, offending character is {c}")));
            }
            if !t.split_once('*').is_none_or(|(_, r)| r.bytes().all(|b| b.is_ascii_digit())) {
                return Err(None);
            }
        }
        Ok(())
    };
    let yes = |b: bool| if b { Ok(()) } else { Err(None) };
    if has("c") || has("n") {
        Ok(())
    } else if has("map_gpu:") {
        list(&v[8..], false)
    } else if has("mask_gpu:") {
        list(&v[9..], true)
    } else if has("per_task:") {
        yes(num(&v[9..]))
    } else if has("single:") {
        yes(num(&v[7..]))
    } else {
        Err(None)
    }
}

/// `--cpu-freq=P1[-P2][:GOV]` as Slurm 22.05 checks it (`cpu_frequency.c`
/// `cpu_freq_verify_cmdline`, `_cpu_freq_check_gov`, `_cpu_freq_check_freq`): P1 a governor
/// (`co`nservative, `perf`ormance, `pow`ersave, `user`space, `onde`mand, `sche`dutil, by
/// prefix, any case) or a frequency; P2 a frequency (kHz as `strtoul` reads it, or `lo`w,
/// `med`ium, `hi`gh, `him1`/`highm1`), not below P1 as Slurm compares them (its synonyms
/// are numbers above any kHz); GOV only after P2 and not after a governor; a governor must
/// be one `CpuFreqGovernors` allows (Slurm's default: OnDemand, Performance, UserSpace;
/// Flotilla does not read the key). `Err` holds the messages before `Invalid --cpu-freq
/// argument`.
fn cpu_freq_check(a: &str) -> Result<(), Vec<String>> {
    const RANGE: u32 = 0x8000_0000;
    const ALLOWED: u32 = 0x8400_0000 | 0x8200_0000 | 0x8080_0000;
    let pre = common::starts_with_ci;
    let gov = |s: &str| -> u32 {
        [("co", 0x8800_0000), ("perf", 0x8200_0000), ("pow", 0x8100_0000), ("user", 0x8080_0000), ("onde", 0x8400_0000), ("sche", 0x8040_0000)]
            .iter()
            .find(|(p, _)| pre(s, p))
            .map_or(0, |&(_, g)| g)
    };
    let mut errors = Vec::new();
    let freq = |s: &str, errors: &mut Vec<String>| -> u32 {
        if pre(s, "lo") {
            return 0x8000_0001;
        } else if pre(s, "him1") || pre(s, "highm1") {
            return 0x8000_0004;
        } else if pre(s, "hi") {
            return 0x8000_0003;
        } else if pre(s, "med") {
            return 0x8000_0002;
        }
        // `strtoul` base 10: leading blanks and a sign, then digits; 0 when none.
        let t = s.trim_start();
        let (neg, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let digits = &t[..t.bytes().take_while(u8::is_ascii_digit).count()];
        let v = digits.parse::<u64>().map_or(if digits.is_empty() { 0 } else { u64::MAX }, |v| v);
        let v = if neg { v.wrapping_neg() } else { v } as u32;
        if v == 0 {
            errors.push(format!("unrecognized --cpu-freq argument \"{s}\""));
        }
        v
    };
    // Split as Slurm splits: GOV after the first `:`; P1 before the first `-` of the whole
    // value, P2 from there to the `:` (or to the end when the `:` comes first).
    let colon = a.find(':');
    let p3 = colon.map(|c| &a[c + 1..]);
    let (p1, p2) = match a.find('-') {
        Some(d) => (&a[..d], Some(match colon {
            Some(c) if c > d => &a[d + 1..c],
            _ => &a[d + 1..],
        })),
        None => (colon.map_or(a, |c| &a[..c]), None),
    };
    let mut governor = None;
    let mut max = 0;
    let result = (|| {
        let g = gov(p1);
        if g != 0 {
            if let Some(p3) = p3 {
                errors.push(format!("governor cannot be specified twice {p1}{{-}}:{p3} in --cpu-freq"));
                return Err(());
            }
            governor = Some(g);
        } else {
            max = freq(p1, &mut errors);
            if max == 0 {
                return Err(());
            }
        }
        if let Some(p2) = p2 {
            let hi = freq(p2, &mut errors);
            if hi == 0 {
                return Err(());
            }
            if hi < max {
                errors.push(format!("min cpu-frec ({p1}) must be < max cpu-freq ({p2})"));
                return Err(());
            }
        }
        if let Some(p3) = p3 {
            if p2.is_none() {
                errors.push(format!("gov on cpu-frec ({p3}) illegal without max"));
                return Err(());
            }
            let g = gov(p3);
            if g == 0 {
                errors.push(format!("illegal governor: {p3} on --cpu-freq"));
                return Err(());
            }
            governor = Some(g);
        }
        Ok(())
    })();
    let mut ok = result.is_ok();
    if governor.is_some_and(|g| (g & ALLOWED) & !RANGE == 0) {
        errors.push(format!("governor of {a} is not allowed in slurm.conf"));
        ok = false;
    }
    if ok {
        Ok(())
    } else {
        Err(errors)
    }
}

/// `--mem-bind` as Slurm 22.05 checks it (`slurm_resource_info.c` `slurm_verify_mem_bind`,
/// `_isvalue`, `_expand_mult`): words split at commas not followed by a value, each `help`,
/// `p[refer]`, `[no]sort`, `q[uiet]`, `v[erbose]`, `no[ne]`, `rank`, `local` (any case), or
/// `map_mem`/`mapmem`/`mask_mem`/`maskmem` with a `:` or `=` list of numbers (hexadecimal for
/// masks, after an optional `0x`), each optionally `*COUNT`. `Ok(true)` for `help`; `Err`
/// with Slurm's message.
fn mem_bind_check(a: &str) -> Result<bool, String> {
    let b = a.as_bytes();
    let is_value = |i: usize| {
        if b.get(i).is_some_and(u8::is_ascii_digit) {
            return true;
        }
        let mut j = i;
        while b.get(j).is_some_and(u8::is_ascii_hexdigit) {
            j += 1;
        }
        matches!(b.get(j), None | Some(b','))
    };
    let mut words = Vec::new();
    let mut start = 0;
    for i in 0..b.len() {
        if b[i] == b',' && !is_value(i + 1) {
            words.push(&a[start..i]);
            start = i + 1;
        }
    }
    words.push(&a[start..]);
    let pre = common::starts_with_ci;
    for w in words {
        let is = |names: &[&str]| names.iter().any(|n| w.eq_ignore_ascii_case(n));
        if is(&["help"]) {
            return Ok(true);
        } else if is(&["p", "prefer", "nosort", "sort", "q", "quiet", "v", "verbose", "no", "none", "rank", "local"]) {
            continue;
        }
        let kind = if pre(w, "map_mem") || pre(w, "mapmem") {
            "map_mem"
        } else if pre(w, "mask_mem") || pre(w, "maskmem") {
            "mask_mem"
        } else {
            return Err(format!("unrecognized --mem-bind argument \"{w}\""));
        };
        // `strsep(":=")` twice: the list is what lies between the first and second separator.
        let list = w.split([':', '=']).nth(1).unwrap_or("");
        if list.is_empty() {
            return Err(format!("missing list for \"--mem-bind={kind}:<list>\""));
        }
        let mask = kind == "mask_mem";
        for tok in list.split(',').filter(|t| !t.is_empty()) {
            let tok = if mask { tok.strip_prefix("0x").unwrap_or(tok) } else { tok };
            let ok = |c: char| if mask { c.is_ascii_hexdigit() } else { c.is_ascii_digit() };
            let (num, count) = match tok.find('*') {
                Some(i) => (&tok[..i], Some(&tok[i..])),
                None => (tok, None),
            };
            if let Some(ast) = count {
                if let Some(c) = ast[1..].chars().find(|c| !c.is_ascii_digit()) {
                    return Err(format!("Failed to validate number: {ast}, the offending character is {c}"));
                }
                if ast[1..].parse::<i64>().map_or(true, |n| n <= 0) {
                    return Err(format!("Invalid {kind} multiplier: {}", &ast[1..]));
                }
            }
            if let Some(c) = num.chars().find(|&c| !ok(c)) {
                return Err(format!("Failed to validate number: {num}, the offending character is {c}"));
            }
        }
    }
    Ok(false)
}

/// `--gpu-freq` as Slurm 22.05 checks it (`tres_frequency.c` `tres_freq_verify_cmdline` over
/// `gpu:VALUE`, `_valid_gpu_freq`, `_test_val`): a comma list (empty items skipped, at least
/// one) of `low`, `medium`, `high`, `highm1` (lower case), a decimal number, `verbose`, or
/// `memory=` one of those values.
fn gpu_freq_valid(a: &str) -> bool {
    let val = |v: &str| match v.as_bytes().first() {
        Some(c) if c.is_ascii_digit() => v.bytes().all(|c| c.is_ascii_digit()) && v.parse::<i64>().is_ok_and(|n| n < i64::MAX),
        Some(_) => matches!(v, "low" | "medium" | "high" | "highm1"),
        None => false,
    };
    // `strtok` on `;` first: every piece after the first must itself be `gpu:...`.
    let mut pieces = a.split(';').filter(|p| !p.is_empty());
    let check = |v: &str| {
        let items: Vec<&str> = v.split(',').filter(|t| !t.is_empty()).collect();
        !items.is_empty()
            && items.iter().all(|t| match t.split_once('=') {
                None => val(t) || *t == "verbose",
                Some((k, v)) => k == "memory" && val(v),
            })
    };
    let Some(first) = pieces.next() else { return false };
    check(first) && pieces.all(|p| p.strip_prefix("gpu:").is_some_and(check))
}

/// `-m`/`--distribution` as Slurm 22.05 checks it (`proc_args.c` `verify_dist_type`,
/// `_parse_plane_dist`, `_parse_dist_base`, `_parse_dist_flag`): `plane=SIZE` (1 to
/// `INT_MAX`; the size may come from `SLURM_DIST_PLANESIZE`), or up to three `:`-separated
/// levels of `block`, `cyclic`, `fcyclic` (below the first) or `*` (block, then cyclic, then
/// the socket level's), `arbitrary` or `hostfile`, then an optional `,pack` or `,nopack`
/// (which may also stand alone). `Ok(true)` for an arbitrary distribution; `Err(true)` for a
/// bad plane size (its own message first).
fn dist_check(a: &str) -> Result<bool, bool> {
    let pre = common::starts_with_ci;
    if pre(a, "plane") {
        let size = match a.find('=') {
            Some(i) => Some(a[i + 1..].to_string()),
            None => std::env::var("SLURM_DIST_PLANESIZE").ok().filter(|v| !v.is_empty()),
        };
        let ok = size.is_some_and(|v| v.parse::<i64>().is_ok_and(|n| n > 0 && n <= i64::from(i32::MAX)) && !v.starts_with('+') && !v.starts_with(' '));
        return if ok { Ok(false) } else { Err(true) };
    }
    if a.is_empty() || a.starts_with(',') {
        return Err(false);
    }
    let (base, flag) = match a.split_once(',') {
        Some((b, f)) => (b, Some(f)),
        None => (a, None),
    };
    let mut levels: Vec<String> = Vec::new();
    let mut sock: Option<String> = None;
    for (i, tok) in base.split(':').filter(|t| !t.is_empty()).enumerate() {
        if i > 2 {
            return Err(false);
        }
        let word = if tok == "*" {
            match i {
                0 => "block".to_string(),
                1 => {
                    sock = Some("cyclic".into());
                    "cyclic".into()
                }
                _ => sock.clone().unwrap_or_default(),
            }
        } else {
            if i == 1 {
                sock = Some(tok.to_string());
            }
            tok.to_string()
        };
        levels.push(word.to_ascii_lowercase());
    }
    let out = levels.join(":");
    let lv: Vec<&str> = levels.iter().map(String::as_str).collect();
    let known = matches!(
        lv.as_slice(),
        ["block" | "cyclic" | "arbitrary" | "hostfile"]
            | ["block" | "cyclic", "block" | "cyclic" | "fcyclic"]
            | ["block" | "cyclic", "block" | "cyclic" | "fcyclic", "block" | "cyclic" | "fcyclic"]
    );
    let is_flag = |f: &str| f.eq_ignore_ascii_case("pack") || f.eq_ignore_ascii_case("nopack");
    if !known && !is_flag(&out) {
        return Err(false);
    }
    if flag.is_some_and(|f| !f.is_empty() && !is_flag(f)) {
        return Err(false);
    }
    Ok(matches!(lv.as_slice(), ["arbitrary" | "hostfile"]))
}

/// The list `--mem-bind=help` prints (`slurm_print_mem_bind_help`).
const MEM_BIND_HELP: &str = "Memory bind options:
    --mem-bind=         Bind memory to locality domains (ldom)
        nosort          avoid sorting pages at startup
        sort            sort pages at startup
        q[uiet]         quietly bind before task runs (default)
        v[erbose]       verbosely report binding before task runs
        no[ne]          don't bind tasks to memory (default)
        rank            bind by task rank
        local           bind to memory local to processor
        map_mem:<list>  specify a memory binding for each task
                        where <list> is <cpuid1>,<cpuid2>,...<cpuidN>
        mask_mem:<list> specify a memory binding mask for each tasks
                        where <list> is <mask1>,<mask2>,...<maskN>
        help            show this help message
";

/// `sbatch.c` `_set_rlimit_env` over `--propagate` (`slurm_rlimits_info.c` `parse_rlimits`):
/// `ALL`, `NONE`, or a list (commas or blanks) of `AS`, `CORE`, `CPU`, `DATA`, `FSIZE`,
/// `MEMLOCK`, `NOFILE`, `NPROC`, `RSS`, `STACK`, each optionally `RLIMIT_`-prefixed (case
/// matters). Refused: `Bad rlimit name: NAME` and `--propagate=VALUE is not valid.`, exit 1.
fn check_propagate(p: &str) -> Result<(), Fatal> {
    const NAMES: &[&str] = &["CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS"];
    if p == "ALL" || p == "NONE" {
        return Ok(());
    }
    for t in p.split([',', ' ', '\t', '\n']).filter(|t| !t.is_empty()) {
        let name = t.strip_prefix("RLIMIT_").unwrap_or(t);
        if !NAMES.contains(&name) {
            return Err(Fatal {
                lines: vec![format!("sbatch: error: Bad rlimit name: {name}"), format!("sbatch: error: --propagate={p} is not valid.")],
                code: 1,
            });
        }
    }
    Ok(())
}

/// [`common::parse_int`] with sbatch's prefix and exit status 1.
fn parse_int(a: &str, opt: &str, positive: bool) -> Result<i32, Fatal> {
    common::parse_int(a, opt, positive).map_err(|m| fatal(m, 1))
}


/// `-N min[-max]`.
pub fn parse_nodes(a: &str) -> Option<(u32, Option<u32>)> {
    let num = |s: &str| -> Option<u32> {
        let (digits, mult) = match s.strip_suffix(['k', 'K']) {
            Some(d) => (d, 1024),
            None => (s, 1),
        };
        digits.parse::<u32>().ok().map(|n| n * mult)
    };
    match a.split_once('-') {
        Some((lo, hi)) => Some((num(lo)?, Some(num(hi)?))),
        None => Some((num(a)?, None)),
    }
}

/// `--mem` and friends: a number of MiB with an optional `K`, `M`, `G`, `T` suffix.
pub fn parse_mem(a: &str) -> Option<u64> {
    let a = a.trim();
    let split = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
    let (num, suf) = a.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mib = match suf.to_ascii_uppercase().as_str() {
        "" | "M" | "MB" => n,
        "K" | "KB" => n.div_ceil(1024),
        "G" | "GB" => n * 1024,
        "T" | "TB" => n * 1024 * 1024,
        _ => return None,
    };
    Some(mib)
}

/// `--checkpoint-bytes`: bytes with an optional binary `K`, `M`, `G`, `T`, `P` suffix.
pub fn parse_bytes(a: &str) -> Option<u64> {
    let split = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
    let (num, suf) = a.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match suf.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        "P" => 1 << 50,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `TresPerNode=` as Slurm 22.05's sbatch writes it (`slurm_opt.c`
/// `slurm_opt_create_job_desc`): each comma-separated item of `--gpus-per-node` prefixed
/// `gres:gpu:` (`proc_args.c` `xfmt_tres`), then `--gres` with `gres:` before each item
/// that lacks it (`gres.c` `gres_prepend_tres_type`; `--gres=none` is no GRES). The text is
/// kept as written: `--gres=gpu` is `gres:gpu`, `--gres=gpu:0` is `gres:gpu:0`.
pub fn tres_per_node(gpus_per_node: Option<&str>, gres: Option<&str>) -> Option<String> {
    let mut items: Vec<String> = Vec::new();
    if let Some(g) = gpus_per_node.filter(|g| !g.is_empty()) {
        items.extend(g.split(',').filter(|t| !t.is_empty()).map(|t| format!("gres:gpu:{t}")));
    }
    if let Some(g) = gres.filter(|g| !g.is_empty() && !g.eq_ignore_ascii_case("none")) {
        let prefixed = format!("gres:{g}").replace(',', ",gres:").replace("gres:gres:", "gres:");
        items.push(prefixed);
    }
    (!items.is_empty()).then(|| items.join(","))
}

/// `--gres=gpu:2,gpu:h100:3` (per node).
pub fn parse_gres(a: &str) -> Option<Vec<GresSpec>> {
    let mut out = Vec::new();
    if a.eq_ignore_ascii_case("none") {
        return Some(out);
    }
    for item in a.split(',').filter(|s| !s.is_empty()) {
        let item = item.strip_prefix("gres:").or_else(|| item.strip_prefix("gres/")).unwrap_or(item);
        let parts: Vec<&str> = item.split(':').collect();
        let (name, ty, count) = match parts.as_slice() {
            [n] => (*n, None, 1),
            [n, x] => match x.parse::<u64>() {
                Ok(k) => (*n, None, k),
                Err(_) => (*n, Some(x.to_string()), 1),
            },
            [n, t, k] => (*n, Some(t.to_string()), k.parse().ok()?),
            _ => return None,
        };
        if name.is_empty() {
            return None;
        }
        out.push(GresSpec {
            name: name.into(),
            gpu_type: ty,
            count,
        });
    }
    Some(out)
}

/// `--gpus=[type:]N`; a bare word is a type with count 1, as Slurm reads `--gpus=abc`.
pub fn parse_gpu_count(a: &str) -> GpuCount {
    match a.rsplit_once(':') {
        Some((t, n)) => GpuCount {
            gpu_type: Some(t.into()),
            count: n.parse().unwrap_or(1),
        },
        None => match a.parse() {
            Ok(n) => GpuCount { gpu_type: None, count: n },
            Err(_) => GpuCount {
                gpu_type: Some(a.into()),
                count: 1,
            },
        },
    }
}

/// `--gpus=[type:]N` or, for `--elastic`, `[type:]MIN-MAX`: the count (MIN) and the maximum.
pub fn parse_gpu_range(a: &str) -> (GpuCount, Option<u32>) {
    let (ty, n) = match a.rsplit_once(':') {
        Some((t, n)) => (Some(t), n),
        None => (None, a),
    };
    if let Some((lo, hi)) = n.split_once('-') {
        if let (Ok(lo), Ok(hi)) = (lo.parse::<u32>(), hi.parse::<u32>()) {
            return (GpuCount { gpu_type: ty.map(str::to_string), count: lo }, Some(hi));
        }
    }
    (parse_gpu_count(a), None)
}

/// Checks what `--elastic` needs once every option is read: a `--gpus` range or
/// `--elastic-step`/`--elastic-signal` without `--elastic` are refused (Slurm's gres error for
/// the range, as its controller would refuse `--gpus=4-8`).
fn check_elastic(opts: &Opts) -> Result<(), Fatal> {
    if opts.elastic {
        return Ok(());
    }
    if opts.elastic_req.gpus_max.is_some() {
        return Err(fatal("Batch job submission failed: Invalid generic resource (gres) specification", 1));
    }
    if opts.elastic_req.step.is_some() || opts.elastic_req.signal.is_some() {
        return Err(fatal("--elastic-step and --elastic-signal need --elastic", 255));
    }
    Ok(())
}

/// One comma-separated token of an array expression as Slurm 22.05's controller reads it
/// (`job_mgr.c` `_parse_array_tok`): `[`/`]` around numbers are dropped, `N`, `N-M` or
/// `N-M:S` followed by nothing or a `%` throttle; a step needs a range; negative or reversed
/// ranges are invalid. `None`: invalid. The bounds (`MaxArraySize`, a step below it) are the
/// controller's (`admission::array_indices`).
fn array_token(tok: &str) -> Option<ArrayRange> {
    let tok = tok.strip_prefix('[').unwrap_or(tok);
    let (first, rest) = flotilla_core::cnum::strtol(tok);
    let rest = rest.strip_prefix(']').unwrap_or(rest);
    let ends = |r: &str| r.is_empty() || r.starts_with('%');
    let clamp = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    if first < 0 {
        return None;
    }
    let (last, step) = match rest.strip_prefix('-') {
        Some(r) => {
            let (last, r) = flotilla_core::cnum::strtol(r);
            let r = r.strip_prefix(']').unwrap_or(r);
            let step = match r.strip_prefix(':') {
                Some(r) => {
                    let (step, r) = flotilla_core::cnum::strtol(r);
                    let r = r.strip_prefix(']').unwrap_or(r);
                    if !ends(r) || step <= 0 {
                        return None;
                    }
                    step
                }
                None if ends(r) => 1,
                None => return None,
            };
            if last < first {
                return None;
            }
            (last, step)
        }
        None if ends(rest) => (first, 1),
        None => return None,
    };
    Some(ArrayRange { start: clamp(first), end: clamp(last), step: clamp(step) })
}

/// `--array=0-5%2`, `1,3,5-9:2`, `[1-3]`, as Slurm 22.05 reads the string: sbatch sends it
/// as written and the controller parses it (`job_mgr.c` `_valid_array_inx`,
/// `_parse_array_tok`; the throttle `atoi` after the first `%`, none when not positive, in
/// `_create_job_array`). So sbatch never refuses one itself: an expression the controller
/// would refuse becomes a spec without ranges, which it refuses with "Invalid job array
/// specification".
pub fn parse_array(a: &str) -> ArraySpec {
    let throttle = a.split_once('%').map(|(_, t)| flotilla_core::cnum::strtol(t).0).filter(|&t| t > 0);
    let ranges: Option<Vec<ArrayRange>> = a.split(',').filter(|t| !t.is_empty()).map(array_token).collect();
    ArraySpec {
        ranges: ranges.unwrap_or_default(),
        max_running: throttle.map(|t| u32::try_from(t).unwrap_or(u32::MAX)),
    }
}

/// `--signal=[{R|B}:]SIG[@secs]`.
pub fn parse_signal_spec(a: &str) -> Option<SignalSpec> {
    let (batch_only, rest) = match a.split_once(':') {
        Some((flags, r)) if flags.chars().all(|c| c == 'B' || c == 'R') => (flags.contains('B'), r),
        _ => (false, a),
    };
    let (sig, secs) = match rest.split_once('@') {
        Some((s, t)) => (s, t.parse().ok()?),
        None => (rest, 60),
    };
    Some(SignalSpec {
        signal: crate::signals::parse(sig)?,
        secs_before: secs,
        batch_only,
    })
}

fn expand_nodes(a: &str) -> Vec<String> {
    flotilla_core::hostlist::expand(a).unwrap_or_else(|_| vec![a.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIRECTIVES_SH: &str = "#!/bin/bash\n#SBATCH --job-name=early\n#SBATCH -t 7\n#SBATCH --partition=batch   # trailing comment after a directive\n##SBATCH --job-name=doublehash\n# SBATCH --job-name=spacehash\n #SBATCH --job-name=leadingspace\n#SBATCH --comment=\"quoted comment with spaces\"\n\necho first command\n#SBATCH --job-name=late\n#SBATCH -t 99\n#SBATCH --gres=gpu:3\nsleep 1\n";

    #[test]
    fn directives_as_slurm_reads_them() {
        // CONTRACT.md §A-4; goldens 0132-0135.
        let d = directives(DIRECTIVES_SH, "directives.sh").unwrap();
        assert_eq!(d.words, vec!["--job-name=early", "-t", "7", "--partition=batch", "--comment=quoted comment with spaces"]);
        assert!(!d.slurm_prefix);
        let words = |s: &str| directives(&format!("#!/bin/sh\n#SBATCH{s}\n"), "t.sh").map(|d| d.words);
        // goldens-extra a01: a backslash does not protect a blank; `#` inside a word ends it.
        assert_eq!(words(" --a='x y' b\\ c #x").unwrap(), vec!["--a=x y", "b", "c"]);
        assert_eq!(words(" -t 5#no space").unwrap(), vec!["-t", "5"]);
        assert_eq!(words(" --comment='it''s'").unwrap(), vec!["--comment=its"]);
        assert_eq!(words(" --array               0-2").unwrap(), vec!["--array", "0-2"]);
        assert_eq!(words(" -J \"open").unwrap_err().lines, vec!["sbatch: fatal: t.sh: line 2: Unmatched `\"` in [ \"open]"]);
        let d = directives("#!/bin/sh\n#SLURM -J x\n", "t.sh").unwrap();
        assert!(d.slurm_prefix);
        assert_eq!(d.words, vec!["-J", "x"]);
    }

    fn opts_of(words: &[&str]) -> Result<Opts, Fatal> {
        let w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let p = getopt_long("sbatch", &w, SHORTS, LONGS).map_err(bad_option)?;
        let mut o = Opts::default();
        for x in &p.opts {
            apply(&mut o, x)?;
        }
        Ok(o)
    }

    /// Options plus `verify_node_options`: the shape, the stdout and stderr it printed, or
    /// the failure.
    fn verified(words: &[&str]) -> (Result<Opts, Fatal>, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let env = |_: &str| None;
        let r = opts_of(words).and_then(|mut o| {
            let mut io = Io { out: &mut out, err: &mut err, env: &env, stdin: None };
            verify_node_options(&mut o, &mut io).map(|_| o)
        });
        (r, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    }

    /// `-B` as Slurm 22.05's `verify_socket_core_thread_count` reads it (goldens-extra
    /// 0142, 0143).
    #[test]
    fn extra_node_info_fields() {
        let b = |a: &str| parse_extra_node_info(a).map_err(|f| f.lines[0].clone());
        assert_eq!(b("2"), Ok((Some(2), None, None)));
        assert_eq!(b("2:4"), Ok((Some(2), Some(4), None)));
        assert_eq!(b("*:4:1"), Ok((None, Some(4), Some(1))));
        assert_eq!(b("1-2:3"), Ok((Some(1), Some(3), None)), "only the minimum is kept");
        assert_eq!(b(":2"), Ok((None, Some(2), None)));
        assert_eq!(b("1:2:1:9"), Ok((Some(1), Some(2), Some(1))), "a fourth field is ignored");
        assert_eq!(b("2k"), Ok((Some(2048), None, None)));
        assert_eq!(b("k"), Ok((Some(0), None, None)), "strtol reads nothing, then the suffix: 0 (reference: 0:*:*)");
        assert!(b("1-k").is_err(), "a maximum of 0 is refused");
        assert_eq!(b("1-2147483647"), Ok((None, None, None)), "1 to INT_MAX is any");
        assert_eq!(b("x"), Err("sbatch: error: Invalid numeric value \"x\" for first arg of -B.".into()));
        assert_eq!(b("1-"), Err("sbatch: error: Invalid numeric value \"1-\" for first arg of -B.".into()));
        assert_eq!(b("2:-1"), Err("sbatch: error: Invalid numeric value \"-1\" for second arg of -B.".into()));
        assert_eq!(b("1:2:3x"), Err("sbatch: error: Invalid numeric value \"3x\" for third arg of -B.".into()));
        assert_eq!(b("99999999999"), Err("sbatch: error: Numeric argument (99999999999) to big for first arg of -B.".into()));
        assert_eq!(parse_extra_node_info("x").unwrap_err().code, 1);
    }

    /// `--hint`, `-S`/`--thread-spec` and the task count `-N`/`-B` imply, as Slurm 22.05's
    /// sbatch `_opt_verify` derives them (goldens-extra 0140, 0141, 0146, 0147).
    #[test]
    fn node_options_verified() {
        let shape = |w: &[&str]| {
            let o = verified(w).0.unwrap();
            (o.job.sockets_per_node, o.job.node_shape.cores_per_socket, o.job.node_shape.threads_per_core, o.job.ntasks)
        };
        assert_eq!(shape(&["--hint=memory_bound"]), (None, 1, 1, None));
        assert_eq!(shape(&["--hint=NOMULTITHREAD"]), (None, 0, 1, None));
        assert_eq!(shape(&["--sockets-per-node=2", "--hint=compute_bound"]), (None, 0, 1, None));
        assert_eq!(shape(&["--hint=multithread,compute_bound"]), (None, 0, 1, None));
        assert_eq!(shape(&["--hint=bogus", "--ntasks-per-core=1"]), (None, 0, 0, None), "ignored beside --ntasks-per-core");
        assert_eq!(shape(&["-B", "2:4"]), (Some(2), 4, 0, Some(8)));
        assert_eq!(shape(&["-N", "2", "--sockets-per-node=2", "--cores-per-socket=2"]), (Some(2), 2, 0, Some(8)));
        assert_eq!(shape(&["-N", "1-2", "-B", "2"]), (Some(2), 0, 0, None), "a node range implies no count");
        assert_eq!(shape(&["-N", "2", "-n", "3", "-B", "2"]), (Some(2), 0, 0, Some(3)));
        assert_eq!(shape(&["--sockets-per-node=2"]), (Some(2), 0, 0, None), "without -N or -B no count");
        assert_eq!(shape(&["-N", "2", "--ntasks-per-node=2", "--threads-per-core=1"]), (None, 0, 1, Some(4)));
        let (r, out, _) = verified(&["--hint=compute_bound,bogus"]);
        assert_eq!(r.unwrap_err(), fatal("unrecognized --hint argument \"bogus\", see --hint=help", 1));
        assert!(out.is_empty());
        let (r, out, _) = verified(&["--hint=help"]);
        assert_eq!(r.unwrap_err(), Fatal { lines: Vec::new(), code: 1 });
        assert_eq!(out, HINT_HELP);
        let (r, _, err) = verified(&["-S", "2"]);
        assert!(r.is_ok());
        assert_eq!(err, "sbatch: error: Ignoring -S since it's not allowed by configuration (AllowSpecResourcesUsage = No)\n");
        let (_, _, err) = verified(&["--thread-spec=1"]);
        assert!(err.contains("Ignoring --thread-spec since"), "{err}");
        let (r, _, _) = verified(&["-S", "2", "--thread-spec=1"]);
        assert_eq!(r.unwrap_err().lines, vec!["sbatch: fatal: -S/--core-spec and --thred-spec options are mutually exclusive"]);
        assert_eq!(verified(&["-S", "x"]).0.unwrap_err(), fatal("Invalid numeric value \"x\" for --core-spec.", 1));
        assert!(verified(&["-S", "0"]).0.is_ok(), "-S takes 0");
    }

    /// Values of options Flotilla takes without using them, checked as Slurm 22.05's setters
    /// check them (goldens-extra 0148-0154).
    #[test]
    fn unused_option_values() {
        use flotilla_proto::Oversubscribe as S;
        let err = |w: &[&str]| opts_of(w).map(drop).unwrap_err();
        let share = |w: &[&str]| {
            let o = opts_of(w).unwrap();
            (o.job.exclusive, o.job.node_shape.oversubscribe)
        };
        assert_eq!(share(&["--exclusive=user"]), (true, S::User));
        assert_eq!(share(&["--exclusive=MCS"]), (true, S::Mcs));
        assert_eq!(share(&["-s"]), (false, S::Yes));
        assert_eq!(share(&["--exclusive", "--oversubscribe"]), (false, S::Yes));
        assert_eq!(share(&["--oversubscribe", "--exclusive"]), (true, S::No));
        assert_eq!(err(&["--exclusive=bogus"]), fatal("Invalid --exclusive specification", 255));
        let nice = |v: &str| opts_of(&[&format!("--nice={v}")]).map(|o| o.job.nice);
        assert_eq!(nice("x"), Ok(Some(0)), "strtoll reads no digits: 0");
        assert_eq!(nice("5x"), Ok(Some(5)));
        assert_eq!(nice(""), Ok(Some(100)));
        assert_eq!(nice(" 7"), Ok(Some(7)));
        assert_eq!(nice("-2147483645"), Ok(Some(-2_147_483_645)));
        assert_eq!(nice("2147483646").unwrap_err(), fatal("Invalid --nice value, out of range (+/- 2147483645)", 255));
        assert_eq!(err(&["--open-mode=bogus"]), fatal("Invalid --open-mode specification", 255));
        assert!(opts_of(&["--open-mode=Append", "--get-user-env=10L", "--get-user-env"]).is_ok());
        assert_eq!(err(&["--get-user-env=5x"]), fatal("Invalid --get-user-env specification", 255));
        assert_eq!(err(&["--profile=bogus"]), fatal("invalid --profile=bogus option", 255));
        assert!(opts_of(&["--profile=TaskX", "--acctg-freq=30,ENERGY=5,network=0", "--acctg-freq=xfilesystem=7"]).is_ok());
        assert_eq!(
            err(&["--acctg-freq=task=30,energy=x,bogus"]).lines,
            vec!["sbatch: error: Invalid --acctg-freq specification: energy=x", "sbatch: error: Invalid --acctg-freq specification: bogus"]
        );
        assert!(opts_of(&["--acctg-freq=-1"]).is_err(), "-1 is no frequency");
        assert_eq!(err(&["--gpu-bind=map_gpu:0x1"]).lines, vec![
            "sbatch: error: Failed to validate 0x1, offending character is x",
            "sbatch: error: Invalid --gpu-bind argument: gpu:map_gpu:0x1",
        ]);
        for ok in ["closest", "none", "map_gpu:0,1", "mask_gpu:0x3,f", "map_gpu:1*2", "single:x", "verbose,closest", "Verbose,map_gpu:2"] {
            assert!(opts_of(&[&format!("--gpu-bind={ok}")]).is_ok(), "{ok}");
        }
        for bad in ["bogus", "per_task:-1", "", "mask_gpu:z"] {
            assert!(opts_of(&[&format!("--gpu-bind={bad}")]).is_err(), "{bad}");
        }
        assert_eq!(err(&["--cpus-per-gpu=0"]), fatal("Invalid numeric value \"0\" for --cpus-per-gpu.", 1));
        assert_eq!(err(&["--ntasks-per-socket=x"]).code, 1);
        assert_eq!(err(&["--mem-per-gpu=x"]), fatal("Invalid --mem-per-gpu specification", 255));
        assert!(check_propagate("STACK,RLIMIT_CORE").is_ok() && check_propagate("ALL").is_ok() && check_propagate("NONE").is_ok());
        assert_eq!(check_propagate("stack").unwrap_err().lines, vec![
            "sbatch: error: Bad rlimit name: stack",
            "sbatch: error: --propagate=stack is not valid.",
        ]);
        assert_eq!(opts_of(&["--propagate"]).unwrap().propagate.as_deref(), Some("ALL"));
    }

    /// Slurm 22.05's `_parse_array_tok` on the expressions recorded in goldens-extra (a06).
    #[test]
    fn array_expressions_as_slurm_reads_them() {
        let r = |s: u32, e: u32, st: u32| ArrayRange { start: s, end: e, step: st };
        assert_eq!(parse_array("1-10:3").ranges, vec![r(1, 10, 3)]);
        assert_eq!(parse_array("[1-3]").ranges, vec![r(1, 3, 1)]);
        assert_eq!(parse_array("1,3,5-7").ranges, vec![r(1, 1, 1), r(3, 3, 1), r(5, 7, 1)]);
        assert_eq!(parse_array("0-15%4").max_running, Some(4));
        assert_eq!(parse_array("1-3%0").max_running, None, "a throttle of 0 is none");
        for bad in ["5-1", "-1", "4:2", "1-5:0", "1-3x", "a"] {
            assert!(parse_array(bad).ranges.is_empty(), "{bad} is refused by the controller");
        }
        assert_eq!(parse_array("1,,2").ranges, vec![r(1, 1, 1), r(2, 2, 1)], "empty tokens are skipped (strtok)");
    }

    #[test]
    fn option_values_and_errors() {
        let o = opts_of(&["-J", "n", "--time=10", "-N2", "--gres=gpu:h100:3", "--mem=4G", "--array=0-5%2", "--parsable"]).unwrap();
        assert_eq!(o.job.name.as_deref(), Some("n"));
        assert_eq!(o.job.time_limit, Some(TimeLimitWire::Minutes(10)));
        assert_eq!(o.job.nodes_min, Some(2));
        assert_eq!(o.job.gres[0].gpu_type.as_deref(), Some("h100"));
        assert_eq!(o.job.mem_per_node_mib, Some(4096));
        assert_eq!(o.job.array.as_ref().unwrap().max_running, Some(2));
        assert!(o.parsable);
        // Goldens 0050, 0056, 0076, 0077.
        assert_eq!(
            opts_of(&["--bogus"]).unwrap_err(),
            Fatal {
                lines: vec!["sbatch: unrecognized option '--bogus'".into(), "Try \"sbatch --help\" for more information".into()],
                code: 255
            }
        );
        assert_eq!(opts_of(&["-t", "abc"]).unwrap_err(), fatal("Invalid --time specification", 255));
        assert_eq!(opts_of(&["--mem=12Q"]).unwrap_err(), fatal("Invalid --mem specification", 255));
        assert_eq!(opts_of(&["-N", "abc"]).unwrap_err(), fatal("\"abc\" is not a valid node count", 255));
        let o = opts_of(&["--topology=pod", "--preemptible", "--checkpoint-bytes=980G"]).unwrap();
        assert_eq!(o.job.topology.as_deref(), Some("pod"));
        assert!(o.job.preemptible);
        assert_eq!(o.job.checkpoint_bytes, Some(980 << 30));
        assert_eq!(opts_of(&["--topology=rack"]).unwrap_err().code, 255);
    }

    #[test]
    fn elastic_options() {
        // -N MIN-MAX --elastic, a step and a signal.
        let o = opts_of(&["-N", "2-8", "--elastic", "--elastic-step=2", "--elastic-signal=USR1"]).unwrap();
        assert!(o.elastic);
        assert_eq!((o.job.nodes_min, o.job.nodes_max), (Some(2), Some(8)));
        assert_eq!(o.elastic_req, flotilla_proto::ElasticRequest { gpus_max: None, step: Some(2), signal: Some(10) });
        assert_eq!(check_elastic(&o), Ok(()));
        // --gpus=[type:]MIN-MAX.
        let o = opts_of(&["--gpus=h100:4-16", "--elastic"]).unwrap();
        assert_eq!(o.job.gpus, Some(GpuCount { gpu_type: Some("h100".into()), count: 4 }));
        assert_eq!(o.elastic_req.gpus_max, Some(16));
        // Without --elastic, -N MIN-MAX keeps Slurm's meaning; a --gpus range is refused as
        // Slurm refuses it, and the elastic options need --elastic.
        let o = opts_of(&["-N", "2-8"]).unwrap();
        assert!(!o.elastic);
        assert_eq!(check_elastic(&o), Ok(()));
        assert_eq!(
            check_elastic(&opts_of(&["--gpus=4-8"]).unwrap()),
            Err(fatal("Batch job submission failed: Invalid generic resource (gres) specification", 1))
        );
        assert_eq!(check_elastic(&opts_of(&["-N2-4", "--elastic-step=2"]).unwrap()).unwrap_err().code, 255);
        assert_eq!(opts_of(&["--elastic-step=0"]).unwrap_err().code, 1, "parse_int's exit status");
        assert_eq!(opts_of(&["--elastic-signal=NOPE"]).unwrap_err(), fatal("Invalid --elastic-signal specification: NOPE", 255));
        // Plain --gpus counts are unchanged.
        assert_eq!(parse_gpu_range("a100:2"), (GpuCount { gpu_type: Some("a100".into()), count: 2 }, None));
    }

    #[test]
    fn tres_per_node_as_sbatch_writes_it() {
        // goldens-extra 0401, 0402, 0405, 0407, 0408, 0410.
        assert_eq!(tres_per_node(None, Some("gpu:2")).as_deref(), Some("gres:gpu:2"));
        assert_eq!(tres_per_node(None, Some("gpu")).as_deref(), Some("gres:gpu"));
        assert_eq!(tres_per_node(None, Some("gpu:0")).as_deref(), Some("gres:gpu:0"));
        assert_eq!(tres_per_node(Some("2"), None).as_deref(), Some("gres:gpu:2"));
        assert_eq!(tres_per_node(Some("h100:1"), Some("gpu:h100:3,gres:gpu:1")).as_deref(), Some("gres:gpu:h100:1,gres:gpu:h100:3,gres:gpu:1"));
        assert_eq!(tres_per_node(None, Some("none")), None);
        assert_eq!(tres_per_node(None, None), None);
        let o = opts_of(&["--gpus-per-socket=1", "--sockets-per-node=2", "--gres=none"]).unwrap();
        assert_eq!(o.job.gpus_per_socket, Some(GpuCount { gpu_type: None, count: 1 }));
        assert_eq!(o.job.sockets_per_node, Some(2));
        assert!(o.job.gres.is_empty());
    }

    #[test]
    fn signal_begin_gpus() {
        let s = parse_signal_spec("B:USR2@30").unwrap();
        assert_eq!((s.signal, s.secs_before, s.batch_only), (12, 30, true));
        let s = parse_signal_spec("USR2@90").unwrap();
        assert_eq!((s.signal, s.secs_before, s.batch_only), (12, 90, false));
        assert_eq!(parse_gpu_count("abc"), GpuCount { gpu_type: Some("abc".into()), count: 1 });
        assert_eq!(parse_gpu_count("h100:4"), GpuCount { gpu_type: Some("h100".into()), count: 4 });
    }

    fn run_sbatch(args: &[&str], stdin: &[u8]) -> (String, String, i32) {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut input: &[u8] = stdin;
        let env = |k: &str| (k == "SLURM_CONF").then(|| "/nonexistent/slurm.conf".to_string());
        let mut a = vec!["sbatch".to_string()];
        a.extend(args.iter().map(|s| s.to_string()));
        let code = run(&a, &mut Io { out: &mut out, err: &mut err, env: &env, stdin: Some(&mut input) });
        (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap(), code)
    }

    #[test]
    fn script_errors_before_contacting_the_controller() {
        // Goldens 0051-0054, 0079; CONTRACT.md §A-3.
        assert_eq!(run_sbatch(&[], b""), (String::new(), "sbatch: error: Batch script is empty!\n".into(), 1));
        let (_, e, c) = run_sbatch(&[], b"echo hi\n");
        assert_eq!(c, 1);
        assert!(e.starts_with("sbatch: error: This does not look like a batch script.  The first\n"));
        let (_, e, c) = run_sbatch(&["/nonexistent/x.sh"], b"");
        assert_eq!((e.as_str(), c), ("sbatch: error: Unable to open file /nonexistent/x.sh\n", 1));
        let (_, e, c) = run_sbatch(&["--wrap", "true", "x.sh"], b"");
        assert_eq!((e.as_str(), c), ("sbatch: error: Script arguments not permitted with --wrap option\n", 1));
        assert_eq!(run_sbatch(&["--version"], b"").0, "slurm-wlm 22.05.8\n");
        // A config that cannot be read is a failure to reach the controller, exit 1.
        let (o, e, c) = run_sbatch(&["--wrap", "true"], b"");
        assert_eq!(o, "");
        assert_eq!(e, "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n");
        assert_eq!(c, 1);
    }
}
