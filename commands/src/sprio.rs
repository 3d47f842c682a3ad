//! `sprio`, as Slurm 22.05's (`src/sprio/`): the multifactor priority of pending jobs and
//! its weighted factors. `-l`, `-n`, `-w`, `-h`, `-o/--format` (`%i %r %u %Y %y %S %A %a %B
//! %b %F %f %J %j %P %p %Q %q %N %T %t %c`), `-j`, `-u`, `-p`, `-V`. The numbers are the
//! controller's: the priority its scheduler ranks with, and the factors behind it.
//!
//! Flotilla's own priority terms (base priority, aging per minute, partition tier, failed
//! cycles, preemptions) show as `SITE`. `PriorityWeightTRES` is not implemented: the `TRES`
//! columns print empty.

use crate::common::{Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use flotilla_proto::share::{PrioFactors, PrioQuery, PrioReply, PrioRow};
use flotilla_proto::{Request, Response};

const fn c(ch: char) -> u32 {
    ch as u32
}
const O_HELP: u32 = 1000;
const O_IGNORED: u32 = 1001;
/// sprio's getopt string (Slurm 22.05 `opts.c`).
pub const SHORTS: &str = "hj::lM:no:S:p:u:vVw";
/// sprio's long options.
pub const LONGS: &[LongOpt] = &[
    lo("noheader", HasArg::No, c('h')),
    lo("jobs", HasArg::Optional, c('j')),
    lo("long", HasArg::No, c('l')),
    lo("cluster", HasArg::Required, c('M')),
    lo("clusters", HasArg::Required, c('M')),
    lo("norm", HasArg::No, c('n')),
    lo("format", HasArg::Required, c('o')),
    lo("sort", HasArg::Required, c('S')),
    lo("partition", HasArg::Required, c('p')),
    lo("user", HasArg::Required, c('u')),
    lo("users", HasArg::Required, c('u')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("weights", HasArg::No, c('w')),
    lo("help", HasArg::No, O_HELP),
    lo("usage", HasArg::No, O_HELP),
    lo("federation", HasArg::No, O_IGNORED),
    lo("local", HasArg::No, O_IGNORED),
    lo("sib", HasArg::No, O_IGNORED),
    lo("sibling", HasArg::No, O_IGNORED),
];

/// One `%` field of a format: its letter, width, justification and the text after it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    letter: char,
    width: usize,
    right: bool,
    suffix: String,
}

/// Slurm's `parse_format`: a prefix before the first `%`, then `%[.][width]letter` tokens
/// each followed by literal text. Unknown letters are dropped (Slurm logs an error).
fn parse_format(format: &str) -> (String, Vec<Spec>) {
    let (prefix, rest) = match format.find('%') {
        Some(i) => (format[..i].to_string(), &format[i..]),
        None => (format.to_string(), ""),
    };
    let mut specs = Vec::new();
    for token in rest.split('%').filter(|t| !t.is_empty()) {
        let mut chars = token.char_indices().peekable();
        let right = chars.next_if(|&(_, ch)| ch == '.').is_some();
        let mut width = 0usize;
        while let Some(&(_, d)) = chars.peek() {
            let Some(v) = d.to_digit(10) else { break };
            width = width * 10 + v as usize;
            chars.next();
        }
        let Some((i, letter)) = chars.next() else { continue };
        if !"aAbBcfFijJNpPqQrStTuyY".contains(letter) {
            continue;
        }
        specs.push(Spec { letter, width, right, suffix: token[i + letter.len_utf8()..].to_string() });
    }
    (prefix, specs)
}

/// Slurm's `_print_str`: right-justified (`%Ns`, then cut to N) or left (`%.Ns`, padded).
fn put(out: &mut String, s: &str, width: usize, right: bool) {
    if width == 0 {
        out.push_str(s);
        return;
    }
    let t = if right { format!("{s:>width$}") } else { s.to_string() };
    let t: String = t.chars().take(width).collect();
    out.push_str(&format!("{t:<width$}"));
}

/// What a row is: the header, the weights line, or a job.
enum Line<'a> {
    Header,
    Weights(&'a PrioFactors),
    Job(&'a PrioRow, &'a PrioFactors),
}

fn header(letter: char) -> &'static str {
    match letter {
        'i' => "JOBID",
        'r' => "PARTITION",
        'u' => "USER",
        'y' | 'Y' => "PRIORITY",
        'S' => "SITE",
        'a' | 'A' => "AGE",
        'b' | 'B' => "ASSOC",
        'f' | 'F' => "FAIRSHARE",
        'j' | 'J' => "JOBSIZE",
        'p' | 'P' => "PARTITION",
        'q' | 'Q' => "QOS",
        'N' => "NICE",
        't' | 'T' => "TRES",
        _ => "CLUSTER",
    }
}

