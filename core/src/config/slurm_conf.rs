//! `slurm.conf` from text to [`ClusterConfig`] (nodes and partitions; pods come from
//! `topology.conf`, see [`super::topology_conf`]).
//!
//! Slurm's rules kept here (`src/common/read_config.c`):
//! - `NodeName=DEFAULT` / `PartitionName=DEFAULT` lines set defaults for the lines after them;
//!   a later `DEFAULT` line adds to (and overrides keys of) the earlier one.
//! - `NodeName` is a hostlist; `NodeAddr`, `NodeHostname` and `Port` may be hostlists too and
//!   then give one value per node in order (their count must equal the node count, or be 1).
//!   `NodeName=ALL` is an error; `NodeAddr`/`NodeHostname` are not allowed on `DEFAULT`.
//! - `Nodes=ALL` in a partition is every node of the file (wherever the partition line is).
//! - Global keys may repeat; the last value wins. `SlurmctldHost` may repeat; the first is
//!   the primary controller.
//!
//! Choices where Slurm is lenient or silent:
//! - a partition naming an undefined node, a duplicate node or partition name, and
//!   `DefaultTime` above `MaxTime` are errors;
//! - several `Default=YES` partitions: the last one is the default, with a warning;
//! - a `Gres=` name missing from `GresTypes` is a warning (Slurm refuses the file);
//! - a node with GPUs of several types (`gpu:a100:4,gpu:h100:4`) gets `gpu_type = None` and a
//!   warning (Flotilla schedules one GPU model per node).

use super::keys::{self, KeyDefault, KeyDoc, KeyLookup, Scope, ValueType};
use super::lex::{self, IncludeResolver, Pair};
use super::{
    ClusterConfig, ConfNodeState, ConfigError, Location, NodeConfig, PartitionConfig, TopologyKind,
};
use crate::hostlist;

/// A value after its type check (see [`ValueType`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Val {
    Str(String),
    Bool(bool),
    Int(u64),
    /// `None` is `UNLIMITED` (for [`ValueType::Limit`] and [`ValueType::Time`], minutes).
    Opt(Option<u64>),
}

impl Val {
    fn str(&self) -> &str {
        match self {
            Val::Str(s) => s,
            _ => "",
        }
    }
    fn int(&self) -> u64 {
        match self {
            Val::Int(n) => *n,
            _ => 0,
        }
    }
    fn flag(&self) -> bool {
        matches!(self, Val::Bool(true))
    }
    fn opt(&self) -> Option<u64> {
        match self {
            Val::Opt(o) => *o,
            Val::Int(n) => Some(*n),
            _ => None,
        }
    }
}

fn invalid(k: &KeyDoc, value: &str, at: &Location, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        at: at.clone(),
        key: k.name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn is_unlimited(v: &str) -> bool {
    v.eq_ignore_ascii_case("UNLIMITED") || v.eq_ignore_ascii_case("INFINITE")
}

fn parse_int(v: &str, max: u64) -> Result<u64, String> {
    let n: u64 = v.parse().map_err(|_| "not a number".to_string())?;
    if n > max {
        return Err(format!("larger than {max}"));
    }
    Ok(n)
}

/// Checks `value` against `k`'s type.
pub(crate) fn check_value(k: &KeyDoc, value: &str, at: &Location) -> Result<Val, ConfigError> {
    let bad = |reason: String| invalid(k, value, at, reason);
    Ok(match k.ty {
        ValueType::String | ValueType::List | ValueType::Hostlist => Val::Str(value.to_string()),
        ValueType::Host => {
            split_host(value).ok_or_else(|| bad("expected host or host(addr)".into()))?;
            Val::Str(value.to_string())
        }
        ValueType::Gres => {
            parse_gres(value).map_err(bad)?;
            Val::Str(value.to_string())
        }
        ValueType::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" | "true" | "1" | "up" => Val::Bool(true),
            "no" | "false" | "0" | "down" => Val::Bool(false),
            _ => return Err(bad("expected YES or NO".into())),
        },
        ValueType::U16 => Val::Int(parse_int(value, u16::MAX.into()).map_err(bad)?),
        ValueType::U32 => Val::Int(parse_int(value, u32::MAX.into()).map_err(bad)?),
        ValueType::U64 => Val::Int(parse_int(value, u64::MAX).map_err(bad)?),
        ValueType::Limit => {
            if is_unlimited(value) {
                Val::Opt(None)
            } else {
                Val::Opt(Some(parse_int(value, u32::MAX.into()).map_err(bad)?))
            }
        }
        ValueType::Time => Val::Opt(parse_conf_minutes(value).map_err(bad)?),
        ValueType::PortRange => {
            let first = value.split_once('-').map_or(value, |(a, _)| a);
            let port = parse_int(first, u16::MAX.into()).map_err(bad)?;
            Val::Int(port)
        }
        ValueType::Enum(words) => {
            let w = words
                .iter()
                .find(|w| w.eq_ignore_ascii_case(value))
                .ok_or_else(|| bad(format!("expected one of {}", words.join(", "))))?;
            Val::Str((*w).to_string())
        }
    })
}

/// A time limit of slurm.conf in minutes; `None` is `UNLIMITED`/`INFINITE`/`-1`.
/// Forms as Slurm's `time_str2mins` ([`crate::time::time_str2mins`]): `M`, `M:S`, `H:M:S`,
/// `D-H`, `D-H:M`, `D-H:M:S`; seconds round up to the next minute. Negative values (which
/// `sbatch -t` wraps around) are refused in a config file.
pub(crate) fn parse_conf_minutes(s: &str) -> Result<Option<u64>, String> {
    let s = s.trim();
    if is_unlimited(s) || s == "-1" {
        return Ok(None);
    }
    const EXPECTED: &str = "expected minutes, [D-]HH:MM:SS or UNLIMITED";
    match crate::time::time_str2mins(s) {
        Ok(crate::time::SlurmDuration::Infinite) => Ok(None),
        Ok(crate::time::SlurmDuration::Finite(m)) if m >= 0 && !s.starts_with('-') => Ok(Some(m as u64)),
        _ => Err(EXPECTED.to_string()),
    }
}

/// `host` or `host(addr)` → `(host, addr)`.
pub(crate) fn split_host(v: &str) -> Option<(String, String)> {
    match v.split_once('(') {
        None if !v.contains(')') => Some((v.to_string(), v.to_string())),
        None => None,
        Some((host, rest)) => {
            let addr = rest.strip_suffix(')')?;
            if host.is_empty() || addr.is_empty() || addr.contains(['(', ')']) {
                return None;
            }
            Some((host.to_string(), addr.to_string()))
        }
    }
}

/// One GRES of a node's `Gres=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GresItem {
    pub name: String,
    pub ty: Option<String>,
    pub count: u64,
}

