//! `gres.conf`: GPU device files and core affinity, merged into the nodes of `slurm.conf`.
//!
//! Rules (Slurm `gres.conf(5)`, with Flotilla's choices marked):
//! - a line with `NodeName=` (a hostlist) applies to those nodes; a line without it applies to
//!   every node — Flotilla: every node that has GPUs in slurm.conf;
//! - `File=/dev/nvidia[0-7]` lists one device file per GPU, in index order; several lines for
//!   one node append in line order;
//! - `Count` defaults to the number of files (or 1); with `File=` it must equal it;
//! - Flotilla: per node, the GPUs of its gres.conf lines must add up to the `gpu` count of its
//!   `Gres=` (Slurm would drain the node at registration): a mismatch is an error naming the
//!   node, both counts and the first gres.conf line for it. A `Type=` differing from the
//!   `Gres=` type is an error too; an untyped `Gres=gpu:8` takes the gres.conf `Type`;
//! - `NodeName` naming nodes slurm.conf does not define: those nodes are skipped with a
//!   warning (one gres.conf is often shared by several clusters);
//! - GRES other than `gpu` (`mps`, `shard`, `nic`, ...) are skipped with a warning;
//! - `AutoDetect` is accepted and has no effect on the model (slurmd-rs probes GPUs itself).

use super::keys::{self, KeyLookup, Scope};
use super::lex::{self, IncludeResolver};
use super::slurm_conf::check_value;
use super::{ClusterConfig, ConfigError, Location};
use crate::hostlist;

#[derive(Debug, Default)]
struct NodeGpus {
    first: Option<Location>,
    count: u64,
    files: Vec<String>,
    files_incomplete: bool,
    cores: Vec<String>,
    ty: Option<String>,
}

