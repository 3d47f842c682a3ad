//! Man pages (section 1) for the Slurm-compatible commands, generated from the very option
//! tables their parsers use ([`flotilla_commands::getopt`] tables, scontrol's own table), so
//! that a page cannot list an option the parser refuses or miss one it accepts. `flotilla` and
//! `sdeploy` (clap) get their pages from `clap_mangen` in the `flotilla man` subcommand instead.
//!
//! [`PAGES`] is the list of the getopt commands: a new command in `commands/src/bin/` adds one
//! entry here (a test fails until it does), and the packaging picks the binary up by itself.
//! Options keep Slurm 22.05's meaning; the page says so and refers to Slurm's manual for the
//! long descriptions instead of copying them.

use flotilla_commands::getopt::{HasArg, LongOpt};
use roff::{bold, italic, roman, Inline, Roff};

/// The option table of one command, as its parser holds it.
#[derive(Debug, Clone, Copy)]
pub enum OptionTable {
    /// A [`flotilla_commands::getopt::getopt_long`] command: the getopt string (`"+ab:c::"`)
    /// and the long options (an id equal to a short letter makes the long option that letter's
    /// alias).
    Getopt {
        /// getopt's optstring.
        shorts: &'static str,
        /// Long options.
        longs: &'static [LongOpt],
    },
    /// scontrol's own table: long options `(name, takes an argument, short letter or a
    /// control character for none)` and its short-option function.
    Scontrol {
        /// Long options.
        longs: &'static [(&'static str, bool, char)],
        /// `Some(takes_argument)` for a short option letter.
        short: fn(char) -> Option<bool>,
    },
}

/// One command's man page: what it is for and how it is called, plus its parser's table.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    /// The command (and file name `<name>.1`).
    pub name: &'static str,
    /// One line for NAME (`sbatch - <summary>`).
    pub summary: &'static str,
    /// The SYNOPSIS line after the name, e.g. `[OPTIONS...] script [args...]`.
    pub synopsis: &'static str,
    /// DESCRIPTION paragraphs (plain text, one paragraph per element).
    pub description: &'static [&'static str],
    /// The parser's option table.
    pub options: OptionTable,
    /// Descriptions of some options, by long name (or the letter, for a short-only option);
    /// the others have Slurm's meaning. A test checks that each name is in the table.
    pub notes: &'static [(&'static str, &'static str)],
}