/// Parses `Gres=`: comma-separated `name[:type][:count]`, with an optional socket affinity
/// suffix `(S:0-1)` and an optional `no_consume` flag; the count takes `K`/`M`/`G`/`T`/`P`
/// suffixes (powers of 1024) and defaults to 1. `(null)` and empty mean none.
pub(crate) fn parse_gres(v: &str) -> Result<Vec<GresItem>, String> {
    let mut items = Vec::new();
    if v.is_empty() || v.eq_ignore_ascii_case("(null)") {
        return Ok(items);
    }
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut raw_items = Vec::new();
    for c in v.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                raw_items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    raw_items.push(cur);
    for raw in raw_items {
        let spec = match raw.find('(') {
            Some(i) if raw.ends_with(')') => &raw[..i],
            Some(_) => return Err(format!("bad GRES `{raw}'")),
            None if raw.contains(')') => return Err(format!("bad GRES `{raw}'")),
            None => raw.as_str(),
        };
        let parts: Vec<&str> = spec
            .split(':')
            .filter(|p| !p.eq_ignore_ascii_case("no_consume"))
            .collect();
        let name = parts[0];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("bad GRES name in `{raw}'"));
        }
        let (ty, count) = match &parts[1..] {
            [] => (None, 1),
            [x] => match parse_count(x) {
                Some(n) => (None, n),
                None => (Some(*x), 1),
            },
            [t, c] => (
                Some(*t),
                parse_count(c).ok_or_else(|| format!("bad GRES count in `{raw}'"))?,
            ),
            _ => return Err(format!("bad GRES `{raw}'")),
        };
        if ty.is_some_and(str::is_empty) {
            return Err(format!("empty GRES type in `{raw}'"));
        }
        items.push(GresItem {
            name: name.to_string(),
            ty: ty.map(str::to_string),
            count,
        });
    }
    Ok(items)
}

