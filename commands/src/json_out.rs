//! `--json` and `--yaml` of the commands, as Slurm 22.05 prints them: the document is
//! slurmrestd v0.0.38's answer (`squeue` prints `GET /slurm/v0.0.38/jobs/`, `sinfo` prints
//! `GET /slurm/v0.0.38/nodes/`: 22.05's `src/squeue/data.c` and `src/sinfo/data.c` call the
//! openapi plugin's handler with no query, so no other option filters it), serialized as
//! 22.05's serializer plugins do with `DATA_SER_FLAGS_PRETTY`:
//!
//! - JSON (`serializer/json`, json-c with `JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_PRETTY`):
//!   two-space indents, `"key": value`, an empty array as `[` newline indent `]`, an empty
//!   object as `{}`, `/` escaped as `\/`, a float as `%.17g` with `.0` added to an integral
//!   one, no newline after the document ([`to_json`]).
//! - YAML (`serializer/yaml`, libyaml's emitter): `%YAML 1.1`, `--- !!map`, every scalar and
//!   key tagged (`!!str`, `!!int`, `!!float` as `%lf`, `!!bool`, `!!null null`), block style,
//!   sequences in mappings not indented, empty collections in flow style (`!!seq []`), plain
//!   scalars where libyaml allows them else single- or double-quoted, lines folded at a space
//!   past column 80, `...` at the end ([`to_yaml`]). An empty string is written `!!null null`:
//!   22.05's strings come from C pointers, and the NULL ones (every unset string) are null in
//!   YAML while the JSON serializer writes them `""`.
//!
//! Objects come from `flotilla_rest::v38` (the same as slurmrestd's v0.0.38 answers) and are
//! put in the order 22.05's plugin writes its keys (data_t keeps insertion order; serde_json's
//! map is sorted), with every key 22.05 writes and Flotilla does not track given the value
//! 22.05 writes when unset (0, `""`, null, false, `[]`).

use flotilla_core::config::NodeConfig;
use flotilla_proto::{JobInfo, NodeInfo, PartitionInfo};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// A document in key order: what 22.05's `data_t` holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Doc {
    /// `null`.
    Null,
    /// `true`/`false`.
    Bool(bool),
    /// An integer (`DATA_TYPE_INT_64`).
    Int(i64),
    /// A float (`DATA_TYPE_FLOAT`).
    Float(f64),
    /// A string.
    Str(String),
    /// A list.
    Seq(Vec<Doc>),
    /// A dictionary, in insertion order.
    Map(Vec<(String, Doc)>),
}

impl Doc {
    /// `v` as a document; an object's keys in serde_json's (sorted) order.
    pub fn from_value(v: &Value) -> Doc {
        match v {
            Value::Null => Doc::Null,
            Value::Bool(b) => Doc::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Doc::Int(i),
                None => match n.as_u64() {
                    Some(u) => Doc::Int(u as i64),
                    None => Doc::Float(n.as_f64().unwrap_or(0.0)),
                },
            },
            Value::String(s) => Doc::Str(s.clone()),
            Value::Array(a) => Doc::Seq(a.iter().map(Doc::from_value).collect()),
            Value::Object(m) => Doc::Map(m.iter().map(|(k, v)| (k.clone(), Doc::from_value(v))).collect()),
        }
    }

    fn s(x: &str) -> Doc {
        Doc::Str(x.to_string())
    }
}

/// What 22.05 writes for a key Flotilla has no value for.
#[derive(Debug, Clone, Copy)]
enum Unset {
    /// `null` (Slurm's `NO_VAL` numbers and unset pointers written as null).
    N,
    /// `""` (a NULL C string).
    S,
    /// `0`.
    I,
    /// `false`.
    B,
    /// `[]`.
    L,
}

impl Unset {
    fn doc(self) -> Doc {
        match self {
            Unset::N => Doc::Null,
            Unset::S => Doc::s(""),
            Unset::I => Doc::Int(0),
            Unset::B => Doc::Bool(false),
            Unset::L => Doc::Seq(Vec::new()),
        }
    }
}

use Unset::{B, I, L, N, S};

/// A v0.0.38 job's keys in 22.05's order (`src/plugins/openapi/v0.0.38/jobs.c`
/// `_job_info_to_data`, as the recording `squeue --yaml` shows it), with the value written
/// when unset. `job_resources` follows `job_id` for a job with an allocation.
const JOB_KEYS: &[(&str, Unset)] = &[
    ("account", S), ("accrue_time", I), ("admin_comment", S), ("array_job_id", I), ("array_task_id", N),
    ("array_max_tasks", I), ("array_task_string", S), ("association_id", I), ("batch_features", S),
    ("batch_flag", B), ("batch_host", S), ("flags", L), ("burst_buffer", S), ("burst_buffer_state", S),
    ("cluster", S), ("cluster_features", S), ("command", S), ("comment", S), ("container", S),
    ("contiguous", B), ("core_spec", N), ("thread_spec", N), ("cores_per_socket", N), ("billable_tres", N),
    ("cpus_per_task", N), ("cpu_frequency_minimum", N), ("cpu_frequency_maximum", N),
    ("cpu_frequency_governor", N), ("cpus_per_tres", S), ("deadline", I), ("delay_boot", I),
    ("dependency", S), ("derived_exit_code", I), ("eligible_time", I), ("end_time", I),
    ("excluded_nodes", S), ("exit_code", I), ("features", S), ("federation_origin", S),
    ("federation_siblings_active", S), ("federation_siblings_viable", S), ("gres_detail", L),
    ("group_id", I), ("group_name", S), ("job_id", I), ("job_state", S), ("last_sched_evaluation", I),
    ("licenses", S), ("max_cpus", I), ("max_nodes", I), ("mcs_label", S), ("memory_per_tres", S),
    ("name", S), ("nodes", S), ("nice", N), ("tasks_per_core", N), ("tasks_per_node", I),
    ("tasks_per_socket", N), ("tasks_per_board", I), ("cpus", I), ("node_count", I), ("tasks", I),
    ("het_job_id", I), ("het_job_id_set", S), ("het_job_offset", I), ("partition", S), ("prefer", S),
    ("memory_per_node", N), ("memory_per_cpu", I), ("minimum_cpus_per_node", I),
    ("minimum_tmp_disk_per_node", I), ("preempt_time", I), ("pre_sus_time", I), ("priority", I),
    ("profile", N), ("qos", S), ("reboot", B), ("required_nodes", S), ("requeue", B), ("resize_time", I),
    ("restart_cnt", I), ("resv_name", S), ("shared", N), ("show_flags", L), ("sockets_per_board", I),
    ("sockets_per_node", N), ("start_time", I), ("state_description", S), ("state_reason", S),
    ("standard_error", S), ("standard_input", S), ("standard_output", S), ("submit_time", I),
    ("suspend_time", I), ("system_comment", S), ("time_limit", I), ("time_minimum", I),
    ("threads_per_core", N), ("tres_bind", S), ("tres_freq", S), ("tres_per_job", S), ("tres_per_node", S),
    ("tres_per_socket", S), ("tres_per_task", S), ("tres_req_str", S), ("tres_alloc_str", S),
    ("user_id", I), ("user_name", S), ("wckey", S), ("current_working_directory", S),
];

