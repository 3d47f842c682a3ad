//! The environment of a batch script, as Slurm's `slurmd`/`slurmstepd` build it
//! (`env_array_for_batch_job`), checked against the reference goldens
//! (`jobout_*env*`). Pure: the caller passes the job, the node's facts and the user's passwd
//! entry in.
//!
//! Division of work with `sbatch` (as in Slurm): `sbatch` puts the variables that come from its
//! own options into the environment it submits — `SLURM_SUBMIT_DIR`, `SLURM_SUBMIT_HOST`,
//! `SLURM_PRIO_PROCESS`, `SLURM_NTASKS`/`SLURM_NPROCS` (`-n`), `SLURM_CPUS_PER_TASK` (`-c`),
//! `SLURM_GPUS`, `SLURM_GPUS_PER_NODE`, `SLURM_GPUS_PER_TASK`, and `SLURM_EXPORT_ENV` for
//! `--export` — and the node adds the allocation's. Where `sbatch` left one of its variables out
//! and the node knows the value, the node fills it in.
//!
//! `--export` (`SLURM_EXPORT_ENV` in the submitted environment): `ALL` (default) keeps the
//! submitted environment; `NONE` keeps only its `SLURM_*` variables and adds a minimal login
//! environment of the user (`HOME`, `USER`, `LOGNAME`, `SHELL`, `PATH`); `NIL` is `NONE`
//! without the login variables; a list `A,B=x` keeps `SLURM_*`, the named variables (with the
//! given values) and the login variables; `ALL,B=x` keeps everything and sets `B`.

use flotilla_proto::{Bind, LaunchDetails};

/// Slurm 22.05's protocol version, as `SLURM_WORKING_CLUSTER` shows it.
pub const SLURM_PROTOCOL_VERSION: u32 = 9728;
/// Plugin id of `select/cons_tres`, as `SLURM_WORKING_CLUSTER` shows it.
pub const SELECT_CONS_TRES_ID: u32 = 109;

/// `--export` as read from `SLURM_EXPORT_ENV`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Export {
    /// `ALL`, optionally with variables set (`ALL,A=1`).
    All(Vec<(String, Option<String>)>),
    /// `NONE`: only `SLURM_*` plus the login variables.
    None,
    /// `NIL`: only `SLURM_*`.
    Nil,
    /// A list without `ALL`: `SLURM_*`, these, and the login variables.
    Only(Vec<(String, Option<String>)>),
}

impl Export {
    /// Parses a `--export` value. Empty means `ALL`.
    pub fn parse(s: &str) -> Export {
        let s = s.trim();
        match s.to_ascii_uppercase().as_str() {
            "" | "ALL" => return Export::All(Vec::new()),
            "NONE" => return Export::None,
            "NIL" => return Export::Nil,
            _ => {}
        }
        let mut all = false;
        let mut vars = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if item.eq_ignore_ascii_case("ALL") {
                all = true;
            } else if item.eq_ignore_ascii_case("NONE") || item.eq_ignore_ascii_case("NIL") {
                // "NONE,A=1" is a list.
            } else {
                match item.split_once('=') {
                    Some((k, v)) => vars.push((k.to_string(), Some(v.to_string()))),
                    None => vars.push((item.to_string(), None)),
                }
            }
        }
        if all {
            Export::All(vars)
        } else {
            Export::Only(vars)
        }
    }
}

/// The user's passwd entry, for the login variables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// Name.
    pub name: String,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
}

/// The groups a process of user `name` runs with: `gid` and the user's supplementary groups
/// from the group database (`getgrouplist(3)`, as Slurm's slurmstepd takes them with
/// `initgroups`); just `gid` when the user or the lookup is unknown.
pub fn groups_of(name: &str, gid: u32) -> Vec<u32> {
    let mut g: Vec<u32> = std::ffi::CString::new(name)
        .ok()
        .and_then(|n| nix::unistd::getgrouplist(&n, nix::unistd::Gid::from_raw(gid)).ok())
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    if !g.contains(&gid) {
        g.insert(0, gid);
    }
    g
}

