//! `sinfo`, as Slurm 22.05's: the default partition view, `-N` (node view), `-l`, `-s`,
//! `-o` letters, `-O` fields, `-R`, `-t`, `-p`, `-h`. Nodes sharing a partition and the
//! printed state are grouped on one line with a hostlist, as Slurm groups them.
//!
//! Flotilla: `-O LargestPlaceable` prints the partition's `largest_placeable`
//! (`node=8,pod=24,any=204`: the largest GPU request that could start now inside one node,
//! one pod, anywhere; DESIGN.md §2), and `--largest` prints it per partition as a table.
//! Elastic growth counts as reclaimable (docs/elastic.md): `--largest` adds the partition's
//! grown GPUs (`GROWN`) and the largest requests if they were taken back (`R_NODE`,
//! `R_POD`, `R_ANY`); `-O LargestReclaimable` prints the latter as `-O LargestPlaceable`
//! does, `-O GrownGpus` the former. Both come from `Request::QueryReclaimable`.

use crate::common::{self, field, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use flotilla_core::time::{fmt_ctime, fmt_time, sinfo_time_limit, TimeLimit};
use flotilla_proto::{LargestPlaceableWire, NodeInfo, NodeQuery, PartitionInfo, PartitionReclaim, Request, Response};
use std::collections::BTreeMap;

const fn c(ch: char) -> u32 {
    ch as u32
}
const O_HELP: u32 = 1000;
const O_IGNORED: u32 = 1001;
const O_LARGEST: u32 = 1002;
const O_JSON: u32 = 1003;
const O_YAML: u32 = 1004;
/// sinfo's getopt string (Slurm 22.05 `opts.c`).
pub const SHORTS: &str = "adehi:lM:n:No:O:p:rRsS:t:TvV";
/// sinfo's long options; ids are the short letter or an `O_*`.
pub const LONGS: &[LongOpt] = &[
    lo("all", HasArg::No, c('a')),
    lo("json", HasArg::No, O_JSON),
    lo("yaml", HasArg::No, O_YAML),
    lo("dead", HasArg::No, c('d')),
    lo("exact", HasArg::No, c('e')),
    lo("noheader", HasArg::No, c('h')),
    lo("iterate", HasArg::Required, c('i')),
    lo("long", HasArg::No, c('l')),
    lo("cluster", HasArg::Required, c('M')),
    lo("clusters", HasArg::Required, c('M')),
    lo("nodes", HasArg::Required, c('n')),
    lo("Node", HasArg::No, c('N')),
    lo("format", HasArg::Required, c('o')),
    lo("Format", HasArg::Required, c('O')),
    lo("partition", HasArg::Required, c('p')),
    lo("responding", HasArg::No, c('r')),
    lo("list-reasons", HasArg::No, c('R')),
    lo("summarize", HasArg::No, c('s')),
    lo("sort", HasArg::Required, c('S')),
    lo("states", HasArg::Required, c('t')),
    lo("reservation", HasArg::No, c('T')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("help", HasArg::No, O_HELP),
    lo("usage", HasArg::No, O_HELP),
    lo("hide", HasArg::No, O_IGNORED),
    lo("future", HasArg::No, O_IGNORED),
    lo("local", HasArg::No, O_IGNORED),
    lo("federation", HasArg::No, O_IGNORED),
    lo("largest", HasArg::No, O_LARGEST),
];

/// A partition's `largest_placeable` as `-O LargestPlaceable` prints it
/// (`node=8,pod=24,any=204`; `N/A` when the controller did not send it).
pub fn largest_str(p: &PartitionInfo) -> String {
    p.largest_placeable
        .map_or_else(|| "N/A".to_string(), |l| lp_str(&l))
}

/// `-O LargestReclaimable`: the partition's `largest_placeable` if elastic jobs gave back
/// their growth (`node=8,pod=24,any=204`; `N/A` when the controller did not send it).
pub fn reclaimable_str(r: Option<&PartitionReclaim>) -> String {
    r.map_or_else(|| "N/A".to_string(), |r| lp_str(&r.largest_if_reclaimed))
}

fn lp_str(l: &LargestPlaceableWire) -> String {
    format!("node={},pod={},any={}", l.node, l.pod, l.any)
}

/// `sinfo --largest`: per partition (the default marked `*`), the largest GPU request that
/// could start now inside one node, one pod, and anywhere (`NODE`, `POD`, `ANY`); the GPUs
/// elastic jobs hold above their minimum (`GROWN`), and the largest requests if that growth
/// were taken back (`R_NODE`, `R_POD`, `R_ANY`). `reclaim` is the controller's
/// `Response::Reclaimable` by partition name (`N/A` for a partition it lacks).
pub fn largest_table(parts: &[PartitionInfo], reclaim: &BTreeMap<String, PartitionReclaim>, noheader: bool) -> String {
    let mut out = String::new();
    let line = |out: &mut String, cells: [&str; 8]| {
        out.push_str(&field(cells[0], 9, false));
        for c in &cells[1..] {
            out.push(' ');
            out.push_str(&field(c, 6, true));
        }
        out.push('\n');
    };
    if !noheader {
        line(&mut out, ["PARTITION", "NODE", "POD", "ANY", "GROWN", "R_NODE", "R_POD", "R_ANY"]);
    }
    let na = || ["N/A".to_string(), "N/A".into(), "N/A".into()];
    let three = |l: &LargestPlaceableWire| [l.node.to_string(), l.pod.to_string(), l.any.to_string()];
    for p in parts {
        let [n, pod, any] = p.largest_placeable.as_ref().map_or_else(na, three);
        let r = reclaim.get(&p.name);
        let grown = r.map_or_else(|| "N/A".to_string(), |r| r.grown_gpus.to_string());
        let [rn, rpod, rany] = r.map_or_else(na, |r| three(&r.largest_if_reclaimed));
        line(&mut out, [&part_name(p), &n, &pod, &any, &grown, &rn, &rpod, &rany]);
    }
    out
}

/// The controller's `Response::Reclaimable` by partition name (empty from a controller that
/// does not answer it).
fn load_reclaimable(ctl: &Ctl) -> BTreeMap<String, PartitionReclaim> {
    match ctl.call(Request::QueryReclaimable) {
        Ok(Response::Reclaimable(v)) => v.into_iter().map(|r| (r.name.clone(), r)).collect(),
        _ => BTreeMap::new(),
    }
}

/// Short state names (`%t`).
fn short_state(s: &str) -> &'static str {
    match s {
        "IDLE" => "idle",
        "MIXED" => "mix",
        "ALLOCATED" => "alloc",
        "DRAINING" => "drng",
        "DRAINED" => "drain",
        // Slurm 22.05 `node_state_string_compact`: FAILG with every CPU allocated.
        "FAIL" => "fail",
        "FAILING" => "failg",
        "DOWN" => "down",
        _ => "unk",
    }
}

/// A node state as Slurm 22.05's `node_state` number (`enum node_states`: DOWN 1, IDLE 2,
/// ALLOCATED 3, MIXED 5; DRAIN a flag, 0x200, on the base state), which sinfo's default sort
/// (`#P,-t`: partition order, then state descending, sinfo/sort.c `_sort_by_state`) orders by.
fn state_number(s: &str) -> u32 {
    match s {
        "DOWN" => 1,
        "IDLE" => 2,
        "ALLOCATED" => 3,
        "MIXED" => 5,
        "DRAINED" => 0x200 + 2,
        "DRAINING" => 0x200 + 3,
        // FAIL, a flag (0x2000) on IDLE, MIXED or (FAILING) ALLOCATED.
        "FAIL" => 0x2000 + 2,
        "FAILING" => 0x2000 + 3,
        _ => 0,
    }
}

fn long_state(s: &str) -> String {
    match s {
        "MIXED" => "mixed".into(),
        other => other.to_ascii_lowercase(),
    }
}

/// One state of `sinfo -t` (Slurm 22.05 `sinfo/opts.c` `_node_state_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateSel {
    /// A base state (`enum node_states`: UNKNOWN 0, DOWN 1, IDLE 2, ALLOCATED 3, "?" 4,
    /// MIXED 5, FUTURE 6).
    Base(u32),
    /// `DRAIN`: any node with the drain flag.
    Drain,
    /// `DRAINED`: drained and not running anything.
    Drained,
    /// `DRAINING`: drained and still running jobs.
    Draining,
    /// `NO_RESPOND`.
    NoRespond,
    /// `FAIL`.
    Fail,
    /// A flag Flotilla's nodes never carry (`PLANNED`, `RESERVED`, `COMPLETING`, power and
    /// reboot states, `MAINT`, `CLOUD`, `PERFCTRS`): valid, matches no node.
    Never,
}

