//! `sdeploy`: Flotilla's command for inference services (DESIGN.md §2; Slurm has none).
//!
//! - `sdeploy create --name NAME --gpus N [--gpu-type T] [--topology node|pod|any]
//!   [--cpus N] [--mem MiB] [--min N] [--max N] [--replicas N] [--priority N] [-p PART]
//!   [-A ACCOUNT] [-D DIR] -- COMMAND...`: prints `Created service ID` (as `sbatch` prints
//!   `Submitted batch job ID`).
//! - `sdeploy scale ID --replicas N`: the autoscaler's only verb; silent on success.
//! - `sdeploy show [ID]`: `scontrol show`-style `Key=Value` records (`-o`: one line each).
//! - `sdeploy list`: a `squeue`-like table, one service a line.
//! - `sdeploy delete ID`: its replicas stop; silent on success.
//!
//! Errors go to stderr as `sdeploy: error: TEXT`, exit 1 (as Slurm's commands report a
//! refused request). The command only parses, asks and prints (see the crate docs).

use crate::common::{self, Ctl, Io};
use clap::{Parser, Subcommand};
use flotilla_core::time::fmt_time;
use flotilla_proto::{Request, Response, ServiceCreate, ServiceInfo};

/// `sdeploy` arguments.
#[derive(Debug, Parser)]
#[command(name = "sdeploy", about = "Manage Flotilla inference services", disable_version_flag = true)]
pub struct Cli {
    /// Verb.
    #[command(subcommand)]
    pub verb: Verb,
}

/// `sdeploy` verbs.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Create a service.
    Create(Box<CreateArgs>),
    /// Set the desired replica count (clamped to [min, max] by the scheduler).
    Scale {
        /// Service id.
        id: u32,
        /// Replicas wanted.
        #[arg(long)]
        replicas: u32,
    },
    /// Show services as Key=Value records.
    Show {
        /// Service id (all when omitted).
        id: Option<u32>,
        /// One line per service.
        #[arg(short = 'o', long = "oneliner")]
        one_liner: bool,
    },
    /// List services as a table.
    List {
        /// No header line.
        #[arg(short = 'H', long = "noheader")]
        noheader: bool,
    },
    /// Delete a service (its replicas stop).
    Delete {
        /// Service id.
        id: u32,
    },
}

/// `sdeploy create` arguments.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Service name (the replicas' job name).
    #[arg(long, short = 'J')]
    pub name: String,
    /// GPUs per replica.
    #[arg(long)]
    pub gpus: u32,
    /// GPU model required.
    #[arg(long)]
    pub gpu_type: Option<String>,
    /// Topology of one replica: node, pod or any (default node).
    #[arg(long)]
    pub topology: Option<String>,
    /// CPUs per replica.
    #[arg(long, short = 'c')]
    pub cpus: Option<u32>,
    /// Memory per replica (MiB).
    #[arg(long)]
    pub mem: Option<u64>,
    /// Availability floor.
    #[arg(long, default_value_t = 1)]
    pub min: u32,
    /// Ceiling (default: the floor).
    #[arg(long)]
    pub max: Option<u32>,
    /// Replicas wanted now (default: the floor).
    #[arg(long)]
    pub replicas: Option<u32>,
    /// Priority among services.
    #[arg(long, default_value_t = 0)]
    pub priority: u32,
    /// Partition.
    #[arg(long, short = 'p')]
    pub partition: Option<String>,
    /// Account.
    #[arg(long, short = 'A')]
    pub account: Option<String>,
    /// Working directory (default: the current one).
    #[arg(long, short = 'D')]
    pub chdir: Option<String>,
    /// The command each replica runs (`/bin/sh`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Builds the request of `create` for user `uid`/`gid` named `user` in `cwd` with `env`.
pub fn create_request(a: &CreateArgs, uid: u32, gid: u32, user: &str, cwd: &str, env: Vec<(String, String)>) -> ServiceCreate {
    ServiceCreate {
        name: a.name.clone(),
        command: a.command.join(" "),
        gpus_per_replica: a.gpus,
        gpu_type: a.gpu_type.clone(),
        topology: a.topology.clone(),
        cpus_per_replica: a.cpus,
        mem_per_replica_mib: a.mem,
        min_replicas: a.min,
        max_replicas: a.max.unwrap_or(a.min).max(a.min),
        desired_replicas: a.replicas.unwrap_or(a.min),
        priority: a.priority,
        partition: a.partition.clone(),
        account: a.account.clone(),
        work_dir: a.chdir.clone().unwrap_or_else(|| cwd.to_string()),
        environment: env,
        uid,
        gid,
        user: user.to_string(),
    }
}

fn null(s: &str) -> &str {
    if s.is_empty() {
        "(null)"
    } else {
        s
    }
}

