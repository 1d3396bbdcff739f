# shellcheck shell=bash
# Functions shared by tierfs-prolog and tierfs-epilog (sourced, not run).
#
# Contract: the caller has set TIERFS_SCRIPT (the name used in log lines) and
# runs as root under `set -euo pipefail`. Every external command that could
# block on a file system (the PFS, a FUSE mount whose daemon hangs) runs under
# `timeout`, so no function here can hang the node.

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin  # Slurm sets none
shopt -s inherit_errexit  # a failure inside $(...) fails the script too
umask 022  # slurmd's umask is not ours to inherit: what the scripts make is root's to write

# ---- logging: stderr (slurmd's log) and syslog (journalctl -t tierfs-slurm) ----

log() {  # log LEVEL MESSAGE...   LEVEL: err, warning, info
  local level=$1
  shift
  printf '%s: job %s: %s: %s\n' "$TIERFS_SCRIPT" "${SLURM_JOB_ID:-?}" "$level" "$*" >&2
  if [[ -S /dev/log ]]; then
    logger -t tierfs-slurm -p "user.$level" -- "$TIERFS_SCRIPT: job ${SLURM_JOB_ID:-?}: $*" \
      2>/dev/null || true
  fi
}

# ---- configuration ----

# Defaults; /etc/tierfs/slurm.conf (or $TIERFS_SLURM_CONF) overrides them.
load_config() {
  TIERFS_BIN=/usr/local/bin/tierfs
  MOUNT_ROOT=/mnt/tierfs
  LOCAL_SCRATCH=/tmp
  TIER_ROOT=
  STATE_ROOT=/run/tierfs-slurm
  DATASET=
  DEFAULT_OPTIONS=
  # shellcheck disable=SC2034  # read by tierfs-prolog
  JOB_OPTIONS="prefetch lookahead policy promote_threads chunk_size ram log_level"
  INDEX_DIR=
  INDEX_BESIDE_DATASET=yes
  TIER_PERCENT=90
  TIER_MIN_MB=1024
  RAM_PERCENT=25
  RAM_MIN_MB=256
  RUN_AS_USER=yes
  MOUNT_TIMEOUT=300
  STEP_TIMEOUT=10
  USER_ERROR=cancel
  # The PFS's health, seen by root without the job: PFS_CHECK lists paths
  # (space-separated) that root stats when a job fails on its dataset's file
  # system; one that does not answer drains the node. Else such failures of
  # PFS_FAIL_USERS distinct users' jobs within PFS_FAIL_WINDOW seconds drain
  # it (0: never).
  PFS_CHECK=
  PFS_FAIL_USERS=2
  PFS_FAIL_WINDOW=3600
  SCANCEL=scancel
  SQUEUE=squeue
  # Peers: the nodes of a multi-node job serve each other's
  # chunks. PEERS=auto (jobs of 2 nodes or more) or no. Every node of a job
  # listens on PEER_PORT_BASE + job id % PEER_PORT_COUNT (firewall: open this
  # range between compute nodes only). MUNGE_SOCKET: munged's socket ('' =
  # libmunge's default). PEER_TIMEOUT: seconds before a silent peer's chunks
  # are read from the PFS.
  # The daemon runs in a memory cgroup of its own (CGROUP=auto; no: in
  # slurmd's), limited to its RAM tier plus MEM_OVERHEAD_MB (the namespace,
  # about 110 bytes per file, buffers, peers).
  CGROUP=auto
  MEM_OVERHEAD_MB=1024
  PEERS=auto
  PEER_PORT_BASE=7740
  PEER_PORT_COUNT=256
  PEER_TIMEOUT=5
  MUNGE_SOCKET=
  SCONTROL=scontrol
  # The node cache (tierfs-node-cache.bash): datasets below NODE_CACHE_DATASETS
  # are served by one root daemon per node, shared by every job and kept
  # between them.
  NODE_CACHE=no
  NODE_CACHE_DATASETS=
  NODE_CACHE_ROOT=/run/tierfs-node
  NODE_CACHE_TIER_ROOT=
  NODE_CACHE_RAM_MB=0
  NODE_CACHE_TIER_MB=0
  NODE_CACHE_IDLE=3600
  NODE_CACHE_USER_SHARE=50
  local conf=${TIERFS_SLURM_CONF:-/etc/tierfs/slurm.conf}
  if [[ -e $conf ]]; then
    # It is sourced by root: refuse one that another user could have written.
    local owner mode
    owner=$(stat -c %u "$conf")
    mode=$(stat -c %a "$conf")
    if [[ $owner != 0 ]] || (((8#$mode & 8#022) != 0)); then
      log err "refusing $conf: it must be owned by root and writable only by root"
      return 1
    fi
    # shellcheck source=slurm.conf.example
    source "$conf"
  fi
  # Peers' settings reach a root daemon's command line: the site's mistakes
  # are the node's (exit 1), never a job's.
  if [[ $PEERS != auto && $PEERS != no ]]; then
    log err "PEERS=$PEERS: expected auto or no"
    return 1
  fi
  if ! [[ $PEER_PORT_BASE =~ ^[0-9]{1,5}$ && $PEER_PORT_COUNT =~ ^[0-9]{1,5}$ ]] ||
    ((10#$PEER_PORT_BASE < 1 || 10#$PEER_PORT_COUNT < 1 ||
      10#$PEER_PORT_BASE + 10#$PEER_PORT_COUNT > 65536)); then
    log err "PEER_PORT_BASE=$PEER_PORT_BASE, PEER_PORT_COUNT=$PEER_PORT_COUNT: expected a range" \
      "of 1 or more ports within 1-65535"
    return 1
  fi
  if ! [[ $PEER_TIMEOUT =~ ^[1-9][0-9]{0,2}$ ]] || ((PEER_TIMEOUT > 600)); then
    log err "PEER_TIMEOUT=$PEER_TIMEOUT: expected whole seconds, 1 to 600"
    return 1
  fi
  if ! [[ $PFS_FAIL_USERS =~ ^[0-9]{1,4}$ && $PFS_FAIL_WINDOW =~ ^[1-9][0-9]{0,6}$ ]]; then
    log err "PFS_FAIL_USERS=$PFS_FAIL_USERS, PFS_FAIL_WINDOW=$PFS_FAIL_WINDOW: expected a count" \
      "(0: never) and whole seconds"
    return 1
  fi
  if [[ $NODE_CACHE != yes && $NODE_CACHE != no ]] ||
    ! [[ $NODE_CACHE_RAM_MB =~ ^[0-9]{1,9}$ && $NODE_CACHE_TIER_MB =~ ^[0-9]{1,12}$ &&
      $NODE_CACHE_IDLE =~ ^[1-9][0-9]{0,7}$ && $NODE_CACHE_USER_SHARE =~ ^[1-9][0-9]?$|^100$ ]]; then
    log err "NODE_CACHE=$NODE_CACHE, NODE_CACHE_RAM_MB=$NODE_CACHE_RAM_MB," \
      "NODE_CACHE_TIER_MB=$NODE_CACHE_TIER_MB, NODE_CACHE_IDLE=$NODE_CACHE_IDLE," \
      "NODE_CACHE_USER_SHARE=$NODE_CACHE_USER_SHARE: expected yes or no, sizes in MB, whole" \
      "seconds and a percent (1-100)"
    return 1
  fi
  local check checks=()
  read -r -a checks <<<"$NODE_CACHE_DATASETS"
  for check in "${checks[@]}"; do
    if [[ $check != /* || /$check/ == */../* || /$check/ == */./* || $check == *,* ]]; then
      log err "NODE_CACHE_DATASETS: '$check' is not an absolute path without '.', '..' or ','"
      return 1
    fi
  done
  read -r -a checks <<<"$PFS_CHECK"
  for check in "${checks[@]}"; do
    if [[ $check != /* ]]; then
      log err "PFS_CHECK: '$check' is not an absolute path"
      return 1
    fi
  done
  if [[ -n $MUNGE_SOCKET && $MUNGE_SOCKET != /* ]] || [[ $MUNGE_SOCKET == *[,\\]* ]]; then
    log err "MUNGE_SOCKET=$MUNGE_SOCKET: expected an absolute path without ',' or '\\'"
    return 1
  fi
  # mountinfo shows canonical paths: compare like with like. The last
  # component of a directory the scripts make is never resolved: a symlink
  # there is refused (private_root_dir), not followed.
  LOCAL_SCRATCH=$(realpath -m -- "$LOCAL_SCRATCH")
  TIER_ROOT=${TIER_ROOT:-$LOCAL_SCRATCH/tierfs-slurm}
  NODE_CACHE_TIER_ROOT=${NODE_CACHE_TIER_ROOT:-$LOCAL_SCRATCH/tierfs-node}
  NODE_CACHE_ROOT=$(canonical_parent "$NODE_CACHE_ROOT")
  NODE_CACHE_TIER_ROOT=$(canonical_parent "$NODE_CACHE_TIER_ROOT")
  MOUNT_ROOT=$(canonical_parent "$MOUNT_ROOT")
  STATE_ROOT=$(canonical_parent "$STATE_ROOT")
  TIER_ROOT=$(canonical_parent "$TIER_ROOT")
}

# $1 with its parent directory canonical and its last component as given.
canonical_parent() {
  local path=${1%/}
  printf '%s/%s' "$(realpath -m -- "$(dirname -- "$path")")" "$(basename -- "$path")"
}

# ---- directories only root may change ----

# The owner, octal mode and type of $1, not following a symlink, within
# STEP_TIMEOUT: a name in a directory others may write to can be someone's
# hung FUSE mount.
lstat() { timeout -k 2 "${STEP_TIMEOUT:-10}" stat -c '%u %a %F' -- "$1"; }

# 0 if $1 exists (or cannot be told within STEP_TIMEOUT: then it is there).
# (stat without -L: a symlink is there, not followed; [[ -e ]] could hang.)
present() {
  local rc=0
  timeout -k 2 "${STEP_TIMEOUT:-10}" stat -c %u -- "$1" >/dev/null 2>&1 || rc=$?
  ((rc == 0 || rc == 124 || rc == 137))
}

# Returns 1 with a message unless every directory from / to $1 is owned by
# root and writable by others only with the sticky bit (as /tmp is): then
# no one but root can rename or replace anything along that path.
trusted_path() {
  local dir=$1 owner mode type
  while :; do
    read -r owner mode type <<<"$(lstat "$dir")" || return 1
    if [[ $type != directory || $owner != 0 ]] ||
      (((8#$mode & 8#022) != 0 && (8#$mode & 8#1000) == 0)); then
      log err "refusing $dir (owner uid $owner, mode $mode, $type): it must be a directory" \
        "owned by root, writable by others only with the sticky bit"
      return 1
    fi
    [[ $dir != / ]] || return 0
    dir=$(dirname -- "$dir")
  done
}

# Returns 0 if $1 is what private_root_dir makes: a directory of root's that
# no one else may write to, below a trusted path. Anything else (missing, or
# a symlink another user planted before the prolog ran) is not the scripts'
# to delete from: `rm -rf ROOT/JOBID` would follow it.
trusted_root() {
  local owner perm type
  read -r owner perm type <<<"$(lstat "$1" 2>/dev/null)" || return 1
  if [[ $type != directory || $owner != 0 ]] || (((8#$perm & 8#022) != 0)); then
    log err "not removing anything below $1 (owner uid ${owner:-?}, mode ${perm:-?}," \
      "${type:-missing}): not the root-owned directory the prolog makes"
    return 1
  fi
  trusted_path "$(dirname -- "$1")"
}

# Makes $1 (mode $2) a directory of root's that no one else may write to,
# below a trusted path. One that exists already is used only if it is that.
# In a sticky world-writable directory such as /tmp, anyone may take the name
# first: what another user made there is removed (sticky does not stop root),
# or moved aside when it cannot be (a mount inside), and the directory made
# again. Returns 2 if the name stays taken (another user's mount on it, or
# taken again each time): the caller does without it. Anything else
# unexpected is refused (1). Never looks inside what another user mounted.
private_root_dir() {
  local dir=$1 mode=$2 parent owner perm type attempt pperm
  parent=$(dirname -- "$dir")
  mkdir -p -- "$parent"
  trusted_path "$parent" || return 1
  read -r _ pperm _ <<<"$(lstat "$parent")"
  for attempt in 1 2 3; do
    if is_mounted "$dir"; then
      log warning "$dir is a mount point (another user's mount on the name): not using it"
      return 2
    fi
    mkdir -m "$mode" -- "$dir" 2>/dev/null || true  # EEXIST: look at what is there
    owner= perm= type=
    read -r owner perm type <<<"$(lstat "$dir")" || continue
    if [[ $type == directory && $owner == 0 ]] && (((8#$perm & 8#022) == 0)); then return 0; fi
    if [[ $owner == 0 ]] || (((8#$pperm & 8#1002) != 8#1002)); then break; fi
    log warning "$dir was made by uid $owner ($type), not by root: removing it (attempt $attempt)"
    if ! timeout -k 2 "$STEP_TIMEOUT" rm -rf --one-file-system -- "$dir" 2>/dev/null; then
      local aside
      aside="$dir.taken-by-uid$owner.$(date +%s).$$"
      if mv -T -- "$dir" "$aside" 2>/dev/null; then
        log warning "$dir could not be removed (a mount inside): moved aside to $aside"
      fi
    fi
  done
  if [[ -n $owner && $owner != 0 ]] && (((8#$pperm & 8#1002) == 8#1002)); then
    log warning "$dir is taken by uid $owner again and again: not using it"
    return 2
  fi
  log err "refusing $dir (owner uid ${owner:-?}, mode ${perm:-?}, ${type:-missing}): it must be" \
    "a directory owned by root and writable only by root"
  return 1
}

# ---- the job: who, what, where ----

# Sets JOB_ID, JOB_USER, JOB_UID, JOB_GID, MNT, TIER_DIR, STATE_DIR.
# Returns 1 if Slurm's variables are missing or malformed.
# shellcheck disable=SC2034  # the globals set here are for the caller
load_job() {
  JOB_ID=${SLURM_JOB_ID:-}
  if ! [[ $JOB_ID =~ ^[0-9]+$ ]]; then
    log err "SLURM_JOB_ID '${JOB_ID}' is not a job number (is this run by slurmd?)"
    return 1
  fi
  JOB_USER=${SLURM_JOB_USER:-}
  JOB_UID=${SLURM_JOB_UID:-}
  if [[ -z $JOB_UID && -n $JOB_USER ]]; then JOB_UID=$(id -u "$JOB_USER" 2>/dev/null || true); fi
  if ! [[ $JOB_UID =~ ^[0-9]+$ ]]; then
    log err "SLURM_JOB_UID '${JOB_UID}' is not a user id"
    return 1
  fi
  JOB_GID=${SLURM_JOB_GID:-}
  if [[ -z $JOB_GID ]]; then JOB_GID=$(id -g "$JOB_UID" 2>/dev/null || true); fi
  if ! [[ $JOB_GID =~ ^[0-9]+$ ]]; then JOB_GID=$JOB_UID; fi
  STATE_DIR=$STATE_ROOT/$JOB_ID
  JOB_MOUNT_DIR=$MOUNT_ROOT/$JOB_ID
  MNT=$JOB_MOUNT_DIR
  TIER_DIR=$TIER_ROOT/$JOB_ID
  # The prolog's choice, if it recorded one: only ever a name of this job's.
  if [[ -f $STATE_DIR/mount ]]; then
    local recorded
    recorded=$(<"$STATE_DIR/mount")
    if [[ $recorded == "$JOB_MOUNT_DIR" ||
      ($recorded == "$JOB_MOUNT_DIR"/* && ${recorded##*/} =~ ^[A-Za-z0-9_-][A-Za-z0-9._-]*$) ]]; then
      MNT=$recorded
    else
      log err "ignoring the recorded mount point '$recorded': not this job's"
    fi
  fi
}

# ---- what a job may ask for ----

# The syntax of each option a job may set (if the site's JOB_OPTIONS lists
# it): a whole value, so that no comma, backslash or path can get through.
# shellcheck disable=SC2034  # read by tierfs-prolog
declare -gA JOB_OPTION_SYNTAX=(
  [prefetch]='on-access|stage-in|order'
  [policy]='next-use|first-fit|lru'
  [lookahead]='[1-9][0-9]{0,6}'
  [promote_threads]='[1-9][0-9]{0,2}'
  [chunk_size]='[1-9][0-9]{0,9}[KMGkmg]?'
  [ram]='[1-9][0-9]{0,15}[KMGTkmgt]?'
  [log_level]='error|warning|info|debug'
)

# A job's ram= value in KiB (it passed JOB_OPTION_SYNTAX).
size_kb() {
  local v=${1^^} n
  n=${v%[KMGT]}
  case $v in
    *K) echo "$n" ;;
    *M) echo $((n * 1024)) ;;
    *G) echo $((n * 1024 * 1024)) ;;
    *T) echo $((n * 1024 * 1024 * 1024)) ;;
    *) echo $(((n + 1023) / 1024)) ;;
  esac
}

