# The slurm system user (as the Debian packages make it), before the files are installed.
getent group slurm >/dev/null || groupadd -r slurm
getent passwd slurm >/dev/null || \
    useradd -r -g slurm -d /nonexistent -M -s /usr/sbin/nologin -c "Slurm workload manager (Flotilla)" slurm
exit 0
