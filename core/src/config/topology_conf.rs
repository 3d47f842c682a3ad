//! `topology.conf`: leaf switches (`topology/tree`) or blocks (`topology/block`) as pods.
//!
//! - Tree: `SwitchName=leaf1 Nodes=gpu[01-32]` is a leaf and becomes a pod;
//!   `SwitchName=spine Switches=leaf[1-4]` is a non-leaf switch ([`super::SwitchConfig`]).
//!   A switch with both `Nodes=` and `Switches=` is an error; one with neither is skipped with
//!   a warning. Child switches must be defined somewhere in the file.
//! - Block: `BlockName=b1 Nodes=...` becomes a pod; `BlockSizes=4,16` is kept in
//!   [`ClusterConfig::block_sizes`]. Switch and block lines in one file are an error.
//! - A node in no leaf switch or block becomes a pod of its own, named after the node, with one
//!   warning listing such nodes: a `pod` job may use it alone but never with other nodes, since
//!   nothing says how it is connected (Slurm's tree plugin likewise cannot place multi-node jobs
//!   across nodes no switch reaches).
//! - Flotilla: a node in two pods, a node slurm.conf does not define, and duplicate switch or
//!   block names are errors (pods partition the nodes; invariant 3 of DESIGN.md rests on it).

use super::keys::{self, KeyLookup, Scope};
use super::lex::{self, IncludeResolver};
use super::slurm_conf::check_value;
use super::{ClusterConfig, ConfigError, Location, PodConfig, SwitchConfig};
use crate::hostlist;

/// One topology.conf line's keys: its head (`SwitchName`, `BlockName` or `BlockSizes`, with
/// the value), and `Nodes=` and `Switches=` with where they were written.
#[derive(Debug)]
struct TopoLine {
    at: Location,
    what: &'static str,
    value: String,
    nodes: Option<(String, Location)>,
    children: Option<(String, Location)>,
}