/// A v0.0.38 node's keys in 22.05's order (`nodes.c` `_dump_node`).
const NODE_KEYS: &[(&str, Unset)] = &[
    ("architecture", S), ("burstbuffer_network_address", S), ("boards", I), ("boot_time", I),
    ("comment", S), ("cores", I), ("cpu_binding", I), ("cpu_load", I), ("extra", S), ("free_memory", I),
    ("cpus", I), ("last_busy", I), ("features", S), ("active_features", S), ("gres", S),
    ("gres_drained", S), ("gres_used", S), ("mcs_label", S), ("name", S), ("next_state_after_reboot", S),
    ("address", S), ("hostname", S), ("state", S), ("state_flags", L), ("next_state_after_reboot_flags", L),
    ("operating_system", S), ("owner", N), ("partitions", L), ("port", I), ("real_memory", I),
    ("reason", S), ("reason_changed_at", I), ("reason_set_by_user", N), ("slurmd_start_time", I),
    ("sockets", I), ("threads", I), ("temporary_disk", I), ("weight", I), ("tres", S),
    ("slurmd_version", S), ("alloc_memory", I), ("alloc_cpus", I), ("idle_cpus", I), ("tres_used", N),
    ("tres_weighted", N),
];

/// A v0.0.38 partition's keys in 22.05's order (`partitions.c` `_dump_part`).
const PARTITION_KEYS: &[(&str, Unset)] = &[
    ("flags", L), ("preemption_mode", L), ("allowed_allocation_nodes", S), ("allowed_accounts", S),
    ("allowed_groups", S), ("allowed_qos", S), ("alternative", S), ("billing_weights", S),
    ("default_memory_per_cpu", N), ("default_memory_per_node", N), ("default_time_limit", N),
    ("denied_accounts", S), ("denied_qos", S), ("preemption_grace_time", I), ("maximum_cpus_per_node", N),
    ("maximum_memory_per_cpu", N), ("maximum_memory_per_node", N), ("maximum_nodes_per_job", N),
    ("max_time_limit", N), ("min nodes per job", I), ("name", S), ("nodes", S), ("over_time_limit", N), ("priority_job_factor", I),
    ("priority_tier", I), ("qos", S), ("state", S), ("total_cpus", I), ("total_nodes", I), ("tres", S),
];

/// The keys of `emitted` in `keys`' order: a key `emitted` has keeps its value; one of the
/// model's that it left out (Slurm's null) is null, except a time (0) and a string (`""`);
/// any other takes its unset value. Keys `emitted` has that `keys` lacks follow, in their order.
fn ordered(emitted: &Value, keys: &[(&str, Unset)], model_keys: &[&str], extra: &[(&str, Doc)]) -> Doc {
    let empty = Map::new();
    let m = emitted.as_object().unwrap_or(&empty);
    let mut out = Vec::with_capacity(keys.len());
    for (k, unset) in keys {
        let d = if let Some((_, d)) = extra.iter().find(|(e, _)| e == k) {
            d.clone()
        } else if let Some(v) = m.get(*k) {
            Doc::from_value(v)
        } else if model_keys.contains(k) && !k.ends_with("_time") && !matches!(unset, S) {
            // (22.05's JSON writes a NULL string as "", an unset number as null.)
            Doc::Null
        } else {
            unset.doc()
        };
        out.push((k.to_string(), d));
    }
    for (k, v) in m {
        if !keys.iter().any(|(n, _)| n == k) {
            out.push((k.clone(), Doc::from_value(v)));
        }
    }
    for (k, d) in extra {
        if !keys.iter().any(|(n, _)| n == k) && !m.contains_key(*k) {
            out.push((k.to_string(), d.clone()));
        }
    }
    Doc::Map(out)
}

/// `meta` of v0.0.38 in 22.05's order: `plugin {type, name}`, `Slurm {version {major, micro,
/// minor}, release}`.
pub fn meta() -> Doc {
    let (major, minor, micro) = flotilla_rest::version::SLURM_RELEASE;
    Doc::Map(vec![
        ("plugin".into(), Doc::Map(vec![("type".into(), Doc::s("openapi/v0.0.38")), ("name".into(), Doc::s("Slurm OpenAPI v0.0.38"))])),
        (
            "Slurm".into(),
            Doc::Map(vec![
                (
                    "version".into(),
                    Doc::Map(vec![
                        ("major".into(), Doc::Int(major.into())),
                        ("micro".into(), Doc::Int(micro.into())),
                        ("minor".into(), Doc::Int(minor.into())),
                    ]),
                ),
                ("release".into(), Doc::Str(format!("{major}.{minor:02}.{micro}"))),
            ]),
        ),
    ])
}

/// An answer: `meta`, `errors` (v0.0.38's `{error, error_number}` in that order), then `key`.
pub fn envelope(errors: &[(String, i32)], key: &str, items: Vec<Doc>) -> Doc {
    let errs = errors
        .iter()
        .map(|(e, n)| Doc::Map(vec![("error".into(), Doc::Str(e.clone())), ("error_number".into(), Doc::Int((*n).into()))]))
        .collect();
    Doc::Map(vec![("meta".into(), meta()), ("errors".into(), Doc::Seq(errs)), (key.into(), Doc::Seq(items))])
}

fn model_keys<T, C>(m: &flotilla_rest::model::Model<T, C>) -> Vec<&'static str> {
    match m.schema() {
        flotilla_rest::Schema::Object(fields) => fields.iter().map(|f| f.name).collect(),
        _ => Vec::new(),
    }
}

/// Slurm's TRES memory: whole GiB as `NG`, else `NM` (`mem=1G`).
fn tres_mem(mib: u64) -> String {
    if mib > 0 && mib % 1024 == 0 {
        format!("{}G", mib / 1024)
    } else {
        format!("{mib}M")
    }
}

/// A job's TRES string, as 22.05's `tres_req_str`: `cpu=N,mem=M,node=N,billing=N` then
/// `gres/gpu=G` (billing is the CPU count without `TRESBillingWeights`).
fn job_tres(j: &JobInfo) -> String {
    let cpus = j.num_cpus.max(j.num_tasks.max(1) * j.cpus_per_task.max(1));
    let mem = match j.mem_per_cpu_mib {
        Some(m) => m * u64::from(cpus),
        None => j.mem_per_node_mib * u64::from(j.num_nodes.max(1)),
    };
    let mut s = format!("cpu={cpus},mem={},node={},billing={cpus}", tres_mem(mem), j.num_nodes.max(1));
    if j.gpus > 0 {
        let _ = write!(s, ",gres/gpu={}", j.gpus);
    }
    s
}

