//! The config loader: finds `slurm.conf`, reads it and the files beside it, and hands the texts
//! to the pure parsers of `flotilla_core::config` and `flotilla_core::quota`.
//!
//! Path: `SLURM_CONF`, else `FLOTILLA_CONF` (some clients delete every `SLURM_*` variable),
//! else `/etc/slurm/slurm.conf` (DESIGN.md §3). `Include` paths are relative to the directory
//! of `slurm.conf` unless absolute; `gres.conf`, `topology.conf` and `quota.conf` are read from
//! that directory when present; `cgroup.conf` by [`cgroup::load_cgroup_conf`] (the node daemon).
//!
//! Every program that reads the configuration uses this crate: the commands, the controller and
//! the node daemon. It depends on `flotilla-core` only (plus `thiserror`), so that the daemons
//! need not depend on the commands to read their configuration.

pub mod cgroup;

use std::io;
use std::path::{Path, PathBuf};

use flotilla_core::config::{parse_cluster, ClusterConfig, ConfigError};
use flotilla_core::quota::{parse_quota_conf, QuotaError, QuotaTree};
use thiserror::Error;

/// The node daemons' default heartbeat period for a cluster of `nodes` nodes: 2 s, longer
/// on large clusters so that the controller hears at most 2,000 heartbeats a second in all
/// (10,000 nodes: 5 s), and never longer than 5 s, well inside the 10 s a session must stay
/// silent before another registration may replace it (`NODE_SESSION_LIVE_S`). A heartbeat is
/// the node's full report, the reconciler's backstop: job ends and health verdicts go out at
/// once, and a lost session is seen when its connection closes. Slurm's controller likewise
/// pings nodes at an interval of its own (`SlurmdTimeout`/3) rather than per node.
pub fn default_heartbeat(nodes: usize) -> std::time::Duration {
    let ms = (nodes as u64 / 2).clamp(2_000, 5_000);
    std::time::Duration::from_millis(ms)
}

/// Where `slurm.conf` is when no environment variable says otherwise.
pub const DEFAULT_SLURM_CONF: &str = "/etc/slurm/slurm.conf";

/// Why the configuration could not be loaded.
#[derive(Debug, Error)]
pub enum ConfError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A file was read but its text is wrong (the message names file and line).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `quota.conf` was read but its text is wrong (the message names file and line).
    #[error(transparent)]
    Quota(#[from] QuotaError),
}

/// The path of `slurm.conf`: `SLURM_CONF`, else `FLOTILLA_CONF`, else
/// [`DEFAULT_SLURM_CONF`]. `env` looks a variable up (`|k| std::env::var(k).ok()` in a
/// binary); empty values count as unset.
pub fn conf_path(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    ["SLURM_CONF", "FLOTILLA_CONF"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.is_empty()))
        .map_or_else(|| PathBuf::from(DEFAULT_SLURM_CONF), PathBuf::from)
}

/// Loads the cluster configuration from the path [`conf_path`] gives.
///
/// Errors: [`ConfError`].
pub fn load(env: &dyn Fn(&str) -> Option<String>) -> Result<ClusterConfig, ConfError> {
    load_from(&conf_path(env))
}

