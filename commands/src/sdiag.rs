//! `sdiag`, as Slurm 22.05's (`src/sdiag/sdiag.c` `_print_stats`, `_sort_rpc`; `opts.c`):
//! the controller's statistics label for label ([`flotilla_proto::diag::Diag`]), then
//! Flotilla's own section; `-r`/`--reset` resets them (root and `SlurmUser` only).
//!
//! Output shape (the golden `0109_sdiag_idle` of compat-tests/goldens/accounting): a banner
//! with the request time and the start of the data (`Wed Dec 02 04:26:19 2026 (1796185579)`,
//! `slurm_ctime2`: the day of the month zero-padded, local time — the commands run with
//! `TZ=UTC`), the thread and agent counts, the job counters, the main scheduler's and the
//! backfill's statistics (mean lines only once a cycle ran; "Cycles per minute" only when
//! the data span more than a minute), the clock latency, the RPC tables by message type and
//! by user (sorted by count, or `-i` by id, `-t` by total time; `-T` sorts the average-time
//! column on its own, as 22.05 does), "Pending RPC statistics". Errors: `slurm_get_statistics:
//! <error>` or `slurm_reset_statistics: <error>` on stderr, exit 255 (Slurm exits with
//! `SLURM_ERROR`).

use crate::common::{self, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use flotilla_core::time::civil;
use flotilla_proto::diag::{Diag, FlotillaDiag};
use flotilla_proto::{Request, Response};

const fn c(ch: char) -> u32 {
    ch as u32
}
const O_USAGE: u32 = 0x100;
const O_JSON: u32 = 0x101;
const O_YAML: u32 = 0x102;

/// sdiag's getopt string (Slurm 22.05 `opts.c`).
pub const SHORTS: &str = "ahiM:rtTV";
/// sdiag's long options (Slurm 22.05 `opts.c`).
pub const LONGS: &[LongOpt] = &[
    lo("all", HasArg::No, c('a')),
    lo("help", HasArg::No, c('h')),
    lo("reset", HasArg::No, c('r')),
    lo("sort-by-id", HasArg::No, c('i')),
    lo("cluster", HasArg::Required, c('M')),
    lo("clusters", HasArg::Required, c('M')),
    lo("sort-by-time", HasArg::No, c('t')),
    lo("sort-by-time2", HasArg::No, c('T')),
    lo("usage", HasArg::No, O_USAGE),
    lo("version", HasArg::No, c('V')),
    // Flotilla: 22.05's sdiag has no --json/--yaml.
    lo("json", HasArg::No, O_JSON),
    lo("yaml", HasArg::No, O_YAML),
];

const HELP: &str = "\
Usage: sdiag [OPTIONS]
  -a, --all           all statistics
  -r, --reset         reset statistics
  -M, --cluster       direct the request to a specific cluster
  -i, --sort-by-id    sort RPCs by id
  -t, --sort-by-time  sort RPCs by total run time
  -T, --sort-by-time2 sort RPCs by average run time
  -V, --version       display current version number

Help options:
  --help          show this help message
  --usage         display brief usage message
";

/// How the RPC tables are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// By count, largest first (the default).
    Count,
    /// By message type id / uid, smallest first (`-i`).
    Id,
    /// By total time, largest first (`-t`).
    Time,
    /// `-T`: 22.05 sorts the average-time column alone, largest first, leaving the rows.
    Time2,
}

/// `sdiag ARGS`; returns the exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    let p = match getopt_long("sdiag", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(m) => {
            io.err(&format!("{m}\nTry \"sdiag --help\" for more information\n"));
            return 1;
        }
    };
    let (mut reset, mut sort) = (false, Sort::Count);
    let mut mime = None;
    for o in &p.opts {
        match o.id {
            x if x == c('a') => reset = false,
            x if x == c('h') => {
                io.out(HELP);
                return 0;
            }
            x if x == c('i') => sort = Sort::Id,
            x if x == c('r') => reset = true,
            x if x == c('t') => sort = Sort::Time,
            x if x == c('T') => sort = Sort::Time2,
            x if x == c('V') => {
                io.out(&format!("{}\n", crate::sbatch::VERSION_LINE));
                return 0;
            }
            O_JSON => mime = Some(crate::json_out::Mime::Json),
            O_YAML => mime = Some(crate::json_out::Mime::Yaml),
            O_USAGE => {
                io.out("Usage: sdiag [-M cluster] [-aritT]\n");
                return 0;
            }
            // -M: one cluster, this one.
            _ => {}
        }
    }
    let (what, req) = if reset {
        ("slurm_reset_statistics", Request::DiagReset)
    } else {
        ("slurm_get_statistics", Request::Diag)
    };
    let answer = Ctl::new(io.env).and_then(|ctl| ctl.call(req));
    match answer {
        Ok(Response::Diag(_)) if reset => {
            io.out("Reset scheduling statistics\n");
            0
        }
        Ok(Response::Diag(d)) => {
            match mime {
                Some(m) => io.out(&crate::json_out::render(&crate::json_out::diag_doc(&d, &|u| Some(common::user_name(u))), m)),
                None => io.out(&render(&d, sort, &common::user_name)),
            }
            0
        }
        Ok(_) => {
            io.err(&format!("{what}: Unexpected message received\n"));
            255
        }
        Err(e) => {
            io.err(&format!("{what}: {}\n", e.slurm().text));
            255
        }
    }
}

