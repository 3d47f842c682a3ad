//! Resource usage of steps (Slurm's `jobacct_gather/cgroup`, and `jobacct_gather/linux` for
//! unconfined nodes): CPU time and memory peak, read at a step's end and on the poll interval
//! (`JobAcctGatherFrequency`), reported to the controller as
//! [`flotilla_proto::NodeToCtl::StepUsage`].
//!
//! Sources, per confinement:
//! - cgroup v1: `cpuacct.usage` (ns, the total), `cpuacct.stat` `user`/`system` (USER_HZ
//!   ticks) in the step's `cpuacct` cgroup, and `memory.max_usage_in_bytes` in its `memory`
//!   cgroup. A node without a `cpuacct` hierarchy (the controller is optional,
//!   [`crate::confine::v1::OPTIONAL`]) has CPU times 0 there: they come from the processes
//!   instead (below), the memory peak still from the cgroup. On the cgroup test hosts
//!   `cpuacct` is mounted (alone, at `/sys/fs/cgroup/cpuacct`).
//! - cgroup v2: `cpu.stat` `usage_usec`/`user_usec`/`system_usec`, `memory.peak` (kernels
//!   ≥ 5.19; older ones have only `memory.current`, read instead, so a poll sees the level,
//!   not the peak).
//! - unconfined (`--cgroup none`): the processes themselves. The batch step: the
//!   supervisor's `getrusage(RUSAGE_CHILDREN)` once the script ended (it is a subreaper, so
//!   every process of the job was its reaped descendant; `ru_maxrss` is the largest one's
//!   peak). An `srun` task: its zombie's `/proc/PID/stat` (`utime`+`cutime`,
//!   `stime`+`cstime`) before it is reaped, and the largest `VmHWM` seen by the polls while
//!   it ran (a zombie has no memory left to read). Polls: `/proc/PID/stat` and
//!   `/proc/PID/status` (`VmHWM`, `VmPeak`) of the live processes.
//!
//! Every reader is a pure parser over the files' text plus a thin function that reads the
//! files; missing files give zeros, never an error (usage is informational).

use flotilla_proto::{StepUsage, Usage};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Reports waiting to be sent: pushed by step threads at a step's end, drained by the
/// daemon's loop (kept while the controller is unreachable; the newest 4096 at most). Each
/// push gets a sequence number; [`Outbox::wait_sent`] waits (bounded) until the daemon has
/// handed that report to the controller session, so that a step's end report goes out before
/// `srun` hears of the step's last task exit (and reports the step complete).
#[derive(Debug, Clone, Default)]
pub struct Outbox(Arc<(Mutex<OutboxState>, std::sync::Condvar)>);

#[derive(Debug, Default)]
struct OutboxState {
    queue: Vec<(u64, StepUsage)>,
    next: u64,
    /// Every report with a lower number was sent (or dropped).
    sent_below: u64,
}

impl Outbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, OutboxState> {
        self.0 .0.lock().expect("usage outbox lock")
    }

    /// Queues a report; returns its number.
    pub fn push(&self, u: StepUsage) -> u64 {
        let mut st = self.lock();
        if st.queue.len() >= 4096 {
            st.queue.remove(0);
        }
        let n = st.next;
        st.next += 1;
        st.queue.push((n, u));
        n
    }

    /// Takes every queued report.
    pub fn take(&self) -> Vec<(u64, StepUsage)> {
        std::mem::take(&mut self.lock().queue)
    }

    /// Puts reports back in front (not sent).
    pub fn unshift(&self, mut back: Vec<(u64, StepUsage)>) {
        let mut st = self.lock();
        back.append(&mut st.queue);
        st.queue = back;
    }

    /// Reports up to number `n` (excluded) are sent.
    pub fn sent_below(&self, n: u64) {
        let mut st = self.lock();
        st.sent_below = st.sent_below.max(n);
        self.0 .1.notify_all();
    }

    /// Waits until report `n` was sent, at most `timeout`; true when it was.
    pub fn wait_sent(&self, n: u64, timeout: Duration) -> bool {
        let st = self.lock();
        let (st, _) = self.0 .1.wait_timeout_while(st, timeout, |s| s.sent_below <= n).expect("usage outbox lock");
        st.sent_below > n
    }
}

/// How often [`PeakSampler`] reads the tasks' memory peaks.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// Samples the memory high-water marks (`VmHWM`, `VmPeak`) of an unconfined step's task
/// processes while they run, keeping the largest seen per task. The kernel's marks never
/// decrease, so a sample taken any time after the peak and before the exit sees it exactly; a
/// task that exits within [`SAMPLE_EVERY`] of its peak may be under-reported.
#[derive(Debug)]
pub struct PeakSampler {
    peaks: Arc<Mutex<BTreeMap<u32, (u64, u64)>>>,
    stop: Arc<AtomicBool>,
}

