//! Output and error file names of a batch job: Slurm's filename patterns (sbatch(1) "filename
//! pattern"). Pure: the caller passes every value in.
//!
//! `%%` a `%`; `%A` the array's job id (the job id for a plain job); `%a` the array task id
//! (`4294967294` for a plain job, as Slurm prints NO_VAL-1); `%J` the job id (in the batch
//! step Slurm prints no step suffix); `%j` the
//! job id; `%N` the short host name of the batch host; `%n` the node index (0); `%s` the step
//! (`batch`); `%t` the task (0); `%u` the user name; `%x` the job name. A number between `%`
//! and the letter pads numeric values with zeros (`%5j` → `00044`, at most 10 digits). A
//! pattern holding `\` is taken literally, backslashes removed. Unknown letters are kept as
//! written. The rules are Slurm's `_create_batch_fname` ([`expand`]).

/// Array task id Slurm shows for a job that is not an array task (NO_VAL - 1).
pub const NO_ARRAY_TASK: u64 = 4_294_967_294;

/// What a pattern may refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternVars<'a> {
    /// Job id (the task's own id for an array task).
    pub job_id: u64,
    /// Array job id and task index, for array tasks.
    pub array: Option<(u64, u32)>,
    /// Job name.
    pub job_name: &'a str,
    /// User name.
    pub user: &'a str,
    /// Short host name of the batch host (`%N`; Slurm uses the host name, not the node name).
    pub host: &'a str,
}

/// Slurm's default output pattern: `slurm-%j.out`, or `slurm-%A_%a.out` for array tasks.
pub fn default_pattern(is_array: bool) -> &'static str {
    if is_array {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    }
}

/// Slurm's cap on a zero-padding width (`MAX_WIDTH` of `src/slurmd/common/fname.c`): `%12j`
/// pads to 10 digits.
pub const MAX_WIDTH: usize = 10;

/// `v` zero-padded on the left to `width` digits (`%0*u`).
fn pad(v: u64, width: usize) -> String {
    format!("{v:0width$}")
}