/// Group names by gid, for `group_name`.
pub type GroupName<'a> = &'a dyn Fn(u32) -> Option<String>;

/// GPU indexes of a mask as Slurm's bitmap ranges (`0-1`, `0,2-3`).
fn idx_ranges(mask: u64) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < 64 {
        if mask >> i & 1 == 1 {
            let start = i;
            while i + 1 < 64 && mask >> (i + 1) & 1 == 1 {
                i += 1;
            }
            out.push(if start == i { start.to_string() } else { format!("{start}-{i}") });
        }
        i += 1;
    }
    out.join(",")
}

/// 22.05's `gres_detail`: per allocated node, `gpu[:TYPE]:N(IDX:ranges)`; `gpu_type` gives a
/// node's GPU model (slurm.conf's `Gres=gpu:TYPE:N`).
fn gres_detail(j: &JobInfo, gpu_type: &dyn Fn(&str) -> Option<String>) -> Vec<Doc> {
    j.gpu_alloc
        .iter()
        .filter(|(_, m)| *m != 0)
        .map(|(node, m)| {
            let t = gpu_type(node).map_or_else(String::new, |t| format!("{t}:"));
            Doc::Str(format!("gpu:{t}{}(IDX:{})", m.count_ones(), idx_ranges(*m)))
        })
        .collect()
}

/// `squeue --json`'s document: v0.0.38's `/jobs/` answer. `gpu_type`: a node's GPU model.
pub fn jobs_doc(jobs: &[JobInfo], cluster: &str, group: GroupName<'_>, gpu_type: &dyn Fn(&str) -> Option<String>) -> Doc {
    let m = flotilla_rest::v38::job_model();
    let keys = model_keys(&m);
    let ctx = flotilla_rest::dp::job::Ctx { cluster: cluster.to_string(), ..Default::default() };
    let items = jobs
        .iter()
        .map(|j| {
            let v = m.emit(j, &ctx);
            let ran = !j.nodes.is_empty();
            let tres = job_tres(j);
            // Eligible at the latest when it started (JobInfo gives no eligible time then).
            let eligible = j.eligible_time.or(if ran { j.start_time } else { None });
            let extra = [
                ("accrue_time", Doc::Int(eligible.unwrap_or(0))),
                ("eligible_time", Doc::Int(eligible.unwrap_or(0))),
                // Every job Flotilla lists was submitted with a script (sbatch, REST).
                ("batch_flag", Doc::Bool(true)),
                ("flags", Doc::Seq(if ran { vec![Doc::s("JOB_WAS_RUNNING")] } else { Vec::new() })),
                ("billable_tres", if ran { Doc::Float(f64::from(j.num_cpus)) } else { Doc::Null }),
                ("gres_detail", Doc::Seq(gres_detail(j, gpu_type))),
                ("group_name", Doc::Str(group(j.gid).unwrap_or_else(|| j.gid.to_string()))),
                ("minimum_cpus_per_node", Doc::Int(crate::jobfmt::min_cpus(&j.node_shape, j.cpus_per_task).into())),
                // The flags the plugin loads jobs with.
                ("show_flags", Doc::Seq(vec![Doc::s("SHOW_ALL"), Doc::s("SHOW_DETAIL"), Doc::s("SHOW_LOCAL")])),
                ("tres_req_str", Doc::Str(tres.clone())),
                ("tres_alloc_str", Doc::Str(if ran { tres } else { String::new() })),
            ];
            ordered(&v, JOB_KEYS, &keys, &extra)
        })
        .collect();
    envelope(&[], "jobs", items)
}

/// `sinfo --json`'s document: v0.0.38's `/nodes/` answer.
/// `conf`: the nodes of slurm.conf (address, host name, port, boards, sockets, cores,
/// threads, weight, features), by name.
pub fn nodes_doc(nodes: &[NodeInfo], cluster: &str, conf: &[NodeConfig]) -> Doc {
    let m = flotilla_rest::v38::node_model();
    let keys = model_keys(&m);
    let ctx = flotilla_rest::dp::job::Ctx { cluster: cluster.to_string(), ..Default::default() };
    let (major, minor, micro) = flotilla_rest::version::SLURM_RELEASE;
    let items = nodes
        .iter()
        .map(|n| {
            let v = m.emit(n, &ctx);
            let c = conf.iter().find(|c| c.name == n.name);
            let num = |f: fn(&NodeConfig) -> u32, d: u32| Doc::Int(c.map_or(d, f).into());
            let text = |f: fn(&NodeConfig) -> String| Doc::Str(c.map_or_else(|| n.name.clone(), f));
            let features = Doc::Str(c.map_or_else(String::new, |c| c.features.join(",")));
            let mut extra = vec![
                ("address", text(|c| c.addr.clone())),
                ("boards", num(|c| c.boards, 1)),
                ("boot_time", Doc::Int(n.boot_epoch as i64)),
                ("cores", num(|c| c.cores_per_socket, 0)),
                ("features", features.clone()),
                ("active_features", features),
                ("gres_drained", Doc::s("N/A")),
                ("hostname", text(|c| c.hostname.clone())),
                ("port", num(|c| c.port.into(), 0)),
                ("sockets", num(|c| c.sockets, 0)),
                ("threads", num(|c| c.threads_per_core, 0)),
                // 22.05's name of NODE_STATE_INVALID: no state after a reboot asked.
                ("next_state_after_reboot", Doc::s("invalid")),
                ("slurmd_start_time", Doc::Int(n.boot_epoch as i64)),
                ("slurmd_version", Doc::Str(format!("{major}.{minor:02}.{micro}"))),
                ("tres", Doc::Str(node_tres(n))),
                ("tres_weighted", Doc::Float(f64::from(n.cpus_alloc))),
                ("weight", num(|c| c.weight, 1)),
            ];
            // 22.05 writes null for a node with nothing allocated.
            if n.cpus_alloc == 0 && n.mem_alloc_mib == 0 && n.gpu_alloc_mask == 0 {
                extra.push(("tres_used", Doc::Null));
            }
            ordered(&v, NODE_KEYS, &keys, &extra)
        })
        .collect();
    envelope(&[], "nodes", items)
}

/// A node's configured TRES as 22.05's `tres_fmt_str`: Flotilla's (`cpu=,mem=,gres/gpu=`)
/// with `billing=` (the CPU count without `TRESBillingWeights`) before the GRES.
fn node_tres(n: &NodeInfo) -> String {
    let t = flotilla_rest::dp::node::tres_of(n, false);
    let mut parts: Vec<String> = t.split(',').filter(|p| !p.is_empty()).map(str::to_string).collect();
    let at = parts.iter().position(|p| p.starts_with("gres/")).unwrap_or(parts.len());
    parts.insert(at, format!("billing={}", n.cpus));
    parts.join(",")
}

