//! The table of configuration keys: every key Flotilla reads, with its type, default and
//! meaning, and the keys Slurm 22.05 knows that Flotilla does not use yet.
//!
//! The parsers look keys up here (case-insensitively, aliases included) and type-check
//! values by [`ValueType`]; defaults marked [`KeyDefault::Value`] are applied by the parsers
//! from this table; `docs/slurm-conf-keys.md` is [`keys_markdown`]'s output (a test keeps it
//! up to date; regenerate with `UPDATE_GOLDENS=1`). So a new key is added here first.
//!
//! A key Slurm knows but Flotilla does not use yet gives one warning (first occurrence, with
//! file and line) and is otherwise ignored, so an admin's existing file loads. A key nobody
//! knows is an error with file and line.

use std::fmt::Write as _;

/// Which file and which kind of line a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `slurm.conf`, outside `NodeName=`/`PartitionName=` lines.
    Global,
    /// `slurm.conf`, a `NodeName=` line.
    Node,
    /// `slurm.conf`, a `PartitionName=` line.
    Partition,
    /// `gres.conf`.
    Gres,
    /// `topology.conf`.
    Topology,
}

impl Scope {
    /// Every scope, in documentation order.
    pub const ALL: [Scope; 5] = [
        Scope::Global,
        Scope::Node,
        Scope::Partition,
        Scope::Gres,
        Scope::Topology,
    ];

    /// A heading for the documentation.
    pub fn title(self) -> &'static str {
        match self {
            Scope::Global => "slurm.conf: global keys",
            Scope::Node => "slurm.conf: `NodeName=` lines",
            Scope::Partition => "slurm.conf: `PartitionName=` lines",
            Scope::Gres => "gres.conf",
            Scope::Topology => "topology.conf",
        }
    }
}

/// The type of a key's value, which decides how it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// Any text.
    String,
    /// `YES`/`NO` (also `TRUE`/`FALSE`, `1`/`0`, `UP`/`DOWN`), any case.
    Bool,
    /// An integer 0..=65535.
    U16,
    /// An integer 0..=4294967295.
    U32,
    /// An integer 0..=2^64-1.
    U64,
    /// An integer, or `UNLIMITED`/`INFINITE` for no limit.
    Limit,
    /// A time limit: minutes, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`, or
    /// `UNLIMITED`/`INFINITE` (Slurm `time_str2mins`; seconds round up to a minute).
    Time,
    /// A hostlist expression such as `gpu[01-04]`.
    Hostlist,
    /// A comma-separated list.
    List,
    /// One of the listed words, any case.
    Enum(&'static [&'static str]),
    /// `host` or `host(addr)`.
    Host,
    /// A port, or a range `first-last` of which the first is used.
    PortRange,
    /// GRES as `name[:type][:count]`, comma-separated.
    Gres,
}

impl ValueType {
    fn describe(self) -> String {
        match self {
            ValueType::String => "string".into(),
            ValueType::Bool => "YES\\|NO".into(),
            ValueType::U16 => "integer (16 bit)".into(),
            ValueType::U32 => "integer (32 bit)".into(),
            ValueType::U64 => "integer (64 bit)".into(),
            ValueType::Limit => "integer or UNLIMITED".into(),
            ValueType::Time => "time (minutes, [D-]HH:MM:SS, UNLIMITED)".into(),
            ValueType::Hostlist => "hostlist".into(),
            ValueType::List => "comma-separated list".into(),
            ValueType::Enum(words) => words.join("\\|"),
            ValueType::Host => "host or host(addr)".into(),
            ValueType::PortRange => "port or port range".into(),
            ValueType::Gres => "GRES list (name[:type][:count],...)".into(),
        }
    }
}

/// A key's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDefault {
    /// This value, applied by the parser when the key is absent.
    Value(&'static str),
    /// Absent means unset (`None`, empty).
    Unset,
    /// Computed from other keys, as described.
    Derived(&'static str),
}

/// One key Flotilla uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDoc {
    /// Canonical spelling (Slurm's).
    pub name: &'static str,
    /// Other accepted spellings (Slurm's older names).
    pub aliases: &'static [&'static str],
    /// Where the key is written.
    pub scope: Scope,
    /// How the value is checked.
    pub ty: ValueType,
    /// Default when absent.
    pub default: KeyDefault,
    /// What it means to Flotilla (Markdown, one line).
    pub doc: &'static str,
}

const fn key(
    scope: Scope,
    name: &'static str,
    ty: ValueType,
    default: KeyDefault,
    doc: &'static str,
) -> KeyDoc {
    KeyDoc {
        name,
        aliases: &[],
        scope,
        ty,
        default,
        doc,
    }
}

use KeyDefault::{Derived, Unset, Value};
use Scope::{Global, Gres, Node, Partition, Topology};

