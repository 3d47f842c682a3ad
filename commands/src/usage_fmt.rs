//! How Slurm 22.05 prints usage values (`sacct`, `sstat`, `seff`): CPU times as
//! `src/sacct/print.c`'s `_elapsed_time` (`[D-]HH:MM:SS`, or `MM:SS.mmm` under an hour when
//! there are microseconds), sizes as `convert_num_unit` (`src/common/slurm_protocol_api.c`)
//! with the `--units` and `--noconvert` choices.

/// Slurm's unit types (`UNIT_NONE` .. `UNIT_PETA`).
const SUFFIX: [&str; 6] = ["", "K", "M", "G", "T", "P"];

/// How sizes are converted (`params.units` and `params.convert_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Units {
    /// `--units=[KMGTP]`: convert to exactly this unit (1 = K, ..., 5 = P).
    pub spec: Option<u8>,
    /// `--noconvert`: print the raw number.
    pub no_convert: bool,
}

/// `get_unit_type`: `K`, `M`, `G`, `T`, `P` (either case); `None` otherwise (Slurm: `fatal:
/// Invalid unit type`).
pub fn unit_type(s: &str) -> Option<u8> {
    let c = s.chars().next()?.to_ascii_uppercase();
    SUFFIX.iter().position(|x| x.starts_with(c) && !x.is_empty()).map(|i| i as u8)
}

/// `convert_num_unit2(num, orig = UNIT_NONE, spec, divisor, flags)`: `0` for zero; with a
/// spec unit, scaled to it (two decimals when not whole); otherwise, exact (sacct's default:
/// divided while the value stays a multiple of half the divisor), or aggressive (`exact` false:
/// while it is at least the divisor).
pub fn convert(num: f64, units: Units, divisor: f64, exact: bool) -> String {
    if num as i64 == 0 {
        return "0".into();
    }
    let (mut n, mut unit) = (num, 0usize);
    if let Some(spec) = units.spec {
        while unit < usize::from(spec) {
            n /= divisor;
            unit += 1;
        }
    } else if units.no_convert {
    } else if exact {
        while n >= divisor && (n as u64) % ((divisor as u64) / 2) == 0 {
            n /= divisor;
            unit += 1;
        }
    } else {
        while n >= divisor {
            n /= divisor;
            unit += 1;
        }
    }
    let suffix = SUFFIX.get(unit).copied().unwrap_or("?");
    if (n as u64) as f64 == n {
        format!("{}{suffix}", n as u64)
    } else {
        format!("{n:.2}{suffix}")
    }
}

/// A size in bytes as sacct/sstat print `MaxRSS`, `AveRSS`, `MaxVMSize`, ...
pub fn bytes(v: u64, units: Units) -> String {
    convert(v as f64, units, 1024.0, true)
}

/// A memory size in MiB as sacct's `ReqMem` prints it with `--units` (`convert_num_unit` from
/// `UNIT_MEGA` to the unit asked for); `None` without `--units` (the caller's own form).
pub fn mib_in_units(mib: u64, units: Units) -> Option<String> {
    let spec = units.spec?;
    if mib == 0 {
        return Some("0".into());
    }
    let mut n = mib as f64;
    let mut unit = 2u8;
    while unit < spec {
        n /= 1024.0;
        unit += 1;
    }
    while unit > spec {
        n *= 1024.0;
        unit -= 1;
    }
    let suffix = SUFFIX[usize::from(unit)];
    Some(if (n as u64) as f64 == n { format!("{}{suffix}", n as u64) } else { format!("{n:.2}{suffix}") })
}

/// Energy (J) as `ConsumedEnergy`: divisor 1000, never exact.
pub fn energy(v: u64, units: Units) -> String {
    convert(v as f64, units, 1000.0, false)
}

