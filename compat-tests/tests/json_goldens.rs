//! `squeue --json/--yaml` and `sinfo --json/--yaml` against real Slurm 22.05.8's recordings
//! (`goldens-rest/v0.0.38/{squeue_json,squeue_yaml,sinfo_json}.json`, made by `record.sh` on
//! the reference cluster): the same three jobs as the recording (held; running with 2 GPUs
//! and 2 tasks; pending on `afterok` of the running one, then cancelled; the held one's
//! comment and time limit updated) are submitted as alice on a local cluster with the
//! reference configuration, and the commands' documents are compared with the goldens after
//! normalising times, job ids, uids and paths: the same keys in the same order, the same
//! JSON types, the same values, except the explicit allow-list below (each with its reason).
//! The JSON text itself is checked for json-c's pretty style (22.05's serializer). Needs root
//! (`FLOTILLA_TEST_ROOT=1`).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::wait_until;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Our command `name args` as alice in `cwd`: (exit code, stdout, stderr).
fn as_alice(c: &LocalCluster, name: &str, args: &[&str], cwd: &Path) -> (i32, String, String) {
    let bin = flotilla_compat_tests::bin_dir().join(name);
    let o = Command::new("runuser")
        .args(["-u", "alice", "--"])
        .arg(&bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", cwd)
        .env("TZ", "UTC")
        .envs(c.env())
        .output()
        .expect("command runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn golden(name: &str) -> Value {
    let p = flotilla_compat_tests::workspace_root().join("compat-tests/goldens-rest/v0.0.38").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).expect("golden")).expect("golden is JSON")
}

/// Keys whose non-zero value is a time of the recording.
const TIMES: &[&str] = &[
    "accrue_time",
    "eligible_time",
    "end_time",
    "last_sched_evaluation",
    "start_time",
    "submit_time",
    "boot_time",
    "last_busy",
    "slurmd_start_time",
];

/// The allow-list: (object, key, reason). Object: a job's name, a node's name, or `*` for
/// every object of the document. A listed key may differ in value (or be missing when the
/// reason says so); every other key must match.
const ALLOWED: &[(&str, &str, &str)] = &[
    // Jobs.
    ("*", "association_id", "Flotilla's job answer carries no association id (slurmdbd's id_assoc)"),
    ("*", "command", "the recording submitted through slurmrestd (no script file); sbatch gives the script's path"),
    ("*", "last_sched_evaluation", "Flotilla does not record when the scheduler last looked at a job"),
    ("runner", "priority", "22.05's priority/basic numbers (4294901759 counting down) are not Flotilla's priorities"),
    ("after", "priority", "as the runner's"),
    ("held", "max_nodes", "22.05 keeps the REST request's `nodes: 1` as max_nodes; JobInfo has no maximum"),
    ("runner", "job_resources", "missing: Flotilla does not build 22.05's per-socket core map"),
    ("after", "cpus", "22.05 writes null for a job never scheduled; Flotilla counts the CPUs asked"),
    ("after", "tasks", "as cpus"),
    ("after", "dependency", "22.05 keeps the unfulfilled dependency after the cancel"),
    ("after", "start_time", "22.05 sets start = end for a job cancelled while pending"),
    // Nodes.
    ("*", "architecture", "the recording host's"),
    ("*", "operating_system", "the recording host's kernel"),
    ("*", "cpu_load", "live load"),
    ("*", "free_memory", "live free memory"),
    ("*", "last_busy", "Flotilla does not record when a node was last busy"),
];

fn allowed(obj: &str, key: &str) -> bool {
    ALLOWED.iter().any(|(o, k, _)| (*o == "*" || *o == obj) && *k == key)
}