fn norm(v: f64, weight: f64) -> String {
    format!("{:.7}", if weight != 0.0 { v / weight } else { 0.0 })
}

fn line(out: &mut String, prefix: &str, specs: &[Spec], l: Line<'_>, cluster: &str) {
    out.push_str(prefix);
    for s in specs {
        let text = match &l {
            Line::Header => header(s.letter).to_string(),
            Line::Weights(w) => match s.letter {
                'i' => "Weights".into(),
                'S' => "1".into(),
                'a' | 'A' => format!("{:.0}", w.age),
                'b' | 'B' => format!("{:.0}", w.assoc),
                'f' | 'F' => format!("{:.0}", w.fairshare),
                'j' | 'J' => format!("{:.0}", w.job_size),
                'p' | 'P' => format!("{:.0}", w.partition),
                'q' | 'Q' => format!("{:.0}", w.qos),
                _ => String::new(),
            },
            Line::Job(j, w) => {
                let f = &j.factors;
                match s.letter {
                    'i' => j.job_id.to_string(),
                    'r' => j.partition.clone(),
                    'u' => j.user.clone(),
                    'Y' => j.priority.to_string(),
                    'y' => format!("{:16.14}", j.priority as f64 / f64::from(u32::MAX)),
                    'S' => format!("{:.0}", f.site),
                    'A' => format!("{:.0}", f.age),
                    'a' => norm(f.age, w.age),
                    'B' => format!("{:.0}", f.assoc),
                    'b' => norm(f.assoc, w.assoc),
                    'F' => format!("{:.0}", f.fairshare),
                    'f' => norm(f.fairshare, w.fairshare),
                    'J' => format!("{:.0}", f.job_size),
                    'j' => norm(f.job_size, w.job_size),
                    'P' => format!("{:.0}", f.partition),
                    'p' => norm(f.partition, w.partition),
                    'Q' => format!("{:.0}", f.qos),
                    'q' => norm(f.qos, w.qos),
                    'N' => f.nice.to_string(),
                    'c' => cluster.to_string(),
                    _ => String::new(),
                }
            }
        };
        put(out, &text, s.width, s.right);
        out.push_str(&s.suffix);
    }
    out.push('\n');
}

/// What to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `-o`.
    pub format: Option<String>,
    /// `-l`.
    pub long: bool,
    /// `-n`.
    pub normalized: bool,
    /// `-w`.
    pub weights: bool,
    /// Without `-h`.
    pub header: bool,
    /// `-u` given (adds the user column).
    pub users: bool,
    /// The cluster name (`%c`).
    pub cluster: String,
}

