-- PostgreSQL dialect of sql/0007_assoc.sql (the same tables, columns and meaning; integers are
-- BIGINT, reals DOUBLE PRECISION, the column PostgreSQL reserves is quoted: "user").
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
    control_port BIGINT NOT NULL DEFAULT 0,
    rpc BIGINT NOT NULL DEFAULT 0
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
    id BIGINT PRIMARY KEY,
    -- The parent account's association; NULL for root.
    parent_id BIGINT,
    account TEXT NOT NULL,
    -- '' for an account association.
    "user" TEXT NOT NULL DEFAULT '',
    -- '' = all partitions.
    partition TEXT NOT NULL DEFAULT '',
    -- Fairshare shares; 4294967295 = parent.
    shares BIGINT NOT NULL DEFAULT 1,
    priority BIGINT,
    grp_tres TEXT NOT NULL DEFAULT '',
    grp_jobs BIGINT,
    grp_submit BIGINT,
    grp_wall_min BIGINT,
    max_jobs BIGINT,
    max_submit BIGINT,
    max_tres_per_job TEXT NOT NULL DEFAULT '',
    max_tres_per_node TEXT NOT NULL DEFAULT '',
    max_wall_min BIGINT,
    -- QOS names, comma-separated; '' = inherited.
    qos TEXT NOT NULL DEFAULT '',
    default_qos TEXT NOT NULL DEFAULT '',
    -- Flotilla's: GPUs never preempted; use above borrows up to GrpTRES=gres/gpu=N.
    guaranteed_gpus BIGINT NOT NULL DEFAULT 0,
    UNIQUE (account, "user", partition)
);

CREATE TABLE acct_qos (
    name TEXT PRIMARY KEY,
    -- Insertion order (SQLite's rowid: `sacctmgr show qos` lists QOS in it; a replaced QOS
    -- takes a new number, as SQLite's INSERT OR REPLACE gives it a new rowid).
    ord BIGSERIAL NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    priority BIGINT NOT NULL DEFAULT 0,
    grace_time_s BIGINT NOT NULL DEFAULT 0,
    -- QOS names, comma-separated.
    preempt TEXT NOT NULL DEFAULT '',
    -- 'cluster', 'cancel', 'requeue', 'suspend'.
    preempt_mode TEXT NOT NULL DEFAULT 'cluster',
    preempt_exempt_s BIGINT,
    -- Comma-separated (DenyOnLimit, NoReserve, ...).
    flags TEXT NOT NULL DEFAULT '',
    usage_factor DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    grp_tres TEXT NOT NULL DEFAULT '',
    grp_jobs BIGINT,
    grp_submit BIGINT,
    grp_wall_min BIGINT,
    max_tres_per_job TEXT NOT NULL DEFAULT '',
    max_tres_per_user TEXT NOT NULL DEFAULT '',
    max_jobs_per_user BIGINT,
    max_submit_per_user BIGINT,
    max_wall_min BIGINT
);