# The job's memory allocation on this node in KiB: SLURM_MEM_PER_NODE, or
# SLURM_MEM_PER_CPU times SLURM_CPUS_ON_NODE (MB), where slurmd sets them;
# else what slurmctld says (job_memory_from_slurmctld). Empty if none is
# known (memory is not a consumable resource here, no --mem).
job_memory_kb() {
  local per_node=${SLURM_MEM_PER_NODE:-} per_cpu=${SLURM_MEM_PER_CPU:-} cpus=${SLURM_CPUS_ON_NODE:-}
  if [[ $per_node =~ ^[1-9][0-9]*$ ]]; then
    echo $((per_node * 1024))
  elif [[ $per_cpu =~ ^[1-9][0-9]*$ && $cpus =~ ^[1-9][0-9]*$ ]]; then
    echo $((per_cpu * cpus * 1024))
  else
    job_memory_from_slurmctld
  fi
}

# Slurm 22.05's slurmd gives a prolog none of SLURM_MEM_*: ask slurmctld
# (`squeue -o %m`, under STEP_TIMEOUT) for the job's --mem. squeue prints a
# --mem-per-cpu the same way: that is taken as the node's whole allocation,
# which is never more than it. (Not `scontrol show job`: its one line holds
# the job's name and comment, which the job chooses and could make look
# like a larger allocation.) Prints nothing if it cannot tell.
job_memory_from_slurmctld() {
  local mem
  mem=$(timeout -k 2 "$STEP_TIMEOUT" "$SQUEUE" --noheader --jobs="$JOB_ID" --format=%m \
    </dev/null 2>/dev/null) || return 0
  [[ $mem =~ ^[[:space:]]*([1-9][0-9]{0,12})([KMGT]?)[[:space:]]*$ ]] || return 0
  size_kb "${BASH_REMATCH[1]}${BASH_REMATCH[2]:-M}"  # Slurm's unit: MB
}