/// The states Slurm lists after "valid states:" (`_node_state_list`).
const VALID_NODE_STATES: &str = "unknown,down,idle,allocated,?,mixed,future,drain,drained,draining,no_respond,reserved,\
perfctrs,cloud,completing,powering_down,powered_down,power_down,powering_up,fail,maint,reboot,reboot^,unknown";

/// A `-t` word as `_node_state_id` reads it: case-insensitive, a word that begins one of
/// the names (so `dr` is `DRAIN`, `d` is `DOWN`), the base states first (long or compact
/// name), then the flags in Slurm's order. `None`: "Bad state string".
fn state_sel(word: &str) -> Option<StateSel> {
    let w = word.to_ascii_uppercase();
    let begins = |name: &str| name.starts_with(w.as_str());
    let bases = [("UNKNOWN", "UNK"), ("DOWN", "DOWN"), ("IDLE", "IDLE"), ("ALLOCATED", "ALLOC"), ("?", "?"), ("MIXED", "MIX"), ("FUTURE", "FUTR")];
    if let Some(i) = bases.iter().position(|(l, c)| begins(l) || begins(c)) {
        return Some(StateSel::Base(i as u32));
    }
    let flags: [(&[&str], StateSel); 17] = [
        (&["PLANNED", "PLND"], StateSel::Never),
        (&["DRAIN"], StateSel::Drain),
        (&["DRAINED"], StateSel::Drained),
        (&["RESV", "RESERVED"], StateSel::Never),
        (&["PERFCTRS", "NPC"], StateSel::Never),
        (&["DRAINING", "DRNG"], StateSel::Draining),
        (&["COMPLETING", "COMP"], StateSel::Never),
        (&["NO_RESPOND"], StateSel::NoRespond),
        (&["POWERING_DOWN", "POWRN_DN"], StateSel::Never),
        (&["POWERED_DOWN", "POWERED_DN"], StateSel::Never),
        (&["POWER_DOWN", "POW_DN"], StateSel::Never),
        (&["POWERING_UP", "POW_UP"], StateSel::Never),
        (&["FAIL"], StateSel::Fail),
        (&["MAINT"], StateSel::Never),
        (&["REBOOT_REQUESTED", "BOOT^"], StateSel::Never),
        (&["REBOOT_ISSUED", "BOOT"], StateSel::Never),
        (&["CLOUD"], StateSel::Never),
    ];
    flags.iter().find(|(names, _)| names.iter().any(|n| begins(n))).map(|(_, sel)| *sel)
}

