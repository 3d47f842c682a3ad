//! A job prints its environment (the reference's `env.sh`) on a controller with 4 real node
//! daemons (fake 8-GPU inventories); the output must equal the environment real Slurm gave
//! the same job (goldens `jobout_*env*`), after normalising what differs by nature: job ids,
//! host names, pids, the user, directories, the controller port, the config path
//! (`normalize.py` rules 3 and 5, plus the test's own temp dirs and uid).
//!
//! The submitted environment is what `sbatch` sends for those options (its side of the
//! contract, see `flotilla_slurmd::env`).

mod common;

use common::*;
use flotilla_proto::{ArrayRange, ArraySpec, GpuCount, GresSpec, SubmitJob};
use std::path::{Path, PathBuf};

const ENV_SH: &str = "#!/bin/bash\n# prints the job's Slurm/GPU environment, sorted\nenv | grep -E '^(SLURM|SLURMD|CUDA|GPU|ROCR|ZE_)' | sort\necho \"HOSTNAME_CMD=$(hostname)\"\necho \"PWD=$PWD\"\n";

fn goldens_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/slurm-reference/goldens")
}

fn golden_stdout(case: &str) -> Option<String> {
    let dir = goldens_dir();
    let f = std::fs::read_dir(&dir).ok()?.flatten().find(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.ends_with(&format!("_{case}.json"))
    })?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f.path()).ok()?).ok()?;
    v["stdout"].as_str().map(str::to_string)
}

/// normalize.py's rules for job environments, plus what differs between the recording and
/// this test by construction.
fn normalize(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let Some((k, v)) = l.split_once('=') else { return l.to_string() };
            let v = match k {
                "SLURM_JOB_ID" | "SLURM_JOBID" | "SLURM_ARRAY_JOB_ID" => "<ID>".to_string(),
                "SLURM_TASK_PID" => "<PID>".to_string(),
                "HOSTNAME_CMD" | "SLURM_SUBMIT_HOST" => "<HOST>".to_string(),
                "SLURM_SUBMIT_DIR" | "PWD" => "<DIR>".to_string(),
                "SLURM_JOB_UID" | "SLURM_JOB_GID" => "<UID>".to_string(),
                "SLURM_JOB_USER" => "<USER>".to_string(),
                "SLURM_CONF" => "<CONF>".to_string(),
                "SLURM_WORKING_CLUSTER" => {
                    // cluster:addr:port:protocol:select plugin — the port is the OS's choice.
                    let p: Vec<&str> = v.split(':').collect();
                    format!("{}:{}:<PORT>:{}:{}", p[0], p.get(1).unwrap_or(&""), p.get(3).unwrap_or(&""), p.get(4).unwrap_or(&""))
                }
                _ => v.to_string(),
            };
            format!("{k}={v}")
        })
        .collect()
}

fn with_env(mut s: SubmitJob, vars: &[(&str, &str)]) -> SubmitJob {
    for (k, v) in vars {
        s.environment.push((k.to_string(), v.to_string()));
    }
    s
}

