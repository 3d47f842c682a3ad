#!/usr/bin/env python3
"""The reference's figures for the accounting benchmark (issue #18): real Slurm 22.05.8 +
slurmdbd + MariaDB of shared/slurm-reference, on this machine.

Run as root with the reference up (after compat-tests/goldens/accounting/capture.py, whose
phase 2 leaves it on priority/multifactor):

    sudo python3 bench/accounting-reference.py [N]      (N users, default 10000)

1. `sacctmgr -i add account bench` then `sacctmgr -i add user bu00001,...,buNNNNN
   account=bench` in batches of 1000 names per command (the users need no Unix account: with
   -i sacctmgr does not ask about the missing uid); the total wall time is reported.
2. `sacctmgr show assoc -P` and `sshare -a -P`, 5 runs each (stdout to a pipe that is read
   and counted), median and min/max wall time, and the line counts.
3. The users and the account are deleted again (`sacctmgr -i delete user ... ; delete account
   bench`), timed too, so the reference is left as it was.

Prints a Markdown section; bench/accounting-reference.md holds the recorded one.
"""
import os, platform, statistics, subprocess, sys, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
BATCH = 1000
NAMES = ["bu%05d" % i for i in range(1, N + 1)]


def run(argv):
    t = time.monotonic()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
    dt = time.monotonic() - t
    if p.returncode != 0:
        sys.stderr.write("FAILED (%d): %s\n%s\n" % (p.returncode, " ".join(argv[:6]), p.stderr.decode()[:500]))
    return dt, p.stdout


def timed5(argv):
    runs = []
    lines = 0
    for _ in range(5):
        dt, out = run(argv)
        runs.append(dt)
        lines = out.count(b"\n")
    return statistics.median(runs), min(runs), max(runs), lines


def main():
    if os.geteuid() != 0:
        sys.exit("run as root")
    os.environ.pop("SLURM_CONF", None)
    run(["sacctmgr", "-i", "add", "account", "bench", "Description=bench", "Organization=bench"])
    t_add = 0.0
    for i in range(0, N, BATCH):
        dt, _ = run(["sacctmgr", "-i", "add", "user", ",".join(NAMES[i:i + BATCH]), "account=bench"])
        t_add += dt
    show = timed5(["sacctmgr", "show", "assoc", "-P"])
    share = timed5(["sshare", "-a", "-P"])
    t_del = 0.0
    for i in range(0, N, BATCH):
        dt, _ = run(["sacctmgr", "-i", "delete", "user", ",".join(NAMES[i:i + BATCH])])
        t_del += dt
    run(["sacctmgr", "-i", "delete", "account", "bench"])
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print("## Reference: Slurm 22.05.8 + slurmdbd + MariaDB 10.11 (Debian 12), %d users\n" % N)
    print("Machine: %s, %d CPUs (%s), %s. Date: %s UTC.\n" % (
        platform.node(), os.cpu_count(), cpu, platform.release(),
        time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
    print("| step | median (s) | min (s) | max (s) | lines |")
    print("|---|---|---|---|---|")
    print("| `sacctmgr -i add user` x %d (batches of %d), total | %.3f | | | |" % (N, BATCH, t_add))
    print("| `sacctmgr show assoc -P` (5 runs) | %.3f | %.3f | %.3f | %d |" % show)
    print("| `sshare -a -P` (5 runs) | %.3f | %.3f | %.3f | %d |" % share)
    print("| `sacctmgr -i delete user` x %d (batches of %d), total | %.3f | | | |" % (N, BATCH, t_del))


if __name__ == "__main__":
    main()