/// Whether node `n` is in state `sel`, as sinfo's `_filter_out` tests it: `DRAIN` any drain
/// flag, `DRAINED`/`DRAINING` as the state names them, `ALLOCATED` any allocated CPU (so
/// mixed, draining and failing nodes too), another base state the node's base state (a
/// drained idle node is `IDLE`).
fn in_state(sel: StateSel, n: &NodeInfo) -> bool {
    let s = n.state.as_str();
    let some_alloc = n.cpus_alloc > 0;
    let base = match s {
        "IDLE" | "DRAINED" => 2,
        "FAIL" if some_alloc => 5,
        "FAIL" => 2,
        "MIXED" => 5,
        "ALLOCATED" | "FAILING" => 3,
        "DRAINING" if n.cpus_alloc < n.cpus => 5,
        "DRAINING" => 3,
        "DOWN" => 1,
        _ => 0,
    };
    match sel {
        StateSel::Drain => matches!(s, "DRAINED" | "DRAINING"),
        StateSel::Drained => s == "DRAINED",
        StateSel::Draining => s == "DRAINING",
        StateSel::NoRespond => n.not_responding,
        StateSel::Fail => matches!(s, "FAIL" | "FAILING"),
        StateSel::Never => false,
        StateSel::Base(3) => some_alloc,
        StateSel::Base(b) => base == b,
    }
}

/// One `%` spec: letter, width, right-justified.
type Spec = (char, usize, bool);

/// Format letters that print something of the partition (`%P`, `%R`, availability, limits,
/// sizes, groups, shared, root-only, priority, ...): with none of them, rows merge across
/// partitions.
const PARTITION_FIELDS: &str = "PRalLsghrpSI";

/// The field letters of a `-o` format (`%.10P` -> `P`; `%%` is no field).
fn format_chars(f: &str) -> impl Iterator<Item = char> + '_ {
    f.split('%').skip(1).filter_map(|t| t.trim_start_matches(|c: char| c == '.' || c.is_ascii_digit()).chars().next())
}

struct Row<'a> {
    part: &'a PartitionInfo,
    nodes: Vec<&'a NodeInfo>,
}

fn state_of(n: &NodeInfo, long: bool) -> String {
    let mut s = if long { long_state(&n.state) } else { short_state(&n.state).to_string() };
    if n.not_responding {
        s.push('*');
    }
    s
}

fn gres(n: &NodeInfo) -> String {
    if n.gpus > 0 {
        common::gpu_name(n.gpu_type.as_deref(), n.gpus)
    } else {
        "(null)".into()
    }
}

fn gres_used(n: &NodeInfo) -> String {
    let idx: Vec<u32> = (0..64).filter(|i| n.gpu_alloc_mask & (1 << i) != 0).collect();
    let ranges = if idx.is_empty() { "N/A".to_string() } else { common::ranges(&idx) };
    format!("{}(IDX:{ranges})", common::gpu_name(n.gpu_type.as_deref(), idx.len() as u32))
}

fn cpus_state(nodes: &[&NodeInfo]) -> String {
    let (mut a, mut i, mut o, mut t) = (0, 0, 0, 0);
    for n in nodes {
        t += n.cpus;
        if matches!(n.state.as_str(), "DOWN" | "DRAINED" | "DRAINING") || n.not_responding {
            a += n.cpus_alloc;
            o += n.cpus - n.cpus_alloc;
        } else {
            a += n.cpus_alloc;
            i += n.cpus - n.cpus_alloc;
        }
    }
    format!("{a}/{i}/{o}/{t}")
}

/// `%F`: allocated/idle/other/total nodes. A failed node is not `other` (Slurm 22.05
/// sinfo.c `_update_sinfo` counts only DRAIN and DOWN there): idle, or allocated when busy.
fn node_state_counts(nodes: &[&NodeInfo]) -> String {
    let (mut a, mut i, mut o) = (0, 0, 0);
    for n in nodes {
        match n.state.as_str() {
            "IDLE" if !n.not_responding => i += 1,
            "FAIL" if n.cpus_alloc == 0 && n.gpu_alloc_mask == 0 => {
                if n.not_responding {
                    o += 1
                } else {
                    i += 1
                }
            }
            "MIXED" | "ALLOCATED" | "DRAINING" | "FAIL" | "FAILING" => a += 1,
            _ => o += 1,
        }
    }
    format!("{a}/{i}/{o}/{}", nodes.len())
}