/// `Wed Dec 02 04:26:19 2026` (`slurm_ctime2`) for `t` seconds since the epoch, UTC.
pub fn ctime2(t: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][t.div_euclid(86_400).rem_euclid(7) as usize];
    let mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][mo as usize - 1];
    format!("{wd} {mon} {d:02} {h:02}:{mi:02}:{s:02} {y}")
}

/// One RPC table row: (name, id, count, average, total).
type Row = (String, u64, u64, u64, u64);

/// Sorts `rows` as 22.05's `_sort_rpc` does: an exchange sort over the rows in the
/// controller's order (so equal keys keep Slurm's order), then the averages.
fn sort_rows(rows: &mut [Row], sort: Sort) {
    let n = rows.len();
    for i in 0..n {
        for j in i + 1..n {
            let swap = match sort {
                Sort::Count => rows[i].2 < rows[j].2,
                Sort::Id => rows[i].1 > rows[j].1,
                Sort::Time => rows[i].4 < rows[j].4,
                Sort::Time2 => false,
            };
            if swap {
                rows.swap(i, j);
            }
        }
    }
    if sort == Sort::Time2 {
        let mut aves: Vec<u64> = rows.iter().map(|r| r.3).collect();
        aves.sort_unstable_by(|a, b| b.cmp(a));
        for (r, a) in rows.iter_mut().zip(aves) {
            r.3 = a;
        }
    }
}

/// The text `sdiag` prints for `d`; `name_of` gives a uid's user name (the uid as digits
/// when unknown).
pub fn render(d: &Diag, sort: Sort, name_of: &dyn Fn(u32) -> String) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let stars = "*******************************************************\n";
    o.push_str(stars);
    let _ = writeln!(o, "sdiag output at {} ({})", ctime2(d.req_time), d.req_time);
    let _ = writeln!(o, "Data since      {} ({})", ctime2(d.req_time_start), d.req_time_start);
    o.push_str(stars);
    let _ = writeln!(o, "Server thread count:  {}", d.server_thread_count);
    let _ = writeln!(o, "Agent queue size:     {}", d.agent_queue_size);
    let _ = writeln!(o, "Agent count:          {}", d.agent_count);
    let _ = writeln!(o, "Agent thread count:   {}", d.agent_thread_count);
    let _ = writeln!(o, "DBD Agent queue size: {}\n", d.dbd_agent_queue_size);
    let _ = writeln!(o, "Jobs submitted: {}", d.jobs_submitted);
    let _ = writeln!(o, "Jobs started:   {}", d.jobs_started);
    let _ = writeln!(o, "Jobs completed: {}", d.jobs_completed);
    let _ = writeln!(o, "Jobs canceled:  {}", d.jobs_canceled);
    let _ = writeln!(o, "Jobs failed:    {}\n", d.jobs_failed);
    let _ = writeln!(o, "Job states ts:  {} ({})", ctime2(d.job_states_ts), d.job_states_ts);
    let _ = writeln!(o, "Jobs pending:   {}", d.jobs_pending);
    let _ = writeln!(o, "Jobs running:   {}", d.jobs_running);
    main_sched(&mut o, d);
    backfill(&mut o, d);
    let _ = writeln!(o, "\nLatency for 1000 calls to gettimeofday(): {} microseconds", d.gettimeofday_latency);
    let ave = |total: u64, count: u64| total.checked_div(count).unwrap_or(0);
    let mut types: Vec<Row> = d
        .rpc_types
        .iter()
        .map(|r| (r.name.clone(), u64::from(r.id), r.count, ave(r.total_time, r.count), r.total_time))
        .collect();
    sort_rows(&mut types, sort);
    o.push_str("\nRemote Procedure Call statistics by message type\n");
    for (name, id, count, ave, total) in &types {
        let _ = writeln!(o, "\t{name:<40}({id:>5}) count:{count:<6} ave_time:{ave:<6} total_time:{total}");
    }
    let mut users: Vec<Row> = d
        .rpc_users
        .iter()
        .map(|r| (name_of(r.uid), u64::from(r.uid), r.count, ave(r.total_time, r.count), r.total_time))
        .collect();
    sort_rows(&mut users, sort);
    o.push_str("\nRemote Procedure Call statistics by user\n");
    for (name, uid, count, ave, total) in &users {
        let _ = writeln!(o, "\t{name:<16}({uid:>8}) count:{count:<6} ave_time:{ave:<6} total_time:{total}");
    }
    o.push_str("\nPending RPC statistics\n\tNo pending RPCs\n");
    flotilla_section(&mut o, &d.flotilla);
    o
}