/// Node states accepted by `NodeName ... State=`.
pub const NODE_STATES: &[&str] = &[
    "UNKNOWN", "IDLE", "DOWN", "DRAIN", "FAIL", "FUTURE", "CLOUD",
];
/// Partition states accepted by `PartitionName ... State=`.
pub const PARTITION_STATES: &[&str] = &["UP", "DOWN", "DRAIN", "INACTIVE"];
/// `DefaultTopology=` values.
pub const TOPOLOGY_KINDS: &[&str] = &["node", "pod", "any"];
/// gres.conf `AutoDetect=` values.
pub const AUTODETECT: &[&str] = &["off", "nvml", "rsmi", "oneapi", "nrt", "nvidia"];

/// Every key Flotilla uses.
pub static KEYS: &[KeyDoc] = &[
    // slurm.conf, global.
    key(Global, "ClusterName", ValueType::String, Unset, "Name of the cluster."),
    key(Global, "SlurmctldHost", ValueType::Host, Unset,
        "Controller host, `host(addr)`; may repeat: the first line is the primary, later lines the backups, in the order commands, node daemons and `slurmrestd` try them (several controllers need `StateStorageType=state/postgres`)."),
    key(Global, "ControlMachine", ValueType::String, Unset,
        "Old spelling of the controller host; used only when `SlurmctldHost` is absent."),
    key(Global, "ControlAddr", ValueType::String, Unset,
        "Old spelling of the controller address; used only when `SlurmctldHost` is absent."),
    key(Global, "SlurmctldPort", ValueType::PortRange, Value("6817"),
        "Port the controller listens on (the first of a range)."),
    key(Global, "SlurmdPort", ValueType::U16, Value("6818"),
        "Port of the node daemons, unless a node sets `Port=`."),
    key(Global, "SlurmUser", ValueType::String, Value("root"), "User the controller runs as."),
    key(Global, "StateSaveLocation", ValueType::String, Value("/var/spool/slurmctld"),
        "Directory of the controller's state (Flotilla's SQLite database, its socket, the JWT key)."),
    key(Global, "SlurmctldTimeout", ValueType::U16, Value("6"),
        "Seconds of the controllers' leader lease (Slurm's 120 s takeover wait): a backup takes over this long after the leader last renewed it; the leader renews it every third of it and steps down when it cannot. Only with several controllers (`state/postgres`). With backups the leader also sends each idle node a keepalive every third of it, and a node that hears nothing for 1.5 times it moves on to the next `SlurmctldHost`."),
    key(Global, "SlurmdTimeout", ValueType::U16, Value("300"),
        "Seconds a node daemon may be silent before the controller marks it down (`--slurmd-timeout` overrides it). With one `SlurmctldHost` the controller sends each idle node a keepalive every third of it (100 s when 0), as Slurm pings its nodes, and a node that hears nothing for three such periods reconnects."),
    key(Global, "StateStorageType", ValueType::Enum(&["state/sqlite", "state/postgres"]), Value("state/sqlite"),
        "Flotilla: where the controller's state lives: `state/sqlite`, a file in `StateSaveLocation` (one controller), or `state/postgres`, a PostgreSQL database (several controllers, high availability)."),
    key(Global, "StateStorageHost", ValueType::String, Value("localhost"),
        "Flotilla, `state/postgres`: the PostgreSQL server's host, or the directory of its Unix socket (a path starting with `/`)."),
    key(Global, "StateStoragePort", ValueType::U16, Value("5432"),
        "Flotilla, `state/postgres`: the server's port (also names its Unix socket, `.s.PGSQL.<port>`)."),
    key(Global, "StateStorageUser", ValueType::String, Derived("SlurmUser"),
        "Flotilla, `state/postgres`: the database role the controllers log in as."),
    key(Global, "StateStorageLoc", ValueType::String, Value("flotilla"),
        "Flotilla, `state/postgres`: the database name."),
    key(Global, "StateStoragePassFile", ValueType::String, Unset,
        "Flotilla, `state/postgres`: a file holding the role's password (first line), owned by the controller's user and readable by it only (mode 0600), else the controller refuses to start; unset: no password (peer or trust authentication)."),
    key(Global, "SlurmdSpoolDir", ValueType::String, Value("/var/spool/slurmd"),
        "Node daemon spool directory; `%n` is the node name."),
    key(Global, "DefMemPerCPU", ValueType::U64, Unset,
        "Default memory per allocated CPU in MiB (otherwise a job gets the whole node's memory)."),
    key(Global, "KillWait", ValueType::U16, Value("30"),
        "Seconds between SIGTERM and SIGKILL at a job's time limit."),
    key(Global, "MinJobAge", ValueType::U32, Value("300"),
        "Seconds a finished job stays visible to `squeue`/`scontrol`."),
    key(Global, "MaxJobCount", ValueType::U32, Value("10000"),
        "Most jobs the controller holds at once; submissions beyond are refused."),
    key(Global, "MaxArraySize", ValueType::U32, Value("1001"),
        "Largest array index plus one."),
    key(Global, "FirstJobId", ValueType::U32, Value("1"),
        "The first job id the controller gives; ids count up from it (a restart keeps counting from where it was, or from here if that is higher)."),
    key(Global, "MaxJobId", ValueType::U32, Value("67043328"),
        "Job ids (service replicas' too) stay below it: after `MaxJobId - 1` they start again at `FirstJobId`, skipping ids still in use (Slurm's `get_next_job_id`). Above 67108863 it is reset to that; `FirstJobId` above it is an error; `MaxJobCount` is lowered to the number of ids."),
    key(Global, "SelectType", ValueType::String, Value("select/cons_tres"),
        "Placement plugin (Flotilla's placement always treats GPUs, CPUs and memory as consumable)."),
    key(Global, "PriorityType", ValueType::String, Value("priority/basic"), "Priority plugin."),
    key(Global, "PreemptType", ValueType::String, Value("preempt/none"), "Preemption plugin."),
    key(Global, "PriorityDecayHalfLife", ValueType::Time, Value("7-0"),
        "Half-life of the usage fair share is computed from; usage decays by 2^(-elapsed/half-life). 0: no decay."),
    key(Global, "PriorityCalcPeriod", ValueType::Time, Value("5"),
        "Minutes between writes of the decayed usage to the state database (it is decayed exactly at every cycle)."),
    key(Global, "PriorityUsageResetPeriod", ValueType::Enum(crate::fairshare::RESET_PERIODS), Value("NONE"),
        "When all usage is cleared: NONE, NOW (at the next start), DAILY, WEEKLY (Sunday), MONTHLY, QUARTERLY, YEARLY; at midnight UTC."),
    key(Global, "PriorityMaxAge", ValueType::Time, Value("7-0"),
        "Queue time at which the multifactor age factor reaches 1 (from submission or `--begin`)."),
    key(Global, "PriorityFavorSmall", ValueType::Bool, Value("NO"),
        "YES: the job-size factor favours small jobs (1 for one node and one CPU)."),
    key(Global, "PriorityWeightAge", ValueType::U32, Value("0"), "Weight of the age factor (multifactor)."),
    key(Global, "PriorityWeightAssoc", ValueType::U32, Value("0"),
        "Weight of the association factor (the association's `Priority` over the largest)."),
    key(Global, "PriorityWeightFairshare", ValueType::U32, Value("0"),
        "Weight of the fair-share factor (Fair Tree rank of the job's association)."),
    key(Global, "PriorityWeightJobSize", ValueType::U32, Value("0"),
        "Weight of the job-size factor (nodes and CPUs over the cluster's)."),
    key(Global, "PriorityWeightPartition", ValueType::U32, Value("0"),
        "Weight of the partition factor (`PriorityJobFactor` over the largest)."),
    key(Global, "PriorityWeightQOS", ValueType::U32, Value("0"),
        "Weight of the QOS factor (the QOS `Priority` over the largest)."),
    key(Global, "SchedulerType", ValueType::String, Value("sched/backfill"), "Scheduler plugin."),
    key(Global, "TopologyPlugin", ValueType::String, Value("topology/none"),
        "Topology plugin; Flotilla reads `topology.conf` (tree or block) whenever it is present."),
    key(Global, "GresTypes", ValueType::List, Unset,
        "GRES names nodes may have; a node's `Gres=` naming another is an error (as in Slurm)."),
    key(Global, "AlertProgram", ValueType::String, Unset,
        "Flotilla: program handed each alert/page decision as JSON on stdin."),
    key(Global, "PreemptExemptTime", ValueType::String, Value("00:10:00"),
        "Run time before a job may be preempted (Slurm time string, `time_str2secs`; `-1` = 0)."),
    key(Global, "ElasticGrowInterval", ValueType::U32, Value("60"),
        "Flotilla: seconds an elastic job (`sbatch --elastic`) waits after its start and after each membership change before it grows again; each growth takes as many steps as fit in one round."),
    key(Global, "ElasticRdzvPort", ValueType::U16, Value("29400"),
        "Flotilla: first port of elastic jobs' rendezvous endpoints (`FLOTILLA_RDZV_ENDPOINT`, on the job's first node; torchrun's c10d default)."),
    key(Global, "ElasticRdzvPortCount", ValueType::U16, Value("1000"),
        "Flotilla: how many ports from `ElasticRdzvPort` the rendezvous endpoints use (0 counts as 1, the range ends at 65535): a job takes `ElasticRdzvPort` + job id mod the count, or the next port of the range (wrapping) that no other elastic job running from the same first node holds."),
    key(Global, "DisableRootJobs", ValueType::Bool, Value("NO"),
        "No job may run as root (uid 0); refused with `Invalid user id`. Partitions may override."),
    key(Global, "AuthAltTypes", ValueType::List, Unset,
        "Alternative authentication: `auth/jwt` accepts JSON Web Tokens (HS256) from slurmrestd \
         (`X-SLURM-USER-TOKEN`) and issues them (`scontrol token`)."),
    key(Global, "AuthAltParameters", ValueType::String, Unset,
        "Options of `auth/jwt`, comma-separated: `jwt_key=PATH` (the HS256 key: at least 32 bytes, \
         readable by its owner only; default `StateSaveLocation/jwt_hs256.key`), \
         `disable_token_creation` (only root and `SlurmUser` get tokens), `max_token_lifespan=SECONDS`."),
    key(Global, "PrivateData", ValueType::List, Unset,
        "What users other than root and `SlurmUser` may not see of others: `jobs` (squeue, scontrol show job, sacct, steps), `nodes` (sinfo, scontrol show node: refused), `partitions` (only partitions they may use); `accounts`, `cloud`, `events`, `reservations`, `usage`, `users` protect data Flotilla does not serve."),
    key(Global, "MetricsType", ValueType::Enum(&["metrics/openmetrics"]), Unset,
        "Slurm 25.11: `metrics/openmetrics` serves OpenMetrics on the controller's own port (`GET /metrics/jobs`, `/metrics/nodes`, `/metrics/partitions`, `/metrics/scheduler`, `/metrics/jobs-users-accts`); unset: those paths answer an empty body. `/livez`, `/readyz`, `/healthz` are always served."),
    key(Global, "MetricsAuthUsers", ValueType::List, Unset,
        "Slurm 26.05: users besides root and `SlurmUser` who may read the metrics; setting it (or `PrivateData` without `MetricsParameters=ignore_private_data`) makes the metrics need a JWT (`X-SLURM-USER-TOKEN` or `Authorization: Bearer`, verified with the `auth/jwt` key): none or a bad one is 401, a user not allowed 403 (Slurm 25.11 answers 401 whenever `PrivateData` is set)."),
    key(Global, "MetricsParameters", ValueType::List, Unset,
        "Slurm 26.05: `ignore_private_data` keeps the metrics open to everyone although `PrivateData` is set (ignored when `MetricsAuthUsers` is set)."),
    key(Global, "AccountingStorageType", ValueType::String, Unset,
        "`accounting_storage/slurmdbd` with a `slurmdbd.conf` beside slurm.conf naming `StorageType=accounting_storage/mysql`: at its first start the controller copies that database's accounts, users, associations, default accounts, shares and limits of `ClusterName` into its own accounting database, read-only and once (docs/accounting.md); other values: none. Flotilla keeps job accounting itself."),
    key(Global, "AccountingStorageEnforce", ValueType::List, Unset,
        "`associations`: jobs of users without an association (`quota.conf` `Users=`) are refused; `limits`: that and the `quota.conf` limits (always enforced); other values (`qos`, `safe`, `wckeys`, `nojobs`, `nosteps`, `all`) cannot be honoured: the controller refuses to start."),
    key(Global, "ServiceAccounts", ValueType::List, Unset,
        "Flotilla: accounts whose users may create services (`sdeploy create`); unset: only root and `SlurmUser`."),
    key(Global, "ServiceMaxPriority", ValueType::U32, Value("0"),
        "Flotilla: highest priority of a service created by a user who is not root or `SlurmUser`."),
    key(Global, "ServiceMaxReplicas", ValueType::U32, Value("1"),
        "Flotilla: most replicas (sum of max replicas) of one such user's services."),
    key(Global, "ServiceMaxGPUs", ValueType::U32, Value("8"),
        "Flotilla: most GPUs (sum of max replicas x GPUs per replica) of one such user's services; their replicas also get the partition's `MaxTime`."),
    key(Global, "JobAcctGatherFrequency", ValueType::String, Value("30"),
        "Seconds between the node daemons' usage polls of running steps (`N`, or `task=N` among `energy=`, `network=`, `filesystem=`; 0: none), which `sstat` shows; every step's usage is also read at its end for `sacct`."),
    key(Global, "SchedulerParameters", ValueType::String, Unset,
        "Comma-separated options; Flotilla uses `max_script_size=N` (bytes, default 4194304, at most 512 MiB: a larger batch script is refused), `batch_sched_delay=N` (s, default 3) and `bf_max_job_test=N` (default 500, 1 to 1000000: how many jobs the backfill plan behind `squeue --start` and `StartTime=` tests), the others are ignored."),
    key(Global, "DependencyParameters", ValueType::String, Unset,
        "Comma-separated options; Flotilla uses `kill_invalid_depend` (a job whose dependency can never be met is cancelled unless it asked `--kill-on-invalid-dep=no`), the others are ignored. Slurm 22.05 reads it here, not in `SchedulerParameters`."),
    key(Global, "RequeueExit", ValueType::String, Unset,
        "Exit codes (0-255, a list with ranges: `3,5-6`) for which a batch job is requeued when its script exits with one (even a job submitted `--no-requeue`); it waits out the requeue hold-off (`BeginTime`)."),
    key(Global, "RequeueExitHold", ValueType::String, Unset,
        "Exit codes for which a batch job is requeued held, in state `SPECIAL_EXIT` (`JobHeldUser`, priority 0) until released; `RequeueExit` wins for a code in both."),
    // slurm.conf, NodeName lines.
    key(Node, "NodeName", ValueType::Hostlist, Unset,
        "Node names (hostlist); `DEFAULT` sets defaults for later lines; `ALL` is reserved."),
    key(Node, "NodeAddr", ValueType::Hostlist, Derived("the NodeHostname"),
        "Address of the node daemon; a hostlist gives one per node, in order."),
    key(Node, "NodeHostname", ValueType::Hostlist, Derived("the NodeName"),
        "Host name of the machine; a hostlist gives one per node, in order."),
    key(Node, "Port", ValueType::Hostlist, Derived("SlurmdPort"),
        "Port of this node's daemon; `[17001-17004]` gives one per node (several daemons on one host)."),
    KeyDoc {
        name: "CPUs",
        aliases: &["Procs"],
        scope: Node,
        ty: ValueType::U16,
        default: Derived("Sockets × CoresPerSocket × ThreadsPerCore"),
        doc: "Schedulable CPUs.",
    },
    key(Node, "Boards", ValueType::U16, Value("1"), "Baseboards per node."),
    key(Node, "Sockets", ValueType::U16, Value("1"), "Sockets per node (all baseboards)."),
    key(Node, "CoresPerSocket", ValueType::U16, Value("1"), "Cores per socket."),
    key(Node, "ThreadsPerCore", ValueType::U16, Value("1"), "Hardware threads per core."),
    key(Node, "RealMemory", ValueType::U64, Value("1"), "Schedulable memory in MiB."),
    key(Node, "TmpDisk", ValueType::U64, Value("0"),
        "Temporary disk space in MiB; a job's `--tmp` above every node's is refused at submission."),
    key(Node, "Gres", ValueType::Gres, Unset,
        "GRES, e.g. `gpu:h100:8` or `gpu:8`; Flotilla schedules `gpu` and keeps the rest as written."),
    key(Node, "Weight", ValueType::U32, Value("1"), "Scheduling weight; lower is used first."),
    KeyDoc {
        name: "Features",
        aliases: &["Feature"],
        scope: Node,
        ty: ValueType::List,
        default: Unset,
        doc: "Node features for `--constraint` (`-C`): names joined by `&` (or `,`) and `|`, left to right, one level of parentheses, as Slurm 22.05 reads them; node counts (`ib*2`) and matching or (`[a|b]`) are refused (`Requested operation not supported on this system`) rather than ignored. `scontrol update NodeName= AvailableFeatures= ActiveFeatures=` changes them until the next restart, as in Slurm.",
    },
    key(Node, "State", ValueType::Enum(NODE_STATES), Value("UNKNOWN"), "Initial node state."),
    // slurm.conf, PartitionName lines.
    key(Partition, "PartitionName", ValueType::String, Unset,
        "Partition name; `DEFAULT` sets defaults for later lines."),
    key(Partition, "Nodes", ValueType::Hostlist, Unset,
        "Nodes of the partition; `ALL` is every node. Naming an undefined node is an error."),
    key(Partition, "Default", ValueType::Bool, Value("NO"),
        "The partition of jobs that name none; if several say YES, the last one wins (with a warning)."),
    key(Partition, "MaxTime", ValueType::Time, Value("UNLIMITED"),
        "Largest time limit a job may have (a pending job above it waits `PartitionTimeLimit`). `scontrol update PartitionName=NAME MaxTime=...` changes it until the controller restarts."),
    key(Partition, "DefaultTime", ValueType::Time, Derived("MaxTime"),
        "Time limit of jobs that give none. `scontrol update PartitionName=NAME DefaultTime=...` changes it until the controller restarts (one above MaxTime is ignored)."),
    key(Partition, "State", ValueType::Enum(PARTITION_STATES), Value("UP"),
        "UP accepts and runs jobs; DOWN accepts but does not start (`PartitionDown`); DRAIN runs but refuses new jobs (`Required partition not available (inactive or drain)`); INACTIVE neither (`PartitionInactive`). `scontrol update PartitionName=NAME State=...` changes it until the controller restarts."),
    key(Partition, "PriorityTier", ValueType::U16, Value("1"),
        "Jobs of a higher tier are considered first (and may preempt, with PreemptType=preempt/partition_prio)."),
    key(Partition, "PriorityJobFactor", ValueType::U16, Value("1"),
        "Partition factor of the multifactor priority."),
    key(Partition, "Priority", ValueType::U16, Unset,
        "Old spelling: sets both PriorityTier and PriorityJobFactor."),
    key(Partition, "TRESBillingWeights", ValueType::String, Unset,
        "Billing per TRES of the partition's jobs (`CPU=1.0,Mem=0.25G,GRES/gpu=2.0`), which their fair-share usage accrues; unset: allocated CPUs."),
    key(Partition, "MaxNodes", ValueType::Limit, Value("UNLIMITED"), "Most nodes one job may use."),
    key(Partition, "DefaultTopology", ValueType::Enum(TOPOLOGY_KINDS), Value("any"),
        "Flotilla: topology set of jobs that declare none (`node`, `pod` or `any`)."),
    key(Partition, "SubNodePool", ValueType::Bool, Value("NO"),
        "Flotilla: the partition's nodes are a pool for jobs of less than one node's GPUs."),
    key(Partition, "InferencePool", ValueType::Bool, Value("NO"),
        "Flotilla: the partition's nodes are the inference pool: service replicas go there first; training may use its idle headroom only as preemptible, borrowed capacity."),
    key(Partition, "AllowGroups", ValueType::List, Value("ALL"),
        "Groups whose members may use the partition (root and `SlurmUser` always may; membership read at controller start); others: `User's group not permitted to use this partition`."),
    key(Partition, "AllowAccounts", ValueType::List, Value("ALL"),
        "The only accounts whose jobs may use the partition (`Invalid account or account/partition combination specified`)."),
    key(Partition, "DenyAccounts", ValueType::List, Unset,
        "Accounts whose jobs may not use the partition; ignored when `AllowAccounts` is set."),
    key(Partition, "AllowQos", ValueType::List, Value("ALL"),
        "The only QOS whose jobs may use the partition (`Invalid qos specification`)."),
    key(Partition, "DenyQos", ValueType::List, Unset,
        "QOS whose jobs may not use the partition; ignored when `AllowQos` is set."),
    key(Partition, "RootOnly", ValueType::Bool, Value("NO"),
        "Only root or `SlurmUser` may submit to the partition (`Access/permission denied`)."),
    key(Partition, "DisableRootJobs", ValueType::Bool, Derived("the global DisableRootJobs"),
        "No job of root (uid 0) in the partition."),
    // gres.conf.
    key(Gres, "NodeName", ValueType::Hostlist, Derived("every node"),
        "Nodes the line applies to; a line without it applies to every node."),
    key(Gres, "Name", ValueType::String, Unset,
        "GRES name; Flotilla reads `gpu` lines and skips others (with a warning)."),
    key(Gres, "Type", ValueType::String, Unset,
        "GPU model; must match the type in slurm.conf's `Gres=` when both are given."),
    key(Gres, "File", ValueType::Hostlist, Unset,
        "Device files, one per GPU, e.g. `/dev/nvidia[0-7]`, in GPU index order."),
    key(Gres, "Count", ValueType::U32, Derived("the number of File entries"),
        "GPUs the line describes; with `File=`, must equal the number of files."),
    key(Gres, "Cores", ValueType::String, Unset, "Cores close to these GPUs, as written (e.g. `0-31`)."),
    key(Gres, "Links", ValueType::String, Unset,
        "Given: the node's GPUs are linked unevenly and a job's GPUs are picked in aligned blocks (`{0-3}`, `{4-7}`, pairs); not given: the lowest free indices, as Slurm 22.05. The values are not read."),
    key(Gres, "AutoDetect", ValueType::Enum(AUTODETECT), Value("off"),
        "Accepted for compatibility; Flotilla's node daemon probes GPUs itself, config files are not changed by it."),
    // topology.conf.
    key(Topology, "SwitchName", ValueType::String, Unset,
        "A switch of `topology/tree`; one with `Nodes=` is a leaf and becomes a pod."),
    key(Topology, "Switches", ValueType::Hostlist, Unset, "Child switches of a non-leaf switch."),
    key(Topology, "Nodes", ValueType::Hostlist, Unset, "Nodes of a leaf switch or of a block."),
    key(Topology, "BlockName", ValueType::String, Unset, "A block of `topology/block`; it becomes a pod."),
    key(Topology, "BlockSizes", ValueType::List, Unset, "Block sizes of `topology/block` (numbers of nodes)."),
];

