# SlurmdSpoolDir (slurmd runs as root) and the root-only cluster key, made once if absent
# (replace it with the controller's).
install -d -o root -g root -m 0755 /var/spool/slurmd
if [ ! -e /etc/slurm/slurm.key ]; then
    (umask 077 && dd if=/dev/urandom of=/etc/slurm/slurm.key.new bs=64 count=1 status=none \
        && mv /etc/slurm/slurm.key.new /etc/slurm/slurm.key)
fi
command -v systemctl >/dev/null 2>&1 && systemctl daemon-reload >/dev/null 2>&1 || :
exit 0