/// What the lines read so far define.
#[derive(Debug, Default)]
struct Topology {
    pods: Vec<(PodConfig, Location)>,
    switches: Vec<(SwitchConfig, Location)>,
    block_sizes: Vec<u32>,
    /// `tree` or `block`, from the first line, and where that line is.
    kind: Option<(&'static str, Location)>,
    /// The one warning for Slurm keys Flotilla does not use has been given.
    warned_unused: bool,
    /// The node names slurm.conf defines, made at the first leaf (a set, so that reading a
    /// leaf is linear in its nodes, not in nodes × the cluster's nodes).
    defined: Option<std::collections::HashSet<String>>,
    /// Each node already in a pod, with that pod's index in `pods`.
    assigned: std::collections::HashMap<String, usize>,
}

/// Reads the text of `topology.conf` (named `source`) into `cfg`: replaces
/// [`ClusterConfig::pods`], [`ClusterConfig::switches`] and [`ClusterConfig::block_sizes`].
///
/// Errors: [`ConfigError`] with file and line.
pub fn apply_topology_conf(
    cfg: &mut ClusterConfig,
    text: &str,
    source: &str,
    include: &mut IncludeResolver<'_>,
) -> Result<(), ConfigError> {
    let records = lex::records(text, source, include)?;
    let mut topo = Topology::default();
    for rec in records {
        let line = topo.read_line(cfg, rec.pairs)?;
        topo.check_kind(&line)?;
        if line.what == "BlockSizes" {
            topo.block_sizes = block_sizes(&line.value, &line.at)?;
            continue;
        }
        topo.add(cfg, line)?;
    }
    topo.check_children()?;
    let mut pods: Vec<PodConfig> = topo.pods.into_iter().map(|(p, _)| p).collect();
    pods_for_lonely_nodes(cfg, &mut pods, source);
    cfg.pods = pods;
    cfg.switches = topo.switches.into_iter().map(|(s, _)| s).collect();
    cfg.block_sizes = topo.block_sizes;
    Ok(())
}

impl Topology {
    /// Reads one line's keys: unknown keys are errors, Slurm keys Flotilla does not use warn
    /// once per file, values are checked against the key table; a line needs exactly one
    /// head key.
    fn read_line(&mut self, cfg: &mut ClusterConfig, pairs: Vec<lex::Pair>) -> Result<TopoLine, ConfigError> {
        let head_at = pairs[0].at.clone();
        let mut head: Option<(&'static str, String)> = None;
        let (mut nodes, mut children) = (None, None);
        for pair in pairs {
            let k = match keys::lookup(Scope::Topology, &pair.key) {
                KeyLookup::Unknown => {
                    return Err(ConfigError::UnknownKey {
                        at: pair.at,
                        key: pair.key,
                    })
                }
                KeyLookup::SlurmOnly(n) => {
                    if !self.warned_unused {
                        self.warned_unused = true;
                        cfg.warnings.push(format!(
                            "{}: {n} is a Slurm key Flotilla does not use yet; ignored",
                            pair.at
                        ));
                    }
                    continue;
                }
                KeyLookup::Used(k) => k,
            };
            check_value(k, &pair.value, &pair.at)?;
            match k.name {
                "SwitchName" | "BlockName" | "BlockSizes" => {
                    if head.is_some() {
                        return Err(ConfigError::Invalid {
                            at: pair.at,
                            msg: format!("{} on a line that already has a name", k.name),
                        });
                    }
                    head = Some((k.name, pair.value));
                }
                "Nodes" => nodes = Some((pair.value, pair.at)),
                _ => children = Some((pair.value, pair.at)),
            }
        }
        let Some((what, value)) = head else {
            return Err(ConfigError::Invalid {
                at: head_at,
                msg: "line without SwitchName=, BlockName= or BlockSizes=".to_string(),
            });
        };
        Ok(TopoLine { at: head_at, what, value, nodes, children })
    }

    /// Switch lines (`tree`) and block lines (`block`) never mix in one file.
    fn check_kind(&mut self, line: &TopoLine) -> Result<(), ConfigError> {
        let this_kind = if line.what == "SwitchName" { "tree" } else { "block" };
        match &self.kind {
            Some((k, first)) if *k != this_kind => Err(ConfigError::Invalid {
                at: line.at.clone(),
                msg: format!("{} line in a {k} topology (see {first})", line.what),
            }),
            Some(_) => Ok(()),
            None => {
                self.kind = Some((this_kind, line.at.clone()));
                Ok(())
            }
        }
    }

    /// Adds a switch or block line: a leaf (`Nodes=`) becomes a pod, a switch with
    /// `Switches=` a non-leaf switch; names are unique, a block has no `Switches=`, a line
    /// with both is an error and one with neither is skipped with a warning.
    fn add(&mut self, cfg: &mut ClusterConfig, line: TopoLine) -> Result<(), ConfigError> {
        let TopoLine { at: head_at, what, value, nodes, children } = line;
        if value.is_empty() {
            return Err(ConfigError::Invalid {
                at: head_at,
                msg: format!("empty {what}"),
            });
        }
        if self.pods.iter().any(|(p, _)| p.name == value) || self.switches.iter().any(|(s, _)| s.name == value) {
            return Err(ConfigError::Invalid {
                at: head_at,
                msg: format!("duplicate {what} `{value}'"),
            });
        }
        if what == "BlockName" && children.is_some() {
            return Err(ConfigError::Invalid {
                at: head_at,
                msg: format!("block {value}: Switches= is for SwitchName lines"),
            });
        }
        match (nodes, children) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid {
                    at: head_at,
                    msg: format!("switch {value} has both Nodes= and Switches="),
                });
            }
            (Some((expr, at)), None) => {
                let list = self.leaf_nodes(cfg, &value, &expr, &at)?;
                let pod = self.pods.len();
                self.assigned.extend(list.iter().map(|n| (n.clone(), pod)));
                self.pods.push((
                    PodConfig {
                        name: value,
                        nodes: list,
                        nodes_expr: expr,
                    },
                    head_at,
                ));
            }
            (None, Some((expr, at))) => {
                let names = expand(&expr, "Switches", &at)?;
                self.switches.push((
                    SwitchConfig {
                        name: value,
                        switches: names,
                        switches_expr: expr,
                    },
                    at,
                ));
            }
            (None, None) => {
                cfg.warnings.push(format!(
                    "{head_at}: {what} {value} has neither Nodes= nor Switches=; ignored"
                ));
            }
        }
        Ok(())
    }

    /// The nodes of leaf `value`'s `Nodes=` expression (written at `at`), each once: every
    /// one defined in slurm.conf and in no other pod.
    fn leaf_nodes(&mut self, cfg: &ClusterConfig, value: &str, expr: &str, at: &Location) -> Result<Vec<String>, ConfigError> {
        let names = expand(expr, "Nodes", at)?;
        let defined = self.defined.get_or_insert_with(|| cfg.nodes.iter().map(|n| n.name.clone()).collect());
        let mut list: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for name in names {
            if !defined.contains(&name) {
                return Err(ConfigError::Invalid {
                    at: at.clone(),
                    msg: format!("{value}: node `{name}' is not defined in slurm.conf"),
                });
            }
            if let Some(&other) = self.assigned.get(&name) {
                return Err(ConfigError::Invalid {
                    at: at.clone(),
                    msg: format!("node `{name}' is in both {} and {value}", self.pods[other].0.name),
                });
            }
            if seen.insert(name.clone()) {
                list.push(name);
            }
        }
        Ok(list)
    }

    /// Every child a switch names is defined somewhere in the file.
    fn check_children(&self) -> Result<(), ConfigError> {
        for (sw, at) in &self.switches {
            for child in &sw.switches {
                let known = self.pods.iter().any(|(p, _)| &p.name == child) || self.switches.iter().any(|(s, _)| &s.name == child);
                if !known {
                    return Err(ConfigError::Invalid {
                        at: at.clone(),
                        msg: format!("switch {}: child switch `{child}' is not defined", sw.name),
                    });
                }
            }
        }
        Ok(())
    }
}

