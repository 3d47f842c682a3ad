//! `sacctmgr`: Slurm 22.05's accounting manager over Flotilla's accounting database (in the
//! controller): `add|create`, `modify|update`, `delete|remove`, `show|list` for `account`,
//! `user`, `association`, `qos` and `cluster`, with `where`/`set` clauses, `format=`, `-n`,
//! `-p`, `-P`, `-i` and the commit question (`src/sacctmgr/sacctmgr.c`, `common.c`
//! `commit_check`). The controller makes the change and says what it did; this command
//! parses, asks and prints. Exit status 1 after any error, as Slurm's `exit_code`.

use crate::common::{Ctl, Io};
use crate::sacctmgr_show::{column, default_format, render, Conds, Layout, View};
use flotilla_proto::acctmgr::{parse_clauses, Action, AcctMgrChange, AcctMgrOutcome, Clauses, Entity};
use flotilla_proto::{Request, Response};

/// Slurm's version line.
pub const VERSION: &str = "slurm-wlm 22.05.8";

use crate::getopt::{getopt_long, lo, HasArg, LongOpt};

const fn c(ch: char) -> u32 {
    ch as u32
}

/// getopt's short options (Slurm 22.05's `sacctmgr` that Flotilla honours).
pub const SHORTS: &str = "hinpPQrsvV";

/// Long options.
pub const LONGS: &[LongOpt] = &[
    lo("help", HasArg::No, c('h')),
    lo("usage", HasArg::No, c('h')),
    lo("immediate", HasArg::No, c('i')),
    lo("noheader", HasArg::No, c('n')),
    lo("parsable", HasArg::No, c('p')),
    lo("parsable2", HasArg::No, c('P')),
    lo("quiet", HasArg::No, c('Q')),
    lo("readonly", HasArg::No, c('r')),
    lo("associations", HasArg::No, c('s')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
];

#[derive(Debug, Default)]
struct Opts {
    immediate: bool,
    layout: Layout,
    withassoc: bool,
    words: Vec<String>,
}

fn parse_opts(args: &[String], io: &mut Io<'_>) -> Result<Option<Opts>, i32> {
    let parsed = match getopt_long("sacctmgr", args.get(1..).unwrap_or(&[]), SHORTS, LONGS) {
        Ok(p) => p,
        Err(msg) => {
            io.err(&format!("{msg}\nTry \"sacctmgr --help\" for more information\n"));
            return Err(1);
        }
    };
    let mut o = Opts { words: parsed.operands, ..Opts::default() };
    for opt in parsed.opts {
        match char::from_u32(opt.id).unwrap_or('?') {
            'i' => o.immediate = true,
            'n' => o.layout.noheader = true,
            'p' => o.layout.parsable = true,
            'P' => o.layout.parsable2 = true,
            's' => o.withassoc = true,
            'V' => {
                io.out(&format!("{VERSION}\n"));
                return Ok(None);
            }
            'h' => {
                io.out("Usage: sacctmgr [-hinpPQrsvV] [<keyword> [<entity> [<options>]]]\n");
                return Ok(None);
            }
            _ => {}
        }
    }
    Ok(Some(o))
}

/// Runs `sacctmgr` with `args` (argv, program name first). Returns the exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let o = match parse_opts(args, io) {
        Ok(Some(o)) => o,
        Ok(None) => return 0,
        Err(c) => return c,
    };
    let Some(cmd) = o.words.first() else {
        return interactive(args, io);
    };
    let l = cmd.to_ascii_lowercase();
    let action = match l.as_str() {
        "add" | "create" => Some(Action::Add),
        "modify" | "update" => Some(Action::Modify),
        "delete" | "remove" => Some(Action::Delete),
        "show" | "list" => None,
        "version" => {
            io.out(&format!("{VERSION}\n"));
            return 0;
        }
        _ => {
            io.err(&format!("invalid keyword: {cmd}\n"));
            return 1;
        }
    };
    let entity = o.words.get(1).and_then(|w| Entity::parse(w));
    let Some(entity) = entity else {
        let verb = match action {
            Some(Action::Add) => "add",
            Some(Action::Modify) => "modify",
            Some(Action::Delete) => "delete",
            None => "list",
        };
        let must = match action {
            Some(Action::Add) | Some(Action::Delete) => {
                "\"Account\", \"Cluster\", \"Coordinator\", \"Federation\", \"QOS\", \"Resource\", or \"User\""
            }
            Some(Action::Modify) => "\"Account\", \"Cluster\", \"Federation\", \"Job\", \"QOS\", \"Resource\" or \"User\"",
            None => {
                "\"Account\", \"Association\", \"Cluster\", \"Configuration\",\n\"Event\", \"Federation\", \"Problem\", \"QOS\", \"Resource\", \"Reservation\",\n\"RunAwayJobs\", \"Stats\", \"Transaction\", \"TRES\", \"User\", or \"WCKey\""
            }
        };
        io.err(&format!("No valid entity in {verb} command\nInput line must include {must}\n"));
        return 1;
    };
    let clauses = parse_clauses(&o.words[2..], action == Some(Action::Add));
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("sacctmgr: error: {e}\n"));
            return 1;
        }
    };
    match action {
        None => show(&ctl, entity, clauses, &o, io),
        Some(action) => change(&ctl, action, entity, clauses, o.immediate, io),
    }
}