impl UserInfo {
    /// The passwd entry of `uid`; `name` (the name the controller recorded) with `/` as home
    /// and `/bin/sh` as shell when the node has no entry for it.
    pub fn of_uid(uid: u32, name: &str) -> UserInfo {
        let pw = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten();
        UserInfo {
            name: pw.as_ref().map_or_else(|| name.to_string(), |p| p.name.clone()),
            home: pw.as_ref().map_or_else(|| "/".into(), |p| p.dir.to_string_lossy().into_owned()),
            shell: pw.as_ref().map_or_else(|| "/bin/sh".into(), |p| p.shell.to_string_lossy().into_owned()),
        }
    }
}

/// What the node knows about itself and the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeFacts {
    /// Node name (`SLURMD_NODENAME`).
    pub node: String,
    /// `ClusterName`.
    pub cluster_name: String,
    /// Path of slurm.conf (`SLURM_CONF`, `FLOTILLA_CONF`).
    pub conf_path: String,
    /// Controller address and port (`SLURM_WORKING_CLUSTER`).
    pub ctld_host: String,
    /// Controller port.
    pub ctld_port: u16,
    /// `SLURM_TOPOLOGY_ADDR` and `SLURM_TOPOLOGY_ADDR_PATTERN` of this node.
    pub topology_addr: (String, String),
}

