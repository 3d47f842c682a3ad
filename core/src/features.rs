//! Job constraints on node features: `sbatch -C`/`--constraint`, `Features=` of `scontrol show
//! job`, matched against the `Features=` of the nodes in slurm.conf.
//!
//! The grammar and its errors are Slurm 22.05's `job_scheduler.c` `build_feature_list` and
//! `_valid_feature_list`; a node satisfies a constraint as `node_scheduler.c` `_match_feature`
//! decides. In words:
//!
//! - A constraint is feature names joined by `&` (and) or `|` (or); a `,` is read as `&` (also
//!   in the text the job keeps and shows). Nothing else separates names: spaces belong to them,
//!   and names compare case-sensitively.
//! - Operators apply left to right with no precedence (`a|b&c` is `(a|b)&c`); one level of
//!   parentheses groups names (`(a|b)&c`; `((a))` is refused).
//! - `name*N` asks for N nodes with the feature and `[a|b]` (matching or) for all nodes with
//!   the same one of them; `[a*2&b*2]` combines counts. They are parsed and checked as Slurm
//!   does; Flotilla's placement does not carry them out (see [`ConstraintError::Unsupported`]).
//! - A trailing operator is ignored (`a&` is `a`); an empty constraint is none.
//!
//! Pure: no I/O. The controller checks the names against the cluster's features.

use serde::{Deserialize, Serialize};

/// How a term joins the next one (Slurm's `FEATURE_OP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// `&` (or `,`).
    And,
    /// `|`.
    Or,
    /// `&` inside brackets (counts of several features).
    Xand,
    /// `|` inside brackets (matching or).
    Xor,
    /// The last term.
    End,
}

/// One feature of a constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Term {
    /// The feature's name.
    pub name: String,
    /// `*N`: nodes that must have it (0: not given).
    pub count: u32,
    /// Parenthesis depth when the term ended (0 or 1; Slurm records the depth after a `)`).
    pub paren: u8,
    /// How it joins the next term.
    pub op: Op,
}

/// Why a constraint is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintError {
    /// Slurm refuses it: `ESLURM_INVALID_FEATURE` ("Invalid feature specification").
    Invalid,
    /// Valid in Slurm, but it needs node counts (`a*2`) or matching or (`[a|b]`), which
    /// Flotilla's placement does not carry out: refused rather than placed wrongly.
    Unsupported,
}

/// A parsed constraint with at least one term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Constraint {
    /// The text it was parsed from, `,` read as `&` ([`normalize`]).
    pub text: String,
    /// The terms, in order.
    pub terms: Vec<Term>,
}

/// The text a job keeps and shows for constraint `s`: Slurm replaces every `,` by `&`
/// (`build_feature_list`, "use of commas separator is a common error").
pub fn normalize(s: &str) -> String {
    s.replace(',', "&")
}

