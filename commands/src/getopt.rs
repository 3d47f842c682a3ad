//! glibc `getopt_long` as the Slurm commands use it, so that argument errors read exactly as
//! Slurm's (`sbatch: unrecognized option '--x'`, `sacct: invalid option -- '1'`).
//!
//! Options are permuted (operands may come before options) unless the short-option string
//! starts with `+` (sbatch: everything after the script name belongs to the script). Long
//! options may be abbreviated to any unambiguous prefix; `--opt=value` and `--opt value` both
//! work; short options bundle (`-nu alice`) and take glued values (`-o%A,%t`).

/// Whether an option takes an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HasArg {
    /// Never.
    No,
    /// Always (glued or the next word).
    Required,
    /// Only glued (`--opt=value`, `-ovalue`).
    Optional,
}

/// A long option: name, argument, and the id the caller matches on (often the short letter).
#[derive(Debug, Clone, Copy)]
pub struct LongOpt {
    /// Name without `--`.
    pub name: &'static str,
    /// Argument.
    pub has_arg: HasArg,
    /// Id returned for it.
    pub id: u32,
}

/// Shorthand for a [`LongOpt`].
pub const fn lo(name: &'static str, has_arg: HasArg, id: u32) -> LongOpt {
    LongOpt { name, has_arg, id }
}

/// One parsed option: its id and its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    /// The short letter as `u32`, or the long option's id.
    pub id: u32,
    /// The argument, if any.
    pub arg: Option<String>,
    /// How it was written (`--time`, `-t`), for messages.
    pub spelled: String,
}

/// The result of parsing: options in order and operands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Options, in the order given.
    pub opts: Vec<Opt>,
    /// Operands (non-options), in order.
    pub operands: Vec<String>,
}

/// Parses `args` (without the program name). `shorts` is getopt's optstring (`"+ab:c::"`).
/// On error returns getopt's message (without a trailing newline), e.g.
/// `sbatch: unrecognized option '--bogus'`.
pub fn getopt_long(prog: &str, args: &[String], shorts: &str, longs: &[LongOpt]) -> Result<Parsed, String> {
    let (posix, shorts) = match shorts.strip_prefix('+') {
        Some(s) => (true, s),
        None => (false, shorts),
    };
    let short = |c: char| -> Option<HasArg> {
        let b = shorts.as_bytes();
        let i = shorts.find(c)?;
        if c == ':' {
            return None;
        }
        let colons = b[i + 1..].iter().take_while(|&&x| x == b':').count();
        Some(match colons {
            0 => HasArg::No,
            1 => HasArg::Required,
            _ => HasArg::Optional,
        })
    };
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            out.operands.extend(args[i + 1..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let found = match longs.iter().find(|o| o.name == name) {
                Some(o) => *o,
                None => {
                    let cands: Vec<&LongOpt> = longs.iter().filter(|o| o.name.starts_with(name)).collect();
                    match cands.first() {
                        None => return Err(format!("{prog}: unrecognized option '--{long}'")),
                        Some(f) if cands.iter().all(|o| o.id == f.id && o.has_arg == f.has_arg) => **f,
                        Some(_) => {
                            let mut msg = format!("{prog}: option '--{name}' is ambiguous; possibilities:");
                            for o in &cands {
                                msg.push_str(&format!(" '--{}'", o.name));
                            }
                            return Err(msg);
                        }
                    }
                }
            };
            let arg = match found.has_arg {
                HasArg::No => {
                    if value.is_some() {
                        return Err(format!("{prog}: option '--{}' doesn't allow an argument", found.name));
                    }
                    None
                }
                HasArg::Optional => value.map(str::to_string),
                HasArg::Required => match value {
                    Some(v) => Some(v.to_string()),
                    None if i + 1 < args.len() => {
                        i += 1;
                        Some(args[i].clone())
                    }
                    None => return Err(format!("{prog}: option '--{}' requires an argument", found.name)),
                },
            };
            out.opts.push(Opt {
                id: found.id,
                arg,
                spelled: format!("--{}", found.name),
            });
        } else if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                match short(c) {
                    None => return Err(format!("{prog}: invalid option -- '{c}'")),
                    Some(HasArg::No) => out.opts.push(Opt {
                        id: c as u32,
                        arg: None,
                        spelled: format!("-{c}"),
                    }),
                    Some(h) => {
                        let rest: String = chars[k + 1..].iter().collect();
                        let arg = if !rest.is_empty() {
                            Some(rest)
                        } else if h == HasArg::Optional {
                            None
                        } else if i + 1 < args.len() {
                            i += 1;
                            Some(args[i].clone())
                        } else {
                            return Err(format!("{prog}: option requires an argument -- '{c}'"));
                        };
                        out.opts.push(Opt {
                            id: c as u32,
                            arg,
                            spelled: format!("-{c}"),
                        });
                        break;
                    }
                }
                k += 1;
            }
        } else if posix {
            out.operands.extend(args[i..].iter().cloned());
            break;
        } else {
            out.operands.push(args[i].clone());
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    const L: &[LongOpt] = &[
        lo("noheader", HasArg::No, 'n' as u32),
        lo("format", HasArg::Required, 'o' as u32),
        lo("user", HasArg::Required, 'u' as u32),
        lo("users", HasArg::Required, 'u' as u32),
        lo("name", HasArg::Required, 1000),
    ];

    #[test]
    fn bundles_glued_and_permuted() {
        let p = getopt_long("sacct", &s(&["-nu", "alice", "x", "-o%A,%t", "--form=a"]), "no:u:", L).unwrap();
        let ids: Vec<(u32, Option<&str>)> = p.opts.iter().map(|o| (o.id, o.arg.as_deref())).collect();
        assert_eq!(
            ids,
            vec![('n' as u32, None), ('u' as u32, Some("alice")), ('o' as u32, Some("%A,%t")), ('o' as u32, Some("a"))]
        );
        assert_eq!(p.operands, vec!["x"]);
    }

    #[test]
    fn slurm_error_texts() {
        // CONTRACT.md §A-20: `sacct -nu alice -o Account%256 | tail -1` without a shell.
        let e = getopt_long("sacct", &s(&["-nu", "a", "-o", "x", "|", "tail", "-1"]), "no:u:", L).unwrap_err();
        assert_eq!(e, "sacct: invalid option -- '1'");
        let e = getopt_long("sbatch", &s(&["--bogus"]), "", L).unwrap_err();
        assert_eq!(e, "sbatch: unrecognized option '--bogus'");
        let e = getopt_long("x", &s(&["--us", "a"]), "", L).unwrap();
        assert_eq!(e.opts[0].id, 'u' as u32);
        let e = getopt_long("x", &s(&["--n"]), "", L).unwrap_err();
        assert!(e.starts_with("x: option '--n' is ambiguous; possibilities:"), "{e}");
        let e = getopt_long("x", &s(&["-o"]), "o:", L).unwrap_err();
        assert_eq!(e, "x: option requires an argument -- 'o'");
    }

    #[test]
    fn posix_mode_stops_at_first_operand() {
        let p = getopt_long("sbatch", &s(&["-n", "x.sh", "-o", "y"]), "+no:", L).unwrap();
        assert_eq!(p.opts.len(), 1);
        assert_eq!(p.operands, vec!["x.sh", "-o", "y"]);
    }
}