/// Without a command: Slurm's prompt, one command a line, until `quit`/`exit` or the end of
/// the input. The exit status is the last command's.
fn interactive(args: &[String], io: &mut Io<'_>) -> i32 {
    let mut code = 0;
    loop {
        io.out("sacctmgr: ");
        let _ = io.out.flush();
        let Some(line) = read_line(io) else {
            io.out("\n");
            return code;
        };
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words.first().map(|w| w.to_ascii_lowercase()).as_deref() {
            None => continue,
            Some("quit" | "exit") => return code,
            _ => {}
        }
        let mut argv = vec![args[0].clone()];
        argv.extend(words);
        code = run(&argv, io);
    }
}

fn show(ctl: &Ctl, entity: Entity, mut c: Clauses, o: &Opts, io: &mut Io<'_>) -> i32 {
    let withassoc = o.withassoc || c.options.iter().any(|x| x == "withassoc");
    let tree = c.options.iter().any(|x| x == "tree");
    let format: Vec<String> = if c.format.is_empty() {
        default_format(entity, withassoc).split(',').map(str::to_string).collect()
    } else {
        std::mem::take(&mut c.format)
    };
    let mut cols = Vec::new();
    for f in &format {
        match column(f) {
            Ok(mut col) => {
                if tree && col.name == "Account" && !f.contains('%') {
                    col.width = -20;
                }
                cols.push(col);
            }
            Err(e) => {
                io.err(&e);
                return 1;
            }
        }
    }
    let mut conds = Conds { names: c.names.clone(), ..Conds::default() };
    for (k, v) in &c.conds {
        let vals = v.split(',').map(str::to_string);
        let k = k.to_ascii_lowercase();
        match k.as_str() {
            "account" | "accounts" | "acct" if entity != Entity::Account => conds.accounts.extend(vals),
            "user" | "users" if entity != Entity::User => conds.users.extend(vals),
            "partition" | "partitions" => conds.partitions.extend(vals),
            "cluster" | "clusters" if entity != Entity::Cluster => conds.clusters.extend(vals),
            "id" | "ids" => conds.ids.extend(vals),
            _ => conds.names.extend(vals),
        }
    }
    let data = match ctl.call(Request::AcctMgrShow) {
        Ok(Response::AcctMgrData(d)) => d,
        Ok(_) => {
            io.err("sacctmgr: error: unexpected answer from the controller\n");
            return 1;
        }
        Err(e) => {
            io.err(&format!("sacctmgr: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let view = View::new(&data);
    let rows = view.rows(entity, &cols, &conds, withassoc, tree);
    io.out(&render(&cols, &rows, o.layout));
    0
}

/// One line of standard input (without its newline); `None` at its end.
fn read_line(io: &mut Io<'_>) -> Option<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        let n = match io.stdin.as_mut() {
            Some(r) => r.read(&mut b),
            None => std::io::Read::read(&mut std::io::stdin(), &mut b),
        };
        match n {
            Ok(1) if b[0] != b'\n' => line.push(b[0]),
            Ok(1) => break,
            _ if line.is_empty() => return None,
            _ => break,
        }
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}

/// Reads one answer to the commit question: the first character of a line.
fn answer(io: &mut Io<'_>) -> Option<char> {
    read_line(io).and_then(|l| l.chars().next())
}

fn ask(io: &mut Io<'_>, question: &str) -> bool {
    io.out(&format!("{question} (You have 30 seconds to decide)\n(N/y): "));
    let _ = io.out.flush();
    let a = answer(io);
    io.out("\n");
    matches!(a, Some('y' | 'Y'))
}

fn call(ctl: &Ctl, ch: AcctMgrChange, io: &mut Io<'_>) -> Option<AcctMgrOutcome> {
    match ctl.call(Request::AcctMgrChange(ch)) {
        Ok(Response::AcctMgrOutcome(o)) => Some(o),
        Ok(_) => {
            io.err("sacctmgr: error: unexpected answer from the controller\n");
            None
        }
        Err(e) => {
            io.err(&format!(" Error with request: {}\n", e.slurm().text));
            None
        }
    }
}

fn change(ctl: &Ctl, action: Action, entity: Entity, clauses: Clauses, immediate: bool, io: &mut Io<'_>) -> i32 {
    if action == Action::Add && entity == Entity::User && !immediate {
        for n in &clauses.names {
            if crate::common::uid_of(n).is_none() {
                io.out(&format!("There is no uid for user '{n}'\n"));
                if !ask(io, "Are you sure you want to continue?") {
                    return 1;
                }
            }
        }
    }
    let mut ch = AcctMgrChange { action, entity, clauses, commit: immediate };
    let Some(out) = call(ctl, ch.clone(), io) else { return 1 };
    io.out(&out.stdout);
    io.err(&out.stderr);
    if !out.changed || immediate {
        return out.exit_code;
    }
    if ask(io, "Would you like to commit changes?") {
        ch.commit = true;
        let Some(done) = call(ctl, ch, io) else { return 1 };
        io.err(&done.stderr);
        done.exit_code
    } else {
        io.out(" Changes Discarded\n");
        out.exit_code
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sacctmgr_show::Column;
    use flotilla_proto::acctmgr::{AcctData, AssocRow};

    fn assoc(id: u32, parent: Option<u32>, account: &str, user: &str) -> AssocRow {
        AssocRow::new(id, parent, account, user, "")
    }

    fn data() -> AcctData {
        let mut root = assoc(1, None, "root", "");
        root.qos = vec!["normal".into()];
        let mut research = assoc(3, Some(1), "research", "");
        research.max_jobs = Some(4);
        research.grp_tres = "cpu=64,gres/gpu=8".into();
        AcctData {
            clusters: vec![flotilla_proto::acctmgr::ClusterRow { name: "oracle".into(), control_host: "h".into(), control_port: 6817, rpc: 9728 }],
            assocs: vec![root, assoc(2, Some(1), "root", "root"), research, assoc(4, Some(3), "research", "bob"), assoc(5, Some(3), "research", "alice")],
            ..AcctData::default()
        }
    }

    fn cols(f: &str) -> Vec<Column> {
        f.split(',').map(|c| column(c).unwrap()).collect()
    }

    #[test]
    fn fields_match_by_prefix_and_unknown_ones_are_refused() {
        assert_eq!(column("GrpCPU").unwrap().header, "GrpCPUs");
        assert_eq!(column("grpsubmit").unwrap().header, "GrpSubmit");
        assert_eq!(column("Account%20").unwrap().width, 20);
        assert_eq!(column("DefaultQOS").unwrap().header, "Def QOS");
        assert_eq!(column("NoSuchField").unwrap_err(), "Unknown field 'nosuchfield'\n");
    }

    #[test]
    fn rivosinc_line_and_tree_and_columns() {
        let d = data();
        let v = View::new(&d);
        let c = cols("User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit");
        let rows = v.rows(Entity::Assoc, &c, &Conds::default(), false, false);
        let p2 = Layout { noheader: true, parsable2: true, ..Layout::default() };
        assert_eq!(render(&c, &rows, p2), "|root||||\nroot|root||||\n|research|64|||\nalice|research||||\nbob|research||||\n");
        let mut c = cols("Account,User,MaxJobs");
        c[0].width = -20;
        let rows = v.rows(Entity::Assoc, &c, &Conds::default(), false, true);
        let text = render(&c, &rows, Layout::default());
        assert!(text.starts_with("Account                    User MaxJobs \n-------------------- ---------- ------- \nroot "), "{text}");
        assert!(text.contains("\n  research                  bob       4 \n"), "MaxJobs inherited: {text}");
        let c = cols("Account,GrpTRES");
        let rows = v.rows(Entity::Assoc, &c, &Conds { accounts: vec!["research".into()], ..Conds::default() }, false, false);
        assert_eq!(render(&c, &rows[..1], Layout { noheader: true, ..Layout::default() }), "  research cpu=64,gres/+ \n");
        assert_eq!(render(&c, &rows[..1], Layout { parsable: true, ..Layout::default() }), "Account|GrpTRES|\nresearch|cpu=64,gres/gpu=8|\n");
    }

    #[test]
    fn options_and_keywords_as_slurm() {
        let run_args = |a: &[&str]| {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let env = |_: &str| None;
            let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            let code = run(&args, &mut Io { out: &mut out, err: &mut err, env: &env, stdin: None });
            (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
        };
        assert_eq!(run_args(&["sacctmgr", "--version"]), (0, "slurm-wlm 22.05.8\n".into(), String::new()));
        assert_eq!(
            run_args(&["sacctmgr", "--bogus"]),
            (1, String::new(), "sacctmgr: unrecognized option '--bogus'\nTry \"sacctmgr --help\" for more information\n".into())
        );
        assert_eq!(run_args(&["sacctmgr", "frobnicate"]), (1, String::new(), "invalid keyword: frobnicate\n".into()));
    }
}