fn part_name(p: &PartitionInfo) -> String {
    if p.default {
        format!("{}*", p.name)
    } else {
        p.name.clone()
    }
}

/// A node's available features as sinfo and scontrol print them ([`shown`]).
pub fn features(n: &NodeInfo) -> String {
    shown(&n.features)
}

/// Features as sinfo and scontrol print them: as kept, `(null)` for none.
pub fn shown(f: &Option<String>) -> String {
    f.clone().unwrap_or_else(|| "(null)".into())
}

/// Field `ch` of row `r`: its header and text. `states`: the partitions' `State=` words
/// ([`common::partition_states`]).
fn value(ch: char, r: &Row<'_>, conf: &flotilla_core::config::ClusterConfig, states: &BTreeMap<String, String>) -> Option<(&'static str, String)> {
    let n0 = r.nodes.first();
    let nconf = n0.and_then(|n| conf.nodes.iter().find(|x| x.name == n.name));
    let names: Vec<String> = r.nodes.iter().map(|n| n.name.clone()).collect();
    Some(match ch {
        'P' => ("PARTITION", part_name(r.part)),
        'R' => ("PARTITION", r.part.name.clone()),
        // Partition scheduling tier (`PriorityTier`, default 1), as TOIL reads it.
        'p' => (
            "PRIO_TIER",
            conf.partitions.iter().find(|p| p.name == r.part.name).map_or(1, |p| p.priority_tier).to_string(),
        ),
        // up, down, drain, inactive (`inact` in the default format's five columns).
        'a' => ("AVAIL", r.part.state_word(states).to_ascii_lowercase()),
        'l' => (
            "TIMELIMIT",
            sinfo_time_limit(r.part.max_time_min.map_or(TimeLimit::Unlimited, |m| TimeLimit::Minutes(m as u32))),
        ),
        'D' => ("NODES", r.nodes.len().to_string()),
        't' => ("STATE", n0.map_or_else(|| "n/a".into(), |n| state_of(n, false))),
        'T' => ("STATE", n0.map_or_else(|| "n/a".into(), |n| state_of(n, true))),
        'N' => ("NODELIST", flotilla_core::hostlist::compress(&names)),
        'n' => ("HOSTNAMES", flotilla_core::hostlist::compress(&names)),
        'c' => ("CPUS", n0.map_or(0, |n| n.cpus).to_string()),
        'm' => ("MEMORY", n0.map_or(0, |n| n.mem_mib).to_string()),
        // `-O AllocMem` only (no `-o` letter): memory allocated on the node, MiB.
        '@' => ("ALLOCMEM", n0.map_or(0, |n| n.mem_alloc_mib).to_string()),
        'G' => ("GRES", n0.map_or_else(|| "(null)".into(), |n| gres(n))),
        'f' => ("AVAIL_FEATURES", n0.map_or_else(|| "(null)".into(), |n| features(n))),
        'b' => ("ACTIVE_FEATURES", n0.map_or_else(|| "(null)".into(), |n| shown(&n.features_act))),
        'z' => (
            "S:C:T",
            nconf.map_or_else(|| "*:*:*".into(), |x| format!("{}:{}:{}", x.sockets, x.cores_per_socket, x.threads_per_core)),
        ),
        'O' => ("CPU_LOAD", "0.00".into()),
        'e' => ("FREE_MEM", "0".into()),
        'C' => ("CPUS(A/I/O/T)", cpus_state(&r.nodes)),
        'F' => ("NODES(A/I/O/T)", node_state_counts(&r.nodes)),
        'd' => ("TMP_DISK", nconf.map_or(0, |x| x.tmp_disk_mib).to_string()),
        'w' => ("WEIGHT", nconf.map_or(1, |x| x.weight).to_string()),
        'E' => ("REASON", n0.and_then(|n| n.reason.clone()).unwrap_or_else(|| "none".into())),
        // Slurm's `reason_time` and `reason_uid` (sinfo `_print_timestamp`, `_print_user`):
        // `Unknown` without them.
        'H' => ("TIMESTAMP", n0.and_then(|n| n.reason_time).map_or_else(|| "Unknown".into(), fmt_time)),
        'u' => ("USER", n0.and_then(|n| n.reason_uid).map_or_else(|| "Unknown".into(), common::user_name)),
        'X' => ("SOCKETS", nconf.map_or(0, |x| x.sockets).to_string()),
        'Y' => ("CORES", nconf.map_or(0, |x| x.cores_per_socket).to_string()),
        'Z' => ("THREADS", nconf.map_or(0, |x| x.threads_per_core).to_string()),
        _ => return None,
    })
}

