#!/usr/bin/env python3
"""Record `seff` (Slurm 22.05.8's contribs/seff/seff, the Princeton script; Debian 12 does not
package it) on the reference: run as root right after `shared/slurm-reference/setup.sh --fresh`
with the script installed as /usr/local/bin/seff (from the Slurm source tag slurm-22-05-8-1,
contribs/seff/seff; it needs Debian's libslurm-perl and libslurmdb-perl):

    sudo python3 -B compat-tests/goldens/accounting/seff/capture_seff.py

Cases in this folder, in the format of ../capture.py (whose helpers it uses), job ids from 1.
The accounting replay does not run them (they need a fresh cluster of their own).
"""
import os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.argv = [sys.argv[0], "--out", HERE]
sys.path.insert(0, os.path.dirname(HERE))
import capture as C   # noqa: E402

C.SCRIPTS["exit3.sh"] = "#!/bin/bash\necho about to fail\nexit 3\n"


def main():
    import shutil, subprocess, re
    for fn in os.listdir(HERE):
        if re.match(r"^\d{4}_.*\.(json|txt)$", fn):
            os.remove(os.path.join(HERE, fn))
    for u, d in (("alice", C.AW), ("bob", C.BW)):
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for fn, body in C.SCRIPTS.items():
            with open(os.path.join(d, fn), "w") as f:
                f.write(body)
            os.chmod(os.path.join(d, fn), 0o755)
        subprocess.run(["chown", "-R", "%s:%s" % (u, u), d], check=True)
    C.submit("BURN", "sbatch -t 5 --parsable burn.sh", note="burns 2 s CPU, touches 200 MB")
    C.submit("OK", "sbatch -t 5 -n 2 --mem=2G --parsable --wrap 'sleep 3'")
    C.submit("FAIL", "sbatch -t 5 --parsable exit3.sh")
    for s in ("BURN", "OK", "FAIL"):
        C.wait_gone([C.J[s]])
    time.sleep(3)
    C.submit("RUN", "sbatch -t 5 --parsable sleep.sh")
    C.wait_state(C.J["RUN"], ("RUNNING",))
    C.case("seff_burn", "seff {BURN}", user="alice")
    C.case("seff_ok", "seff {OK}", user="alice")
    C.case("seff_fail", "seff {FAIL}", user="alice")
    C.case("seff_running", "seff {RUN}", user="alice")
    C.case("seff_root", "seff {OK}")
    C.case("seff_bob_other_user", "seff {OK}", user="bob")
    C.case("seff_unknown_job", "seff 999999", user="alice")
    C.case("seff_no_args", "seff", user="alice")
    C.case("seff_version", "seff -v", user="alice")
    C.case("seff_d", "seff -d {OK}", user="alice")
    C.cancel_all()
    C.write_index()
    print("captured %d cases into %s" % (C.N[0], HERE))


if __name__ == "__main__":
    main()
