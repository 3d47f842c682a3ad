#!/usr/bin/env python3
"""Record golden outputs of real Slurm 22.05's accounting commands (sacctmgr, sshare, sprio,
sdiag, sstat, sacct's usage fields) and of the Prometheus exporters' command lines against the
reference cluster of shared/slurm-reference (Slurm 22.05.8 + slurmdbd + MariaDB, Debian 12).

Run as root right after `shared/slurm-reference/setup.sh --fresh` (job ids then start at 1):

    sudo python3 -B compat-tests/goldens/accounting/capture.py [--out DIR]

The case format is the one of shared/slurm-reference/capture_goldens.py (README.md there,
"Golden file format"): NNNN_<case>.json (case, seq, cmd, template, ids, argv, user, env, cwd,
stdin, exit_code, stdout, stderr, note, captured_at) and its readable NNNN_<case>.txt twin, plus
INDEX.md, index.tsv and jobids.json, so that the loaders of compat-tests and normalize.py read
them unchanged.  Every case also carries `phase` (1 or 2, below).  Commands run with
`bash -c` under `env -i PATH HOME USER LOGNAME SHELL LANG=C.UTF-8 TZ=UTC`, as alice, bob or
root, stdin /dev/null unless the case gives one (never a terminal).

Two phases, each with its own slurm.conf (both copied next to the goldens as
conf-phase1/ and conf-phase2/):

1. The reference as setup.sh leaves it: priority/basic, AccountingStorageEnforce=none.
   sacctmgr (add/modify/delete/show/list of cluster, account, user, association, qos; where/set,
   format=, -n/-p/-P/--parsable2/-i, the commit prompt answered "n" and "y", show assoc tree,
   errors, permissions as alice), sprio's and sshare's behaviour under priority/basic, sdiag and
   sdiag --reset.
2. slurm.conf plus the lines in PHASE2_LINES (AccountingStorageEnforce=associations,limits,qos,
   safe; PriorityType=priority/multifactor with weights, PriorityCalcPeriod=1), slurmctld
   restarted on it (its pid record in /run/slurm-oracle is updated so teardown.sh stops it).
   Enforcement as users see it (sbatch errors, squeue/scontrol pending reasons), sshare, sprio,
   sstat on running jobs, sacct's usage fields, sdiag of a busy controller, and the exporters'
   exact command lines (EXPORTERS.md).

The accounting figures of the benchmark (10,000 users) are measured by bench.py, not here.
"""
import json, os, pwd, re, shutil, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
GOLD = HERE
if "--out" in sys.argv[1:]:
    GOLD = os.path.abspath(sys.argv[sys.argv.index("--out") + 1])
CONF_DIR = "/etc/slurm"
CONF_FILES = ("slurm.conf", "gres.conf", "topology.conf", "slurmdbd.conf")
RUN_DIR = "/run/slurm-oracle"            # setup.sh's pid records (teardown.sh reads them)
LOG_DIR = "/var/log/slurm"
HOMES = {u: pwd.getpwnam(u).pw_dir for u in ("alice", "bob")}
AW = os.path.join(HOMES["alice"], "g")
BW = os.path.join(HOMES["bob"], "g")
ROOT_DIR = "/"
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

# Added to slurm.conf for phase 2 (see the module doc).
PHASE2_LINES = """\
# phase 2 of compat-tests/goldens/accounting/capture.py
AccountingStorageEnforce=associations,limits,qos,safe
PriorityType=priority/multifactor
PriorityCalcPeriod=1
PriorityDecayHalfLife=7-0
PriorityMaxAge=7-0
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=1000
PriorityWeightPartition=1000
PriorityWeightQOS=1000
PriorityWeightTRES=CPU=1000,Mem=2000,GRES/gpu=3000
"""

SCRIPTS = {
    "sleep.sh": "#!/bin/bash\nsleep ${1:-600}\n",
    # burns ~2 s of CPU in one process and holds ~200 MB, then exits 0
    "burn.sh": "#!/bin/bash\npython3 -c 'import time\nb=bytearray(200*1024*1024)\n"
               "for i in range(0,len(b),4096): b[i]=1\nt=time.time()\nwhile time.time()-t<2: pass'\n",
    "steps.sh": "#!/bin/bash\nsrun sleep 600\n",
}

N = [0]
INDEX = []
J = {}
PHASE = [1]


def user_env(user):
    home = ROOT_DIR if user == "root" else HOMES[user]
    return {"PATH": PATH, "HOME": home, "USER": user, "LOGNAME": user,
            "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TZ": "UTC"}


def make_argv(cmd, user):
    argv = ["env", "-i"] + ["%s=%s" % kv for kv in user_env(user).items()] + ["/bin/bash", "-c", cmd]
    if user != "root":
        argv = ["runuser", "-u", user, "--"] + argv
    return argv


def raw(cmd, user="root", cwd=None, stdin=None, timeout=300):
    cwd = cwd or (AW if user == "alice" else BW if user == "bob" else ROOT_DIR)
    p = subprocess.run(make_argv(cmd, user), cwd=cwd, input=stdin,
                       stdin=None if stdin is not None else subprocess.DEVNULL,
                       capture_output=True, timeout=timeout)
    dec = lambda b: b.decode("utf-8", "backslashreplace")
    return p.returncode, dec(p.stdout), dec(p.stderr), cwd


