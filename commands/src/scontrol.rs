//! `scontrol`, byte-compatible with Slurm 22.05's `src/scontrol/scontrol.c`.
//!
//! Implemented so far, all without a controller: `scontrol --version` (`-V`, `version`),
//! `scontrol show hostnames [LIST]` (falls back to `SLURM_NODELIST`, never to
//! `SLURM_JOB_NODELIST`, as 22.05 does), `scontrol show hostlist LIST|/FILE` and
//! `scontrol show hostlistsorted LIST|/FILE`. Option parsing follows glibc's `getopt_long`
//! with scontrol's option table, and keywords and entities are matched as scontrol matches
//! them (case-insensitive prefixes with per-keyword minimum lengths), so that later work
//! only adds entities. Keywords Slurm knows but Flotilla does not implement yet are refused
//! with a Flotilla error and exit code 1.


use crate::scontrol_ctl as ctl;
use flotilla_core::hostlist::{Hostlist, HostlistError};
use flotilla_proto::HoldOp;

/// What `scontrol --version` prints (Debian's `slurm-wlm` package of Slurm 22.05.8).
pub const VERSION_LINE: &str = "slurm-wlm 22.05.8";

/// `SLURM_VERSION_NUM(22, 5, 8)`, printed by `scontrol -v -V`.
const API_VERSION: u64 = (22 << 16) | (5 << 8) | 8;

/// Largest hostlist file `show hostlist /FILE` reads (Slurm: 1 MiB, "almost certainly invalid").
const MAX_HOSTLIST_FILE: usize = 1024 * 1024;

pub use crate::common::Io;

/// Runs `scontrol` with `args` (`args[0]` is the program name, as in C's `argv`) and returns
/// its exit status. Write errors (a closed pipe) are ignored, as `printf` ignores them.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let mut sc = Scontrol {
        prog: args.first().map_or("scontrol", String::as_str),
        io,
        state: State::default(),
    };
    match sc.main(args) {
        Ok(()) => sc.state.exit_code,
        Err(Exit(code)) => code,
    }
}

/// An early exit with this status (C's `exit()`).
struct Exit(i32);

#[derive(Debug, Default)]
struct State {
    exit_code: i32,
    /// quiet=1, verbose=-1, normal=0 (Slurm's `quiet_flag`).
    quiet: i32,
    all: bool,
    details: bool,
    future: bool,
    one_liner: bool,
    /// `--json`/`--yaml` (Flotilla's; 22.05 has neither).
    mime: Option<crate::json_out::Mime>,
}

struct Scontrol<'a, 'b> {
    prog: &'a str,
    io: &'a mut Io<'b>,
    state: State,
}

/// How many leading characters of a keyword must match (Slurm's `xstrncasecmp(tag, kw, n)`):
/// `Max(k)` is `MAX(tag_len, k)`, `Fixed(k)` is `k`.
#[derive(Debug, Clone, Copy)]
enum Min {
    Max(usize),
    Fixed(usize),
}

/// `xstrncasecmp(tag, kw, n) == 0` with `n` from `min`.
fn kw(tag: &str, kw: &str, min: Min) -> bool {
    let n = match min {
        Min::Max(k) => tag.len().max(k),
        Min::Fixed(k) => k,
    };
    let (t, k) = (tag.as_bytes(), kw.as_bytes());
    for i in 0..n {
        let a = t.get(i).copied().unwrap_or(0);
        let b = k.get(i).copied().unwrap_or(0);
        if !a.eq_ignore_ascii_case(&b) {
            return false;
        }
        if a == 0 {
            return true;
        }
    }
    true
}

/// Top-level keywords of Slurm 22.05's `_process_command`, in its order of tests.
const KEYWORDS: &[(&str, Min)] = &[
    ("abort", Min::Max(5)),
    ("all", Min::Max(2)),
    ("cancel_reboot", Min::Max(3)),
    ("completing", Min::Max(2)),
    ("cluster", Min::Max(2)),
    ("create", Min::Max(2)),
    ("details", Min::Max(1)),
    ("errnumstr", Min::Max(2)),
    ("errnostr", Min::Max(2)),
    ("exit", Min::Max(2)),
    ("gethost", Min::Max(7)),
    ("hash_file", Min::Max(15)),
    ("hash", Min::Max(9)),
    ("help", Min::Max(2)),
    ("hide", Min::Max(2)),
    ("oneliner", Min::Max(1)),
    ("pidinfo", Min::Max(3)),
    ("ping", Min::Max(3)),
    ("\\q", Min::Fixed(2)),
    ("quiet", Min::Max(4)),
    ("quit", Min::Max(4)),
    ("reboot_nodes", Min::Max(3)),
    ("reconfigure", Min::Max(3)),
    ("requeue", Min::Max(3)),
    ("requeuehold", Min::Fixed(11)),
    ("hold", Min::Fixed(4)),
    ("holdu", Min::Fixed(5)),
    ("uhold", Min::Fixed(5)),
    ("release", Min::Max(3)),
    ("suspend", Min::Max(2)),
    ("resume", Min::Max(3)),
    ("top", Min::Max(3)),
    ("token", Min::Max(3)),
    ("wait_job", Min::Max(2)),
    ("setdebugflags", Min::Max(9)),
    ("fsdampeningfactor", Min::Max(3)),
    ("fairsharedampeningfactor", Min::Max(3)),
    ("setdebug", Min::Max(2)),
    ("schedloglevel", Min::Max(3)),
    ("show", Min::Max(3)),
    ("write", Min::Max(5)),
    ("takeover", Min::Max(8)),
    ("shutdown", Min::Max(8)),
    ("update", Min::Max(1)),
    ("delete", Min::Max(1)),
    ("verbose", Min::Max(4)),
    ("version", Min::Max(4)),
    ("listpids", Min::Max(1)),
    ("getent", Min::Max(6)),
    ("notify", Min::Max(1)),
    ("callerid", Min::Max(3)),
];

