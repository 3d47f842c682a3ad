//! `srun`: runs a job step (Slurm 22.05 srun(1)).
//!
//! Inside an allocation the job is found from `SLURM_JOB_ID` (or `SLURM_JOBID`, `--jobid`)
//! alone; outside one, `srun` first creates an interactive allocation (as `salloc` does),
//! runs the step in it and gives it back. The controller creates the step and sends each node
//! daemon its tasks; the node daemons connect back to the port `srun` listens on, present the
//! step's I/O key, and stream the tasks' output and exit statuses. `srun` forwards SIGINT,
//! SIGTERM, SIGUSR1 and SIGUSR2 to every task and its standard input to them; it prints
//! output as it comes (`-l`: each line prefixed by its task id, `%*d: ` wide enough for the
//! highest id), reports failed tasks like Slurm (`srun: error: gpu01: task 3: Exited with exit
//! code 2`), reports the step's end to the controller and exits with the worst task's status
//! (a signal `s` counts as `128 + s`).
//!
//! Exit status: 255 for option errors (getopt's texts), 1 when the step cannot be created
//! (`srun: error: Unable to create step for job N: <Slurm text>`, or for a `SLURM_JOB_ID`
//! naming no job `srun: error: Unable to confirm allocation for job N: Invalid job id
//! specified` and `srun: Check SLURM_JOB_ID environment variable. Expired or invalid job N`).