impl Constraint {
    /// Parses constraint `s` as Slurm 22.05's `build_feature_list` does. `Ok(None)` for a
    /// constraint without names (`""`, `"&"` is refused). The names are not checked against
    /// any node here ([`Constraint::names`]).
    ///
    /// Errors: [`ConstraintError::Invalid`] for Slurm's refusals (an operator or `*` without a
    /// name before it, a count not above 0, a count inside parentheses, nested or unbalanced
    /// parentheses or brackets, a second set of brackets, a `(` or `[` right after a name, and
    /// `_valid_feature_list`'s bracket rules: `&` in brackets needs counts, `|` in brackets
    /// none).
    pub fn parse(s: &str) -> Result<Option<Constraint>, ConstraintError> {
        let s = normalize(s);
        let b = s.as_bytes();
        let mut terms = Vec::new();
        let (mut bracket, mut paren, mut brackets_seen) = (0u32, 0u8, 0u32);
        // The name being read: where it starts and, once a special byte followed it, ends
        // (Slurm cuts the string there; bytes after a count or `)` up to the next operator
        // are not part of it).
        let (mut start, mut end): (Option<usize>, Option<usize>) = (None, None);
        let mut count = 0u32;
        let mut i = 0usize;
        while i <= b.len() {
            let c = b.get(i).copied();
            if matches!(c, None | Some(b'*' | b'&' | b'|' | b'[' | b']' | b'(' | b')')) && start.is_some() && end.is_none() {
                end = Some(i);
            }
            let name = start.map(|st| s[st..end.unwrap_or(i)].to_string());
            match c {
                Some(b'*') => {
                    if name.is_none() || paren != 0 {
                        return Err(ConstraintError::Invalid);
                    }
                    // `strtol`: an optional sign, then digits; none is 0.
                    let mut j = i + 1;
                    let neg = b.get(j) == Some(&b'-');
                    if matches!(b.get(j), Some(b'-' | b'+')) {
                        j += 1;
                    }
                    let digits = j;
                    while b.get(j).is_some_and(u8::is_ascii_digit) {
                        j += 1;
                    }
                    let n: u64 = if j > digits { s[digits..j].parse().unwrap_or(u64::MAX) } else { 0 };
                    if neg || n == 0 {
                        return Err(ConstraintError::Invalid);
                    }
                    count = u32::try_from(n).unwrap_or(u32::MAX);
                    i = j;
                    continue;
                }
                Some(op @ (b'&' | b'|')) => {
                    let name = name.ok_or(ConstraintError::Invalid)?;
                    let op = match (op, paren > 0, bracket > 0) {
                        (b'&', false, true) => Op::Xand,
                        (b'|', false, true) => Op::Xor,
                        (b'&', ..) => Op::And,
                        _ => Op::Or,
                    };
                    terms.push(Term { name, count, paren, op });
                    (start, end, count) = (None, None, 0);
                }
                Some(b'[') => {
                    if name.is_some() || bracket > 0 {
                        return Err(ConstraintError::Invalid);
                    }
                    bracket += 1;
                    brackets_seen += 1;
                    if brackets_seen > 1 {
                        return Err(ConstraintError::Invalid);
                    }
                }
                Some(b']') => {
                    if name.is_none() || bracket == 0 {
                        return Err(ConstraintError::Invalid);
                    }
                    bracket -= 1;
                }
                Some(b'(') => {
                    if name.is_some() || paren > 0 {
                        return Err(ConstraintError::Invalid);
                    }
                    paren += 1;
                }
                Some(b')') => {
                    if name.is_none() || paren == 0 {
                        return Err(ConstraintError::Invalid);
                    }
                    paren -= 1;
                }
                None => {
                    if let Some(name) = name {
                        terms.push(Term { name, count, paren, op: Op::End });
                    }
                    break;
                }
                Some(_) => {
                    if start.is_none() {
                        start = Some(i);
                    }
                }
            }
            i += 1;
        }
        if bracket != 0 || paren != 0 {
            return Err(ConstraintError::Invalid);
        }
        check_brackets(&terms)?;
        Ok((!terms.is_empty()).then(|| Constraint { text: s.clone(), terms }))
    }

    /// The feature names it uses, in order (with repeats).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.name.as_str())
    }

    /// Whether placement can carry it out: no node counts and no matching or.
    pub fn per_node(&self) -> bool {
        self.terms.iter().all(|t| t.count == 0 && !matches!(t.op, Op::Xand | Op::Xor))
    }

    /// Whether a node with features `has` satisfies it (Slurm 22.05 `_match_feature`: the
    /// terms folded left to right with the operator before each, a parenthesised run folded
    /// on its own and joined with the operator before it).
    pub fn matches(&self, has: &[String]) -> bool {
        let mut all = true;
        let mut group = true;
        let mut in_group = false;
        let (mut last_op, mut group_op, mut last_paren) = (Op::And, Op::And, 0u8);
        let join = |acc: bool, op: Op, v: bool| if op == Op::Or { acc || v } else { acc && v };
        for t in &self.terms {
            if last_paren < t.paren {
                group_op = last_op;
                last_op = Op::And;
                group = true;
                in_group = true;
            }
            let v = has.contains(&t.name);
            if in_group {
                group = join(group, last_op, v);
            } else {
                all = join(all, last_op, v);
            }
            if last_paren > t.paren {
                all = join(all, group_op, group);
                in_group = false;
            }
            last_op = t.op;
            last_paren = t.paren;
        }
        all
    }
}