/// v0.0.38's `/partitions/` answer (Flotilla's `scontrol show partition --json`). `conf`:
/// slurm.conf's nodes, for the partition's `tres` (22.05's `cpu=,mem=,node=,billing=,gres/gpu=`
/// of its nodes). `min nodes per job` is 22.05's key, spaces included.
pub fn partitions_doc(parts: &[PartitionInfo], partition_states: std::collections::BTreeMap<String, String>, cluster: &str, conf: &[NodeConfig]) -> Doc {
    let m = flotilla_rest::v38::partition_model();
    let keys = model_keys(&m);
    let ctx = flotilla_rest::dp::job::Ctx { cluster: cluster.to_string(), partition_states };
    let items = parts
        .iter()
        .map(|p| {
            let names = flotilla_core::hostlist::expand(&p.nodes).unwrap_or_default();
            let mem: u64 = conf.iter().filter(|c| names.contains(&c.name)).map(|c| c.real_memory_mib).sum();
            let mut tres = format!("cpu={},mem={},node={},billing={}", p.total_cpus, tres_mem(mem), p.total_nodes, p.total_cpus);
            if p.total_gpus > 0 {
                let _ = write!(tres, ",gres/gpu={}", p.total_gpus);
            }
            let extra = [
                // Slurm's UNLIMITED (flotilla has no per-partition maximums of these).
                ("maximum_cpus_per_node", Doc::Int(-1)),
                ("maximum_nodes_per_job", Doc::Int(-1)),
                ("priority_job_factor", Doc::Int(1)),
                ("priority_tier", Doc::Int(1)),
                ("tres", Doc::Str(tres)),
            ];
            ordered(&m.emit(p, &ctx), PARTITION_KEYS, &keys, &extra)
        })
        .collect();
    envelope(&[], "partitions", items)
}

/// The output format asked: `--json` or `--yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mime {
    /// `--json`.
    Json,
    /// `--yaml`.
    Yaml,
}

/// `d` in `mime`'s serialization.
pub fn render(d: &Doc, mime: Mime) -> String {
    match mime {
        Mime::Json => to_json(d),
        Mime::Yaml => to_yaml(d),
    }
}

/// The GPU model of node `name` in slurm.conf's nodes.
pub fn conf_gpu_type(conf: &[NodeConfig], name: &str) -> Option<String> {
    conf.iter().find(|c| c.name == name).and_then(|c| c.gpu_type.clone())
}

/// The group name of `gid` from the system's group database.
pub fn group_name(gid: u32) -> Option<String> {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)).ok().flatten().map(|g| g.name)
}

/// An error of the controller as v0.0.38's `errors[]` entry (text, number).
pub fn ctl_errors(e: &crate::common::CtlError) -> Vec<(String, i32)> {
    let s = e.slurm();
    vec![(s.text, s.code)]
}

/// Every job the controller knows (finished ones it still holds too, as 22.05's
/// `slurm_load_jobs` with `SHOW_ALL | SHOW_DETAIL`), as `squeue --json` prints them.
pub fn query_jobs(ctl: &crate::common::Ctl) -> (Vec<JobInfo>, Vec<(String, i32)>) {
    use flotilla_proto::{JobQuery, Request, Response};
    let q = JobQuery { include_finished: true, ..JobQuery::default() };
    match ctl.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) => (j, Vec::new()),
        Ok(Response::Error(e)) => (Vec::new(), vec![(e.text, e.code)]),
        Ok(_) => (Vec::new(), Vec::new()),
        Err(e) => (Vec::new(), ctl_errors(&e)),
    }
}

/// `doc` with `errs` as its `errors[]` (replacing the empty one).
pub fn with_errors(doc: Doc, errs: &[(String, i32)]) -> Doc {
    let Doc::Map(mut kv) = doc else { return doc };
    if let Some((_, v)) = kv.iter_mut().find(|(k, _)| k == "errors") {
        *v = Doc::Seq(
            errs.iter()
                .map(|(e, n)| Doc::Map(vec![("error".into(), Doc::Str(e.clone())), ("error_number".into(), Doc::Int((*n).into()))]))
                .collect(),
        );
    }
    Doc::Map(kv)
}

/// What `scontrol --json show` shows (Flotilla's: 22.05's scontrol has no `--json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    /// `show job [ID]`: v0.0.38's `/jobs/` answer (`/job/{id}`'s with an id).
    Job,
    /// `show node [NAMES]`: v0.0.38's `/nodes/` answer.
    Node,
    /// `show partition [NAME]`: v0.0.38's `/partitions/` answer.
    Partition,
}