/// `BlockSizes=4,16` (written at `at`): comma-separated numbers.
fn block_sizes(value: &str, at: &Location) -> Result<Vec<u32>, ConfigError> {
    value
        .split(',')
        .map(|part| {
            part.trim().parse::<u32>().map_err(|_| ConfigError::InvalidValue {
                at: at.clone(),
                key: "BlockSizes".to_string(),
                value: value.to_string(),
                reason: "expected comma-separated numbers".to_string(),
            })
        })
        .collect()
}

/// Each node in no leaf switch or block becomes a pod of its own, named after the node, with
/// one warning (naming `source`) listing up to 8 of them.
fn pods_for_lonely_nodes(cfg: &mut ClusterConfig, pods: &mut Vec<PodConfig>, source: &str) {
    let in_pods: std::collections::HashSet<&str> = pods.iter().flat_map(|p| p.nodes.iter().map(String::as_str)).collect();
    let lonely: Vec<String> = cfg
        .nodes
        .iter()
        .filter(|n| !in_pods.contains(n.name.as_str()))
        .map(|n| n.name.clone())
        .collect();
    if lonely.is_empty() {
        return;
    }
    let shown: Vec<&str> = lonely.iter().take(8).map(String::as_str).collect();
    let more = if lonely.len() > 8 { ",..." } else { "" };
    cfg.warnings.push(format!(
        "{source}: {} node(s) in no leaf switch or block, each made a pod of its own: {}{more}",
        lonely.len(),
        shown.join(",")
    ));
    for name in lonely {
        pods.push(PodConfig {
            name: name.clone(),
            nodes_expr: name.clone(),
            nodes: vec![name],
        });
    }
}

fn expand(expr: &str, key: &str, at: &Location) -> Result<Vec<String>, ConfigError> {
    hostlist::expand(expr).map_err(|source| ConfigError::Hostlist {
        at: at.clone(),
        key: key.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{no_includes, parse_slurm_conf};
    use super::*;

    fn cluster() -> ClusterConfig {
        parse_slurm_conf("NodeName=n[1-6] CPUs=4", "slurm.conf", &mut no_includes).unwrap()
    }

    #[test]
    fn tree_leaves_become_pods_and_the_rest_singletons() {
        let mut c = cluster();
        let text = "SwitchName=leaf1 Nodes=n[1-2]\nSwitchName=leaf2 Nodes=n[3-4] LinkSpeed=100\n\
                    SwitchName=spine Switches=leaf[1-2]\n";
        apply_topology_conf(&mut c, text, "topology.conf", &mut no_includes).unwrap();
        let pods: Vec<(&str, usize)> = c
            .pods
            .iter()
            .map(|p| (p.name.as_str(), p.nodes.len()))
            .collect();
        assert_eq!(pods, [("leaf1", 2), ("leaf2", 2), ("n5", 1), ("n6", 1)]);
        assert_eq!(c.switches[0].switches, ["leaf1", "leaf2"]);
        assert!(c.warnings.iter().any(|w| w.contains("LinkSpeed")));
        assert!(
            c.warnings.iter().any(|w| w.contains("n5,n6")),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn a_node_named_twice_in_one_leaf_is_kept_once_in_order() {
        let mut c = cluster();
        apply_topology_conf(&mut c, "SwitchName=a Nodes=n2,n1,n2,n1\nSwitchName=b Nodes=n3", "t", &mut no_includes).unwrap();
        assert_eq!(c.pods[0].nodes, ["n2", "n1"]);
        assert_eq!(c.pods[1].nodes, ["n3"]);
        assert_eq!(c.pods.len(), 5, "n4-n6 are pods of their own: {:?}", c.pods);
    }

    #[test]
    fn blocks_become_pods() {
        let mut c = cluster();
        let text = "BlockName=b1 Nodes=n[1-3]\nBlockName=b2 Nodes=n[4-6]\nBlockSizes=3,6\n";
        apply_topology_conf(&mut c, text, "t", &mut no_includes).unwrap();
        assert_eq!(c.pods.len(), 2);
        assert_eq!(c.block_sizes, [3, 6]);
    }

    #[test]
    fn inconsistent_topologies_are_errors() {
        let cases = [
            (
                "SwitchName=a Nodes=n1\nBlockName=b Nodes=n2",
                "t:2: BlockName line in a tree topology (see t:1)",
            ),
            (
                "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1",
                "t:2: node `n1' is in both a and b",
            ),
            (
                "SwitchName=a Nodes=zz",
                "t:1: a: node `zz' is not defined in slurm.conf",
            ),
            (
                "SwitchName=s Switches=nope",
                "t:1: switch s: child switch `nope' is not defined",
            ),
            (
                "SwitchName=a Nodes=n1 Switches=x",
                "t:1: switch a has both Nodes= and Switches=",
            ),
            (
                "Nodes=n1",
                "t:1: line without SwitchName=, BlockName= or BlockSizes=",
            ),
            ("SwitchName=a Color=red", "t:1: unknown key `Color'"),
        ];
        for (text, want) in cases {
            let mut c = cluster();
            let err = apply_topology_conf(&mut c, text, "t", &mut no_includes).unwrap_err();
            assert_eq!(err.to_string(), want);
        }
    }
}