/// Entities of `show`, in the order of Slurm 22.05's `_show_it`.
const ENTITIES: &[(&str, Min)] = &[
    ("aliases", Min::Max(1)),
    ("bbstat", Min::Max(2)),
    ("dwstat", Min::Max(2)),
    ("burstbuffer", Min::Max(2)),
    ("assoc_mgr", Min::Max(2)),
    ("cache", Min::Max(2)),
    ("config", Min::Max(1)),
    ("daemons", Min::Max(1)),
    ("Federations", Min::Max(1)),
    ("FrontendName", Min::Max(1)),
    ("hostnames", Min::Max(5)),
    ("hostlist", Min::Max(5)),
    ("hostlistsorted", Min::Max(9)),
    ("jobs", Min::Max(1)),
    ("jobid", Min::Max(1)),
    ("licenses", Min::Max(2)),
    ("nodes", Min::Max(1)),
    ("partitions", Min::Max(2)),
    ("partitionname", Min::Max(2)),
    ("reservations", Min::Max(1)),
    ("reservationname", Min::Max(1)),
    ("slurmd", Min::Max(2)),
    ("steps", Min::Max(2)),
    ("topology", Min::Max(1)),
    // Flotilla: alerts and pages of the scheduler.
    ("alerts", Min::Max(3)),
];