/// `scontrol --json|--yaml show job|node|partition [NAME]`: the v0.0.38 document of the
/// objects asked; an unknown one is an `errors[]` entry with Slurm's text and exit 1 (as
/// slurmrestd's `/job/{id}`, `/node/{name}`, `/partition/{name}` answer it); exit 0 else.
pub fn show(what: Show, name: Option<&str>, mime: Mime, io: &mut crate::common::Io<'_>) -> i32 {
    use flotilla_proto::errno::{ESLURM_INVALID_JOB_ID, ESLURM_INVALID_NODE_NAME, ESLURM_INVALID_PARTITION_NAME};
    use flotilla_proto::{JobQuery, NodeQuery, Request, Response};
    let ctl = match crate::common::Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("scontrol: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let cluster = ctl.conf.cluster_name.clone();
    let (doc, errs) = match what {
        Show::Job => {
            let refs = match name {
                None => Vec::new(),
                Some(n) => match crate::squeue::parse_job_ref(n) {
                    Some(r) => vec![r],
                    None => {
                        io.err(&format!("Invalid job id specified: {n}\n"));
                        return 1;
                    }
                },
            };
            let q = JobQuery { jobs: refs, include_finished: true, ..JobQuery::default() };
            let (jobs, mut errs) = match ctl.call(Request::QueryJobs(q)) {
                Ok(Response::Jobs(j)) => (j, Vec::new()),
                Ok(Response::Error(e)) => (Vec::new(), vec![(e.text, e.code)]),
                Ok(_) => (Vec::new(), Vec::new()),
                Err(e) => (Vec::new(), ctl_errors(&e)),
            };
            if name.is_some() && jobs.is_empty() && errs.is_empty() {
                errs.push(("Invalid job id specified".into(), ESLURM_INVALID_JOB_ID));
            }
            (jobs_doc(&jobs, &cluster, &group_name, &|n| conf_gpu_type(&ctl.conf.nodes, n)), errs)
        }
        Show::Node => {
            let (mut nodes, mut errs) = match ctl.call(Request::QueryNodes(NodeQuery::default())) {
                Ok(Response::Nodes(n)) => (n, Vec::new()),
                Ok(Response::Error(e)) => (Vec::new(), vec![(e.text, e.code)]),
                Ok(_) => (Vec::new(), Vec::new()),
                Err(e) => (Vec::new(), ctl_errors(&e)),
            };
            if let Some(n) = name {
                let want = flotilla_core::hostlist::expand(n).unwrap_or_else(|_| vec![n.to_string()]);
                nodes.retain(|x| want.contains(&x.name));
                if nodes.is_empty() && errs.is_empty() {
                    errs.push(("Invalid node name specified".into(), ESLURM_INVALID_NODE_NAME));
                }
            }
            (nodes_doc(&nodes, &cluster, &ctl.conf.nodes), errs)
        }
        Show::Partition => {
            let (mut parts, mut errs) = match ctl.call(Request::QueryPartitions) {
                Ok(Response::Partitions(p)) => (p, Vec::new()),
                Ok(Response::Error(e)) => (Vec::new(), vec![(e.text, e.code)]),
                Ok(_) => (Vec::new(), Vec::new()),
                Err(e) => (Vec::new(), ctl_errors(&e)),
            };
            if let Some(n) = name {
                parts.retain(|p| p.name == n);
                if parts.is_empty() && errs.is_empty() {
                    errs.push(("Invalid partition name specified".into(), ESLURM_INVALID_PARTITION_NAME));
                }
            }
            let states = crate::common::partition_states(&ctl, &parts);
            (partitions_doc(&parts, states, &cluster, &ctl.conf.nodes), errs)
        }
    };
    io.out(&render(&with_errors(doc, &errs), mime));
    i32::from(!errs.is_empty())
}

/// `sdiag --json|--yaml` (Flotilla's: 22.05's sdiag has no `--json`): v0.0.38's `/diag/`
/// answer (`meta`, `errors`, `statistics` in `diag.c`'s key order).
pub fn diag_doc(d: &flotilla_proto::diag::Diag, user_name: &dyn Fn(u32) -> Option<String>) -> Doc {
    let ctx = flotilla_rest::dp::diag::Ctx {
        user_names: d.rpc_users.iter().filter_map(|r| user_name(r.uid).map(|n| (r.uid, n))).collect(),
    };
    let v = flotilla_rest::v38::diag_response(d, &ctx);
    let stats = v.get("statistics").cloned().unwrap_or(Value::Null);
    // `rpcs_by_message_type` and `rpcs_by_user` come first in diag.c, then the counters in
    // the model's order (22.05's).
    let order: Vec<(&str, Unset)> = DIAG_KEYS.iter().map(|k| (*k, N)).collect();
    let mut st = ordered(&stats, &order, &[], &[]);
    if let Doc::Map(kv) = &mut st {
        for (k, v) in kv.iter_mut() {
            let keys: &[&str] = match k.as_str() {
                "rpcs_by_message_type" => &["message_type", "type_id", "count", "average_time", "total_time"],
                "rpcs_by_user" => &["user", "user_id", "count", "average_time", "total_time"],
                _ => continue,
            };
            if let Doc::Seq(items) = v {
                for it in items.iter_mut() {
                    if let Doc::Map(m) = it {
                        m.sort_by_key(|(k, _)| keys.iter().position(|x| x == k).unwrap_or(usize::MAX));
                    }
                }
            }
        }
        kv.retain(|(_, v)| *v != Doc::Null);
    }
    let Doc::Map(mut top) = envelope(&[], "statistics", Vec::new()) else { unreachable!() };
    top.last_mut().expect("statistics").1 = st;
    Doc::Map(top)
}

/// `statistics`' keys in 22.05's `diag.c` order.
const DIAG_KEYS: &[&str] = &[
    "rpcs_by_message_type", "rpcs_by_user", "parts_packed", "req_time", "req_time_start", "server_thread_count",
    "agent_queue_size", "agent_count", "agent_thread_count", "dbd_agent_queue_size", "gettimeofday_latency",
    "schedule_cycle_max", "schedule_cycle_last", "schedule_cycle_total", "schedule_cycle_mean",
    "schedule_cycle_mean_depth", "schedule_cycle_per_minute", "schedule_queue_length", "jobs_submitted",
    "jobs_started", "jobs_completed", "jobs_canceled", "jobs_failed", "jobs_pending", "jobs_running",
    "job_states_ts", "bf_backfilled_jobs", "bf_last_backfilled_jobs", "bf_backfilled_het_jobs",
    "bf_cycle_counter", "bf_cycle_mean", "bf_depth_mean", "bf_depth_mean_try", "bf_cycle_last", "bf_cycle_max",
    "bf_queue_len", "bf_queue_len_mean", "bf_table_size", "bf_table_size_mean", "bf_when_last_cycle", "bf_active",
];

/// `sshare --json|--yaml`: Flotilla's document (22.05's sshare has no `--json`, and
/// v0.0.38 has no shares endpoint), in the v0.0.38 envelope: `meta`, `errors`, `shares[]`,
/// one object per row of `sshare`'s table in its order, with `id`, `cluster`, `account`,
/// `parent`, `user`, `partition` (null when the row has none), `raw_shares` (null for root,
/// Slurm's `parent` value for `Fairshare=parent`), `norm_shares`, `raw_usage`, `norm_usage`,
/// `effectv_usage`, `fairshare`, `level_fs` (null where sshare leaves the cell blank or the
/// value is not finite).
pub fn shares_doc(rows: &[flotilla_proto::share::ShareRow]) -> Doc {
    let opt_s = |s: &Option<String>| s.as_ref().map_or(Doc::Null, |s| Doc::Str(s.clone()));
    // A non-finite value (sshare's `inf` of an account with no usage) is null: JSON has none.
    let fl = |f: f64| if f.is_finite() { Doc::Float(f) } else { Doc::Null };
    let opt_f = |f: Option<f64>| f.map_or(Doc::Null, fl);
    let items = rows
        .iter()
        .map(|r| {
            Doc::Map(vec![
                ("id".into(), Doc::Int(r.id.into())),
                ("cluster".into(), Doc::Str(r.cluster.clone())),
                ("account".into(), Doc::Str(r.account.clone())),
                ("parent".into(), opt_s(&r.parent)),
                ("user".into(), opt_s(&r.user)),
                ("partition".into(), opt_s(&r.partition)),
                ("raw_shares".into(), r.raw_shares.map_or(Doc::Null, |v| if v == u32::MAX { Doc::s("parent") } else { Doc::Int(v.into()) })),
                ("norm_shares".into(), fl(r.norm_shares)),
                ("raw_usage".into(), fl(r.raw_usage)),
                ("norm_usage".into(), opt_f(r.norm_usage)),
                ("effectv_usage".into(), fl(r.effectv_usage)),
                ("fairshare".into(), opt_f(r.fairshare)),
                ("level_fs".into(), opt_f(r.level_fs)),
            ])
        })
        .collect();
    envelope(&[], "shares", items)
}

// ---- JSON (json-c, SPACED | PRETTY) ----

/// `d` as 22.05's JSON serializer writes it with `DATA_SER_FLAGS_PRETTY` (json-c's
/// `json_object_to_json_string_ext` with `JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_PRETTY`):
/// no newline at the end.
pub fn to_json(d: &Doc) -> String {
    let mut out = String::new();
    json_node(d, 0, &mut out);
    out
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("  ");
    }
}

