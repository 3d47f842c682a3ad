# StateSaveLocation (world-searchable: it holds the socket every user connects to) and the
# root-only cluster key, made once if absent (copy it to every node).
install -d -o slurm -g slurm -m 0755 /var/spool/slurmctld
if [ ! -e /etc/slurm/slurm.key ]; then
    (umask 077 && dd if=/dev/urandom of=/etc/slurm/slurm.key.new bs=64 count=1 status=none \
        && mv /etc/slurm/slurm.key.new /etc/slurm/slurm.key)
fi
# The auth/jwt key (slurm.conf AuthAltParameters=jwt_key=...), readable by the controller only,
# made once and never replaced: the controller signs and verifies tokens with it.
if [ ! -e /var/spool/slurmctld/jwt_hs256.key ]; then
    (umask 077 && dd if=/dev/urandom of=/var/spool/slurmctld/jwt_hs256.key.new bs=32 count=1 status=none \
        && chown slurm:slurm /var/spool/slurmctld/jwt_hs256.key.new \
        && mv /var/spool/slurmctld/jwt_hs256.key.new /var/spool/slurmctld/jwt_hs256.key)
fi
command -v systemctl >/dev/null 2>&1 && systemctl daemon-reload >/dev/null 2>&1 || :
exit 0