fn main_sched(o: &mut String, d: &Diag) {
    use std::fmt::Write;
    o.push_str("\nMain schedule statistics (microseconds):\n");
    let _ = writeln!(o, "\tLast cycle:   {}", d.schedule_cycle_last);
    let _ = writeln!(o, "\tMax cycle:    {}", d.schedule_cycle_max);
    let _ = writeln!(o, "\tTotal cycles: {}", d.schedule_cycle_counter);
    let per_cycle = |v: u64| v.checked_div(d.schedule_cycle_counter);
    if let (Some(mean), Some(depth)) = (per_cycle(d.schedule_cycle_sum), per_cycle(d.schedule_cycle_depth)) {
        let _ = writeln!(o, "\tMean cycle:   {mean}");
        let _ = writeln!(o, "\tMean depth cycle:  {depth}");
    }
    let span = d.req_time - d.req_time_start;
    if span > 60 {
        let _ = writeln!(o, "\tCycles per minute: {}", d.schedule_cycle_counter / (span / 60) as u64);
    }
    let _ = writeln!(o, "\tLast queue length: {}", d.schedule_queue_len);
}

fn backfill(o: &mut String, d: &Diag) {
    use std::fmt::Write;
    if d.bf_active {
        o.push_str("\nBackfilling stats (WARNING: data obtained in the middle of backfilling execution.)\n");
    } else {
        o.push_str("\nBackfilling stats\n");
    }
    let n = d.bf_cycle_counter;
    let _ = writeln!(o, "\tTotal backfilled jobs (since last slurm start): {}", d.bf_backfilled_jobs);
    let _ = writeln!(o, "\tTotal backfilled jobs (since last stats cycle start): {}", d.bf_last_backfilled_jobs);
    let _ = writeln!(o, "\tTotal backfilled heterogeneous job components: {}", d.bf_backfilled_het_jobs);
    let _ = writeln!(o, "\tTotal cycles: {n}");
    if d.bf_when_last_cycle > 0 {
        let _ = writeln!(o, "\tLast cycle when: {} ({})", ctime2(d.bf_when_last_cycle), d.bf_when_last_cycle);
    } else {
        o.push_str("\tLast cycle when: N/A\n");
    }
    let _ = writeln!(o, "\tLast cycle: {}", d.bf_cycle_last);
    let _ = writeln!(o, "\tMax cycle:  {}", d.bf_cycle_max);
    if let Some(mean) = d.bf_cycle_sum.checked_div(n) {
        let _ = writeln!(o, "\tMean cycle: {mean}");
    }
    let _ = writeln!(o, "\tLast depth cycle: {}", d.bf_last_depth);
    let _ = writeln!(o, "\tLast depth cycle (try sched): {}", d.bf_last_depth_try);
    if let (Some(depth), Some(tried)) = (d.bf_depth_sum.checked_div(n), d.bf_depth_try_sum.checked_div(n)) {
        let _ = writeln!(o, "\tDepth Mean: {depth}");
        let _ = writeln!(o, "\tDepth Mean (try depth): {tried}");
    }
    let _ = writeln!(o, "\tLast queue length: {}", d.bf_queue_len);
    if let Some(mean) = d.bf_queue_len_sum.checked_div(n) {
        let _ = writeln!(o, "\tQueue length mean: {mean}");
    }
    let _ = writeln!(o, "\tLast table size: {}", d.bf_table_size);
    if let Some(mean) = d.bf_table_size_sum.checked_div(n) {
        let _ = writeln!(o, "\tMean table size: {mean}");
    }
}

