//! `cgroup.conf`: the node daemon's confinement settings, read from the directory of
//! `slurm.conf` (Slurm cgroup.conf(5), 22.05). A missing file means every default.
//!
//! Syntax as Slurm's parser takes it: `Key=Value` pairs, several per line allowed, keys
//! case-insensitive, `#` to the end of the line a comment, values optionally in double quotes.
//! Booleans: `yes`/`true`/`up`/`1` and `no`/`false`/`down`/`0` (any case). Percentages are
//! decimal numbers (`101.5`; `INFINITE`/`UNLIMITED` = no bound); sizes are whole MiB (`0x`
//! hex, a `k` suffix multiplying by 1024 and `INFINITE` accepted, as Slurm's `uint64` values).
//!
//! Keys and defaults (Slurm 22.05 `src/common/cgroup.c`, `_clear_slurm_cgroup_conf`):
//!
//! | key | default | Flotilla |
//! |---|---|---|
//! | `CgroupPlugin` | `autodetect` | `cgroup/v1`, `cgroup/v2` or `autodetect` (`slurmd --cgroup auto`) |
//! | `CgroupMountpoint` | `/sys/fs/cgroup` | the confinement root |
//! | `CgroupAutomount` | no | accepted; Flotilla never mounts (warned when `yes`) |
//! | `ConstrainCores` | no | accepted; cores are not confined (warned when `yes`) |
//! | `ConstrainRAMSpace` | no | the job's memory limit is enforced only when `yes` |
//! | `AllowedRAMSpace` | 100 | hard limit, percent of the job's memory |
//! | `MaxRAMPercent` | 100 | upper bound, percent of the node's `RealMemory` |
//! | `MinRAMSpace` | 30 | lower bound of the limits, MiB |
//! | `ConstrainSwapSpace` | no | RAM+swap limit (`memory.memsw.limit_in_bytes`, v2 `memory.swap.max`) |
//! | `AllowedSwapSpace` | 0 | swap, percent of the job's memory |
//! | `MaxSwapPercent` | 100 | upper bound of the swap part, percent of `RealMemory` |
//! | `MemorySwappiness` | unset | v1 `memory.swappiness` with `ConstrainSwapSpace=yes` (above 100: 100, warned) |
//! | `ConstrainKmemSpace`, `AllowedKmemSpace`, `MaxKmemPercent`, `MinKmemSpace` | no, unset, 100, 30 | accepted; kernel memory is not limited (warned when `yes`) |
//! | `ConstrainDevices` | no | GPUs outside the job's allocation are denied only when `yes` |
//! | `IgnoreSystemd`, `IgnoreSystemdOnFailure` | no | accepted; Flotilla never calls systemd |
//! | `AllowedDevicesFile`, `MemoryLimitEnforcement`, `MemoryLimitThreshold` | | obsolete in Slurm: warned, ignored |
//! | `CgroupReleaseAgentDir` | | removed in Slurm (fatal there): an error |
//!
//! An unknown key, or a value that is not of the key's type, is an error naming file, line and
//! key (the daemon refuses to start, as Slurm's `fatal` does: a misspelt `ConstrainDevices`
//! must not leave jobs unconfined), never a panic.

use std::path::Path;

use thiserror::Error;

/// `CgroupPlugin`: which cgroup interface to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupPlugin {
    /// `autodetect`: what the host offers (v2 when its unified root has the memory
    /// controller, else v1).
    Autodetect,
    /// `cgroup/v1`.
    V1,
    /// `cgroup/v2`.
    V2,
}

