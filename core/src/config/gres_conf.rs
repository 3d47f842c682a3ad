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
//! - `AutoDetect` is accepted and has no effect on the model (slurmd-rs probes GPUs itself);
//! - `Links=` marks the node's GPUs as linked unevenly: the controller then picks a job's GPUs
//!   in aligned blocks, else the lowest free indices as Slurm 22.05 does without `Links=`
//!   ([`super::NodeConfig::gpu_links`]). Its values are not read.

use super::keys::{self, KeyLookup, Scope};
use super::lex::{self, IncludeResolver};
use super::slurm_conf::check_value;
use super::{ClusterConfig, ConfigError, Location};
use crate::hostlist;

/// What the gres.conf lines for one node add up to.
#[derive(Debug, Default)]
struct NodeGpus {
    /// The first line naming the node (for errors).
    first: Option<Location>,
    count: u64,
    files: Vec<String>,
    /// Some line for the node gave no `File=`.
    files_incomplete: bool,
    cores: Vec<String>,
    ty: Option<String>,
    /// Some line for the node gave `Links=`.
    links: bool,
}

/// One gres.conf line's keys: each value with where it was written.
#[derive(Debug, Default)]
struct GresLine {
    node_expr: Option<(String, Location)>,
    name: Option<(String, Location)>,
    ty: Option<(String, Location)>,
    file: Option<(String, Location)>,
    count: Option<(super::slurm_conf::Val, Location)>,
    cores: Option<String>,
    /// `Links=` was given (its value is not read: see [`super::NodeConfig::gpu_links`]).
    links: bool,
}

/// Warnings given once per key, however many lines repeat it.
#[derive(Debug, Default)]
struct OnceWarnings(Vec<String>);

impl OnceWarnings {
    fn warn(&mut self, cfg: &mut ClusterConfig, key: String, msg: String) {
        if !self.0.contains(&key) {
            self.0.push(key);
            cfg.warnings.push(msg);
        }
    }
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
    let mut warned = OnceWarnings::default();
    for rec in records {
        let line_at = rec.pairs[0].at.clone();
        let line = read_line(cfg, rec.pairs, &mut warned)?;
        let Some((name, _)) = &line.name else {
            if line.file.is_some() || line.count.is_some() || line.ty.is_some() || line.cores.is_some() {
                return Err(ConfigError::Invalid {
                    at: line_at,
                    msg: "gres.conf line without Name=".to_string(),
                });
            }
            continue;
        };
        if !name.eq_ignore_ascii_case("gpu") {
            warned.warn(
                cfg,
                format!("gres:{}", name.to_ascii_lowercase()),
                format!("{line_at}: GRES `{name}' is not used by Flotilla yet; ignored"),
            );
            continue;
        }
        let files = match &line.file {
            None => Vec::new(),
            Some((expr, at)) => hostlist::expand(expr).map_err(|source| ConfigError::Hostlist {
                at: at.clone(),
                key: "File".to_string(),
                source,
            })?,
        };
        let n = gpu_count(&line, files.len())?;
        let targets = target_nodes(cfg, &line.node_expr)?;
        add_to_nodes(cfg, &mut per_node, &targets, &line, &line_at, n, &files)?;
    }
    settle_nodes(cfg, per_node)
}

/// Reads one line's keys: unknown keys are errors, Slurm keys Flotilla does not use warn
/// once, values are checked against the key table.
fn read_line(cfg: &mut ClusterConfig, pairs: Vec<lex::Pair>, warned: &mut OnceWarnings) -> Result<GresLine, ConfigError> {
    let mut line = GresLine::default();
    for pair in pairs {
        let k = match keys::lookup(Scope::Gres, &pair.key) {
            KeyLookup::Unknown => {
                return Err(ConfigError::UnknownKey {
                    at: pair.at,
                    key: pair.key,
                })
            }
            KeyLookup::SlurmOnly(n) => {
                warned.warn(
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
            "NodeName" => line.node_expr = Some(slot),
            "Name" => line.name = Some(slot),
            "Type" => line.ty = Some(slot),
            "File" => line.file = Some(slot),
            "Count" => line.count = Some((val, slot.1)),
            "Cores" => line.cores = Some(slot.0),
            "Links" => line.links = true,
            _ => {} // AutoDetect: accepted, no effect.
        }
    }
    Ok(line)
}

/// The GPUs a line gives each of its nodes: `Count` (which must equal the number of files
/// when `File=` is given), else the number of files, else 1.
fn gpu_count(line: &GresLine, files: usize) -> Result<u64, ConfigError> {
    Ok(match &line.count {
        Some((val, at)) => {
            let n = match val {
                super::slurm_conf::Val::Int(n) => *n,
                _ => 1,
            };
            if line.file.is_some() && n != files as u64 {
                return Err(ConfigError::Invalid {
                    at: at.clone(),
                    msg: format!("Count={n} but File= names {files} files"),
                });
            }
            n
        }
        None if line.file.is_some() => files as u64,
        None => 1,
    })
}

/// The nodes (indexes into `cfg.nodes`) a line applies to: those its `NodeName=` names (names
/// slurm.conf does not define are skipped with one warning), or every node with GPUs.
fn target_nodes(cfg: &mut ClusterConfig, node_expr: &Option<(String, Location)>) -> Result<Vec<usize>, ConfigError> {
    let Some((expr, at)) = node_expr else {
        return Ok((0..cfg.nodes.len()).filter(|i| cfg.nodes[*i].gpus > 0).collect());
    };
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
    Ok(idx)
}

/// Adds a GPU line (written at `line_at`, `n` GPUs, device `files`) to each target node's
/// sum; a `Type=` differing from the node's `Gres=` type is an error.
fn add_to_nodes(
    cfg: &ClusterConfig,
    per_node: &mut [NodeGpus],
    targets: &[usize],
    line: &GresLine,
    line_at: &Location,
    n: u64,
    files: &[String],
) -> Result<(), ConfigError> {
    for &i in targets {
        let node = &cfg.nodes[i];
        if let (Some((t, at)), Some(nt)) = (&line.ty, &node.gpu_type) {
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
        if line.file.is_some() {
            g.files.extend(files.iter().cloned());
        } else {
            g.files_incomplete = true;
        }
        if let Some(c) = &line.cores {
            if !g.cores.contains(c) {
                g.cores.push(c.clone());
            }
        }
        if let Some((t, _)) = &line.ty {
            g.ty.get_or_insert_with(|| t.clone());
        }
        g.links |= line.links;
    }
    Ok(())
}

/// Checks each node's sum against slurm.conf (GPU count; files for all GPUs or none) and
/// stores its device files, core affinity and, for an untyped `Gres=`, the gres.conf type.
fn settle_nodes(cfg: &mut ClusterConfig, per_node: Vec<NodeGpus>) -> Result<(), ConfigError> {
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
        node.gpu_links = g.links;
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
    fn links_mark_the_nodes_they_are_given_for() {
        let mut c = cluster();
        let text = "NodeName=n1 Name=gpu File=/dev/nvidia[0-7] Links=-1,2,2,2,0,0,0,0\nNodeName=n2 Name=gpu File=/dev/nvidia[0-7]\n";
        apply_gres_conf(&mut c, text, "gres.conf", &mut no_includes).unwrap();
        assert!(c.nodes[0].gpu_links);
        assert!(!c.nodes[1].gpu_links);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
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