fn json_node(d: &Doc, level: usize, out: &mut String) {
    match d {
        Doc::Null => out.push_str("null"),
        Doc::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Doc::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Doc::Float(f) => out.push_str(&json_double(*f)),
        Doc::Str(s) => json_str(s, out),
        Doc::Seq(items) => {
            // json-c: `[`, a newline, the items each on its own line, then the closing
            // bracket on a line of its own even when empty.
            out.push_str("[\n");
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                indent(out, level + 1);
                json_node(it, level + 1, out);
            }
            if !items.is_empty() {
                out.push('\n');
            }
            indent(out, level);
            out.push(']');
        }
        Doc::Map(kv) => {
            out.push('{');
            for (i, (k, v)) in kv.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('\n');
                indent(out, level + 1);
                json_str(k, out);
                out.push_str(": ");
                json_node(v, level + 1, out);
            }
            if !kv.is_empty() {
                out.push('\n');
                indent(out, level);
            }
            out.push('}');
        }
    }
}

/// json-c's `json_escape_str` without `JSON_C_TO_STRING_NOSLASHESCAPE`: `/` as `\/`.
fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\u{8}' => out.push_str("\\b"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// json-c's double: `%.17g`, `.0` added when the text has no `.` nor exponent.
fn json_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let mut s = fmt_g17(f);
    if s.as_bytes().first().is_some_and(u8::is_ascii_digit) && !s.contains(['.', 'e']) {
        s.push_str(".0");
    }
    s
}

