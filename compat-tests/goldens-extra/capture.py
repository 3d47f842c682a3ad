#!/usr/bin/env python3
"""Record the extra goldens (cases.py) against the real Slurm 22.05 reference cluster.

    sudo ../shared/slurm-reference/setup.sh --fresh
    sudo python3 compat-tests/goldens-extra/capture.py [--only PREFIX[,PREFIX...]] [--out DIR]

Each case is written as DIR/NNNN_<name>.json (the shared goldens' format, see
shared/slurm-reference/README.md; `host` added: the recording host's short name) and
NNNN_<name>.txt (readable). NNNN = area * 100 + the case's place in its area, so that adding a
case to one area renumbers no other. Cases are independent of each other: before each one the
capture waits until the cluster runs and queues no job, and every case cancels its own jobs.
They run as alice or bob in /home/<user>/x (recreated with lib.sh and the scripts of cases.py),
or as root in /, under `env -i` with the shared goldens' environment.
"""
import json, os, pwd, re, shutil, socket, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases as C  # noqa: E402

OUT = HERE
if "--out" in sys.argv[1:]:
    OUT = os.path.abspath(sys.argv[sys.argv.index("--out") + 1])
ONLY = None
if "--only" in sys.argv[1:]:
    ONLY = sys.argv[sys.argv.index("--only") + 1].split(",")
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def home(user):
    return "/" if user == "root" else pwd.getpwnam(user).pw_dir


def cwd_of(user):
    return "/" if user == "root" else os.path.join(home(user), "x")


def user_env(user):
    return {"PATH": PATH, "HOME": home(user), "USER": user, "LOGNAME": user,
            "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TZ": "UTC"}


def make_argv(cmd, user):
    argv = ["env", "-i"] + ["%s=%s" % kv for kv in user_env(user).items()] + ["/bin/bash", "-c", cmd]
    if user != "root":
        argv = ["runuser", "-u", user, "--"] + argv
    return argv


def prepare_dirs():
    for user in ("alice", "bob"):
        d = cwd_of(user)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        shutil.copy(os.path.join(HERE, "lib.sh"), d)
        for name, body in C.SCRIPTS.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(body)
            os.chmod(os.path.join(d, name), 0o755)
        subprocess.run(["chown", "-R", "%s:%s" % (user, user), d], check=True)


def wait_idle(timeout=180):
    # a case that failed before its `fin` left jobs behind
    subprocess.run(["scancel", "-u", "alice"], env={"PATH": PATH})
    subprocess.run(["scancel", "-u", "bob"], env={"PATH": PATH})
    t0 = time.time()
    while time.time() - t0 < timeout:
        p = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,CF,S", "-o", "%i"], capture_output=True, text=True,
                           env={"PATH": PATH})
        if p.returncode == 0 and not p.stdout.strip():
            return
        time.sleep(0.5)
    sys.exit("the cluster did not become idle: %s" % p.stdout)


def record(seq, area, name, user, cmd, stdin, note):
    wait_idle()
    full = ". ./lib.sh\n" + cmd if user != "root" else cmd
    cwd = cwd_of(user)
    p = subprocess.run(make_argv(full, user), cwd=cwd, input=stdin.encode() if stdin is not None else None,
                       stdin=None if stdin is not None else subprocess.DEVNULL, capture_output=True, timeout=600)
    dec = lambda b: b.decode("utf-8", "backslashreplace")
    out, err = dec(p.stdout), dec(p.stderr)
    base = "%04d_%s" % (seq, name)
    rec = {"case": name, "seq": seq, "cmd": full, "template": full, "ids": {}, "argv": make_argv(full, user),
           "user": user, "env": user_env(user), "cwd": cwd, "stdin": stdin, "exit_code": p.returncode,
           "stdout": out, "stderr": err, "note": note, "area": area,
           "host": socket.gethostname().split(".")[0],
           "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(os.path.join(OUT, base + ".json"), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    with open(os.path.join(OUT, base + ".txt"), "w") as f:
        f.write("### case: %s\n### area: %s\n### user: %s\n### cwd: %s\n### command:\n%s\n" % (name, area, user, cwd, full))
        if stdin is not None:
            f.write("### stdin:\n%s\n" % stdin)
        if note:
            f.write("### note: %s\n" % note)
        f.write("### exit_code: %d\n### stdout (%d bytes):\n%s" % (p.returncode, len(out), out))
        f.write("### stderr (%d bytes):\n%s" % (len(err), err))
        f.write("### end\n")
    first = (out + err).strip().splitlines()
    print("%-50s rc=%d %s" % (base, p.returncode, first[0][:70] if first else ""), flush=True)


def main():
    if os.getuid() != 0:
        sys.exit("capture.py must run as root (cases run as alice, bob and root)")
    os.makedirs(OUT, exist_ok=True)
    prepare_dirs()
    for area, cases in C.AREAS:
        for i, c in enumerate(cases, 1):
            name = "%s_%s" % (area, c["name"])
            if ONLY and not any(name.startswith(p) for p in ONLY):
                continue
            seq = int(area[1:]) * 100 + i
            record(seq, area, name, c.get("user", "alice"), c["cmd"], c.get("stdin"), c.get("note", ""))


if __name__ == "__main__":
    main()
