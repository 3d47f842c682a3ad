//! Output and error file names of a batch job: Slurm's filename patterns (sbatch(1) "filename
//! pattern"). Pure: the caller passes every value in.
//!
//! `%%` a `%`; `%A` the array's job id (the job id for a plain job); `%a` the array task id
//! (`4294967294` for a plain job, as Slurm prints NO_VAL-1); `%J` the job id (in the batch
//! step Slurm prints no step suffix); `%j` the
//! job id; `%N` the short host name of the batch host; `%n` the node index (0); `%s` the step
//! (`batch`); `%t` the task (0); `%u` the user name; `%x` the job name. A number between `%`
//! and the letter pads numeric values with zeros (`%5j` → `00044`). A pattern holding `\` is
//! taken literally, backslashes removed. Unknown letters are kept as written.

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

fn pad(v: &str, width: Option<usize>, numeric: bool) -> String {
    match width {
        Some(w) if numeric && v.len() < w => format!("{}{v}", "0".repeat(w - v.len())),
        _ => v.to_string(),
    }
}

/// Expands `pattern` with `vars`.
pub fn expand(pattern: &str, vars: &PatternVars<'_>) -> String {
    if pattern.contains('\\') {
        return pattern.replace('\\', "");
    }
    let (array_job, task) = match vars.array {
        Some((a, t)) => (a, u64::from(t)),
        None => (vars.job_id, NO_ARRAY_TASK),
    };
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        // %[digits]letter
        let mut j = i + 1;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        let Some(&letter) = chars.get(j) else {
            out.extend(&chars[i..]);
            break;
        };
        let digits: String = chars[i + 1..j].iter().collect();
        let width = digits.parse::<usize>().ok().map(|w| w.min(64));
        let value = match letter {
            '%' if digits.is_empty() => Some(("%".to_string(), false)),
            'A' => Some((array_job.to_string(), true)),
            'a' => Some((task.to_string(), true)),
            // In the batch step `%J` is the bare job id (CONTRACT.md §A-14: dask-jobqueue's
            // `-o dask-worker-%J.out` gives `dask-worker-<id>.out` on Slurm 22.05).
            'J' => Some((vars.job_id.to_string(), true)),
            'j' => Some((vars.job_id.to_string(), true)),
            'N' => Some((vars.host.to_string(), false)),
            'n' | 't' => Some(("0".to_string(), true)),
            's' => Some(("batch".to_string(), false)),
            'u' => Some((vars.user.to_string(), false)),
            'x' => Some((vars.job_name.to_string(), false)),
            _ => None,
        };
        match value {
            Some((v, numeric)) => out.push_str(&pad(&v, width, numeric)),
            None => out.extend(&chars[i..=j]),
        }
        i = j + 1;
    }
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
        assert_eq!(expand("%3q", &v), "%3q");
        assert_eq!(expand("%J.%s.%n.%t", &v), "7.batch.0.0");
        assert_eq!(expand("dask-worker-%J.err", &v), "dask-worker-7.err");
        assert_eq!(expand("%3J", &v), "007");
        assert_eq!(expand("%10x", &v), "n", "names are not padded");
        assert_eq!(expand("a\\%j", &v), "a%j");
        assert_eq!(expand("%2j", &plain(123, "n")), "123");
        assert_eq!(expand("ünï-%j", &v), "ünï-7");
    }
}