/// The settings of `cgroup.conf` (Slurm's names; percentages in percent, sizes in MiB).
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupConf {
    /// `CgroupPlugin`.
    pub cgroup_plugin: CgroupPlugin,
    /// `CgroupMountpoint`, without a trailing `/`.
    pub cgroup_mountpoint: String,
    /// `CgroupAutomount`.
    pub cgroup_automount: bool,
    /// `ConstrainCores`.
    pub constrain_cores: bool,
    /// `ConstrainRAMSpace`.
    pub constrain_ram_space: bool,
    /// `AllowedRAMSpace`, percent of the job's memory.
    pub allowed_ram_space: f64,
    /// `MaxRAMPercent`, percent of the node's RealMemory.
    pub max_ram_percent: f64,
    /// `MinRAMSpace`, MiB.
    pub min_ram_space_mib: u64,
    /// `ConstrainSwapSpace`.
    pub constrain_swap_space: bool,
    /// `AllowedSwapSpace`, percent of the job's memory.
    pub allowed_swap_space: f64,
    /// `MaxSwapPercent`, percent of the node's RealMemory.
    pub max_swap_percent: f64,
    /// `MemorySwappiness` (0..=100).
    pub memory_swappiness: Option<u64>,
    /// `ConstrainKmemSpace`.
    pub constrain_kmem_space: bool,
    /// `AllowedKmemSpace` (bytes in Slurm's man page); `None`: unset.
    pub allowed_kmem_space: Option<f64>,
    /// `MaxKmemPercent`.
    pub max_kmem_percent: f64,
    /// `MinKmemSpace`, MiB.
    pub min_kmem_space_mib: u64,
    /// `ConstrainDevices`.
    pub constrain_devices: bool,
    /// `IgnoreSystemd`.
    pub ignore_systemd: bool,
    /// `IgnoreSystemdOnFailure` (implied by `IgnoreSystemd=yes`).
    pub ignore_systemd_on_failure: bool,
    /// Warnings of the parse (unknown, obsolete or not enforced keys), each `file:line: ...`.
    pub warnings: Vec<String>,
}

impl Default for CgroupConf {
    /// Slurm 22.05's defaults (no `cgroup.conf`).
    fn default() -> CgroupConf {
        CgroupConf {
            cgroup_plugin: CgroupPlugin::Autodetect,
            cgroup_mountpoint: "/sys/fs/cgroup".into(),
            cgroup_automount: false,
            constrain_cores: false,
            constrain_ram_space: false,
            allowed_ram_space: 100.0,
            max_ram_percent: 100.0,
            min_ram_space_mib: 30,
            constrain_swap_space: false,
            allowed_swap_space: 0.0,
            max_swap_percent: 100.0,
            memory_swappiness: None,
            constrain_kmem_space: false,
            allowed_kmem_space: None,
            max_kmem_percent: 100.0,
            min_kmem_space_mib: 30,
            constrain_devices: false,
            ignore_systemd: false,
            ignore_systemd_on_failure: false,
            warnings: Vec::new(),
        }
    }
}

/// A `cgroup.conf` that cannot be used.
#[derive(Debug, Error)]
pub enum CgroupConfError {
    /// The file exists but cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A line of the file is wrong: `file:line: message`.
    #[error("{file}:{line}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the key.
        message: String,
    },
}

/// The memory limits of one job cgroup, in bytes (what [`CgroupConf::memory_limits`] gives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Hard limit (`memory.limit_in_bytes`, v2 `memory.max`).
    pub limit_bytes: u64,
    /// Soft limit (`memory.soft_limit_in_bytes`, v2 `memory.high`), never above the hard one.
    pub soft_limit_bytes: u64,
    /// RAM+swap limit (`memory.memsw.limit_in_bytes`; v2 `memory.swap.max` is this minus
    /// the hard limit); `None` unless `ConstrainSwapSpace=yes`.
    pub memsw_limit_bytes: Option<u64>,
    /// `memory.swappiness` (v1), only with `ConstrainSwapSpace=yes`.
    pub swappiness: Option<u64>,
}

fn percent_in_bytes(mib: u64, percent: f64) -> u64 {
    // Saturating float-to-int conversion: an INFINITE percentage is no bound.
    ((mib as f64) * 1024.0 * 1024.0 * (percent / 100.0)) as u64
}