fn o2(name: &str) -> Option<(&'static str, char)> {
    Some(match name.to_ascii_lowercase().as_str() {
        "partition" => ("PARTITION", 'P'),
        "partitionname" => ("PARTITION", 'R'),
        "nodelist" => ("NODELIST", 'N'),
        "nodehost" => ("HOSTNAMES", 'n'),
        "statelong" => ("STATE", 'T'),
        "statecompact" => ("STATE", 't'),
        "cpusstate" => ("CPUS(A/I/O/T)", 'C'),
        "cpus" => ("CPUS", 'c'),
        "gres" => ("GRES", 'G'),
        "gresused" => ("GRES_USED", 'U'),
        "memory" => ("MEMORY", 'm'),
        "allocmem" => ("ALLOCMEM", '@'),
        "time" => ("TIMELIMIT", 'l'),
        "nodes" => ("NODES", 'D'),
        "nodeaist" => ("NODES(A/I/O/T)", 'F'),
        "available" => ("AVAIL", 'a'),
        "reason" => ("REASON", 'E'),
        "features" => ("AVAIL_FEATURES", 'f'),
        "cpusload" => ("CPU_LOAD", 'O'),
        "freemem" => ("FREE_MEM", 'e'),
        "largestplaceable" => ("LARGEST_PLACEABLE", 'L'),
        "largestreclaimable" => ("LARGEST_RECLAIMABLE", '~'),
        "growngpus" => ("GROWN_GPUS", '+'),
        _ => return None,
    })
}

/// The nodes `-n`/`--nodes` names (Slurm 22.05 `sinfo/opts.c` option `'n'` and `sinfo.c`
/// `_filter_out`): a hostlist expression; a node not in it is left out of every row, every
/// partition still shows. A single name is asked of the controller alone
/// (`slurm_load_node_single`); an unknown one shows no node (the header alone), exit 0, as
/// 22.05 does (goldens-extra 0707).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFilter(std::collections::BTreeSet<String>);

impl NodeFilter {
    /// Parses the option's argument; `None` for an expression that is no hostlist (sinfo
    /// prints "'ARG' invalid entry for --nodes" and exits 1).
    pub fn parse(arg: &str) -> Option<NodeFilter> {
        flotilla_core::hostlist::expand(arg).ok().map(|h| NodeFilter(h.into_iter().collect()))
    }

    /// The one node named, when exactly one is.
    pub fn single(&self) -> Option<String> {
        (self.0.len() == 1).then(|| self.0.iter().next().cloned()).flatten()
    }

