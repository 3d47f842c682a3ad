//! Where the controller gets its cluster configuration: the shared loader
//! (`flotilla_commands::conf`, which reads slurm.conf, follows `Include`, reads gres.conf and
//! topology.conf beside it, and resolves `SLURM_CONF` / `FLOTILLA_CONF`), or a
//! `ClusterConfig` as JSON (`--cluster-json`, for tests that build clusters by hand).

use anyhow::Context;
use flotilla_core::config::ClusterConfig;
use std::path::Path;

/// Loads the cluster configuration: `cluster_json` if given, else `slurm_conf`, else the path
/// the environment names (`SLURM_CONF`, `FLOTILLA_CONF`, `/etc/slurm/slurm.conf`). Warnings
/// about keys Slurm knows but Flotilla does not use are logged once.
pub fn load(slurm_conf: Option<&Path>, cluster_json: Option<&Path>) -> anyhow::Result<ClusterConfig> {
    if let Some(p) = cluster_json {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        return serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()));
    }
    let conf = match slurm_conf {
        Some(p) => flotilla_commands::conf::load_from(p)?,
        None => flotilla_commands::conf::load(&|k| std::env::var(k).ok())?,
    };
    for w in &conf.warnings {
        tracing::warn!("{w}");
    }
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_reference_conf() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/slurm-reference/conf/slurm.conf");
        let c = load(Some(&p), None).unwrap();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.pods.len(), 2);
        assert_eq!(c.partitions.len(), 2);
        assert_eq!(c.slurmctld_port, 6817);
    }
}