impl PeakSampler {
    /// Starts sampling `(task id, pid)`.
    pub fn start(tasks: Vec<(u32, i32)>) -> PeakSampler {
        let peaks: Arc<Mutex<BTreeMap<u32, (u64, u64)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (p, st) = (Arc::clone(&peaks), Arc::clone(&stop));
        let sample = move || {
            for &(id, pid) in &tasks {
                let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let (_, hwm, _, vm) = parse_proc_status(&text);
                let mut m = p.lock().expect("peaks lock");
                let e = m.entry(id).or_default();
                *e = (e.0.max(hwm), e.1.max(vm));
            }
        };
        sample();
        let _ = std::thread::Builder::new().name("usage-peaks".into()).spawn(move || {
            while !st.load(Ordering::Acquire) {
                std::thread::sleep(SAMPLE_EVERY);
                sample();
            }
        });
        PeakSampler { peaks, stop }
    }

    /// The largest `(RSS, virtual size)` seen of task `id` (bytes).
    pub fn peak(&self, id: u32) -> (u64, u64) {
        self.peaks.lock().expect("peaks lock").get(&id).copied().unwrap_or_default()
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Clock ticks per second of `cpuacct.stat` and `/proc/PID/stat`: Linux's `USER_HZ`, which
/// the kernel keeps at 100 for user space on every architecture it exports these files on.
pub const USER_HZ: u64 = 100;

/// The value of `key` in a `key value` per line file (`cpuacct.stat`, `cpu.stat`).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// A single number file (`cpuacct.usage`, `memory.peak`); `max` and garbage read as `None`.
pub fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// v1: `(cpuacct.usage, cpuacct.stat, memory.max_usage_in_bytes)` texts to usage, `hz` the
/// ticks of `cpuacct.stat`.
pub fn parse_v1(usage: &str, stat: &str, max_usage: &str, hz: u64) -> Usage {
    let tick_us = 1_000_000 / hz.max(1);
    let user = keyed(stat, "user").unwrap_or(0) * tick_us;
    let system = keyed(stat, "system").unwrap_or(0) * tick_us;
    let total = number(usage).map_or(user + system, |ns| ns / 1000);
    Usage {
        user_usec: user,
        system_usec: system,
        total_usec: total,
        max_rss: number(max_usage).unwrap_or(0),
        ntasks: 1,
        ..Usage::default()
    }
}

/// v2: `(cpu.stat, memory.peak or memory.current)` texts to usage.
pub fn parse_v2(cpu_stat: &str, peak: &str) -> Usage {
    let user = keyed(cpu_stat, "user_usec").unwrap_or(0);
    let system = keyed(cpu_stat, "system_usec").unwrap_or(0);
    Usage {
        user_usec: user,
        system_usec: system,
        total_usec: keyed(cpu_stat, "usage_usec").unwrap_or(user + system),
        max_rss: number(peak).unwrap_or(0),
        ntasks: 1,
        ..Usage::default()
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Reads a v1 step cgroup: `memory` its memory controller directory, `cpuacct` its cpuacct
/// one (`None`: not mounted, CPU times 0).
pub fn read_v1(memory: &Path, cpuacct: Option<&Path>) -> Usage {
    let (usage, stat) = cpuacct.map_or((String::new(), String::new()), |d| {
        (read(&d.join("cpuacct.usage")), read(&d.join("cpuacct.stat")))
    });
    parse_v1(&usage, &stat, &read(&memory.join("memory.max_usage_in_bytes")), USER_HZ)
}

/// Reads a v2 step cgroup directory.
pub fn read_v2(dir: &Path) -> Usage {
    let peak = match std::fs::read_to_string(dir.join("memory.peak")) {
        Ok(t) => t,
        Err(_) => read(&dir.join("memory.current")),
    };
    parse_v2(&read(&dir.join("cpu.stat")), &peak)
}

/// One process from `/proc/PID/stat`: CPU ticks of its own (`utime`, `stime`) and of its
/// reaped children (`cutime`, `cstime`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// User ticks.
    pub utime: u64,
    /// System ticks.
    pub stime: u64,
    /// User ticks of reaped children.
    pub cutime: u64,
    /// System ticks of reaped children.
    pub cstime: u64,
}

/// Parses a `/proc/PID/stat` line (`pid (comm) state ppid ...`: fields 14 to 17).
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the comm: field 3 (state) is f[0], so field n is f[n - 3].
    let at = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some(ProcStat {
        utime: at(14)?,
        stime: at(15)?,
        cutime: at(16)?,
        cstime: at(17)?,
    })
}

/// `VmRSS`, `VmHWM` (peak RSS), `VmSize` and `VmPeak` of a `/proc/PID/status` text, in bytes
/// (the file gives kB).
pub fn parse_proc_status(text: &str) -> (u64, u64, u64, u64) {
    let kb = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS"), kb("VmHWM"), kb("VmSize"), kb("VmPeak"))
}

/// The usage of live (or zombie) process `pid`: its CPU and its reaped children's, its peak
/// RSS and virtual size (0 for a zombie, which has no memory left).
pub fn proc_usage(pid: i32) -> Option<Usage> {
    let stat = parse_proc_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let (_, hwm, _, peak) = parse_proc_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default());
    let tick_us = 1_000_000 / USER_HZ;
    let user = (stat.utime + stat.cutime) * tick_us;
    let system = (stat.stime + stat.cstime) * tick_us;
    Some(Usage {
        user_usec: user,
        system_usec: system,
        total_usec: user + system,
        max_rss: hwm,
        max_vmsize: peak,
        ntasks: 1,
        ..Usage::default()
    })
}

/// The live usage of processes `pids` (a poll of an unconfined step): CPU times and peaks
/// summed (the processes run at once).
pub fn procs_usage(pids: &[i32]) -> Usage {
    let mut u = Usage {
        ntasks: 1,
        ..Usage::default()
    };
    for p in pids.iter().filter_map(|&pid| proc_usage(pid)) {
        u.user_usec += p.user_usec;
        u.system_usec += p.system_usec;
        u.total_usec += p.total_usec;
        u.max_rss += p.max_rss;
        u.max_vmsize += p.max_vmsize;
    }
    u
}

fn tv_usec(t: nix::sys::time::TimeVal) -> u64 {
    (t.tv_sec().max(0) as u64) * 1_000_000 + t.tv_usec().max(0) as u64
}

/// `getrusage(RUSAGE_CHILDREN)`: every reaped descendant of this process (the batch
/// supervisor is a subreaper, so the whole job tree once it ended); `ru_maxrss` (KiB) is the
/// largest single descendant's peak.
pub fn children_usage() -> Usage {
    let Ok(r) = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) else {
        return Usage::default();
    };
    let user = tv_usec(r.user_time());
    let system = tv_usec(r.system_time());
    Usage {
        user_usec: user,
        system_usec: system,
        total_usec: user + system,
        max_rss: (r.max_rss().max(0) as u64) * 1024,
        ntasks: 1,
        ..Usage::default()
    }
}