use crate::alloc;
use crate::common::{self, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use flotilla_proto::errno::{ESLURM_INVALID_JOB_ID, ESLURM_NODES_BUSY};
use flotilla_proto::step::{read_msg, write_msg, SrunIo, StepComplete, StepIo, StepLayout, StepRequest};
use flotilla_proto::{Request, Response};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const fn c(ch: char) -> u32 {
    ch as u32
}

const O_GPUS_PER_TASK: u32 = 1000;
const O_GPUS_PER_NODE: u32 = 1001;
const O_GRES: u32 = 1002;
const O_NTASKS_PER_NODE: u32 = 1003;
const O_OVERLAP: u32 = 1004;
const O_EXCLUSIVE: u32 = 1005;
const O_EXPORT: u32 = 1006;
const O_MEM: u32 = 1007;
const O_MEM_PER_CPU: u32 = 1008;
const O_JOBID: u32 = 1009;
const O_HELP: u32 = 1010;
const O_IGNORED_ARG: u32 = 1011;
const O_IGNORED: u32 = 1012;
const O_MPI: u32 = 1013;
const O_MINCPUS: u32 = 1014;
const O_RESERVATION: u32 = 1015;
const O_EXACT: u32 = 1016;
const O_WHOLE: u32 = 1017;

/// srun's getopt string (Slurm 22.05 `opt.c`); `+`: stop at the program name.
pub const SHORTS: &str = "+A:b:B:c:C:d:D:e:EG:hHi:I::jJ:k::K::lL:m:M:n:N:o:Op:q:QsS:t:T:uvVw:W:x:XZ";

/// srun's long options (Slurm 22.05 `opt.c`).
pub const LONGS: &[LongOpt] = &[
    lo("account", HasArg::Required, c('A')),
    lo("chdir", HasArg::Required, c('D')),
    lo("constraint", HasArg::Required, c('C')),
    lo("cpu-bind", HasArg::Required, O_IGNORED_ARG),
    lo("cpu_bind", HasArg::Required, O_IGNORED_ARG),
    lo("cpus-per-task", HasArg::Required, c('c')),
    lo("distribution", HasArg::Required, c('m')),
    lo("error", HasArg::Required, c('e')),
    lo("exact", HasArg::No, O_EXACT),
    lo("exclude", HasArg::Required, c('x')),
    lo("exclusive", HasArg::Optional, O_EXCLUSIVE),
    lo("export", HasArg::Required, O_EXPORT),
    lo("gpus", HasArg::Required, c('G')),
    lo("gpus-per-node", HasArg::Required, O_GPUS_PER_NODE),
    lo("gpus-per-task", HasArg::Required, O_GPUS_PER_TASK),
    lo("gpu-bind", HasArg::Required, O_IGNORED_ARG),
    lo("gres", HasArg::Required, O_GRES),
    lo("help", HasArg::No, O_HELP),
    lo("hint", HasArg::Required, O_IGNORED_ARG),
    lo("immediate", HasArg::Optional, c('I')),
    lo("input", HasArg::Required, c('i')),
    lo("job-name", HasArg::Required, c('J')),
    lo("jobid", HasArg::Required, O_JOBID),
    lo("kill-on-bad-exit", HasArg::Optional, c('K')),
    lo("label", HasArg::No, c('l')),
    lo("mem", HasArg::Required, O_MEM),
    lo("mem-per-cpu", HasArg::Required, O_MEM_PER_CPU),
    lo("mincpus", HasArg::Required, O_MINCPUS),
    lo("mpi", HasArg::Required, O_MPI),
    lo("no-kill", HasArg::Optional, c('k')),
    lo("nodelist", HasArg::Required, c('w')),
    lo("nodes", HasArg::Required, c('N')),
    lo("ntasks", HasArg::Required, c('n')),
    lo("ntasks-per-node", HasArg::Required, O_NTASKS_PER_NODE),
    lo("output", HasArg::Required, c('o')),
    lo("overcommit", HasArg::No, c('O')),
    lo("overlap", HasArg::No, O_OVERLAP),
    lo("partition", HasArg::Required, c('p')),
    lo("qos", HasArg::Required, c('q')),
    lo("quiet", HasArg::No, c('Q')),
    lo("reservation", HasArg::Required, O_RESERVATION),
    lo("time", HasArg::Required, c('t')),
    lo("unbuffered", HasArg::No, c('u')),
    lo("usage", HasArg::No, O_HELP),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("wait", HasArg::Required, c('W')),
    lo("whole", HasArg::No, O_WHOLE),
    lo("x11", HasArg::Optional, O_IGNORED),
];

/// Options, typed.
#[derive(Debug, Clone, Default)]
struct Opts {
    step: StepRequest,
    /// Words for the allocation's job request (sbatch's option syntax).
    alloc_words: Vec<String>,
    label: bool,
    jobid: Option<u64>,
    export: Option<String>,
    chdir: Option<String>,
    quiet: bool,
    /// `-N MIN-MAX`'s maximum, above the minimum (`step.nodes`).
    nodes_max: Option<u32>,
    /// Slurm's warnings about counts given together ([`reconcile_counts`]), printed first.
    notes: Vec<String>,
    /// `--whole` (Slurm 22.05's default anyway; refused with `--exact`).
    whole: bool,
}

/// What ends `srun` early: lines for stderr and the exit status.
#[derive(Debug)]
struct Fatal {
    lines: Vec<String>,
    code: i32,
}

fn fatal(msg: impl Into<String>, code: i32) -> Fatal {
    Fatal {
        lines: vec![format!("srun: error: {}", msg.into())],
        code,
    }
}

/// A positive count as Slurm's `parse_int` reads it ([`crate::common::parse_int`]; exit 1).
fn count(a: &str, opt: &str) -> Result<u32, Fatal> {
    crate::common::parse_int(a, opt, true).map(|n| n as u32).map_err(|m| fatal(m, 1))
}

/// Runs `srun` with `args` (`args[0]` is the program name); returns its exit status.
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

fn parse(argv: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<(Opts, Vec<String>), Fatal> {
    let p = getopt_long("srun", argv, SHORTS, LONGS).map_err(|m| Fatal {
        lines: vec![m, "Try \"srun --help\" for more information".into()],
        code: 255,
    })?;
    let mut o = Opts::default();
    for opt in &p.opts {
        let a = opt.arg.clone().unwrap_or_default();
        let word = |o: &mut Opts| {
            if opt.spelled.starts_with("--") {
                o.alloc_words.push(match &opt.arg {
                    Some(v) => format!("{}={v}", opt.spelled),
                    None => opt.spelled.clone(),
                });
            } else {
                o.alloc_words.push(opt.spelled.clone());
                if let Some(v) = &opt.arg {
                    o.alloc_words.push(v.clone());
                }
            }
        };
        match opt.id {
            O_HELP => {
                return Err(Fatal {
                    lines: vec!["Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]] [ : [OPTIONS(N)...]] executable(N) [args(N)...]".into()],
                    code: 0,
                })
            }
            x if x == c('V') => {
                return Err(Fatal {
                    lines: vec!["slurm 22.05.8".into()],
                    code: 0,
                })
            }
            x if x == c('n') => {
                o.step.ntasks = Some(count(&a, "--ntasks")?);
                word(&mut o);
            }
            x if x == c('N') => {
                let (min, max) = crate::sbatch::parse_nodes(&a).ok_or_else(|| fatal(format!("\"{a}\" is not a valid node count"), 255))?;
                o.step.nodes = Some(min);
                o.nodes_max = max.filter(|&m| m > min);
                word(&mut o);
            }
            x if x == c('c') => {
                o.step.cpus_per_task = Some(count(&a, "--cpus-per-task")?);
                word(&mut o);
            }
            O_EXACT => o.step.exact = true,
            O_WHOLE => o.whole = true,
            x if x == c('w') => {
                o.step.nodelist = flotilla_core::hostlist::expand(&a).map_err(|_| fatal(format!("Invalid node name specified: {a}"), 255))?;
                word(&mut o);
            }
            // Its allocation word follows [`reconcile_counts`], which may drop it.
            O_NTASKS_PER_NODE => o.step.ntasks_per_node = Some(count(&a, "--ntasks-per-node")?),
            O_GPUS_PER_TASK => {
                let g = crate::sbatch::parse_gpu_count(&a);
                o.step.gpus_per_task = Some(g.count);
                word(&mut o);
            }
            O_OVERLAP => o.step.overlap = true,
            // `--exclusive` (or `=exclusive`) implies `--exact` (slurm_opt.c arg_set_exclusive).
            O_EXCLUSIVE => {
                o.step.exclusive = true;
                o.step.exact |= opt.arg.as_deref().is_none_or(|v| v.eq_ignore_ascii_case("exclusive"));
            }
            x if x == c('l') => o.label = true,
            x if x == c('o') => o.step.stdout = Some(a),
            x if x == c('e') => o.step.stderr = Some(a),
            x if x == c('J') => {
                o.step.name = a;
                word(&mut o);
            }
            x if x == c('D') => o.chdir = Some(a),
            x if x == c('Q') => o.quiet = true,
            O_EXPORT => o.export = Some(a),
            O_JOBID => {
                o.jobid = Some(a.split('.').next().unwrap_or("").parse().map_err(|_| fatal(format!("Invalid job id: {a}"), 255))?)
            }
            x if [c('A'), c('C'), c('G'), c('p'), c('q'), c('t'), c('x')].contains(&x) => word(&mut o),
            O_GPUS_PER_NODE | O_GRES | O_MEM | O_MEM_PER_CPU | O_RESERVATION => word(&mut o),
            // Checked as Slurm's `parse_int`; an allocation option (sbatch's, unused there).
            O_MINCPUS => {
                count(&a, "--mincpus")?;
                word(&mut o);
            }
            // Accepted; no effect in Flotilla (-u: output is always forwarded as it comes).
            _ => {}
        }
    }
    if o.step.ntasks.is_none() {
        // The input environment variable stands for -n (srun(1) "INPUT ENVIRONMENT").
        o.step.ntasks = env("SLURM_NTASKS").and_then(|v| v.parse().ok()).filter(|&n| n > 0 && o.step.nodes.is_none());
    }
    // Input environment (libsrun/opt.c env_vars: below the command line; flags set by any
    // value).
    if o.step.cpus_per_task.is_none() {
        if let Some(v) = env("SRUN_CPUS_PER_TASK") {
            o.step.cpus_per_task = Some(count(&v, "--cpus-per-task")?);
            o.alloc_words.push(format!("--cpus-per-task={v}"));
        }
    }
    o.step.exact |= env("SLURM_EXACT").is_some();
    o.step.overlap |= env("SLURM_OVERLAP").is_some();
    if o.step.exact && o.whole {
        // srun/libsrun/opt.c _opt_verify (before -c implies --exact, which --whole does not stop).
        return Err(fatal("--exact and --whole are mutually exclusive.", 1));
    }
    // -c implies --exact (libsrun/launch.c, where the step request is built).
    o.step.exact |= o.step.cpus_per_task.is_some();
    o.notes = reconcile_counts(&mut o, env);
    if let Some(t) = o.step.ntasks_per_node {
        o.alloc_words.push(format!("--ntasks-per-node={t}"));
    }
    Ok((o, p.operands))
}

/// Slurm 22.05 srun's reconciliation of a node count and a task count given together
/// (libsrun/opt.c `_opt_verify`). The nodes are `-N`'s minimum, at least `-w`'s nodes, or
/// inside an allocation its `SLURM_JOB_NUM_NODES`; the tasks `-n` (or `SLURM_NTASKS` as
/// [`parse`] reads it). Fewer tasks than nodes lower the nodes to the tasks ("can't run 2
/// processes on 3 nodes, setting nnodes to 2": `srun -n 2` in a 3-node job; the controller
/// lays a step out on no more nodes than tasks anyway); a `--ntasks-per-node` (or
/// `SLURM_NTASKS_PER_NODE`, which sbatch exports) other than tasks / nodes is dropped, with
/// a warning when the tasks exceed it: a plain `srun` in `sbatch -n 10 --ntasks-per-node=4`
/// (3 nodes) runs its 10 tasks 4 + 3 + 3 after "can't honor --ntasks-per-node set to 4 ...",
/// `srun -n 2` in `-N 2 --ntasks-per-node=3` drops it silently (checked on the reference,
/// goldens-extra 0435). Returns the warnings, without `srun: `.
fn reconcile_counts(o: &mut Opts, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let num = |k: &str| env(k).and_then(|v| v.trim().parse::<u32>().ok()).filter(|&n| n > 0);
    let mut notes = Vec::new();
    let Some(ntasks) = o.step.ntasks.filter(|&n| n > 0) else {
        return notes;
    };
    let listed = {
        let mut names: Vec<&String> = o.step.nodelist.iter().collect();
        names.sort();
        names.dedup();
        names.len() as u32
    };
    let Some(mut nodes) = o.step.nodes.or_else(|| num("SLURM_JOB_NUM_NODES")).map(|n| n.max(listed)).or((listed > 0).then_some(listed)) else {
        return notes;
    };
    o.nodes_max = o.nodes_max.map(|m| m.min(ntasks));
    if ntasks < nodes {
        notes.push(format!("Warning: can't run {ntasks} processes on {nodes} nodes, setting nnodes to {ntasks}"));
        nodes = ntasks;
        if o.step.nodes.is_some_and(|n| n > ntasks) {
            o.step.nodes = Some(ntasks);
            o.alloc_words.push(format!("--nodes={ntasks}"));
        }
    }
    o.nodes_max = o.nodes_max.filter(|&m| o.step.nodes.is_some_and(|n| m > n));
    let per_node = o.step.ntasks_per_node.or_else(|| num("SLURM_NTASKS_PER_NODE"));
    if let Some(p) = per_node.filter(|&p| p != ntasks / nodes) {
        if ntasks > p {
            notes.push(format!(
                "Warning: can't honor --ntasks-per-node set to {p} which doesn't match the requested tasks {ntasks} with the number of requested nodes {nodes}. Ignoring --ntasks-per-node."
            ));
        }
        o.step.ntasks_per_node = None;
    }
    notes
}

fn main(args: &[String], io: &mut Io<'_>) -> Result<i32, Fatal> {
    let argv = args.get(1..).unwrap_or(&[]);
    let (mut o, program) = match parse(argv, io.env) {
        Ok(x) => x,
        Err(f) if f.code == 0 => {
            for l in &f.lines {
                io.out(&format!("{l}\n"));
            }
            return Ok(0);
        }
        Err(f) => return Err(f),
    };
    // Printed even with `-Q` (as Slurm's srun does: checked on the reference).
    for n in &o.notes {
        io.err(&format!("srun: {n}\n"));
    }
    if program.is_empty() {
        return Err(Fatal {
            lines: vec!["srun: fatal: No command given to execute.".into()],
            code: 1,
        });
    }
    let ctl = Ctl::new(io.env).map_err(|e| fatal(format!("Unable to confirm allocation for job: {}", e.slurm().text), 1))?;
    let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into());
    let work_dir = match &o.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) => format!("{cwd}/{d}"),
        None => cwd,
    };
    if o.step.name.is_empty() {
        o.step.name = program[0].rsplit('/').next().unwrap_or(&program[0]).to_string();
    }
    let env_job = o
        .jobid
        .or_else(|| ["SLURM_JOB_ID", "SLURM_JOBID"].iter().find_map(|k| (io.env)(k).and_then(|v| v.trim().parse().ok())));
    let conf_path = flotilla_conf::conf_path(io.env).to_string_lossy().into_owned();
    let mut environment = crate::sbatch::environment_for(o.export.as_deref());
    // Inside the job, commands must find the controller even without SLURM_* variables.
    environment.retain(|(k, _)| k != "FLOTILLA_CONF");
    environment.push(("FLOTILLA_CONF".into(), conf_path.clone()));
    // A node range's step runs on as many of the allocation's nodes as the range allows
    // (Slurm 22.05 step_mgr: the step's `max_nodes` bounds a selection of every usable node):
    // an `srun -N2-5` that made a 4-node allocation runs 4 tasks.
    let range_nodes = |o: &mut Opts, n: Option<u32>| {
        if let (Some(min), Some(max), Some(n)) = (o.step.nodes, o.nodes_max, n) {
            o.step.nodes = Some(n.clamp(min, max));
        }
    };
    let (job_id, own) = match env_job {
        Some(id) => {
            range_nodes(&mut o, (io.env)("SLURM_JOB_NUM_NODES").and_then(|v| v.trim().parse().ok()));
            (id, false)
        }
        None => {
            let mut opts = crate::sbatch::parse_options(&o.alloc_words).map_err(|f| Fatal {
                lines: f.lines.into_iter().map(|l| l.replacen("sbatch", "srun", 1)).collect(),
                code: f.code,
            })?;
            let job = &mut opts.job;
            job.name = Some(o.step.name.clone());
            job.work_dir = work_dir.clone();
            job.uid = common::my_uid();
            job.gid = common::my_gid();
            // `job.user` stays empty: the controller names the user from the uid it authenticated.
            job.submit_host = common::hostname();
            job.environment = environment.clone();
            match alloc::allocate(&ctl, opts.job, "srun", io) {
                Ok(j) => {
                    range_nodes(&mut o, Some(j.num_nodes));
                    for (k, v) in alloc::alloc_env(&j, &ctl.conf.cluster_name, &conf_path, o.step.ntasks.is_some()) {
                        environment.retain(|(ek, _)| *ek != k);
                        environment.push((k, v));
                    }
                    (j.job_id, true)
                }
                Err(e) => return Err(Fatal { lines: e.lines, code: e.code }),
            }
        }
    };
    let code = run_step(&ctl, &mut o, job_id, program, environment, work_dir, io);
    if own {
        let (exit_code, signal) = match code {
            Ok(c) if c > 128 => (0, c - 128),
            Ok(c) => (c, 0),
            Err(_) => (1, 0),
        };
        let _ = alloc::release(&ctl, job_id, exit_code, signal);
    }
    code
}