/// `v` with times, ids and paths normalised.
fn norm(key: &str, v: &Value, ids: &[(u64, u64)], work: &str) -> Value {
    match v {
        Value::Number(n) if TIMES.contains(&key) && n.as_i64() != Some(0) => Value::String("TIME".into()),
        Value::Number(n) if key == "job_id" => {
            let id = n.as_u64().unwrap_or(0);
            Value::from(ids.iter().find(|(o, _)| *o == id).map_or(id, |(_, g)| *g))
        }
        Value::String(s) if key == "current_working_directory" => Value::String(s.replace(work, "/home/alice")),
        Value::String(s) if key == "dependency" => {
            let mut s = s.clone();
            for (o, g) in ids {
                s = s.replace(&format!(":{o}"), &format!(":{g}"));
            }
            Value::String(s)
        }
        _ => v.clone(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Differences of one object (`ours` against `want`), allow-listed ones left out.
fn diff_object(obj: &str, ours: &Value, want: &Value, ids: &[(u64, u64)], work: &str, out: &mut Vec<String>) {
    let (Some(o), Some(w)) = (ours.as_object(), want.as_object()) else {
        out.push(format!("{obj}: not objects"));
        return;
    };
    for (k, wv) in w {
        let Some(ov) = o.get(k) else {
            if !allowed(obj, k) {
                out.push(format!("{obj}.{k}: missing (22.05: {wv})"));
            }
            continue;
        };
        let (on, wn) = (norm(k, ov, ids, work), norm(k, wv, &[], work));
        if allowed(obj, k) {
            if on == wn {
                eprintln!("allow-listed but equal: {obj}.{k}");
            }
            continue;
        }
        if kind(ov) != kind(wv) {
            out.push(format!("{obj}.{k}: type {} ours {on}, 22.05 {} {wn}", kind(ov), kind(wv)));
        } else if on != wn {
            out.push(format!("{obj}.{k}: ours {on}, 22.05 {wn}"));
        }
    }
    for k in o.keys() {
        if !w.contains_key(k) {
            out.push(format!("{obj}.{k}: not in 22.05's object"));
        }
    }
}

/// The keys of each item of the top-level list `list` in a JSON text written as json-c's
/// pretty printer writes it (items at indent 4, their keys at indent 6), in order.
fn json_item_keys(text: &str, list: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("  \"") {
            inside = line.starts_with(&format!("  \"{list}\": ["));
            continue;
        }
        if !inside {
            continue;
        }
        if line == "    {" {
            out.push(Vec::new());
        } else if let Some(rest) = line.strip_prefix("      \"") {
            if let Some((k, _)) = rest.split_once("\": ") {
                out.last_mut().expect("an item").push(k.to_string());
            }
        }
    }
    out
}

/// The keys of each item of the top-level sequence `list` in libyaml's tagged block YAML.
fn yaml_item_keys(text: &str, list: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("!!str ") {
            inside = rest.starts_with(&format!("{list}:"));
            continue;
        }
        if !inside {
            continue;
        }
        if line.starts_with("- !!map") {
            out.push(Vec::new());
        } else if let Some(rest) = line.strip_prefix("  !!str ") {
            if let Some((k, _)) = rest.split_once(':') {
                out.last_mut().expect("an item").push(k.to_string());
            }
        }
    }
    out
}

#[test]
fn squeue_and_sinfo_json_and_yaml_match_slurm_22_05() {
    if !flotilla_compat_tests::root_tests("submits jobs as alice (2001) on a local cluster with the reference configuration") {
        return;
    }
    flotilla_compat_tests::ensure_user("alice", 2001);
    flotilla_compat_tests::build_binaries();
    let conf = tempfile::tempdir().unwrap();
    let refconf = flotilla_compat_tests::shared_dir().join("slurm-reference/conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), conf.path().join(f)).unwrap();
    }
    flotilla_compat_tests::sh(&format!("chmod 755 {}", conf.path().display()));
    let c = LocalCluster::start_with(Some(conf.path()), |_| {});
    // The reference's association: alice in account research (its setup.sh).
    for args in [&["-i", "add", "account", "research"][..], &["-i", "add", "user", "alice", "account=research"][..]] {
        let o = c.run("sacctmgr", args, c.dir());
        assert!(o.status.success(), "sacctmgr {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    flotilla_compat_tests::sh(&format!("chmod 755 {}", c.dir().display()));
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    flotilla_compat_tests::sh(&format!("chmod 1777 {}", w.display()));
    std::fs::write(w.join("sleep.sh"), "#!/bin/bash\nsleep 300\n").unwrap();
    std::fs::write(w.join("true.sh"), "#!/bin/bash\ntrue\n").unwrap();
    let work = w.display().to_string();

    // The recording's three submissions (record.sh), through sbatch.
    let submit = |args: &[&str]| -> u64 {
        let mut a = vec!["--parsable"];
        a.extend_from_slice(args);
        let (rc, out, err) = as_alice(&c, "sbatch", &a, &w);
        assert_eq!(rc, 0, "sbatch {args:?}: {err}");
        out.trim().split(';').next().unwrap().parse().expect("job id")
    };
    let held = submit(&["-H", "-J", "held", "-N", "1", "-n", "1", "sleep.sh"]);
    let runner = submit(&["-J", "runner", "-p", "batch", "-n", "2", "--gpus=2", "-t", "30", "sleep.sh"]);
    let after = submit(&["-J", "after", &format!("--dependency=afterok:{runner}"), "true.sh"]);
    let ids = [(held, 1), (runner, 2), (after, 3)];
    let squeue_json = || {
        let (rc, out, err) = as_alice(&c, "squeue", &["--json"], &w);
        assert_eq!((rc, err.as_str()), (0, ""), "squeue --json");
        out
    };
    let state_of = |text: &str, id: u64| -> String {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        v["jobs"].as_array().and_then(|js| js.iter().find(|j| j["job_id"] == id)).map_or(String::new(), |j| j["job_state"].as_str().unwrap_or("").to_string())
    };
    wait_until("the runner RUNNING", Duration::from_secs(30), || state_of(&squeue_json(), runner) == "RUNNING", squeue_json);
    // The recording's update of job 1 and SIGKILL of job 3 (pending: a cancel).
    let (rc, _, err) = as_alice(&c, "scontrol", &["update", &format!("jobid={held}"), "comment=updated", "timelimit=20"], &w);
    assert_eq!(rc, 0, "scontrol update: {err}");
    let (rc, _, err) = as_alice(&c, "scancel", &[&after.to_string()], &w);
    assert_eq!(rc, 0, "scancel: {err}");
    wait_until("the dependent job CANCELLED", Duration::from_secs(30), || state_of(&squeue_json(), after) == "CANCELLED", squeue_json);

    let mut diffs = Vec::new();
    // squeue --json.
    let text = squeue_json();
    let keep = |name: &str, t: &str| {
        let _ = std::fs::write(std::env::temp_dir().join(format!("flotilla-json-goldens-{name}")), t);
    };
    keep("squeue.json", &text);
    assert!(text.starts_with("{\n  \"meta\": {\n    \"plugin\": {\n      \"type\": \"openapi\\/v0.0.38\",\n"), "json-c's pretty style:\n{text}");
    assert!(text.contains("\n  \"errors\": [\n  ],\n"), "json-c writes an empty array over two lines:\n{text}");
    assert!(!text.ends_with('\n'), "22.05 prints the document with no newline after it");
    let ours: Value = serde_json::from_str(&text).expect("squeue --json is JSON");
    let want = golden("squeue_json")["stdout"].clone();
    assert_eq!(ours["meta"], want["meta"]);
    assert_eq!(ours["errors"], want["errors"]);
    let ours_jobs = ours["jobs"].as_array().expect("jobs");
    let want_jobs = want["jobs"].as_array().expect("jobs");
    let mine: Vec<&Value> = ours_jobs.iter().filter(|j| ids.iter().any(|(o, _)| j["job_id"] == *o)).collect();
    assert_eq!(mine.len(), 3, "our three jobs in {text}");
    for wj in want_jobs {
        let name = wj["name"].as_str().unwrap();
        let oj = mine.iter().find(|j| j["name"] == name).unwrap_or_else(|| panic!("job {name} in {text}"));
        diff_object(name, oj, wj, &ids, &work, &mut diffs);
    }
    // Key order: 22.05's, as the YAML golden shows it (its JSON was re-sorted when recorded).
    let yaml_golden = golden("squeue_yaml")["stdout"].as_str().unwrap().to_string();
    let want_order = yaml_item_keys(&yaml_golden, "jobs");
    let ours_order = json_item_keys(&text, "jobs");
    assert_eq!(ours_order.len(), ours_jobs.len());
    for (i, wj) in want_jobs.iter().enumerate() {
        let name = wj["name"].as_str().unwrap();
        let at = ours_jobs.iter().position(|j| j["name"] == name).unwrap();
        let w: Vec<&String> = want_order[i].iter().filter(|k| ours_jobs[at].get(k.as_str()).is_some()).collect();
        let o: Vec<&String> = ours_order[at].iter().collect();
        assert_eq!(o, w, "key order of {name}");
    }

    // squeue --yaml: the same document, libyaml's text; its key order is the golden's.
    let (rc, yaml, err) = as_alice(&c, "squeue", &["--yaml"], &w);
    assert_eq!((rc, err.as_str()), (0, ""));
    keep("squeue.yaml", &yaml);
    assert!(yaml.starts_with("%YAML 1.1\n--- !!map\n!!str meta: !!map\n  !!str plugin: !!map\n    !!str type: !!str openapi/v0.0.38\n"), "{yaml}");
    let head_end = yaml_golden.find("!!str jobs:").unwrap();
    assert_eq!(&yaml[..yaml.find("!!str jobs:").unwrap()], &yaml_golden[..head_end], "meta and errors as 22.05's YAML");
    assert!(yaml.ends_with("\n...\n"), "libyaml's explicit document end");
    let yo = yaml_item_keys(&yaml, "jobs");
    assert_eq!(yo, ours_order, "the YAML holds the JSON's document");
    // The held job's lines as 22.05 writes them (times, ids, paths normalised), allow-listed
    // keys left out.
    let held_lines = |y: &str| -> Vec<String> {
        let block = y.split("\n- !!map\n").find(|b| b.contains("\n  !!str name: !!str held\n")).expect("the held job");
        block
            .lines()
            .take_while(|l| !l.starts_with("!!str "))
            .filter(|l| {
                let k = l.trim_start().strip_prefix("!!str ").and_then(|r| r.split_once(':')).map_or("", |(k, _)| k);
                !allowed("held", k) && !TIMES.contains(&k) && k != "job_id"
            })
            .map(|l| l.replace(&work, "/home/alice"))
            .collect()
    };
    let (ours_held, want_held) = (held_lines(&yaml), held_lines(&yaml_golden));
    for (o, w) in ours_held.iter().zip(&want_held) {
        if o != w {
            diffs.push(format!("held YAML: ours {o:?}, 22.05 {w:?}"));
        }
    }
    assert_eq!(ours_held.len(), want_held.len(), "held job's YAML lines:\n{}\n---\n{}", ours_held.join("\n"), want_held.join("\n"));

    // sinfo --json and --yaml.
    let (rc, text, err) = as_alice(&c, "sinfo", &["--json"], &w);
    assert_eq!((rc, err.as_str()), (0, ""));
    keep("sinfo.json", &text);
    let ours: Value = serde_json::from_str(&text).expect("sinfo --json is JSON");
    let want = golden("sinfo_json")["stdout"].clone();
    assert_eq!(ours["meta"], want["meta"]);
    assert_eq!(ours["errors"], want["errors"]);
    let on = ours["nodes"].as_array().expect("nodes");
    let wn = want["nodes"].as_array().expect("nodes");
    assert_eq!(on.len(), wn.len(), "{text}");
    for (o, w) in on.iter().zip(wn) {
        let name = w["name"].as_str().unwrap();
        assert_eq!(o["name"], w["name"]);
        diff_object(name, o, w, &[], &work, &mut diffs);
    }
    let (rc, yaml, err) = as_alice(&c, "sinfo", &["--yaml"], &w);
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(yaml_item_keys(&yaml, "nodes"), json_item_keys(&text, "nodes"), "sinfo's YAML holds its JSON's document");
    // 22.05 ignores every other option with --json.
    let (rc, filtered, _) = as_alice(&c, "sinfo", &["--json", "-p", "debug", "-N"], &w);
    assert_eq!(rc, 0);
    let f: Value = serde_json::from_str(&filtered).unwrap();
    assert_eq!(f["nodes"].as_array().map(Vec::len), Some(wn.len()), "-p does not filter --json");

    // Flotilla's extensions (22.05's scontrol, sdiag and sshare reject --json: the goldens
    // scontrol_show_*_json, sdiag_json, sshare_json record "unrecognized option").
    for g in ["scontrol_show_job_json", "scontrol_show_node_json", "scontrol_show_partition_json", "sdiag_json", "sshare_json"] {
        let g = golden(g);
        assert_eq!(g["exit_code"], 1);
        assert!(g["stderr"].as_str().unwrap().contains("unrecognized option '--json'"));
    }
    // scontrol --json show job: the same object as squeue's.
    let (rc, text, err) = as_alice(&c, "scontrol", &["--json", "show", "job", &runner.to_string()], &w);
    assert_eq!((rc, err.as_str()), (0, ""), "{text}");
    let one: Value = serde_json::from_str(&text).expect("scontrol --json is JSON");
    let all: Value = serde_json::from_str(&squeue_json()).unwrap();
    let from_squeue = all["jobs"].as_array().unwrap().iter().find(|j| j["job_id"] == runner).unwrap().clone();
    let mut d = Vec::new();
    diff_object("runner", &one["jobs"][0], &from_squeue, &[], &work, &mut d);
    assert!(d.is_empty(), "scontrol show job vs squeue: {d:?}");
    let (rc, text, _) = as_alice(&c, "scontrol", &["--yaml", "show", "job", "999999"], &w);
    assert_eq!(rc, 1, "an unknown job");
    assert!(text.contains("!!str error: !!str Invalid job id specified\n"), "{text}");
    // show node: sinfo's object; show partition: slurmrestd 22.05's /partition/batch answer.
    let (rc, text, _) = as_alice(&c, "scontrol", &["--json", "show", "node", "gpu01"], &w);
    assert_eq!(rc, 0, "{text}");
    let node: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(node["nodes"].as_array().map(Vec::len), Some(1));
    let mut d = Vec::new();
    diff_object("gpu01", &node["nodes"][0], &wn[0], &[], &work, &mut d);
    assert!(d.is_empty(), "scontrol show node gpu01 vs 22.05's: {d:?}");
    let (rc, text, _) = as_alice(&c, "scontrol", &["--json", "show", "partition", "batch"], &w);
    assert_eq!(rc, 0, "{text}");
    let part: Value = serde_json::from_str(&text).unwrap();
    let want = golden("partition_batch")["response"].clone();
    assert_eq!(part["meta"], want["meta"]);
    let mut d = Vec::new();
    diff_object("batch", &part["partitions"][0], &want["partitions"][0], &[], &work, &mut d);
    // (22.05's preemption_mode is PreemptMode's words; Flotilla's partition answer has none.)
    d.retain(|x| !x.starts_with("batch.preemption_mode"));
    assert!(d.is_empty(), "scontrol show partition batch vs 22.05's /partition/batch: {d:?}");
    // sdiag --json: v0.0.38's diag answer's keys (the golden diag.json).
    let (rc, text, _) = as_alice(&c, "sdiag", &["--json"], &w);
    assert_eq!(rc, 0, "{text}");
    let diag: Value = serde_json::from_str(&text).unwrap();
    let want = golden("diag")["response"].clone();
    assert_eq!(diag["meta"], want["meta"]);
    for k in diag["statistics"].as_object().unwrap().keys() {
        assert!(want["statistics"].get(k).is_some(), "sdiag --json's {k} is not 22.05's");
    }
    // sshare --json: Flotilla's document of sshare's rows.
    let (rc, text, _) = as_alice(&c, "sshare", &["--json"], &w);
    assert_eq!(rc, 0, "{text}");
    let sh: Value = serde_json::from_str(&text).unwrap();
    assert!(sh["shares"].as_array().unwrap().iter().any(|r| r["user"] == "alice" && r["account"] == "research"), "{text}");

    assert!(diffs.is_empty(), "{} differences from Slurm 22.05's documents:\n{}", diffs.len(), diffs.join("\n"));
}
