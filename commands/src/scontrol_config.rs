//! `scontrol show config [KEY]`: the cluster configuration as `Name = value` lines.
//!
//! Shape (Slurm 22.05 `slurm_print_ctl_conf` / `slurm_print_key_pairs`): a first line
//! `Configuration data as of YYYY-MM-DDTHH:MM:SS`, then one line per key, `%-23s = %s`, sorted
//! by name (case-insensitive), durations with Slurm's unit (`MinJobAge               = 300 sec`,
//! `KillWait                = 30 sec`), unset values `(null)`, and `SLURM_CONF` /
//! `SLURM_VERSION`. Clients grep single lines: snakemake's Slurm executor runs it at import
//! and reads `^MinJobAge\s*=\s*(\d+)\s*(sec|...)` and `MaxArraySize\s*=?\s*(\d+)`
//! (CONTRACT.md §A-19, SURPRISES.md 3).
//!
//! With `KEY`, only the lines whose name equals it (case-insensitive) are printed, without the
//! header line, as newer Slurm does.
//!
//! Source of the values: the `slurm.conf` the command finds (`SLURM_CONF`, else
//! `FLOTILLA_CONF`, else `/etc/slurm/slurm.conf`) — the same file the controller was started
//! with — read through [`flotilla_conf`]: the keys Flotilla uses with their defaults applied, and
//! every other global key as written. Real `scontrol` asks the controller instead; the
//! controller-status trailer (`Slurmctld(primary) at X is UP`) is not printed.

use flotilla_conf as conf;
use flotilla_core::config::ClusterConfig;
use flotilla_core::time::fmt_time;

use crate::common::{now, Io};

/// The Slurm release whose output this imitates (`SLURM_VERSION`).
pub const SLURM_VERSION: &str = "22.05.8";

/// Keys Slurm 22.05 prints as `<n> sec`.
const SECONDS_KEYS: &[&str] = &[
    "BatchStartTimeout",
    "EioTimeout",
    "GetEnvTimeout",
    "HealthCheckInterval",
    "InactiveLimit",
    "KillWait",
    "MessageTimeout",
    "MinJobAge",
    "PrologEpilogTimeout",
    "ResumeTimeout",
    "SlurmctldTimeout",
    "SlurmdTimeout",
    "SuspendTimeout",
    "TCPTimeout",
    "UnkillableStepTimeout",
    "WaitTime",
];

/// Keys of `slurm.conf` lines that are not global settings.
const NOT_GLOBAL: &[&str] = &[
    "NodeName",
    "PartitionName",
    "DownNodes",
    "FrontendName",
    "NodeSet",
    "Include",
    "SlurmctldHost",
    "ControlMachine",
    "ControlAddr",
    "BackupController",
    "BackupAddr",
];

fn with_unit(key: &str, value: &str) -> String {
    if SECONDS_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key)) && value.parse::<u64>().is_ok() {
        format!("{value} sec")
    } else if key.eq_ignore_ascii_case("OverTimeLimit") && value.parse::<u64>().is_ok() {
        format!("{value} min")
    } else {
        value.to_string()
    }
}