fn read(path: &Path) -> Result<String, ConfError> {
    std::fs::read_to_string(path).map_err(|source| ConfError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_optional(path: &Path) -> Result<Option<String>, ConfError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Loads `slurm.conf` at `path` (following `Include`), and `gres.conf` and `topology.conf`
/// from the same directory when they exist. Messages name files by their full path.
///
/// Errors: [`ConfError::Io`] with the path when `slurm.conf` (or an existing `gres.conf` /
/// `topology.conf`) cannot be read; [`ConfError::Config`] for the text, including an
/// `Include` that cannot be read (its message names the path tried).
pub fn load_from(path: &Path) -> Result<ClusterConfig, ConfError> {
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let slurm = read(path)?;
    let gres_path = dir.join("gres.conf");
    let topo_path = dir.join("topology.conf");
    let gres = read_optional(&gres_path)?;
    let topo = read_optional(&topo_path)?;
    let mut include = |p: &str| -> Result<(String, String), String> {
        let full = dir.join(p);
        std::fs::read_to_string(&full)
            .map(|t| (full.display().to_string(), t))
            .map_err(|e| format!("{}: {e}", full.display()))
    };
    let (slurm_name, gres_name, topo_name) = (
        path.display().to_string(),
        gres_path.display().to_string(),
        topo_path.display().to_string(),
    );
    Ok(parse_cluster(
        (&slurm_name, &slurm),
        gres.as_deref().map(|t| (gres_name.as_str(), t)),
        topo.as_deref().map(|t| (topo_name.as_str(), t)),
        &mut include,
    )?)
}

/// The account tree of `quota.conf` in the directory of `slurm_conf` (format:
/// [`flotilla_core::quota`]); empty (quotas off) when there is no `quota.conf`. Messages name
/// the file by its path as `slurm_conf`'s directory joined with `quota.conf`.
///
/// Errors: [`ConfError::Io`] when the file exists but cannot be read; [`ConfError::Quota`]
/// for its text.
pub fn load_quota(slurm_conf: &Path) -> Result<QuotaTree, ConfError> {
    let p = slurm_conf.parent().unwrap_or(Path::new(".")).join("quota.conf");
    match read_optional(&p)? {
        None => Ok(QuotaTree::default()),
        Some(text) => Ok(parse_quota_conf(&text, &p.display().to_string())?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn workspace_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn conf_path_order() {
        assert_eq!(
            conf_path(&env_of(&[])),
            PathBuf::from("/etc/slurm/slurm.conf")
        );
        assert_eq!(
            conf_path(&env_of(&[("FLOTILLA_CONF", "/f")])),
            PathBuf::from("/f")
        );
        assert_eq!(
            conf_path(&env_of(&[("FLOTILLA_CONF", "/f"), ("SLURM_CONF", "/s")])),
            PathBuf::from("/s")
        );
        assert_eq!(
            conf_path(&env_of(&[("FLOTILLA_CONF", "/f"), ("SLURM_CONF", "")])),
            PathBuf::from("/f")
        );
    }

    #[test]
    fn reference_cluster_loads() {
        let path = workspace_root().join("../shared/slurm-reference/conf/slurm.conf");
        let env = env_of(&[("SLURM_CONF", path.to_str().unwrap())]);
        let c = load(&env).unwrap();
        assert_eq!(c.cluster_name, "oracle");
        assert_eq!(
            (c.control_host.as_str(), c.control_addr.as_str()),
            ("vm", "127.0.0.1")
        );
        assert_eq!((c.slurmctld_port, c.slurmd_port), (6817, 6818));
        assert_eq!(
            (c.kill_wait_s, c.max_job_count, c.max_array_size),
            (5, 20000, 10001)
        );
        assert_eq!(c.def_mem_per_cpu_mib, Some(1024));
        assert_eq!(c.nodes.len(), 4);
        for (i, n) in c.nodes.iter().enumerate() {
            assert_eq!(n.name, format!("gpu0{}", i + 1));
            assert_eq!(
                (n.gpus, n.gpu_type.as_deref(), n.cpus),
                (8, Some("h100"), 64)
            );
            assert_eq!(n.real_memory_mib, 512_000);
            assert_eq!((n.addr.as_str(), n.port), ("127.0.0.1", 17001 + i as u16));
            assert_eq!(n.gpu_files.len(), 8);
            assert_eq!(n.gpu_files[0], "/var/lib/slurm-oracle/fakedev/nvidia0");
            assert_eq!(n.gpu_files[7], "/var/lib/slurm-oracle/fakedev/nvidia7");
        }
        let pods: Vec<(&str, Vec<&str>)> = c
            .pods
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.nodes.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            pods,
            [
                ("leaf1", vec!["gpu01", "gpu02"]),
                ("leaf2", vec!["gpu03", "gpu04"])
            ]
        );
        assert_eq!(c.switches.len(), 1);
        let [batch, debug] = &c.partitions[..] else {
            panic!("{:?}", c.partitions)
        };
        assert_eq!(batch.name, "batch");
        assert!(batch.default && batch.state == "UP");
        assert_eq!(
            (batch.max_time_min, batch.default_time_min),
            (Some(2 * 24 * 60), Some(60))
        );
        assert_eq!(batch.nodes, ["gpu01", "gpu02", "gpu03", "gpu04"]);
        assert_eq!(debug.name, "debug");
        assert!(!debug.default);
        assert_eq!(
            (debug.max_time_min, debug.default_time_min),
            (Some(30), None)
        );
        assert_eq!(debug.nodes, ["gpu01", "gpu02"]);
        // Keys Slurm knows that Flotilla does not use yet are named, with file and line.
        let w = c.warnings.join("\n");
        for key in [
            "AuthType",
            "MailProg",
            "SelectTypeParameters",
            "ReturnToService",
            "AccountingStorageTRES",
        ] {
            assert!(
                w.contains(&format!(": {key} is a Slurm key")),
                "{key} missing from {w}"
            );
        }
        assert!(w.contains("slurm.conf:7: AuthType"), "{w}");
        assert!(c
            .raw
            .iter()
            .any(|(k, v)| k == "AuthType" && v == "auth/munge"));
    }

    #[test]
    fn example_cluster_128_loads() {
        let path = workspace_root().join("examples/cluster-128/slurm.conf");
        let c = load_from(&path).unwrap();
        assert_eq!(c.nodes.len(), 128);
        assert_eq!(c.nodes.iter().map(|n| n.gpus).sum::<u32>(), 1024);
        assert!(c
            .nodes
            .iter()
            .all(|n| n.gpu_files.len() == 8 && n.gpu_type.as_deref() == Some("h100")));
        assert_eq!(c.pods.len(), 4);
        assert!(c.pods.iter().all(|p| p.nodes.len() == 32));
        let names: Vec<&str> = c.partitions.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["batch", "train", "dev"]);
        assert!(c.partitions[0].default);
        assert!(c.partitions[2].sub_node_pool);
    }

    #[test]
    fn include_is_relative_to_the_config_dir_and_io_errors_name_the_path() {
        let dir = std::env::temp_dir().join(format!("flotilla-conf-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("parts")).unwrap();
        std::fs::write(
            dir.join("slurm.conf"),
            "ClusterName=t\nInclude parts/nodes.conf\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("parts/nodes.conf"),
            "NodeName=n[1-3] Gres=gpu:2\nGresTypes=gpu\n",
        )
        .unwrap();
        let c = load_from(&dir.join("slurm.conf")).unwrap();
        assert_eq!(c.partitions[0].nodes.len(), 3);
        assert_eq!(c.pods.len(), 1, "no topology.conf: one flat pod");
        std::fs::write(dir.join("slurm.conf"), "Include missing.conf\n").unwrap();
        let err = load_from(&dir.join("slurm.conf")).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{}", dir.join("missing.conf").display())),
            "{err}"
        );
        let err = load_from(&dir.join("nope.conf")).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: ", dir.join("nope.conf").display())),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn quota_conf_beside_slurm_conf_is_optional_and_errors_name_the_file() {
        let dir = std::env::temp_dir().join(format!("flotilla-conf-quota-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("slurm.conf");
        assert!(load_quota(&conf).unwrap().is_empty(), "no quota.conf: quotas off");
        std::fs::write(dir.join("quota.conf"), "Account=research MaxGPUs=8 Users=alice,bob\n").unwrap();
        let t = load_quota(&conf).unwrap();
        assert_eq!(t.default_accounts().get("bob").map(String::as_str), Some("research"));
        std::fs::write(dir.join("quota.conf"), "Account=research Bogus=1\n").unwrap();
        let e = load_quota(&conf).unwrap_err();
        assert!(matches!(e, ConfError::Quota(_)), "{e:?}");
        assert_eq!(e.to_string(), format!("{}:1: unknown key `bogus`", dir.join("quota.conf").display()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