impl CgroupConf {
    /// The memory limits of a job with `job_mem_mib` of memory on this node (0: the job has
    /// no memory limit of its own) on a node of `real_memory_mib`, or `None` when cgroup.conf
    /// constrains neither RAM nor swap (Slurm then creates no memory limit at all).
    ///
    /// Slurm 22.05's rules (task/cgroup `task_cgroup_memory.c`): the hard limit is the job's
    /// memory × `AllowedRAMSpace` % (the node's RealMemory for a job without memory), at least
    /// `MinRAMSpace` MiB and at most `MaxRAMPercent` % of RealMemory; the soft limit the same
    /// with 100 %, capped at the hard one; RAM+swap is the hard limit plus the job's memory ×
    /// `AllowedSwapSpace` %, at least `MinRAMSpace` and at most (`MaxRAMPercent` +
    /// `MaxSwapPercent`) % of RealMemory. With `ConstrainRAMSpace=no` and
    /// `ConstrainSwapSpace=yes`, `AllowedRAMSpace` counts as 100 % and the hard limit is the
    /// RAM+swap limit.
    pub fn memory_limits(&self, job_mem_mib: u64, real_memory_mib: u64) -> Option<MemoryLimits> {
        if !self.constrain_ram_space && !self.constrain_swap_space {
            return None;
        }
        let allowed_ram = if self.constrain_ram_space { self.allowed_ram_space } else { 100.0 };
        let total = real_memory_mib;
        let max_ram = percent_in_bytes(total, self.max_ram_percent);
        let max_swap = percent_in_bytes(total, self.max_swap_percent).saturating_add(max_ram);
        let min_ram = self.min_ram_space_mib.saturating_mul(1024 * 1024);
        let limit = |percent: f64| -> u64 {
            let mem = if job_mem_mib == 0 { total.saturating_mul(1024 * 1024) } else { percent_in_bytes(job_mem_mib, percent) };
            if mem < min_ram {
                min_ram
            } else {
                mem.min(max_ram)
            }
        };
        let hard = limit(allowed_ram);
        let soft = limit(100.0).min(hard);
        let swap = percent_in_bytes(if job_mem_mib == 0 { total } else { job_mem_mib }, self.allowed_swap_space);
        let memsw = hard.saturating_add(swap);
        let memsw = if memsw < min_ram { min_ram } else { memsw.min(max_swap) };
        Some(MemoryLimits {
            limit_bytes: if self.constrain_ram_space { hard } else { memsw },
            soft_limit_bytes: soft,
            memsw_limit_bytes: self.constrain_swap_space.then_some(memsw),
            swappiness: if self.constrain_swap_space { self.memory_swappiness } else { None },
        })
    }
}

/// Removes a `#` comment (not one escaped as `\#`).
fn strip_comment(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            '#' => break,
            c => out.push(c),
        }
    }
    out
}

/// Splits a line into `Key=Value` words (a value may be quoted and hold spaces).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "up" | "true" | "1" => Some(true),
        "no" | "down" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// A percentage: a decimal number ≥ 0, or `INFINITE`/`UNLIMITED`.
fn parse_percent(v: &str) -> Option<f64> {
    if v.eq_ignore_ascii_case("infinite") || v.eq_ignore_ascii_case("unlimited") {
        return Some(f64::INFINITY);
    }
    let x: f64 = v.parse().ok()?;
    (x.is_finite() && x >= 0.0).then_some(x)
}

/// A size as Slurm's `uint64` values: decimal, `0x` hex or leading-`0` octal, an optional
/// `k`/`K` suffix (× 1024), or `INFINITE`/`UNLIMITED` (the largest value).
fn parse_u64(v: &str) -> Option<u64> {
    if v.eq_ignore_ascii_case("infinite") || v.eq_ignore_ascii_case("unlimited") {
        return Some(u64::MAX);
    }
    let (digits, mult) = match v.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1024),
        None => (v, 1),
    };
    let n = if let Some(h) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse().ok()?
    };
    n.checked_mul(mult)
}