/// Slurm's default format for these options and weights (`sprio.c`): a column per nonzero
/// weight.
fn default_format(o: &Options, w: &PrioFactors) -> String {
    let (long, cols): (&str, [(char, f64); 7]) = if o.normalized {
        (
            "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t",
            [('a', w.age), ('b', w.assoc), ('f', w.fairshare), ('j', w.job_size), ('p', w.partition), ('q', w.qos), ('t', 0.0)],
        )
    } else {
        (
            "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T",
            [('A', w.age), ('B', w.assoc), ('F', w.fairshare), ('J', w.job_size), ('P', w.partition), ('Q', w.qos), ('T', 0.0)],
        )
    };
    if o.long {
        return long.to_string();
    }
    let mut f = String::from("%.15i %9r");
    if o.users {
        f.push_str(" %.8u");
    }
    f.push_str(if o.normalized { " %10y" } else { " %.10Y %.10S" });
    for (letter, weight) in cols {
        if weight != 0.0 {
            f.push_str(&if o.normalized { format!(" %10{letter}") } else { format!(" %.{}{letter}", if letter == 'T' { 20 } else { 10 }) });
        }
    }
    f
}

/// The text `sprio` prints for `reply`.
pub fn render(reply: &PrioReply, o: &Options) -> String {
    let format = o.format.clone().unwrap_or_else(|| default_format(o, &reply.weights));
    let (prefix, specs) = parse_format(&format);
    let mut out = String::new();
    if o.header {
        line(&mut out, &prefix, &specs, Line::Header, &o.cluster);
    }
    if o.weights {
        line(&mut out, &prefix, &specs, Line::Weights(&reply.weights), &o.cluster);
        return out;
    }
    for j in &reply.jobs {
        line(&mut out, &prefix, &specs, Line::Job(j, &reply.weights), &o.cluster);
    }
    out
}