# The first non-empty of the job's variables NAME: SPANK_TIERFS_NAME (set for
# the prolog by a SPANK plugin), then TIERFS_NAME.
job_var() {
  local spank=SPANK_TIERFS_$1 plain=TIERFS_$1
  if [[ -n ${!spank:-} ]]; then
    printf '%s' "${!spank}"
  else
    printf '%s' "${!plain:-}"
  fi
}

# The dataset the job asked for: its variables, then `--extra=tierfs=PATH`
# (SLURM_JOB_EXTRA), then the site's DATASET. Empty: the job wants no mount.
# SLURM_JOB_EXTRA is the job's text: split on commas by `read` (which never
# expands a glob or a variable), at most its first 64 KiB, and never
# evaluated.
job_dataset() {
  local d token extra=${SLURM_JOB_EXTRA:-} tokens=()
  d=$(job_var DATASET)
  if [[ -z $d && -n $extra ]]; then
    extra=${extra:0:65536}
    IFS=, read -r -a tokens <<<"${extra//[$'\n\r\t ']/,}"
    for token in "${tokens[@]}"; do
      if [[ $token == tierfs=* ]]; then d=${token#tierfs=}; fi
    done
  fi
  printf '%s' "${d:-$DATASET}"
}

# $1 KiB as a size a user reads (500M, 1.5G).
kib_shown() {
  awk -v k="$1" 'BEGIN { split("K M G T", u); i = 1; while (k >= 1024 && i < 4) { k /= 1024; i++ }
    printf (k == int(k) ? "%d%s" : "%.1f%s"), k, u[i] }'
}

