//! The environment `sbatch` submits with a job: the submitting environment plus the variables
//! that come from sbatch's own options, as Slurm 22.05's `sbatch` sets them before it sends
//! the job (`opt.c` `_opt_verify`, `sbatch.c` `_set_submit_dir_env`, `_set_umask_env`).
//!
//! Division of work (see `flotilla_slurmd::env`): sbatch sends its whole environment and
//! `SLURM_EXPORT_ENV=<spec>` when `--export` (or `SBATCH_EXPORT`) was given; the node daemon
//! applies the export rules (`NONE`, `NIL`, lists, `ALL,K=V`) and adds the allocation's
//! variables. Variables set here:
//!
//! - `SLURM_SUBMIT_DIR` (sbatch's working directory, not `--chdir`), `SLURM_SUBMIT_HOST`;
//! - `SLURM_UMASK` (octal, 4 digits) unless already set;
//! - `SLURM_NTASKS` and `SLURM_NPROCS` (`-n`), `SLURM_CPUS_PER_TASK` (`-c`),
//!   `SLURM_NTASKS_PER_NODE` (`--ntasks-per-node`), `SLURM_GPUS` (`-G/--gpus`),
//!   `SLURM_GPUS_PER_NODE`, `SLURM_GPUS_PER_SOCKET`, `SLURM_GPUS_PER_TASK` (`[type:]count`;
//!   `env.c` `set_env_from_opts`), `SLURM_JOB_DEPENDENCY`
//!   (`-d`) — each only when the option was given, otherwise a value inherited from the
//!   submitting environment stays, as in Slurm;
//! - `SLURM_OPEN_MODE` = `a` or `t` (`--open-mode`), which the node daemon reads;
//! - `SLURM_EXPORT_ENV` (`--export`).

use flotilla_proto::{GpuCount, SubmitJob};

/// What sbatch knows beyond the request itself.
#[derive(Debug, Clone, Default)]
pub struct SubmitContext<'a> {
    /// `--export` as given (`None`: not given; the default is `ALL`).
    pub export: Option<&'a str>,
    /// `--open-mode` as given; Slurm reads its first letter (`a`/`A` append, `t`/`T` truncate)
    /// and ignores anything else.
    pub open_mode: Option<&'a str>,
    /// sbatch's working directory.
    pub cwd: &'a str,
    /// This host's name.
    pub host: &'a str,
    /// The process's umask (e.g. `0o022`).
    pub umask: u32,
}

/// The process's umask (`umask(2)` has no read-only form: it is set and put back, as Slurm's
/// sbatch does in `_set_umask_env`).
pub fn process_umask() -> u32 {
    use nix::sys::stat::{umask, Mode};
    let old = umask(Mode::from_bits_truncate(0o022));
    umask(old);
    old.bits()
}

fn set(env: &mut Vec<(String, String)>, k: &str, v: String) {
    match env.iter_mut().find(|(ek, _)| ek == k) {
        Some(e) => e.1 = v,
        None => env.push((k.to_string(), v)),
    }
}

fn gpus(g: &GpuCount) -> String {
    match &g.gpu_type {
        Some(t) => format!("{t}:{}", g.count),
        None => g.count.to_string(),
    }
}