/// Merges the text of `gres.conf` (named `source`) into `cfg`'s nodes: fills
/// [`super::NodeConfig::gpu_files`] and [`super::NodeConfig::gpu_cores`], and checks GPU counts
/// and types against slurm.conf's `Gres=`. Warnings go to [`ClusterConfig::warnings`].
///
/// Errors: [`ConfigError`] with file and line (syntax, unknown key, bad value, mismatch).
pub fn apply_gres_conf(
    cfg: &mut ClusterConfig,
    text: &str,
    source: &str,
    include: &mut IncludeResolver<'_>,
) -> Result<(), ConfigError> {
    let records = lex::records(text, source, include)?;
    let mut per_node: Vec<NodeGpus> = cfg.nodes.iter().map(|_| NodeGpus::default()).collect();
    let mut warned: Vec<String> = Vec::new();
    let mut warn = |cfg: &mut ClusterConfig, key: String, msg: String| {
        if !warned.contains(&key) {
            warned.push(key);
            cfg.warnings.push(msg);
        }
    };
    for rec in records {
        let line_at = rec.pairs[0].at.clone();
        let mut node_expr = None;
        let mut name = None;
        let mut ty = None;
        let mut file = None;
        let mut count = None;
        let mut cores = None;
        for pair in rec.pairs {
            let k = match keys::lookup(Scope::Gres, &pair.key) {
                KeyLookup::Unknown => {
                    return Err(ConfigError::UnknownKey {
                        at: pair.at,
                        key: pair.key,
                    })
                }
                KeyLookup::SlurmOnly(n) => {
                    warn(
                        cfg,
                        n.to_string(),
                        format!(
                            "{}: {n} is a Slurm key Flotilla does not use yet; ignored",
                            pair.at
                        ),
                    );
                    continue;
                }
                KeyLookup::Used(k) => k,
            };
            let val = check_value(k, &pair.value, &pair.at)?;
            let slot = (pair.value, pair.at);
            match k.name {
                "NodeName" => node_expr = Some(slot),
                "Name" => name = Some(slot),
                "Type" => ty = Some(slot),
                "File" => file = Some(slot),
                "Count" => count = Some((val, slot.1)),
                "Cores" => cores = Some(slot.0),
                _ => {} // AutoDetect: accepted, no effect.
            }
        }
        let Some((name, _)) = name else {
            if file.is_some() || count.is_some() || ty.is_some() || cores.is_some() {
                return Err(ConfigError::Invalid {
                    at: line_at,
                    msg: "gres.conf line without Name=".to_string(),
                });
            }
            continue;
        };
        if !name.eq_ignore_ascii_case("gpu") {
            warn(
                cfg,
                format!("gres:{}", name.to_ascii_lowercase()),
                format!("{line_at}: GRES `{name}' is not used by Flotilla yet; ignored"),
            );
            continue;
        }
        let files = match &file {
            None => Vec::new(),
            Some((expr, at)) => hostlist::expand(expr).map_err(|source| ConfigError::Hostlist {
                at: at.clone(),
                key: "File".to_string(),
                source,
            })?,
        };
        let n = match count {
            Some((val, at)) => {
                let n = match val {
                    super::slurm_conf::Val::Int(n) => n,
                    _ => 1,
                };
                if file.is_some() && n != files.len() as u64 {
                    return Err(ConfigError::Invalid {
                        at,
                        msg: format!("Count={n} but File= names {} files", files.len()),
                    });
                }
                n
            }
            None if file.is_some() => files.len() as u64,
            None => 1,
        };
        let targets: Vec<usize> = match &node_expr {
            None => (0..cfg.nodes.len())
                .filter(|i| cfg.nodes[*i].gpus > 0)
                .collect(),
            Some((expr, at)) => {
                let names = hostlist::expand(expr).map_err(|source| ConfigError::Hostlist {
                    at: at.clone(),
                    key: "NodeName".to_string(),
                    source,
                })?;
                let mut idx = Vec::new();
                let mut unknown = Vec::new();
                for nm in names {
                    match cfg.nodes.iter().position(|x| x.name == nm) {
                        Some(i) => idx.push(i),
                        None => unknown.push(nm),
                    }
                }
                if !unknown.is_empty() {
                    let shown: Vec<&str> = unknown.iter().take(8).map(String::as_str).collect();
                    let more = if unknown.len() > 8 { ",..." } else { "" };
                    cfg.warnings.push(format!(
                        "{at}: nodes not defined in slurm.conf skipped: {}{more}",
                        shown.join(",")
                    ));
                }
                idx
            }
        };
        for i in targets {
            let node = &cfg.nodes[i];
            if let (Some((t, at)), Some(nt)) = (&ty, &node.gpu_type) {
                if !t.eq_ignore_ascii_case(nt) {
                    return Err(ConfigError::Invalid {
                        at: at.clone(),
                        msg: format!(
                            "node {}: gres.conf Type={t} but slurm.conf Gres={}",
                            node.name, node.gres
                        ),
                    });
                }
            }
            let g = &mut per_node[i];
            g.first.get_or_insert_with(|| line_at.clone());
            g.count = g.count.saturating_add(n);
            if file.is_some() {
                g.files.extend(files.iter().cloned());
            } else {
                g.files_incomplete = true;
            }
            if let Some(c) = &cores {
                if !g.cores.contains(c) {
                    g.cores.push(c.clone());
                }
            }
            if let Some((t, _)) = &ty {
                g.ty.get_or_insert_with(|| t.clone());
            }
        }
    }
    for (node, g) in cfg.nodes.iter_mut().zip(per_node) {
        let Some(at) = g.first else { continue };
        if g.count != u64::from(node.gpus) {
            return Err(ConfigError::Invalid {
                at,
                msg: format!(
                    "node {}: gres.conf gives {} GPUs but slurm.conf Gres={} gives {}",
                    node.name,
                    g.count,
                    if node.gres.is_empty() {
                        "(none)"
                    } else {
                        &node.gres
                    },
                    node.gpus
                ),
            });
        }
        if g.files_incomplete && !g.files.is_empty() {
            return Err(ConfigError::Invalid {
                at,
                msg: format!(
                    "node {}: File= is given for some of its GPUs only",
                    node.name
                ),
            });
        }
        node.gpu_files = g.files;
        node.gpu_cores = (!g.cores.is_empty()).then(|| g.cores.join(","));
        if node.gpu_type.is_none() {
            node.gpu_type = g.ty;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{no_includes, parse_slurm_conf};
    use super::*;

    fn cluster() -> ClusterConfig {
        let text = "GresTypes=gpu\nNodeName=n[1-2] Gres=gpu:h100:8\nNodeName=cpu1\n";
        parse_slurm_conf(text, "slurm.conf", &mut no_includes).unwrap()
    }

    #[test]
    fn per_node_line_fills_files_and_cores() {
        let mut c = cluster();
        let text = "AutoDetect=off\n# c\nNodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-31\n\
                    NodeName=n[1-2] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=32-63\n";
        apply_gres_conf(&mut c, text, "gres.conf", &mut no_includes).unwrap();
        assert_eq!(c.nodes[0].gpu_files.len(), 8);
        assert_eq!(c.nodes[1].gpu_files[7], "/dev/nvidia7");
        assert_eq!(c.nodes[0].gpu_cores.as_deref(), Some("0-31,32-63"));
        assert!(c.nodes[2].gpu_files.is_empty());
    }

    #[test]
    fn global_line_applies_to_gpu_nodes() {
        let mut c = cluster();
        apply_gres_conf(
            &mut c,
            "name=gpu file=/dev/nvidia[0-7]",
            "gres.conf",
            &mut no_includes,
        )
        .unwrap();
        assert_eq!(c.nodes[0].gpu_files.len(), 8);
        assert_eq!(c.nodes[1].gpu_files.len(), 8);
        assert!(c.nodes[2].gpu_files.is_empty());
    }

    #[test]
    fn count_mismatch_is_an_error_naming_node_and_line() {
        let mut c = cluster();
        let err = apply_gres_conf(
            &mut c,
            "\nNodeName=n1 Name=gpu File=/dev/nvidia[0-3]",
            "gres.conf",
            &mut no_includes,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "gres.conf:2: node n1: gres.conf gives 4 GPUs but slurm.conf Gres=gpu:h100:8 gives 8"
        );
        let err = apply_gres_conf(
            &mut c,
            "Name=gpu Count=2 File=/dev/nvidia0",
            "g",
            &mut no_includes,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("Count=2 but File= names 1 files"),
            "{err}"
        );
    }

    #[test]
    fn type_mismatch_and_missing_name_are_errors() {
        let mut c = cluster();
        let err = apply_gres_conf(
            &mut c,
            "NodeName=n1 Name=gpu Type=a100 Count=8",
            "g",
            &mut no_includes,
        )
        .unwrap_err();
        assert!(err.to_string().contains("Type=a100"), "{err}");
        let err = apply_gres_conf(&mut c, "File=/dev/nvidia0", "g", &mut no_includes).unwrap_err();
        assert_eq!(err.to_string(), "g:1: gres.conf line without Name=");
    }

    #[test]
    fn unknown_and_slurm_only_keys() {
        let mut c = cluster();
        let err = apply_gres_conf(&mut c, "Name=gpu Bogus=1", "g", &mut no_includes).unwrap_err();
        assert_eq!(err.to_string(), "g:1: unknown key `Bogus'");
        apply_gres_conf(
            &mut c,
            "Name=gpu File=/dev/nvidia[0-7] Flags=nvidia_gpu_env\nNodeName=zz9 Name=mps Count=100",
            "g",
            &mut no_includes,
        )
        .unwrap();
        assert!(
            c.warnings
                .iter()
                .any(|w| w.starts_with("g:1: Flags is a Slurm key")),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings.iter().any(|w| w.contains("GRES `mps'")),
            "{:?}",
            c.warnings
        );
    }
}
