//! Where the controller gets its cluster configuration: the one call site to switch to the
//! shared loader (`flotilla-commands`' `conf::load`) when it is merged.
//!
//! Until then: a `ClusterConfig` as JSON (`--cluster-json`, what tests use), or a minimal
//! reader of `slurm.conf` (+ `topology.conf` beside it) covering the keys the controller uses:
//! the globals below, `NodeName=` and `PartitionName=` lines, and `SwitchName=` leaf switches.

use anyhow::{anyhow, bail, Context};
use flotilla_core::config::{ClusterConfig, ConfNodeState, NodeConfig, PartitionConfig, PodConfig, TopologyKind};
use flotilla_core::hostlist;
use flotilla_core::time::{time_str2mins, SlurmDuration};
use std::path::Path;

/// Loads the cluster configuration.
pub fn load(slurm_conf: Option<&Path>, cluster_json: Option<&Path>) -> anyhow::Result<ClusterConfig> {
    if let Some(p) = cluster_json {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        return serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()));
    }
    let path = slurm_conf
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("SLURM_CONF").map(Into::into))
        .or_else(|| std::env::var_os("FLOTILLA_CONF").map(Into::into))
        .unwrap_or_else(|| "/etc/slurm/slurm.conf".into());
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let topo = path.with_file_name("topology.conf");
    let topo_text = std::fs::read_to_string(&topo).ok();
    parse_minimal(&text, topo_text.as_deref()).with_context(|| format!("parsing {}", path.display()))
}

fn minutes(v: &str) -> anyhow::Result<Option<u64>> {
    match time_str2mins(v).map_err(|e| anyhow!("bad time {v}: {e:?}"))? {
        SlurmDuration::Infinite => Ok(None),
        SlurmDuration::Finite(m) => Ok(Some(m.max(0) as u64)),
    }
}