/// Folds the per-task usage of a step on this node into one report: CPU summed, the largest
/// peak with its task index, the lowest CPU time with its task.
pub fn fold_tasks(tasks: &[(u32, Usage)]) -> Usage {
    let mut out = Usage::default();
    for (i, (task, u)) in tasks.iter().enumerate() {
        out.user_usec += u.user_usec;
        out.system_usec += u.system_usec;
        out.total_usec += u.total_usec;
        if i == 0 || u.max_rss > out.max_rss {
            out.max_rss = u.max_rss;
            out.max_rss_task = *task;
        }
        out.max_vmsize = out.max_vmsize.max(u.max_vmsize);
        if i == 0 || u.total_usec < out.min_cpu_usec {
            out.min_cpu_usec = u.total_usec;
            out.min_cpu_task = *task;
        }
    }
    out.ntasks = tasks.len() as u32;
    out
}

/// `JobAcctGatherFrequency` (slurm.conf, as kept in `raw`): `N`, or `task=N` among
/// `energy=`, `network=`, `filesystem=`; 0 disables polling. Default 30 s (Slurm's).
pub fn gather_frequency(raw: &[(String, String)]) -> u64 {
    let Some((_, v)) = raw.iter().find(|(k, _)| k.eq_ignore_ascii_case("JobAcctGatherFrequency")) else {
        return 30;
    };
    parse_frequency(v).unwrap_or(30)
}

