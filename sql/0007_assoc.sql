-- Flotilla controller state, version 7: the accounting database `sacctmgr` edits —
-- clusters, accounts, users, associations and QOS, with limits as Slurm names them
-- (slurmdbd's cluster_table, acct_table, user_table, <cluster>_assoc_table, qos_table).
-- The controller builds the scheduler's accounting, quota tree and job limits from these
-- rows at start and after every change (slurmctld-rs/src/assoc). TRES limits are Slurm's
-- text (`cpu=4,gres/gpu=8`, '' = none); counts NULL = unset (Slurm's INFINITE); times in
-- minutes. Slurm's default objects (the cluster, account and user `root`, the root
-- association, QOS `normal`) are inserted by the controller, which knows ClusterName.

CREATE TABLE acct_clusters (
    name TEXT PRIMARY KEY,
    control_host TEXT NOT NULL DEFAULT '',
    control_port INTEGER NOT NULL DEFAULT 0,
    rpc INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE acct_accounts (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    organization TEXT NOT NULL
);

CREATE TABLE acct_users (
    name TEXT PRIMARY KEY,
    default_account TEXT NOT NULL DEFAULT '',
    -- 'None', 'Operator', 'Administrator'.
    admin_level TEXT NOT NULL DEFAULT 'None'
);

CREATE TABLE acct_assocs (
    id INTEGER PRIMARY KEY,
    -- The parent account's association; NULL for root.
    parent_id INTEGER,
    account TEXT NOT NULL,
    -- '' for an account association.
    user TEXT NOT NULL DEFAULT '',
    -- '' = all partitions.
    partition TEXT NOT NULL DEFAULT '',
    -- Fairshare shares; 4294967295 = parent.
    shares INTEGER NOT NULL DEFAULT 1,
    priority INTEGER,
    grp_tres TEXT NOT NULL DEFAULT '',
    grp_jobs INTEGER,
    grp_submit INTEGER,
    grp_wall_min INTEGER,
    max_jobs INTEGER,
    max_submit INTEGER,
    max_tres_per_job TEXT NOT NULL DEFAULT '',
    max_tres_per_node TEXT NOT NULL DEFAULT '',
    max_wall_min INTEGER,
    -- QOS names, comma-separated; '' = inherited.
    qos TEXT NOT NULL DEFAULT '',
    default_qos TEXT NOT NULL DEFAULT '',
    -- Flotilla's: GPUs never preempted; use above borrows up to GrpTRES=gres/gpu=N.
    guaranteed_gpus INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account, user, partition)
);

CREATE TABLE acct_qos (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL DEFAULT '',
    priority INTEGER NOT NULL DEFAULT 0,
    grace_time_s INTEGER NOT NULL DEFAULT 0,
    -- QOS names, comma-separated.
    preempt TEXT NOT NULL DEFAULT '',
    -- 'cluster', 'cancel', 'requeue', 'suspend'.
    preempt_mode TEXT NOT NULL DEFAULT 'cluster',
    preempt_exempt_s INTEGER,
    -- Comma-separated (DenyOnLimit, NoReserve, ...).
    flags TEXT NOT NULL DEFAULT '',
    usage_factor REAL NOT NULL DEFAULT 1.0,
    grp_tres TEXT NOT NULL DEFAULT '',
    grp_jobs INTEGER,
    grp_submit INTEGER,
    grp_wall_min INTEGER,
    max_tres_per_job TEXT NOT NULL DEFAULT '',
    max_tres_per_user TEXT NOT NULL DEFAULT '',
    max_jobs_per_user INTEGER,
    max_submit_per_user INTEGER,
    max_wall_min INTEGER
);