/// Parses the text of a `cgroup.conf`; `file` names it in messages.
///
/// Errors: [`CgroupConfError::Parse`] for a word that is not `Key=Value`, a value not of its
/// key's type, or `CgroupReleaseAgentDir`.
pub fn parse_cgroup_conf(text: &str, file: &str) -> Result<CgroupConf, CgroupConfError> {
    let mut c = CgroupConf::default();
    let mut systemd_on_failure_set = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |message: String| CgroupConfError::Parse { file: file.to_string(), line, message };
        for word in words(&strip_comment(raw)) {
            let Some((key, value)) = word.split_once('=') else {
                return Err(err(format!("`{word}` is not Key=Value")));
            };
            let bool_of = |v: &str| parse_bool(v).ok_or_else(|| err(format!("{key}={v}: expected yes or no")));
            let pct_of = |v: &str| parse_percent(v).ok_or_else(|| err(format!("{key}={v}: expected a percentage (a number >= 0)")));
            let u64_of = |v: &str| parse_u64(v).ok_or_else(|| err(format!("{key}={v}: expected a whole number of MiB")));
            let warn = |w: &mut Vec<String>, m: String| w.push(format!("{file}:{line}: {m}"));
            match key.to_ascii_lowercase().as_str() {
                "cgroupplugin" => {
                    c.cgroup_plugin = match value.to_ascii_lowercase().as_str() {
                        "autodetect" => CgroupPlugin::Autodetect,
                        "cgroup/v1" => CgroupPlugin::V1,
                        "cgroup/v2" => CgroupPlugin::V2,
                        _ => return Err(err(format!("{key}={value}: expected cgroup/v1, cgroup/v2 or autodetect"))),
                    }
                }
                "cgroupmountpoint" => {
                    if !value.starts_with('/') {
                        return Err(err(format!("{key}={value}: expected an absolute path")));
                    }
                    let v = value.trim_end_matches('/');
                    c.cgroup_mountpoint = if v.is_empty() { "/".into() } else { v.into() };
                }
                "cgroupautomount" => {
                    c.cgroup_automount = bool_of(value)?;
                    if c.cgroup_automount {
                        warn(&mut c.warnings, format!("{key}=yes: Flotilla never mounts cgroup hierarchies; it uses what is mounted"));
                    }
                }
                "constraincores" => {
                    c.constrain_cores = bool_of(value)?;
                    if c.constrain_cores {
                        warn(&mut c.warnings, format!("{key}=yes: Flotilla does not confine cores (no cpuset); jobs may use every CPU of the node"));
                    }
                }
                "constrainramspace" => c.constrain_ram_space = bool_of(value)?,
                "allowedramspace" => c.allowed_ram_space = pct_of(value)?,
                "maxrampercent" => c.max_ram_percent = pct_of(value)?,
                "minramspace" => c.min_ram_space_mib = u64_of(value)?,
                "constrainswapspace" => c.constrain_swap_space = bool_of(value)?,
                "allowedswapspace" => c.allowed_swap_space = pct_of(value)?,
                "maxswappercent" => c.max_swap_percent = pct_of(value)?,
                "memoryswappiness" => {
                    let v = parse_u64(value).filter(|&v| v != u64::MAX).ok_or_else(|| err(format!("{key}={value}: expected a number from 0 to 100")))?;
                    if v > 100 {
                        warn(&mut c.warnings, format!("{key}={value} is above 100: 100 is used"));
                    }
                    c.memory_swappiness = Some(v.min(100));
                }
                "constrainkmemspace" => {
                    c.constrain_kmem_space = bool_of(value)?;
                    if c.constrain_kmem_space {
                        warn(&mut c.warnings, format!("{key}=yes: Flotilla does not limit kernel memory"));
                    }
                }
                "allowedkmemspace" => c.allowed_kmem_space = Some(pct_of(value)?),
                "maxkmempercent" => c.max_kmem_percent = pct_of(value)?,
                "minkmemspace" => c.min_kmem_space_mib = u64_of(value)?,
                "constraindevices" => c.constrain_devices = bool_of(value)?,
                "ignoresystemd" => c.ignore_systemd = bool_of(value)?,
                "ignoresystemdonfailure" => {
                    c.ignore_systemd_on_failure = bool_of(value)?;
                    systemd_on_failure_set = true;
                }
                "alloweddevicesfile" | "memorylimitenforcement" | "memorylimitthreshold" => {
                    warn(&mut c.warnings, format!("{key} is obsolete in Slurm and ignored; remove it"));
                }
                "cgroupreleaseagentdir" => {
                    return Err(err(format!("{key}: support for this option has been removed (Slurm 22.05 refuses it too); remove it")));
                }
                // Slurm's parser refuses an unknown key (`Parsing error at unrecognized key`)
                // and slurmd's `fatal` stops it: a misspelt constraint must not run jobs
                // unconfined.
                _ => return Err(err(format!("Parsing error at unrecognized key: {key}"))),
            }
        }
    }
    if c.ignore_systemd && !systemd_on_failure_set {
        c.ignore_systemd_on_failure = true;
    }
    Ok(c)
}