fn lookup<'t>(table: &'t [(&'t str, Min)], tag: &str) -> Option<&'t str> {
    table
        .iter()
        .find(|(name, min)| kw(tag, name, *min))
        .map(|(name, _)| *name)
}

/// scontrol's long options: name, takes an argument, equivalent short option (0: none).
pub const LONG_OPTIONS: &[(&str, bool, char)] = &[
    ("all", false, 'a'),
    ("cluster", true, 'M'),
    ("clusters", true, 'M'),
    ("details", false, 'd'),
    ("federation", false, '\u{1}'),
    ("future", false, 'F'),
    ("help", false, 'h'),
    ("hide", false, '\u{2}'),
    // Flotilla: 22.05's scontrol has no --json/--yaml (it answers "unrecognized option").
    ("json", false, '\u{5}'),
    ("local", false, '\u{3}'),
    ("oneliner", false, 'o'),
    ("quiet", false, 'Q'),
    ("sibling", false, '\u{4}'),
    ("uid", true, 'u'),
    ("usage", false, 'h'),
    ("verbose", false, 'v'),
    ("version", false, 'V'),
    ("yaml", false, '\u{6}'),
];

/// scontrol's `getopt_long` short options `"adhM:FoQu:vV"`: `Some(takes_argument)`.
pub fn short_option(c: char) -> Option<bool> {
    match c {
        'a' | 'd' | 'h' | 'F' | 'o' | 'Q' | 'v' | 'V' => Some(false),
        'M' | 'u' => Some(true),
        _ => None,
    }
}

impl Scontrol<'_, '_> {
    fn out(&mut self, s: &str) {
        let _ = self.io.out.write_all(s.as_bytes());
    }

    fn err(&mut self, s: &str) {
        let _ = self.io.err.write_all(s.as_bytes());
    }

    /// Slurm's `error()`: `scontrol: error: MSG`.
    fn error(&mut self, msg: &str) {
        self.err(&format!("scontrol: error: {msg}\n"));
    }

    fn main(&mut self, args: &[String]) -> Result<(), Exit> {
        let operands = self.parse_options(args)?;
        if operands.is_empty() {
            // Interactive mode reads commands from stdin; not implemented yet.
            return Ok(());
        }
        self.process_command(&operands)
    }

    /// glibc `getopt_long` over scontrol's options, permuting operands to the end.
    fn parse_options(&mut self, args: &[String]) -> Result<Vec<String>, Exit> {
        let mut operands = Vec::new();
        let mut i = 1;
        while i < args.len() {
            let a = args[i].as_str();
            if kw(a, "setdebugflags", Min::Fixed(8)) {
                operands.extend(args[i..].iter().cloned());
                break;
            }
            if a == "--" {
                operands.extend(args[i + 1..].iter().cloned());
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                let exact = LONG_OPTIONS.iter().find(|o| o.0 == name);
                let found = match exact {
                    Some(o) => *o,
                    None => {
                        let cands: Vec<_> = LONG_OPTIONS
                            .iter()
                            .filter(|o| o.0.starts_with(name))
                            .collect();
                        let first = cands.first().copied();
                        match first {
                            None => {
                                self.err(&format!(
                                    "{}: unrecognized option '--{long}'\n",
                                    self.prog
                                ));
                                return self.bad_option();
                            }
                            Some(f) if cands.iter().all(|o| o.1 == f.1 && o.2 == f.2) => *f,
                            Some(_) => {
                                let mut msg = format!(
                                    "{}: option '--{long}' is ambiguous; possibilities:",
                                    self.prog
                                );
                                for o in &cands {
                                    msg.push_str(&format!(" '--{}'", o.0));
                                }
                                msg.push('\n');
                                self.err(&msg);
                                return self.bad_option();
                            }
                        }
                    }
                };
                let (oname, takes_arg, c) = found;
                let arg = if takes_arg {
                    match value {
                        Some(v) => Some(v.to_string()),
                        None if i + 1 < args.len() => {
                            i += 1;
                            Some(args[i].clone())
                        }
                        None => {
                            self.err(&format!(
                                "{}: option '--{oname}' requires an argument\n",
                                self.prog
                            ));
                            return self.bad_option();
                        }
                    }
                } else {
                    if value.is_some() {
                        self.err(&format!(
                            "{}: option '--{oname}' doesn't allow an argument\n",
                            self.prog
                        ));
                        return self.bad_option();
                    }
                    None
                };
                self.apply_option(c, arg)?;
            } else if a.len() > 1 && a.starts_with('-') {
                let chars: Vec<char> = a[1..].chars().collect();
                let mut k = 0;
                while k < chars.len() {
                    let c = chars[k];
                    match short_option(c) {
                        None => {
                            self.err(&format!("{}: invalid option -- '{c}'\n", self.prog));
                            return self.bad_option();
                        }
                        Some(false) => self.apply_option(c, None)?,
                        Some(true) => {
                            let rest: String = chars[k + 1..].iter().collect();
                            let arg = if !rest.is_empty() {
                                rest
                            } else if i + 1 < args.len() {
                                i += 1;
                                args[i].clone()
                            } else {
                                self.err(&format!(
                                    "{}: option requires an argument -- '{c}'\n",
                                    self.prog
                                ));
                                return self.bad_option();
                            };
                            self.apply_option(c, Some(arg))?;
                            break;
                        }
                    }
                    k += 1;
                }
            } else {
                operands.push(args[i].clone());
            }
            i += 1;
        }
        Ok(operands)
    }

    fn bad_option<T>(&mut self) -> Result<T, Exit> {
        self.err("Try \"scontrol --help\" for more information\n");
        Err(Exit(1))
    }

    fn apply_option(&mut self, c: char, _arg: Option<String>) -> Result<(), Exit> {
        match c {
            'a' => self.state.all = true,
            'd' => self.state.details = true,
            'F' => self.state.future = true,
            'h' => {
                self.usage();
                return Err(Exit(self.state.exit_code));
            }
            '\u{2}' => {
                self.state.all = false;
                self.state.details = false;
            }
            'o' => self.state.one_liner = true,
            '\u{5}' => self.state.mime = Some(crate::json_out::Mime::Json),
            '\u{6}' => self.state.mime = Some(crate::json_out::Mime::Yaml),
            'Q' => self.state.quiet = 1,
            'v' => self.state.quiet = -1,
            'V' => {
                self.print_version();
                return Err(Exit(self.state.exit_code));
            }
            // -M/--cluster, -u/--uid, --federation, --local, --sibling: accepted; they only
            // matter to commands that talk to a controller.
            _ => {}
        }
        Ok(())
    }

    fn print_version(&mut self) {
        self.out(&format!("{VERSION_LINE}\n"));
        if self.state.quiet == -1 {
            self.out(&format!("slurm_api_version: {API_VERSION}, 22.5.8\n"));
        }
    }

    /// Slurm's `_usage`, abridged: the full 22.05 text has no golden yet.
    fn usage(&mut self) {
        self.out(
            "scontrol [<OPTION>] [<COMMAND>]\n    Valid <OPTION> values are:\n     \
             -a, --all      Equivalent to \"all\" command\n     \
             -d, --details  Equivalent to \"details\" command\n     \
             -h, --help     Equivalent to \"help\" command\n     \
             -o, --oneliner Equivalent to \"oneliner\" command\n     \
             -Q, --quiet    Equivalent to \"quiet\" command\n     \
             -v, --verbose  Equivalent to \"verbose\" command\n     \
             -V, --version  Equivalent to \"version\" command\n",
        );
    }

    /// Slurm's `_process_command`.
    fn process_command(&mut self, argv: &[String]) -> Result<(), Exit> {
        let tag = argv[0].as_str();
        let argc = argv.len();
        let too_many = |s: &mut Self| {
            s.state.exit_code = 1;
            s.err(&format!("too many arguments for keyword:{tag}\n"));
        };
        match lookup(KEYWORDS, tag) {
            Some("show") => self.show(argv),
            Some("version") => {
                if argc > 1 {
                    self.state.exit_code = 1;
                    self.err(&format!("too many arguments for {tag} keyword\n"));
                }
                self.print_version();
                Ok(())
            }
            Some("verbose") => {
                if argc > 1 {
                    self.state.exit_code = 1;
                    self.err(&format!("too many arguments for {tag} keyword\n"));
                }
                self.state.quiet = -1;
                Ok(())
            }
            Some(
                k @ ("all" | "hide" | "details" | "oneliner" | "quiet" | "\\q" | "exit" | "quit"),
            ) => {
                let limit = if k == "all" || k == "hide" {
                    usize::MAX
                } else {
                    1
                };
                if argc > limit {
                    too_many(self);
                }
                match k {
                    "all" => self.state.all = true,
                    "hide" => {
                        self.state.all = false;
                        self.state.details = false;
                    }
                    "details" if argc == 1 => self.state.details = true,
                    "oneliner" => self.state.one_liner = true,
                    "quiet" | "\\q" => self.state.quiet = 1,
                    _ => {}
                }
                Ok(())
            }
            Some("help") => {
                if argc > 1 {
                    too_many(self);
                }
                self.usage();
                Ok(())
            }
            Some(k @ ("hold" | "holdu" | "uhold" | "release")) => {
                let op = match k {
                    "hold" => HoldOp::Hold,
                    "release" => HoldOp::Release,
                    _ => HoldOp::UserHold,
                };
                self.state.exit_code = ctl::hold_release(op, &argv[1..], self.io);
                Ok(())
            }
            Some(k @ ("requeue" | "requeuehold")) => {
                self.state.exit_code = ctl::requeue(k == "requeuehold", &argv[1..], self.io);
                Ok(())
            }
            Some("update") => {
                self.state.exit_code = ctl::update(&argv[1..], self.io);
                Ok(())
            }
            Some("top") => {
                self.state.exit_code = ctl::top(&argv[1..], self.io);
                Ok(())
            }
            Some("ping") => {
                if argc > 1 {
                    too_many(self);
                } else {
                    self.state.exit_code = ctl::ping(self.io);
                }
                Ok(())
            }
            Some("takeover") => {
                self.state.exit_code = ctl::takeover(&argv[1..], self.io);
                Ok(())
            }
            Some("token") => {
                self.state.exit_code = ctl::token(&argv[1..], self.io);
                Ok(())
            }
            Some(k) => self.not_implemented(k),
            None => {
                self.state.exit_code = 1;
                self.err(&format!("invalid keyword: {tag}\n"));
                Ok(())
            }
        }
    }

    fn not_implemented(&mut self, what: &str) -> Result<(), Exit> {
        self.error(&format!("flotilla: `{what}' is not implemented yet"));
        Err(Exit(1))
    }

    /// Slurm's `_show_it`.
    fn show(&mut self, argv: &[String]) -> Result<(), Exit> {
        let argc = argv.len();
        if argc < 2 {
            self.state.exit_code = 1;
            if self.state.quiet != 1 {
                self.err(&format!("too few arguments for keyword:{}\n", argv[0]));
            }
            return Ok(());
        }
        // Slurm compares with MAX(tag_len, 2) while tag_len is still 0.
        let allow_opt = ["assoc_mgr", "bbstat", "dwstat"]
            .iter()
            .any(|k| kw(&argv[1], k, Min::Fixed(2)));
        if argc > 3 && !allow_opt {
            self.state.exit_code = 1;
            if self.state.quiet != 1 {
                self.err(&format!("too many arguments for keyword:{}\n", argv[0]));
            }
            return Ok(());
        }
        let (tag, val) = match argv[1].split_once('=') {
            Some((t, v)) => (t, Some(v.to_string())),
            None => (argv[1].as_str(), argv.get(2).filter(|_| argc == 3).cloned()),
        };
        match lookup(ENTITIES, tag) {
            Some("hostnames") => {
                let list = val.or_else(|| (self.io.env)("SLURM_NODELIST"));
                self.print_hosts(list.as_deref())
            }
            Some(e @ ("hostlist" | "hostlistsorted")) => match val {
                None => {
                    self.state.exit_code = 1;
                    self.err("invalid encode argument\n");
                    self.usage();
                    Ok(())
                }
                Some(v) => {
                    if self.encode_hostlist(&v, e == "hostlistsorted")? {
                        self.state.exit_code = 1;
                    }
                    Ok(())
                }
            },
            Some(e @ ("jobs" | "jobid" | "nodes" | "partitions" | "partitionname" | "topology" | "alerts")) => {
                let flags = ctl::ShowFlags {
                    one_liner: self.state.one_liner,
                    details: self.state.details,
                };
                let v = val.as_deref();
                if let (Some(mime), "jobs" | "jobid" | "nodes" | "partitions" | "partitionname") = (self.state.mime, e) {
                    let what = match e {
                        "jobs" | "jobid" => crate::json_out::Show::Job,
                        "nodes" => crate::json_out::Show::Node,
                        _ => crate::json_out::Show::Partition,
                    };
                    self.state.exit_code = crate::json_out::show(what, v, mime, self.io);
                    return Ok(());
                }
                self.state.exit_code = match e {
                    "jobs" | "jobid" => ctl::show_job(v, flags, self.io),
                    "nodes" => ctl::show_node(v, flags, self.io),
                    "topology" => ctl::show_topology(self.io),
                    "alerts" => ctl::show_alerts(flags, self.io),
                    _ => ctl::show_partition(v, flags, self.io),
                };
                Ok(())
            }
            Some("steps") => {
                self.state.exit_code = ctl::show_step(val.as_deref(), self.state.one_liner, self.io);
                Ok(())
            }
            Some("config") => {
                self.state.exit_code = crate::scontrol_config::show_config(val.as_deref(), self.io);
                Ok(())
            }
            Some(e) => self.not_implemented(&format!("show {e}")),
            None => {
                self.state.exit_code = 1;
                if self.state.quiet != 1 {
                    self.err(&format!("invalid entity:{tag} for keyword:{} \n", argv[0]));
                }
                Ok(())
            }
        }
    }

    /// Parses a hostlist as `hostlist_create` does, reporting what Slurm logs on the way.
    fn parse_hostlist(&mut self, list: &str) -> Result<Result<Hostlist, HostlistError>, Exit> {
        let mut log = Vec::new();
        let parsed = Hostlist::parse_logged(list, &mut log);
        for e in &log {
            if let Some(msg) = e.slurm_message() {
                if e.is_fatal() {
                    self.err(&format!("scontrol: fatal: {msg}\n"));
                    return Err(Exit(1));
                }
                self.error(&msg);
            }
        }
        if let Err(HostlistError::TooLarge) = parsed {
            self.error("flotilla: hostlist too large");
        }
        Ok(parsed)
    }

    /// Slurm's `scontrol_print_hosts`: one name per line; the exit code is left alone even
    /// when the list is invalid.
    fn print_hosts(&mut self, list: Option<&str>) -> Result<(), Exit> {
        let Some(list) = list else {
            self.error("host list is empty");
            return Ok(());
        };
        match self.parse_hostlist(list)? {
            Ok(hl) => {
                for host in hl.iter() {
                    let _ = self.io.out.write_all(host.as_bytes());
                    let _ = self.io.out.write_all(b"\n");
                }
            }
            Err(_) => self.err(&format!("Invalid hostlist: {list}\n")),
        }
        Ok(())
    }

    /// Slurm's `scontrol_encode_hostlist`: `arg` is a hostlist, or the path of a file of
    /// names when it starts with `/`. Returns whether it failed (exit code 1).
    fn encode_hostlist(&mut self, arg: &str, sorted: bool) -> Result<bool, Exit> {
        let list = if arg.starts_with('/') {
            match std::fs::read(arg) {
                Err(_) => {
                    self.err(&format!("Can not open {arg}\n"));
                    return Ok(true);
                }
                Ok(bytes) if bytes.len() >= MAX_HOSTLIST_FILE => {
                    self.err(&format!("File {arg} is too large\n"));
                    return Ok(true);
                }
                Ok(bytes) => {
                    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                    reformat_hostlist(&String::from_utf8_lossy(&bytes[..end]))
                }
            }
        } else {
            arg.to_string()
        };
        match self.parse_hostlist(&list)? {
            Ok(mut hl) => {
                if sorted {
                    hl.sort();
                }
                self.out(&format!("{}\n", hl.ranged_string()));
                Ok(false)
            }
            Err(_) => {
                self.err(&format!("Invalid hostlist: {list}\n"));
                Ok(true)
            }
        }
    }
}

/// Slurm's `_reformat_hostlist`: newlines become commas, runs of commas collapse to one.
fn reformat_hostlist(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().map(|c| if c == '\n' { ',' } else { c }) {
        if c == ',' && out.ends_with(',') {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let getenv = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let argv: Vec<String> = std::iter::once("scontrol")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        let code = run(
            &argv,
            &mut Io {
                out: &mut out,
                err: &mut err,
                env: &getenv,
                stdin: None,
            },
        );
        (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
            code,
        )
    }

    #[test]
    fn version() {
        assert_eq!(
            sc(&["--version"], &[]),
            ("slurm-wlm 22.05.8\n".into(), String::new(), 0)
        );
        assert_eq!(sc(&["-V"], &[]).0, "slurm-wlm 22.05.8\n");
        assert_eq!(sc(&["vers"], &[]).0, "slurm-wlm 22.05.8\n");
        assert_eq!(
            sc(&["-v", "-V"], &[]).0,
            "slurm-wlm 22.05.8\nslurm_api_version: 1443080, 22.5.8\n"
        );
    }

    /// Slurm 22.05's `scontrol_update_node` refuses DOWN, DRAIN and FAIL without a reason
    /// before it asks the controller (goldens-extra 0708).
    #[test]
    fn node_down_or_drain_needs_a_reason() {
        let denied = "You must specify a reason when DOWNING or DRAINING a node. Request denied\n";
        for st in ["drain", "DOWN", "fai", "Drain"] {
            let (out, err, code) = sc(&["update", "nodename=gpu04", &format!("state={st}")], &[]);
            assert_eq!((out.as_str(), err.as_str(), code), ("", denied, 1), "{st}");
            let (_, err, _) = sc(&["update", "nodename=gpu04", &format!("state={st}"), "reason="], &[]);
            assert_eq!(err, denied, "{st} with an empty reason");
        }
    }

    use flotilla_proto::{negotiate, read_frame, write_frame, ClusterKey, Frame, Request, Response, DEFAULT_MAX_FRAME};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// A controller peer on `l` (this test's, not ours): answers the hello, then each
    /// authenticated request with `answer`; counts the requests.
    fn fake_ctld(l: std::net::TcpListener, answer: fn(&Request) -> Response) -> Arc<AtomicU32> {
        let n = Arc::new(AtomicU32::new(0));
        let count = n.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                let Ok(Frame::Hello(h)) = read_frame(&mut s, DEFAULT_MAX_FRAME) else { continue };
                write_frame(&mut s, &Frame::HelloOk { version: negotiate(&h).unwrap() }).unwrap();
                if let Ok(Frame::Request { id, auth: Some(_), body }) = read_frame(&mut s, DEFAULT_MAX_FRAME) {
                    count.fetch_add(1, Ordering::SeqCst);
                    write_frame(&mut s, &Frame::Response { id, body: answer(&body) }).unwrap();
                }
            }
        });
        n
    }

    /// A `sackd` peer in `dir` that issues credentials signed with a new key; its socket.
    fn fake_sackd(dir: &std::path::Path) -> std::path::PathBuf {
        let key = ClusterKey::generate(&dir.join("slurm.key")).unwrap();
        let path = dir.join("sackd.sock");
        let sackd = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            for s in sackd.incoming() {
                let mut s = s.unwrap();
                let Ok(Frame::Hello(h)) = read_frame(&mut s, DEFAULT_MAX_FRAME) else { continue };
                write_frame(&mut s, &Frame::HelloOk { version: negotiate(&h).unwrap() }).unwrap();
                if let Ok(Frame::Request { id, body: Request::IssueCredential, .. }) = read_frame(&mut s, DEFAULT_MAX_FRAME) {
                    let cred = key.sign(0, 0, "h", crate::common::now() as u64, 300);
                    write_frame(&mut s, &Frame::Response { id, body: Response::Credential(cred) }).unwrap();
                }
            }
        });
        path
    }

    fn pong(_: &Request) -> Response {
        Response::Pong
    }

    fn conf_text(hosts: &[(&str, &str)], port: u16, extra: &str) -> String {
        let mut c = "ClusterName=c\n".to_string();
        for (h, a) in hosts {
            c.push_str(&format!("SlurmctldHost={h}({a})\n"));
        }
        c + &format!("SlurmctldPort={port}\n{extra}NodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n")
    }

    /// `ping` against two controllers that answer (this test's peers: a controller that
    /// answers the hello and the ping, a `sackd` that issues the credential) and one address
    /// where nothing listens, as Slurm prints it.
    #[test]
    fn ping_reports_each_slurmctld_host_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let ctl = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = ctl.local_addr().unwrap().port();
        let pings = fake_ctld(ctl, pong);
        let sackd_path = fake_sackd(dir.path());
        // ctl1 and ctl3 reach the peer; nothing listens on 127.0.0.2 (connection refused).
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, conf_text(&[("ctl1", "127.0.0.1"), ("ctl2", "127.0.0.2"), ("ctl3", "127.0.0.1")], port, "")).unwrap();
        let env = [("SLURM_CONF", conf.to_str().unwrap()), ("FLOTILLA_AUTH_SOCKET", sackd_path.to_str().unwrap())];
        let (out, err, code) = sc(&["ping"], &env);
        let mut want = "Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup1) at ctl2 is DOWN\nSlurmctld(backup2) at ctl3 is UP\n".to_string();
        if nix::unistd::getuid().is_root() {
            want.push_str("*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n");
        }
        assert_eq!((out, err, code), (want, String::new(), 0));
        assert_eq!(pings.load(Ordering::SeqCst), 2, "ctl1 and ctl3 were pinged");
        assert_eq!(sc(&["ping", "x"], &env), (String::new(), "too many arguments for keyword:ping\n".into(), 1));
        // Two controllers: the second is `backup`; none answering: exit status 1.
        std::fs::write(&conf, conf_text(&[("ctl1", "127.0.0.2"), ("ctl2", "127.0.0.2")], 9, "")).unwrap();
        let (out, _, code) = sc(&["ping"], &env);
        assert!(out.starts_with("Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is DOWN\n"), "{out}");
        assert_eq!(code, 1);
    }

    /// A command's request goes to the controller that leads: past one that cannot be reached
    /// and one that answers as a standby; with none leading it gives up after one and a half
    /// `SlurmctldTimeout` with Slurm's standby text.
    #[test]
    fn requests_follow_the_leader_past_unreachable_and_standby_controllers() {
        fn standby(_: &Request) -> Response {
            Response::Error(flotilla_proto::SlurmError::new(flotilla_proto::errno::ESLURM_IN_STANDBY_MODE))
        }
        fn leader(r: &Request) -> Response {
            match r {
                Request::QueryJobs(_) => Response::Jobs(Vec::new()),
                _ => Response::Pong,
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let first = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = first.local_addr().unwrap().port();
        let second = std::net::TcpListener::bind(("127.0.0.3", port)).unwrap();
        let standby_asked = fake_ctld(first, standby);
        let leader_asked = fake_ctld(second, leader);
        let sackd_path = fake_sackd(dir.path());
        let conf = dir.path().join("slurm.conf");
        // Nothing listens on 127.0.0.2; 127.0.0.1 is a standby; 127.0.0.3 leads.
        std::fs::write(&conf, conf_text(&[("a", "127.0.0.2"), ("b", "127.0.0.1"), ("c", "127.0.0.3")], port, "SlurmctldTimeout=1\n")).unwrap();
        let env = |k: &str| match k {
            "SLURM_CONF" => Some(conf.display().to_string()),
            "FLOTILLA_AUTH_SOCKET" => Some(sackd_path.display().to_string()),
            _ => None,
        };
        let ctl = crate::common::Ctl::new(&env).unwrap();
        let r = ctl.call(Request::QueryJobs(flotilla_proto::JobQuery::default()));
        assert!(matches!(r, Ok(Response::Jobs(ref j)) if j.is_empty()), "{r:?}");
        assert_eq!((standby_asked.load(Ordering::SeqCst), leader_asked.load(Ordering::SeqCst)), (1, 1));
        // No leader: the standby's error, after the rounds of 1.5 s.
        std::fs::write(&conf, conf_text(&[("a", "127.0.0.2"), ("b", "127.0.0.1")], port, "SlurmctldTimeout=1\n")).unwrap();
        let ctl = crate::common::Ctl::new(&env).unwrap();
        match ctl.call(Request::QueryJobs(flotilla_proto::JobQuery::default())) {
            Err(crate::common::CtlError::Slurm(e)) => assert_eq!(e.text, "Slurm backup controller in standby mode"),
            other => panic!("{other:?}"),
        }
        assert!(standby_asked.load(Ordering::SeqCst) >= 3, "asked in the first call, then again in the later rounds of the second");
    }

    /// `takeover [INDEX]` asks backup INDEX (default 1) only, with Slurm's refusals.
    #[test]
    fn takeover_asks_the_backup_it_names() {
        fn done(r: &Request) -> Response {
            match r {
                Request::Takeover => Response::Done,
                _ => Response::Pong,
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let backup = std::net::TcpListener::bind("127.0.0.6:0").unwrap();
        let port = backup.local_addr().unwrap().port();
        let asked = fake_ctld(backup, done);
        let sackd_path = fake_sackd(dir.path());
        let conf = dir.path().join("slurm.conf");
        // The primary (nothing listens on 127.0.0.2) is never asked.
        std::fs::write(&conf, conf_text(&[("a", "127.0.0.2"), ("b", "127.0.0.6"), ("c", "127.0.0.7")], port, "")).unwrap();
        let env = [("SLURM_CONF", conf.to_str().unwrap()), ("FLOTILLA_AUTH_SOCKET", sackd_path.to_str().unwrap())];
        assert_eq!(sc(&["takeover"], &env), (String::new(), String::new(), 0));
        assert_eq!(sc(&["takeover", "1"], &env), (String::new(), String::new(), 0));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert_eq!(
            sc(&["takeover", "2"], &env),
            (String::new(), "slurm_takeover error: Unable to contact slurm controller (connect failure)\n".into(), 1)
        );
        assert_eq!(sc(&["takeover", "3"], &env), (String::new(), "takeover: invalid backup controller index (3)\n".into(), 1));
        assert_eq!(sc(&["takeover", "0"], &env), (String::new(), "takeover: invalid backup controller index (0)\n".into(), 1));
        assert_eq!(sc(&["takeover", "1", "2"], &env), (String::new(), "takeover: too many arguments\n".into(), 1));
    }

    #[test]
    fn hostnames_and_env_fallback() {
        assert_eq!(sc(&["show", "hostnames", "n[1-2]"], &[]).0, "n1\nn2\n");
        assert_eq!(sc(&["show", "hostn=n[1-2]"], &[]).0, "n1\nn2\n");
        assert_eq!(
            sc(&["SHOW", "HOSTNAMES"], &[("SLURM_NODELIST", "a,b")]).0,
            "a\nb\n"
        );
        assert_eq!(
            sc(&["show", "hostnames"], &[("SLURM_JOB_NODELIST", "a")]),
            (
                String::new(),
                "scontrol: error: host list is empty\n".into(),
                0
            )
        );
        assert_eq!(
            sc(&["show", "hostnames", "n[3-1]"], &[]),
            (
                String::new(),
                "scontrol: error: _parse_single_range: Invalid range: `3-1'\nInvalid hostlist: n[3-1]\n"
                    .into(),
                0
            )
        );
    }

    #[test]
    fn hostlist_and_sorted() {
        assert_eq!(
            sc(&["show", "hostlist", "n3,n1,n2"], &[]),
            ("n[3,1-2]\n".into(), String::new(), 0)
        );
        assert_eq!(
            sc(&["show", "hostlistsorted", "n3,n1,n2,n1"], &[]).0,
            "n[1,1-3]\n"
        );
        assert_eq!(sc(&["show", "hostlists", "n3,n1"], &[]).0, "n[1,3]\n");
        let (_, err, code) = sc(&["show", "hostlist", "n[3-1]"], &[]);
        assert_eq!(code, 1);
        assert!(err.ends_with("Invalid hostlist: n[3-1]\n"));
        let (_, err, code) = sc(&["show", "hostlist"], &[]);
        assert_eq!((err.as_str(), code), ("invalid encode argument\n", 1));
        assert_eq!(
            sc(&["show", "hostlist", "/nonexistent/x"], &[]).1,
            "Can not open /nonexistent/x\n"
        );
    }

    #[test]
    fn hostlist_from_file() {
        let dir = std::env::temp_dir().join(format!("flotilla-scontrol-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("hosts");
        std::fs::write(&f, "n2\nn1\n\nn3\n").unwrap();
        let p = f.to_str().unwrap();
        assert_eq!(sc(&["show", "hostlist", p], &[]).0, "n[2,1,3]\n");
        assert_eq!(sc(&["show", "hostlistsorted", p], &[]).0, "n[1-3]\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keyword_and_argument_errors() {
        assert_eq!(
            sc(&["frobnicate"], &[]),
            (String::new(), "invalid keyword: frobnicate\n".into(), 1)
        );
        assert_eq!(
            sc(&["show"], &[]),
            (
                String::new(),
                "too few arguments for keyword:show\n".into(),
                1
            )
        );
        assert_eq!(
            sc(&["show", "hostnames", "a", "b"], &[]),
            (
                String::new(),
                "too many arguments for keyword:show\n".into(),
                1
            )
        );
        assert_eq!(
            sc(&["show", "frob"], &[]),
            (
                String::new(),
                "invalid entity:frob for keyword:show \n".into(),
                1
            )
        );
        assert_eq!(sc(&["-Q", "show", "frob"], &[]).1, "");
        assert_eq!(sc(&["show", "job"], &[]).2, 1);
    }

    #[test]
    fn getopt_errors() {
        assert_eq!(
            sc(&["-x"], &[]),
            (
                String::new(),
                "scontrol: invalid option -- 'x'\nTry \"scontrol --help\" for more information\n"
                    .into(),
                1
            )
        );
        assert_eq!(
            sc(&["--frob"], &[]).1.lines().next(),
            Some("scontrol: unrecognized option '--frob'")
        );
        assert_eq!(
            sc(&["--h"], &[]).1.lines().next(),
            Some("scontrol: option '--h' is ambiguous; possibilities: '--help' '--hide'")
        );
        assert_eq!(sc(&["--vers"], &[]).0, "slurm-wlm 22.05.8\n");
        assert_eq!(
            sc(&["--clu"], &[]).1.lines().next(),
            Some("scontrol: option '--cluster' requires an argument")
        );
        // options after operands are still options (getopt permutes)
        assert_eq!(sc(&["show", "hostnames", "a", "-o"], &[]).0, "a\n");
        assert_eq!(sc(&["--", "show", "hostnames", "-o"], &[]).0, "-o\n");
    }
}