/// `_elapsed_time(secs, usecs)` of sacct's print.c: `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS.mmm`
/// (under an hour, with a sub-second part), else `00:MM:SS`.
pub fn elapsed(secs: u64, usecs: u64) -> String {
    let (secs, usecs) = (secs + usecs / 1_000_000, usecs % 1_000_000);
    let sub = usecs / 1000;
    let (d, h, m, s) = (secs / 86_400, (secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else if sub > 0 {
        format!("{m:02}:{s:02}.{sub:03}")
    } else {
        format!("00:{m:02}:{s:02}")
    }
}

/// A CPU time in microseconds as `TotalCPU`/`UserCPU`/`SystemCPU` print it.
pub fn cpu_usec(us: u64) -> String {
    elapsed(us / 1_000_000, us % 1_000_000)
}

/// A CPU time in microseconds as `AveCPU`/`MinCPU` print it: whole seconds (Slurm keeps the
/// TRES in milliseconds and divides by `CPU_TIME_ADJ`).
pub fn cpu_secs(us: u64) -> String {
    elapsed(us / 1_000_000, 0)
}

/// The `TRESUsage*` fields of a step (Slurm's TRES usage strings over `cpu`, `energy`,
/// `fs/disk`, `mem`, `pages`, `vmem`, in that order): `In` values (`Ave`, `Max`, `Min`,
/// `Tot`), their nodes and tasks, and the `Out` ones (`energy`, `fs/disk`: not measured, 0).
/// `None` for another name.
pub fn tres_usage(name: &str, u: &flotilla_proto::StepStats, units: Units) -> Option<String> {
    let b = |v: u64| bytes(v, units);
    let per_task_cpu = u.total_usec / u64::from(u.ntasks.max(1));
    let vals = |cpu: u64, mem: u64, vmem: u64| {
        format!("cpu={},energy={},fs/disk=0,mem={},pages=0,vmem={}", cpu_secs(cpu), u.energy_j, b(mem), b(vmem))
    };
    let node = |n: &str, m: &str, v: &str| format!("cpu={n},energy={m},fs/disk={m},mem={m},pages={m},vmem={v}");
    let task = |cpu: u32, mem: u32| {
        format!("cpu={},fs/disk={mem},mem={},pages={mem},vmem={}", cpu_secs(u64::from(cpu) * 1000), b(u64::from(mem)), b(u64::from(mem)))
    };
    Some(match name {
        "TRESUsageInAve" => vals(u.ave_cpu_usec, u.ave_rss, u.ave_vmsize),
        "TRESUsageInMax" => vals(per_task_cpu.max(u.min_cpu_usec), u.max_rss, u.max_vmsize),
        "TRESUsageInMin" => vals(u.min_cpu_usec, u.max_rss.min(u.ave_rss), u.max_vmsize.min(u.ave_vmsize)),
        "TRESUsageInTot" => vals(u.total_usec, u.ave_rss * u64::from(u.ntasks.max(1)), u.ave_vmsize * u64::from(u.ntasks.max(1))),
        "TRESUsageInMaxNode" => node(&u.min_cpu_node, &u.max_rss_node, &u.max_vmsize_node),
        "TRESUsageInMinNode" => node(&u.min_cpu_node, &u.min_cpu_node, &u.min_cpu_node),
        // Task ids go through the TRES formatting too (Slurm prints the `cpu` one as a time).
        "TRESUsageInMaxTask" => task(u.min_cpu_task, u.max_rss_task),
        "TRESUsageInMinTask" => task(u.min_cpu_task, u.min_cpu_task),
        "TRESUsageOutAve" | "TRESUsageOutMax" | "TRESUsageOutMin" | "TRESUsageOutTot" => "energy=0,fs/disk=0".into(),
        "TRESUsageOutMaxNode" | "TRESUsageOutMinNode" => format!("energy={0},fs/disk={0}", u.max_rss_node),
        "TRESUsageOutMaxTask" | "TRESUsageOutMinTask" => format!("fs/disk={}", u.max_rss_task),
        _ => return None,
    })
}

/// The fields sacct and sstat print for what Flotilla does not measure (pages, disk I/O,
/// CPU frequency), as Slurm prints them for zero counters; `None` for another name.
pub fn unmeasured(name: &str, u: &flotilla_proto::StepStats) -> Option<String> {
    Some(match name {
        "AvePages" | "MaxPages" | "AveDiskRead" | "AveDiskWrite" | "MaxDiskRead" | "MaxDiskWrite" | "AveCPUFreq" => "0".into(),
        "MaxPagesNode" | "MaxDiskReadNode" | "MaxDiskWriteNode" => u.max_rss_node.clone(),
        "MaxPagesTask" | "MaxDiskReadTask" | "MaxDiskWriteTask" => u.max_rss_task.to_string(),
        "ReqCPUFreq" | "ReqCPUFreqMin" | "ReqCPUFreqMax" | "ReqCPUFreqGov" => "Unknown".into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_forms() {
        assert_eq!(elapsed(0, 0), "00:00:00");
        assert_eq!(elapsed(5, 0), "00:00:05");
        assert_eq!(elapsed(65, 123_456), "01:05.123");
        assert_eq!(elapsed(0, 2_500_000), "00:02.500");
        assert_eq!(elapsed(3600 + 61, 999_000), "01:01:01");
        assert_eq!(elapsed(2 * 86_400 + 3 * 3600 + 4 * 60 + 5, 7), "2-03:04:05");
        assert_eq!(cpu_usec(12_345_678), "00:12.345");
        assert_eq!(cpu_secs(12_345_678), "00:00:12");
        assert_eq!(elapsed(0, 400), "00:00:00", "under a millisecond: no sub-second part");
    }

    #[test]
    fn sizes_convert_exactly_by_default() {
        let u = Units::default();
        assert_eq!(bytes(0, u), "0");
        assert_eq!(bytes(209_715_200, u), "200M");
        assert_eq!(bytes(210_051_072, u), "205128K");
        assert_eq!(bytes(1536, u), "1.50K", "half values still convert");
        assert_eq!(bytes(1000, u), "1000");
        assert_eq!(bytes(3 << 30, u), "3G");
        let k = Units { spec: Some(1), ..Units::default() };
        assert_eq!(bytes(210_051_072, k), "205128K");
        let m = Units { spec: unit_type("m"), ..Units::default() };
        assert_eq!(bytes(210_051_072, m), "200.32M");
        let g = Units { spec: unit_type("G"), ..Units::default() };
        assert_eq!(bytes(3 << 30, g), "3G");
        let raw = Units { no_convert: true, ..Units::default() };
        assert_eq!(bytes(210_051_072, raw), "210051072");
        assert_eq!(unit_type("x"), None);
        assert_eq!(unit_type(""), None);
        assert_eq!(energy(0, u), "0");
        assert_eq!(energy(1500, u), "1.50K");
        // Goldens 0216/0217: ReqMem 1 GiB with --units=M and G.
        assert_eq!(mib_in_units(1024, Units { spec: Some(2), ..u }).as_deref(), Some("1024M"));
        assert_eq!(mib_in_units(1024, Units { spec: Some(3), ..u }).as_deref(), Some("1G"));
        assert_eq!(mib_in_units(1024, Units { spec: Some(1), ..u }).as_deref(), Some("1048576K"));
        assert_eq!(mib_in_units(1024, u), None);
    }
}
