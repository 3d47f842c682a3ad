//! Nodes and partitions: `v0.0.4x_node` and `v0.0.4x_partition_info` (inline in v0.0.41) and
//! the answers of `GET /slurm/vX/nodes`, `/node/{node_name}` (`v0.0.4x_openapi_nodes_resp`),
//! `/partitions` and `/partition/{partition_name}` (`v0.0.4x_openapi_partition_resp`), from
//! the controller's [`NodeInfo`] and [`PartitionInfo`].
//!
//! Fields are Slurm 25.11's `PARSER_ARRAY(NODE)` and `PARSER_ARRAY(PARTITION_INFO)`; what
//! Flotilla does not track (sockets, cores, boot time, features, energy, ...) is left out (no
//! property of either is required). Memory is MiB, times minutes.

use super::{add_common, infinite, name, no_val, set, unset, Width};
use crate::model::Model;
use crate::schema::{array, opt, req, Components, IntFormat, Schema};
use crate::version::ApiVersion;
use flotilla_proto::{NodeInfo, PartitionInfo};
use serde_json::{json, Value};

/// What every object of one answer shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ctx {
    /// `ClusterName`.
    pub cluster: String,
    /// `State=` of each partition that is not up, by name (`DOWN`, `DRAIN`, `INACTIVE`: the
    /// controller's `QueryPartitionStates`); a partition not up and not here is `DOWN`.
    pub partition_states: std::collections::BTreeMap<String, String>,
}

/// The partition state words of every version's enum (the data parser's `PARTITION_STATES`;
/// a partition shows [`PartitionInfo::state_word`], as `partitions.c` shows its `state`).
const PARTITION_STATES: [&str; 5] = ["INACTIVE", "UNKNOWN", "UP", "DOWN", "DRAIN"];

/// The node state words Flotilla reports (each in every version's `state` enum).
const NODE_STATES: [&str; 8] = ["UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "MIXED", "DRAIN", "FAIL", "NOT_RESPONDING"];

/// A node's state as Slurm's flag array: the base state (`IDLE`, `MIXED`, `ALLOCATED`,
/// `DOWN`, `UNKNOWN`) then its flags. `DRAINED` is `IDLE` + `DRAIN`; `DRAINING` is
/// `ALLOCATED` (every CPU in use) or `MIXED` + `DRAIN`; a node whose daemon is not connected
/// adds `NOT_RESPONDING` (sinfo's `*`).
pub fn node_state(n: &NodeInfo) -> Vec<&'static str> {
    let busy = if n.cpus > 0 && n.cpus_alloc >= n.cpus { "ALLOCATED" } else { "MIXED" };
    let mut out = match n.state.as_str() {
        "IDLE" => vec!["IDLE"],
        "MIXED" => vec!["MIXED"],
        "ALLOCATED" => vec!["ALLOCATED"],
        "DOWN" => vec!["DOWN"],
        "DRAINED" => vec!["IDLE", "DRAIN"],
        "DRAINING" => vec![busy, "DRAIN"],
        "FAIL" if n.cpus_alloc == 0 && n.gpu_alloc_mask == 0 => vec!["IDLE", "FAIL"],
        "FAIL" | "FAILING" => vec![busy, "FAIL"],
        _ => vec!["UNKNOWN"],
    };
    if n.not_responding {
        out.push("NOT_RESPONDING");
    }
    out
}

/// `gpu:h100:8` (Slurm's node `Gres`), empty without GPUs.
pub fn gres(n: &NodeInfo) -> String {
    if n.gpus == 0 {
        return String::new();
    }
    match &n.gpu_type {
        Some(t) => format!("gpu:{t}:{}", n.gpus),
        None => format!("gpu:{}", n.gpus),
    }
}