/// The IP address node daemons reach this host at: the local address of a route to the
/// controller (127.0.0.1 when there is none).
fn own_address(ctl: &Ctl) -> String {
    let host = if ctl.conf.control_addr.is_empty() { "127.0.0.1" } else { ctl.conf.control_addr.as_str() };
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect((host, ctl.conf.slurmctld_port))?;
            s.local_addr()
        })
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_unspecified())
        .map_or_else(|| "127.0.0.1".to_string(), |ip| ip.to_string())
}

enum Ev {
    Io(StepIo),
    Closed,
    Signal(i32),
    /// A node that joined an elastic job runs its share of the step (its connection and its
    /// index in the step's layout).
    Joined(TcpStream, u32),
}

/// Reads the step's first frame from a new connection: the node index when it names this
/// step with its key.
fn hello(s: &TcpStream, job_id: u64, step_id: u32, key: &[u8]) -> Option<(TcpStream, u32)> {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut r = s.try_clone().ok()?;
    match read_msg::<_, StepIo>(&mut r) {
        Ok(StepIo::Hello { job_id: j, step_id: st, io_key, node_index }) if j == job_id && st == step_id && io_key == key => {
            let _ = r.set_read_timeout(None);
            Some((r, node_index))
        }
        _ => None,
    }
}