fn parse_count(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()?.to_ascii_uppercase() {
        b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        b'T' => (&s[..s.len() - 1], 1 << 40),
        b'P' => (&s[..s.len() - 1], 1 << 50),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// One typed `key=value` of a node or partition line.
#[derive(Debug, Clone)]
struct Setting {
    key: &'static KeyDoc,
    raw: String,
    val: Val,
    at: Location,
}

#[derive(Debug)]
struct Line {
    name: String,
    at: Location,
    settings: Vec<Setting>,
}

fn merge(into: &mut Vec<Setting>, from: &[Setting]) {
    for s in from {
        into.retain(|t| t.key.name != s.key.name);
        into.push(s.clone());
    }
}

fn table_defaults(scope: Scope) -> Vec<Setting> {
    let at = Location::new("(default)", 0);
    keys::KEYS
        .iter()
        .filter(|k| k.scope == scope)
        .filter_map(|k| match k.default {
            KeyDefault::Value(v) => check_value(k, v, &at).ok().map(|val| Setting {
                key: k,
                raw: v.to_string(),
                val,
                at: at.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// Parses the text of `slurm.conf` (named `source` in errors and warnings).
///
/// `include` is asked for the text of each `Include`d file (see [`IncludeResolver`]); pass
/// [`super::no_includes`] when there are none. Pods are not filled in here: see
/// [`super::parse_cluster`].
///
/// Errors: [`ConfigError`] with file and line, for a syntax error, a key nobody knows, a bad
/// value, a bad hostlist, a failed include, or an inconsistent node or partition.
pub fn parse_slurm_conf(
    text: &str,
    source: &str,
    include: &mut IncludeResolver<'_>,
) -> Result<ClusterConfig, ConfigError> {
    let records = lex::records(text, source, include)?;
    let mut p = Parser::new();
    for rec in records {
        p.record(rec)?;
    }
    p.finish()
}

struct Parser {
    cfg: ClusterConfig,
    warned: Vec<(Scope, &'static str)>,
    ctl_hosts: Vec<(String, String)>,
    control_machine: Option<String>,
    control_addr: Option<String>,
    gres_types: Option<Vec<String>>,
    node_defaults: Vec<Setting>,
    part_defaults: Vec<Setting>,
    node_lines: Vec<Line>,
    part_lines: Vec<Line>,
    /// Location of each built partition's line (same index as `cfg.partitions`).
    default_at: Vec<Location>,
    /// Names of the nodes built so far (for duplicate and partition checks).
    node_names: std::collections::HashSet<String>,
    /// Where `FirstJobId` or `MaxJobId` was last set (for their check at the end).
    job_id_at: Option<Location>,
}

impl Parser {
    fn new() -> Parser {
        let mut p = Parser {
            cfg: ClusterConfig::default(),
            warned: Vec::new(),
            ctl_hosts: Vec::new(),
            control_machine: None,
            control_addr: None,
            gres_types: None,
            node_defaults: table_defaults(Scope::Node),
            part_defaults: table_defaults(Scope::Partition),
            node_lines: Vec::new(),
            part_lines: Vec::new(),
            default_at: Vec::new(),
            node_names: std::collections::HashSet::new(),
            job_id_at: None,
        };
        for s in table_defaults(Scope::Global) {
            p.apply_global(s.key, &s.val, &s.at);
        }
        p
    }

    fn warn_once(&mut self, scope: Scope, name: &'static str, at: &Location, what: &str) {
        if !self.warned.contains(&(scope, name)) {
            self.warned.push((scope, name));
            self.cfg.warnings.push(format!("{at}: {what}"));
        }
    }

    fn record(&mut self, rec: lex::Record) -> Result<(), ConfigError> {
        // A key other than a line key takes the whole line: a second pair is Slurm's parse
        // error (`_parse_next_key` reads one pair; `s_p_parse_file` quotes the rest).
        let second = (rec.pairs.len() > 1).then(|| ConfigError::Leftover {
            at: rec.at.clone(),
            text: rec.leftover(1),
        });
        let text = rec.text.clone();
        let at = rec.at.clone();
        let mut iter = rec.pairs.into_iter();
        if let Some(pair) = iter.next() {
            match keys::lookup(Scope::Global, &pair.key) {
                KeyLookup::Unknown => {
                    let section = if pair.key.eq_ignore_ascii_case("NodeName") {
                        Some(Scope::Node)
                    } else if pair.key.eq_ignore_ascii_case("PartitionName") {
                        Some(Scope::Partition)
                    } else {
                        None
                    };
                    match section {
                        Some(scope) => return self.section(scope, pair, iter.collect(), (&text, &at)),
                        None => {
                            return Err(ConfigError::UnknownKey {
                                at: pair.at,
                                key: pair.key,
                            });
                        }
                    }
                }
                KeyLookup::SlurmOnly(name) => {
                    let what = if matches!(name, "DownNodes" | "FrontendName" | "NodeSet") {
                        format!("{name} lines are not used by Flotilla yet; ignored")
                    } else {
                        format!("{name} is a Slurm key Flotilla does not use yet; ignored")
                    };
                    self.warn_once(Scope::Global, name, &pair.at, &what);
                    self.raw(name, &pair.value);
                    if matches!(name, "DownNodes" | "FrontendName" | "NodeSet") {
                        return Ok(());
                    }
                    if let Some(e) = second {
                        return Err(e);
                    }
                }
                KeyLookup::Used(k) => {
                    let val = check_value(k, &pair.value, &pair.at)?;
                    if k.name == "SlurmctldHost" {
                        self.cfg.raw.push((k.name.to_string(), pair.value.clone()));
                    } else {
                        self.raw(k.name, &pair.value);
                    }
                    self.apply_global(k, &val, &pair.at);
                    if let Some(e) = second {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    fn raw(&mut self, key: &str, value: &str) {
        if let Some(slot) = self.cfg.raw.iter_mut().find(|(k, _)| k == key) {
            slot.1 = value.to_string();
        } else {
            self.cfg.raw.push((key.to_string(), value.to_string()));
        }
    }

    /// Sets the field of global key `k`; returns false for a key this function does not know
    /// (a test checks every global key of the table is handled).
    fn apply_global(&mut self, k: &KeyDoc, v: &Val, at: &Location) -> bool {
        let c = &mut self.cfg;
        match k.name {
            "ClusterName" => c.cluster_name = v.str().to_string(),
            "SlurmctldHost" => {
                if let Some(hp) = split_host(v.str()) {
                    self.ctl_hosts.push(hp);
                }
            }
            "ControlMachine" => self.control_machine = Some(v.str().to_string()),
            "ControlAddr" => self.control_addr = Some(v.str().to_string()),
            "SlurmctldPort" => c.slurmctld_port = u16::try_from(v.int()).unwrap_or(u16::MAX),
            "SlurmdPort" => c.slurmd_port = u16::try_from(v.int()).unwrap_or(u16::MAX),
            "SlurmUser" => c.slurm_user = v.str().to_string(),
            "StateSaveLocation" => c.state_save_location = v.str().to_string(),
            "SlurmctldTimeout" => c.slurmctld_timeout_s = v.int(),
            "SlurmdTimeout" => c.slurmd_timeout_s = Some(v.int()),
            "StateStorageType" => c.state_storage.storage_type = v.str().to_ascii_lowercase(),
            "StateStorageHost" => c.state_storage.host = v.str().to_string(),
            "StateStoragePort" => c.state_storage.port = u16::try_from(v.int()).unwrap_or(u16::MAX),
            "StateStorageUser" => c.state_storage.user = Some(v.str().to_string()),
            "StateStorageLoc" => c.state_storage.loc = v.str().to_string(),
            "StateStoragePassFile" => c.state_storage.pass_file = Some(v.str().to_string()),
            "SlurmdSpoolDir" => c.slurmd_spool_dir = v.str().to_string(),
            "DefMemPerCPU" => c.def_mem_per_cpu_mib = Some(v.int()),
            "KillWait" => c.kill_wait_s = v.int(),
            "MinJobAge" => c.min_job_age_s = v.int(),
            "MaxJobCount" => c.max_job_count = v.int(),
            "MaxArraySize" => c.max_array_size = v.int(),
            "FirstJobId" => {
                c.first_job_id = v.int();
                self.job_id_at = Some(at.clone());
            }
            "MaxJobId" => {
                c.max_job_id = v.int();
                self.job_id_at = Some(at.clone());
            }
            "SelectType" => c.select_type = v.str().to_string(),
            "PriorityType" => c.priority_type = v.str().to_string(),
            "PreemptType" => c.preempt_type = v.str().to_string(),
            "PriorityDecayHalfLife" => c.priority.decay_half_life_s = v.opt().unwrap_or(0).saturating_mul(60),
            "PriorityCalcPeriod" => c.priority.calc_period_s = v.opt().unwrap_or(0).saturating_mul(60),
            "PriorityUsageResetPeriod" => {
                c.priority.usage_reset_period = crate::fairshare::ResetPeriod::parse(v.str()).unwrap_or_default()
            }
            "PriorityMaxAge" => c.priority.max_age_s = v.opt().unwrap_or(0).saturating_mul(60),
            "PriorityFavorSmall" => c.priority.favor_small = v.flag(),
            "PriorityWeightAge" => c.priority.weight_age = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "PriorityWeightAssoc" => c.priority.weight_assoc = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "PriorityWeightFairshare" => c.priority.weight_fairshare = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "PriorityWeightJobSize" => c.priority.weight_job_size = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "PriorityWeightPartition" => c.priority.weight_partition = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "PriorityWeightQOS" => c.priority.weight_qos = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "SchedulerType" => c.scheduler_type = v.str().to_string(),
            "TopologyPlugin" => c.topology_plugin = v.str().to_string(),
            "GresTypes" => {
                self.gres_types = Some(
                    v.str()
                        .split(',')
                        .map(|s| s.trim().to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .collect(),
                );
            }
            "AlertProgram" => c.alert_program = Some(v.str().to_string()),
            "PreemptExemptTime" => c.preempt_exempt_time = Some(v.str().to_string()),
            "ElasticGrowInterval" => c.elastic_grow_interval_s = Some(v.int()),
            "ElasticRdzvPort" => c.elastic_rdzv_port = Some(u16::try_from(v.int()).unwrap_or(u16::MAX)),
            "ElasticRdzvPortCount" => c.elastic_rdzv_port_count = Some(u16::try_from(v.int()).unwrap_or(u16::MAX)),
            "DisableRootJobs" => c.disable_root_jobs = v.flag(),
            "PrivateData" => c.private_data = lower_list(v.str()),
            "AuthAltTypes" => c.auth_alt_types = lower_list(v.str()),
            "AuthAltParameters" => c.auth_alt_parameters = v.str().to_string(),
            "MetricsType" => c.metrics_type = Some(v.str().to_ascii_lowercase()),
            "MetricsAuthUsers" => {
                c.metrics_auth_users = Some(v.str().split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
            }
            "MetricsParameters" => c.metrics_parameters = lower_list(v.str()),
            "AccountingStorageEnforce" => c.accounting_storage_enforce = lower_list(v.str()),
            // Read from `raw` by the controller (flotilla_slurmctld::assoc::slurmdbd::source).
            "AccountingStorageType" => {}
            "ServiceAccounts" => c.service_accounts = names_or_all(v.str()),
            "ServiceMaxPriority" => c.service_max_priority = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "ServiceMaxReplicas" => c.service_max_replicas = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "ServiceMaxGPUs" => c.service_max_gpus = u32::try_from(v.int()).unwrap_or(u32::MAX),
            "SchedulerParameters" => c.scheduler_parameters = Some(v.str().to_string()),
            "DependencyParameters" => c.dependency_parameters = Some(v.str().to_string()),
            "RequeueExit" => c.requeue_exit = Some(v.str().to_string()),
            "RequeueExitHold" => c.requeue_exit_hold = Some(v.str().to_string()),
            // Read from `raw` by the node daemons (flotilla_slurmd::usage::gather_frequency).
            "JobAcctGatherFrequency" => {}
            _ => return false,
        }
        true
    }

    /// A `NodeName=` or `PartitionName=` line: `head` that pair, `rest` the others, `line`
    /// the logical line's text and start (for the leftover Slurm quotes after an error).
    fn section(&mut self, scope: Scope, head: Pair, rest: Vec<Pair>, line: (&str, &Location)) -> Result<(), ConfigError> {
        let in_line = |e: ConfigError, from: usize| ConfigError::InLine {
            error: Box::new(e),
            at: line.1.clone(),
            leftover: line.0[from..].to_string(),
        };
        let mut settings = Vec::new();
        for pair in rest {
            match keys::lookup(scope, &pair.key) {
                KeyLookup::Unknown => {
                    let from = pair.from;
                    return Err(in_line(
                        ConfigError::UnknownKey {
                            at: pair.at,
                            key: pair.key,
                        },
                        from,
                    ));
                }
                KeyLookup::SlurmOnly(name) => {
                    let what =
                        format!(
                        "{name} is a Slurm key Flotilla does not use yet; ignored (on {} lines)",
                        if scope == Scope::Node { "NodeName" } else { "PartitionName" }
                    );
                    self.warn_once(scope, name, &pair.at, &what);
                }
                KeyLookup::Used(k) if k.name.ends_with("Name") => {
                    return Err(ConfigError::Invalid {
                        at: pair.at,
                        msg: format!("{} twice on one line", k.name),
                    });
                }
                KeyLookup::Used(k) => {
                    let val = check_value(k, &pair.value, &pair.at).map_err(|e| in_line(e, pair.from))?;
                    settings.push(Setting {
                        key: k,
                        raw: pair.value,
                        val,
                        at: pair.at,
                    });
                }
            }
        }
        let is_default = head.value.eq_ignore_ascii_case("DEFAULT");
        if scope == Scope::Node {
            if head.value.eq_ignore_ascii_case("ALL") {
                return Err(ConfigError::Invalid {
                    at: head.at,
                    msg: "`ALL' is a reserved word disallowed for use with NodeName".to_string(),
                });
            }
            if is_default {
                if let Some(s) = settings
                    .iter()
                    .find(|s| matches!(s.key.name, "NodeAddr" | "NodeHostname"))
                {
                    return Err(ConfigError::Invalid {
                        at: s.at.clone(),
                        msg: format!("{} not allowed with NodeName=DEFAULT", s.key.name),
                    });
                }
                merge(&mut self.node_defaults, &settings);
                return Ok(());
            }
            let mut all = self.node_defaults.clone();
            merge(&mut all, &settings);
            self.node_lines.push(Line {
                name: head.value,
                at: head.at,
                settings: all,
            });
        } else {
            if is_default {
                merge(&mut self.part_defaults, &settings);
                return Ok(());
            }
            if head.value.is_empty() {
                return Err(ConfigError::Invalid {
                    at: head.at,
                    msg: "empty PartitionName".to_string(),
                });
            }
            let mut all = self.part_defaults.clone();
            merge(&mut all, &settings);
            self.part_lines.push(Line {
                name: head.value,
                at: head.at,
                settings: all,
            });
        }
        Ok(())
    }

    /// `MaxJobId` and `FirstJobId` as Slurm 22.05 checks them (`read_config.c`
    /// `_validate_and_set_defaults`): `MaxJobId` defaults to 0x03ff0000 and above
    /// `MAX_JOB_ID` (0x03ffffff) is reset to it (a warning); `FirstJobId` above it is an
    /// error (`FirstJobId > MaxJobId`); `MaxJobCount` is lowered to the number of ids.
    fn job_id_space(&mut self) -> Result<(), ConfigError> {
        let c = &mut self.cfg;
        if c.max_job_id == 0 {
            c.max_job_id = super::DEFAULT_MAX_JOB_ID;
        }
        let at = self.job_id_at.clone().unwrap_or(Location { file: "slurm.conf".into(), line: 0 });
        if c.max_job_id > super::MAX_JOB_ID {
            c.warnings.push(format!("{at}: MaxJobId can not exceed MAX_JOB_ID, resetting value"));
            c.max_job_id = super::MAX_JOB_ID;
        }
        if c.first_job_id > c.max_job_id {
            return Err(ConfigError::Invalid { at, msg: "FirstJobId > MaxJobId".into() });
        }
        let ids = c.max_job_id - c.first_job_id.max(1) + 1;
        if c.max_job_count > ids {
            c.max_job_count = ids;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<ClusterConfig, ConfigError> {
        if let Some((host, addr)) = self.ctl_hosts.first().cloned() {
            self.cfg.control_host = host;
            self.cfg.control_addr = addr;
            self.cfg.backup_controllers = self.ctl_hosts[1..].to_vec();
        } else if let Some(host) = self.control_machine.take() {
            self.cfg.control_addr = self.control_addr.take().unwrap_or_else(|| host.clone());
            self.cfg.control_host = host;
        }
        self.job_id_space()?;
        for line in std::mem::take(&mut self.node_lines) {
            self.build_nodes(line)?;
        }
        for line in std::mem::take(&mut self.part_lines) {
            self.build_partition(line)?;
        }
        let defaults: Vec<usize> = (0..self.cfg.partitions.len())
            .filter(|i| self.cfg.partitions[*i].default)
            .collect();
        if let Some((last, earlier)) = defaults.split_last() {
            if !earlier.is_empty() {
                let names: Vec<&str> = defaults
                    .iter()
                    .map(|i| self.cfg.partitions[*i].name.as_str())
                    .collect();
                let msg = format!(
                    "{}: several partitions have Default=YES ({}); the last, {}, is the default",
                    self.default_at[*last],
                    names.join(", "),
                    self.cfg.partitions[*last].name
                );
                self.cfg.warnings.push(msg);
                for i in earlier {
                    self.cfg.partitions[*i].default = false;
                }
            }
        }
        Ok(self.cfg)
    }

    fn expand(expr: &str, key: &str, at: &Location) -> Result<Vec<String>, ConfigError> {
        let names = hostlist::expand(expr).map_err(|source| ConfigError::Hostlist {
            at: at.clone(),
            key: key.to_string(),
            source,
        })?;
        if names.iter().any(String::is_empty) || names.is_empty() {
            return Err(ConfigError::Invalid {
                at: at.clone(),
                msg: format!("{key}=`{expr}' names no host"),
            });
        }
        Ok(names)
    }

    /// A node line's `NodeHostname=`, `NodeAddr=` or `Port=` setting `s` for its `n` nodes:
    /// (0, 1 or 2 for the key, the values with where they were written). One value for all
    /// nodes or one per node; a `Port=` range like `6818-6821` is a hostlist range.
    fn per_node_values(s: &Setting, n: usize) -> Result<(usize, (Vec<String>, Location)), ConfigError> {
        let idx = match s.key.name {
            "NodeHostname" => 0,
            "NodeAddr" => 1,
            _ => 2,
        };
        let expr = if s.key.name == "Port" && !s.raw.contains('[') && s.raw.contains('-') {
            format!("[{}]", s.raw)
        } else {
            s.raw.clone()
        };
        let list = Self::expand(&expr, s.key.name, &s.at)?;
        if list.len() != 1 && list.len() != n {
            return Err(ConfigError::Invalid {
                at: s.at.clone(),
                msg: format!(
                    "{} count ({}) must equal that of NodeName ({n}) or be 1",
                    s.key.name,
                    list.len()
                ),
            });
        }
        Ok((idx, (list, s.at.clone())))
    }

    /// A node line's GPUs from its `Gres=` (text, where written): the count of its `gpu`
    /// items and their type (none when they differ, with a warning). GRES not in
    /// `GresTypes` warn once (Slurm refuses them).
    fn node_gpus(&mut self, gres: &(String, Location)) -> Result<(u32, Option<String>), ConfigError> {
        let items = parse_gres(&gres.0).map_err(|reason| ConfigError::InvalidValue {
            at: gres.1.clone(),
            key: "Gres".into(),
            value: gres.0.clone(),
            reason,
        })?;
        for item in &items {
            let known = self
                .gres_types
                .as_ref()
                .is_some_and(|t| t.contains(&item.name.to_ascii_lowercase()));
            if !known {
                let msg = format!(
                    "{}: GRES `{}' is not in GresTypes (Slurm refuses this)",
                    gres.1, item.name
                );
                if !self.cfg.warnings.contains(&msg) {
                    self.cfg.warnings.push(msg);
                }
            }
        }
        let gpu_items: Vec<&GresItem> = items
            .iter()
            .filter(|i| i.name.eq_ignore_ascii_case("gpu"))
            .collect();
        let gpus: u64 = gpu_items.iter().map(|i| i.count).sum();
        let gpus = u32::try_from(gpus).map_err(|_| ConfigError::InvalidValue {
            at: gres.1.clone(),
            key: "Gres".into(),
            value: gres.0.clone(),
            reason: "too many GPUs".into(),
        })?;
        let mut gpu_type = gpu_items.first().and_then(|i| i.ty.clone());
        if gpu_items.iter().any(|i| i.ty != gpu_type) {
            self.cfg.warnings.push(format!(
                "{}: GPUs of several types on one node ({}); Flotilla treats them as untyped",
                gres.1, gres.0
            ));
            gpu_type = None;
        }
        Ok((gpus, gpu_type))
    }

    fn build_nodes(&mut self, line: Line) -> Result<(), ConfigError> {
        let names = Self::expand(&line.name, "NodeName", &line.at)?;
        let n = names.len();
        let mut boards = 1;
        let mut sockets = 1;
        let mut cores = 1;
        let mut threads = 1;
        let mut cpus = None;
        let mut mem = 1;
        let mut tmp_disk = 0;
        let mut gres = (String::new(), line.at.clone());
        let mut weight = 1;
        let mut features = Vec::new();
        let mut state = ConfNodeState::Unknown;
        let mut per_node: [Option<(Vec<String>, Location)>; 3] = [None, None, None];
        for s in &line.settings {
            let small = || u32::try_from(s.val.int()).unwrap_or(u32::MAX);
            match s.key.name {
                "Boards" => boards = small(),
                "Sockets" => sockets = small(),
                "CoresPerSocket" => cores = small(),
                "ThreadsPerCore" => threads = small(),
                "CPUs" => cpus = Some(small()),
                "RealMemory" => mem = s.val.int(),
                "TmpDisk" => tmp_disk = s.val.int(),
                "Weight" => weight = small(),
                "Gres" => gres = (s.raw.clone(), s.at.clone()),
                "Features" => {
                    features = s
                        .raw
                        .split(',')
                        .map(str::trim)
                        .filter(|f| !f.is_empty())
                        .map(str::to_string)
                        .collect();
                }
                "State" => state = node_state(s.val.str()),
                "NodeHostname" | "NodeAddr" | "Port" => {
                    let (idx, list) = Self::per_node_values(s, n)?;
                    per_node[idx] = Some(list);
                }
                _ => {}
            }
        }
        let (gpus, gpu_type) = self.node_gpus(&gres)?;
        let cpus = cpus.unwrap_or_else(|| sockets.saturating_mul(cores).saturating_mul(threads));
        let pick = |idx: usize, i: usize| -> Option<String> {
            per_node[idx]
                .as_ref()
                .map(|(l, _)| l[if l.len() == 1 { 0 } else { i }].clone())
        };
        for (i, name) in names.iter().enumerate() {
            if !self.node_names.insert(name.clone()) {
                return Err(ConfigError::Invalid {
                    at: line.at.clone(),
                    msg: format!("duplicate NodeName `{name}'"),
                });
            }
            let hostname = pick(0, i).unwrap_or_else(|| name.clone());
            let addr = pick(1, i).unwrap_or_else(|| hostname.clone());
            let port = match pick(2, i) {
                None => self.cfg.slurmd_port,
                Some(p) => {
                    let at = per_node[2].as_ref().map_or(&line.at, |x| &x.1);
                    p.parse::<u16>().map_err(|_| ConfigError::InvalidValue {
                        at: at.clone(),
                        key: "Port".into(),
                        value: p.clone(),
                        reason: "not a port number".into(),
                    })?
                }
            };
            self.cfg.nodes.push(NodeConfig {
                name: name.clone(),
                addr,
                hostname,
                port,
                boards,
                sockets,
                cores_per_socket: cores,
                threads_per_core: threads,
                cpus,
                real_memory_mib: mem,
                tmp_disk_mib: tmp_disk,
                gpus,
                gpu_type: gpu_type.clone(),
                gpu_files: Vec::new(),
                gpu_cores: None,
                gpu_links: false,
                gres: gres.0.clone(),
                weight,
                features: features.clone(),
                state,
            });
        }
        Ok(())
    }

    fn build_partition(&mut self, line: Line) -> Result<(), ConfigError> {
        if self.cfg.partitions.iter().any(|p| p.name == line.name) {
            return Err(ConfigError::Invalid {
                at: line.at,
                msg: format!("duplicate PartitionName `{}'", line.name),
            });
        }
        let mut p = PartitionConfig {
            name: line.name.clone(),
            nodes: Vec::new(),
            nodes_expr: String::new(),
            default: false,
            max_time_min: None,
            default_time_min: None,
            state: "UP".to_string(),
            priority_tier: 1,
            priority_job_factor: 1,
            max_nodes: None,
            default_topology: TopologyKind::Any,
            sub_node_pool: false,
            inference_pool: false,
            access: Default::default(),
            tres_billing_weights: None,
        };
        let mut default_time_at = None;
        let mut max_time_at = line.at.clone();
        for s in &line.settings {
            let small = || u32::try_from(s.val.int()).unwrap_or(u32::MAX);
            match s.key.name {
                "Nodes" => {
                    p.nodes_expr = s.raw.clone();
                    p.nodes = if s.raw.eq_ignore_ascii_case("ALL") {
                        self.cfg.nodes.iter().map(|n| n.name.clone()).collect()
                    } else if s.raw.is_empty() {
                        Vec::new()
                    } else {
                        let expr = s.raw.replace(char::is_whitespace, ",");
                        let mut out: Vec<String> = Vec::new();
                        for name in Self::expand(&expr, "Nodes", &s.at)? {
                            if !self.node_names.contains(&name) {
                                return Err(ConfigError::Invalid {
                                    at: s.at.clone(),
                                    msg: format!(
                                        "partition {}: node `{name}' is not defined",
                                        p.name
                                    ),
                                });
                            }
                            if !out.contains(&name) {
                                out.push(name);
                            }
                        }
                        out
                    };
                }
                "Default" => p.default = s.val.flag(),
                "MaxTime" => {
                    p.max_time_min = s.val.opt();
                    max_time_at = s.at.clone();
                }
                "DefaultTime" => {
                    p.default_time_min = s.val.opt();
                    default_time_at = Some(s.at.clone());
                }
                "State" => p.state = s.val.str().to_string(),
                "PriorityTier" => p.priority_tier = small(),
                "PriorityJobFactor" => p.priority_job_factor = small(),
                "Priority" => {
                    p.priority_tier = small();
                    p.priority_job_factor = small();
                }
                "MaxNodes" => {
                    p.max_nodes = s.val.opt().map(|n| u32::try_from(n).unwrap_or(u32::MAX))
                }
                "DefaultTopology" => {
                    p.default_topology =
                        TopologyKind::parse(s.val.str()).unwrap_or(TopologyKind::Any);
                }
                "SubNodePool" => p.sub_node_pool = s.val.flag(),
                "InferencePool" => p.inference_pool = s.val.flag(),
                "TRESBillingWeights" => {
                    crate::fairshare::BillingWeights::parse(s.val.str()).map_err(|e| ConfigError::Invalid {
                        at: s.at.clone(),
                        msg: format!("partition {}: {e}", p.name),
                    })?;
                    p.tres_billing_weights = Some(s.val.str().to_string());
                }
                "AllowGroups" => p.access.allow_groups = names_or_all(s.val.str()),
                "AllowAccounts" => p.access.allow_accounts = names_or_all(s.val.str()),
                "DenyAccounts" => p.access.deny_accounts = names_or_all(s.val.str()).unwrap_or_default(),
                "AllowQos" => p.access.allow_qos = names_or_all(s.val.str()),
                "DenyQos" => p.access.deny_qos = names_or_all(s.val.str()).unwrap_or_default(),
                "RootOnly" => p.access.root_only = s.val.flag(),
                "DisableRootJobs" => p.access.disable_root_jobs = Some(s.val.flag()),
                _ => {}
            }
        }
        if let (Some(d), Some(m), Some(at)) = (p.default_time_min, p.max_time_min, default_time_at)
        {
            if d > m {
                return Err(ConfigError::Invalid {
                    at,
                    msg: format!(
                        "partition {}: DefaultTime ({d} min) exceeds MaxTime ({m} min, {max_time_at})",
                        p.name
                    ),
                });
            }
        }
        self.cfg.partitions.push(p);
        self.default_at.push(line.at);
        Ok(())
    }
}

/// A comma-separated list of names; `ALL` (any case) or empty is `None`: everyone
/// (slurm.conf(5) `AllowGroups=ALL`).
fn names_or_all(v: &str) -> Option<Vec<String>> {
    let names: Vec<String> = v.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect();
    if names.is_empty() || names.iter().any(|n| n.eq_ignore_ascii_case("ALL")) {
        None
    } else {
        Some(names)
    }
}

/// A comma-separated list of words, lower case (`PrivateData=jobs,Nodes`).
fn lower_list(v: &str) -> Vec<String> {
    v.split(',').map(|w| w.trim().to_ascii_lowercase()).filter(|w| !w.is_empty()).collect()
}

fn node_state(s: &str) -> ConfNodeState {
    match s {
        "IDLE" => ConfNodeState::Idle,
        "DOWN" => ConfNodeState::Down,
        "DRAIN" => ConfNodeState::Drain,
        "FAIL" => ConfNodeState::Fail,
        "FUTURE" => ConfNodeState::Future,
        "CLOUD" => ConfNodeState::Cloud,
        _ => ConfNodeState::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::super::no_includes;
    use super::*;

    fn parse(text: &str) -> ClusterConfig {
        parse_slurm_conf(text, "slurm.conf", &mut no_includes).unwrap()
    }

    fn err(text: &str) -> String {
        parse_slurm_conf(text, "slurm.conf", &mut no_includes)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn global_keys_fill_fields_and_raw() {
        let c = parse(
            "ClusterName=oracle\nSlurmctldHost=vm(127.0.0.1)\nSlurmctldPort=7817-7818\nSlurmdPort=7818\n\
             SlurmUser=slurm\nDefMemPerCPU=1024\nKillWait=5\nMinJobAge=60\nMaxJobCount=20000\n\
             MaxArraySize=10001\nFirstJobId=5000\nSelectType=select/cons_tres\nPriorityType=priority/multifactor\n\
             PreemptType=preempt/qos\nSchedulerType=sched/builtin\nTopologyPlugin=topology/tree\n\
             StateSaveLocation=/s\nSlurmdSpoolDir=/d/%n\nAlertProgram=/usr/bin/page\nPreemptExemptTime=00:05:00\n\
             ElasticGrowInterval=30\n",
        );
        assert_eq!(c.cluster_name, "oracle");
        assert_eq!(
            (c.control_host.as_str(), c.control_addr.as_str()),
            ("vm", "127.0.0.1")
        );
        assert_eq!((c.slurmctld_port, c.slurmd_port), (7817, 7818));
        assert_eq!(c.slurm_user, "slurm");
        assert_eq!(c.def_mem_per_cpu_mib, Some(1024));
        assert_eq!((c.kill_wait_s, c.min_job_age_s), (5, 60));
        assert_eq!((c.max_job_count, c.max_array_size, c.first_job_id), (20000, 10001, 5000));
        assert_eq!(c.priority_type, "priority/multifactor");
        assert_eq!(c.preempt_type, "preempt/qos");
        assert_eq!(c.scheduler_type, "sched/builtin");
        assert_eq!(c.topology_plugin, "topology/tree");
        assert_eq!(c.state_save_location, "/s");
        assert_eq!(c.slurmd_spool_dir, "/d/%n");
        assert_eq!(c.alert_program.as_deref(), Some("/usr/bin/page"));
        assert_eq!(c.preempt_exempt_time.as_deref(), Some("00:05:00"));
        assert_eq!(c.elastic_grow_interval_s, Some(30));
        assert_eq!((c.elastic_rdzv_port, c.elastic_rdzv_port_count), (Some(29400), Some(1000)), "the defaults");
        assert_eq!(c.raw.len(), 21);
        assert_eq!(
            c.raw[1],
            ("SlurmctldHost".to_string(), "vm(127.0.0.1)".to_string())
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn defaults_come_from_the_table() {
        let c = parse("");
        assert_eq!((c.slurmctld_port, c.slurmd_port), (6817, 6818));
        assert_eq!(c.slurm_user, "root");
        assert_eq!(
            (
                c.kill_wait_s,
                c.min_job_age_s,
                c.max_job_count,
                c.max_array_size
            ),
            (30, 300, 10000, 1001)
        );
        assert_eq!(c.select_type, "select/cons_tres");
        assert!(c.raw.is_empty());
        assert_eq!(c.def_mem_per_cpu_mib, None);
    }

    #[test]
    fn every_global_key_of_the_table_is_handled() {
        let mut p = Parser::new();
        let at = Location::new("t", 1);
        for k in keys::KEYS.iter().filter(|k| k.scope == Scope::Global) {
            let sample = match k.ty {
                ValueType::U16 | ValueType::U32 | ValueType::U64 | ValueType::PortRange => "1",
                ValueType::Bool => "YES",
                ValueType::Time => "5",
                ValueType::Enum(words) => words[0],
                _ => "x",
            };
            let v = check_value(k, sample, &at).unwrap();
            assert!(p.apply_global(k, &v, &at), "{} not handled", k.name);
        }
    }

    #[test]
    fn priority_keys_fill_the_priority_conf_and_billing_weights_are_checked() {
        let c = parse("NodeName=n1\nPartitionName=p Nodes=n1 TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2.0\n");
        assert_eq!(c.priority, super::super::PriorityConf::default());
        assert_eq!(c.priority.decay_half_life_s, 7 * 86_400);
        assert_eq!(c.partitions[0].tres_billing_weights.as_deref(), Some("CPU=1.0,Mem=0.25G,GRES/gpu=2.0"));
        let c = parse(
            "PriorityDecayHalfLife=0\nPriorityCalcPeriod=1\nPriorityUsageResetPeriod=weekly\nPriorityMaxAge=1-0\n\
             PriorityFavorSmall=YES\nPriorityWeightAge=1000\nPriorityWeightAssoc=2\nPriorityWeightFairshare=10000\n\
             PriorityWeightJobSize=3\nPriorityWeightPartition=4\nPriorityWeightQOS=5\nNodeName=n1\n",
        );
        let p = &c.priority;
        assert_eq!((p.decay_half_life_s, p.calc_period_s, p.max_age_s), (0, 60, 86_400));
        assert_eq!(p.usage_reset_period, crate::fairshare::ResetPeriod::Weekly);
        assert!(p.favor_small);
        assert_eq!(
            (p.weight_age, p.weight_assoc, p.weight_fairshare, p.weight_job_size, p.weight_partition, p.weight_qos),
            (1000, 2, 10_000, 3, 4, 5)
        );
        let err = parse_slurm_conf("NodeName=n1\nPartitionName=p Nodes=n1 TRESBillingWeights=CPU=lots\n", "slurm.conf", &mut no_includes)
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid TRESBillingWeights `CPU=lots'"), "{err}");
        assert!(err.contains("slurm.conf"), "{err}");
        assert!(parse_slurm_conf("PriorityUsageResetPeriod=HOURLY\n", "slurm.conf", &mut no_includes).is_err());
    }

    #[test]
    fn keys_are_case_insensitive_values_and_names_are_not() {
        let c = parse("clustername=Big\nNODENAME=Gpu1 cpus=4 realmemory=100\npartitionname=Main nodes=Gpu1 DEFAULT=yes");
        assert_eq!(c.cluster_name, "Big");
        assert_eq!(c.nodes[0].name, "Gpu1");
        assert_eq!(c.nodes[0].cpus, 4);
        assert_eq!(c.partitions[0].name, "Main");
        assert!(c.partitions[0].default);
        assert_eq!(c.raw[0].0, "ClusterName");
    }

    #[test]
    fn continuation_and_comments_in_node_lines() {
        let c = parse(
            "# nodes\nNodeName=gpu[01-02] \\\n   Sockets=2 CoresPerSocket=32 \\ # cpu shape\n   RealMemory=512000 Gres=gpu:h100:8 # trailing\n",
        );
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.nodes[1].cpus, 64);
        assert_eq!(c.nodes[1].real_memory_mib, 512_000);
        assert_eq!(c.nodes[1].gpus, 8);
    }

    #[test]
    fn node_keys_and_derived_defaults() {
        let c = parse(
            "SlurmdPort=7000\nNodeName=a[1-2] NodeAddr=10.0.0.[1-2] Port=[17001-17002] Boards=1 Sockets=2 \
             CoresPerSocket=4 ThreadsPerCore=2 Weight=5 Features=ib,h100 State=IDLE Gres=gpu:8,nic:2\n\
             NodeName=b1 NodeHostname=host-b CPUs=3 Procs=6 Port=1234 State=future\n\
             NodeName=c1 Gres=gpu:h100:2(S:0)\n",
        );
        let a2 = &c.nodes[1];
        assert_eq!(
            (a2.addr.as_str(), a2.hostname.as_str(), a2.port),
            ("10.0.0.2", "a2", 17002)
        );
        assert_eq!(
            (
                a2.boards,
                a2.sockets,
                a2.cores_per_socket,
                a2.threads_per_core,
                a2.cpus
            ),
            (1, 2, 4, 2, 16)
        );
        assert_eq!((a2.weight, a2.state), (5, ConfNodeState::Idle));
        assert_eq!(a2.features, ["ib", "h100"]);
        assert_eq!(
            (a2.gpus, a2.gpu_type.as_deref(), a2.gres.as_str()),
            (8, None, "gpu:8,nic:2")
        );
        let b = &c.nodes[2];
        assert_eq!(
            (b.addr.as_str(), b.hostname.as_str(), b.port, b.cpus),
            ("host-b", "host-b", 1234, 6)
        );
        assert_eq!(b.state, ConfNodeState::Future);
        assert_eq!(b.real_memory_mib, 1);
        let c1 = &c.nodes[3];
        assert_eq!(
            (c1.gpus, c1.gpu_type.as_deref(), c1.port),
            (2, Some("h100"), 7000)
        );
    }

    #[test]
    fn node_default_lines_apply_to_later_lines() {
        let c = parse(
            "NodeName=a1\nNodeName=DEFAULT Sockets=2 CoresPerSocket=8 RealMemory=1000\n\
             NodeName=default RealMemory=2000 Gres=gpu:h100:8\nNodeName=b[1-2]\nNodeName=c1 RealMemory=5",
        );
        assert_eq!(
            (c.nodes[0].cpus, c.nodes[0].real_memory_mib, c.nodes[0].gpus),
            (1, 1, 0)
        );
        assert_eq!(
            (c.nodes[1].cpus, c.nodes[1].real_memory_mib, c.nodes[1].gpus),
            (16, 2000, 8)
        );
        assert_eq!((c.nodes[3].cpus, c.nodes[3].real_memory_mib), (16, 5));
    }

    #[test]
    fn partitions_defaults_all_and_times() {
        let c = parse(
            "NodeName=n[1-4]\nPartitionName=DEFAULT MaxTime=2-00:00:00 State=UP PriorityTier=3\n\
             PartitionName=batch Nodes=ALL Default=YES DefaultTime=01:00:00\n\
             PartitionName=debug Nodes=n[1-2],n1 MaxTime=30 DefaultTopology=NODE SubNodePool=yes MaxNodes=2 PriorityJobFactor=7\n\
             PartitionName=old Nodes=\"n3 n4\" Priority=9 MaxTime=UNLIMITED State=drain MaxNodes=INFINITE\n\
             PartitionName=x Nodes=n1 MaxTime=1-12 DefaultTime=90:30\n",
        );
        let [batch, debug, old, x] = &c.partitions[..] else {
            panic!()
        };
        assert_eq!(batch.nodes, ["n1", "n2", "n3", "n4"]);
        assert_eq!(batch.nodes_expr, "ALL");
        assert!(batch.default && !debug.default);
        assert_eq!(
            (batch.max_time_min, batch.default_time_min),
            (Some(2880), Some(60))
        );
        assert_eq!(
            (batch.priority_tier, batch.default_topology),
            (3, TopologyKind::Any)
        );
        assert_eq!(debug.nodes, ["n1", "n2"]);
        assert_eq!(
            (debug.max_time_min, debug.default_time_min),
            (Some(30), None)
        );
        assert_eq!(
            (debug.default_topology, debug.sub_node_pool),
            (TopologyKind::Node, true)
        );
        assert_eq!((debug.max_nodes, debug.priority_job_factor), (Some(2), 7));
        assert_eq!(old.nodes, ["n3", "n4"]);
        assert_eq!((old.priority_tier, old.priority_job_factor), (9, 9));
        assert_eq!((old.max_time_min, old.max_nodes), (None, None));
        assert_eq!((old.state.as_str(), old.state == "UP"), ("DRAIN", false));
        assert_eq!(
            (x.max_time_min, x.default_time_min),
            (Some(36 * 60), Some(91))
        );
    }

    #[test]
    fn conf_times() {
        let cases = [
            ("30", Some(30)),
            ("00:30:00", Some(30)),
            ("01:00:00", Some(60)),
            ("2-00:00:00", Some(2880)),
            ("1-1", Some(1500)),
            ("1-1:5", Some(1505)),
            ("5:01", Some(6)),
            ("UNLIMITED", None),
            ("infinite", None),
            ("-1", None),
            // As Slurm's time_str2mins: `D-` is D days.
            ("1-", Some(1440)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_conf_minutes(s), Ok(want), "{s}");
        }
        for bad in [
            "",
            "x",
            "1:2:3:4",
            "-5",
            "1-2:3:4:5",
            "99999999999999999999",
        ] {
            assert!(parse_conf_minutes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gres_strings() {
        let g = parse_gres("gpu:h100:8,gpu:2,nic,bw:lustre:4G,mps:no_consume:100(S:0-1)").unwrap();
        let t: Vec<(&str, Option<&str>, u64)> = g
            .iter()
            .map(|i| (i.name.as_str(), i.ty.as_deref(), i.count))
            .collect();
        assert_eq!(
            t,
            [
                ("gpu", Some("h100"), 8),
                ("gpu", None, 2),
                ("nic", None, 1),
                ("bw", Some("lustre"), 4 << 30),
                ("mps", None, 100)
            ]
        );
        assert_eq!(
            parse_gres("gpu:a100").unwrap()[0].ty.as_deref(),
            Some("a100")
        );
        for bad in ["gpu:h100:x", ":8", "gpu:a:b:c", "gpu(S:0", "gpu::8"] {
            assert!(parse_gres(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        assert_eq!(
            err("ClusterName=x\n\nFrobnicate=3\n"),
            "slurm.conf:3: unknown key `Frobnicate'"
        );
        assert_eq!(
            err("NodeName=a CPUs=2 \\\n  Colour=red"),
            "slurm.conf:2: unknown key `Colour'"
        );
        assert_eq!(
            err("PartitionName=p Nodes=ALL Frob=1"),
            "slurm.conf:1: unknown key `Frob'"
        );
        // A node key is not a global key.
        assert_eq!(
            err("RealMemory=5"),
            "slurm.conf:1: unknown key `RealMemory'"
        );
    }

    #[test]
    fn slurm_only_keys_warn_once_and_continue() {
        let c = parse(
            "AuthType=auth/munge\nauthtype=auth/none\nNodeName=a MemSpecLimit=100 Reason=x TmpDisk=100\nNodeName=b MemSpecLimit=5\n\
             PartitionName=p Nodes=ALL OverSubscribe=NO\nDownNodes=a State=DOWN\nFrontendName=f\n",
        );
        assert_eq!(
            c.warnings,
            [
                "slurm.conf:1: AuthType is a Slurm key Flotilla does not use yet; ignored",
                "slurm.conf:3: MemSpecLimit is a Slurm key Flotilla does not use yet; ignored (on NodeName lines)",
                "slurm.conf:3: Reason is a Slurm key Flotilla does not use yet; ignored (on NodeName lines)",
                "slurm.conf:5: OverSubscribe is a Slurm key Flotilla does not use yet; ignored (on PartitionName lines)",
                "slurm.conf:6: DownNodes lines are not used by Flotilla yet; ignored",
                "slurm.conf:7: FrontendName lines are not used by Flotilla yet; ignored",
            ]
        );
        assert_eq!(c.nodes.len(), 2);
        // `TmpDisk=` is read (MiB), 0 when not given.
        assert_eq!((c.nodes[0].tmp_disk_mib, c.nodes[1].tmp_disk_mib), (100, 0));
        assert_eq!(c.raw[0], ("AuthType".to_string(), "auth/none".to_string()));
    }

    #[test]
    fn include_via_resolver() {
        let mut files = |p: &str| -> Result<(String, String), String> {
            match p {
                "nodes.conf" => Ok((
                    "/etc/slurm/nodes.conf".into(),
                    "NodeName=n[1-2] CPUs=8".into(),
                )),
                _ => Err(format!("/etc/slurm/{p}: No such file or directory")),
            }
        };
        let c = parse_slurm_conf(
            "ClusterName=c\nInclude nodes.conf\nPartitionName=p Nodes=ALL",
            "slurm.conf",
            &mut files,
        )
        .unwrap();
        assert_eq!(c.partitions[0].nodes, ["n1", "n2"]);
        let e = parse_slurm_conf("Include other.conf", "slurm.conf", &mut files).unwrap_err();
        assert_eq!(
            e.to_string(),
            "slurm.conf:1: cannot include `other.conf': /etc/slurm/other.conf: No such file or directory"
        );
    }

    #[test]
    fn semantic_errors() {
        let cases = [
            ("NodeName=ALL", "slurm.conf:1: `ALL' is a reserved word disallowed for use with NodeName"),
            ("NodeName=a\nNodeName=a", "slurm.conf:2: duplicate NodeName `a'"),
            ("NodeName=DEFAULT NodeAddr=x", "slurm.conf:1: NodeAddr not allowed with NodeName=DEFAULT"),
            ("NodeName=a[1-3] NodeAddr=x[1-2]", "slurm.conf:1: NodeAddr count (2) must equal that of NodeName (3) or be 1"),
            ("NodeName=a Port=70000", "slurm.conf:1: invalid value `70000' for Port: not a port number"),
            ("NodeName=a CPUs=many", "slurm.conf:1: invalid value `many' for CPUs: not a number"),
            ("NodeName=a State=SLEEPY", "slurm.conf:1: invalid value `SLEEPY' for State: expected one of UNKNOWN, IDLE, DOWN, DRAIN, FAIL, FUTURE, CLOUD"),
            ("NodeName=a Gres=gpu:h100:x", "slurm.conf:1: invalid value `gpu:h100:x' for Gres: bad GRES count in `gpu:h100:x'"),
            ("NodeName=a\nPartitionName=p Nodes=a,b", "slurm.conf:2: partition p: node `b' is not defined"),
            ("PartitionName=p\nPartitionName=p", "slurm.conf:2: duplicate PartitionName `p'"),
            ("PartitionName=p MaxTime=10 DefaultTime=20", "slurm.conf:1: partition p: DefaultTime (20 min) exceeds MaxTime (10 min, slurm.conf:1)"),
            ("PartitionName=p MaxTime=soon", "slurm.conf:1: invalid value `soon' for MaxTime: expected minutes, [D-]HH:MM:SS or UNLIMITED"),
            ("PartitionName=p Default=maybe", "slurm.conf:1: invalid value `maybe' for Default: expected YES or NO"),
            ("PartitionName=p DefaultTopology=rack", "slurm.conf:1: invalid value `rack' for DefaultTopology: expected one of node, pod, any"),
            ("SlurmctldHost=vm(127.0.0.1", "slurm.conf:1: invalid value `vm(127.0.0.1' for SlurmctldHost: expected host or host(addr)"),
            ("KillWait=70000", "slurm.conf:1: invalid value `70000' for KillWait: larger than 65535"),
            ("NodeName=a[3-1]", "slurm.conf:1: NodeName: invalid range: `3-1'"),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "{text}");
        }
    }

    #[test]
    fn state_storage_keys_and_their_defaults() {
        let c = parse("SlurmctldHost=a");
        let s = &c.state_storage;
        assert_eq!((s.storage_type.as_str(), s.host.as_str(), s.port, s.user.as_deref(), s.loc.as_str()), ("state/sqlite", "localhost", 5432, None, "flotilla"));
        assert!(!s.is_postgres() && s.pass_file.is_none());
        assert_eq!(c.slurmctld_timeout_s, 6);
        assert_eq!(c.slurmd_timeout_s, Some(300), "SlurmdTimeout: Slurm's default");
        assert_eq!(parse("SlurmctldHost=a\nSlurmdTimeout=30").slurmd_timeout_s, Some(30));
        let c = parse(
            "SlurmctldHost=a\nStateStorageType=state/postgres\nStateStorageHost=/run/pg\nStateStoragePort=5433\n\
             StateStorageUser=slurm\nStateStorageLoc=state\nStateStoragePassFile=/etc/slurm/state.pw\nSlurmctldTimeout=20",
        );
        let s = &c.state_storage;
        assert!(s.is_postgres());
        assert_eq!((s.host.as_str(), s.port, s.user.as_deref(), s.loc.as_str()), ("/run/pg", 5433, Some("slurm"), "state"));
        assert_eq!(s.pass_file.as_deref(), Some("/etc/slurm/state.pw"));
        assert_eq!(c.slurmctld_timeout_s, 20);
        let e = err("StateStorageType=state/mysql");
        assert!(e.contains("StateStorageType"), "{e}");
    }

    #[test]
    fn lenient_cases_warn() {
        let c = parse(
            "SlurmctldHost=a\nSlurmctldHost=b(10.0.0.2)\nControlMachine=old\nNodeName=n Gres=gpu:a100:4,gpu:h100:4\n\
             PartitionName=p1 Default=YES\nPartitionName=p2 Default=YES",
        );
        assert_eq!(
            (c.control_host.as_str(), c.control_addr.as_str()),
            ("a", "a")
        );
        assert_eq!(c.backup_controllers, vec![("b".to_string(), "10.0.0.2".to_string())], "the backups, in order");
        assert_eq!((c.nodes[0].gpus, c.nodes[0].gpu_type.as_deref()), (8, None));
        assert!(!c.partitions[0].default && c.partitions[1].default);
        assert_eq!(c.warnings.len(), 3, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("not in GresTypes"));
        assert!(c.warnings[1].contains("several types"));
        assert_eq!(c.warnings[2], "slurm.conf:6: several partitions have Default=YES (p1, p2); the last, p2, is the default");
        let c = parse("ControlMachine=old\nControlAddr=10.1.1.1");
        assert_eq!(
            (c.control_host.as_str(), c.control_addr.as_str()),
            ("old", "10.1.1.1")
        );
    }
}