/// Slurm's compressed count list: `1(x2)`, `4`, `8,4(x2)`.
pub fn compress_counts(v: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[i] {
            j += 1;
        }
        let n = j - i + 1;
        out.push(if n > 1 { format!("{}(x{n})", v[i]) } else { v[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// GPU indices of a gpu_mask, ascending.
pub fn gpu_indices(mask: u64) -> Vec<u32> {
    (0..64).filter(|i| mask & (1u64 << i) != 0).collect()
}

fn set(env: &mut Vec<(String, String)>, k: &str, v: impl Into<String>) {
    let v = v.into();
    match env.iter_mut().find(|(ek, _)| ek == k) {
        Some(e) => e.1 = v,
        None => env.push((k.to_string(), v)),
    }
}

fn set_default(env: &mut Vec<(String, String)>, k: &str, v: impl Into<String>) {
    if !env.iter().any(|(ek, _)| ek == k) {
        env.push((k.to_string(), v.into()));
    }
}

fn login_vars(env: &mut Vec<(String, String)>, user: &UserInfo) {
    set_default(env, "HOME", user.home.clone());
    set_default(env, "USER", user.name.clone());
    set_default(env, "LOGNAME", user.name.clone());
    set_default(env, "SHELL", if user.shell.is_empty() { "/bin/sh".to_string() } else { user.shell.clone() });
    set_default(env, "PATH", "/usr/local/bin:/usr/bin:/bin");
}

/// Applies `--export` to the submitted environment.
pub fn exported(submitted: &[(String, String)], user: &UserInfo) -> Vec<(String, String)> {
    let spec = submitted
        .iter()
        .find(|(k, _)| k == "SLURM_EXPORT_ENV")
        .map_or(Export::All(Vec::new()), |(_, v)| Export::parse(v));
    let slurm_only = |env: &[(String, String)]| -> Vec<(String, String)> {
        env.iter().filter(|(k, _)| k.starts_with("SLURM_")).cloned().collect()
    };
    let with_list = |env: &mut Vec<(String, String)>, vars: &[(String, Option<String>)]| {
        for (k, v) in vars {
            match v {
                Some(v) => set(env, k, v.clone()),
                None => {
                    if let Some((_, v)) = submitted.iter().find(|(sk, _)| sk == k) {
                        set(env, k, v.clone());
                    }
                }
            }
        }
    };
    match spec {
        Export::All(vars) => {
            let mut env = submitted.to_vec();
            with_list(&mut env, &vars);
            env
        }
        Export::Nil => slurm_only(submitted),
        Export::None => {
            let mut env = slurm_only(submitted);
            login_vars(&mut env, user);
            env
        }
        Export::Only(vars) => {
            let mut env = slurm_only(submitted);
            with_list(&mut env, &vars);
            login_vars(&mut env, user);
            env
        }
    }
}

/// The complete environment of the batch script (without `SLURM_TASK_PID`, which only the
/// forked process knows). `checkpoint_ack` is the path the job touches to acknowledge a
/// checkpoint (`FLOTILLA_CHECKPOINT_ACK`).
pub fn batch_env(
    bind: &Bind,
    details: Option<&LaunchDetails>,
    facts: &NodeFacts,
    user: &UserInfo,
    checkpoint_ack: &str,
) -> Vec<(String, String)> {
    let mut env = exported(&bind.environment, user);
    let nnodes = flotilla_core::hostlist::expand(&bind.nodes).map_or(1, |v| v.len().max(1));
    let cpus_per_node: Vec<u32> = match details {
        Some(d) if !d.cpus_per_node.is_empty() => d.cpus_per_node.clone(),
        _ => vec![bind.cpus; nnodes],
    };
    let cpt = details.map_or(1, |d| d.cpus_per_task.max(1));
    // Slurm 22.05 `env_array_for_batch_job`: the job's task count when it has one (on one
    // node all of them there, more tasks than CPUs included: `scontrol update NumTasks=4` of a
    // one-CPU job, goldens-extra 0934), else what each node's CPUs hold.
    let ntasks = details.map_or(0, |d| d.ntasks);
    let tasks: Vec<u32> = match cpus_per_node.len() {
        1 if ntasks > 0 => vec![ntasks],
        _ => cpus_per_node.iter().map(|c| (c / cpt).max(1)).collect(),
    };
    let id = bind.job_id.to_string();

    let gpus = gpu_indices(bind.gpu_mask);
    if !gpus.is_empty() {
        let list = gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        for k in ["CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "SLURM_JOB_GPUS"] {
            set(&mut env, k, list.clone());
        }
        set(&mut env, "SLURM_GPUS_ON_NODE", gpus.len().to_string());
    }
    set(&mut env, "SLURMD_NODENAME", facts.node.clone());
    if let Some((aid, task)) = bind.array {
        set(&mut env, "SLURM_ARRAY_JOB_ID", aid.to_string());
        set(&mut env, "SLURM_ARRAY_TASK_ID", task.to_string());
        if let Some(a) = details.and_then(|d| d.array_tasks) {
            set(&mut env, "SLURM_ARRAY_TASK_COUNT", a.count.to_string());
            set(&mut env, "SLURM_ARRAY_TASK_MAX", a.max.to_string());
            set(&mut env, "SLURM_ARRAY_TASK_MIN", a.min.to_string());
            set(&mut env, "SLURM_ARRAY_TASK_STEP", a.step.to_string());
        }
    }
    set(&mut env, "SLURM_CLUSTER_NAME", facts.cluster_name.clone());
    set(&mut env, "SLURM_CONF", facts.conf_path.clone());
    set(&mut env, "SLURM_CPUS_ON_NODE", bind.cpus.to_string());
    if cpt > 1 {
        set_default(&mut env, "SLURM_CPUS_PER_TASK", cpt.to_string());
    }
    set(&mut env, "SLURM_GTIDS", "0");
    set(&mut env, "SLURM_JOBID", id.clone());
    if let Some(d) = details {
        set(&mut env, "SLURM_JOB_ACCOUNT", d.account.clone());
    }
    set(&mut env, "SLURM_JOB_CPUS_PER_NODE", compress_counts(&cpus_per_node));
    set(&mut env, "SLURM_JOB_GID", bind.gid.to_string());
    set(&mut env, "SLURM_JOB_ID", id);
    set(&mut env, "SLURM_JOB_NAME", bind.name.clone());
    set(&mut env, "SLURM_JOB_NODELIST", bind.nodes.clone());
    set(&mut env, "SLURM_JOB_NUM_NODES", nnodes.to_string());
    set(&mut env, "SLURM_JOB_PARTITION", bind.partition.clone());
    if let Some(d) = details {
        set(&mut env, "SLURM_JOB_QOS", d.qos.clone());
    }
    set(&mut env, "SLURM_JOB_UID", bind.uid.to_string());
    set(&mut env, "SLURM_JOB_USER", bind.user.clone());
    set(&mut env, "SLURM_LOCALID", "0");
    match details {
        Some(LaunchDetails {
            mem_per_cpu_mib: Some(m), ..
        }) => set(&mut env, "SLURM_MEM_PER_CPU", m.to_string()),
        Some(d) if d.mem_per_node_mib > 0 => set(&mut env, "SLURM_MEM_PER_NODE", d.mem_per_node_mib.to_string()),
        None if bind.mem_mib > 0 => set(&mut env, "SLURM_MEM_PER_NODE", bind.mem_mib.to_string()),
        _ => {}
    }
    set(&mut env, "SLURM_NNODES", nnodes.to_string());
    set(&mut env, "SLURM_NODEID", "0");
    set(&mut env, "SLURM_NODELIST", bind.nodes.clone());
    set(&mut env, "SLURM_NODE_ALIASES", "(null)");
    // Appended, not overwritten: sbatch's own `-n` value stays (`env_array_append_fmt`).
    if ntasks > 0 {
        set_default(&mut env, "SLURM_NPROCS", ntasks.to_string());
        set_default(&mut env, "SLURM_NTASKS", ntasks.to_string());
    }
    set_default(&mut env, "SLURM_PRIO_PROCESS", "0");
    set(&mut env, "SLURM_PROCID", "0");
    if bind.run > 0 {
        set(&mut env, "SLURM_RESTART_COUNT", bind.run.to_string());
    }
    set_default(&mut env, "SLURM_SUBMIT_DIR", bind.work_dir.clone());
    if let Some(d) = details.filter(|d| !d.submit_host.is_empty()) {
        set_default(&mut env, "SLURM_SUBMIT_HOST", d.submit_host.clone());
    }
    set(&mut env, "SLURM_TASKS_PER_NODE", compress_counts(&tasks));
    set(&mut env, "SLURM_TOPOLOGY_ADDR", facts.topology_addr.0.clone());
    set(&mut env, "SLURM_TOPOLOGY_ADDR_PATTERN", facts.topology_addr.1.clone());
    set(
        &mut env,
        "SLURM_WORKING_CLUSTER",
        format!(
            "{}:{}:{}:{SLURM_PROTOCOL_VERSION}:{SELECT_CONS_TRES_ID}",
            facts.cluster_name, facts.ctld_host, facts.ctld_port
        ),
    );
    set(&mut env, "ENVIRONMENT", "BATCH");
    set(&mut env, "FLOTILLA_CONF", facts.conf_path.clone());
    set(&mut env, "FLOTILLA_CHECKPOINT_ACK", checkpoint_ack);
    env
}

/// Name of an elastic job's membership file in its `user/` directory (`FLOTILLA_NODES_FILE`).
pub const NODES_FILE: &str = "nodes";

/// First port of elastic jobs' rendezvous endpoints without `ElasticRdzvPort=` (torchrun's
/// c10d default, 29400).
pub const RDZV_PORT_BASE: u16 = 29400;

/// How many ports the endpoints use without `ElasticRdzvPortCount=`.
pub const RDZV_PORT_COUNT: u16 = 1000;

/// The rendezvous port of `bind`'s job on its first node (`FLOTILLA_RDZV_ENDPOINT`) when it
/// is elastic (the controller put `FLOTILLA_ELASTIC_NNODES` or `FLOTILLA_ELASTIC_NGPUS`,
/// `MIN:MAX`, in its environment): in the range of `count` ports from `base` (`count` 0 is
/// 1; the range ends at 65535), `base + job_id % count`, or the next port of the range,
/// wrapping, that is not in `taken` (the ports of the other elastic jobs this node is the
/// first node of); the first choice when every port is taken.
pub fn elastic_rdzv_port(bind: &Bind, base: u16, count: u16, taken: &[u16]) -> Option<u16> {
    let elastic = bind.environment.iter().any(|(k, _)| k == "FLOTILLA_ELASTIC_NNODES" || k == "FLOTILLA_ELASTIC_NGPUS");
    if !elastic {
        return None;
    }
    let count = u64::from(count.max(1)).min(65_536 - u64::from(base));
    let at = |k: u64| base + ((bind.job_id + k) % count) as u16;
    Some((0..count).map(at).find(|p| !taken.contains(p)).unwrap_or_else(|| at(0)))
}

/// The port of a `FLOTILLA_RDZV_ENDPOINT` value (`host:port`).
pub fn rdzv_port_of(env: &[(String, String)]) -> Option<u16> {
    env.iter()
        .find(|(k, _)| k == "FLOTILLA_RDZV_ENDPOINT")
        .and_then(|(_, v)| v.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
}

/// The membership file's text: one node name a line, in the job's order (first: the
/// rendezvous node, `first` when given); `nodes` is a comma-separated list or a hostlist.
pub fn nodes_file_text(nodes: &str, first: Option<&str>) -> String {
    let mut names: Vec<String> = if nodes.contains('[') {
        flotilla_core::hostlist::expand(nodes).unwrap_or_default()
    } else {
        nodes.split(',').filter(|n| !n.is_empty()).map(str::to_string).collect()
    };
    if let Some(i) = first.and_then(|f| names.iter().position(|n| n == f)) {
        let n = names.remove(i);
        names.insert(0, n);
    }
    names.iter().map(|n| format!("{n}\n")).collect()
}

/// `SLURM_TOPOLOGY_ADDR` and its pattern for `node` under `topology/tree`: the switches from
/// the top down to the node (`spine.leaf1.gpu01`, `switch.switch.node`); just the node name
/// (`node`) under any other topology plugin.
pub fn topology_addr(conf: &flotilla_core::config::ClusterConfig, node: &str) -> (String, String) {
    let leaf = conf.pods.iter().find(|p| p.nodes.iter().any(|n| n == node));
    let Some(leaf) = leaf.filter(|_| conf.topology_plugin.ends_with("tree")) else {
        return (node.to_string(), "node".to_string());
    };
    let mut path = vec![leaf.name.clone()];
    let mut cur = leaf.name.clone();
    while let Some(parent) = conf.switches.iter().find(|s| s.switches.contains(&cur)) {
        if path.contains(&parent.name) {
            break;
        }
        path.push(parent.name.clone());
        cur = parent.name.clone();
    }
    path.reverse();
    let pattern = vec!["switch"; path.len()].join(".") + ".node";
    path.push(node.to_string());
    (path.join("."), pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_file_lists_the_first_node_first() {
        assert_eq!(nodes_file_text("gpu[01-03]", Some("gpu02")), "gpu02\ngpu01\ngpu03\n");
        assert_eq!(nodes_file_text("gpu03,gpu01", None), "gpu03\ngpu01\n");
        let mut b = bind();
        assert_eq!(elastic_rdzv_port(&b, RDZV_PORT_BASE, RDZV_PORT_COUNT, &[]), None);
        b.job_id = 1234;
        b.environment.push(("FLOTILLA_ELASTIC_NNODES".into(), "2:4".into()));
        assert_eq!(elastic_rdzv_port(&b, RDZV_PORT_BASE, RDZV_PORT_COUNT, &[]), Some(29634));
    }

    /// Two elastic jobs 1000 ids apart with the same first node no longer share a port: the
    /// second takes the next free one of the range, wrapping; a configured range is used.
    #[test]
    fn rendezvous_ports_skip_those_taken_on_the_node() {
        let mut b = bind();
        b.environment.push(("FLOTILLA_ELASTIC_NGPUS".into(), "2:8".into()));
        b.job_id = 2234;
        assert_eq!(elastic_rdzv_port(&b, RDZV_PORT_BASE, RDZV_PORT_COUNT, &[29634]), Some(29635));
        assert_eq!(elastic_rdzv_port(&b, RDZV_PORT_BASE, RDZV_PORT_COUNT, &[29634, 29635]), Some(29636));
        b.job_id = 999;
        assert_eq!(elastic_rdzv_port(&b, RDZV_PORT_BASE, RDZV_PORT_COUNT, &[30399]), Some(29400), "wraps");
        assert_eq!(elastic_rdzv_port(&b, 40000, 4, &[]), Some(40003));
        assert_eq!(elastic_rdzv_port(&b, 40000, 2, &[40000, 40001]), Some(40001), "all taken: the first choice");
        assert_eq!(elastic_rdzv_port(&b, 40000, 0, &[]), Some(40000), "a count of 0 is 1");
        assert_eq!(elastic_rdzv_port(&b, 65_535, 1000, &[]), Some(65_535), "the range ends at 65535");
        let env = vec![("FLOTILLA_RDZV_ENDPOINT".to_string(), "gpu01:29634".to_string())];
        assert_eq!(rdzv_port_of(&env), Some(29634));
        assert_eq!(rdzv_port_of(&[]), None);
    }

    fn bind() -> Bind {
        Bind {
            job_id: 35,
            run: 0,
            array: None,
            name: "N2_gpn2".into(),
            gpu_mask: 0b11,
            cpus: 1,
            mem_mib: 1024,
            batch_host: true,
            nodes: "gpu[01-02]".into(),
            uid: 2001,
            gid: 2001,
            user: "alice".into(),
            script: "#!/bin/bash\n".into(),
            argv: vec![],
            environment: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("SLURM_SUBMIT_DIR".into(), "/home/alice/g".into()),
                ("SLURM_GPUS_PER_NODE".into(), "2".into()),
            ],
            work_dir: "/home/alice/g".into(),
            stdout: None,
            stderr: None,
            time_limit_s: None,
            partition: "batch".into(),
        }
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            node: "gpu01".into(),
            cluster_name: "oracle".into(),
            conf_path: "/etc/slurm/slurm.conf".into(),
            ctld_host: "127.0.0.1".into(),
            ctld_port: 6817,
            topology_addr: ("spine.leaf1.gpu01".into(), "switch.switch.node".into()),
        }
    }

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn counts() {
        assert_eq!(compress_counts(&[1, 1]), "1(x2)");
        assert_eq!(compress_counts(&[4]), "4");
        assert_eq!(compress_counts(&[8, 4, 4]), "8,4(x2)");
        assert_eq!(gpu_indices(0b1010_0001), vec![0, 5, 7]);
    }

    #[test]
    fn golden_n2_gpn2() {
        let d = LaunchDetails {
            account: "research".into(),
            qos: "normal".into(),
            submit_host: "vm".into(),
            cpus_per_node: vec![1, 1],
            cpus_per_task: 1,
            mem_per_cpu_mib: Some(1024),
            mem_per_node_mib: 1024,
            array_tasks: None,
            signal: None,
            interactive: false,
            ntasks: 0,
        };
        let env = batch_env(&bind(), Some(&d), &facts(), &UserInfo::default(), "/x/ack");
        for (k, v) in [
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("SLURM_JOB_CPUS_PER_NODE", "1(x2)"),
            ("SLURM_TASKS_PER_NODE", "1(x2)"),
            ("SLURM_NNODES", "2"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("SLURM_MEM_PER_CPU", "1024"),
            ("SLURM_GPUS_PER_NODE", "2"),
            ("SLURM_SUBMIT_HOST", "vm"),
            ("SLURM_WORKING_CLUSTER", "oracle:127.0.0.1:6817:9728:109"),
            ("SLURM_JOB_ACCOUNT", "research"),
            ("FLOTILLA_CONF", "/etc/slurm/slurm.conf"),
            ("FLOTILLA_CHECKPOINT_ACK", "/x/ack"),
            ("PATH", "/usr/bin"),
        ] {
            assert_eq!(get(&env, k), Some(v), "{k}");
        }
        assert_eq!(get(&env, "SLURM_RESTART_COUNT"), None);
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), None);
    }

    #[test]
    fn exclusive_tasks_per_node_and_restart() {
        let mut b = bind();
        b.cpus = 64;
        b.nodes = "gpu01".into();
        b.run = 2;
        b.gpu_mask = 0;
        let d = LaunchDetails {
            cpus_per_node: vec![64],
            cpus_per_task: 1,
            mem_per_node_mib: 4096,
            ..LaunchDetails::default()
        };
        let env = batch_env(&b, Some(&d), &facts(), &UserInfo::default(), "");
        assert_eq!(get(&env, "SLURM_TASKS_PER_NODE"), Some("64"));
        assert_eq!(get(&env, "SLURM_NTASKS"), None, "no task count asked for");
        // A task count (an update's NumTasks=4 on one CPU): all its tasks on the node, and
        // SLURM_NTASKS/SLURM_NPROCS unless sbatch's environment has them already.
        let d4 = LaunchDetails { cpus_per_node: vec![1], ntasks: 4, ..d.clone() };
        let env = batch_env(&b, Some(&d4), &facts(), &UserInfo::default(), "");
        assert_eq!((get(&env, "SLURM_NTASKS"), get(&env, "SLURM_NPROCS"), get(&env, "SLURM_TASKS_PER_NODE")), (Some("4"), Some("4"), Some("4")));
        let mut b2 = b.clone();
        b2.environment.push(("SLURM_NTASKS".into(), "2".into()));
        assert_eq!(get(&batch_env(&b2, Some(&d4), &facts(), &UserInfo::default(), ""), "SLURM_NTASKS"), Some("2"));
        assert_eq!(get(&env, "SLURM_RESTART_COUNT"), Some("2"));
        assert_eq!(get(&env, "SLURM_MEM_PER_NODE"), Some("4096"));
        assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), None);
        assert_eq!(get(&env, "SLURM_GPUS_ON_NODE"), None);
    }

    #[test]
    fn export_semantics() {
        let user = UserInfo {
            name: "alice".into(),
            home: "/home/alice".into(),
            shell: "/bin/bash".into(),
        };
        let sub = |spec: &str| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = vec![
                ("FOO".into(), "1".into()),
                ("BAR".into(), "2".into()),
                ("HOME".into(), "/elsewhere".into()),
                ("SLURM_SUBMIT_DIR".into(), "/d".into()),
            ];
            if !spec.is_empty() {
                v.push(("SLURM_EXPORT_ENV".into(), spec.into()));
            }
            v
        };
        let all = exported(&sub(""), &user);
        assert_eq!(get(&all, "FOO"), Some("1"));
        assert_eq!(get(&all, "HOME"), Some("/elsewhere"));
        let none = exported(&sub("NONE"), &user);
        assert_eq!(get(&none, "FOO"), None);
        assert_eq!(get(&none, "SLURM_SUBMIT_DIR"), Some("/d"));
        assert_eq!(get(&none, "HOME"), Some("/home/alice"));
        assert_eq!(get(&none, "USER"), Some("alice"));
        let nil = exported(&sub("NIL"), &user);
        assert_eq!(get(&nil, "HOME"), None);
        let list = exported(&sub("FOO,BAZ=3"), &user);
        assert_eq!(get(&list, "FOO"), Some("1"));
        assert_eq!(get(&list, "BAR"), None);
        assert_eq!(get(&list, "BAZ"), Some("3"));
        assert_eq!(get(&list, "HOME"), Some("/home/alice"));
        let all_plus = exported(&sub("ALL,BAR=9"), &user);
        assert_eq!(get(&all_plus, "FOO"), Some("1"));
        assert_eq!(get(&all_plus, "BAR"), Some("9"));
        assert_eq!(Export::parse("all"), Export::All(vec![]));
    }

    #[test]
    fn topology_of_the_reference() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/slurm-reference/conf/slurm.conf");
        let Ok(conf) = flotilla_conf::load_from(&p) else {
            println!("SKIPPED: reference configuration not found at {}", p.display());
            return;
        };
        assert_eq!(
            topology_addr(&conf, "gpu03"),
            ("spine.leaf2.gpu03".to_string(), "switch.switch.node".to_string())
        );
        let flat = flotilla_core::config::ClusterConfig::default();
        assert_eq!(topology_addr(&flat, "n1"), ("n1".to_string(), "node".to_string()));
    }
}