/// Forwards a node's frames to the main loop until it closes.
fn read_node(mut r: TcpStream, tx: mpsc::Sender<Ev>) {
    std::thread::spawn(move || {
        while let Ok(m) = read_msg::<_, StepIo>(&mut r) {
            if tx.send(Ev::Io(m)).is_err() {
                return;
            }
        }
        let _ = tx.send(Ev::Closed);
    });
}

fn run_step(
    ctl: &Ctl,
    o: &mut Opts,
    job_id: u64,
    program: Vec<String>,
    environment: Vec<(String, String)>,
    work_dir: String,
    io: &mut Io<'_>,
) -> Result<i32, Fatal> {
    // Signals to forward are taken by one thread (blocked everywhere else).
    let fwd = [
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGUSR1,
        nix::sys::signal::Signal::SIGUSR2,
    ];
    let mut set = nix::sys::signal::SigSet::empty();
    for s in fwd {
        set.add(s);
    }
    let _ = set.thread_block();
    let listener = TcpListener::bind("0.0.0.0:0").map_err(|e| fatal(format!("cannot listen for step i/o: {e}"), 1))?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let key = flotilla_proto::auth::random_bytes(16).map_err(|e| fatal(format!("no random bytes: {e}"), 1))?;
    o.step.job_id = job_id;
    o.step.argv = program;
    o.step.environment = environment;
    o.step.work_dir = work_dir;
    o.step.srun_addr = format!("{}:{port}", own_address(ctl));
    o.step.srun_host = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_default();
    o.step.srun_pid = std::process::id();
    o.step.io_key = key.clone();
    o.step.uid = common::my_uid();
    o.step.gid = common::my_gid();
    let mut waited = false;
    let layout: StepLayout = loop {
        match ctl.call(Request::CreateStep(Box::new(o.step.clone()))) {
            Ok(Response::StepCreated(l)) => break l,
            Ok(_) => return Err(fatal(format!("Unable to create step for job {job_id}: Unexpected message received"), 1)),
            Err(e) => {
                let se = e.slurm();
                if se.code == ESLURM_NODES_BUSY {
                    if !waited && !o.quiet {
                        io.err(&format!("srun: Job {job_id} step creation temporarily disabled, retrying (Requested nodes are busy)\n"));
                    }
                    waited = true;
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
                if se.code == ESLURM_INVALID_JOB_ID {
                    // srun's allocation lookup (allocate.c): a job id from the environment
                    // that names no job.
                    return Err(Fatal {
                        lines: vec![
                            format!("srun: error: Unable to confirm allocation for job {job_id}: {}", se.text),
                            format!("srun: Check SLURM_JOB_ID environment variable. Expired or invalid job {job_id}"),
                        ],
                        code: 1,
                    });
                }
                return Err(fatal(format!("Unable to create step for job {job_id}: {}", se.text), 1));
            }
        }
    };
    if waited && !o.quiet {
        // libsrun/launch.c launch_common_create_job_step, after a wait.
        io.err(&format!("srun: Step created for job {job_id}\n"));
    }
    let (tx, rx) = mpsc::channel::<Ev>();
    {
        let tx = tx.clone();
        std::thread::spawn(move || loop {
            match set.wait() {
                Ok(sig) => {
                    if tx.send(Ev::Signal(sig as i32)).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        });
    }
    // Accept one connection per node, each presenting the step's key.
    let nnodes = layout.nodes.len();
    let mut writers: Vec<TcpStream> = Vec::new();
    let _ = listener.set_nonblocking(true);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut open = 0usize;
    while writers.len() < nnodes {
        match listener.accept() {
            Ok((s, _)) => {
                let Some((r, _)) = hello(&s, job_id, layout.step_id, &key) else { continue };
                read_node(r, tx.clone());
                open += 1;
                writers.push(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    io.err(&format!("srun: error: timed out waiting for the tasks of StepId={job_id}.{}\n", layout.step_id));
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => break,
        }
    }
    // Standard input goes to every task.
    {
        let mut ws: Vec<TcpStream> = writers.iter().filter_map(|w| w.try_clone().ok()).collect();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin();
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => {
                        for w in &mut ws {
                            let _ = write_msg(w, &SrunIo::StdinEof);
                        }
                        return;
                    }
                    Ok(n) => {
                        for w in &mut ws {
                            let _ = write_msg(w, &SrunIo::Stdin(buf[..n].to_vec()));
                        }
                    }
                }
            }
        });
    }
    // Nodes that join later (an elastic job grew: the controller starts the step's workers
    // there) connect as the first ones did.
    if listener.set_nonblocking(false).is_ok() {
        let tx = tx.clone();
        let (step_id, key) = (layout.step_id, key.clone());
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                if let Some((_, index)) = hello(&s, job_id, step_id, &key) {
                    if tx.send(Ev::Joined(s, index)).is_err() {
                        return;
                    }
                }
            }
        });
    }
    // Kept for the readers of nodes that join; the loop below ends on its own conditions.
    let tx_late = tx.clone();
    drop(tx);
    let mut ntasks = layout.ntasks() as usize;
    let per_node = layout.tasks.first().map_or(1, Vec::len);
    let width = ntasks.saturating_sub(1).to_string().len();
    let mut node_of: BTreeMap<u32, String> = layout
        .tasks
        .iter()
        .zip(&layout.nodes)
        .flat_map(|(ts, n)| ts.iter().map(move |&t| (t, n.clone())))
        .collect();
    let mut partial: BTreeMap<(u32, bool), Vec<u8>> = BTreeMap::new();
    let mut exits: BTreeMap<u32, (i32, i32)> = BTreeMap::new();
    let emit = |io: &mut Io<'_>, task: u32, err: bool, data: &[u8], flush_all: bool, partial: &mut BTreeMap<(u32, bool), Vec<u8>>| {
        let sink: &mut dyn std::io::Write = if err { &mut *io.err } else { &mut *io.out };
        if !o.label {
            let _ = sink.write_all(data);
            let _ = sink.flush();
            return;
        }
        let buf = partial.entry((task, err)).or_default();
        buf.extend_from_slice(data);
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let _ = write!(sink, "{task:>width$}: ");
            let _ = sink.write_all(&line);
        }
        if flush_all && !buf.is_empty() {
            let _ = write!(sink, "{task:>width$}: ");
            let _ = sink.write_all(buf);
            let _ = sink.write_all(b"\n");
            buf.clear();
        }
        let _ = sink.flush();
    };
    let mut aborted = false;
    while exits.len() < ntasks && open > 0 {
        let Ok(ev) = rx.recv() else { break };
        match ev {
            Ev::Io(StepIo::Stdout { task, data }) => emit(io, task, false, &data, false, &mut partial),
            Ev::Io(StepIo::Stderr { task, data }) => emit(io, task, true, &data, false, &mut partial),
            Ev::Io(StepIo::TaskExit { task, exit_code, signal }) => {
                emit(io, task, false, &[], true, &mut partial);
                emit(io, task, true, &[], true, &mut partial);
                exits.insert(task, (exit_code, signal));
            }
            Ev::Io(StepIo::LaunchFailed { task, message }) => {
                let node = node_of.get(&task).cloned().unwrap_or_default();
                io.err(&format!("srun: error: {node}: task {task}: {message}\n"));
            }
            // `scancel JOB.STEP` (Slurm's srun, `step_launch.c`: the notice of each node's
            // slurmstepd, and its own line once, when the controller tells it the step ended).
            Ev::Io(StepIo::Cancelled { notice, wait_s }) => {
                io.err(&String::from_utf8_lossy(&notice));
                if !aborted {
                    aborted = true;
                    io.err(&format!("srun: Job step aborted: Waiting up to {wait_s} seconds for job step to finish.\n"));
                }
            }
            Ev::Io(StepIo::Hello { .. }) => {}
            // Only nodes beyond the step's layout join (an original node too late for the
            // start counts as lost, as before).
            Ev::Joined(s, index) if index as usize >= layout.nodes.len() => {
                // Its tasks: as many as on the step's first node, ids after the last.
                if let Ok(r) = s.try_clone() {
                    read_node(r, tx_late.clone());
                    open += 1;
                    for t in ntasks..ntasks + per_node {
                        node_of.insert(t as u32, format!("node{index}"));
                    }
                    ntasks += per_node;
                    writers.push(s);
                }
            }
            Ev::Joined(..) => {}
            Ev::Closed => open -= 1,
            Ev::Signal(sig) => {
                for w in &mut writers {
                    let _ = write_msg(w, &SrunIo::Signal(sig));
                }
            }
        }
    }
    // Tasks that never reported (a node lost) count as killed.
    for t in 0..ntasks as u32 {
        exits.entry(t).or_insert((0, 9));
    }
    let code = report(&exits, &node_of, io);
    let (exit_code, signal) = flotilla_proto::step::worst_end(exits.values().copied()).unwrap_or((0, 0));
    let _ = ctl.call(Request::StepComplete(StepComplete {
        job_id,
        step_id: layout.step_id,
        exit_code,
        signal,
    }));
    Ok(code)
}

