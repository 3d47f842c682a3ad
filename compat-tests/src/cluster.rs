//! A local cluster for end-to-end tests: the same code as `flotilla dev up`
//! ([`flotilla_admin::dev::up`]) in a fresh temp dir, with an OS-chosen controller port, in
//! production mode where the tests may have it: `--cgroup auto` when running as root with
//! `FLOTILLA_TEST_ROOT=1` (CI), else `--cgroup none` ([`default_cgroup`]). Several clusters
//! run at once on one host, each in its own cgroup scope (`dev::cgroup_scope`). Dropping it
//! stops every daemon and job supervisor it started and removes the temp dir.
//!
//! `slurmctld` and `slurmd` must be built in the same target directory as the test
//! (`cargo test --workspace` builds them; else `cargo build -p flotilla-slurmctld -p
//! flotilla-slurmd`), or `FLOTILLA_BIN_DIR` names where they are.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use flotilla_admin::dev::{self, DevCluster, UpOptions};

/// The `slurmd --cgroup` of test clusters: `auto` (production mode: cgroups on) when the
/// tests run as root with `FLOTILLA_TEST_ROOT=1`, else `none` (an unprivileged user may not
/// create cgroups).
pub fn default_cgroup() -> &'static str {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() == Ok("1") && nix::unistd::geteuid().is_root() {
        "auto"
    } else {
        "none"
    }
}

/// A running local cluster (stopped on drop).
#[derive(Debug)]
pub struct LocalCluster {
    cluster: DevCluster,
    // Dropped after `cluster` is stopped (see `Drop`).
    dir: tempfile::TempDir,
}

impl LocalCluster {
    /// Runs our command `name` (from [`crate::bin_dir`]) with this cluster's configuration, a
    /// PATH holding our binaries first, `HOME` and the working directory `cwd`, and nothing
    /// else of the caller's environment.
    pub fn run(&self, name: &str, args: &[&str], cwd: &Path) -> std::process::Output {
        self.command(None, name, cwd).args(args).env("HOME", cwd).output().expect("our command runs")
    }

    /// [`LocalCluster::run`] as `user` (`runuser`; `None`: root), without `HOME`.
    pub fn run_as(&self, user: Option<&str>, name: &str, args: &[&str], cwd: &Path) -> std::process::Output {
        self.command(user, name, cwd).args(args).output().expect("our command runs")
    }

    /// Our command `name` as `user` (`None`: this process's user) in `cwd`, with this
    /// cluster's configuration and a PATH holding our binaries first, and nothing else of the
    /// caller's environment.
    fn command(&self, user: Option<&str>, name: &str, cwd: &Path) -> std::process::Command {
        let bins = crate::bin_dir();
        let mut cmd = match user {
            Some(u) => {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", u, "--"]).arg(bins.join(name));
                c
            }
            None => std::process::Command::new(bins.join(name)),
        };
        cmd.current_dir(cwd)
            .env_clear()
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", bins.display()))
            .envs(self.env());
        cmd
    }

    /// Starts the default cluster (4 nodes × 8 fake GPUs, 2 pods), or the nodes, partitions
    /// and topology of `config_dir`'s `slurm.conf`, and waits until every node registered.
    /// Panics with the reason (and log tails) when it cannot.
    pub fn start(config_dir: Option<&Path>) -> LocalCluster {
        LocalCluster::start_with(config_dir, |_| {})
    }

    /// [`LocalCluster::start`] with the options (`fast`, `ctld_args`, `timeout`, ...) adjusted
    /// by `adjust` before the cluster starts; the state directory is always a fresh temp dir.
    pub fn start_with(config_dir: Option<&Path>, adjust: impl FnOnce(&mut UpOptions)) -> LocalCluster {
        let dir = tempfile::Builder::new()
            .prefix("flt-dev")
            .tempdir_in("/tmp")
            .expect("temp dir");
        let mut opts = UpOptions::new(dir.path());
        opts.config = config_dir.map(Path::to_path_buf);
        opts.cgroup = default_cgroup().into();
        opts.fast = true;
        opts.timeout = Duration::from_secs(60);
        opts.bin_dir = std::env::var_os("FLOTILLA_BIN_DIR").map(PathBuf::from);
        adjust(&mut opts);
        opts.dir = dir.path().to_path_buf();
        let never = AtomicBool::new(false);
        match dev::up(&opts, &never) {
            Ok(cluster) => LocalCluster { cluster, dir },
            Err(e) => panic!("local cluster did not start: {e:#}"),
        }
    }

    /// The state directory (configuration, key, logs, spools).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `slurm.conf` of this cluster.
    pub fn slurm_conf(&self) -> PathBuf {
        self.cluster.slurm_conf()
    }

    /// The environment a command needs to talk to this cluster.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![(
            "SLURM_CONF".into(),
            self.slurm_conf().to_string_lossy().into_owned(),
        )]
    }

    /// The cluster part of the job cgroups' paths (`<root>/flotilla/<scope>_<node>/job_<id>`).
    pub fn cgroup_scope(&self) -> &str {
        &self.cluster.cgroup_scope
    }

    /// The node names.
    pub fn nodes(&self) -> &[String] {
        &self.cluster.nodes
    }

    /// The controller's local socket (`<dir>/state/slurmctld.sock`), where a client needs no
    /// credential.
    pub fn socket(&self) -> PathBuf {
        self.dir().join("state").join("slurmctld.sock")
    }

    /// The URL of the cluster's own slurmrestd (`flotilla dev up` starts one, JWT on TCP),
    /// `None` when no `slurmrestd` binary was found.
    pub fn restd_url(&self) -> Option<&str> {
        self.cluster.restd_url.as_deref()
    }

    /// The controller's TCP address.
    pub fn ctld_addr(&self) -> std::net::SocketAddr {
        self.cluster.ctld_addr
    }

    /// The daemons' pids in the order started: the controller first (with `ha`, PostgreSQL
    /// first, then the primary controller).
    pub fn pids(&self) -> Vec<i32> {
        self.cluster.daemons.iter().map(|d| d.pid).collect()
    }

    /// Restarts the controller (SIGTERM, the same command line again: it recovers from its
    /// state database; `dev::restart_controller`) and waits until it answers again (60 s).
    /// Panics when it cannot.
    pub fn restart_controller(&mut self) {
        dev::restart_controller(&mut self.cluster, Duration::from_secs(10)).expect("restart the controller");
        let (dir, addr) = (self.dir().to_path_buf(), self.ctld_addr());
        crate::wait::wait_until(
            "the controller answers after its restart",
            Duration::from_secs(60),
            || dev::query_nodes(&dir, addr).is_ok(),
            || dev::log_tail(&dir, "slurmctld.log", 20),
        );
    }

    /// The nodes as the controller reports them: `(name, state, not_responding)`.
    pub fn query_nodes(&self) -> Vec<(String, String, bool)> {
        dev::query_nodes(self.dir(), self.ctld_addr()).expect("query the controller")
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.cluster.stop(Duration::from_secs(5));
    }
}