#[test]
fn job_environment_matches_slurm() {
    if golden_stdout("jobout_plain_env").is_none() {
        panic!("goldens not found under {}", goldens_dir().display());
    }
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(4);
    let work = c.path("g");
    std::fs::create_dir_all(&work).unwrap();
    let base = |name: &str| {
        let mut s = job(ENV_SH, &work);
        s.name = Some(name.into());
        s.stdout = Some("env-%x-%j.out".into());
        s
    };
    let gres = |n| vec![GresSpec { name: "gpu".into(), gpu_type: None, count: n }];
    let mut cases: Vec<(&str, SubmitJob)> = Vec::new();
    let mut plain = job(ENV_SH, &work);
    plain.name = Some("env.sh".into());
    cases.push(("jobout_plain_env", plain));
    cases.push(("jobout_env_gres2", SubmitJob { gres: gres(2), ..base("gres2") }));
    cases.push((
        "jobout_env_gres_typed3",
        with_env(
            SubmitJob {
                gres: vec![GresSpec { name: "gpu".into(), gpu_type: Some("h100".into()), count: 3 }],
                cpus_per_task: Some(4),
                ..base("gres_typed3")
            },
            &[("SLURM_CPUS_PER_TASK", "4")],
        ),
    ));
    cases.push((
        "jobout_env_gpus4",
        with_env(SubmitJob { gpus: Some(GpuCount { gpu_type: None, count: 4 }), ..base("gpus4") }, &[("SLURM_GPUS", "4")]),
    ));
    cases.push((
        "jobout_env_N2_gpn2",
        with_env(
            SubmitJob {
                nodes_min: Some(2),
                gpus_per_node: Some(GpuCount { gpu_type: None, count: 2 }),
                ..base("N2_gpn2")
            },
            &[("SLURM_GPUS_PER_NODE", "2")],
        ),
    ));
    cases.push(("jobout_env_N2_gres8", SubmitJob { nodes_min: Some(2), gres: gres(8), ..base("N2_gres8") }));
    cases.push((
        "jobout_env_n4_gpt1",
        with_env(
            SubmitJob {
                ntasks: Some(4),
                gpus_per_task: Some(GpuCount { gpu_type: None, count: 1 }),
                ..base("n4_gpt1")
            },
            &[("SLURM_NTASKS", "4"), ("SLURM_NPROCS", "4"), ("SLURM_GPUS_PER_TASK", "1")],
        ),
    ));
    cases.push((
        "jobout_env_gpus12",
        with_env(SubmitJob { gpus: Some(GpuCount { gpu_type: None, count: 12 }), ..base("gpus12") }, &[("SLURM_GPUS", "12")]),
    ));
    cases.push((
        "jobout_env_mem_cpu",
        with_env(
            SubmitJob {
                mem_per_node_mib: Some(4096),
                cpus_per_task: Some(2),
                ..base("mem_cpu")
            },
            &[("SLURM_MEM_PER_NODE", "4096"), ("SLURM_CPUS_PER_TASK", "2")],
        ),
    ));
    cases.push(("jobout_env_exclusive", SubmitJob { exclusive: true, ..base("exclusive") }));

    let mut failures = Vec::new();
    for (case, s) in cases {
        let name = s.name.clone().unwrap();
        let custom = s.stdout.is_some();
        let id = c.submit(s);
        let j = c.wait_done(id, 60);
        assert_eq!(j.state, Some(flotilla_proto::JobStateWire::Completed), "{case}: {j:?}");
        let file = if custom { format!("env-{name}-{id}.out") } else { format!("slurm-{id}.out") };
        let ours = std::fs::read_to_string(work.join(&file)).unwrap_or_else(|e| panic!("{case}: {file}: {e}"));
        let want = normalize(&golden_stdout(case).unwrap());
        let got = normalize(&ours);
        if want != got {
            failures.push(format!("{case}:\n  want: {want:?}\n  got:  {got:?}"));
        }
    }

    // Array tasks: `--array=0-1 -o arrenv-%A_%a.out env.sh`.
    let mut s = job(ENV_SH, &work);
    s.name = Some("env.sh".into());
    s.stdout = Some("arrenv-%A_%a.out".into());
    s.array = Some(ArraySpec {
        ranges: vec![ArrayRange { start: 0, end: 1, step: 1 }],
        max_running: None,
    });
    let aid = c.submit(s);
    assert!(wait_for(60, || {
        (0..2).all(|t| {
            std::fs::read_to_string(work.join(format!("arrenv-{aid}_{t}.out"))).is_ok_and(|s| s.contains("PWD="))
        })
    }), "array tasks did not finish\n{}", c.logs());
    for t in 0..2 {
        let ours = std::fs::read_to_string(work.join(format!("arrenv-{aid}_{t}.out"))).unwrap();
        let want = normalize(&golden_stdout(&format!("jobout_array_env_task{t}")).unwrap());
        let got = normalize(&ours);
        if want != got {
            failures.push(format!("array task {t}:\n  want: {want:?}\n  got:  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