/// The `(name, value)` pairs of `scontrol show config` for `conf` (loaded from `conf_path`),
/// sorted case-insensitively by name; values already carry their unit (`300 sec`).
pub fn config_pairs(conf: &ClusterConfig, conf_path: &str) -> Vec<(String, String)> {
    let opt = |s: &str| {
        if s.is_empty() {
            "(null)".to_string()
        } else {
            s.to_string()
        }
    };
    let mut pairs: Vec<(String, String)> = vec![
        ("ClusterName".into(), opt(&conf.cluster_name)),
        (
            "SlurmctldHost[0]".into(),
            if conf.control_addr.is_empty() || conf.control_addr == conf.control_host {
                opt(&conf.control_host)
            } else {
                format!("{}({})", conf.control_host, conf.control_addr)
            },
        ),
        ("SlurmctldPort".into(), conf.slurmctld_port.to_string()),
        ("SlurmdPort".into(), conf.slurmd_port.to_string()),
        ("SlurmUser".into(), opt(&conf.slurm_user)),
        ("StateSaveLocation".into(), opt(&conf.state_save_location)),
        ("SlurmdSpoolDir".into(), opt(&conf.slurmd_spool_dir)),
        (
            "DefMemPerCPU".into(),
            conf.def_mem_per_cpu_mib
                .map_or_else(|| "UNLIMITED".to_string(), |m| m.to_string()),
        ),
        ("KillWait".into(), conf.kill_wait_s.to_string()),
        ("MinJobAge".into(), conf.min_job_age_s.to_string()),
        ("MaxJobCount".into(), conf.max_job_count.to_string()),
        ("MaxArraySize".into(), conf.max_array_size.to_string()),
        ("SelectType".into(), opt(&conf.select_type)),
        ("PriorityType".into(), opt(&conf.priority_type)),
        ("PreemptType".into(), opt(&conf.preempt_type)),
        ("SchedulerType".into(), opt(&conf.scheduler_type)),
        ("TopologyPlugin".into(), opt(&conf.topology_plugin)),
        ("SLURM_CONF".into(), conf_path.to_string()),
        ("SLURM_VERSION".into(), SLURM_VERSION.to_string()),
    ];
    if conf.priority_type != "priority/basic" {
        pairs.extend(multifactor_pairs(conf));
    }
    for (k, v) in &conf.raw {
        let base = k.split('[').next().unwrap_or(k);
        if NOT_GLOBAL.iter().any(|n| n.eq_ignore_ascii_case(base))
            || pairs.iter().any(|(pk, _)| {
                pk.eq_ignore_ascii_case(k) || pk.split('[').next().is_some_and(|p| p.eq_ignore_ascii_case(base))
            })
        {
            continue;
        }
        pairs.push((k.clone(), v.clone()));
    }
    for (k, v) in &mut pairs {
        *v = with_unit(k, v);
    }
    let multifactor = conf.priority_type != "priority/basic";
    pairs.sort_by_key(|(k, _)| sort_key(k, multifactor));
    pairs
}

/// The keys `slurm_ctl_conf_2_key_pairs` prints for `priority/multifactor`, in its order
/// (Slurm 22.05 `src/api/config_info.c`): after `PrioritySiteFactorPlugin`, not sorted.
const MULTIFACTOR_KEYS: &[&str] = &[
    "PriorityDecayHalfLife",
    "PriorityCalcPeriod",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityMaxAge",
    "PriorityUsageResetPeriod",
    "PriorityType",
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairShare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityWeightTRES",
];

/// Where `key` sorts: its lower-case name, except the multifactor block (with `multifactor`),
/// which stays in Slurm's order right after `PrioritySiteFactorPlugin`; with priority/basic
/// `PriorityType` is the only one and sorts by name.
fn sort_key(key: &str, multifactor: bool) -> String {
    match MULTIFACTOR_KEYS.iter().position(|k| k.eq_ignore_ascii_case(key)) {
        Some(i) if multifactor => format!("prioritysitefactorplugin\u{7f}{i:02}"),
        _ => key.to_ascii_lowercase(),
    }
}