/// C's `%.17g`.
fn fmt_g17(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let e = format!("{:.16e}", f);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&exp) {
        let mant = trim_zeros(mant);
        return format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    let decimals = (16 - exp).max(0) as usize;
    trim_zeros(&format!("{:.*}", decimals, f)).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

// ---- YAML (libyaml's emitter as 22.05's serializer drives it) ----

/// libyaml's default line width (`best_width`).
const WIDTH: usize = 80;

/// `d` as 22.05's YAML serializer writes it (libyaml, every node tagged, block style).
pub fn to_yaml(d: &Doc) -> String {
    let mut out = String::from("%YAML 1.1\n---");
    yaml_value(d, 0, &mut out);
    out.push_str("\n...\n");
    out
}

fn column(out: &str) -> usize {
    out.len() - out.rfind('\n').map_or(0, |i| i + 1)
}

/// A value after `key:`, `- ` or `---`: a scalar on the same line, a non-empty collection's
/// tag then its entries on the next lines (a mapping's `indent` deeper, a sequence's at
/// `indent`: libyaml does not indent a sequence inside a mapping).
fn yaml_value(d: &Doc, indent: usize, out: &mut String) {
    match d {
        Doc::Map(kv) if !kv.is_empty() => {
            out.push_str(" !!map");
            for (k, v) in kv {
                out.push('\n');
                pad(out, indent);
                out.push_str("!!str ");
                yaml_scalar(k, indent + 2, true, out);
                out.push(':');
                match v {
                    Doc::Seq(items) if !items.is_empty() => {
                        out.push_str(" !!seq");
                        yaml_items(items, indent, out);
                    }
                    _ => yaml_value(v, indent + 2, out),
                }
            }
        }
        Doc::Map(_) => out.push_str(" !!map {}"),
        Doc::Seq(items) if !items.is_empty() => {
            out.push_str(" !!seq");
            yaml_items(items, indent, out);
        }
        Doc::Seq(_) => out.push_str(" !!seq []"),
        Doc::Null => out.push_str(" !!null null"),
        Doc::Bool(b) => out.push_str(if *b { " !!bool true" } else { " !!bool false" }),
        Doc::Int(i) => {
            let _ = write!(out, " !!int {i}");
        }
        Doc::Float(f) => {
            let _ = write!(out, " !!float {f:.6}");
        }
        Doc::Str(s) if s.is_empty() => out.push_str(" !!null null"),
        Doc::Str(s) => {
            out.push_str(" !!str ");
            yaml_scalar(s, indent, false, out);
        }
    }
}

fn yaml_items(items: &[Doc], indent: usize, out: &mut String) {
    for it in items {
        out.push('\n');
        pad(out, indent);
        out.push('-');
        yaml_value(it, indent + 2, out);
    }
}

fn pad(out: &mut String, n: usize) {
    for _ in 0..n {
        out.push(' ');
    }
}

/// What libyaml's `yaml_emitter_analyze_scalar` finds of a string, for the block context.
struct Analysis {
    plain: bool,
    single: bool,
}

fn analyze(s: &str) -> Analysis {
    let ch: Vec<char> = s.chars().collect();
    let blankz = |i: usize| i >= ch.len() || matches!(ch[i], ' ' | '\t' | '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}');
    let mut block_ind = s.starts_with("---") || s.starts_with("...");
    let (mut special, mut breaks) = (false, false);
    let (mut lead_space, mut trail_space, mut lead_break, mut trail_break) = (false, false, false, false);
    let (mut break_space, mut space_break, mut prev_space, mut prev_break) = (false, false, false, false);
    let mut preceded_ws = true;
    for i in 0..ch.len() {
        let c = ch[i];
        let followed_ws = blankz(i + 1);
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(c) {
                block_ind = true;
            }
            if (c == '?' || c == ':') && followed_ws {
                block_ind = true;
            }
            if c == '-' && followed_ws {
                block_ind = true;
            }
        } else {
            if c == ':' && followed_ws {
                block_ind = true;
            }
            if c == '#' && preceded_ws {
                block_ind = true;
            }
        }
        // libyaml without `unicode` set: anything not printable ASCII is special.
        let printable = matches!(c, '\n' | '\t' | '\r') || (' '..='~').contains(&c);
        if !printable {
            special = true;
        }
        let is_break = matches!(c, '\r' | '\n');
        if is_break {
            breaks = true;
        }
        let last = i + 1 == ch.len();
        if c == ' ' {
            if i == 0 {
                lead_space = true;
            }
            if last {
                trail_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break {
            if i == 0 {
                lead_break = true;
            }
            if last {
                trail_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_break = true;
            prev_space = false;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_ws = blankz(i);
    }
    let mut a = Analysis { plain: true, single: true };
    if lead_space || lead_break || trail_space || trail_break {
        a.plain = false;
    }
    if break_space {
        a.plain = false;
        a.single = false;
    }
    if space_break || special {
        a.plain = false;
        a.single = false;
    }
    if breaks || block_ind {
        a.plain = false;
    }
    // libyaml writes a multi-line string single-quoted over several lines; Flotilla writes
    // it double-quoted with `\n` (the same string when read back).
    if breaks {
        a.single = false;
    }
    a
}

/// A string scalar in the style libyaml picks (plain, else single-quoted, else
/// double-quoted); a value's plain or single-quoted text folds at a single space once past
/// column 80, continuing at `indent`. Keys (`key`) never fold.
fn yaml_scalar(s: &str, indent: usize, key: bool, out: &mut String) {
    let a = analyze(s);
    if a.plain {
        write_folded(s, indent, !key, out);
    } else if a.single {
        out.push('\'');
        write_folded(&s.replace('\'', "''"), indent, !key, out);
        out.push('\'');
    } else {
        out.push('"');
        for c in s.chars() {
            match c {
                '\0' => out.push_str("\\0"),
                '\u{7}' => out.push_str("\\a"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{b}' => out.push_str("\\v"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                '\u{1b}' => out.push_str("\\e"),
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{85}' => out.push_str("\\N"),
                '\u{a0}' => out.push_str("\\_"),
                '\u{2028}' => out.push_str("\\L"),
                '\u{2029}' => out.push_str("\\P"),
                c if (' '..='~').contains(&c) => out.push(c),
                c if (c as u32) <= 0xff => {
                    let _ = write!(out, "\\x{:02X}", c as u32);
                }
                c if (c as u32) <= 0xffff => {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                }
                c => {
                    let _ = write!(out, "\\U{:08X}", c as u32);
                }
            }
        }
        out.push('"');
    }
}

/// libyaml's `yaml_emitter_write_plain`/`_single_quoted` folding: a space not followed by
/// another, once the column is past the width, becomes a line break and `indent` spaces.
fn write_folded(s: &str, indent: usize, allow_breaks: bool, out: &mut String) {
    let ch: Vec<char> = s.chars().collect();
    let mut spaces = false;
    for (i, &c) in ch.iter().enumerate() {
        if c == ' ' {
            let next_space = ch.get(i + 1) == Some(&' ');
            if allow_breaks && !spaces && column(out) > WIDTH && !next_space && i != 0 && i + 1 != ch.len() {
                out.push('\n');
                pad(out, indent);
            } else {
                out.push(' ');
            }
            spaces = true;
        } else {
            out.push(c);
            spaces = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kv: Vec<(&str, Doc)>) -> Doc {
        Doc::Map(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    #[test]
    fn json_is_json_c_pretty_spaced() {
        let d = m(vec![
            ("meta", m(vec![("a", Doc::Int(1))])),
            ("errors", Doc::Seq(vec![])),
            ("e", m(vec![])),
            ("jobs", Doc::Seq(vec![m(vec![("p", Doc::s("/home/alice")), ("f", Doc::Float(2.0)), ("n", Doc::Null)])])),
        ]);
        let want = "{\n  \"meta\": {\n    \"a\": 1\n  },\n  \"errors\": [\n  ],\n  \"e\": {},\n  \"jobs\": [\n    {\n      \"p\": \"\\/home\\/alice\",\n      \"f\": 2.0,\n      \"n\": null\n    }\n  ]\n}";
        assert_eq!(to_json(&d), want);
        // Its value is the same JSON.
        let back: Value = serde_json::from_str(&to_json(&d)).unwrap();
        assert_eq!(back["jobs"][0]["p"], "/home/alice");
    }

    #[test]
    fn json_doubles_as_percent_17g() {
        assert_eq!(json_double(2.0), "2.0");
        assert_eq!(json_double(0.5), "0.5");
        assert_eq!(json_double(0.1), "0.10000000000000001");
        assert_eq!(json_double(1e20), "1e+20");
        assert_eq!(json_double(-3.0), "-3");
        assert_eq!(json_str_of("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }

    fn json_str_of(s: &str) -> String {
        let mut o = String::new();
        json_str(s, &mut o);
        o
    }

    #[test]
    fn yaml_is_libyaml_tagged_block() {
        let d = m(vec![
            ("meta", m(vec![("plugin", m(vec![("type", Doc::s("openapi/v0.0.38"))]))])),
            ("errors", Doc::Seq(vec![])),
            (
                "jobs",
                Doc::Seq(vec![m(vec![
                    ("flags", Doc::Seq(vec![Doc::s("JOB_WAS_RUNNING")])),
                    ("comment", Doc::s("")),
                    ("billable_tres", Doc::Float(2.0)),
                    ("ok", Doc::Bool(true)),
                    ("e", m(vec![])),
                    ("res", m(vec![("nodes", Doc::Seq(vec![m(vec![("s", m(vec![("0", Doc::s("allocated"))]))])]))])),
                ])]),
            ),
        ]);
        let want = "%YAML 1.1\n--- !!map\n!!str meta: !!map\n  !!str plugin: !!map\n    !!str type: !!str openapi/v0.0.38\n!!str errors: !!seq []\n!!str jobs: !!seq\n- !!map\n  !!str flags: !!seq\n  - !!str JOB_WAS_RUNNING\n  !!str comment: !!null null\n  !!str billable_tres: !!float 2.000000\n  !!str ok: !!bool true\n  !!str e: !!map {}\n  !!str res: !!map\n    !!str nodes: !!seq\n    - !!map\n      !!str s: !!map\n        !!str 0: !!str allocated\n...\n";
        assert_eq!(to_yaml(&d), want);
    }

    #[test]
    fn yaml_quotes_and_folds_as_libyaml() {
        let y = |s: &str| {
            let mut o = String::new();
            yaml_scalar(s, 2, false, &mut o);
            o
        };
        assert_eq!(y("gpu:h100:2(IDX:0-1)"), "gpu:h100:2(IDX:0-1)");
        assert_eq!(y("cpu=1,mem=1G"), "cpu=1,mem=1G");
        assert_eq!(y("a #b"), "'a #b'");
        assert_eq!(y("it's: x"), "'it''s: x'");
        assert_eq!(y("- x"), "'- x'");
        assert_eq!(y(" lead"), "' lead'");
        assert_eq!(y("two\nlines"), "\"two\\nlines\"");
        assert_eq!(y("caf\u{e9}"), "\"caf\\xE9\"");
        assert_eq!(y("*star"), "'*star'");
        // Folded at the first single space past column 80.
        let long = format!("{} tail end", "x".repeat(85));
        let mut o = String::new();
        write_folded(&long, 4, true, &mut o);
        assert_eq!(o, format!("{}\n    tail end", "x".repeat(85)));
        let mut k = String::new();
        write_folded(&long, 4, false, &mut k);
        assert_eq!(k, long);
    }

    #[test]
    fn shares_and_diag_documents() {
        let r = flotilla_proto::share::ShareRow {
            id: 3,
            cluster: "c".into(),
            account: "research".into(),
            parent: Some("root".into()),
            user: Some("alice".into()),
            raw_shares: Some(u32::MAX),
            norm_shares: 0.5,
            ..Default::default()
        };
        let j = to_json(&shares_doc(&[r]));
        let v: Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["shares"][0]["raw_shares"], "parent");
        assert_eq!(v["shares"][0]["user"], "alice");
        assert_eq!(v["shares"][0]["partition"], Value::Null);
        assert_eq!(v["shares"][0]["norm_shares"], 0.5);
        assert!(j.starts_with("{\n  \"meta\": {"), "{j}");
        let d = flotilla_proto::diag::Diag::default();
        let doc = diag_doc(&d, &|_| None);
        let Doc::Map(top) = &doc else { panic!() };
        assert_eq!(top.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["meta", "errors", "statistics"]);
        let Doc::Map(st) = &top[2].1 else { panic!() };
        assert_eq!(st[0].0, "rpcs_by_message_type");
        assert_eq!(st[1].0, "rpcs_by_user");
        assert!(st.iter().any(|(k, _)| k == "bf_active"));
    }

    #[test]
    fn partition_document() {
        let p = PartitionInfo { name: "batch".into(), nodes: "n[1-2]".into(), default: true, up: true, total_nodes: 2, total_cpus: 8, total_gpus: 4, default_time_min: Some(60), max_time_min: Some(2880), ..Default::default() };
        let old = PartitionInfo { name: "old".into(), ..Default::default() };
        let states = [("old".to_string(), "INACTIVE".to_string())].into_iter().collect();
        let v: Value = serde_json::from_str(&to_json(&partitions_doc(&[p, old], states, "c", &[]))).unwrap();
        assert_eq!((v["partitions"][0]["state"].as_str(), v["partitions"][1]["state"].as_str()), (Some("UP"), Some("INACTIVE")));
        let p = &v["partitions"][0];
        // (No slurm.conf nodes given: no memory.)
        assert_eq!(p["tres"], "cpu=8,mem=0M,node=2,billing=8,gres/gpu=4");
        assert_eq!(p["min nodes per job"], 0);
        assert_eq!(p["flags"], serde_json::json!(["default"]));
        assert_eq!(p["max_time_limit"], 2880);
        assert_eq!(p["default_memory_per_cpu"], Value::Null);
    }

    #[test]
    fn gres_detail_as_slurm() {
        assert_eq!(idx_ranges(0b11), "0-1");
        assert_eq!(idx_ranges(0b1101), "0,2-3");
        assert_eq!(idx_ranges(1 << 63), "63");
        let j = JobInfo { gpu_alloc: vec![("a".into(), 0b11), ("b".into(), 0), ("c".into(), 0b100)], ..JobInfo::default() };
        let t = |n: &str| (n == "a").then(|| "h100".to_string());
        assert_eq!(gres_detail(&j, &t), vec![Doc::s("gpu:h100:2(IDX:0-1)"), Doc::s("gpu:1(IDX:2)")]);
    }

    /// Reads back the tagged block YAML this module writes (and libyaml wrote for 22.05):
    /// entries of a mapping at `indent`, items of a sequence at `indent`.
    fn read_yaml(lines: &[&str], at: &mut usize, indent: usize, seq: bool) -> Doc {
        let mut kv = Vec::new();
        let mut items = Vec::new();
        while *at < lines.len() {
            let l = lines[*at];
            let pad = l.len() - l.trim_start().len();
            if l == "..." || pad != indent || l.trim_start().starts_with("- ") != seq {
                break;
            }
            *at += 1;
            let body = &l[pad..];
            let (key, rest) = if seq {
                (None, &body[2..])
            } else {
                let (k, r) = body.strip_prefix("!!str ").unwrap().split_once(": ").unwrap();
                (Some(k.to_string()), r)
            };
            let v = match rest {
                "!!map" => read_yaml(lines, at, indent + 2, false),
                "!!seq" => read_yaml(lines, at, indent, true),
                "!!map {}" => Doc::Map(Vec::new()),
                "!!seq []" => Doc::Seq(Vec::new()),
                "!!null null" => Doc::Null,
                r => {
                    let (tag, val) = r.split_once(' ').unwrap();
                    match tag {
                        "!!str" => Doc::s(val),
                        "!!int" => Doc::Int(val.parse().unwrap()),
                        "!!float" => Doc::Float(val.parse().unwrap()),
                        "!!bool" => Doc::Bool(val == "true"),
                        t => panic!("tag {t}"),
                    }
                }
            };
            match key {
                Some(k) => kv.push((k, v)),
                None => items.push(v),
            }
        }
        if seq {
            Doc::Seq(items)
        } else {
            Doc::Map(kv)
        }
    }

    /// The emitter against libyaml itself: 22.05.8's `squeue --yaml` recording, read back
    /// into a document and written again, byte for byte.
    #[test]
    fn yaml_rewrites_22_05s_recording_byte_for_byte() {
        let g: Value = serde_json::from_str(include_str!("../../compat-tests/goldens-rest/v0.0.38/squeue_yaml.json")).unwrap();
        let text = g["stdout"].as_str().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[..2], ["%YAML 1.1", "--- !!map"]);
        let mut at = 2;
        let doc = read_yaml(&lines, &mut at, 0, false);
        assert_eq!(lines[at..], ["..."]);
        // (The recorder's `$(...)` dropped the final newline.)
        assert_eq!(to_yaml(&doc), format!("{text}\n"));
    }

    #[test]
    fn tres_strings() {
        let j = JobInfo { num_cpus: 2, num_tasks: 2, cpus_per_task: 1, num_nodes: 1, mem_per_cpu_mib: Some(1024), gpus: 2, ..JobInfo::default() };
        assert_eq!(job_tres(&j), "cpu=2,mem=2G,node=1,billing=2,gres/gpu=2");
        let k = JobInfo { num_cpus: 1, num_tasks: 1, num_nodes: 1, mem_per_cpu_mib: None, mem_per_node_mib: 500, ..JobInfo::default() };
        assert_eq!(job_tres(&k), "cpu=1,mem=500M,node=1,billing=1");
    }

    #[test]
    fn jobs_doc_has_every_key_of_22_05_in_order() {
        let j = JobInfo { job_id: 7, name: "x".into(), gid: 5, ..JobInfo::default() };
        let d = jobs_doc(&[j], "c", &|g| (g == 5).then(|| "grp".to_string()), &|_| None);
        let Doc::Map(top) = &d else { panic!() };
        assert_eq!(top.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["meta", "errors", "jobs"]);
        let Doc::Seq(jobs) = &top[2].1 else { panic!() };
        let Doc::Map(kv) = &jobs[0] else { panic!() };
        let names: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
        let want: Vec<&str> = JOB_KEYS.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, want);
        assert_eq!(kv.iter().find(|(k, _)| k == "group_name").unwrap().1, Doc::s("grp"));
        assert_eq!(kv.iter().find(|(k, _)| k == "array_task_id").unwrap().1, Doc::Null);
        assert_eq!(kv.iter().find(|(k, _)| k == "start_time").unwrap().1, Doc::Int(0));
    }
}