/// The environment to submit: `submitting` (the process environment) with the variables of
/// the module documentation set from `job` and `ctx`. Order: `submitting` first, new
/// variables appended.
pub fn submit_environment(
    submitting: Vec<(String, String)>,
    job: &SubmitJob,
    ctx: &SubmitContext<'_>,
) -> Vec<(String, String)> {
    let mut env = submitting;
    // Only this sbatch's `--export` decides what the job gets: an inherited
    // `SLURM_EXPORT_ENV` (a job submitting from inside a `--export=NONE` job) must not apply.
    env.retain(|(k, _)| k != "SLURM_EXPORT_ENV");
    set(&mut env, "SLURM_SUBMIT_DIR", ctx.cwd.to_string());
    set(&mut env, "SLURM_SUBMIT_HOST", ctx.host.to_string());
    if !env.iter().any(|(k, _)| k == "SLURM_UMASK") {
        set(&mut env, "SLURM_UMASK", format!("{:04o}", ctx.umask & 0o7777));
    }
    if let Some(n) = job.ntasks {
        set(&mut env, "SLURM_NTASKS", n.to_string());
        set(&mut env, "SLURM_NPROCS", n.to_string());
    }
    if let Some(c) = job.cpus_per_task {
        set(&mut env, "SLURM_CPUS_PER_TASK", c.to_string());
    }
    if let Some(n) = job.ntasks_per_node {
        set(&mut env, "SLURM_NTASKS_PER_NODE", n.to_string());
    }
    if let Some(g) = &job.gpus {
        set(&mut env, "SLURM_GPUS", gpus(g));
    }
    if let Some(g) = &job.gpus_per_node {
        set(&mut env, "SLURM_GPUS_PER_NODE", gpus(g));
    }
    if let Some(g) = &job.gpus_per_socket {
        set(&mut env, "SLURM_GPUS_PER_SOCKET", gpus(g));
    }
    if let Some(g) = &job.gpus_per_task {
        set(&mut env, "SLURM_GPUS_PER_TASK", gpus(g));
    }
    if let Some(d) = &job.dependency {
        set(&mut env, "SLURM_JOB_DEPENDENCY", d.clone());
    }
    match ctx.open_mode.and_then(|m| m.chars().next()).map(|c| c.to_ascii_lowercase()) {
        Some('a') => set(&mut env, "SLURM_OPEN_MODE", "a".into()),
        Some('t') => set(&mut env, "SLURM_OPEN_MODE", "t".into()),
        _ => {}
    }
    if let Some(x) = ctx.export {
        set(&mut env, "SLURM_EXPORT_ENV", x.to_string());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str())
    }

    fn ctx() -> SubmitContext<'static> {
        SubmitContext {
            export: None,
            open_mode: None,
            cwd: "/home/alice/w",
            host: "login1",
            umask: 0o022,
        }
    }

    #[test]
    fn option_variables_are_set_only_when_given() {
        let inherited = vec![
            ("PATH".to_string(), "/usr/bin".to_string()),
            ("SLURM_NTASKS".to_string(), "8".to_string()),
            ("SLURM_SUBMIT_DIR".to_string(), "/old".to_string()),
            ("SLURM_EXPORT_ENV".to_string(), "NONE".to_string()),
        ];
        let env = submit_environment(inherited.clone(), &SubmitJob::default(), &ctx());
        assert_eq!(get(&env, "PATH"), Some("/usr/bin"));
        assert_eq!(get(&env, "SLURM_NTASKS"), Some("8"), "inherited, as in Slurm");
        assert_eq!(get(&env, "SLURM_NPROCS"), None);
        assert_eq!(get(&env, "SLURM_SUBMIT_DIR"), Some("/home/alice/w"));
        assert_eq!(get(&env, "SLURM_SUBMIT_HOST"), Some("login1"));
        assert_eq!(get(&env, "SLURM_UMASK"), Some("0022"));
        for k in ["SLURM_CPUS_PER_TASK", "SLURM_GPUS", "SLURM_OPEN_MODE", "SLURM_EXPORT_ENV"] {
            assert_eq!(get(&env, k), None, "{k}");
        }
        let job = SubmitJob {
            ntasks: Some(2),
            cpus_per_task: Some(3),
            ntasks_per_node: Some(1),
            gpus: Some(GpuCount { gpu_type: None, count: 4 }),
            gpus_per_node: Some(GpuCount { gpu_type: Some("h100".into()), count: 2 }),
            gpus_per_socket: Some(GpuCount { gpu_type: None, count: 1 }),
            dependency: Some("afterok:7".into()),
            ..SubmitJob::default()
        };
        let c = SubmitContext {
            export: Some("NONE"),
            open_mode: Some("APP"),
            ..ctx()
        };
        let env = submit_environment(inherited, &job, &c);
        for (k, v) in [
            ("SLURM_NTASKS", "2"),
            ("SLURM_NPROCS", "2"),
            ("SLURM_CPUS_PER_TASK", "3"),
            ("SLURM_NTASKS_PER_NODE", "1"),
            ("SLURM_GPUS", "4"),
            ("SLURM_GPUS_PER_NODE", "h100:2"),
            ("SLURM_GPUS_PER_SOCKET", "1"),
            ("SLURM_JOB_DEPENDENCY", "afterok:7"),
            ("SLURM_OPEN_MODE", "a"),
            ("SLURM_EXPORT_ENV", "NONE"),
        ] {
            assert_eq!(get(&env, k), Some(v), "{k}");
        }
        assert_eq!(env.iter().filter(|(k, _)| k == "SLURM_NTASKS").count(), 1);
    }

    /// The umask read is the process's (as /proc says), and reading it leaves it as it was.
    #[test]
    fn process_umask_reads_without_changing() {
        let proc_umask = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("Umask:").map(|v| u32::from_str_radix(v.trim(), 8).unwrap()))
                .unwrap()
        };
        let before = proc_umask();
        assert_eq!(process_umask(), before);
        assert_eq!(proc_umask(), before, "put back");
    }

    #[test]
    fn umask_kept_and_open_modes() {
        let env = submit_environment(vec![("SLURM_UMASK".into(), "0077".into())], &SubmitJob::default(), &ctx());
        assert_eq!(get(&env, "SLURM_UMASK"), Some("0077"));
        let t = SubmitContext {
            open_mode: Some("truncate"),
            ..ctx()
        };
        assert_eq!(get(&submit_environment(vec![], &SubmitJob::default(), &t), "SLURM_OPEN_MODE"), Some("t"));
        // Slurm looks at the first letter only; anything else is ignored.
        let x = SubmitContext {
            open_mode: Some("xyz"),
            ..ctx()
        };
        assert_eq!(get(&submit_environment(vec![], &SubmitJob::default(), &x), "SLURM_OPEN_MODE"), None);
    }
}
