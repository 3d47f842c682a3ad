//! `flotilla`: Flotilla's admin command. Subcommands: `sim` (trace-driven experiments through
//! the real scheduling core), `dev up|down|status` (a local cluster, [`flotilla_admin::dev`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use flotilla_sim::progress::Progress;
use flotilla_sim::traces::openb::OpenbVariant;
use flotilla_sim::traces::TraceDir;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Parser)]
#[command(name = "flotilla", version, about = "Flotilla admin command")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay real GPU-cluster traces through the scheduling core and compare policies.
    Sim(SimArgs),
    /// A local development cluster: controller and node daemons on localhost.
    Dev(DevArgs),
    /// A local cluster running a real workload end to end: training with srun, an array, a
    /// dependency chain, a preemptible checkpointing job and an inference service; prints
    /// squeue, sinfo and sacct and exits non-zero unless every outcome is as expected.
    Demo(DemoArgs),
    /// Benchmarks of the real daemons (`scale`: the controller against emulated nodes).
    Bench(BenchArgs),
    /// Emulated node daemons: one process holding many node sessions that register and speak
    /// to the controller as slurmd does, and "run" each job for its runtime without a
    /// process (`ctl` tells nodes to disconnect, reboot, go down or up, or fail a GPU).
    Emulate(EmulateArgs),
    /// Write the man pages (section 1) of every command into a directory.
    Man {
        /// Output directory (created): `<command>.1` for each command, `flotilla-*.1` for
        /// this command's subcommands.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The controller at scale against emulated nodes on this host: registration storm,
    /// idle CPU, scheduling turn, job starts, squeue/sinfo/sacct, memory, recovery. Prints
    /// `name: value (goal: ...) met|missed` per figure, then `N/M goals met`; exits non-zero
    /// only when something went wrong (a count off, a node down, a requeue), not on a missed goal.
    Scale {
        /// Emulated nodes (8 GPUs each, pods of 32).
        #[arg(long, default_value_t = 10_000)]
        nodes: usize,
        /// Pending jobs.
        #[arg(long, default_value_t = 100_000)]
        jobs: usize,
        /// Running jobs (filling every GPU; default: half the pending jobs).
        #[arg(long)]
        running: Option<usize>,
        /// The state directory (default: a new one under $TMPDIR, removed at the end).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Where slurmctld, squeue, sinfo and sacct are (default: beside this executable).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// Seconds of the turn-time window (and of the idle CPU sample at least).
        #[arg(long, default_value_t = 10)]
        sample_s: u64,
        /// Seconds of the idle CPU sample (default: one keepalive period of the cluster's
        /// slurm.conf, 100 s at `SlurmdTimeout=300`, at least `--sample-s`).
        #[arg(long)]
        idle_s: Option<u64>,
        /// Run the controller with `slurmctld --full-scan` (the old cycle, which searches a
        /// placement for every pending job every cycle) instead of the incremental cycle.
        #[arg(long)]
        full_scan: bool,
    },
    /// A real trace through the real daemons, side by side with the simulator: the ITP
    /// cluster's jobs submitted through the controller's RPC at their arrival times to
    /// emulated nodes, with the controller's clock running `--time-scale` times faster
    /// (`slurmctld --time-scale`, test-only), then the queue-time distributions (p50, p90,
    /// p99, mean, max per gang size) of both runs. Exits non-zero when a job did not end.
    Trace {
        /// The trace directory.
        #[arg(long, default_value = "../shared/traces")]
        traces: PathBuf,
        /// Only `itp` (the ITP clusters' jobs).
        #[arg(long, default_value = "itp")]
        trace: String,
        /// The ITP cluster.
        #[arg(long, default_value = "cluster04")]
        cluster: String,
        /// Only the first N jobs (by arrival); default: all.
        #[arg(long)]
        jobs: Option<usize>,
        /// Offered load, as `flotilla sim gang --loads`.
        #[arg(long, default_value_t = 1.0)]
        load: f64,
        /// Queue policy (flotilla, easy, fifo).
        #[arg(long, default_value = "flotilla")]
        policy: String,
        /// Controller seconds per real second (the full cluster04 trace takes about 5 minutes
        /// at the default).
        #[arg(long, default_value_t = 20_000.0)]
        time_scale: f64,
        /// Connections submitting the jobs (job i on connection i mod N), so that arrivals
        /// reach the controller on time.
        #[arg(long, default_value_t = 8)]
        submitters: usize,
        /// Write report.md and jobs.csv (every job's times in both runs) here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// The state directory (default: a new one under $TMPDIR, removed at the end).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Where slurmctld is (default: beside this executable).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
struct EmulateArgs {
    #[command(subcommand)]
    command: Option<EmulateCommand>,
    /// A `flotilla dev up` state directory: its slurm.conf, slurm.key and controller address;
    /// the control socket is `<dir>/emulator.sock`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// slurm.conf whose nodes to emulate (default: `<dir>/slurm.conf`).
    #[arg(short = 'f', long)]
    conf: Option<PathBuf>,
    /// The cluster key (default: `<dir>/slurm.key`, else /etc/slurm/slurm.key).
    #[arg(long)]
    key: Option<PathBuf>,
    /// The controller's address HOST:PORT (default: the one `<dir>` records).
    #[arg(long)]
    ctld: Option<String>,
    /// Only these nodes (a hostlist expression); default: every node of slurm.conf.
    #[arg(long)]
    nodes: Option<String>,
    /// The control socket (default `<dir>/emulator.sock`; none without `--dir`).
    #[arg(long)]
    control: Option<PathBuf>,
    /// Heartbeat period of each node, ms; default: slurmd's for the cluster's size (2 s, up
    /// to 5 s on large clusters).
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Runtime of a job that names none (`FLOTILLA_EMULATE_RUNTIME`, else a `sleep N` in its
    /// script), seconds of job time.
    #[arg(long, default_value_t = 60.0)]
    runtime: f64,
    /// Job seconds per real second (trace replay runs faster than real time).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
}

#[derive(Debug, Subcommand)]
enum EmulateCommand {
    /// Tell a running emulator's nodes something: `disconnect NODES [SECONDS]`, `reboot NODES`,
    /// `down NODES`, `up NODES`, `fail NODES [REASON...]` (NODES: a hostlist expression).
    Ctl {
        /// The state directory (its `emulator.sock`).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The control socket (instead of `--dir`).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// The command line.
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// The state directory (configuration, key, state, spools, logs, the jobs' files).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Leave the cluster running at the end (stop it with `flotilla dev down`).
    #[arg(long)]
    keep: bool,
    /// slurmd --cgroup: auto, none, v1 or v2.
    #[arg(long, default_value = "auto")]
    cgroup: String,
    /// Seconds the whole workload may take.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
}

#[derive(Debug, Args)]
struct DevArgs {
    #[command(subcommand)]
    command: DevCommand,
}

#[derive(Debug, Subcommand)]
enum DevCommand {
    /// Start a controller and node daemons on localhost; print `export SLURM_CONF=...`.
    Up {
        /// A directory with slurm.conf (and gres.conf, topology.conf) whose nodes, partitions
        /// and topology to run on localhost. Default: 4 nodes x 8 fake GPUs in 2 pods.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Nodes of the default cluster.
        #[arg(long, default_value_t = 4)]
        nodes: usize,
        /// The state directory (configuration, key, state, spools, logs, pids).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// slurmd --cgroup: auto, none, v1 or v2.
        #[arg(long, default_value = "auto")]
        cgroup: String,
        /// Seconds to wait for every node to register.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Emulate N nodes in one `flotilla emulate` process instead of running a slurmd
        /// per node: `examples/cluster-128` scaled to N nodes (pods of 32 nodes x 8 GPUs).
        #[arg(long, conflicts_with_all = ["config", "nodes"])]
        emulate_nodes: Option<usize>,
        /// High availability: a throw-away PostgreSQL in <dir>/pg (Debian's initdb/pg_ctl)
        /// holding the state, a primary and a backup controller on it (127.0.0.1 and
        /// 127.0.0.2), and sackd for credentials; prints FLOTILLA_AUTH_SOCKET too.
        #[arg(long, conflicts_with = "emulate_nodes")]
        ha: bool,
    },
    /// Stop exactly what `up` started (SIGTERM, then SIGKILL after --grace seconds).
    Down {
        /// The state directory.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Seconds between SIGTERM and SIGKILL.
        #[arg(long, default_value_t = 10)]
        grace: u64,
    },
    /// `up --ha`'s controller supervisor: restarts a controller that exits (internal).
    #[command(hide = true)]
    Supervise {
        /// The state directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Which daemons run (pid, node, port) and whether the controller answers.
    Status {
        /// The state directory.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Experiment {
    /// FGD (ATC'23) fragmentation protocol on the Alibaba openb cluster.
    Fgd,
    /// Gang scheduling, held reservations and backfill: ITP or Philly replayed by time.
    Gang,
    /// DLRM inference services over one ITP cluster's training: static split vs shared fleet.
    SharedFleet,
}

#[derive(Debug, Args)]
struct SimArgs {
    /// The experiment to run.
    #[arg(value_enum)]
    experiment: Experiment,
    /// The traces folder (holding openb/, itp/, philly/, anchors/).
    #[arg(long, default_value = TraceDir::DEFAULT)]
    traces: PathBuf,
    /// Output folder (created): summary.json, CSV tables and PNG plots.
    #[arg(long)]
    out: PathBuf,
    /// Number of seeds (fgd: 42, 43, ...; default 10, the artifact's 42–51).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 42)]
    first_seed: u64,
    /// Policies, comma-separated (fgd: topo-bestfit,best-fit,fgd,random,first-fit; gang:
    /// fifo,easy,flotilla). Default: all of the experiment's.
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// fgd: the openb pod list (`default`, `multigpu50`, ..., or `all` for the 17).
    #[arg(long, default_value = "default")]
    pod_list: String,
    /// gang: the trace (`itp` or `philly`).
    #[arg(long, default_value = "itp")]
    trace: String,
    /// gang: the ITP cluster (`cluster04`, ...; `all` = every job of the 10 clusters).
    #[arg(long, default_value = "cluster04")]
    cluster: String,
    /// gang: offered loads, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.7,0.9,1.0")]
    loads: Vec<f64>,
    /// gang: walltime request as a multiple of the real duration (rounded up to an hour).
    #[arg(long, default_value_t = 2.0)]
    walltime_factor: f64,
    /// gang: jobs of at least N GPUs are elastic between half their size and their size
    /// (0 = every job rigid).
    #[arg(long, default_value_t = 0)]
    elastic_min_gpus: u32,
    /// gang: re-run every placement search every cycle (the full scan, the old cycle) instead
    /// of the incremental cycle; same decisions, to compare the time.
    #[arg(long)]
    full_scan: bool,
    /// gang: skip the check of the core's invariants after every cycle (on by default in
    /// debug builds), for timing a debug build.
    #[arg(long)]
    no_invariant_checks: bool,
    /// gang, shared-fleet: keep only the first N jobs of the trace (0 = all); gang replays
    /// them on the whole trace's cluster.
    #[arg(long, default_value_t = 0)]
    max_jobs: usize,
    /// shared-fleet: keep only the first N DLRM instances (0 = all).
    #[arg(long, default_value_t = 0)]
    max_instances: usize,
    /// shared-fleet: start of the 31-day ITP window, days on the ITP clock (default: the
    /// cluster's first arrival).
    #[arg(long)]
    window_start_days: Option<f64>,
    /// shared-fleet: training nodes of 8 GPUs (default: the smallest that the window loads to
    /// at most 1.0, as gang).
    #[arg(long)]
    train_nodes: Option<u32>,
    /// shared-fleet: inference pool nodes of 8 GPUs (default: service peak / 8, rounded up).
    #[arg(long)]
    pool_nodes: Option<u32>,
    /// shared-fleet: periodic checkpoint interval of training (s; 0 = checkpoint at SIGTERM,
    /// nothing lost).
    #[arg(long, default_value_t = 1800)]
    ckpt_interval_s: u64,
    /// shared-fleet: checkpoint size per training GPU (GiB).
    #[arg(long, default_value_t = 4)]
    ckpt_gib_per_gpu: u64,
    /// Threads (results never depend on it). Default: the machine's cores.
    #[arg(long)]
    jobs: Option<usize>,
}

/// An indicatif bar on stderr, hidden when stderr is not a terminal.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn add_total(&self, n: u64) {
        self.0.inc_length(n);
    }
    fn advance(&self, n: u64, what: &str) {
        self.0.set_message(what.to_owned());
        self.0.inc(n);
    }
}

fn bar() -> Bar {
    let pb = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    Bar(pb)
}

/// `flotilla man --out DIR`: the getopt commands' pages from their parsers' tables
/// ([`flotilla_admin::man`]), and this command's from its clap definition.
fn man(out: &std::path::Path) -> Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let version = env!("CARGO_PKG_VERSION");
    for page in flotilla_admin::man::PAGES {
        let path = out.join(format!("{}.1", page.name));
        std::fs::write(&path, flotilla_admin::man::render(page, version))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let cmd = Cli::command().version(version);
    clap_mangen::generate_to(cmd, out).with_context(|| format!("writing man pages into {}", out.display()))?;
    let cmd = flotilla_commands::sdeploy::Cli::command().version(version);
    clap_mangen::generate_to(cmd, out).with_context(|| format!("writing man pages into {}", out.display()))?;
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim(args),
        Command::Dev(args) => dev(args),
        Command::Demo(args) => demo(args),
        Command::Emulate(args) => emulate(args),
        Command::Bench(args) => bench(args),
        Command::Man { out } => man(&out),
    }
}

/// `flotilla bench scale` and `flotilla bench trace`.
fn bench(a: BenchArgs) -> Result<()> {
    use flotilla_admin::bench;
    let (nodes, jobs, running, dir, bin_dir, sample_s, idle_s, full_scan) = match a.command {
        BenchCommand::Scale { nodes, jobs, running, dir, bin_dir, sample_s, idle_s, full_scan } => {
            (nodes, jobs, running, dir, bin_dir, sample_s, idle_s, full_scan)
        }
        BenchCommand::Trace { traces, trace, cluster, jobs, load, policy, time_scale, submitters, out, dir, bin_dir } => {
            if trace != "itp" {
                bail!("--trace {trace}: only itp is replayed through the daemons");
            }
            let cancel = cancel_on_signals()?;
            let (dir, _tmp) = TempDir::or_given(dir)?;
            let mut opts = flotilla_admin::trace::TraceOptions::new(dir);
            opts.traces = traces;
            opts.cluster = cluster;
            opts.jobs = jobs;
            opts.load = load;
            opts.policy = policy;
            opts.time_scale = time_scale;
            opts.submitters = submitters;
            opts.bin_dir = bin_dir;
            let t0 = Instant::now();
            let rep = flotilla_admin::trace::trace(&opts, cancel, &|s| eprintln!("[{:>6.1} s] {s}", t0.elapsed().as_secs_f64()))?;
            print!("{rep}");
            if let Some(out) = out {
                flotilla_admin::trace::write(&rep, &out)?;
            }
            if !rep.failures.is_empty() {
                bail!("{} check(s) failed", rep.failures.len());
            }
            return Ok(());
        }
    };
    let cancel = cancel_on_signals()?;
    let (dir, _tmp) = TempDir::or_given(dir)?;
    let mut opts = bench::ScaleOptions::new(dir);
    opts.nodes = nodes;
    opts.jobs = jobs;
    opts.running = running.unwrap_or(jobs / 2);
    opts.bin_dir = bin_dir;
    opts.sample = Duration::from_secs(sample_s);
    opts.idle = idle_s.map(Duration::from_secs);
    opts.full_scan = full_scan;
    let t0 = Instant::now();
    let rep = bench::scale(&opts, cancel, &|s| eprintln!("[{:>6.1} s] {s}", t0.elapsed().as_secs_f64()))?;
    print!("{rep}");
    if !rep.failures.is_empty() {
        bail!("{} check(s) failed", rep.failures.len());
    }
    Ok(())
}

/// A directory under $TMPDIR removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    /// `dir`, or a new temporary directory with its guard (removed when the guard drops).
    fn or_given(dir: Option<PathBuf>) -> Result<(PathBuf, Option<TempDir>)> {
        Ok(match dir {
            Some(d) => (d, None),
            None => {
                let t = TempDir::new()?;
                (t.0.clone(), Some(t))
            }
        })
    }

    fn new() -> Result<TempDir> {
        let d = std::env::temp_dir().join(format!("flotilla-bench-{}-{}", std::process::id(), Instant::now().elapsed().as_nanos()));
        std::fs::create_dir_all(&d)?;
        Ok(TempDir(d))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `flotilla emulate`: runs the emulated nodes until SIGINT or SIGTERM; `flotilla emulate ctl`
/// sends one control line.
fn emulate(a: EmulateArgs) -> Result<()> {
    use flotilla_admin::{dev, emulate};
    if let Some(EmulateCommand::Ctl { dir, socket, words }) = a.command {
        let socket = socket.unwrap_or_else(|| dir.unwrap_or_else(dev::default_dir).join("emulator.sock"));
        println!("{}", emulate::send_control(&socket, &words.join(" "))?);
        return Ok(());
    }
    let conf_path = a.conf.or_else(|| a.dir.as_ref().map(|d| d.join("slurm.conf"))).context("--conf or --dir is required")?;
    let key_path = a
        .key
        .or_else(|| a.dir.as_ref().map(|d| d.join("slurm.key")))
        .unwrap_or_else(|| "/etc/slurm/slurm.key".into());
    let ctld: std::net::SocketAddr = match (&a.ctld, &a.dir) {
        (Some(c), _) => std::net::ToSocketAddrs::to_socket_addrs(c.as_str())?.next().with_context(|| format!("--ctld {c}"))?,
        (None, Some(d)) => dev::read_record(d)?.0.with_context(|| format!("{} records no controller address", d.display()))?,
        (None, None) => bail!("--ctld or --dir is required"),
    };
    let conf = flotilla_conf::load_from(&conf_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let key = flotilla_proto::ClusterKey::load(&key_path).map_err(|e| anyhow::anyhow!("{}: {e}", key_path.display()))?;
    let nodes = emulate::EmulatorOptions::nodes_of(&conf, a.nodes.as_deref())?;
    let limit = emulate::raise_fd_limit();
    if (limit as usize) < nodes.len() + 64 {
        bail!("{} nodes need {} open files; this process may open {limit} (ulimit -n)", nodes.len(), nodes.len() + 64);
    }
    let control = a.control.or_else(|| a.dir.as_ref().map(|d| d.join("emulator.sock")));
    let n = nodes.len();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let emu = std::sync::Arc::new(emulate::Emulator::start(
            emulate::EmulatorOptions {
                ctld,
                key,
                nodes,
                heartbeat: a.heartbeat_ms.map_or_else(|| flotilla_conf::default_heartbeat(conf.nodes.len()), |ms| Duration::from_millis(ms.max(1))),
                default_runtime_s: a.runtime,
                time_scale: a.time_scale,
            },
            &tokio::runtime::Handle::current(),
        ));
        if let Some(path) = &control {
            let (emu, path) = (emu.clone(), path.clone());
            tokio::spawn(async move {
                if let Err(e) = emulate::serve_control(&path, emu).await {
                    eprintln!("flotilla emulate: {e:#}");
                }
            });
        }
        eprintln!(
            "flotilla emulate: {n} nodes registering with {ctld}{}",
            control.as_ref().map_or(String::new(), |p| format!("; control socket {}", p.display()))
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        emu.stop();
        let s = emu.stats();
        eprintln!(
            "flotilla emulate: stopped; {} registrations, {} job launches, {} job ends",
            emulate::EmuStats::get(&s.registrations),
            emulate::EmuStats::get(&s.launches),
            emulate::EmuStats::get(&s.exits)
        );
        Ok(())
    })
}

/// Blocks SIGINT, SIGTERM and SIGHUP in every thread and lets one thread turn them into
/// `cancel`, so that whatever was started is stopped by the code that started it.
fn cancel_on_signals() -> Result<&'static AtomicBool> {
    use nix::sys::signal::{SigSet, Signal};
    static CANCEL: AtomicBool = AtomicBool::new(false);
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set.thread_block().context("blocking signals")?;
    std::thread::spawn(move || {
        if let Ok(sig) = set.wait() {
            eprintln!("flotilla: {sig}; stopping what was started");
            CANCEL.store(true, Ordering::SeqCst);
        }
    });
    Ok(&CANCEL)
}

fn demo(a: DemoArgs) -> Result<()> {
    use flotilla_admin::{demo, dev};
    let cancel = cancel_on_signals()?;
    let mut up = dev::UpOptions::new(a.dir.unwrap_or_else(|| dev::default_dir().with_extension("demo")));
    up.cgroup = a.cgroup;
    up.timeout = Duration::from_secs(60);
    up.ctld_args = demo::CTLD_ARGS.iter().map(|s| s.to_string()).collect();
    let opts = demo::DemoOptions { up, keep: a.keep, timeout: Duration::from_secs(a.timeout) };
    let report = match demo::run(&opts, cancel) {
        Ok(r) => r,
        Err(e) if cancel.load(Ordering::SeqCst) => {
            eprintln!("flotilla demo: {e:#}");
            std::process::exit(130);
        }
        Err(e) => return Err(e),
    };
    println!("\n== outcome (job files in {})", report.work_dir.display());
    for (role, id, states) in &report.jobs {
        println!("{role:<14} job {id:<6} {states}");
    }
    if report.failures.is_empty() {
        println!("demo passed");
        Ok(())
    } else {
        for f in &report.failures {
            eprintln!("FAILED: {f}");
        }
        bail!("demo failed {} check(s)", report.failures.len())
    }
}

fn dev(a: DevArgs) -> Result<()> {
    use flotilla_admin::dev;
    match a.command {
        DevCommand::Up {
            config,
            nodes,
            dir,
            cgroup,
            timeout,
            emulate_nodes,
            ha,
        } => {
            // SIGINT, SIGTERM and SIGHUP are taken by one thread, which asks `up` to stop
            // what it started. Children start with an empty mask (std resets it).
            let cancel = cancel_on_signals()?;
            let mut opts = dev::UpOptions::new(dir.unwrap_or_else(dev::default_dir));
            opts.config = config;
            opts.nodes = nodes;
            if let Some(n) = emulate_nodes {
                opts.nodes = n;
                opts.emulate = Some(dev::Emulate::Process);
            }
            opts.cgroup = cgroup;
            opts.timeout = Duration::from_secs(timeout);
            opts.ha = ha;
            match dev::up(&opts, cancel) {
                Ok(c) => {
                    println!("{}", c.export_line());
                    Ok(())
                }
                Err(e) if cancel.load(Ordering::SeqCst) => {
                    eprintln!("flotilla dev up: {e:#}");
                    std::process::exit(130);
                }
                Err(e) => Err(e),
            }
        }
        DevCommand::Down { dir, grace } => {
            let dir = dir.unwrap_or_else(dev::default_dir);
            let n = dev::down(&dir, Duration::from_secs(grace))?;
            eprintln!("stopped {n} daemons of {}", dir.display());
            Ok(())
        }
        DevCommand::Supervise { dir } => {
            let stop = cancel_on_signals()?;
            dev::supervise(&dir, stop)
        }
        DevCommand::Status { dir } => {
            let (text, ok) = dev::status(&dir.unwrap_or_else(dev::default_dir))?;
            print!("{text}");
            if !ok {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

fn sim(a: SimArgs) -> Result<()> {
    let traces = TraceDir::new(&a.traces);
    if !traces.root().is_dir() {
        bail!(
            "traces folder {} not found (use --traces)",
            traces.root().display()
        );
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let seeds: Vec<u64> = (a.first_seed..a.first_seed + a.seeds.max(1)).collect();
    let progress = bar();
    let started = Instant::now();
    match a.experiment {
        Experiment::Fgd => {
            let pod_lists = if a.pod_list == "all" {
                OpenbVariant::ALL.to_vec()
            } else {
                a.pod_list
                    .split(',')
                    .map(|s| s.parse::<OpenbVariant>())
                    .collect::<Result<Vec<_>, _>>()?
            };
            let mut opts = flotilla_sim::fgd::FgdOptions {
                pod_lists,
                seeds,
                jobs,
                ..Default::default()
            };
            if !a.policies.is_empty() {
                opts.policies = a.policies.clone();
            }
            let report = flotilla_sim::fgd::run(&traces, &opts, &progress)?;
            progress.0.finish_and_clear();
            report.write(&a.out)?;
            print_fgd(&report);
        }
        Experiment::Gang => {
            let mut opts = flotilla_sim::gang::GangOptions {
                trace: a.trace.parse()?,
                cluster: a.cluster.clone(),
                loads: a.loads.clone(),
                max_jobs: (a.max_jobs > 0).then_some(a.max_jobs),
                walltime_factor: a.walltime_factor,
                elastic_min_gpus: (a.elastic_min_gpus > 0).then_some(a.elastic_min_gpus),
                full_scan: a.full_scan,
                jobs,
                ..Default::default()
            };
            if a.no_invariant_checks {
                opts.check_invariants = false;
            }
            if !a.policies.is_empty() {
                opts.policies = a.policies.clone();
            }
            let report = flotilla_sim::gang::run(&traces, &opts, &progress)?;
            progress.0.finish_and_clear();
            report.write(&a.out)?;
            print!("{}", report.table());
            for r in &report.runs {
                let ((visited, skipped), (searched, reused)) = r.cycle_work;
                eprintln!(
                    "cycle work {} load {}: pending jobs visited {visited}, skipped {skipped}; placement searches {searched}, reused {reused}",
                    r.policy, r.load
                );
            }
        }
        Experiment::SharedFleet => {
            let opts = flotilla_sim::fleet::FleetOptions {
                cluster: a.cluster.clone(),
                window_start_s: a.window_start_days.map(|d| (d * 86_400.0).round() as u64),
                train_nodes: a.train_nodes,
                pool_nodes: a.pool_nodes,
                ckpt_interval_s: a.ckpt_interval_s,
                ckpt_bytes_per_gpu: a.ckpt_gib_per_gpu << 30,
                walltime_factor: a.walltime_factor,
                max_jobs: (a.max_jobs > 0).then_some(a.max_jobs),
                max_instances: (a.max_instances > 0).then_some(a.max_instances),
                jobs,
                ..Default::default()
            };
            let report = flotilla_sim::fleet::run(&traces, &opts, &progress)?;
            progress.0.finish_and_clear();
            report.write(&a.out)?;
            print!("{}", report.table());
        }
    }
    eprintln!(
        "done in {:.1} s; results in {}",
        started.elapsed().as_secs_f64(),
        a.out.display()
    );
    Ok(())
}

fn print_fgd(r: &flotilla_sim::fgd::FgdReport) {
    println!(
        "{:<12} {:<13} {:>9} {:>9} {:>9} {:>12}",
        "pod_list", "policy", "unalloc%", "artifact", "median", "free8@90"
    );
    for l in &r.pod_lists {
        for p in &r.policies {
            if let Some(s) = r.results[l].get(p) {
                println!(
                    "{:<12} {:<13} {:>9.2} {:>9} {:>9.2} {:>12.1}",
                    l,
                    p,
                    s.unallocated_gpu_pct_at_100,
                    s.artifact_unallocated_gpu_pct_at_100
                        .map_or("-".into(), |x| format!("{x:.2}")),
                    s.unallocated_gpu_pct_at_100_median,
                    s.whole_free_nodes_at_90
                );
            }
        }
    }
}