/// Parses a `JobAcctGatherFrequency` value (`30`, `task=10,energy=0`); `None` when malformed.
pub fn parse_frequency(v: &str) -> Option<u64> {
    let v = v.trim();
    if let Ok(n) = v.parse() {
        return Some(n);
    }
    for part in v.split(',') {
        let (k, n) = part.split_once('=')?;
        if k.trim().eq_ignore_ascii_case("task") {
            return n.trim().parse().ok();
        }
    }
    // Other kinds only: the task default.
    Some(30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_files_parse_to_microseconds_and_bytes() {
        let u = parse_v1("12345678901\n", "user 1100\nsystem 134\n", "209715200\n", 100);
        assert_eq!(u.user_usec, 11_000_000);
        assert_eq!(u.system_usec, 1_340_000);
        assert_eq!(u.total_usec, 12_345_678);
        assert_eq!(u.max_rss, 209_715_200);
        // No cpuacct: the total is user + system, here 0.
        let u = parse_v1("", "", "4096", 100);
        assert_eq!((u.total_usec, u.max_rss), (0, 4096));
    }

    #[test]
    fn v2_files_parse() {
        let stat = "usage_usec 5000123\nuser_usec 4000000\nsystem_usec 1000123\nnr_periods 0\n";
        let u = parse_v2(stat, "314572800\n");
        assert_eq!((u.total_usec, u.user_usec, u.system_usec, u.max_rss), (5_000_123, 4_000_000, 1_000_123, 314_572_800));
        assert_eq!(parse_v2("", "max\n").max_rss, 0);
    }

    #[test]
    fn v2_reads_the_fake_cgroup_dir() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("cpu.stat"), "usage_usec 7\nuser_usec 5\nsystem_usec 2\n").unwrap();
        std::fs::write(tmp.path().join("memory.current"), "100\n").unwrap();
        assert_eq!(read_v2(tmp.path()).max_rss, 100, "memory.current without memory.peak");
        std::fs::write(tmp.path().join("memory.peak"), "300\n").unwrap();
        let u = read_v2(tmp.path());
        assert_eq!((u.total_usec, u.max_rss), (7, 300));
    }

    #[test]
    fn proc_stat_with_spaces_and_parens_in_comm() {
        let line = "4242 (my (odd) prog) R 1 4242 4242 0 -1 4194560 100 0 0 0 250 30 12 3 20 0 1 0 99 123456789 512 1";
        let s = parse_proc_stat(line).unwrap();
        assert_eq!(s, ProcStat { utime: 250, stime: 30, cutime: 12, cstime: 3 });
        assert_eq!(parse_proc_stat("garbage"), None);
        let status = "Name:\tx\nVmPeak:\t  20000 kB\nVmSize:\t  10000 kB\nVmHWM:\t    3000 kB\nVmRSS:\t    2000 kB\n";
        assert_eq!(parse_proc_status(status), (2000 * 1024, 3000 * 1024, 10000 * 1024, 20000 * 1024));
        let me = procs_usage(&[std::process::id() as i32]);
        assert!(me.max_rss > 0 && me.max_vmsize >= me.max_rss, "{me:?}");
    }

    #[test]
    fn tasks_fold_with_peak_and_min_task() {
        let t = |cpu, rss| Usage { user_usec: cpu, total_usec: cpu, max_rss: rss, ntasks: 1, ..Usage::default() };
        let u = fold_tasks(&[(4, t(10, 5)), (5, t(3, 50)), (6, t(7, 20))]);
        assert_eq!((u.total_usec, u.max_rss, u.max_rss_task), (20, 50, 5));
        assert_eq!((u.min_cpu_usec, u.min_cpu_task, u.ntasks), (3, 5, 3));
    }

    #[test]
    fn outbox_numbers_and_waits_for_the_send() {
        let o = Outbox::default();
        let r = StepUsage { job_id: 1, run: 0, step: "0".into(), node: "n".into(), usage: Usage::default(), done: true, at: 0, exit: None };
        let (a, b) = (o.push(r.clone()), o.push(r));
        assert_eq!((a, b), (0, 1));
        assert!(!o.wait_sent(a, Duration::from_millis(10)), "not sent yet");
        let got = o.take();
        assert_eq!(got.len(), 2);
        o.unshift(got[1..].to_vec());
        let sender = o.clone();
        let t = std::thread::spawn(move || sender.sent_below(a + 1));
        assert!(o.wait_sent(a, Duration::from_secs(10)));
        t.join().unwrap();
        assert!(!o.wait_sent(b, Duration::from_millis(10)));
        assert_eq!(o.take().len(), 1);
    }

    #[test]
    fn frequency_forms() {
        assert_eq!(parse_frequency("30"), Some(30));
        assert_eq!(parse_frequency("task=10,energy=0"), Some(10));
        assert_eq!(parse_frequency("energy=5"), Some(30));
        assert_eq!(parse_frequency("task"), None);
        assert_eq!(gather_frequency(&[]), 30);
        assert_eq!(gather_frequency(&[("JobAcctGatherFrequency".into(), "task=2".into())]), 2);
        assert_eq!(gather_frequency(&[("JobAcctGatherFrequency".into(), "0".into())]), 0);
    }

    #[test]
    fn reaped_children_count_their_cpu() {
        let before = children_usage();
        let st = std::process::Command::new("sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
            .status()
            .unwrap();
        assert!(st.success());
        let after = children_usage();
        assert!(after.total_usec > before.total_usec + 10_000, "{before:?} {after:?}");
        assert!(after.max_rss > 0);
    }
}