/// Every getopt command's page. One entry per binary in `commands/src/bin/` except
/// `flotilla` (clap; `flotilla man` renders it with `clap_mangen`).
pub const PAGES: &[Page] = &[
    Page {
        name: "sbatch",
        summary: "submit a batch script to Flotilla",
        synopsis: "[OPTIONS...] script [args...]",
        description: &[
            "sbatch submits a batch script to the Flotilla controller and prints the job id. \
             The script is read from the file named on the command line, from --wrap, or from \
             standard input. Options come from #SBATCH lines in the script, then SBATCH_* \
             environment variables, then the command line, each overriding the one before.",
            "Flotilla adds --topology=node|pod|any (the topology set a job's GPUs must share), \
             --preemptible, --checkpoint-bytes=N[KMGT] and elastic jobs: -N MIN-MAX --elastic \
             (or --gpus=MIN-MAX --elastic) starts the job at MIN and grows it toward MAX into \
             capacity nobody else needs, giving the growth back first (docs/elastic.md).",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sbatch::SHORTS,
            longs: flotilla_commands::sbatch::LONGS,
        },
        notes: &[
            ("topology", "Flotilla: the topology set all of the job's GPUs must share: node (one NVLink domain), pod (nodes under one leaf switch, from topology.conf) or any."),
            ("preemptible", "Flotilla: the job may be preempted (checkpointed and requeued) by inference services and by jobs reclaiming their quota guarantee."),
            ("checkpoint-bytes", "Flotilla: the size of the job's checkpoint (suffixes K, M, G, T), which prices its preemption against the checkpoint bandwidth budget."),
            ("elastic", "Flotilla: an elastic job (torchrun --nnodes=MIN:MAX): -N MIN-MAX nodes, or --gpus=[type:]MIN-MAX GPUs, within its --topology set; it starts at MIN, grows into free capacity and is shrunk (never below MIN) before anything is preempted. Without --elastic, -N MIN-MAX keeps Slurm's meaning."),
            ("elastic-step", "Flotilla: an elastic job grows and shrinks by multiples of K nodes (GPUs for --gpus=MIN-MAX); default 1."),
            ("elastic-signal", "Flotilla: signal (name or number) sent to an elastic job's tasks on each membership change; default none."),
            ("wrap", "Run the given command line as the batch script (sh -c)."),
            ("parsable", "Print only the job id (and ;cluster)."),
        ],
    },
    Page {
        name: "sacct",
        summary: "display Flotilla's accounting records of jobs and job steps",
        synopsis: "[OPTIONS...]",
        description: &[
            "sacct lists the accounting records the controller keeps from the moment a job is \
             submitted: one record per job (its latest run; -D adds the earlier runs of a \
             requeued or preempted job) and its steps (batch, and srun's numbered steps), in \
             Slurm's formats (-o/--format with %N widths, -P/-p, --delimiter, -X, -n, -b, -l). \
             Without -j the window starts at midnight; with -j it is all time.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sacct::SHORTS,
            longs: flotilla_commands::sacct::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "sstat",
        summary: "display the resource usage of Flotilla's running job steps",
        synopsis: "[OPTIONS...] -j job[.step]",
        description: &[
            "sstat prints the CPU time and memory peaks of running steps (-j N shows the job's \
             lowest-numbered srun step, -j N.batch the batch script, -a every running step) in \
             Slurm's fields and formats (-o/--format, -p, -P, -n, -e). The values are the node \
             daemons' latest reports, sent every JobAcctGatherFrequency seconds (30 by default) \
             and kept by the controller, so they are at most one interval old.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sstat::SHORTS,
            longs: flotilla_commands::sstat::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "seff",
        summary: "report the CPU and memory efficiency of a Flotilla job",
        synopsis: "[-h] [-v] [-d] jobid",
        description: &[
            "seff prints the report of Slurm's contrib seff script (version 2.1) for one job: \
             CPU utilized (the sum of its steps' TotalCPU) against its cores times its wall \
             time, and memory utilized (the largest step's peak RSS times its tasks) against \
             the memory it requested, from the controller's accounting records.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::seff::SHORTS,
            longs: flotilla_commands::seff::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "sacctmgr",
        summary: "view and modify Flotilla's accounting database",
        synopsis: "[OPTIONS...] [command [entity [specifications...]]]",
        description: &[
            "sacctmgr shows and changes the accounting database the controller keeps in its state \
             database: clusters, accounts, users, associations (user x account x partition, with \
             Slurm's limits GrpTRES, GrpJobs, GrpSubmit, MaxJobs, MaxSubmitJobs, MaxTRES, MaxWall, \
             Priority, Fairshare, QOS, DefaultQOS, and Flotilla's GuaranteedGPUs) and QOS. Commands: \
             add|create, modify|update, delete|remove and show|list of account, user, association, \
             qos and cluster, with where and set clauses and format= (%N widths). Only root, \
             SlurmUser and users with AdminLevel=Operator or Administrator change anything. A change \
             is shown and confirmed before it is committed unless -i is given. quota.conf beside \
             slurm.conf is imported once, at the controller's first start; after that the database \
             is the only source of truth.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sacctmgr::SHORTS,
            longs: flotilla_commands::sacctmgr::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "srun",
        summary: "run parallel tasks as a job step in Flotilla",
        synopsis: "[OPTIONS...] executable [args...]",
        description: &[
            "Inside an allocation (SLURM_JOB_ID or SLURM_JOBID set, as in a batch script or \
             under salloc) srun creates a job step on the allocation's nodes and launches its \
             tasks through the node daemons, each with SLURM_PROCID, SLURM_LOCALID, \
             SLURM_NODEID, SLURM_NTASKS and the step's variables; it relays their output, \
             forwards SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 to them and exits with the worst \
             task's status. Outside an allocation it first allocates one, and gives it back at \
             the end.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::srun::SHORTS,
            longs: flotilla_commands::srun::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "salloc",
        summary: "obtain a Flotilla job allocation and run a command in it",
        synopsis: "[OPTIONS...] [command [args...]]",
        description: &[
            "salloc asks for an allocation with sbatch's resource options, prints \
             \"salloc: Granted job allocation N\" once it runs, runs the command (default: the \
             user's shell) with the allocation's environment (SLURM_JOB_ID, \
             SLURM_JOB_NODELIST, ...), and gives the allocation back when the command exits.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sbatch::SHORTS,
            longs: flotilla_commands::sbatch::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "squeue",
        summary: "view the jobs in Flotilla's queue",
        synopsis: "[OPTIONS...]",
        description: &["squeue lists pending and running jobs (and, with -t all, recently finished \
                        ones) in Slurm's formats (-o letters, -O fields)."],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::squeue::SHORTS,
            longs: flotilla_commands::squeue::LONGS,
        },
        notes: &[
            ("json", "prints slurmrestd v0.0.38's jobs answer (GET /slurm/v0.0.38/jobs/) for every job, \
                      as Slurm 22.05 does: JSON as its serializer writes it; every other option \
                      is ignored"),
            ("yaml", "the same document as --json, as Slurm 22.05's YAML serializer writes it"),
        ],
    },
    Page {
        name: "scancel",
        summary: "cancel or signal Flotilla jobs",
        synopsis: "[OPTIONS...] [job_id[_array_id][.step_id]...]",
        description: &["scancel cancels the jobs named by id or selected by the filters \
                        (-u, -n, -t, -p, -A, -w, --me), or sends them a signal (-s)."],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::scancel::SHORTS,
            longs: flotilla_commands::scancel::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "sinfo",
        summary: "view Flotilla nodes and partitions",
        synopsis: "[OPTIONS...]",
        description: &["sinfo shows partitions and nodes in Slurm's formats: the partition view, \
                        -N (node view), -l, -s, -o letters, -O fields, -R (drain reasons)."],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sinfo::SHORTS,
            longs: flotilla_commands::sinfo::LONGS,
        },
        notes: &[
            ("json", "prints slurmrestd v0.0.38's nodes answer (GET /slurm/v0.0.38/nodes/) for every \
                      node, as Slurm 22.05 does; every other option is ignored"),
            ("yaml", "the same document as --json, in Slurm 22.05's YAML"),
        ],
    },
    Page {
        name: "scontrol",
        summary: "view and modify Flotilla's state",
        synopsis: "[OPTIONS...] [command [arguments...]]",
        description: &["scontrol shows and changes jobs, nodes, partitions and the configuration \
                        (show, update, hold, release, requeue, ...) and expands or compresses \
                        hostlists (show hostnames, show hostlist)."],
        options: OptionTable::Scontrol {
            longs: flotilla_commands::scontrol::LONG_OPTIONS,
            short: flotilla_commands::scontrol::short_option,
        },
        notes: &[
            ("json", "Flotilla's extension (Slurm 22.05's scontrol has no --json): show job, show node and \
                      show partition print slurmrestd v0.0.38's jobs, nodes and partitions answers"),
            ("yaml", "Flotilla's extension (not in Slurm 22.05): as --json, in YAML"),
        ],
    },
    Page {
        name: "sshare",
        summary: "show the fair share of Flotilla's associations",
        synopsis: "[OPTIONS...]",
        description: &[
            "sshare prints each association's shares, its decayed usage (billing-seconds, halved \
             every PriorityDecayHalfLife) and its fair-share factor by Slurm's Fair Tree \
             algorithm, as the scheduler ranks with them (-a all users, -A accounts, -u users, \
             -l LevelFS, -o/--format, -n, -p, -P). Associations come from the accounting \
             database (sacctmgr).",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sshare::SHORTS,
            longs: flotilla_commands::sshare::LONGS,
        },
        notes: &[
            ("json", "Flotilla's extension (Slurm 22.05's sshare has no --json): the table's rows as a \
                      shares[] list in the v0.0.38 envelope (meta, errors); Flotilla's document"),
            ("yaml", "Flotilla's extension (not in Slurm 22.05): as --json, in YAML"),
        ],
    },
    Page {
        name: "sprio",
        summary: "show the priority factors of Flotilla's pending jobs",
        synopsis: "[OPTIONS...]",
        description: &[
            "sprio prints each pending job's priority and its priority/multifactor factors (age, \
             association, fair share, job size, partition, QOS, and in SITE Flotilla's own aging \
             terms) times their PriorityWeight* weights (-w prints the weights; -l, -n, -o, -j, \
             -u, -p). The numbers are those the scheduler ranks with.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sprio::SHORTS,
            longs: flotilla_commands::sprio::LONGS,
        },
        notes: &[],
    },
    Page {
        name: "sdiag",
        summary: "show Flotilla's scheduling statistics",
        synopsis: "[OPTIONS...]",
        description: &[
            "sdiag prints Slurm's statistics label for label (threads, job counters, main and \
             backfill scheduler cycles, RPCs by message type and by user) from the controller's \
             counters, then a Flotilla section (held reservations, pages, alerts, preemptions by \
             reason, largest placeable job per partition). sdiag --reset starts the counters \
             again; it is for root, SlurmUser and users with AdminLevel=Operator or above.",
        ],
        options: OptionTable::Getopt {
            shorts: flotilla_commands::sdiag::SHORTS,
            longs: flotilla_commands::sdiag::LONGS,
        },
        notes: &[
            ("json", "Flotilla's extension (Slurm 22.05's sdiag has no --json): slurmrestd v0.0.38's diag \
                      answer (GET /slurm/v0.0.38/diag/)"),
            ("yaml", "Flotilla's extension (not in Slurm 22.05): as --json, in YAML"),
        ],
    },
];

/// One documented option: its short letter (if any), its long names, and its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionEntry {
    /// The short letter, if the option has one.
    pub short: Option<char>,
    /// Long names (several when the parser accepts aliases, e.g. `--user` and `--users`).
    pub longs: Vec<&'static str>,
    /// The argument.
    pub arg: HasArg,
}

/// A long option as `(id, name, argument)`; the id is a short letter's code for an alias.
type LongEntry = (u32, &'static str, HasArg);

/// Every option a table accepts, each once: short letters with their long aliases (sorted by
/// letter, lower case first), then the long-only options sorted by name. Pure.
pub fn entries(table: &OptionTable) -> Vec<OptionEntry> {
    // (id, name, arg) for the long options; short letters from the optstring or the function.
    let (shorts, longs): (Vec<(char, HasArg)>, Vec<LongEntry>) = match *table {
        OptionTable::Getopt { shorts, longs } => (
            parse_optstring(shorts),
            longs.iter().map(|o| (o.id, o.name, o.has_arg)).collect(),
        ),
        OptionTable::Scontrol { longs, short } => (
            ('!'..='~')
                .filter_map(|c| short(c).map(|a| (c, if a { HasArg::Required } else { HasArg::No })))
                .collect(),
            longs
                .iter()
                .map(|&(n, a, c)| (c as u32, n, if a { HasArg::Required } else { HasArg::No }))
                .collect(),
        ),
    };
    let mut out: Vec<OptionEntry> = shorts
        .iter()
        .map(|&(c, arg)| OptionEntry {
            short: Some(c),
            longs: longs.iter().filter(|l| l.0 == c as u32).map(|l| l.1).collect(),
            arg,
        })
        .collect();
    out.sort_by_key(|e| (e.short.map(|c| c.to_ascii_lowercase()), e.short));
    let is_short = |id: u32| shorts.iter().any(|&(c, _)| c as u32 == id);
    // Long-only options each get their own entry: ids are shared by unrelated options
    // (every ignored option has one id), so an id says nothing about being an alias.
    let mut long_only: Vec<OptionEntry> = longs
        .iter()
        .filter(|l| !is_short(l.0))
        .map(|&(_, name, arg)| OptionEntry {
            short: None,
            longs: vec![name],
            arg,
        })
        .collect();
    long_only.sort_by(|a, b| a.longs[0].cmp(b.longs[0]));
    out.extend(long_only);
    out
}

/// getopt's optstring as `(letter, argument)` pairs (a leading `+` or `-` is a mode flag).
fn parse_optstring(s: &str) -> Vec<(char, HasArg)> {
    let s = s.trim_start_matches(['+', '-']);
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let colons = chars[i + 1..].iter().take_while(|&&x| x == ':').count();
        out.push((
            c,
            match colons {
                0 => HasArg::No,
                1 => HasArg::Required,
                _ => HasArg::Optional,
            },
        ));
        i += 1 + colons;
    }
    out
}

/// The `.TP` tag of one option, e.g. `-t, --time=<value>` or `--exclusive[=<value>]`.
fn tag(e: &OptionEntry) -> Vec<Inline> {
    let mut v = Vec::new();
    let value = |v: &mut Vec<Inline>, short: bool| match e.arg {
        HasArg::No => {}
        HasArg::Required => {
            v.push(roman(if short { " " } else { "=" }));
            v.push(italic("value"));
        }
        HasArg::Optional => {
            v.push(roman(if short { "[" } else { "[=" }));
            v.push(italic("value"));
            v.push(roman("]"));
        }
    };
    if let Some(c) = e.short {
        v.push(bold(format!("-{c}")));
        if e.longs.is_empty() {
            value(&mut v, true);
        }
    }
    for (i, l) in e.longs.iter().enumerate() {
        if i > 0 || e.short.is_some() {
            v.push(roman(", "));
        }
        v.push(bold(format!("--{l}")));
    }
    if !e.longs.is_empty() {
        value(&mut v, false);
    }
    v
}

/// Renders one page as roff (man(7) macros), section 1, manual "Flotilla", source
/// `Flotilla <version>`. Deterministic: no date.
pub fn render(page: &Page, version: &str) -> String {
    let upper = page.name.to_uppercase();
    let source = format!("Flotilla {version}");
    let mut r = Roff::new();
    r.control("TH", [upper.as_str(), "1", "", source.as_str(), "Flotilla Manual"]);
    r.control("SH", ["NAME"]);
    r.text([roman(format!("{} - {}", page.name, page.summary))]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([bold(page.name), roman(" "), roman(page.synopsis)]);
    r.control("SH", ["DESCRIPTION"]);
    for (i, p) in page.description.iter().enumerate() {
        if i > 0 {
            r.control("PP", []);
        }
        r.text([roman(*p)]);
    }
    r.control("PP", []);
    r.text([roman(format!(
        "{} accepts Slurm 22.05's options with Slurm's meaning and error messages; see Slurm's {}(1) \
         for the description of each. Long options may be abbreviated to any unambiguous prefix.",
        page.name, page.name
    ))]);
    r.control("SH", ["OPTIONS"]);
    r.text([roman(
        "An option shown with =value needs a value, given as --option=value or --option value \
         (-X value or -Xvalue for a letter); [=value] marks an optional value, which must be \
         glued: --option=value or -Xvalue.",
    )]);
    for e in entries(&page.options) {
        r.control("TP", []);
        r.text(tag(&e));
        let note = page.notes.iter().find(|(n, _)| {
            e.longs.contains(n) || e.short.is_some_and(|c| n.len() == 1 && n.starts_with(c))
        });
        if let Some((_, text)) = note {
            r.text([roman(*text)]);
        }
    }
    r.control("SH", ["ENVIRONMENT"]);
    r.control("TP", []);
    r.text([bold("SLURM_CONF")]);
    r.text([roman(
        "The slurm.conf to read; else FLOTILLA_CONF; else /etc/slurm/slurm.conf.",
    )]);
    r.control("SH", ["SEE ALSO"]);
    let others: Vec<String> =
        PAGES.iter().filter(|p| p.name != page.name).map(|p| format!("{}(1)", p.name)).collect();
    r.text([roman(format!("{}, flotilla(1), slurm.conf(5)", others.join(", ")))]);
    r.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_commands::getopt::lo;

    #[test]
    fn optstring_kinds() {
        assert_eq!(
            parse_optstring("+a:bk::"),
            vec![('a', HasArg::Required), ('b', HasArg::No), ('k', HasArg::Optional)]
        );
    }

    #[test]
    fn aliases_group_with_their_short_letter() {
        const L: &[LongOpt] = &[
            lo("user", HasArg::Required, 'u' as u32),
            lo("users", HasArg::Required, 'u' as u32),
            lo("wrap", HasArg::Required, 1000),
            lo("bbf", HasArg::Required, 1001),
            lo("bb", HasArg::Required, 1001),
        ];
        let e = entries(&OptionTable::Getopt { shorts: "hu:", longs: L });
        assert_eq!(e[0], OptionEntry { short: Some('h'), longs: vec![], arg: HasArg::No });
        assert_eq!(e[1], OptionEntry { short: Some('u'), longs: vec!["user", "users"], arg: HasArg::Required });
        // Long-only options sharing an id (both ignored) stay distinct, sorted by name.
        assert_eq!(e[2].longs, vec!["bb"]);
        assert_eq!(e[3].longs, vec!["bbf"]);
        assert_eq!(e[4].longs, vec!["wrap"]);
        assert_eq!(e.len(), 5);
    }

    /// Every option each parser accepts is on its page, and nothing else is: the page is
    /// made from the table, and this checks the rendering did not drop or invent one.
    #[test]
    fn every_parser_option_is_on_the_page() {
        for p in PAGES {
            let text = render(p, "0");
            let (shorts, longs): (Vec<char>, Vec<&str>) = match p.options {
                OptionTable::Getopt { shorts, longs } => (
                    parse_optstring(shorts).into_iter().map(|s| s.0).collect(),
                    longs.iter().map(|l| l.name).collect(),
                ),
                OptionTable::Scontrol { longs, short } => (
                    ('!'..='~').filter(|&c| short(c).is_some()).collect(),
                    longs.iter().map(|l| l.0).collect(),
                ),
            };
            for c in shorts {
                assert!(text.contains(&format!("\\fB\\-{c}\\fR")), "{}: -{c} missing", p.name);
            }
            for l in &longs {
                let l = l.replace('-', "\\-");
                assert!(text.contains(&format!("\\fB\\-\\-{l}\\fR")), "{}: --{l} missing", p.name);
            }
            let tps = text.matches("\n.TP\n").count();
            let n = entries(&p.options).len() + 1; // + SLURM_CONF under ENVIRONMENT
            assert_eq!(tps, n, "{}", p.name);
        }
    }

    #[test]
    fn notes_name_options_the_parser_has() {
        for p in PAGES {
            let es = entries(&p.options);
            for (n, _) in p.notes {
                let found = es.iter().any(|e| {
                    e.longs.contains(n) || e.short.is_some_and(|c| n.len() == 1 && n.starts_with(c))
                });
                assert!(found, "{}: note for unknown option {n}", p.name);
            }
        }
        let text = render(&PAGES[0], "0");
        assert!(text.contains("\\fB\\-\\-topology\\fR=\\fIvalue\\fR\nFlotilla: the topology set"), "{text}");
    }

    #[test]
    fn sbatch_parses_what_its_page_lists() {
        // A listed option with its stated argument is accepted by the real parser.
        let page = &PAGES[0];
        let OptionTable::Getopt { shorts, longs } = page.options else { panic!() };
        for e in entries(&page.options) {
            for l in &e.longs {
                let arg = match e.arg {
                    HasArg::No => format!("--{l}"),
                    _ => format!("--{l}=1"),
                };
                let r = flotilla_commands::getopt::getopt_long("sbatch", std::slice::from_ref(&arg), shorts, longs);
                assert!(r.is_ok(), "{arg}: {r:?}");
            }
        }
    }
}