/// `_valid_feature_list`'s rules for brackets: `&` inside brackets needs a count on each
/// name, `|` inside brackets allows none, and the name closing the brackets follows the
/// same rule as those before it.
fn check_brackets(terms: &[Term]) -> Result<(), ConstraintError> {
    let (mut open, mut has_xand, mut has_xor) = (false, false, false);
    for t in terms {
        if matches!(t.op, Op::Xand | Op::Xor) {
            open = true;
        }
        if (t.op == Op::Xand && t.count == 0) || (t.op == Op::Xor && t.count > 0) {
            return Err(ConstraintError::Invalid);
        }
        if open && !matches!(t.op, Op::Xand | Op::Xor) {
            if (has_xand && t.count == 0) || (has_xor && t.count > 0) {
                return Err(ConstraintError::Invalid);
            }
            (open, has_xand, has_xor) = (false, false, false);
        }
        has_xand |= t.op == Op::Xand;
        has_xor |= t.op == Op::Xor;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Option<Constraint>, ConstraintError> {
        Constraint::parse(s)
    }

    fn names(s: &str) -> Vec<(String, u32, u8, Op)> {
        parse(s).unwrap().unwrap().terms.into_iter().map(|t| (t.name, t.count, t.paren, t.op)).collect()
    }

    fn f(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Accepted and refused as Slurm 22.05 on the reference (goldens-extra a01
    /// `constraint_*`): `((ib))`, `&ib`, `(ib`, `ib)` refused; `ib&`, `ib*2`, `[ib|fast]`,
    /// `[ib*1&fast*1]`, `(ib|fast)&ib` accepted.
    #[test]
    fn grammar_as_the_reference() {
        for bad in ["((ib))", "&ib", "(ib", "ib)", "ib*0", "ib*-1", "*2", "ib*", "[ib", "ib]", "[ib&fast]", "[ib*1|fast*1]", "[a]&[b]", "a(b)", "|"] {
            assert_eq!(parse(bad), Err(ConstraintError::Invalid), "{bad}");
        }
        assert_eq!(parse(""), Ok(None));
        assert_eq!(names("ib&"), [("ib".into(), 0, 0, Op::And)]);
        assert_eq!(names("ib,fast"), [("ib".into(), 0, 0, Op::And), ("fast".into(), 0, 0, Op::End)]);
        assert_eq!(names("ib*2"), [("ib".into(), 2, 0, Op::End)]);
        assert_eq!(names("[ib|fast]"), [("ib".into(), 0, 0, Op::Xor), ("fast".into(), 0, 0, Op::End)]);
        assert_eq!(names("[ib*1&fast*1]"), [("ib".into(), 1, 0, Op::Xand), ("fast".into(), 1, 0, Op::End)]);
        // Slurm records the depth after the `)`.
        assert_eq!(names("(ib|fast)&ib"), [("ib".into(), 0, 1, Op::Or), ("fast".into(), 0, 0, Op::And), ("ib".into(), 0, 0, Op::End)]);
        assert_eq!(names("a b"), [("a b".into(), 0, 0, Op::End)]);
        assert!(!parse("[ib|fast]").unwrap().unwrap().per_node());
        assert!(!parse("ib*2").unwrap().unwrap().per_node());
        assert!(parse("[ib]").unwrap().unwrap().per_node());
        assert_eq!(normalize("a,b|c"), "a&b|c");
    }

    proptest::proptest! {
        /// Any text parses or is refused without a panic (the controller parses what users
        /// send); what parses keeps its text and parses again to the same terms (a store row
        /// holds the text), and a single name matches exactly the nodes that have it.
        #[test]
        fn any_text_parses_or_is_refused(s in "[a-c&|,()\\[\\]*0-9 -]{0,12}", has in proptest::collection::vec("[a-c]", 0..3)) {
            if let Ok(Some(c)) = Constraint::parse(&s) {
                proptest::prop_assert_eq!(&c.text, &normalize(&s));
                proptest::prop_assert_eq!(Constraint::parse(&c.text), Ok(Some(c.clone())));
                let _ = c.matches(&has);
                if c.terms.len() == 1 {
                    proptest::prop_assert_eq!(c.matches(&has), has.contains(&c.terms[0].name));
                }
            }
        }
    }

    #[test]
    fn left_to_right_without_precedence() {
        let c = |s: &str| parse(s).unwrap().unwrap();
        let ib_fast = f(&["ib", "fast"]);
        let slow = f(&["slow"]);
        let ib = f(&["ib"]);
        assert!(c("ib&fast").matches(&ib_fast) && !c("ib&fast").matches(&ib));
        assert!(c("slow|fast").matches(&slow) && c("slow|fast").matches(&ib_fast) && !c("slow|fast").matches(&ib));
        // `fast|slow&ib` is `(fast|slow)&ib`: a slow node without ib fails.
        assert!(!c("fast|slow&ib").matches(&slow));
        assert!(c("fast|slow&ib").matches(&ib_fast));
        // ... while `ib&slow|fast` is `(ib&slow)|fast`.
        assert!(c("ib&slow|fast").matches(&f(&["fast"])));
        assert!(!c("ib&slow|fast").matches(&ib));
        // A group joins with the operator before it.
        assert!(c("slow|(ib&fast)").matches(&ib_fast));
        assert!(c("slow|(ib&fast)").matches(&slow));
        assert!(!c("slow|(ib&fast)").matches(&ib));
        assert!(c("(ib|slow)&fast").matches(&ib_fast) && !c("(ib|slow)&fast").matches(&slow));
        assert!(c("ib&").matches(&ib) && !c("ib&").matches(&slow));
        assert!(!c("IB").matches(&ib), "names compare case-sensitively");
        assert!(!c("ib").matches(&[]));
    }
}
