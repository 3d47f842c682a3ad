//! `sshare`, as Slurm 22.05's (`src/sshare/`): fair share of the associations, Fair Tree
//! columns. `-a`, `-A`, `-u`, `-U`, `-l`, `-m`, `-n`/`-h`, `-p`, `-P`, `-o/--format`,
//! `-e/--helpformat`, `-V`. Rows come from the controller in Slurm's hierarchical order;
//! accounts are indented one space per level under a printed parent, as
//! `slurmdb_tree_name_get` does. The exporter's `sshare -n -P -o account,fairshare` works.
//!
//! `GrpTRESMins`, `GrpTRESRaw` and `TRESRunMins` print empty (Flotilla keeps no per-TRES
//! minutes yet).

use crate::common::{self, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use flotilla_proto::share::{ShareQuery, ShareRow};
use flotilla_proto::{Request, Response};

const fn c(ch: char) -> u32 {
    ch as u32
}
const O_HELP: u32 = 1000;
const O_JSON: u32 = 1001;
const O_YAML: u32 = 1002;
/// sshare's getopt string (Slurm 22.05 `sshare.c`).
pub const SHORTS: &str = "aA:ehlM:no:pPqUu:t:vVm";
/// sshare's long options.
pub const LONGS: &[LongOpt] = &[
    lo("accounts", HasArg::Required, c('A')),
    lo("all", HasArg::No, c('a')),
    lo("helpformat", HasArg::No, c('e')),
    lo("long", HasArg::No, c('l')),
    lo("partition", HasArg::No, c('m')),
    lo("cluster", HasArg::Required, c('M')),
    lo("clusters", HasArg::Required, c('M')),
    lo("noheader", HasArg::No, c('n')),
    lo("format", HasArg::Required, c('o')),
    lo("parsable", HasArg::No, c('p')),
    lo("parsable2", HasArg::No, c('P')),
    lo("users", HasArg::Required, c('u')),
    lo("Users", HasArg::No, c('U')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    // Flotilla: 22.05's sshare has no --json/--yaml.
    lo("json", HasArg::No, O_JSON),
    lo("yaml", HasArg::No, O_YAML),
    lo("help", HasArg::No, O_HELP),
    lo("usage", HasArg::No, O_HELP),
];

/// A column: Slurm's width (negative = left-justified), header, what it prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Account,
    Cluster,
    EffectvUsage,
    FairShare,
    Tres,
    Id,
    LevelFs,
    NormShares,
    NormUsage,
    Partition,
    RawShares,
    RawUsage,
    User,
}

/// sshare's field table, in Slurm's order (prefixes match the first name that starts with
/// them, any case).
const FIELDS: &[(i32, &str, Kind)] = &[
    (-20, "Account", Kind::Account),
    (10, "Cluster", Kind::Cluster),
    (13, "EffectvUsage", Kind::EffectvUsage),
    (10, "FairShare", Kind::FairShare),
    (30, "GrpTRESMins", Kind::Tres),
    (30, "GrpTRESRaw", Kind::Tres),
    (6, "ID", Kind::Id),
    (10, "LevelFS", Kind::LevelFs),
    (11, "NormShares", Kind::NormShares),
    (11, "NormUsage", Kind::NormUsage),
    (12, "Partition", Kind::Partition),
    (10, "RawShares", Kind::RawShares),
    (11, "RawUsage", Kind::RawUsage),
    (30, "TRESRunMins", Kind::Tres),
    (10, "User", Kind::User),
];

/// How the output is delimited (`print_fields_parsable_print`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsable {
    /// Columns padded to their widths.
    No,
    /// `-p`: `|` after every value.
    Ending,
    /// `-P`: `|` between values.
    NoEnding,
}

/// What to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `-o` fields as given (comma-separated, `name%width` allowed); `None`: the default.
    pub format: Option<String>,
    /// `-l`.
    pub long: bool,
    /// `-m`.
    pub partitions: bool,
    /// `-U`.
    pub users_only: bool,
    /// Without `-n`.
    pub header: bool,
    /// `-p`/`-P`.
    pub parsable: Parsable,
    /// The cluster name (the `Cluster` column).
    pub cluster: String,
    /// `PriorityType=priority/basic`: no fair share is computed, and sshare prints what
    /// Slurm's association manager holds then (goldens 0107/0108 of the accounting
    /// recordings): no normalised shares, no usage, fair share 0 for users, none for accounts.
    pub basic: bool,
}

struct Field {
    len: i32,
    name: &'static str,
    kind: Kind,
}

