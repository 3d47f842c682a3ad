//! Where the controller gets its cluster configuration: the shared loader
//! (`flotilla_conf`, which reads slurm.conf, follows `Include`, reads gres.conf and
//! topology.conf beside it, and resolves `SLURM_CONF` / `FLOTILLA_CONF`), or a
//! `ClusterConfig` as JSON (`--cluster-json`, for tests that build clusters by hand); and the
//! users' default accounts from `quota.conf` beside `slurm.conf`.

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
        Some(p) => flotilla_conf::load_from(p)?,
        None => flotilla_conf::load(&|k| std::env::var(k).ok())?,
    };
    for w in &conf.warnings {
        tracing::warn!("{w}");
    }
    Ok(conf)
}

/// The account tree of `quota.conf` beside `slurm_conf` (format: [`flotilla_core::quota`]):
/// the scheduler's quotas (`GuaranteedGPUs=`, `MaxGPUs=`) and each user's default account;
/// empty (quotas off) when there is no `quota.conf`.
/// Errors: the file exists but cannot be read or parsed (the message names file and line).
pub fn quota_tree(slurm_conf: &Path) -> anyhow::Result<flotilla_core::quota::QuotaTree> {
    match flotilla_conf::load_quota(slurm_conf) {
        Ok(t) => Ok(t),
        Err(flotilla_conf::ConfError::Io { path, source }) => {
            Err(anyhow::Error::new(source).context(format!("reading {}", path.display())))
        }
        Err(flotilla_conf::ConfError::Quota(e)) => Err(e.into()),
        Err(e) => Err(e.into()),
    }
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

    #[test]
    fn default_accounts_from_quota_conf_beside_slurm_conf() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        assert!(quota_tree(&conf).unwrap().default_accounts().is_empty(), "no quota.conf");
        assert!(quota_tree(&conf).unwrap().is_empty(), "no quota.conf: quotas off");
        std::fs::write(d.path().join("quota.conf"), "Account=research MaxGPUs=8 Users=alice,bob\n").unwrap();
        let t = quota_tree(&conf).unwrap();
        let m = t.default_accounts();
        assert_eq!(m.get("bob").map(String::as_str), Some("research"));
        assert!(t.has_limits(), "the quotas are the scheduler's too");
        std::fs::write(d.path().join("quota.conf"), "Account=research Users=alice\n").unwrap();
        assert!(!quota_tree(&conf).unwrap().has_limits(), "accounts and users only: no quotas");
        std::fs::write(d.path().join("quota.conf"), "Account=research Bogus=1\n").unwrap();
        let e = quota_tree(&conf).unwrap_err().to_string();
        assert!(e.ends_with("quota.conf:1: unknown key `bogus`"), "{e}");
    }
}