/// Prints Slurm's lines for tasks that failed, per node and status (`srun: error: gpu01:
/// tasks 0-3: Exited with exit code 2`, `srun: error: gpu02: task 8: Killed`); returns the
/// worst status (exit code, or `128 + signal`).
fn report(exits: &BTreeMap<u32, (i32, i32)>, node_of: &BTreeMap<u32, String>, io: &mut Io<'_>) -> i32 {
    let mut groups: BTreeMap<(String, i32, i32), Vec<u32>> = BTreeMap::new();
    for (&t, &(c, s)) in exits {
        if c != 0 || s != 0 {
            groups.entry((node_of.get(&t).cloned().unwrap_or_default(), c, s)).or_default().push(t);
        }
    }
    let mut groups: Vec<((String, i32, i32), Vec<u32>)> = groups.into_iter().collect();
    groups.sort_by(|a, b| (&a.0 .0, a.1[0]).cmp(&(&b.0 .0, b.1[0])));
    for ((node, c, s), tasks) in &groups {
        let what = if *s != 0 {
            signal_text(*s).to_string()
        } else {
            format!("Exited with exit code {c}")
        };
        let word = if tasks.len() == 1 { "task" } else { "tasks" };
        io.err(&format!("srun: error: {node}: {word} {}: {what}\n", common::ranges(tasks)));
    }
    exits.values().map(|&(c, s)| if s != 0 { 128 + s } else { c }).max().unwrap_or(0)
}

