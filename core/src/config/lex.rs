//! The line syntax shared by `slurm.conf`, `gres.conf` and `topology.conf`, as Slurm's
//! `src/common/parse_config.c` reads it.
//!
//! - `#` starts a comment to the end of the line (also after values); `\#` is a literal `#`.
//! - A `\` at the end of a line (after comment removal, trailing blanks allowed) joins the next
//!   line to it, with nothing inserted (so `gpu[01-\` + `04]` is `gpu[01-04]`).
//! - A logical line holds `key=value` pairs separated by blanks; blanks around `=` are allowed;
//!   a value in double quotes may hold blanks (the quotes are removed). Keys are alphanumeric.
//! - `Include <file>` at the start of a line splices in another file, read through a resolver
//!   handed in by the caller (core never reads files). The path may be quoted.

use super::{ConfigError, Location};

/// How a parser asks for the text of an `Include`d file: given the path exactly as written,
/// return `(name to report in errors, text)`, or a reason it cannot be read (which should name
/// the path, e.g. `/etc/slurm/nodes.conf: No such file or directory`).
pub type IncludeResolver<'a> = dyn FnMut(&str) -> Result<(String, String), String> + 'a;

/// A resolver for texts that must not contain `Include`: every include fails.
pub fn no_includes(path: &str) -> Result<(String, String), String> {
    Err(format!("{path}: includes are not available here"))
}

/// Deepest nesting of `Include` (a file including itself fails here instead of looping).
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// One `key=value` of a line, key as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pair {
    pub key: String,
    pub value: String,
    pub at: Location,
    /// Byte offset in the record's `text` just after the previous pair's value (0 for the
    /// first pair): where Slurm's leftover starts when it stops before this pair.
    pub from: usize,
}

/// One logical line that holds at least one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub pairs: Vec<Pair>,
    /// The logical line (comments removed, continued lines joined), as Slurm quotes it.
    pub text: String,
    /// Where the logical line starts (Slurm numbers a continued line by its first line).
    pub at: Location,
}

impl Record {
    /// The text Slurm reports as not read when it stops before pair `i` (`parse_config.c`
    /// `s_p_parse_file`: `Parse error in file F line N: "TEXT"`): the rest of the line from
    /// just after the pair before it, blanks included.
    pub fn leftover(&self, i: usize) -> String {
        let from = self.pairs.get(i).map_or(self.text.len(), |p| p.from);
        self.text[from..].to_string()
    }
}

/// Splits `text` into records, following `Include` through `include`.
pub(crate) fn records(
    text: &str,
    source: &str,
    include: &mut IncludeResolver<'_>,
) -> Result<Vec<Record>, ConfigError> {
    let mut out = Vec::new();
    records_into(text, source, include, 0, &mut out)?;
    Ok(out)
}

fn records_into(
    text: &str,
    source: &str,
    include: &mut IncludeResolver<'_>,
    depth: usize,
    out: &mut Vec<Record>,
) -> Result<(), ConfigError> {
    let mut logical = String::new();
    // (byte offset in `logical`, physical line number) where each physical line starts.
    let mut starts: Vec<(usize, u32)> = Vec::new();
    let mut lines = text.split('\n').enumerate().peekable();
    while let Some((idx, raw)) = lines.next() {
        let line_no = u32::try_from(idx + 1).unwrap_or(u32::MAX);
        let stripped = strip_comment(raw.strip_suffix('\r').unwrap_or(raw));
        starts.push((logical.len(), line_no));
        let trimmed_end = stripped.trim_end();
        if let Some(body) = trimmed_end.strip_suffix('\\') {
            if lines.peek().is_some() {
                logical.push_str(body);
                continue;
            }
            logical.push_str(body);
        } else {
            logical.push_str(&stripped);
        }
        let first_line = starts.first().map_or(line_no, |s| s.1);
        process_logical(&logical, &starts, first_line, source, include, depth, out)?;
        logical.clear();
        starts.clear();
    }
    Ok(())
}

/// Removes a comment (`#` to the end of the line), turning `\#` into `#`.
fn strip_comment(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            '#' => break,
            _ => out.push(c),
        }
    }
    out
}