/// One service as `scontrol show` prints a record: lines of `Key=Value` pairs indented by
/// three spaces after the first, a blank line after (`one_liner`: one line, pairs joined by
/// spaces).
pub fn show_record(s: &ServiceInfo, one_liner: bool) -> String {
    let lines = [
        format!("ServiceId={} Name={} UserId={} Account={} Partition={}", s.id, s.name, s.user, null(&s.account), s.partition),
        format!(
            "Replicas={} Pending={} MinReplicas={} MaxReplicas={} DesiredReplicas={} Priority={}",
            s.running_replicas, s.pending_replicas, s.min_replicas, s.max_replicas, s.desired_replicas, s.priority
        ),
        format!(
            "ReplicaGPUs={} GpuType={} Topology={} ReplicaCPUs={} ReplicaMem={}M",
            s.gpus_per_replica,
            s.gpu_type.as_deref().unwrap_or("(null)"),
            s.topology,
            s.cpus_per_replica,
            s.mem_per_replica_mib
        ),
        format!("CreateTime={}", fmt_time(s.create_time)),
        format!(
            "ReplicaJobIds={} NodeList={}",
            if s.replica_ids.is_empty() {
                "(null)".to_string()
            } else {
                s.replica_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            },
            null(&s.nodes)
        ),
        format!("Command={}", s.command),
    ];
    if one_liner {
        format!("{}\n", lines.join(" "))
    } else {
        let mut out = String::new();
        for (i, l) in lines.iter().enumerate() {
            out.push_str(if i == 0 { "" } else { "   " });
            out.push_str(l);
            out.push('\n');
        }
        out.push('\n');
        out
    }
}

/// Columns of `sdeploy list`: title, width, right-aligned (squeue's `%.Nx` style).
const LIST_COLUMNS: [(&str, usize, bool); 10] = [
    ("SERVICE_ID", 10, true),
    ("PARTITION", 9, true),
    ("NAME", 12, true),
    ("USER", 8, true),
    ("REPLICAS", 8, true),
    ("MIN", 4, true),
    ("MAX", 4, true),
    ("GPUS", 5, true),
    ("TOPOLOGY", 8, true),
    ("NODELIST", 0, false),
];

/// `sdeploy list`'s table: a header (unless `noheader`) and one line per service;
/// `REPLICAS` is running/desired, `GPUS` per replica; values longer than a column are cut,
/// as squeue cuts them.
pub fn list_table(services: &[ServiceInfo], noheader: bool) -> String {
    let row = |vals: [String; 10]| -> String {
        let cells: Vec<String> = LIST_COLUMNS
            .iter()
            .zip(vals.iter())
            .map(|((_, w, r), v)| common::field(v, *w, *r))
            .collect();
        format!("{}\n", cells.join(" "))
    };
    let mut out = String::new();
    if !noheader {
        out.push_str(&row(LIST_COLUMNS.map(|(t, _, _)| t.to_string())));
    }
    for s in services {
        out.push_str(&row([
            s.id.to_string(),
            s.partition.clone(),
            s.name.clone(),
            s.user.clone(),
            format!("{}/{}", s.running_replicas, s.desired_replicas.clamp(s.min_replicas, s.max_replicas.max(s.min_replicas))),
            s.min_replicas.to_string(),
            s.max_replicas.to_string(),
            s.gpus_per_replica.to_string(),
            s.topology.clone(),
            if s.nodes.is_empty() { "(null)".to_string() } else { s.nodes.clone() },
        ]));
    }
    out
}

fn error_text(e: &flotilla_proto::SlurmError) -> String {
    e.messages.first().cloned().unwrap_or_else(|| e.text.clone())
}

/// Runs `sdeploy`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let text = e.render().to_string();
            if e.use_stderr() {
                io.err(&text);
                return 1;
            }
            io.out(&text);
            return 0;
        }
    };
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("sdeploy: error: {}\n", error_text(&e.slurm())));
            return 1;
        }
    };
    let req = match &cli.verb {
        Verb::Create(a) => {
            let uid = common::my_uid();
            let cwd = std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_else(|_| "/".into());
            let env: Vec<(String, String)> = std::env::vars().collect();
            Request::ServiceCreate(Box::new(create_request(a, uid, common::my_gid(), &common::user_name(uid), &cwd, env)))
        }
        Verb::Scale { id, replicas } => Request::ServiceScale { id: *id, replicas: *replicas },
        Verb::Delete { id } => Request::ServiceDelete { id: *id },
        Verb::Show { id, .. } => Request::QueryServices { ids: id.iter().copied().collect() },
        Verb::List { .. } => Request::QueryServices { ids: Vec::new() },
    };
    match (ctl.call(req), &cli.verb) {
        (Err(e), _) => {
            io.err(&format!("sdeploy: error: {}\n", error_text(&e.slurm())));
            1
        }
        (Ok(Response::ServiceCreated { id }), _) => {
            io.out(&format!("Created service {id}\n"));
            0
        }
        (Ok(Response::Services(s)), Verb::Show { id, one_liner }) => {
            if s.is_empty() {
                if id.is_some() {
                    io.err("sdeploy: error: Invalid service id specified\n");
                    return 1;
                }
                io.out("No services in the system\n");
                return 0;
            }
            for svc in &s {
                io.out(&show_record(svc, *one_liner));
            }
            0
        }
        (Ok(Response::Services(s)), Verb::List { noheader }) => {
            io.out(&list_table(&s, *noheader));
            0
        }
        (Ok(_), _) => 0,
    }
}