fn fields(o: &Options) -> Result<Vec<Field>, String> {
    let default = match (o.long, o.partitions) {
        (true, true) => "A,User,P,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins",
        (true, false) => "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins",
        (false, true) => "A,User,P,RawShares,NormShares,RawUsage,Eff,Fairshare",
        (false, false) => "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare",
    };
    let list = o.format.as_deref().unwrap_or(default);
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        // slurm_addto_char_list lower-cases what it adds.
        let item = item.to_ascii_lowercase();
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n.to_string(), w.parse::<i32>().unwrap_or(0)),
            None => (item.clone(), 0),
        };
        let f = FIELDS
            .iter()
            .find(|(_, n, _)| n.len() >= name.len() && n[..name.len()].eq_ignore_ascii_case(&name))
            .ok_or_else(|| format!("sshare: error: Invalid field requested: \"{name}\"\n"))?;
        out.push(Field { len: if width != 0 { width } else { f.0 }, name: f.1, kind: f.2 });
    }
    Ok(out)
}

/// One printed value: text or nothing (Slurm's unset), and whether it is a number column.
enum Val {
    Str(Option<String>),
    /// Unsigned, `None` = unset.
    Uint(Option<u64>),
    /// Float, `None` = unset.
    Double(Option<f64>),
}