/// The multifactor keys' values as Slurm prints them: durations by `secs2time_str`
/// (`7-00:00:00`, `00:05:00`), `Yes`/`No`, the reset period's upper-case word, weights as
/// numbers, `PriorityFlags` and `PriorityWeightTRES` as written (`(null)` unset).
fn multifactor_pairs(conf: &ClusterConfig) -> Vec<(String, String)> {
    use flotilla_core::fairshare::ResetPeriod;
    use flotilla_core::time::secs2time_str;
    let p = &conf.priority;
    let raw = |k: &str| {
        conf.raw.iter().find(|(rk, _)| rk.eq_ignore_ascii_case(k)).map_or_else(|| "(null)".to_string(), |(_, v)| v.clone())
    };
    let secs = |s: u64| secs2time_str(i64::try_from(s).unwrap_or(i64::MAX));
    let reset = match p.usage_reset_period {
        ResetPeriod::None => "NONE",
        ResetPeriod::Now => "NOW",
        ResetPeriod::Daily => "DAILY",
        ResetPeriod::Weekly => "WEEKLY",
        ResetPeriod::Monthly => "MONTHLY",
        ResetPeriod::Quarterly => "QUARTERLY",
        ResetPeriod::Yearly => "YEARLY",
    };
    [
        ("PriorityDecayHalfLife", secs(p.decay_half_life_s)),
        ("PriorityCalcPeriod", secs(p.calc_period_s)),
        ("PriorityFavorSmall", if p.favor_small { "Yes" } else { "No" }.to_string()),
        ("PriorityFlags", raw("PriorityFlags")),
        ("PriorityMaxAge", secs(p.max_age_s)),
        ("PriorityUsageResetPeriod", reset.to_string()),
        ("PriorityWeightAge", p.weight_age.to_string()),
        ("PriorityWeightAssoc", p.weight_assoc.to_string()),
        ("PriorityWeightFairShare", p.weight_fairshare.to_string()),
        ("PriorityWeightJobSize", p.weight_job_size.to_string()),
        ("PriorityWeightPartition", p.weight_partition.to_string()),
        ("PriorityWeightQOS", p.weight_qos.to_string()),
        ("PriorityWeightTRES", raw("PriorityWeightTRES")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Formats the pairs as Slurm does: `format!("{name:<23} = {value}")` per line.
pub fn format_pairs(pairs: &[(String, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k:<23} = {v}\n")).collect()
}

/// `scontrol show config [KEY]`. Returns the exit status: 0, or 1 when the configuration
/// cannot be loaded (`slurm_load_ctl_conf error: ...` on stderr).
pub fn show_config(key: Option<&str>, io: &mut Io<'_>) -> i32 {
    let path = conf::conf_path(io.env);
    let conf = match conf::load_from(&path) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("slurm_load_ctl_conf error: {e}\n"));
            return 1;
        }
    };
    let pairs = config_pairs(&conf, &path.to_string_lossy());
    match key {
        Some(k) => {
            let sel: Vec<(String, String)> = pairs
                .into_iter()
                .filter(|(pk, _)| pk.eq_ignore_ascii_case(k) || pk.split('[').next().is_some_and(|b| b.eq_ignore_ascii_case(k)))
                .collect();
            io.out(&format_pairs(&sel));
        }
        None => {
            io.out(&format!("Configuration data as of {}\n", fmt_time(now())));
            io.out(&format_pairs(&pairs));
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(key: Option<&str>, conf_text: &str) -> (String, String, i32) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("slurm.conf");
        std::fs::write(&p, conf_text).unwrap();
        let ps = p.to_string_lossy().into_owned();
        let env = move |k: &str| (k == "SLURM_CONF").then(|| ps.clone());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = show_config(
            key,
            &mut Io {
                out: &mut out,
                err: &mut err,
                env: &env,
                stdin: None,
            },
        );
        (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap(), code)
    }

    const CONF: &str = "ClusterName=t\nSlurmctldHost=vm(127.0.0.1)\nAuthType=auth/munge\nMessageTimeout=20\n\
                        NodeName=n[1-2] CPUs=4\nPartitionName=p Nodes=ALL Default=YES\n";

    #[test]
    fn snakemake_regexes_match_and_defaults_apply() {
        let (out, err, code) = run(None, CONF);
        assert_eq!((err.as_str(), code), ("", 0));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("Configuration data as of 20"), "{out}");
        // Exactly Slurm's `%-23s = %s` lines.
        assert!(lines.contains(&"MinJobAge               = 300 sec"), "{out}");
        assert!(lines.contains(&"MaxArraySize            = 1001"), "{out}");
        assert!(lines.contains(&"KillWait                = 30 sec"), "{out}");
        assert!(lines.contains(&"MessageTimeout          = 20 sec"), "{out}");
        assert!(lines.contains(&"AuthType                = auth/munge"), "{out}");
        assert!(lines.contains(&"ClusterName             = t"), "{out}");
        assert!(lines.contains(&"SlurmctldHost[0]        = vm(127.0.0.1)"), "{out}");
        assert!(lines.contains(&"SLURM_VERSION           = 22.05.8"), "{out}");
        assert!(!out.contains("NodeName") && !out.contains("PartitionName"), "{out}");
        // Sorted case-insensitively, each key once.
        let keys: Vec<String> = lines[1..].iter().map(|l| l.split(" = ").next().unwrap().trim().to_ascii_lowercase()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn configured_values_win_and_one_key_can_be_asked() {
        let (out, _, code) = run(Some("minjobage"), &format!("{CONF}MinJobAge=42\nMaxArraySize=5000\n"));
        assert_eq!((out.as_str(), code), ("MinJobAge               = 42 sec\n", 0));
        let (out, _, _) = run(Some("MaxArraySize"), &format!("{CONF}MaxArraySize=5000\n"));
        assert_eq!(out, "MaxArraySize            = 5000\n");
        let (out, _, _) = run(Some("NoSuchKey"), CONF);
        assert_eq!(out, "");
    }

    /// Accounting golden 0120 (`scontrol show config | grep -E '^(AccountingStorageEnforce|
    /// PriorityType|PriorityWeight|PriorityCalcPeriod|PriorityDecayHalfLife)'` on the
    /// reference's phase-2 slurm.conf): Slurm's order and value forms for multifactor.
    #[test]
    fn multifactor_keys_as_slurm_prints_them() {
        let conf = format!(
            "{CONF}AccountingStorageEnforce=associations,limits,qos,safe\nPriorityType=priority/multifactor\n\
             PriorityCalcPeriod=1\nPriorityDecayHalfLife=7-0\nPriorityMaxAge=7-0\nPriorityWeightAge=1000\n\
             PriorityWeightFairshare=10000\nPriorityWeightJobSize=1000\nPriorityWeightPartition=1000\n\
             PriorityWeightQOS=1000\nPriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000\n"
        );
        let (out, _, code) = run(None, &conf);
        assert_eq!(code, 0);
        let want_prefixes = ["AccountingStorageEnforce", "PriorityType", "PriorityWeight", "PriorityCalcPeriod", "PriorityDecayHalfLife"];
        let got: String = out
            .lines()
            .filter(|l| want_prefixes.iter().any(|p| l.starts_with(p)))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            got,
            "AccountingStorageEnforce = associations,limits,qos,safe\n\
             PriorityDecayHalfLife   = 7-00:00:00\n\
             PriorityCalcPeriod      = 00:01:00\n\
             PriorityType            = priority/multifactor\n\
             PriorityWeightAge       = 1000\n\
             PriorityWeightAssoc     = 0\n\
             PriorityWeightFairShare = 10000\n\
             PriorityWeightJobSize   = 1000\n\
             PriorityWeightPartition = 1000\n\
             PriorityWeightQOS       = 1000\n\
             PriorityWeightTRES      = CPU=1000,Mem=2000,GRES/gpu=3000\n"
        );
    }

    #[test]
    fn unreadable_config_is_an_error() {
        let env = |k: &str| (k == "SLURM_CONF").then(|| "/nonexistent/slurm.conf".to_string());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = show_config(
            None,
            &mut Io {
                out: &mut out,
                err: &mut err,
                env: &env,
                stdin: None,
            },
        );
        assert_eq!(code, 1);
        assert!(out.is_empty());
        let err = String::from_utf8(err).unwrap();
        assert!(err.starts_with("slurm_load_ctl_conf error: /nonexistent/slurm.conf"), "{err}");
    }
}