/// Indices of a mask as Slurm's `bit_fmt` writes them: `0-1,3`.
fn ranges(mask: u64, n: u32) -> String {
    let idx: Vec<u32> = (0..n.min(64)).filter(|i| mask & (1 << i) != 0).collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && idx[j + 1] == idx[j] + 1 {
            j += 1;
        }
        out.push(if i == j { idx[i].to_string() } else { format!("{}-{}", idx[i], idx[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// `gpu:h100:2(IDX:0-1)`, `gpu:h100:0(IDX:N/A)` when none is in use (Slurm's `GresUsed`).
pub fn gres_used(n: &NodeInfo) -> String {
    if n.gpus == 0 {
        return String::new();
    }
    let used = (n.gpu_alloc_mask & if n.gpus >= 64 { u64::MAX } else { (1u64 << n.gpus) - 1 }).count_ones();
    let idx = if used == 0 { "N/A".to_string() } else { ranges(n.gpu_alloc_mask, n.gpus) };
    match &n.gpu_type {
        Some(t) => format!("gpu:{t}:{used}(IDX:{idx})"),
        None => format!("gpu:{used}(IDX:{idx})"),
    }
}

/// Memory in MiB as Slurm's TRES strings write it (`convert_num_unit` with
/// `CONVERT_NUM_UNIT_EXACT`): the largest unit that divides it exactly (`512000` → `500G`).
fn mem_unit(mib: u64) -> String {
    let (mut v, mut u) = (mib, 0);
    while v >= 1024 && v % 1024 == 0 && u < 3 {
        v /= 1024;
        u += 1;
    }
    format!("{v}{}", ["M", "G", "T", "P"][u])
}

fn tres(cpus: u32, mem: u64, gpus: u32) -> String {
    let mut t = format!("cpu={cpus},mem={}", mem_unit(mem));
    if gpus > 0 {
        t.push_str(&format!(",gres/gpu={gpus}"));
    }
    t
}

/// A node's `tres` (`cpu=8,mem=1000M,gres/gpu=4`) or, `used`, its `tres_used` (empty when
/// nothing is allocated, as Slurm's unset string).
pub fn tres_of(n: &NodeInfo, used: bool) -> String {
    if !used {
        return tres(n.cpus, n.mem_mib, n.gpus);
    }
    let gpus = n.gpu_alloc_mask.count_ones();
    if n.cpus_alloc == 0 && n.mem_alloc_mib == 0 && gpus == 0 {
        return String::new();
    }
    tres(n.cpus_alloc, n.mem_alloc_mib, gpus)
}

/// The description of one node in `v`.
pub fn node_model(v: ApiVersion) -> Model<NodeInfo, Ctx> {
    let _ = v;
    let i32_ = || Schema::Int(IntFormat::I32);
    let i64_ = || Schema::Int(IntFormat::I64);
    Model::new()
        .opt("cpus", i32_(), |n: &NodeInfo, _: &Ctx| Some(json!(n.cpus)))
        .opt("gres", Schema::Str, |n, _| Some(json!(gres(n))))
        .opt("gres_used", Schema::Str, |n, _| Some(json!(gres_used(n))))
        .opt("name", Schema::Str, |n, _| Some(json!(n.name)))
        .opt("state", array(Schema::Enum(NODE_STATES.to_vec())), |n, _| Some(json!(node_state(n))))
        .opt("partitions", array(Schema::Str), |n, _| Some(json!(n.partitions)))
        .opt("real_memory", i64_(), |n, _| Some(json!(n.mem_mib)))
        .opt("reason", Schema::Str, |n, _| Some(json!(n.reason.as_deref().unwrap_or(""))))
        .opt("alloc_memory", i64_(), |n, _| Some(json!(n.mem_alloc_mib)))
        .opt("alloc_cpus", i32_(), |n, _| Some(json!(n.cpus_alloc)))
        .opt("alloc_idle_cpus", i32_(), |n, _| Some(json!(n.cpus.saturating_sub(n.cpus_alloc))))
        .opt("tres_used", Schema::Str, |n, _| Some(json!(tres_of(n, true))))
        .opt("tres", Schema::Str, |n, _| Some(json!(tres_of(n, false))))
}

/// The description of one partition in `v`. `state` is `UP` or `DOWN`; `DefaultTime` unset
/// when not configured; `MaxTime` `UNLIMITED` is infinite.
pub fn partition_model(v: ApiVersion) -> Model<PartitionInfo, Ctx> {
    let i32_ = || Schema::Int(IntFormat::I32);
    let nv32 = || no_val(v, Width::U32);
    Model::new()
        .opt(
            "nodes",
            Schema::Object(vec![opt("configured", Schema::Str), opt("total", i32_())]),
            |p: &PartitionInfo, _: &Ctx| Some(json!({"configured": p.nodes, "total": p.total_nodes})),
        )
        .opt("cluster", Schema::Str, |_, c| Some(json!(c.cluster)))
        .opt("cpus", Schema::Object(vec![opt("total", i32_())]), |p, _| Some(json!({"total": p.total_cpus})))
        .opt("defaults", Schema::Object(vec![opt("time", nv32())]), |p, _| {
            Some(json!({"time": p.default_time_min.map_or_else(unset, |m| set(m as i64))}))
        })
        .opt("maximums", Schema::Object(vec![opt("time", nv32())]), |p, _| {
            Some(json!({"time": p.max_time_min.map_or_else(infinite, |m| set(m as i64))}))
        })
        .opt("name", Schema::Str, |p, _| Some(json!(p.name)))
        .opt(
            "partition",
            Schema::Object(vec![opt("state", array(Schema::Enum(PARTITION_STATES.to_vec())))]),
            |p, c| Some(json!({"state": [p.state_word(&c.partition_states)]})),
        )
}

fn add_named(v: ApiVersion, c: &mut Components, base: &str, s: Schema) -> Schema {
    if v == ApiVersion::V0041 {
        return s;
    }
    let n = name(v, base);
    c.add(n, s);
    Schema::Ref(n)
}

/// The nodes answer's component name (`v0.0.42_openapi_nodes_resp`).
pub fn nodes_response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_nodes_resp")
}

/// The partitions answer's component name (`v0.0.42_openapi_partition_resp`).
pub fn partitions_response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_partition_resp")
}

/// Adds the nodes answer's schema to `c`; answers its `$ref`.
pub fn add_nodes_response(v: ApiVersion, c: &mut Components) -> Schema {
    add_common(v, c);
    let node = add_named(v, c, "node", node_model(v).schema());
    let mut f = vec![req("nodes", array(node)), req("last_update", no_val(v, Width::U64))];
    f.extend(super::envelope_fields(v, c));
    c.add(nodes_response_name(v), Schema::Object(f));
    Schema::Ref(nodes_response_name(v))
}

/// Adds the partitions answer's schema to `c`; answers its `$ref`.
pub fn add_partitions_response(v: ApiVersion, c: &mut Components) -> Schema {
    add_common(v, c);
    let part = add_named(v, c, "partition_info", partition_model(v).schema());
    let mut f = vec![req("partitions", array(part)), req("last_update", no_val(v, Width::U64))];
    f.extend(super::envelope_fields(v, c));
    c.add(partitions_response_name(v), Schema::Object(f));
    Schema::Ref(partitions_response_name(v))
}

/// The nodes answer's own keys: `nodes`, `last_update`.
pub fn nodes_response(v: ApiVersion, nodes: &[NodeInfo], ctx: &Ctx, last_update: i64) -> Value {
    let m = node_model(v);
    json!({"nodes": nodes.iter().map(|n| m.emit(n, ctx)).collect::<Vec<_>>(), "last_update": set(last_update)})
}

/// The partitions answer's own keys: `partitions`, `last_update`.
pub fn partitions_response(v: ApiVersion, parts: &[PartitionInfo], ctx: &Ctx, last_update: i64) -> Value {
    let m = partition_model(v);
    json!({"partitions": parts.iter().map(|p| m.emit(p, ctx)).collect::<Vec<_>>(), "last_update": set(last_update)})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(state: &str) -> NodeInfo {
        NodeInfo {
            name: "n1".into(),
            state: state.into(),
            cpus: 8,
            cpus_alloc: 2,
            mem_mib: 1000,
            gpus: 4,
            gpu_type: Some("h100".into()),
            gpu_alloc_mask: 0b1011,
            partitions: vec!["batch".into()],
            ..NodeInfo::default()
        }
    }

    #[test]
    fn states_gres_and_tres_read_as_slurms() {
        assert_eq!(node_state(&node("DRAINED")), ["IDLE", "DRAIN"]);
        assert_eq!(node_state(&node("DRAINING")), ["MIXED", "DRAIN"]);
        let mut n = node("IDLE");
        n.not_responding = true;
        assert_eq!(node_state(&n), ["IDLE", "NOT_RESPONDING"]);
        assert_eq!(gres_used(&node("MIXED")), "gpu:h100:3(IDX:0-1,3)");
        n.gpu_alloc_mask = 0;
        assert_eq!(gres_used(&n), "gpu:h100:0(IDX:N/A)");
        assert_eq!(tres(8, 1000, 4), "cpu=8,mem=1000M,gres/gpu=4");
        assert_eq!(tres(64, 512000, 0), "cpu=64,mem=500G");
    }

    #[test]
    fn nodes_and_partitions_validate_in_every_version() {
        let mut ctx = Ctx { cluster: "c".into(), ..Ctx::default() };
        ctx.partition_states.insert("old".into(), "INACTIVE".into());
        let p = PartitionInfo { name: "batch".into(), up: true, max_time_min: None, default_time_min: Some(5), ..PartitionInfo::default() };
        let old = PartitionInfo { name: "old".into(), ..PartitionInfo::default() };
        let down = PartitionInfo { name: "down".into(), ..PartitionInfo::default() };
        for v in super::super::VERSIONS {
            let mut c = Components::default();
            let r = add_nodes_response(v, &mut c);
            let d = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", nodes_response(v, &[node("IDLE")], &ctx, 1), &[], &[]);
            c.validate(&d, &r).unwrap();
            let r = add_partitions_response(v, &mut c);
            let d = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", partitions_response(v, &[p.clone(), old.clone(), down.clone()], &ctx, 1), &[], &[]);
            c.validate(&d, &r).unwrap();
            assert_eq!(d["partitions"][0]["maximums"]["time"]["infinite"], true);
            let states: Vec<_> = (0..3).map(|i| d["partitions"][i]["partition"]["state"].clone()).collect();
            assert_eq!(states, [json!(["UP"]), json!(["INACTIVE"]), json!(["DOWN"])], "{v:?}");
        }
    }
}
