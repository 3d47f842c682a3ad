//! Slurm hostlist expressions: `gpu[01-04]`, `rack[1-2]-n[1-2]`, `a,b,c`.
//!
//! Semantics follow Slurm's `src/common/hostlist.c` (as observed through
//! `scontrol show hostnames|hostlist|hostlistsorted` in `shared/slurm-reference/goldens`).
//!
//! NOTE: this first version is a minimal expander so that other modules can build on the
//! API; the exact Slurm semantics (errors, compress) are being filled in.

use thiserror::Error;

/// Why a hostlist expression could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostlistError {
    /// A bracketed range such as `3-1` or `a-c` (Slurm: `_parse_single_range: Invalid range`).
    #[error("invalid range: `{0}'")]
    InvalidRange(String),
    /// A range holding more than [`MAX_RANGE`] hosts.
    #[error("too many hosts in range: `{0}'")]
    TooManyHosts(String),
}

/// Largest number of hosts one bracketed range may hold (Slurm's `MAX_RANGE`, 64 Ki).
pub const MAX_RANGE: u64 = 65_536;

/// Expands a hostlist expression into host names, in order, duplicates kept.
///
/// Errors: [`HostlistError`] for an invalid range.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    for item in split_top_level(expr) {
        expand_one(&item, &mut out)?;
    }
    Ok(out)
}

fn split_top_level(expr: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in expr.chars() {
        match c {
            '[' => {
                depth += 1;
                cur.push(c);
            }
            ']' => {
                depth -= 1;
                cur.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth <= 0 => {
                if !cur.is_empty() {
                    items.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        items.push(cur);
    }
    items
}

fn expand_one(item: &str, out: &mut Vec<String>) -> Result<(), HostlistError> {
    let Some(open) = item.find('[') else {
        out.push(item.to_string());
        return Ok(());
    };
    let Some(close_rel) = item[open..].find(']') else {
        out.push(item.to_string());
        return Ok(());
    };
    let close = open + close_rel;
    let prefix = &item[..open];
    let inner = &item[open + 1..close];
    let rest = &item[close + 1..];
    let mut suffixes = Vec::new();
    expand_one(rest, &mut suffixes)?;
    for part in inner.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let width = lo.len();
        let a: u64 = lo.parse().map_err(|_| HostlistError::InvalidRange(part.to_string()))?;
        let b: u64 = hi.parse().map_err(|_| HostlistError::InvalidRange(part.to_string()))?;
        if b < a {
            return Err(HostlistError::InvalidRange(part.to_string()));
        }
        if b - a + 1 > MAX_RANGE {
            return Err(HostlistError::TooManyHosts(part.to_string()));
        }
        for n in a..=b {
            for s in &suffixes {
                out.push(format!("{prefix}{n:0width$}{s}"));
            }
        }
    }
    Ok(())
}