def case(name, template, user="root", cwd=None, stdin=None, note=""):
    cmd = template.format(**J)
    ids = {k: J[k] for k in re.findall(r"\{(\w+)\}", template)}
    rc, out, err, cwd = raw(cmd, user, cwd, stdin.encode() if isinstance(stdin, str) else stdin)
    N[0] += 1
    base = "%04d_%s" % (N[0], re.sub(r"[^A-Za-z0-9_.-]+", "_", name))
    rec = {"case": name, "seq": N[0], "cmd": cmd, "template": template, "ids": ids,
           "argv": make_argv(cmd, user), "user": user, "env": user_env(user), "cwd": cwd,
           "stdin": stdin, "exit_code": rc, "stdout": out, "stderr": err, "note": note,
           "phase": PHASE[0], "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(os.path.join(GOLD, base + ".json"), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    with open(os.path.join(GOLD, base + ".txt"), "w") as f:
        f.write("### case: %s\n### user: %s\n### cwd: %s\n### phase: %d\n### command:\n%s\n"
                % (name, user, cwd, PHASE[0], cmd))
        if stdin is not None:
            f.write("### stdin:\n%s\n" % stdin)
        if note:
            f.write("### note: %s\n" % note)
        f.write("### exit_code: %d\n### stdout (%d bytes):\n%s" % (rc, len(out), out))
        f.write("### stderr (%d bytes):\n%s" % (len(err), err))
        f.write("### end\n")
    INDEX.append((base, user, rc, cmd, note))
    first = (out + err).strip().splitlines()[0][:70] if (out + err).strip() else ""
    print("%-55s rc=%d %s" % (base, rc, first), flush=True)
    return rc, out, err


def submit(sym, template, user="alice", note=""):
    """a submission case whose printed job id becomes the symbol `sym`"""
    rc, out, err = case("sbatch_" + sym, template, user=user, note=note)
    m = re.search(r"(\d+)", out)
    if m:
        J[sym] = m.group(1)
    return rc, out, err


def root(cmd):
    """a setup step that is not a case (its output is checked only for success)"""
    rc, out, err, _ = raw(cmd, "root")
    if rc != 0:
        print("WARN: setup step failed (rc=%d): %s\n%s%s" % (rc, cmd, out, err), file=sys.stderr)
    return rc, out


def state_of(j):
    _, out, _, _ = raw("squeue -h -j %s -o %%T 2>/dev/null" % j)
    return out.strip() or "GONE"


def wait_state(j, states, timeout=90):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if state_of(j) in states:
            return True
        time.sleep(0.5)
    print("WARN: job %s not in %s (is %s)" % (j, states, state_of(j)), file=sys.stderr)
    return False


def wait_reason(j, want, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        _, out, _, _ = raw("squeue -h -j %s -o %%r" % j)
        if out.strip() == want:
            return True
        time.sleep(1)
    print("WARN: job %s reason is not %s" % (j, want), file=sys.stderr)
    return False


def wait_gone(ids, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        _, out, _, _ = raw("squeue -h -o %A")
        if not set(out.split()).intersection(str(i) for i in ids):
            return True
        time.sleep(0.5)
    print("WARN: jobs %s still queued" % ids, file=sys.stderr)
    return False


def cancel_all():
    raw("squeue -h -o %A | sort -u | xargs -r scancel")
    t0 = time.time()
    while time.time() - t0 < 90:
        _, out, _, _ = raw("squeue -h -o %A")
        if not out.strip():
            return
        time.sleep(0.5)


def copy_conf(dest):
    os.makedirs(dest, exist_ok=True)
    for fn in CONF_FILES:
        src = os.path.join(CONF_DIR, fn)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(dest, fn))
            os.chmod(os.path.join(dest, fn), 0o644)
    if os.path.exists(os.path.join(dest, "slurmdbd.conf")):
        with open(os.path.join(dest, "slurmdbd.conf")) as f:
            text = f.read()
        with open(os.path.join(dest, "slurmdbd.conf"), "w") as f:
            f.write(re.sub(r"(?m)^StoragePass=.*$", "StoragePass=<redacted>", text))


def restart_slurmctld():
    """stop the slurmctld setup.sh started (its pid record) and start it again on the current
    slurm.conf, keeping its state; the new pid goes into the same record for teardown.sh"""
    rec = os.path.join(RUN_DIR, "slurmctld.pid")
    with open(rec) as f:
        pid = int(f.read().strip())
    with open("/proc/%d/comm" % pid) as f:
        assert f.read().strip() == "slurmctld", "pid record does not name slurmctld"
    os.kill(pid, 15)
    for _ in range(300):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.1)
    if os.path.exists("/run/slurmctld.pid"):
        os.remove("/run/slurmctld.pid")
    with open(os.path.join(LOG_DIR, "slurmctld.stdout"), "ab") as log:
        subprocess.Popen(["setsid", "/usr/sbin/slurmctld", "-D"], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True)
    for _ in range(300):
        if os.path.exists("/run/slurmctld.pid") and os.path.getsize("/run/slurmctld.pid") > 0:
            break
        time.sleep(0.1)
    with open("/run/slurmctld.pid") as f:
        newpid = f.read().strip()
    with open(rec, "w") as f:
        f.write(newpid + "\n")
    for _ in range(120):
        rc, out, _, _ = raw("scontrol ping")
        if rc == 0 and "UP" in out:
            break
        time.sleep(0.5)
    for _ in range(120):   # nodes back to idle
        _, out, _, _ = raw("sinfo -h -N -p batch -o %t | sort -u")
        if out.split() in (["idle"],):
            return
        time.sleep(1)
    print("WARN: nodes not idle after the restart", file=sys.stderr)


def phase1():
    # ---- versions, help, basic display of what setup.sh registered
    case("version_sacctmgr", "sacctmgr --version")
    case("version_sshare", "sshare --version")
    case("version_sprio", "sprio --version")
    case("version_sdiag", "sdiag --version")
    case("version_sstat", "sstat --version")
    case("sacctmgr_list_cluster", "sacctmgr list cluster")
    case("sacctmgr_show_cluster_P_format", "sacctmgr show cluster -P format=Cluster,ControlHost,ControlPort,RPC")
    case("sacctmgr_show_account", "sacctmgr show account")
    case("sacctmgr_list_account_P", "sacctmgr list account -P")
    case("sacctmgr_show_account_withassoc", "sacctmgr show account withassoc")
    case("sacctmgr_show_user", "sacctmgr show user")
    case("sacctmgr_show_user_withassoc_p", "sacctmgr show user withassoc -p")
    case("sacctmgr_show_user_s", "sacctmgr show user -s alice")
    case("sacctmgr_show_assoc", "sacctmgr show assoc")
    case("sacctmgr_list_associations_n", "sacctmgr -n list associations")
    case("sacctmgr_show_assoc_parsable2", "sacctmgr show assoc --parsable2")
    case("sacctmgr_show_assoc_tree", "sacctmgr show assoc tree format=Account,User,Share")
    case("sacctmgr_show_assoc_where_user", "sacctmgr show assoc where user=alice format=Cluster,Account,User,Partition,Share,QOS,DefaultQOS")
    case("sacctmgr_show_qos", "sacctmgr show qos")
    case("sacctmgr_show_qos_P", "sacctmgr show qos -P")
    case("sacctmgr_show_qos_format", "sacctmgr show qos format=Name,Priority,Preempt,PreemptMode,Flags,MaxTRESPU,MaxSubmitPU")
    case("sacctmgr_show_config", "sacctmgr show configuration | grep -v -e Time -e Host= -e 'Slurm Configuration' -e PluginDir")
    case("sacctmgr_show_stats_as_alice", "sacctmgr show stats | head -3", user="alice")
    # ---- add account: with -i, the prompt answered n and y, duplicate, parent, bad parent
    case("sacctmgr_add_account_i", "sacctmgr -i add account physics Description=physics Organization=science")
    case("sacctmgr_add_account_prompt_n", "sacctmgr add account chem Description=chemistry Organization=science",
         stdin="n\n", note="the commit prompt, answered n: nothing added")
    case("sacctmgr_show_account_after_n", "sacctmgr -n -P list account format=Account")
    case("sacctmgr_add_account_prompt_y", "sacctmgr add account chem Description=chemistry Organization=science",
         stdin="y\n", note="the commit prompt, answered y")
    # (no case with the prompt on an empty stdin: 22.05's commit_check takes EOF for an answer
    # other than y/n and prints "Y or N please" without end)
    case("sacctmgr_add_account_duplicate", "sacctmgr -i add account physics")
    case("sacctmgr_add_account_parent", "sacctmgr -i add account ml parent=physics Description=ml Organization=science")
    case("sacctmgr_add_account_bad_parent", "sacctmgr -i add account ghost parent=nosuchparent")
    case("sacctmgr_add_account_no_name", "sacctmgr -i add account")
    case("sacctmgr_add_account_cluster_unknown", "sacctmgr -i add account x1 cluster=nosuchcluster")
    case("sacctmgr_show_assoc_tree_after", "sacctmgr show assoc tree format=Cluster,Account,User,Share")
    case("sacctmgr_list_account_format", "sacctmgr list account format=Account,Descr,Org -P")
    # ---- add user
    case("sacctmgr_add_user_i", "sacctmgr -i add user alice account=physics")
    case("sacctmgr_add_user_two", "sacctmgr -i add user bob,carol account=chem")
    case("sacctmgr_add_user_default_account", "sacctmgr -i add user dave DefaultAccount=ml")
    case("sacctmgr_add_user_unknown_account", "sacctmgr -i add user erin account=nosuchacct")
    case("sacctmgr_add_user_no_account", "sacctmgr -i add user frank")
    case("sacctmgr_add_user_duplicate", "sacctmgr -i add user alice account=physics")
    case("sacctmgr_add_user_prompt_n", "sacctmgr add user gina account=physics", stdin="n\n")
    case("sacctmgr_add_user_partition", "sacctmgr -i add user bob account=research partition=debug")
    case("sacctmgr_show_user_after", "sacctmgr show user format=User,DefaultAccount,Admin -P")
    case("sacctmgr_show_assoc_after_users", "sacctmgr show assoc format=Account,User,Partition -P")
    # ---- modify: limits on accounts and users, where/set, prompt
    case("sacctmgr_modify_account_limits", "sacctmgr -i modify account research set GrpTRES=gres/gpu=16 GrpJobs=10 GrpSubmit=20 MaxJobs=4 MaxSubmitJobs=8 MaxTRESPerJob=cpu=32 MaxWall=1-00:00:00 Priority=10 Fairshare=50")
    case("sacctmgr_modify_account_where", "sacctmgr -i modify account where name=physics set GrpTRES=gres/gpu=8,cpu=64")
    case("sacctmgr_modify_account_prompt_n", "sacctmgr modify account chem set GrpJobs=3", stdin="n\n")
    case("sacctmgr_modify_account_prompt_y", "sacctmgr modify account chem set GrpJobs=3", stdin="y\n")
    case("sacctmgr_modify_user_where_account", "sacctmgr -i modify user where name=alice account=research set MaxJobs=2 MaxSubmitJobs=6 GrpTRES=gres/gpu=8")
    case("sacctmgr_modify_user_default_account", "sacctmgr -i modify user alice set DefaultAccount=physics")
    case("sacctmgr_modify_user_default_account_bad", "sacctmgr -i modify user bob set DefaultAccount=physics")
    case("sacctmgr_modify_user_nonexistent", "sacctmgr -i modify user nosuchuser set MaxJobs=1")
    case("sacctmgr_modify_account_unknown", "sacctmgr -i modify account nosuchacct set GrpJobs=1")
    case("sacctmgr_modify_no_set", "sacctmgr -i modify account research")
    case("sacctmgr_modify_bad_limit_value", "sacctmgr -i modify account research set GrpJobs=abc")
    case("sacctmgr_modify_bad_field", "sacctmgr -i modify account research set NoSuchLimit=3")
    case("sacctmgr_modify_clear_limit", "sacctmgr -i modify account chem set GrpJobs=-1")
    case("sacctmgr_modify_user_adminlevel", "sacctmgr -i modify user bob set AdminLevel=Operator")
    case("sacctmgr_show_assoc_limits", "sacctmgr show assoc format=Account,User,Fairshare,Priority,GrpJobs,GrpSubmit,GrpTRES,MaxJobs,MaxSubmit,MaxTRES,MaxWall -P")
    case("sacctmgr_show_assoc_limits_table", "sacctmgr show assoc format=Account,User,Fairshare,GrpJobs,GrpTRES,MaxJobs,MaxSubmit,MaxWall")
    case("sacctmgr_show_assoc_rivosinc", "sacctmgr show assoc format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit --noheader --parsable2",
         note="rivosinc prometheus-slurm-exporter limits collector")
    case("sacctmgr_show_assoc_p", "sacctmgr show assoc format=Account,User,GrpTRES -p")
    case("sacctmgr_show_assoc_bad_field", "sacctmgr show assoc format=NoSuchField")
    case("sacctmgr_show_assoc_where_account", "sacctmgr show assoc where account=research format=Account,User,MaxJobs,GrpTRES -P -n")
    case("sacctmgr_show_assoc_where_unknown", "sacctmgr show assoc where account=nosuchacct -P")
    case("sacctmgr_show_user_withassoc_where", "sacctmgr show user alice withassoc format=User,DefaultAccount,Account,MaxJobs -P")
    # ---- qos
    case("sacctmgr_add_qos_i", "sacctmgr -i add qos low Priority=0")
    case("sacctmgr_add_qos_high", "sacctmgr -i add qos high Priority=100 Preempt=low PreemptMode=requeue")
    case("sacctmgr_add_qos_duplicate", "sacctmgr -i add qos low")
    case("sacctmgr_modify_qos", "sacctmgr -i modify qos high set PreemptExemptTime=00:05:00 Flags=DenyOnLimit MaxTRESPerUser=gres/gpu=4 MaxSubmitJobsPerUser=2 MaxWall=02:00:00")
    case("sacctmgr_modify_qos_bad_preempt", "sacctmgr -i modify qos high set Preempt=nosuchqos")
    case("sacctmgr_modify_qos_bad_mode", "sacctmgr -i modify qos high set PreemptMode=bogus")
    case("sacctmgr_modify_qos_bad_flag", "sacctmgr -i modify qos high set Flags=NoSuchFlag")
    case("sacctmgr_show_qos_after", "sacctmgr show qos format=Name,Priority,Preempt,PreemptMode,PreemptExemptTime,Flags,MaxTRESPU,MaxSubmitPU,MaxWall -P")
    case("sacctmgr_show_qos_table", "sacctmgr show qos format=Name,Priority,Preempt,PreemptMode,Flags,MaxTRESPU,MaxSubmitPU")
    case("sacctmgr_modify_user_qos_add", "sacctmgr -i modify user alice set qos+=high")
    case("sacctmgr_modify_user_qos_unknown", "sacctmgr -i modify user alice set qos+=nosuchqos")
    case("sacctmgr_show_assoc_qos", "sacctmgr show assoc where user=alice format=Account,User,QOS -P")
    # ---- cluster
    case("sacctmgr_add_cluster", "sacctmgr -i add cluster othercl")
    case("sacctmgr_add_cluster_duplicate", "sacctmgr -i add cluster othercl")
    case("sacctmgr_show_cluster_format", "sacctmgr show cluster format=Cluster -P -n")
    case("sacctmgr_delete_cluster", "sacctmgr -i delete cluster othercl")
    case("sacctmgr_delete_cluster_unknown", "sacctmgr -i delete cluster othercl")
    # ---- permissions: non-admins may show, nothing else
    case("sacctmgr_alice_show_assoc", "sacctmgr show assoc format=Account,User -P", user="alice")
    case("sacctmgr_alice_modify", "sacctmgr -i modify account research set GrpJobs=1", user="alice")
    case("sacctmgr_alice_add_account", "sacctmgr -i add account alicesown", user="alice")
    case("sacctmgr_alice_delete_user", "sacctmgr -i delete user bob", user="alice")
    case("sacctmgr_alice_add_qos", "sacctmgr -i add qos aliceq", user="alice")
    case("sacctmgr_bob_operator_add_account", "sacctmgr -i add account opsacct", user="bob",
         note="bob has AdminLevel=Operator")
    # ---- delete
    case("sacctmgr_delete_account_children", "sacctmgr -i delete account physics")
    case("sacctmgr_show_assoc_tree_after_parent_delete", "sacctmgr show assoc tree format=Account,User,Share -P")
    case("sacctmgr_show_user_after_parent_delete", "sacctmgr show user format=User,DefaultAccount -P")
    case("sacctmgr_delete_user_from_account", "sacctmgr -i delete user carol where account=chem")
    case("sacctmgr_delete_account_leaf", "sacctmgr -i delete account ml")
    case("sacctmgr_delete_account_unknown", "sacctmgr -i delete account nosuchacct")
    case("sacctmgr_delete_account_prompt_n", "sacctmgr delete account opsacct", stdin="n\n")
    case("sacctmgr_delete_account_prompt_y", "sacctmgr delete account opsacct", stdin="y\n")
    case("sacctmgr_delete_user_nonexistent", "sacctmgr -i delete user nosuchuser")
    case("sacctmgr_delete_qos_unknown", "sacctmgr -i delete qos nosuchqos")
    case("sacctmgr_show_assoc_tree_final1", "sacctmgr show assoc tree format=Account,User,Partition,Share,GrpJobs,MaxJobs")
    # ---- bad commands and options
    case("sacctmgr_bad_option", "sacctmgr --bogus")
    case("sacctmgr_bad_command", "sacctmgr frobnicate")
    case("sacctmgr_show_bad_entity", "sacctmgr show nosuchentity")
    case("sacctmgr_add_bad_entity", "sacctmgr -i add nosuchentity x")
    case("sacctmgr_no_args", "sacctmgr")
    # ---- sprio / sshare under priority/basic
    case("sprio_basic", "sprio")
    case("sshare_basic", "sshare")
    case("sshare_basic_a", "sshare -a")
    # ---- sdiag
    case("sdiag_idle", "sdiag")
    case("sdiag_alice", "sdiag", user="alice")
    case("sdiag_reset_alice", "sdiag --reset", user="alice")
    case("sdiag_reset_root", "sdiag --reset")
    case("sdiag_after_reset", "sdiag")
    case("sdiag_r_root", "sdiag -r")
    case("sdiag_help", "sdiag --help")
    case("sdiag_bad_option", "sdiag --bogus")
    case("sdiag_sort_by_time", "sdiag -t")
    case("sdiag_json", "sdiag --json", note="rivosinc prometheus-slurm-exporter default")


def phase2():
    # ---- accounts/qos for the enforcement cases (setup steps, not cases)
    setup = [
        "sacctmgr -i add account gpuq Description=gpuq Organization=test GrpTRES=gres/gpu=8",
        "sacctmgr -i add account mj Description=mj Organization=test MaxJobs=1",
        "sacctmgr -i add account gj Description=gj Organization=test GrpJobs=1",
        "sacctmgr -i add account ms Description=ms Organization=test MaxSubmitJobs=1",
        "sacctmgr -i add qos qsub MaxSubmitJobsPerUser=1",
        "sacctmgr -i add qos qwall MaxWall=00:10:00",
        "sacctmgr -i add user alice account=gpuq,mj,gj,ms",
        "sacctmgr -i modify user alice set qos+=qsub,qwall",
        # alice's own research limits of phase 1 cleared (the account's still apply), and
        # research her default again (phase 1 deleted physics, her default then)
        "sacctmgr -i modify user alice where account=research set MaxJobs=-1 MaxSubmitJobs=-1 GrpTRES=gres/gpu=-1",
        "sacctmgr -i modify user alice set DefaultAccount=research",
    ]
    # the replay (compat-tests/tests/accounting_goldens.rs) runs the same steps
    with open(os.path.join(GOLD, "phase2-setup.txt"), "w") as f:
        f.write("# phase 2 setup steps of capture.py, run as root before its cases (not cases)\n")
        f.write("".join(c + "\n" for c in setup if not c.startswith("#")))
    for cmd in setup:
        root(cmd)
    case("sacctmgr_show_assoc_enforce_setup", "sacctmgr show assoc where user=alice format=Account,User,GrpJobs,GrpTRES,MaxJobs,MaxSubmit,QOS -P")
    case("scontrol_show_config_enforce", "scontrol show config | grep -E '^(AccountingStorageEnforce|PriorityType|PriorityWeight|PriorityCalcPeriod|PriorityDecayHalfLife)'")
    # ---- submission errors
    case("sbatch_bad_account", "sbatch -A nosuchacct --wrap 'sleep 1'", user="alice")
    case("sbatch_account_not_member", "sbatch -A gpuq --wrap 'sleep 1'", user="bob")
    case("sbatch_bad_qos", "sbatch --qos=nosuchqos --wrap 'sleep 1'", user="alice")
    case("sbatch_qos_not_allowed", "sbatch --qos=qsub --wrap 'sleep 1'", user="bob")
    submit("MS1", "sbatch -A ms -t 30 --parsable sleep.sh")
    case("sbatch_over_max_submit", "sbatch -A ms -t 30 sleep.sh", user="alice")
    submit("QS1", "sbatch --qos=qsub -t 30 --parsable sleep.sh")
    case("sbatch_over_qos_max_submit_per_user", "sbatch --qos=qsub -t 30 sleep.sh", user="alice")
    case("srun_bad_account", "srun -A nosuchacct true", user="alice")
    # ---- pending reasons
    submit("G1", "sbatch -A gpuq --gres=gpu:8 -t 30 --parsable sleep.sh")
    wait_state(J["G1"], ("RUNNING",))
    submit("G2", "sbatch -A gpuq --gres=gpu:1 -t 30 --parsable sleep.sh")
    submit("MJ1", "sbatch -A mj -t 30 --parsable sleep.sh")
    wait_state(J["MJ1"], ("RUNNING",))
    submit("MJ2", "sbatch -A mj -t 30 --parsable sleep.sh")
    submit("GJ1", "sbatch -A gj -t 30 --parsable sleep.sh")
    wait_state(J["GJ1"], ("RUNNING",))
    submit("GJ2", "sbatch -A gj -t 30 --parsable sleep.sh")
    submit("QW1", "sbatch --qos=qwall -t 20 --parsable sleep.sh")
    for sym, want in (("G2", "AssocGrpGRES"), ("MJ2", "AssocMaxJobsLimit"),
                      ("GJ2", "AssocGrpJobsLimit"), ("QW1", "QOSMaxWallDurationPerJobLimit")):
        wait_reason(J[sym], want)
    case("squeue_reasons", "squeue --sort=i -o '%.6i %.9P %.8u %.8a %.8q %.8T %r'")
    case("squeue_reason_grp_gres", "squeue -h -j {G2} -o '%i %T %r'")
    case("squeue_reason_max_jobs", "squeue -h -j {MJ2} -o '%i %T %r'")
    case("squeue_reason_grp_jobs", "squeue -h -j {GJ2} -o '%i %T %r'")
    case("squeue_reason_qos_max_wall", "squeue -h -j {QW1} -o '%i %T %r'")
    case("scontrol_show_job_grp_gres", "scontrol show job {G2} | grep -E 'JobState|Account'")
    case("squeue_l_pending", "squeue -l -t PD --sort=i | tail -n +2")
    # ---- sshare / sprio with priority/multifactor
    case("sprio", "sprio")
    case("sprio_l", "sprio -l")
    case("sprio_n", "sprio -n")
    case("sprio_w", "sprio -w")
    case("sprio_o_priority", "sprio -o '%.15i %.10Y'")
    case("sprio_o_factors", "sprio -o '%.15i %.8u %.10Y %.10A %.10F %.10J %.10P %.10Q %.20T'")
    case("sprio_j", "sprio -j {G2}")
    case("sprio_u", "sprio -u alice")
    case("sprio_h", "sprio -h")
    case("sprio_alice", "sprio", user="alice")
    case("sprio_bad_option", "sprio --bogus")
    case("sprio_bad_job", "sprio -j 999999")
    case("sshare", "sshare")
    case("sshare_a", "sshare -a")
    case("sshare_l", "sshare -l")
    case("sshare_A_research", "sshare -A research")
    case("sshare_u_alice", "sshare -u alice")
    case("sshare_vpenso", "sshare -n -P -o account,fairshare", note="vpenso prometheus-slurm-exporter")
    case("sshare_P", "sshare -P")
    case("sshare_a_P", "sshare -a -P")
    case("sshare_alice", "sshare", user="alice")
    case("sshare_A_unknown", "sshare -A nosuchacct")
    case("sshare_bad_field", "sshare -o NoSuchField")
    case("sshare_bad_option", "sshare --bogus")
    case("sshare_o_fields", "sshare -a -o Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare")
    # ---- delete an account that has running jobs
    case("sacctmgr_delete_account_running_jobs", "sacctmgr -i delete account gj")
    case("sacctmgr_delete_user_running_jobs", "sacctmgr -i delete user alice where account=mj")
    # ---- the exporters (EXPORTERS.md): with running and pending jobs
    vp = "vpenso prometheus-slurm-exporter"
    rv = "rivosinc prometheus-slurm-exporter (cli fallback)"
    case("exp_vpenso_nodes", "sinfo -h '-o %D,%T'", note=vp + " nodes.go: exec(\"sinfo\",\"-h\",\"-o %D,%T\")")
    case("exp_vpenso_nodes_shell", "sinfo -h -o \"%D,%T\"", note="the same as a shell line")
    case("exp_vpenso_node", "sinfo -h -N -O NodeList,AllocMem,Memory,CPUsState,StateLong", note=vp + " node.go")
    case("exp_vpenso_cpus", "sinfo -h '-o %C'", note=vp + " cpus.go")
    case("exp_vpenso_partitions_sinfo", "sinfo -h -o%R,%C", note=vp + " partitions.go")
    case("exp_vpenso_partitions_squeue", "squeue -a -r -h -o%P --states=PENDING", note=vp + " partitions.go")
    case("exp_vpenso_accounts", "squeue -a -r -h '-o %A|%a|%T|%C'", note=vp + " accounts.go")
    case("exp_vpenso_accounts_shell", "squeue -a -r -h -o '%A|%a|%T|%C'", note="the same as a shell line")
    case("exp_vpenso_users", "squeue -a -r -h '-o %A|%u|%T|%C'", note=vp + " users.go")
    case("exp_vpenso_queue", "squeue -a -r -h '-o %A,%T,%r' --states=all", note=vp + " queue.go")
    case("exp_vpenso_gpus_sacct", "sacct -a -X --format=Allocgres --state=RUNNING --noheader --parsable2", note=vp + " gpus.go")
    case("exp_vpenso_gpus_sinfo", "sinfo -h '-o \"%n %G\"'", note=vp + " gpus.go")
    case("exp_vpenso_sdiag", "sdiag", note=vp + " scheduler.go")
    case("exp_vpenso_sshare", "sshare -n -P -o account,fairshare", note=vp + " sshare.go")
    case("exp_rivosinc_squeue",
         "squeue --states=all -h -r -o '{{\"a\": \"%a\", \"id\": %A, \"end_time\": \"%e\", \"u\": \"%u\", \"state\": \"%T\", \"p\": \"%P\", \"cpu\": %C, \"mem\": \"%m\", \"array_id\": \"%K\", \"r\": \"%R\"}}'",
         note=rv + " exporter/server.go")
    case("exp_rivosinc_sinfo",
         "sinfo -h -o '{{\"s\": \"%T\", \"mem\": %m, \"n\": \"%n\", \"l\": \"%O\", \"p\": \"%R\", \"fmem\": \"%e\", \"cstate\": \"%C\", \"w\": %w}}'",
         note=rv + " exporter/server.go")
    case("exp_rivosinc_sacctmgr", "sacctmgr show assoc format=User,Account,GrpCPU,GrpMem,GrpJobs,GrpSubmit --noheader --parsable2",
         note="rivosinc exporter/server.go (limits collector)")
    case("exp_rivosinc_sdiag_json", "sdiag --json", note="rivosinc exporter/server.go (no cli fallback for sdiag)")
    case("exp_rivosinc_squeue_json", "squeue --json | head -c 300", note="rivosinc default without the fallback")
    case("exp_rivosinc_sinfo_json", "sinfo --json | head -c 300", note="rivosinc default without the fallback")
    case("exp_rivosinc_lic_json", "scontrol show lic --json", note="rivosinc license collector")
    # ---- sstat on running jobs
    submit("ST", "sbatch -t 30 --parsable steps.sh", note="a job whose srun step runs sleep")
    wait_state(J["ST"], ("RUNNING",))
    for _ in range(60):   # the step is up
        _, out, _, _ = raw("squeue -h -s -j %s -o %%i" % J["ST"])
        if "%s.0" % J["ST"] in out.split():
            break
        time.sleep(1)
    case("sstat_j", "sstat -j {ST}")
    case("sstat_j_step", "sstat -j {ST}.0 -o JobID,MaxRSS,AveCPU,NTasks")
    case("sstat_j_batch", "sstat -j {ST}.batch -o JobID,MaxRSS,AveCPU -p")
    case("sstat_a", "sstat -a -j {ST} -o JobID,MaxRSS,AveCPU -p")
    case("sstat_o_p", "sstat -j {ST} -o JobID,MaxRSS,AveCPU -p")
    case("sstat_n", "sstat -n -j {ST} -o JobID,NTasks")
    case("sstat_P_n", "sstat -n -P -a -j {ST} -o JobID,NTasks")
    case("sstat_alice", "sstat -j {ST} -o JobID,NTasks -p", user="alice")
    case("sstat_bob_other_user", "sstat -j {ST} -o JobID,NTasks -p", user="bob")
    case("sstat_no_job", "sstat")
    case("sstat_unknown_job", "sstat -j 999999")
    case("sstat_pending_job", "sstat -j {G2}")
    case("sstat_bad_field", "sstat -j {ST} -o NoSuchField")
    case("sstat_helpformat", "sstat --helpformat")
    case("sstat_e", "sstat -e")
    # ---- finished jobs with usage for sacct
    submit("BURN", "sbatch -t 5 -A research --parsable burn.sh", note="burns 2 s CPU, touches 200 MB")
    wait_gone([J["BURN"]])
    time.sleep(2)   # the accounting record of its end reaches slurmdbd
    cancel_all()
    time.sleep(2)
    case("sacct_A_research", "sacct -X -A research -o JobID,Account,QOS,State --sort=i 2>&1 | head -50")
    case("sacct_accounts_long", "sacct -X --accounts=gpuq,mj -o JobID,Account,State")
    case("sacct_q_normal", "sacct -X -q normal -o JobID,QOS,State -j {BURN}")
    case("sacct_q_qwall", "sacct -X -q qwall -o JobID,QOS,State")
    case("sacct_usage_fields", "sacct -j {BURN} --format=JobID,TotalCPU,UserCPU,SystemCPU,MaxRSS,MaxRSSNode,AveRSS,MaxVMSize,AveCPU,ConsumedEnergy")
    case("sacct_usage_fields_P", "sacct -j {BURN} -P --format=JobID,TotalCPU,UserCPU,SystemCPU,MaxRSS,MaxRSSNode,AveRSS,MaxVMSize,AveCPU,ConsumedEnergy")
    case("sacct_T", "sacct -T -X -j {BURN} -o JobID,Start,End,State -S now-1hours -E now")
    case("sacct_units_M", "sacct --units=M -j {BURN} -P -o JobID,MaxRSS,AveRSS,MaxVMSize,ReqMem")
    case("sacct_units_G", "sacct --units=G -j {BURN} -P -o JobID,MaxRSS,ReqMem")
    case("sacct_units_bad", "sacct --units=X -j {BURN}")
    case("sacct_steps_usage", "sacct -j {ST} -P -o JobID,State,TotalCPU,MaxRSS,NTasks,AveCPU")
    case("sacct_account_field", "sacct -X -j {G1},{MJ1} -o JobID,Account,User,State")
    case("seff_absent", "command -v seff || echo 'seff: not installed'",
         note="Debian 12 ships no seff (no slurm-contribs package): recorded absent")
    # ---- sdiag of a controller that ran jobs
    case("sdiag_busy", "sdiag")
    case("sdiag_reset_bob", "sdiag --reset", user="bob")
    # ---- remove after jobs ended
    case("sacctmgr_delete_account_no_jobs", "sacctmgr -i delete account gj")
    case("sacctmgr_delete_qos", "sacctmgr -i delete qos qwall")
    case("sacctmgr_show_assoc_tree_final", "sacctmgr show assoc tree format=Account,User,Share,GrpJobs,GrpTRES,MaxJobs,MaxSubmit,QOS")


def write_index():
    with open(os.path.join(GOLD, "jobids.json"), "w") as f:
        json.dump(J, f, indent=1)
        f.write("\n")
    with open(os.path.join(GOLD, "index.tsv"), "w") as f:
        f.write("file\tuser\texit_code\tcommand\tnote\n")
        for base, user, rc, cmd, note in INDEX:
            f.write("%s\t%s\t%d\t%s\t%s\n" % (base, user, rc, cmd.replace("\t", " ").replace("\n", "\\n"), note))
    with open(os.path.join(GOLD, "INDEX.md"), "w") as f:
        f.write("# Accounting goldens: real Slurm 22.05.8 (Debian 12) + slurmdbd + MariaDB\n\n")
        f.write("Recorded by capture.py (its docstring: the two phases and their configurations, "
                "conf-phase1/ and conf-phase2/) on the reference cluster of shared/slurm-reference "
                "(README.md there: cluster, case format, normalisation). %d cases. Symbolic job ids "
                "(jobids.json): %s\n\n" % (N[0], json.dumps(J)))
        f.write("| file | user | exit | command |\n|---|---|---|---|\n")
        for base, user, rc, cmd, note in INDEX:
            f.write("| %s | %s | %d | `%s` |\n" % (base, user, rc, cmd.replace("|", "\\|").replace("\n", " ")))


def main():
    if os.geteuid() != 0:
        sys.exit("capture.py must run as root")
    os.environ.pop("SLURM_CONF", None)
    os.makedirs(GOLD, exist_ok=True)
    for fn in os.listdir(GOLD):   # an earlier recording (keep this script and the docs)
        if re.match(r"^\d{4}_.*\.(json|txt)$", fn) or fn in ("index.tsv", "INDEX.md", "jobids.json"):
            os.remove(os.path.join(GOLD, fn))
    for u, d in (("alice", AW), ("bob", BW)):
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for fn, body in SCRIPTS.items():
            with open(os.path.join(d, fn), "w") as f:
                f.write(body)
            os.chmod(os.path.join(d, fn), 0o755)
        subprocess.run(["chown", "-R", "%s:%s" % (u, u), d], check=True)
    _, out, _, _ = raw("squeue -h -t all -o %A")
    if out.strip():
        print("NOTE: jobs already known: ids will not start at 1 (run setup.sh --fresh first)")
    cancel_all()
    with open(os.path.join(CONF_DIR, "slurm.conf")) as f:
        base_conf = f.read()
    assert "phase 2 of compat-tests" not in base_conf, "slurm.conf already has phase 2 lines: run setup.sh --fresh"
    copy_conf(os.path.join(GOLD, "conf-phase1"))
    PHASE[0] = 1
    phase1()
    with open(os.path.join(CONF_DIR, "slurm.conf"), "w") as f:
        f.write(base_conf.rstrip("\n") + "\n" + PHASE2_LINES)
    restart_slurmctld()
    copy_conf(os.path.join(GOLD, "conf-phase2"))
    PHASE[0] = 2
    phase2()
    write_index()
    print("captured %d cases into %s" % (N[0], GOLD))


if __name__ == "__main__":
    main()