fn line_at(starts: &[(usize, u32)], offset: usize, fallback: u32) -> u32 {
    starts
        .iter()
        .take_while(|(o, _)| *o <= offset)
        .last()
        .map_or(fallback, |s| s.1)
}

fn process_logical(
    logical: &str,
    starts: &[(usize, u32)],
    first_line: u32,
    source: &str,
    include: &mut IncludeResolver<'_>,
    depth: usize,
    out: &mut Vec<Record>,
) -> Result<(), ConfigError> {
    let trimmed = logical.trim_start();
    if trimmed.is_empty() {
        return Ok(());
    }
    let lead = logical.len() - trimmed.len();
    if let Some(word) = trimmed.get(..7) {
        let after = trimmed[7..].chars().next();
        if word.eq_ignore_ascii_case("include") && after.is_some_and(char::is_whitespace) {
            let at = Location::new(source, line_at(starts, lead, first_line));
            let path = unquote(trimmed[7..].trim());
            if depth + 1 > MAX_INCLUDE_DEPTH {
                return Err(ConfigError::Include {
                    at,
                    path: path.to_string(),
                    reason: format!("more than {MAX_INCLUDE_DEPTH} nested includes"),
                });
            }
            let (name, text) = include(path).map_err(|reason| ConfigError::Include {
                at: at.clone(),
                path: path.to_string(),
                reason,
            })?;
            return records_into(&text, &name, include, depth + 1, out);
        }
    }
    let pairs = tokenize(logical, starts, first_line, source)?;
    if !pairs.is_empty() {
        out.push(Record {
            pairs,
            text: logical.to_string(),
            at: Location::new(source, first_line),
        });
    }
    Ok(())
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

fn tokenize(
    logical: &str,
    starts: &[(usize, u32)],
    first_line: u32,
    source: &str,
) -> Result<Vec<Pair>, ConfigError> {
    let bytes = logical.as_bytes();
    let mut pos = 0;
    let mut pairs = Vec::new();
    let skip_ws = |mut p: usize| {
        while p < bytes.len() && bytes[p].is_ascii_whitespace() {
            p += 1;
        }
        p
    };
    loop {
        let from = pos;
        pos = skip_ws(pos);
        if pos >= bytes.len() {
            break;
        }
        let key_start = pos;
        let at = Location::new(source, line_at(starts, key_start, first_line));
        while pos < bytes.len() && bytes[pos].is_ascii_alphanumeric() {
            pos += 1;
        }
        let key = &logical[key_start..pos];
        pos = skip_ws(pos);
        if key.is_empty() || pos >= bytes.len() || bytes[pos] != b'=' {
            // Slurm's key=value expression does not match here: it reports the rest of
            // the line from the end of the last pair it read (`_parse_next_key`,
            // `s_p_parse_line`), numbered by the logical line's first line.
            return Err(ConfigError::Leftover {
                at: Location::new(source, first_line),
                text: logical[from..].to_string(),
            });
        }
        pos = skip_ws(pos + 1);
        let value = if pos < bytes.len() && bytes[pos] == b'"' {
            let Some(end) = logical[pos + 1..].find('"') else {
                return Err(ConfigError::Syntax {
                    at,
                    msg: format!("unterminated quoted value for {key}"),
                });
            };
            let v = &logical[pos + 1..pos + 1 + end];
            pos += end + 2;
            v
        } else {
            let start = pos;
            while pos < bytes.len() && !bytes[pos].is_ascii_whitespace() {
                pos += 1;
            }
            &logical[start..pos]
        };
        pairs.push(Pair {
            key: key.to_string(),
            value: value.to_string(),
            at,
            from,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(text: &str) -> Vec<Vec<(String, String, u32)>> {
        records(text, "t.conf", &mut no_includes)
            .unwrap()
            .into_iter()
            .map(|r| {
                r.pairs
                    .into_iter()
                    .map(|p| (p.key, p.value, p.at.line))
                    .collect()
            })
            .collect()
    }

    fn kv(k: &str, v: &str, l: u32) -> (String, String, u32) {
        (k.to_string(), v.to_string(), l)
    }

    #[test]
    fn comments_blank_lines_and_trailing_comments() {
        let got = recs("# header\n\nA=1 # trailing\n   # indented comment\nB=2#tight\n");
        assert_eq!(got, vec![vec![kv("A", "1", 3)], vec![kv("B", "2", 5)]]);
    }

    #[test]
    fn escaped_hash_is_literal() {
        assert_eq!(recs("A=x\\#y # c"), vec![vec![kv("A", "x#y", 1)]]);
    }

    #[test]
    fn continuation_joins_lines_and_keeps_line_numbers() {
        let got = recs("NodeName=a \\\n  CPUs=4 \\  \n  Nodes=gpu[01-\\\n04]\nX=1");
        assert_eq!(
            got,
            vec![
                vec![
                    kv("NodeName", "a", 1),
                    kv("CPUs", "4", 2),
                    kv("Nodes", "gpu[01-04]", 3)
                ],
                vec![kv("X", "1", 5)]
            ]
        );
    }

    #[test]
    fn continuation_after_comment_removal() {
        assert_eq!(
            recs("A=1 \\ # comment\nB=2"),
            vec![vec![kv("A", "1", 1), kv("B", "2", 2)]]
        );
    }

    #[test]
    fn several_pairs_quotes_and_blanks_around_equals() {
        // `#` starts a comment even inside quotes (as in Slurm), leaving the quote open.
        let err = records("B=\"x y # z\"", "t.conf", &mut no_includes).unwrap_err();
        assert!(err.to_string().contains("unterminated"), "{err}");
        assert_eq!(
            recs("A = 1 B=\"x y\"\tC=3\r\n"),
            vec![vec![kv("A", "1", 1), kv("B", "x y", 1), kv("C", "3", 1)]]
        );
    }

    #[test]
    fn token_without_equals_is_an_error_with_line() {
        let err = records("A=1\nbogus line", "f.conf", &mut no_includes).unwrap_err();
        assert_eq!(err.to_string(), "f.conf:2: Parse error: \"bogus line\"");
        // After a pair, the leftover starts where that pair's value ends (blanks kept).
        let err = records("A=1\nN=x  Y=2 bad # c\n", "f.conf", &mut no_includes).unwrap_err();
        assert_eq!(err, ConfigError::Leftover { at: Location::new("f.conf", 2), text: " bad ".into() });
        let r = &records("A=1 \tB=2", "f.conf", &mut no_includes).unwrap()[0];
        assert_eq!((r.leftover(0), r.leftover(1)), ("A=1 \tB=2".to_string(), " \tB=2".to_string()));
    }

    #[test]
    fn include_is_spliced_in_place() {
        let mut resolver = |p: &str| -> Result<(String, String), String> {
            assert_eq!(p, "extra.conf");
            Ok(("/etc/slurm/extra.conf".to_string(), "B=2\nbad".to_string()))
        };
        let got = records("A=1\ninclude \"extra.conf\"\nC=3", "s.conf", &mut resolver);
        let err = got.unwrap_err();
        assert_eq!(
            err.to_string(),
            "/etc/slurm/extra.conf:2: Parse error: \"bad\""
        );
        let mut resolver =
            |_: &str| -> Result<(String, String), String> { Ok(("x".into(), "B=2".into())) };
        let got = records("A=1\nInclude extra.conf\nC=3", "s.conf", &mut resolver).unwrap();
        let keys: Vec<_> = got.iter().map(|r| r.pairs[0].key.as_str()).collect();
        assert_eq!(keys, ["A", "B", "C"]);
    }

    #[test]
    fn include_failure_and_recursion_are_errors() {
        let err = records("\nInclude nope.conf", "s.conf", &mut no_includes).unwrap_err();
        assert_eq!(
            err.to_string(),
            "s.conf:2: cannot include `nope.conf': nope.conf: includes are not available here"
        );
        let mut selfish = |_: &str| -> Result<(String, String), String> {
            Ok(("loop.conf".into(), "Include loop.conf".into()))
        };
        let err = records("Include loop.conf", "s.conf", &mut selfish).unwrap_err();
        assert!(err.to_string().contains("nested includes"), "{err}");
    }
}