/// Slurm's `remove_path_slashes`: a pattern holding a backslash is not expanded; each `\\`
/// becomes one `\` and every other backslash is dropped. `None` when there is none.
fn remove_path_slashes(pattern: &str) -> Option<String> {
    if !pattern.contains('\\') {
        return None;
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if chars.peek() == Some(&'\\') {
                out.push('\\');
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Expands `pattern` with `vars` as Slurm's batch step names its files
/// (`src/slurmd/common/fname.c`: `fname_create`, `_create_batch_fname`, `_batch_path_check`):
///
/// - a pattern with a backslash is taken literally ([`remove_path_slashes`]);
/// - `%%` is one `%`; a `%` at the end stays;
/// - `%` then digits sets a zero-padding width (capped at [`MAX_WIDTH`]) for the numeric
///   symbols `%a %A %j %J %n %t` (`%s` is `batch`, `%N %u %x` are never padded);
/// - a letter Slurm does not know stays as written (`%q`); after a width, Slurm's scanner
///   drops the `%` and all digits but the last (`%12q` gives `2q`, `a%12` gives `a2`).
pub fn expand(pattern: &str, vars: &PatternVars<'_>) -> String {
    if let Some(literal) = remove_path_slashes(pattern) {
        return literal;
    }
    let (array_job, task) = match vars.array {
        Some((a, t)) => (a, u64::from(t)),
        None => (vars.job_id, NO_ARRAY_TASK),
    };
    let b: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    // `q`: where the text not yet copied starts; `p`: the scanner (as in Slurm).
    let (mut q, mut p) = (0usize, 0usize);
    while p < b.len() {
        if b[p] != '%' {
            p += 1;
            continue;
        }
        if b.get(p + 1) == Some(&'%') {
            out.extend(&b[q..=p]);
            p += 2;
            q = p;
            continue;
        }
        p += 1;
        let mut width = 0;
        if b.get(p).is_some_and(char::is_ascii_digit) {
            out.extend(&b[q..p - 1]);
            let start = p;
            while b.get(p).is_some_and(char::is_ascii_digit) {
                p += 1;
            }
            let digits: String = b[start..p].iter().collect();
            width = digits.parse::<usize>().map_or(MAX_WIDTH, |w| w.min(MAX_WIDTH));
            q = p - 1;
            if p == b.len() {
                break;
            }
        }
        let Some(&letter) = b.get(p) else { break };
        let value = match letter {
            'a' => Some(pad(task, width)),
            'A' => Some(pad(array_job, width)),
            // The batch step has no step suffix for `%J` (CONTRACT.md §A-14: dask-jobqueue's
            // `-o dask-worker-%J.out` gives `dask-worker-<id>.out` on Slurm 22.05).
            'j' | 'J' => Some(pad(vars.job_id, width)),
            'n' | 't' => Some(pad(0, width)),
            'N' => Some(vars.host.to_string()),
            's' => Some("batch".to_string()),
            'u' => Some(vars.user.to_string()),
            'x' => Some(vars.job_name.to_string()),
            _ => None,
        };
        if let Some(v) = value {
            out.extend(&b[q..p - 1]);
            out.push_str(&v);
            p += 1;
            q = p;
        }
    }
    out.extend(&b[q.min(b.len())..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(job_id: u64, name: &str) -> PatternVars<'_> {
        PatternVars {
            job_id,
            array: None,
            job_name: name,
            user: "alice",
            host: "vm",
        }
    }

    /// The names real Slurm produced in golden 0141_ls_output_files.
    #[test]
    fn goldens() {
        assert_eq!(expand("o-%j-%x-%u-%N-%A-%a.out", &plain(44, "pat")), "o-44-pat-alice-vm-44-4294967294.out");
        assert_eq!(expand("e-%j-%%-%5j.err", &plain(44, "pat")), "e-44-%-00044.err");
        let task = |id, t| PatternVars {
            job_id: id,
            array: Some((45, t)),
            job_name: "arrpat",
            user: "alice",
            host: "vm",
        };
        assert_eq!(expand("a-%A_%a-%x-%N-%u-%j-%3a.out", &task(48, 0)), "a-45_0-arrpat-vm-alice-48-000.out");
        assert_eq!(expand("a-%A_%a-%x-%N-%u-%j-%3a.out", &task(45, 2)), "a-45_2-arrpat-vm-alice-45-002.out");
        assert_eq!(expand(default_pattern(false), &plain(28, "env.sh")), "slurm-28.out");
        let t = PatternVars {
            array: Some((46, 3)),
            ..plain(47, "wrap")
        };
        assert_eq!(expand(default_pattern(true), &t), "slurm-46_3.out");
        assert_eq!(expand("outdir/%j.log", &plain(47, "wrap")), "outdir/47.log");
        assert_eq!(expand("env-%x-%j.out", &plain(32, "gres2")), "env-gres2-32.out");
    }

    #[test]
    fn edge_cases() {
        let v = plain(7, "n");
        assert_eq!(expand("x%", &v), "x%");
        assert_eq!(expand("%q%j", &v), "%q7");
        // After a width Slurm's scanner keeps only the last digit of an unknown symbol's.
        assert_eq!(expand("%3q", &v), "3q");
        assert_eq!(expand("%12q", &v), "2q");
        assert_eq!(expand("a%12", &v), "a2");
        assert_eq!(expand("%12j", &v), "0000000007", "widths are capped at 10");
        assert_eq!(expand("%0j", &v), "7");
        assert_eq!(expand("%%5j", &v), "%5j");
        assert_eq!(expand("a\\\\b\\%j", &v), "a\\b%j", "a doubled backslash is one");
        assert_eq!(expand("%J.%s.%n.%t", &v), "7.batch.0.0");
        assert_eq!(expand("dask-worker-%J.err", &v), "dask-worker-7.err");
        assert_eq!(expand("%3J", &v), "007");
        assert_eq!(expand("%10x", &v), "n", "names are not padded");
        assert_eq!(expand("a\\%j", &v), "a%j");
        assert_eq!(expand("%2j", &plain(123, "n")), "123");
        assert_eq!(expand("ünï-%j", &v), "ünï-7");
    }
}