/// `sprio ARGS` (`args[0]` is the program name); returns the exit code.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    let p = match getopt_long("sprio", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(m) => {
            io.err(&format!("{m}\nTry \"sprio --help\" for more information\n"));
            return 1;
        }
    };
    let mut o = Options { header: true, ..Options::default() };
    let mut q = PrioQuery::default();
    let mut job_flag = false;
    for opt in &p.opts {
        let a = opt.arg.clone().unwrap_or_default();
        let list = |s: &str| s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect::<Vec<_>>();
        match opt.id {
            x if x == c('h') => o.header = false,
            x if x == c('j') => {
                job_flag = true;
                for j in list(&a) {
                    match j.parse::<u64>() {
                        Ok(n) if n > 0 => q.jobs.push(n),
                        _ => {
                            io.err(&format!("Invalid job id: {j}\n"));
                            return 1;
                        }
                    }
                }
            }
            x if x == c('l') => o.long = true,
            x if x == c('n') => o.normalized = true,
            x if x == c('o') => o.format = Some(a),
            x if x == c('p') => q.partitions = list(&a),
            x if x == c('u') => {
                o.users = true;
                q.users = list(&a);
            }
            x if x == c('w') => o.weights = true,
            x if x == c('V') => {
                io.out(&format!("{}\n", crate::sbatch::VERSION_LINE));
                return 0;
            }
            O_HELP => {
                io.out("Usage: sprio [OPTIONS]\n");
                return 0;
            }
            _ => {}
        }
    }
    if o.long && o.format.is_some() {
        io.err("sprio: fatal: Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.\n");
        return 1;
    }
    // `-j 4` (the id apart): getopt's optional argument is only glued, so Slurm takes the
    // first operand as the job list when `-j` was given; any other operand is refused.
    let mut operands = p.operands.iter();
    if job_flag && q.jobs.is_empty() {
        if let Some(list) = operands.next() {
            for j in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                match j.parse::<u64>() {
                    Ok(n) if n > 0 => q.jobs.push(n),
                    _ => {
                        io.err(&format!("Invalid job id: {j}\n"));
                        return 1;
                    }
                }
            }
        }
    }
    if let Some(extra) = operands.next() {
        io.err(&format!("sprio: error: Unrecognized option: {extra}\nUsage: sprio [OPTIONS]\n"));
        return 1;
    }
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("Couldn't get priority factors from controller: {}\n", e.slurm().text));
            return 1;
        }
    };
    o.cluster = ctl.conf.cluster_name.clone();
    let reply = match ctl.call(Request::QueryPriorities(q)) {
        Ok(Response::Priorities(r)) => r,
        Ok(_) => PrioReply::default(),
        Err(e) => {
            io.err(&format!("Couldn't get priority factors from controller: {}\n", e.slurm().text));
            return 1;
        }
    };
    if reply.priority_type.eq_ignore_ascii_case("priority/basic") {
        io.err(&format!(
            "You are not running a supported priority plugin\n({}).\nOnly 'priority/multifactor' is supported.\n",
            reply.priority_type
        ));
        return 1;
    }
    if job_flag && !o.weights && reply.jobs.is_empty() {
        io.out("Unable to find jobs matching user/id(s) specified\n");
        return 0;
    }
    io.out(&render(&reply, &o));
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's weights and jobs (s18-ref's goldens `0144_sprio` ... `0151_sprio_u`:
    /// `PriorityWeightAge=1000`, `Fairshare=10000`, `JobSize=1000`, `Partition=1000`,
    /// `QOS=1000`; TRES weights left out, Flotilla has none).
    fn reply() -> PrioReply {
        let job = |id: u64, priority: u64, fs: f64| PrioRow {
            job_id: id,
            user: "alice".into(),
            partition: "batch".into(),
            priority,
            factors: PrioFactors { job_size: 126.953_125, partition: 1000.0, fairshare: fs, ..PrioFactors::default() },
        };
        PrioReply {
            priority_type: "priority/multifactor".into(),
            weights: PrioFactors { age: 1000.0, fairshare: 10_000.0, job_size: 1000.0, partition: 1000.0, qos: 1000.0, ..PrioFactors::default() },
            jobs: vec![job(4, 1225, 0.0), job(6, 1131, 0.0), job(8, 1131, 0.0), job(9, 11131, 10_000.0)],
        }
    }

    #[test]
    fn format_option_output_matches_the_reference() {
        let o = Options { header: true, format: Some("%.15i %.10Y".into()), ..Options::default() };
        assert_eq!(
            render(&reply(), &o),
            "          JOBID   PRIORITY\n              4       1225\n              6       1131\n              8       1131\n              9      11131\n"
        );
        let o = Options { header: true, format: Some("%.15i %.8u %.10Y %.10A %.10F %.10J %.10P %.10Q".into()), ..Options::default() };
        let out = render(&reply(), &o);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "          JOBID     USER   PRIORITY        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS");
        assert_eq!(lines[1], "              4    alice       1225          0          0        127       1000          0");
        assert_eq!(lines[4], "              9    alice      11131          0      10000        127       1000          0");
    }

    #[test]
    fn default_long_normalized_and_weights_match_the_reference_but_tres() {
        let o = Options { header: true, ..Options::default() };
        let out = render(&reply(), &o);
        // The reference's line has its TRES column after QOS.
        assert!(out.starts_with("          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS\n"), "{out}");
        assert!(out.contains("\n              4 batch           1225          0          0          0        127       1000          0\n"), "{out}");
        let o = Options { header: true, long: true, ..Options::default() };
        let out = render(&reply(), &o);
        assert!(out.starts_with("          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE                 TRES\n"), "{out}");
        assert!(out.contains("\n              9 batch        alice      11131          0          0          0      10000        127       1000          0           0                     \n"), "{out}");
        let o = Options { header: true, normalized: true, ..Options::default() };
        let out = render(&reply(), &o);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  JOBSIZE    PARTITION  QOS       ");
        assert_eq!(lines[1], "              4 batch     0.00000028 0.0000000  0.0000000  0.1269531  1.0000000  0.0000000 ");
        assert_eq!(lines[4], "              9 batch     0.00000259 0.0000000  1.0000000  0.1269531  1.0000000  0.0000000 ");
        let o = Options { header: true, weights: true, ..Options::default() };
        assert_eq!(
            render(&reply(), &o).lines().nth(1).unwrap(),
            "        Weights                               1       1000      10000       1000       1000       1000"
        );
        // -u adds the user column.
        let o = Options { header: false, users: true, ..Options::default() };
        assert!(render(&reply(), &o).starts_with("              4 batch        alice       1225"));
    }
}