/// `strsignal` for the signals a task commonly dies of.
fn signal_text(s: i32) -> &'static str {
    match s {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        10 => "User defined signal 1",
        11 => "Segmentation fault",
        12 => "User defined signal 2",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        _ => "Unknown signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_whole() {
        let env = |_: &str| None;
        let p = |args: &[&str]| parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &env);
        let exact = |args: &[&str]| p(args).unwrap().0.step.exact;
        assert!(!exact(&["prog"]), "Slurm 22.05's default is --whole");
        assert!(!exact(&["--whole", "prog"]));
        assert!(exact(&["--exact", "prog"]));
        assert!(exact(&["-c", "2", "prog"]), "-c implies --exact");
        assert!(exact(&["-c", "2", "--whole", "prog"]), "even with --whole (checked on the reference)");
        assert!(exact(&["--exclusive", "prog"]));
        assert!(!exact(&["--exclusive=user", "prog"]));
        let e = p(&["--exact", "--whole", "prog"]).unwrap_err();
        assert_eq!((e.lines, e.code), (vec!["srun: error: --exact and --whole are mutually exclusive.".to_string()], 1));
        // The input environment.
        let env = |k: &str| match k {
            "SLURM_EXACT" | "SLURM_OVERLAP" => Some(String::new()),
            "SRUN_CPUS_PER_TASK" => Some("3".into()),
            _ => None,
        };
        let (o, _) = parse(&["prog".to_string()], &env).unwrap();
        assert!(o.step.exact && o.step.overlap);
        assert_eq!(o.step.cpus_per_task, Some(3));
        let (o, _) = parse(&["-c", "2", "prog"].map(String::from), &env).unwrap();
        assert_eq!(o.step.cpus_per_task, Some(2), "the command line wins");
        let only_c = |k: &str| (k == "SRUN_CPUS_PER_TASK").then(|| "2".to_string());
        assert!(parse(&["prog".to_string()], &only_c).unwrap().0.step.exact, "SRUN_CPUS_PER_TASK implies --exact as -c does");
    }

    #[test]
    fn task_ranges() {
        assert_eq!(common::ranges(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(common::ranges(&[4]), "4");
    }

    #[test]
    fn options() {
        let env = |k: &str| (k == "SLURM_NTASKS").then(|| "4".to_string());
        let a: Vec<String> = ["-l", "--gpus-per-task=1", "-N", "2", "prog", "-n", "3"].iter().map(|s| s.to_string()).collect();
        let (o, prog) = parse(&a, &env).unwrap();
        assert!(o.label);
        assert_eq!(o.step.gpus_per_task, Some(1));
        assert_eq!(o.step.nodes, Some(2));
        assert_eq!(o.step.ntasks, None, "SLURM_NTASKS does not override -N's one task per node");
        assert_eq!(prog, ["prog", "-n", "3"]);
        assert_eq!(o.alloc_words, ["--gpus-per-task=1", "-N", "2"]);
        let (o, _) = parse(&["prog".to_string()], &env).unwrap();
        assert_eq!(o.step.ntasks, Some(4));
        let e = parse(&["--bogus".to_string()], &env).unwrap_err();
        assert_eq!((e.lines[0].as_str(), e.code), ("srun: unrecognized option '--bogus'", 255));
    }

    /// Counts given together, as Slurm's srun reconciles them (goldens-extra 0435).
    #[test]
    fn counts_reconciled() {
        let run = |args: &[&str], vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let env = move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let a: Vec<String> = args.iter().chain(&["prog"]).map(|s| s.to_string()).collect();
            parse(&a, &env).unwrap().0
        };
        let batch = [("SLURM_NTASKS", "10"), ("SLURM_JOB_NUM_NODES", "3"), ("SLURM_NTASKS_PER_NODE", "4")];
        let o = run(&[], &batch);
        assert_eq!(
            o.notes,
            ["Warning: can't honor --ntasks-per-node set to 4 which doesn't match the requested tasks 10 with the number of requested nodes 3. Ignoring --ntasks-per-node."]
        );
        assert_eq!((o.step.ntasks, o.step.ntasks_per_node), (Some(10), None));
        // Matching counts: nothing said, the option kept (and asked of an allocation).
        let o = run(&["-n", "8", "-N", "2", "--ntasks-per-node=4"], &[]);
        assert!(o.notes.is_empty());
        assert_eq!(o.step.ntasks_per_node, Some(4));
        assert!(o.alloc_words.contains(&"--ntasks-per-node=4".to_string()));
        // Fewer tasks than it: dropped silently.
        let o = run(&["-n", "2"], &[("SLURM_JOB_NUM_NODES", "2"), ("SLURM_NTASKS_PER_NODE", "3")]);
        assert!(o.notes.is_empty());
        assert_eq!(o.step.ntasks_per_node, None);
        // Fewer tasks than nodes: the nodes come down to the tasks, then the option is checked.
        let o = run(&["-n", "2"], &[("SLURM_JOB_NUM_NODES", "3")]);
        assert_eq!(o.notes, ["Warning: can't run 2 processes on 3 nodes, setting nnodes to 2"]);
        let o = run(&["-N", "3", "-n", "2", "--ntasks-per-node=4"], &[]);
        assert_eq!(o.notes[0], "Warning: can't run 2 processes on 3 nodes, setting nnodes to 2");
        assert_eq!(o.notes.len(), 1, "2 tasks do not exceed 4: dropped silently");
        assert_eq!(o.step.nodes, Some(2));
        assert!(!o.alloc_words.iter().any(|w| w.starts_with("--ntasks-per-node")));
        assert_eq!(o.alloc_words.last().map(String::as_str), Some("--nodes=2"));
        // No node count (an allocation of srun's own without -N): nothing to reconcile.
        let o = run(&["-n", "10", "--ntasks-per-node=4"], &[]);
        assert!(o.notes.is_empty());
        assert_eq!(o.step.ntasks_per_node, Some(4));
        // -w's nodes count as nodes.
        let o = run(&["-n", "1", "-w", "gpu01,gpu02"], &[]);
        assert_eq!(o.notes, ["Warning: can't run 1 processes on 2 nodes, setting nnodes to 1"]);
    }

    #[test]
    fn failed_tasks_are_reported_per_node() {
        let exits: BTreeMap<u32, (i32, i32)> = [(0, (0, 0)), (1, (3, 0)), (2, (3, 0)), (3, (0, 9))].into_iter().collect();
        let node_of: BTreeMap<u32, String> = [(0, "a"), (1, "a"), (2, "b"), (3, "b")].into_iter().map(|(t, n)| (t, n.to_string())).collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let env = |_: &str| None;
        let mut io = Io {
            out: &mut out,
            err: &mut err,
            env: &env,
            stdin: None,
        };
        assert_eq!(report(&exits, &node_of, &mut io), 137);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "srun: error: a: task 1: Exited with exit code 3\nsrun: error: b: task 2: Exited with exit code 3\nsrun: error: b: task 3: Killed\n"
        );
    }
}