/// Keys of Slurm 22.05 that Flotilla accepts with a warning and otherwise ignores, by scope.
/// In `slurm.conf`, the line keys `DownNodes`, `FrontendName` and `NodeSet` are among them
/// (the whole line is skipped).
pub static SLURM_ONLY_KEYS: &[(Scope, &[&str])] = &[
    (
        Global,
        &[
            "AccountingStorageBackupHost",
            "AccountingStorageExternalHost",
            "AccountingStorageHost",
            "AccountingStorageLoc",
            "AccountingStorageParameters",
            "AccountingStoragePass",
            "AccountingStoragePort",
            "AccountingStorageTRES",
            "AccountingStorageUser",
            "AccountingStoreFlags",
            "AccountingStoreJobComment",
            "AcctGatherEnergyType",
            "AcctGatherFilesystemType",
            "AcctGatherInfinibandType",
            "AcctGatherInterconnectType",
            "AcctGatherNodeFreq",
            "AcctGatherProfileType",
            "AllowSpecResourcesUsage",
            "AuthInfo",
            "AuthType",
            "BackupAddr",
            "BackupController",
            "BatchStartTimeout",
            "BcastExclude",
            "BcastParameters",
            "BurstBufferParameters",
            "BurstBufferType",
            "CliFilterPlugins",
            "CommunicationParameters",
            "CompleteWait",
            "CoreSpecPlugin",
            "CpuFreqDef",
            "CpuFreqGovernors",
            "CredType",
            "CryptoType",
            "DebugFlags",
            "DefCPUPerGPU",
            "DefMemPerGPU",
            "DefMemPerNode",
            "DownNodes",
            "EioTimeout",
            "EnforcePartLimits",
            "Epilog",
            "EpilogMsgTime",
            "EpilogSlurmctld",
            "ExtSensorsFreq",
            "ExtSensorsType",
            "FairShareDampeningFactor",
            "FastSchedule",
            "FederationParameters",
            "FrontendName",
            "GetEnvTimeout",
            "GpuFreqDef",
            "GroupUpdateForce",
            "GroupUpdateTime",
            "HealthCheckInterval",
            "HealthCheckNodeState",
            "HealthCheckProgram",
            "InactiveLimit",
            "InteractiveStepOptions",
            "JobAcctGatherParams",
            "JobAcctGatherType",
            "JobCompHost",
            "JobCompLoc",
            "JobCompParams",
            "JobCompPass",
            "JobCompPort",
            "JobCompType",
            "JobCompUser",
            "JobContainerType",
            "JobCredentialPrivateKey",
            "JobCredentialPublicCertificate",
            "JobFileAppend",
            "JobRequeue",
            "JobSubmitPlugins",
            "KeepAliveTime",
            "KillOnBadExit",
            "LaunchParameters",
            "LaunchType",
            "Licenses",
            "LogTimeFormat",
            "MailDomain",
            "MailProg",
            "MaxDBDMsgs",
            "MaxMemPerCPU",
            "MaxMemPerNode",
            "MaxNodeCount",
            "MaxStepCount",
            "MaxTasksPerNode",
            "MCSParameters",
            "MCSPlugin",
            "MessageTimeout",
            "MpiDefault",
            "MpiParams",
            "NodeFeaturesPlugins",
            "NodeSet",
            "OverTimeLimit",
            "PluginDir",
            "PlugStackConfig",
            "PowerParameters",
            "PowerPlugin",
            "PreemptMode",
            "PrEpParameters",
            "PrEpPlugins",
            "PriorityFlags",
            "PriorityParameters",
            "PrioritySiteFactorParameters",
            "PrioritySiteFactorPlugin",
            "PriorityWeightTRES",
            "ProctrackType",
            "Prolog",
            "PrologEpilogTimeout",
            "PrologFlags",
            "PrologSlurmctld",
            "PropagatePrioProcess",
            "PropagateResourceLimits",
            "PropagateResourceLimitsExcept",
            "RebootProgram",
            "ReconfigFlags",
            "ResumeFailProgram",
            "ResumeProgram",
            "ResumeRate",
            "ResumeTimeout",
            "ResvEpilog",
            "ResvOverRun",
            "ResvProlog",
            "ReturnToService",
            "RoutePlugin",
            "SallocDefaultCommand",
            "SbcastParameters",
            "SchedulerTimeSlice",
            "ScronParameters",
            "SelectTypeParameters",
            "SlurmctldAddr",
            "SlurmctldDebug",
            "SlurmctldLogFile",
            "SlurmctldParameters",
            "SlurmctldPidFile",
            "SlurmctldPlugstack",
            "SlurmctldPrimaryOffProg",
            "SlurmctldPrimaryOnProg",
            "SlurmctldSyslogDebug",
            "SlurmdDebug",
            "SlurmdLogFile",
            "SlurmdParameters",
            "SlurmdPidFile",
            "SlurmdSyslogDebug",
            "SlurmdUser",
            "SlurmSchedLogFile",
            "SlurmSchedLogLevel",
            "SrunEpilog",
            "SrunPortRange",
            "SrunProlog",
            "SuspendExcNodes",
            "SuspendExcParts",
            "SuspendProgram",
            "SuspendRate",
            "SuspendTime",
            "SuspendTimeout",
            "SwitchParameters",
            "SwitchType",
            "TaskEpilog",
            "TaskPlugin",
            "TaskPluginParam",
            "TaskProlog",
            "TCPTimeout",
            "TmpFS",
            "TopologyParam",
            "TrackWCKey",
            "TreeWidth",
            "UnkillableStepProgram",
            "UnkillableStepTimeout",
            "UsePAM",
            "VSizeFactor",
            "WaitTime",
            "X11Parameters",
        ],
    ),
    (
        Node,
        &[
            "BcastAddr",
            "CoreSpecCount",
            "CpuBind",
            "CPUSpecList",
            "MemSpecLimit",
            "Reason",
            "SocketsPerBoard",
            "TRESWeights",
        ],
    ),
    (
        Partition,
        &[
            "AllocNodes",
            "Alternate",
            "CpuBind",
            "DefCPUPerGPU",
            "DefMemPerCPU",
            "DefMemPerGPU",
            "DefMemPerNode",
            "ExclusiveUser",
            "GraceTime",
            "Hidden",
            "LLN",
            "MaxCPUsPerNode",
            "MaxCPUsPerSocket",
            "MaxMemPerCPU",
            "MaxMemPerNode",
            "MinNodes",
            "OverSubscribe",
            "OverTimeLimit",
            "PreemptMode",
            "QOS",
            "ReqResv",
            "ResumeTimeout",
            "SelectTypeParameters",
            "Shared",
            "SuspendTime",
            "SuspendTimeout",
        ],
    ),
    (Gres, &["Flags", "MultipleFiles"]),
    (Topology, &["LinkSpeed"]),
];