/// C's `%.*e`: mantissa with `prec` decimals, exponent signed with at least two digits.
fn c_exp(v: f64, prec: usize) -> String {
    let s = format!("{v:.prec$e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

fn cell(out: &mut String, f: &Field, v: Val, last: bool, p: Parsable) {
    let abs = f.len.unsigned_abs() as usize;
    let right = f.len > 0;
    let pad = |s: &str| if right { format!("{s:>abs$} ") } else { format!("{s:<abs$} ") };
    let text = match v {
        Val::Str(s) => match p {
            Parsable::No => {
                let mut t = s.unwrap_or_else(|| " ".into());
                if t.chars().count() > abs {
                    t = t.chars().take(abs.saturating_sub(1)).collect::<String>() + "+";
                }
                Some(t)
            }
            _ => Some(s.unwrap_or_default()),
        },
        Val::Uint(n) => n.map(|n| n.to_string()),
        Val::Double(d) => d.map(|d| {
            let t = format!("{d:.6}");
            if p != Parsable::No || t.len() <= abs {
                t
            } else {
                let long = c_exp(d, abs);
                let width = if long.len() > abs { abs - (long.len() - abs).min(abs) } else { abs };
                c_exp(d, width)
            }
        }),
    };
    match p {
        Parsable::NoEnding if last => out.push_str(text.as_deref().unwrap_or("")),
        Parsable::Ending | Parsable::NoEnding => {
            out.push_str(text.as_deref().unwrap_or(""));
            out.push('|');
        }
        Parsable::No => out.push_str(&pad(text.as_deref().unwrap_or(" "))),
    }
}

/// The account column's tree names (Slurm's `slurmdb_tree_name_get`).
#[derive(Default)]
struct TreeNames {
    /// (name, spaces, print name, user).
    entries: Vec<(String, String, String, bool)>,
}

impl TreeNames {
    fn get(&mut self, name: &str, parent: Option<&str>) -> String {
        let mut found = None;
        let mut par = None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.3 {
                continue;
            }
            if e.0 == name {
                found = Some(i);
                break;
            } else if parent.is_some_and(|p| p == e.0) {
                par = Some(i);
            }
        }
        if let (Some(_), Some(i)) = (parent, found) {
            return self.entries[i].2.clone();
        }
        let spaces = par.map_or(String::new(), |i| format!(" {}", self.entries[i].1));
        let user = name.starts_with('|');
        let print = format!("{spaces}{}", if user { parent.unwrap_or("") } else { name });
        self.entries.push((name.to_string(), spaces, print.clone(), user));
        print
    }
}

/// The text `sshare` prints for `rows`; `Err` with the message for a bad `-o` field.
pub fn render(rows: &[ShareRow], o: &Options) -> Result<String, String> {
    let fields = fields(o)?;
    let mut out = String::new();
    let n = fields.len();
    if o.header {
        for (i, f) in fields.iter().enumerate() {
            match o.parsable {
                Parsable::NoEnding if i + 1 == n => out.push_str(f.name),
                Parsable::Ending | Parsable::NoEnding => {
                    out.push_str(f.name);
                    out.push('|');
                }
                Parsable::No => {
                    let abs = f.len.unsigned_abs() as usize;
                    let name: String = f.name.chars().take(abs).collect();
                    out.push_str(&if f.len > 0 { format!("{name:>abs$} ") } else { format!("{name:<abs$} ") });
                }
            }
        }
        out.push('\n');
        if o.parsable == Parsable::No {
            for f in &fields {
                out.push_str(&"-".repeat(f.len.unsigned_abs() as usize));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    let mut tree = TreeNames::default();
    for r in rows {
        if o.users_only && r.user.is_none() {
            continue;
        }
        for (i, f) in fields.iter().enumerate() {
            let v = match f.kind {
                Kind::Account => {
                    let name = match &r.user {
                        Some(u) => format!("|{u}"),
                        None => r.account.clone(),
                    };
                    Val::Str(Some(tree.get(&name, r.parent.as_deref())))
                }
                Kind::Cluster => Val::Str(Some(o.cluster.clone())),
                Kind::EffectvUsage if o.basic => Val::Double(Some(0.0)),
                Kind::EffectvUsage => Val::Double(Some(r.effectv_usage)),
                Kind::FairShare if o.basic && r.user.is_some() => Val::Double(Some(0.0)),
                Kind::FairShare if o.basic => Val::Str(None),
                Kind::FairShare => match r.fairshare {
                    Some(fs) => Val::Double(Some(fs)),
                    None => Val::Str(None),
                },
                Kind::Tres => Val::Str(Some(String::new())),
                Kind::Id => Val::Uint(Some(u64::from(r.id))),
                Kind::LevelFs => match r.level_fs {
                    Some(l) if r.raw_shares != Some(u32::MAX) && l != flotilla_core::fairshare::LEVEL_FS_NO_VAL => Val::Double(Some(l)),
                    Some(_) if r.raw_shares == Some(u32::MAX) => Val::Str(None),
                    _ => Val::Double(None),
                },
                Kind::NormShares if o.basic => Val::Double(None),
                Kind::NormShares => Val::Double(Some(r.norm_shares)),
                Kind::NormUsage => Val::Double(r.norm_usage),
                Kind::Partition => Val::Str(r.partition.clone()),
                Kind::RawShares => match r.raw_shares {
                    Some(u32::MAX) => Val::Str(Some("parent".into())),
                    s => Val::Uint(s.map(u64::from)),
                },
                Kind::RawUsage if o.basic => Val::Uint(Some(0)),
                Kind::RawUsage => Val::Uint(Some(r.raw_usage.max(0.0) as u64)),
                Kind::User => Val::Str(r.user.clone()),
            };
            cell(&mut out, f, v, i + 1 == n, o.parsable);
        }
        out.push('\n');
    }
    Ok(out)
}

/// `sshare --helpformat`.
pub fn help_format() -> String {
    let mut out = String::new();
    for (i, (_, name, _)) in FIELDS.iter().enumerate() {
        if i & 3 != 0 {
            out.push(' ');
        } else if i != 0 {
            out.push('\n');
        }
        out.push_str(&format!("{name:<17}"));
    }
    out.push('\n');
    out
}

/// `sshare ARGS` (`args[0]` is the program name); returns the exit code.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    let p = match getopt_long("sshare", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(m) => {
            io.err(&format!("{m}\nTry \"sshare --help\" for more information\n"));
            return 1;
        }
    };
    let mut o = Options {
        format: None,
        long: false,
        partitions: false,
        users_only: false,
        header: true,
        parsable: Parsable::No,
        cluster: String::new(),
        basic: false,
    };
    let (mut all, mut users, mut accounts) = (false, Vec::new(), Vec::new());
    let mut format = String::new();
    let mut mime = None;
    for opt in &p.opts {
        let a = opt.arg.clone().unwrap_or_default();
        match opt.id {
            x if x == c('a') => all = true,
            x if x == c('A') => accounts.extend(a.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            x if x == c('e') => {
                io.out(&help_format());
                return 0;
            }
            x if x == c('h') || x == c('n') => o.header = false,
            x if x == c('l') => o.long = true,
            x if x == c('m') => o.partitions = true,
            x if x == c('o') => {
                format.push_str(&a);
                format.push(',');
            }
            x if x == c('p') => o.parsable = Parsable::Ending,
            x if x == c('P') => o.parsable = Parsable::NoEnding,
            x if x == c('u') => {
                if a == "-1" {
                    all = true;
                } else {
                    all = false;
                    users.extend(a.split(',').filter(|s| !s.is_empty()).map(str::to_string));
                }
            }
            x if x == c('U') => o.users_only = true,
            x if x == c('V') => {
                io.out(&format!("{}\n", crate::sbatch::VERSION_LINE));
                return 0;
            }
            O_JSON => mime = Some(crate::json_out::Mime::Json),
            O_YAML => mime = Some(crate::json_out::Mime::Yaml),
            O_HELP => {
                io.out("Usage:  sshare [OPTION]\n");
                return 0;
            }
            _ => {}
        }
    }
    if !format.is_empty() {
        o.format = Some(format);
    }
    if all {
        users.clear();
    } else if users.is_empty() {
        users.push(common::user_name(common::my_uid()));
    }
    // A bad field is refused before anything is asked (as Slurm, which exits in `process`).
    if let Err(m) = fields(&o) {
        io.err(&m);
        return 1;
    }
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("sshare: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    o.cluster = ctl.conf.cluster_name.clone();
    o.basic = ctl.conf.priority_type == "priority/basic";
    let rows = match ctl.call(Request::QueryShares(ShareQuery { accounts, users })) {
        Ok(Response::Shares(r)) => r,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("sshare: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    if let Some(m) = mime {
        io.out(&crate::json_out::render(&crate::json_out::shares_doc(&rows), m));
        return 0;
    }
    match render(&rows, &o) {
        Ok(s) => {
            io.out(&s);
            0
        }
        Err(m) => {
            io.err(&m);
            1
        }
    }
}

#[cfg(test)]
mod tests;