fn pairs(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Parses the subset of `slurm.conf` the controller needs.
pub fn parse_minimal(text: &str, topology: Option<&str>) -> anyhow::Result<ClusterConfig> {
    let mut c = ClusterConfig {
        slurmctld_port: 6817,
        slurmd_port: 6818,
        slurm_user: "root".into(),
        kill_wait_s: 30,
        min_job_age_s: 300,
        max_job_count: 10_000,
        max_array_size: 1001,
        ..ClusterConfig::default()
    };
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let kv = pairs(line);
        let Some((k0, v0)) = kv.first() else { continue };
        let num = |v: &str| v.parse::<u64>().map_err(|_| anyhow!("line {}: bad number {v}", lineno + 1));
        match k0.to_ascii_lowercase().as_str() {
            "nodename" => {
                let mut sockets = 1;
                let mut cores = 1;
                let mut threads = 1;
                let mut cpus = None;
                let mut mem = 1;
                let mut gpus = 0;
                let mut gpu_type = None;
                let mut gres = String::new();
                let mut addr = None;
                let mut port = None;
                let mut state = ConfNodeState::Unknown;
                for (k, v) in &kv[1..] {
                    match k.to_ascii_lowercase().as_str() {
                        "sockets" => sockets = num(v)? as u32,
                        "corespersocket" => cores = num(v)? as u32,
                        "threadspercore" => threads = num(v)? as u32,
                        "cpus" => cpus = Some(num(v)? as u32),
                        "realmemory" => mem = num(v)?,
                        "nodeaddr" => addr = Some(v.clone()),
                        "port" => port = Some(num(v)? as u16),
                        "state" => {
                            state = match v.to_ascii_uppercase().as_str() {
                                "DOWN" => ConfNodeState::Down,
                                "DRAIN" => ConfNodeState::Drain,
                                "IDLE" => ConfNodeState::Idle,
                                "FUTURE" => ConfNodeState::Future,
                                _ => ConfNodeState::Unknown,
                            }
                        }
                        "gres" => {
                            gres = v.clone();
                            for g in v.split(',') {
                                let parts: Vec<&str> = g.split(':').collect();
                                if parts.first() == Some(&"gpu") {
                                    match parts.len() {
                                        2 => gpus = num(parts[1])? as u32,
                                        3 => {
                                            gpu_type = Some(parts[1].to_string());
                                            gpus = num(parts[2])? as u32;
                                        }
                                        _ => bail!("line {}: bad Gres {g}", lineno + 1),
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
                if v0.eq_ignore_ascii_case("DEFAULT") {
                    continue;
                }
                for name in hostlist::expand(v0).map_err(|e| anyhow!("line {}: {e}", lineno + 1))? {
                    c.nodes.push(NodeConfig {
                        addr: addr.clone().unwrap_or_else(|| name.clone()),
                        hostname: name.clone(),
                        port: port.unwrap_or(c.slurmd_port),
                        sockets,
                        cores_per_socket: cores,
                        threads_per_core: threads,
                        cpus: cpus.unwrap_or(sockets * cores * threads),
                        real_memory_mib: mem,
                        gpus,
                        gpu_type: gpu_type.clone(),
                        gpu_files: Vec::new(),
                        gpu_cores: None,
                        gres: gres.clone(),
                        weight: 1,
                        features: Vec::new(),
                        state,
                        name,
                    });
                }
            }
            "partitionname" => {
                let mut p = PartitionConfig {
                    name: v0.clone(),
                    nodes: Vec::new(),
                    nodes_expr: String::new(),
                    default: false,
                    max_time_min: None,
                    default_time_min: None,
                    state_up: true,
                    state: "UP".into(),
                    priority_tier: 1,
                    priority_job_factor: 1,
                    max_nodes: None,
                    default_topology: TopologyKind::Any,
                    sub_node_pool: false,
                };
                for (k, v) in &kv[1..] {
                    match k.to_ascii_lowercase().as_str() {
                        "nodes" => {
                            p.nodes_expr = v.clone();
                            p.nodes = if v.eq_ignore_ascii_case("ALL") {
                                c.nodes.iter().map(|n| n.name.clone()).collect()
                            } else {
                                hostlist::expand(v).map_err(|e| anyhow!("line {}: {e}", lineno + 1))?
                            };
                        }
                        "default" => p.default = v.eq_ignore_ascii_case("YES"),
                        "maxtime" => p.max_time_min = minutes(v)?,
                        "defaulttime" => p.default_time_min = minutes(v)?,
                        "state" => {
                            p.state = v.to_ascii_uppercase();
                            p.state_up = p.state == "UP";
                        }
                        "defaulttopology" => {
                            p.default_topology =
                                TopologyKind::parse(v).ok_or_else(|| anyhow!("line {}: bad DefaultTopology {v}", lineno + 1))?
                        }
                        _ => {}
                    }
                }
                c.partitions.push(p);
            }
            key => {
                c.raw.push((k0.clone(), v0.clone()));
                match key {
                    "clustername" => c.cluster_name = v0.clone(),
                    "slurmctldport" => c.slurmctld_port = num(v0)? as u16,
                    "slurmdport" => c.slurmd_port = num(v0)? as u16,
                    "slurmuser" => c.slurm_user = v0.clone(),
                    "statesavelocation" => c.state_save_location = v0.clone(),
                    "defmempercpu" => c.def_mem_per_cpu_mib = Some(num(v0)?),
                    "killwait" => c.kill_wait_s = num(v0)?,
                    "minjobage" => c.min_job_age_s = num(v0)?,
                    "maxjobcount" => c.max_job_count = num(v0)?,
                    "maxarraysize" => c.max_array_size = num(v0)?,
                    "selecttype" => c.select_type = v0.clone(),
                    "prioritytype" => c.priority_type = v0.clone(),
                    "schedulertype" => c.scheduler_type = v0.clone(),
                    "topologyplugin" => c.topology_plugin = v0.clone(),
                    "slurmctldhost" => {
                        let (h, a) = match v0.split_once('(') {
                            Some((h, a)) => (h.to_string(), a.trim_end_matches(')').to_string()),
                            None => (v0.clone(), v0.clone()),
                        };
                        c.control_host = h;
                        c.control_addr = a;
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(t) = topology {
        for raw in t.lines() {
            let line = raw.split('#').next().unwrap_or("").trim();
            let kv = pairs(line);
            let name = kv.iter().find(|(k, _)| k.eq_ignore_ascii_case("SwitchName")).map(|(_, v)| v.clone());
            let nodes = kv.iter().find(|(k, _)| k.eq_ignore_ascii_case("Nodes")).map(|(_, v)| v.clone());
            if let (Some(name), Some(expr)) = (name, nodes) {
                c.pods.push(PodConfig {
                    name,
                    nodes: hostlist::expand(&expr).map_err(|e| anyhow!("topology.conf: {e}"))?,
                    nodes_expr: expr,
                });
            }
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_reference_conf() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/slurm-reference/conf");
        let Ok(text) = std::fs::read_to_string(dir.join("slurm.conf")) else {
            eprintln!("skipped: shared/slurm-reference not found");
            return;
        };
        let topo = std::fs::read_to_string(dir.join("topology.conf")).ok();
        let c = parse_minimal(&text, topo.as_deref()).unwrap();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.nodes[0].cpus, 64);
        assert_eq!(c.nodes[0].gpus, 8);
        assert_eq!(c.nodes[0].gpu_type.as_deref(), Some("h100"));
        assert_eq!(c.partitions[0].max_time_min, Some(2880));
        assert_eq!(c.partitions[0].default_time_min, Some(60));
        assert_eq!(c.partitions[1].nodes, vec!["gpu01", "gpu02"]);
        assert_eq!(c.def_mem_per_cpu_mib, Some(1024));
        assert_eq!(c.max_array_size, 10001);
        assert_eq!(c.kill_wait_s, 5);
        assert_eq!(c.slurm_user, "slurm");
        assert_eq!(c.pods.len(), 2);
    }
}