# ---- what the job's user reads ----

# The file a batch job's output goes to (its StdErr, else StdOut), from
# SLURM_JOB_STDERR/SLURM_JOB_STDOUT, which slurmd gives the prolog and
# epilog of a batch job only (srun and salloc: empty). A name with %
# patterns is taken as scontrol shows it, expanded. The job's user chose
# it: it is only ever written as that user (job_output_append).
job_output_file() {
  local file=${SLURM_JOB_STDERR:-${SLURM_JOB_STDOUT:-}} line
  [[ -n $file && $file != /dev/null ]] || return 0
  if [[ $file == *%* ]]; then
    line=$(timeout -k 2 "$STEP_TIMEOUT" "$SCONTROL" -o show job "$JOB_ID" </dev/null 2>/dev/null) ||
      return 0
    [[ $line == *" StdErr="* ]] || return 0
    file=${line##* StdErr=}
    file=${file%% StdIn=*}
  fi
  if [[ $file != /* ]]; then file=${SLURM_JOB_WORK_DIR:-/nonexistent}/$file; fi
  printf '%s' "$file"
}

# Appends the lines $2... to the batch job's output file $1, as the job's
# user (its uid, gid and groups: only where that user may write, following
# only what that user may follow), under STEP_TIMEOUT (a FIFO, a hanging
# PFS). Never as root.
job_output_append() {
  local file=$1 groups=--clear-groups
  shift
  [[ -n $file ]] || return 0
  if getent passwd "$JOB_UID" >/dev/null; then groups=--init-groups; fi
  # shellcheck disable=SC2016  # expanded by the inner sh
  timeout -k 2 "$STEP_TIMEOUT" setpriv --reuid="$JOB_UID" --regid="$JOB_GID" "$groups" -- \
    sh -c 'f=$1; shift; umask 077; printf "%s\n" "$@" >>"$f"' sh "$file" "$@" \
    </dev/null >/dev/null 2>&1 || log warning "could not write to the job's output file $file"
}

# Says $1 on the stderr of the job's srun or salloc, where it waits for its
# allocation (`scontrol notify`; a batch job's goes nowhere: see
# job_output_append). Best effort.
job_notify() {
  timeout -k 2 "$STEP_TIMEOUT" "$SCONTROL" notify "$JOB_ID" "${1:0:1000}" \
    </dev/null >/dev/null 2>&1 || true
}

# ---- mounts and processes ----

# The mountinfo line of the mount at $1 (exact path), empty if none. Reads
# /proc, so it never touches the mount itself (which may hang or be ENOTCONN).
mount_entry() {
  local escaped=${1// /\\040}
  awk -v mp="$escaped" '$5 == mp { line = $0 } END { if (line != "") print line }' \
    /proc/self/mountinfo
}

is_mounted() { [[ -n $(mount_entry "$1") ]]; }

# PIDs of the tierfs processes run by root or the job's user whose
# arguments name the mount point $1 (found in /proc: the fallback when the
# prolog's pid file and the cgroup are gone). Another user's process that
# names the path is not the job's daemon, whatever its name and state.
daemon_pids() {
  local mnt=$1 pid arg name uid found=()
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    { read -r name <"/proc/$pid/comm"; } 2>/dev/null || continue  # no fork per process
    [[ $name == tierfs ]] || continue
    uid=$(awk '$1 == "Uid:" { print $2; exit }' "/proc/$pid/status" 2>/dev/null) || continue
    [[ $uid == 0 || $uid == "$JOB_UID" ]] || continue
    while IFS= read -r -d '' arg; do
      if [[ $arg == "$mnt" ]]; then
        found+=("$pid")
        break
      fi
    done <"/proc/$pid/cmdline" 2>/dev/null || true
  done
  if ((${#found[@]})); then printf '%s\n' "${found[@]}"; fi
}

# The PID the prolog started the daemon as (STATE_DIR/pid), if that process
# still runs tierfs with $1 among its arguments (a reused PID is not it).
recorded_daemon_pid() {
  local pid arg name
  [[ -f $STATE_DIR/pid ]] || return 0
  pid=$(<"$STATE_DIR/pid")
  [[ $pid =~ ^[1-9][0-9]{0,9}$ ]] || return 0
  { read -r name <"/proc/$pid/comm"; } 2>/dev/null || return 0
  [[ $name == tierfs ]] || return 0
  while IFS= read -r -d '' arg; do
    if [[ $arg == "$1" ]]; then
      echo "$pid"
      return 0
    fi
  done <"/proc/$pid/cmdline" 2>/dev/null || true
}

# Detaches every mount at or below $1 (deepest first), found in mountinfo
# (the mounts themselves are never touched: one may hang): a mount of the
# job's user's in the tier directory she was given ends with her job.
detach_mounts_below() {
  local dir=${1%/} escaped mp
  escaped=${dir// /\\040}
  while IFS= read -r mp; do
    [[ -n $mp ]] || continue
    mp=${mp//\\040/ }
    abort_connection "$mp"
    timeout -k 2 "$STEP_TIMEOUT" umount -l -- "$mp" 2>/dev/null ||
      log warning "could not detach $mp"
    log warning "detached $mp (a mount left in the job's tier directory)"
  done < <(awk -v d="$escaped" '$5 == d || index($5, d "/") == 1 { print $5 }' \
    /proc/self/mountinfo | sort -r)
}

# ---- the daemon's cgroup ----

# A daemon's cgroup, tierfs/NAME (default job_ID, the job's daemon) below
# the memory hierarchy (cgroup v2's root, or v1's memory controller);
# nothing with CGROUP=no or neither.
daemon_cgroup() {
  [[ $CGROUP != no ]] || return 0
  local name=${1:-job_$JOB_ID}
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    printf '%s\n' "/sys/fs/cgroup/tierfs/$name"
  elif [[ -d /sys/fs/cgroup/memory ]]; then
    printf '%s\n' "/sys/fs/cgroup/memory/tierfs/$name"
  fi
}

# Makes a daemon cgroup (tierfs/$2, default the job's) with a memory limit
# of $1 bytes; sets CG to it, or to '' (logged) if it cannot be made: the
# daemon then runs in slurmd's cgroup, as without CGROUP.
make_daemon_cgroup() {
  CG=$(daemon_cgroup "${2:-}")
  [[ -n $CG ]] || return 0
  local parent limit_file
  parent=$(dirname -- "$CG")
  if [[ $CG == /sys/fs/cgroup/tierfs/* ]]; then  # v2: the memory controller for the children
    echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    mkdir -p -- "$parent" 2>/dev/null || true
    echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null || true
    limit_file=memory.max
  else
    limit_file=memory.limit_in_bytes
  fi
  if ! mkdir -p -- "$CG" 2>/dev/null || [[ ! -w $CG/$limit_file ]] ||
    ! echo "$1" >"$CG/$limit_file" 2>/dev/null; then
    log warning "cannot make the memory cgroup $CG: the daemon runs in slurmd's cgroup"
    rmdir -- "$CG" 2>/dev/null || true
    CG=
  fi
}

# PIDs in the job's daemon cgroup.
cgroup_pids() {
  local cg
  cg=$(daemon_cgroup)
  if [[ -n $cg && -r $cg/cgroup.procs ]]; then cat -- "$cg/cgroup.procs" 2>/dev/null || true; fi
}

# Ends every process left in the job's daemon cgroup (whatever its name:
# a child the daemon started, a process moved there) and removes it. 1 if
# one survived SIGKILL.
end_daemon_cgroup() {
  local cg pids=()
  cg=$(daemon_cgroup)
  [[ -n $cg && -d $cg ]] || return 0
  mapfile -t pids < <(cgroup_pids)
  if ((${#pids[@]})); then
    log warning "ending ${#pids[@]} process(es) left in $cg: ${pids[*]}"
    if [[ -w $cg/cgroup.kill ]]; then echo 1 >"$cg/cgroup.kill" 2>/dev/null || true; fi
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait_gone 5 "${pids[@]}" || { log err "${pids[*]} survived SIGKILL in $cg"; return 1; }
  fi
  local tries
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    rmdir -- "$cg" 2>/dev/null && return 0
    sleep 0.1
  done
  log warning "cannot remove the cgroup $cg"
}

# Waits up to $1 seconds for every PID in the rest of the arguments to exit.
wait_gone() {
  local deadline=$((SECONDS + $1)) pid alive
  shift
  while :; do
    alive=0
    for pid in "$@"; do
      if [[ -d /proc/$pid ]] && [[ $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
        alive=1
      fi
    done
    ((alive)) || return 0
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# Aborts the FUSE connection of the mount at $1, so that every process blocked
# on it gets ENOTCONN instead of waiting for a daemon that will not answer.
abort_connection() {
  local entry dev minor
  entry=$(mount_entry "$1")
  [[ -n $entry ]] || return 0
  dev=$(awk '{ print $3 }' <<<"$entry")
  minor=${dev#*:}
  if [[ -w /sys/fs/fuse/connections/$minor/abort ]]; then
    echo 1 >"/sys/fs/fuse/connections/$minor/abort" || true
    log warning "aborted FUSE connection $minor of $1"
  fi
}

# Unmounts $1, stops its daemon and removes the job's tier data and state.
# Every step is bounded. Returns 1 only if the node is left unhealthy: the
# mount is still there or a daemon survived SIGKILL.
cleanup_job() {
  local mnt=$1 t=$STEP_TIMEOUT pids=() ours=() healthy=0
  # The daemon by its cgroup (any name) and the prolog's pid file: one that
  # survives SIGKILL is the node's to show. By its arguments (the fallback),
  # one that survives is logged, not blamed on the node: it may be the
  # job's user's own process stuck on her own file system.
  mapfile -t ours < <(cgroup_pids; recorded_daemon_pid "$mnt")
  mapfile -t pids < <(daemon_pids "$mnt")
  pids+=("${ours[@]}")
  if is_mounted "$mnt"; then
    # A live daemon exits by itself once unmounted; a dead one left ENOTCONN.
    if ! timeout -k 2 "$t" fusermount3 -u "$mnt" 2>/dev/null; then
      log warning "fusermount3 -u $mnt failed (busy, or the daemon hangs)"
    fi
  fi
  if ((${#pids[@]})) && ! wait_gone "$t" "${pids[@]}"; then
    log warning "tierfs (pid ${pids[*]}) still running: SIGTERM"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    if ! wait_gone "$t" "${pids[@]}"; then
      log warning "tierfs (pid ${pids[*]}) ignored SIGTERM for ${t}s: SIGKILL"
      kill -KILL "${pids[@]}" 2>/dev/null || true
      if ((${#ours[@]})) && ! wait_gone 5 "${ours[@]}"; then
        log err "tierfs (pid ${ours[*]}) survived SIGKILL"
        healthy=1
      elif ! wait_gone 5 "${pids[@]}"; then
        log warning "a tierfs process naming $mnt (pid ${pids[*]}, not the prolog's) survived" \
          "SIGKILL"
      fi
    fi
  fi
  if is_mounted "$mnt"; then
    abort_connection "$mnt"
    timeout -k 2 "$t" fusermount3 -uz "$mnt" 2>/dev/null ||
      timeout -k 2 "$t" umount -l "$mnt" 2>/dev/null || true
    if is_mounted "$mnt"; then
      log err "$mnt is still mounted after a lazy unmount"
      healthy=1
    else
      log warning "$mnt was detached lazily"
    fi
  fi
  end_daemon_cgroup || healthy=1
  remove_tier_data
  # The mount point, with whatever the daemon's user put in it (rm neither
  # follows a symlink nor crosses into another file system).
  if [[ -d $mnt && ($mnt == "$JOB_MOUNT_DIR" || $mnt == "$JOB_MOUNT_DIR"/*) ]] &&
    ! is_mounted "$mnt"; then
    rmdir "$mnt" 2>/dev/null || timeout -k 2 "$t" rm -rf --one-file-system -- "$mnt" 2>/dev/null ||
      true
  fi
  if [[ -d $JOB_MOUNT_DIR ]]; then rmdir "$JOB_MOUNT_DIR" 2>/dev/null || true; fi
  if [[ -e $STATE_DIR || -L $STATE_DIR ]] && trusted_root "$STATE_ROOT"; then rm -rf "$STATE_DIR"; fi
  return "$healthy"
}

# Removes the job's tier directory (never across a file system boundary).
remove_tier_data() {
  detach_mounts_below "$TIER_DIR"
  present "$TIER_DIR" || return 0
  trusted_root "$TIER_ROOT" || return 0
  if is_mounted "$TIER_DIR"; then
    log err "$TIER_DIR is still a mount point: not removing it"
    return 0
  fi
  if ! timeout -k 2 "$((STEP_TIMEOUT * 6))" rm -rf --one-file-system -- "$TIER_DIR"; then
    log err "could not remove the tier data in $TIER_DIR"
  fi
}