/// Reads `cgroup.conf` in the directory of `slurm_conf`; Slurm's defaults when there is none.
/// Messages name the file by that directory joined with `cgroup.conf`.
///
/// Errors: [`CgroupConfError::Io`] when the file exists but cannot be read, or
/// [`parse_cgroup_conf`]'s.
pub fn load_cgroup_conf(slurm_conf: &Path) -> Result<CgroupConf, CgroupConfError> {
    let p = slurm_conf.parent().unwrap_or(Path::new(".")).join("cgroup.conf");
    let name = p.display().to_string();
    match std::fs::read_to_string(&p) {
        Ok(text) => parse_cgroup_conf(&text, &name),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CgroupConf::default()),
        Err(source) => Err(CgroupConfError::Io { path: name, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CgroupConf, CgroupConfError> {
        parse_cgroup_conf(text, "cgroup.conf")
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn defaults_are_slurms() {
        let c = parse("").unwrap();
        assert_eq!(c, CgroupConf::default());
        assert_eq!(c.cgroup_plugin, CgroupPlugin::Autodetect);
        assert_eq!(c.cgroup_mountpoint, "/sys/fs/cgroup");
        assert!(!c.constrain_ram_space && !c.constrain_swap_space && !c.constrain_devices && !c.constrain_cores);
        assert_eq!((c.allowed_ram_space, c.max_ram_percent, c.min_ram_space_mib), (100.0, 100.0, 30));
        assert_eq!((c.allowed_swap_space, c.max_swap_percent), (0.0, 100.0));
        assert_eq!(c.memory_swappiness, None);
        assert_eq!(c.memory_limits(100, 4096), None, "nothing constrained: no memory limit");
        let tmp = std::env::temp_dir().join(format!("flotilla-cgconf-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        assert_eq!(load_cgroup_conf(&tmp.join("slurm.conf")).unwrap(), CgroupConf::default(), "no file: defaults");
        std::fs::write(tmp.join("cgroup.conf"), "ConstrainDevices=yes\n").unwrap();
        assert!(load_cgroup_conf(&tmp.join("slurm.conf")).unwrap().constrain_devices);
        std::fs::write(tmp.join("cgroup.conf"), "ConstrainDevices=yes\nConstrainDevice=yes\n").unwrap();
        let e = load_cgroup_conf(&tmp.join("slurm.conf")).unwrap_err().to_string();
        assert!(e.contains(":2") && e.contains("Parsing error at unrecognized key: ConstrainDevice"), "{e}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn each_key() {
        let c = parse(
            "# Slurm's example, and the rest\n\
             CgroupPlugin=cgroup/v1  CgroupMountpoint=/mnt/cg/\n\
             constrainramspace=YES AllowedRAMSpace=101.5 MaxRAMPercent=90 MinRAMSpace=64\n\
             ConstrainSwapSpace=true AllowedSwapSpace=50.5 MaxSwapPercent=10 MemorySwappiness=60\n\
             ConstrainKmemSpace=no AllowedKmemSpace=1000 MaxKmemPercent=80 MinKmemSpace=0x20\n\
             ConstrainDevices=1 ConstrainCores=up CgroupAutomount=\"yes\" # trailing comment\n\
             IgnoreSystemd=yes\n",
        )
        .unwrap();
        assert_eq!(c.cgroup_plugin, CgroupPlugin::V1);
        assert_eq!(c.cgroup_mountpoint, "/mnt/cg");
        assert!(c.constrain_ram_space && c.constrain_swap_space && c.constrain_devices && c.constrain_cores && c.cgroup_automount);
        assert_eq!((c.allowed_ram_space, c.max_ram_percent, c.min_ram_space_mib), (101.5, 90.0, 64));
        assert_eq!((c.allowed_swap_space, c.max_swap_percent, c.memory_swappiness), (50.5, 10.0, Some(60)));
        assert!(!c.constrain_kmem_space);
        assert_eq!((c.allowed_kmem_space, c.max_kmem_percent, c.min_kmem_space_mib), (Some(1000.0), 80.0, 32));
        assert!(c.ignore_systemd && c.ignore_systemd_on_failure, "IgnoreSystemd implies IgnoreSystemdOnFailure");
        // What Flotilla does not enforce is said, with the line.
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(c.warnings[0].starts_with("cgroup.conf:6: ConstrainCores=yes: Flotilla does not confine cores"), "{:?}", c.warnings);
        assert!(c.warnings[1].starts_with("cgroup.conf:6: CgroupAutomount=yes"), "{:?}", c.warnings);
        assert_eq!(parse("CgroupPlugin=cgroup/v2").unwrap().cgroup_plugin, CgroupPlugin::V2);
        assert_eq!(parse("CgroupPlugin=autodetect").unwrap().cgroup_plugin, CgroupPlugin::Autodetect);
        assert_eq!(parse("MaxRAMPercent=INFINITE").unwrap().max_ram_percent, f64::INFINITY);
        assert_eq!(parse("MinRAMSpace=1k").unwrap().min_ram_space_mib, 1024);
        assert_eq!(parse("MemorySwappiness=150").unwrap().memory_swappiness, Some(100));
        let w = parse("AllowedDevicesFile=/etc/slurm/allowed\nMemoryLimitEnforcement=yes\n").unwrap().warnings;
        assert_eq!(
            w,
            [
                "cgroup.conf:1: AllowedDevicesFile is obsolete in Slurm and ignored; remove it",
                "cgroup.conf:2: MemoryLimitEnforcement is obsolete in Slurm and ignored; remove it"
            ]
        );
        assert!(parse("IgnoreSystemd=yes IgnoreSystemdOnFailure=no").unwrap().ignore_systemd_on_failure.eq(&false));
        assert_eq!(parse("ConstrainDevices=yes\\#x").unwrap_err().to_string(), "cgroup.conf:1: ConstrainDevices=yes#x: expected yes or no");
    }

    #[test]
    fn bad_values_name_the_key_and_line() {
        assert_eq!(err("\nConstrainRAMSpace=maybe"), "cgroup.conf:2: ConstrainRAMSpace=maybe: expected yes or no");
        assert_eq!(err("AllowedRAMSpace=lots"), "cgroup.conf:1: AllowedRAMSpace=lots: expected a percentage (a number >= 0)");
        assert_eq!(err("AllowedRAMSpace=-5"), "cgroup.conf:1: AllowedRAMSpace=-5: expected a percentage (a number >= 0)");
        assert_eq!(err("MaxRAMPercent=NaN"), "cgroup.conf:1: MaxRAMPercent=NaN: expected a percentage (a number >= 0)");
        assert_eq!(err("MinRAMSpace=-1"), "cgroup.conf:1: MinRAMSpace=-1: expected a whole number of MiB");
        assert_eq!(err("MinRAMSpace=30M"), "cgroup.conf:1: MinRAMSpace=30M: expected a whole number of MiB");
        assert_eq!(err("MinRAMSpace=99999999999999999999"), "cgroup.conf:1: MinRAMSpace=99999999999999999999: expected a whole number of MiB");
        assert_eq!(err("MemorySwappiness=x"), "cgroup.conf:1: MemorySwappiness=x: expected a number from 0 to 100");
        assert_eq!(err("CgroupPlugin=cgroup/v3"), "cgroup.conf:1: CgroupPlugin=cgroup/v3: expected cgroup/v1, cgroup/v2 or autodetect");
        assert_eq!(err("CgroupMountpoint=relative"), "cgroup.conf:1: CgroupMountpoint=relative: expected an absolute path");
        assert_eq!(err("ConstrainDevices"), "cgroup.conf:1: `ConstrainDevices` is not Key=Value");
        assert_eq!(
            err("CgroupReleaseAgentDir=/etc/slurm/cgroup"),
            "cgroup.conf:1: CgroupReleaseAgentDir: support for this option has been removed (Slurm 22.05 refuses it too); remove it"
        );
        let tmp = std::env::temp_dir().join(format!("flotilla-cgconf-dir-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("cgroup.conf")).unwrap();
        let e = load_cgroup_conf(&tmp.join("slurm.conf")).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: ", tmp.join("cgroup.conf").display())), "{e}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    /// The cgroup.conf the node package installs parses without a warning and constrains
    /// GPUs and memory.
    #[test]
    fn the_packaged_cgroup_conf() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/conf/cgroup.conf");
        let c = parse_cgroup_conf(&std::fs::read_to_string(&p).unwrap(), "cgroup.conf").unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert!(c.constrain_devices && c.constrain_ram_space && !c.constrain_swap_space);
        assert_eq!(c.cgroup_plugin, CgroupPlugin::Autodetect);
    }

    #[test]
    fn memory_limits_follow_slurms_rules() {
        let ram = parse("ConstrainRAMSpace=yes").unwrap();
        // 100 % of the job's memory; soft = hard; no swap limit.
        assert_eq!(
            ram.memory_limits(100, 4096),
            Some(MemoryLimits { limit_bytes: 100 * MIB, soft_limit_bytes: 100 * MIB, memsw_limit_bytes: None, swappiness: None })
        );
        // MinRAMSpace (30 MiB) below, MaxRAMPercent above, RealMemory for a job without memory.
        assert_eq!(ram.memory_limits(10, 4096).unwrap().limit_bytes, 30 * MIB);
        assert_eq!(ram.memory_limits(0, 4096).unwrap().limit_bytes, 4096 * MIB);
        let c = parse("ConstrainRAMSpace=yes AllowedRAMSpace=150 MaxRAMPercent=50").unwrap();
        let l = c.memory_limits(1000, 4096).unwrap();
        assert_eq!((l.limit_bytes, l.soft_limit_bytes), (1500 * MIB, 1000 * MIB));
        assert_eq!(c.memory_limits(3000, 4096).unwrap().limit_bytes, 2048 * MIB, "MaxRAMPercent caps it");
        let c = parse("ConstrainRAMSpace=yes AllowedRAMSpace=50").unwrap();
        let l = c.memory_limits(1000, 4096).unwrap();
        assert_eq!((l.limit_bytes, l.soft_limit_bytes), (500 * MIB, 500 * MIB), "soft never above hard");
        // Swap: hard + AllowedSwapSpace %, capped at (MaxRAMPercent + MaxSwapPercent) %.
        let c = parse("ConstrainRAMSpace=yes ConstrainSwapSpace=yes AllowedSwapSpace=50 MemorySwappiness=10").unwrap();
        let l = c.memory_limits(1000, 4096).unwrap();
        assert_eq!((l.limit_bytes, l.memsw_limit_bytes, l.swappiness), (1000 * MIB, Some(1500 * MIB), Some(10)));
        let c = parse("ConstrainRAMSpace=yes ConstrainSwapSpace=yes AllowedSwapSpace=50 MaxSwapPercent=1").unwrap();
        assert_eq!(c.memory_limits(4000, 4096).unwrap().memsw_limit_bytes, Some(4096 * MIB + 4096 * MIB / 100));
        // Swap only: AllowedRAMSpace counts as 100 % and the hard limit is RAM+swap.
        let c = parse("ConstrainSwapSpace=yes AllowedRAMSpace=10 AllowedSwapSpace=20").unwrap();
        let l = c.memory_limits(1000, 4096).unwrap();
        assert_eq!((l.limit_bytes, l.soft_limit_bytes, l.memsw_limit_bytes), (1200 * MIB, 1000 * MIB, Some(1200 * MIB)));
        // RAM constrained, AllowedRAMSpace ignored unless ConstrainRAMSpace=yes.
        assert_eq!(parse("AllowedRAMSpace=10").unwrap().memory_limits(1000, 4096), None);
    }
}