/// Flotilla's section, after Slurm's text (labels that none of the exporters' patterns match).
fn flotilla_section(o: &mut String, f: &FlotillaDiag) {
    use std::fmt::Write;
    o.push_str("\nFlotilla statistics\n");
    let _ = writeln!(o, "\tHeld reservations: {}", f.held_reservations);
    let _ = writeln!(o, "\tPages raised: {}", f.pages);
    let _ = writeln!(o, "\tAlerts raised: {}", f.alerts);
    let total: u64 = f.preemptions.iter().map(|(_, n)| n).sum();
    let _ = writeln!(o, "\tPreemptions: {total}");
    for (why, n) in &f.preemptions {
        let _ = writeln!(o, "\t\t{why}: {n}");
    }
    o.push_str("\tLargest placeable GPUs (node/pod/any):\n");
    for (part, lp) in &f.largest_placeable {
        let _ = writeln!(o, "\t\t{part}: {}/{}/{}", lp.node, lp.pod, lp.any);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::diag::{RpcTypeStat, RpcUserStat};

    fn rt(name: &str, id: u16, count: u64, total: u64) -> RpcTypeStat {
        RpcTypeStat { name: name.into(), id, count, total_time: total }
    }

    /// The numbers of the golden `0109_sdiag_idle` give its text, line for line.
    #[test]
    fn renders_the_golden_idle_text() {
        let d = Diag {
            req_time: 1796185579,
            req_time_start: 1796185550,
            server_thread_count: 3,
            job_states_ts: 1796185550,
            schedule_cycle_last: 19,
            schedule_cycle_max: 19,
            schedule_cycle_counter: 1,
            schedule_cycle_sum: 19,
            gettimeofday_latency: 23,
            rpc_types: vec![
                rt("ACCOUNTING_UPDATE_MSG", 10001, 24, 14727),
                rt("REQUEST_PARTITION_INFO", 2009, 9, 992),
                rt("REQUEST_NODE_INFO_SINGLE", 2040, 4, 238),
                rt("MESSAGE_NODE_REGISTRATION_STATUS", 1002, 4, 2721),
                rt("REQUEST_JOB_INFO", 2003, 3, 338),
                rt("REQUEST_NODE_INFO", 2007, 2, 2566),
                rt("REQUEST_SHARE_INFO", 2022, 2, 433),
            ],
            rpc_users: vec![RpcUserStat { uid: 0, count: 24, total_time: 7288 }, RpcUserStat { uid: 64030, count: 24, total_time: 14727 }],
            ..Diag::default()
        };
        let names = |u: u32| if u == 0 { "root".to_string() } else { "slurm".to_string() };
        let text = render(&d, Sort::Count, &names);
        let golden = include_str!("../../compat-tests/goldens/accounting/0109_sdiag_idle.json");
        let start = golden.find("\"stdout\": \"").unwrap() + 11;
        let end = golden[start..].find("\",\n").unwrap() + start;
        let want = golden[start..end].replace("\\n", "\n").replace("\\t", "\t");
        let ours = text.split("\nFlotilla statistics\n").next().unwrap();
        assert_eq!(ours, want);
    }

    #[test]
    fn sorts_as_slurm() {
        let mut rows: Vec<Row> = vec![
            ("a".into(), 3, 1, 10, 10),
            ("b".into(), 1, 5, 1, 5),
            ("c".into(), 2, 5, 2, 10),
        ];
        sort_rows(&mut rows, Sort::Count);
        assert_eq!(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["b", "c", "a"]);
        sort_rows(&mut rows, Sort::Id);
        assert_eq!(rows.iter().map(|r| r.1).collect::<Vec<_>>(), [1, 2, 3]);
        sort_rows(&mut rows, Sort::Time2);
        assert_eq!(rows.iter().map(|r| (r.0.as_str(), r.3)).collect::<Vec<_>>(), [("b", 10), ("c", 2), ("a", 1)]);
    }

    #[test]
    fn ctime2_pads_the_day_with_a_zero() {
        assert_eq!(ctime2(1796185579), "Wed Dec 02 04:26:19 2026");
    }

    #[test]
    fn cycles_per_minute_only_after_a_minute() {
        let mut d = Diag { req_time: 1000, req_time_start: 1000 - 60, schedule_cycle_counter: 9, ..Diag::default() };
        assert!(!render(&d, Sort::Count, &|u| u.to_string()).contains("Cycles per minute"));
        d.req_time_start = 1000 - 180;
        assert!(render(&d, Sort::Count, &|u| u.to_string()).contains("\tCycles per minute: 3\n"));
    }
}