/// What the table says about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLookup {
    /// A key Flotilla uses.
    Used(&'static KeyDoc),
    /// A key Slurm knows that Flotilla does not use yet (canonical spelling).
    SlurmOnly(&'static str),
    /// A key nobody knows.
    Unknown,
}

/// Looks `key` up in `scope`, case-insensitively, aliases included.
pub fn lookup(scope: Scope, key: &str) -> KeyLookup {
    if let Some(k) = KEYS.iter().find(|k| {
        k.scope == scope
            && (k.name.eq_ignore_ascii_case(key)
                || k.aliases.iter().any(|a| a.eq_ignore_ascii_case(key)))
    }) {
        return KeyLookup::Used(k);
    }
    SLURM_ONLY_KEYS
        .iter()
        .filter(|(s, _)| *s == scope)
        .flat_map(|(_, names)| names.iter())
        .find(|n| n.eq_ignore_ascii_case(key))
        .map_or(KeyLookup::Unknown, |n| KeyLookup::SlurmOnly(n))
}

/// The key table as Markdown: one table per scope (key, type, default, description), then the
/// keys Slurm knows that Flotilla does not use yet. This is `docs/slurm-conf-keys.md`.
pub fn keys_markdown() -> String {
    let mut s = String::new();
    s.push_str(
        "<!-- Generated from core/src/config/keys.rs by keys_markdown(); do not edit. -->\n",
    );
    s.push_str("<!-- Regenerate: UPDATE_GOLDENS=1 cargo test -p flotilla-core keys_doc_is_up_to_date -->\n\n");
    s.push_str("# Configuration keys\n\n");
    s.push_str(
        "Keys are case-insensitive. A key Slurm knows that Flotilla does not use yet gives one \
         warning with file and line and is ignored; a key nobody knows is an error.\n",
    );
    for scope in Scope::ALL {
        let _ = write!(s, "\n## {}\n\n", scope.title());
        s.push_str("| Key | Type | Default | Description |\n|---|---|---|---|\n");
        for k in KEYS.iter().filter(|k| k.scope == scope) {
            let name = if k.aliases.is_empty() {
                format!("`{}`", k.name)
            } else {
                format!("`{}` (also `{}`)", k.name, k.aliases.join("`, `"))
            };
            let default = match k.default {
                KeyDefault::Value(v) => format!("`{v}`"),
                KeyDefault::Unset => "unset".to_string(),
                KeyDefault::Derived(d) => d.to_string(),
            };
            let _ = writeln!(
                s,
                "| {name} | {} | {default} | {} |",
                k.ty.describe(),
                k.doc
            );
        }
    }
    s.push_str("\n## Keys Slurm knows that Flotilla does not use yet\n");
    for (scope, names) in SLURM_ONLY_KEYS {
        let _ = write!(s, "\n### {}\n\n", scope.title());
        let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        s.push_str(&list.join(", "));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_case_insensitive_and_knows_aliases() {
        assert!(
            matches!(lookup(Global, "slurmctldport"), KeyLookup::Used(k) if k.name == "SlurmctldPort")
        );
        assert!(matches!(lookup(Node, "PROCS"), KeyLookup::Used(k) if k.name == "CPUs"));
        assert_eq!(lookup(Global, "authtype"), KeyLookup::SlurmOnly("AuthType"));
        assert_eq!(lookup(Global, "NoSuchKey"), KeyLookup::Unknown);
        // Scopes are separate: a node key is not a global key.
        assert_eq!(lookup(Global, "RealMemory"), KeyLookup::Unknown);
    }

    #[test]
    fn no_key_is_both_used_and_slurm_only_nor_listed_twice() {
        for scope in Scope::ALL {
            let mut seen: Vec<String> = Vec::new();
            let used = KEYS
                .iter()
                .filter(|k| k.scope == scope)
                .flat_map(|k| std::iter::once(k.name).chain(k.aliases.iter().copied()));
            let only = SLURM_ONLY_KEYS
                .iter()
                .filter(|(s, _)| *s == scope)
                .flat_map(|(_, n)| n.iter().copied());
            for name in used.chain(only) {
                let lower = name.to_ascii_lowercase();
                assert!(!seen.contains(&lower), "{name} listed twice in {scope:?}");
                seen.push(lower);
            }
        }
    }

    #[test]
    fn defaults_in_the_table_type_check() {
        for k in KEYS {
            if let KeyDefault::Value(v) = k.default {
                let at = super::super::Location::new("table", 0);
                assert!(
                    super::super::slurm_conf::check_value(k, v, &at).is_ok(),
                    "default of {} does not parse",
                    k.name
                );
            }
        }
    }
}