    /// Whether node `name` is named.
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

/// Runs `sinfo`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    let p = match getopt_long("sinfo", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(m) => {
            io.err(&format!("{m}\nTry \"sinfo --help\" for more information\n"));
            return 1;
        }
    };
    let (mut noheader, mut long, mut node_view, mut summarize, mut reasons) = (false, false, false, false, false);
    let (mut fmt, mut fmt2): (Option<String>, Option<String>) = (None, None);
    let mut largest = false;
    let mut mime = None;
    let mut parts_f: Vec<String> = Vec::new();
    // `-t`: the states, and whether all must hold (`&` in the list) or one.
    let mut states_f: Vec<StateSel> = Vec::new();
    let mut states_and = false;
    let mut nodes_f: Option<NodeFilter> = None;
    for o in &p.opts {
        let a = o.arg.clone().unwrap_or_default();
        match o.id {
            x if x == c('h') => noheader = true,
            x if x == c('l') => long = true,
            x if x == c('N') => node_view = true,
            x if x == c('s') => summarize = true,
            x if x == c('R') => reasons = true,
            x if x == c('o') => fmt = Some(a),
            x if x == c('O') => fmt2 = Some(a),
            x if x == c('p') => parts_f.extend(a.split(',').map(str::to_string)),
            x if x == c('n') => match NodeFilter::parse(&a) {
                Some(f) => nodes_f = Some(f),
                None => {
                    io.err(&format!("sinfo: error: '{a}' invalid entry for --nodes\n"));
                    return 1;
                }
            },
            x if x == c('t') => {
                if a.eq_ignore_ascii_case("all") {
                    states_f.clear();
                    continue;
                }
                states_and = a.contains('&');
                for w in a.split([',', '&']).filter(|w| !w.is_empty()) {
                    match state_sel(w) {
                        Some(sel) => states_f.push(sel),
                        None => {
                            io.err(&format!("sinfo: error: Bad state string: \"{w}\"\nsinfo: error: valid states: {VALID_NODE_STATES}\n"));
                            return 1;
                        }
                    }
                }
            }
            x if x == c('V') => {
                io.out(&format!("{}\n", crate::sbatch::VERSION_LINE));
                return 0;
            }
            O_HELP => {
                io.out("Usage: sinfo [OPTIONS]\n");
                return 0;
            }
            O_LARGEST => largest = true,
            O_JSON => mime = Some(crate::json_out::Mime::Json),
            O_YAML => mime = Some(crate::json_out::Mime::Yaml),
            _ => {}
        }
    }
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("slurm_load_partitions: {}\n", e.slurm().text));
            return 1;
        }
    };
    // 22.05 (`sinfo.c`, `data.c`): with --json/--yaml, sinfo prints v0.0.38's `/nodes/`
    // answer for every node; no other option filters or formats it.
    if let Some(mime) = mime {
        let (nodes, errs) = match ctl.call(Request::QueryNodes(NodeQuery::default())) {
            Ok(Response::Nodes(n)) => (n, Vec::new()),
            Ok(Response::Error(e)) => (Vec::new(), vec![(e.text, e.code)]),
            Ok(_) => (Vec::new(), Vec::new()),
            Err(e) => (Vec::new(), crate::json_out::ctl_errors(&e)),
        };
        let doc = crate::json_out::nodes_doc(&nodes, &ctl.conf.cluster_name, &ctl.conf.nodes);
        io.out(&crate::json_out::render(&crate::json_out::with_errors(doc, &errs), mime));
        return 0;
    }
    let parts = match ctl.call(Request::QueryPartitions) {
        Ok(Response::Partitions(p)) => p,
        _ => Vec::new(),
    };
    if largest {
        let shown: Vec<PartitionInfo> = parts.iter().filter(|p| parts_f.is_empty() || parts_f.contains(&p.name)).cloned().collect();
        io.out(&largest_table(&shown, &load_reclaimable(&ctl), noheader));
        return 0;
    }
    let states = common::partition_states(&ctl, &parts);
    // One node is asked for by name, as slurm_load_node_single does; a list filters all nodes.
    let query = NodeQuery { names: nodes_f.as_ref().and_then(NodeFilter::single).into_iter().collect() };
    // An unknown single name loads no node: the header alone, exit 0, as 22.05 prints it
    // (its controller packs no record for a name it does not know; goldens-extra 0707).
    let nodes = match ctl.call(Request::QueryNodes(query)) {
        Ok(Response::Nodes(n)) => n,
        // PrivateData=nodes refuses a user's node query (Access/permission denied).
        Ok(Response::Error(e)) => {
            io.err(&format!("slurm_load_node: {}\n", e.text));
            return 1;
        }
        Err(e) => {
            io.err(&format!("slurm_load_node: {}\n", e.slurm().text));
            return 1;
        }
        _ => Vec::new(),
    };
    // `-R` is a state filter, `down,fail,drain` unless `-t` gave one, and a format; with
    // `-o`/`-O` that format is the user's (Slurm 22.05 `sinfo/opts.c`; goldens-extra 0726).
    let reasons_default = reasons && fmt.is_none() && fmt2.is_none();
    if reasons && !reasons_default && states_f.is_empty() {
        states_f = vec![StateSel::Base(1), StateSel::Fail, StateSel::Drain];
    }
    let name_ok = |n: &NodeInfo| nodes_f.as_ref().is_none_or(|f| f.contains(&n.name));
    let state_ok = |n: &NodeInfo| {
        name_ok(n)
            && (states_f.is_empty()
                || if states_and {
                    states_f.iter().all(|s| in_state(*s, n))
                } else {
                    states_f.iter().any(|s| in_state(*s, n))
                })
    };
    if reasons_default {
        let mut s = String::new();
        if !noheader {
            s.push_str("REASON               USER      TIMESTAMP           NODELIST\n");
        }
        // Nodes share a line when every printed field is the same (`%20E %9u %19H %N`):
        // the reason, who set it and when.
        type Key = (String, Option<u32>, Option<i64>);
        let mut groups: Vec<(Key, Vec<String>)> = Vec::new();
        for n in nodes.iter().filter(|n| n.reason.is_some() && name_ok(n)) {
            let key = (n.reason.clone().unwrap_or_default(), n.reason_uid, n.reason_time);
            match groups.iter_mut().find(|(g, _)| *g == key) {
                Some((_, v)) => v.push(n.name.clone()),
                None => groups.push((key, vec![n.name.clone()])),
            }
        }
        for ((r, uid, time), names) in groups {
            s.push_str(&format!(
                "{} {} {} {}\n",
                field(&r, 20, false),
                field(&uid.map_or_else(|| "Unknown".into(), common::user_name), 9, false),
                time.map_or_else(|| "Unknown".into(), fmt_time),
                flotilla_core::hostlist::compress(&names)
            ));
        }
        io.out(&s);
        return 0;
    }
    // Rows: per partition (config order), nodes grouped by printed state. What a `-o` format
    // prints decides two more things, as sinfo's match flags do (Slurm 22.05 sinfo.c
    // `_match_node_data`, `_match_part_data`): without a partition field the rows are not
    // split by partition (each node counted once: vpenso's `sinfo -h -o %C` reads one line),
    // with `%n` (NodeHostname) or `%o` (NodeAddr) nodes of different hostnames never share a
    // row, and without a state field (`%t`, `%T`) nodes of different states do.
    let printed = |chars: &str| fmt.as_deref().is_some_and(|f| format_chars(f).any(|c| chars.contains(c)));
    let across_parts = fmt.is_some() && !node_view && !summarize && !printed(PARTITION_FIELDS);
    let by_host = printed("no");
    // Nodes of different states share a row unless a state is printed (`%t`, `%T`).
    let by_state = fmt.is_none() || printed("tT");
    let st = |n: &NodeInfo| if by_state { state_of(n, false) } else { String::new() };
    // GRES in use splits rows only where it could be printed (the default formats, `-O`).
    let by_gres = fmt.is_none();
    let gu = |n: &NodeInfo| if by_gres { gres_used(n) } else { Default::default() };
    // Nodes of different features share no row where features are printed (`%f`, `%b`:
    // `_match_node_data`'s `MATCH_FLAG_FEATURES`, `MATCH_FLAG_FEATURES_ACT`).
    let by_features = printed("fb");
    let st = |n: &NodeInfo| if by_features { format!("{}\0{}\0{}", st(n), features(n), shown(&n.features_act)) } else { st(n) };
    let mut rows: Vec<Row<'_>> = Vec::new();
    if across_parts {
        let mut seen: Vec<&NodeInfo> = Vec::new();
        for part in parts.iter().filter(|p| parts_f.is_empty() || parts_f.contains(&p.name)) {
            for n in nodes.iter().filter(|n| n.partitions.contains(&part.name) && state_ok(n)) {
                if !seen.iter().any(|m| m.name == n.name) {
                    seen.push(n);
                }
            }
        }
        if let Some(part) = parts.first() {
            let mut groups: Vec<Row<'_>> = Vec::new();
            for n in seen {
                let key = (st(n), gu(n), by_host.then(|| n.name.clone()));
                match groups.iter_mut().find(|g| {
                    (st(g.nodes[0]), gu(g.nodes[0]), by_host.then(|| g.nodes[0].name.clone())) == key
                }) {
                    Some(g) => g.nodes.push(n),
                    None => groups.push(Row { part, nodes: vec![n] }),
                }
            }
            groups.sort_by_key(|g| std::cmp::Reverse(state_number(&g.nodes[0].state)));
            rows.extend(groups);
        }
    }
    for part in parts.iter().filter(|p| !across_parts && (parts_f.is_empty() || parts_f.contains(&p.name))) {
        let members: Vec<&NodeInfo> = nodes.iter().filter(|n| n.partitions.contains(&part.name) && state_ok(n)).collect();
        if node_view {
            for n in members {
                rows.push(Row { part, nodes: vec![n] });
            }
            continue;
        }
        if summarize {
            rows.push(Row { part, nodes: members });
            continue;
        }
        let mut groups: Vec<Row<'_>> = Vec::new();
        for n in members {
            let key = (st(n), gu(n), by_host.then(|| n.name.clone()));
            match groups.iter_mut().find(|g| {
                (st(g.nodes[0]), gu(g.nodes[0]), by_host.then(|| g.nodes[0].name.clone())) == key
            }) {
                Some(g) => g.nodes.push(n),
                None => groups.push(Row { part, nodes: vec![n] }),
            }
        }
        groups.sort_by_key(|g| std::cmp::Reverse(state_number(&g.nodes[0].state)));
        if groups.is_empty() && nodes_f.is_none() {
            // A partition none of whose nodes match still shows, with no nodes (`n/a`).
            groups.push(Row { part, nodes: Vec::new() });
        }
        rows.extend(groups);
    }
    if node_view {
        rows.sort_by(|a, b| a.nodes[0].name.cmp(&b.nodes[0].name));
    }
    let mut out = String::new();
    if long {
        out.push_str(&format!("{}\n", fmt_ctime(common::now())));
    }
    if let Some(f2) = fmt2 {
        let mut cols = Vec::new();
        for spec in f2.split(',') {
            let (name, rest) = spec.split_once(':').map_or((spec, None), |(a, b)| (a, Some(b)));
            let Some((title, ch)) = o2(name) else {
                io.err(&format!("Invalid node format specification: {name}\n"));
                continue;
            };
            let width = rest.map_or(20, |r| r.trim_start_matches('.').parse().unwrap_or(0));
            let right = rest.is_some_and(|r| r.starts_with('.'));
            cols.push((title, ch, width, right));
        }
        let reclaim = if cols.iter().any(|c| matches!(c.1, '~' | '+')) { load_reclaimable(&ctl) } else { BTreeMap::new() };
        if !noheader {
            for (t, _, w, r) in &cols {
                out.push_str(&field(t, *w, *r));
            }
            out.push('\n');
        }
        for row in &rows {
            for (_, ch, w, r) in &cols {
                let v = match ch {
                    'U' => row.nodes.first().map_or_else(|| "N/A".into(), |n| gres_used(n)),
                    'L' => largest_str(row.part),
                    '~' => reclaimable_str(reclaim.get(&row.part.name)),
                    '+' => reclaim.get(&row.part.name).map_or_else(|| "N/A".to_string(), |r| r.grown_gpus.to_string()),
                    _ => value(*ch, row, &ctl.conf, &states).map(|x| x.1).unwrap_or_default(),
                };
                out.push_str(&field(&v, *w, *r));
            }
            out.push('\n');
        }
        io.out(&out);
        return 0;
    }
    // `-N`: the node list column is as wide as the widest row's list, at least 9
    // (Slurm 22.05 `sinfo/print.c` `MIN_NODE_FIELD_SIZE`, `_set_node_field_size`).
    let node_w = rows
        .iter()
        .map(|r| flotilla_core::hostlist::compress(&r.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>()).len())
        .max()
        .unwrap_or(0)
        .max(9);
    let f = fmt.unwrap_or_else(|| match (node_view, long, summarize) {
        (true, true, _) => format!("%{node_w}N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"),
        (true, false, _) => format!("%{node_w}N %.6D %.9P %6t"),
        (_, _, true) => "%9P %.5a %.10l %.16F %N".to_string(),
        (false, true, false) => "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N".to_string(),
        _ => "%9P %.5a %.10l %.6D %.6t %N".to_string(),
    });
    let mut pieces: Vec<(String, Option<Spec>)> = Vec::new();
    let mut toks = f.split('%');
    if let Some(t) = toks.next() {
        pieces.push((t.to_string(), None));
    }
    for tok in toks {
        let mut chars = tok.chars().peekable();
        let right = chars.peek() == Some(&'.');
        if right {
            chars.next();
        }
        let mut w = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            w = w * 10 + d as usize;
            chars.next();
        }
        let Some(ch) = chars.next() else { continue };
        pieces.push((String::new(), Some((ch, w, right))));
        pieces.push((chars.collect(), None));
    }
    let line = |row: Option<&Row<'_>>| -> String {
        let mut s = String::new();
        for (text, spec) in &pieces {
            match spec {
                None => s.push_str(text),
                Some((ch, w, r)) => {
                    let dummy;
                    let rr = match row {
                        Some(r) => r,
                        None => {
                            dummy = Row { part: &parts[0], nodes: Vec::new() };
                            &dummy
                        }
                    };
                    let (t, v) = value(*ch, rr, &ctl.conf, &states).unwrap_or(("", String::new()));
                    s.push_str(&field(if row.is_some() { &v } else { t }, *w, *r));
                }
            }
        }
        s.push('\n');
        s
    };
    if !noheader && !parts.is_empty() {
        out.push_str(&line(None));
    }
    for r in &rows {
        out.push_str(&line(Some(r)));
    }
    io.out(&out);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed node (Slurm 22.05 `node_state_string_compact`, sinfo.c `_update_sinfo`):
    /// `fail`/`failg`, and in A/I/O/T idle when nothing runs on it, allocated when something
    /// does, never `other` (goldens-extra 0714, 0719).
    #[test]
    fn failed_node_states_and_counts() {
        let n = |state: &str, alloc: u32| NodeInfo { state: state.into(), cpus: 64, cpus_alloc: alloc, ..NodeInfo::default() };
        let (idle, mixed, full) = (n("FAIL", 0), n("FAIL", 2), n("FAILING", 64));
        assert_eq!((state_of(&idle, false), state_of(&mixed, true), state_of(&full, false)), ("fail".into(), "fail".into(), "failg".into()));
        assert_eq!(state_of(&full, true), "failing");
        assert_eq!(node_state_counts(&[&idle]), "0/1/0/1");
        assert_eq!(node_state_counts(&[&mixed, &full]), "2/0/0/2");
        assert_eq!(cpus_state(&[&idle]), "0/64/0/64");
        assert_eq!(cpus_state(&[&mixed]), "2/62/0/64");
        assert!(state_number("FAIL") > state_number("IDLE"), "sorted before idle nodes (0719)");
    }

    #[test]
    fn node_filter_expands_a_hostlist_and_knows_a_single_name() {
        let f = NodeFilter::parse("gpu[001-003],cpu7").unwrap();
        assert!(["gpu001", "gpu002", "gpu003", "cpu7"].iter().all(|n| f.contains(n)));
        assert!(!f.contains("gpu004") && !f.contains("gpu"));
        assert_eq!(f.single(), None);
        assert_eq!(NodeFilter::parse("gpu[007]").unwrap().single().as_deref(), Some("gpu007"));
        // Slurm's hostlist rules: a reversed range is no hostlist, an unclosed bracket one name.
        assert_eq!(NodeFilter::parse("gpu[3-1]"), None);
        assert_eq!(NodeFilter::parse("gpu[1-3").unwrap().single().as_deref(), Some("gpu]"));
    }

    /// `--largest` shows what is free now beside what elastic growth would free, and `N/A`
    /// for a partition the controller sent nothing for; `-O LargestReclaimable` the latter.
    #[test]
    fn largest_table_shows_growth_as_reclaimable() {
        let lp = |node, pod, any| Some(LargestPlaceableWire { node, pod, any });
        let parts = vec![
            PartitionInfo { name: "batch".into(), default: true, largest_placeable: lp(0, 0, 4), ..PartitionInfo::default() },
            PartitionInfo { name: "debug".into(), largest_placeable: lp(8, 16, 16), ..PartitionInfo::default() },
            PartitionInfo { name: "old".into(), ..PartitionInfo::default() },
        ];
        let batch = PartitionReclaim {
            name: "batch".into(),
            grown_gpus: 16,
            largest_if_reclaimed: LargestPlaceableWire { node: 8, pod: 16, any: 20 },
        };
        let debug = PartitionReclaim {
            name: "debug".into(),
            grown_gpus: 0,
            largest_if_reclaimed: LargestPlaceableWire { node: 8, pod: 16, any: 16 },
        };
        let reclaim: BTreeMap<String, PartitionReclaim> = [batch.clone(), debug].into_iter().map(|r| (r.name.clone(), r)).collect();
        assert_eq!(
            largest_table(&parts, &reclaim, false),
            "\
PARTITION   NODE    POD    ANY  GROWN R_NODE  R_POD  R_ANY
batch*         0      0      4     16      8     16     20
debug          8     16     16      0      8     16     16
old          N/A    N/A    N/A    N/A    N/A    N/A    N/A
"
        );
        assert_eq!(largest_table(&parts[1..2], &BTreeMap::new(), true), "debug          8     16     16    N/A    N/A    N/A    N/A\n");
        assert_eq!(reclaimable_str(Some(&batch)), "node=8,pod=16,any=20");
        assert_eq!(reclaimable_str(None), "N/A");
    }
}
