# The slurm system user (as the Debian packages make it), before the files are installed.
getent group slurm >/dev/null || groupadd -r slurm
getent passwd slurm >/dev/null || \
    useradd -r -g slurm -d /nonexistent -M -s /usr/sbin/nologin -c "Slurm workload manager (Flotilla)" slurm
# slurmrestd's own unprivileged user (slurmrestd refuses to run as root or SlurmUser).
getent group slurmrestd >/dev/null || groupadd -r slurmrestd
getent passwd slurmrestd >/dev/null || \
    useradd -r -g slurmrestd -d /nonexistent -M -s /usr/sbin/nologin -c "Slurm REST API (Flotilla)" slurmrestd
exit 0
