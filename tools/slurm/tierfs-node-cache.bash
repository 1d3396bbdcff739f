# shellcheck shell=bash
# The node cache: one root daemon per dataset and node, shared by every job
# (of any user) that reads the dataset there, kept between jobs (sourced by
# tierfs-prolog and tierfs-epilog after tierfs-slurm-lib.bash).
#
# A dataset equal to or below one of NODE_CACHE_DATASETS is served by the
# node's cache of it: NODE_CACHE_ROOT/KEY/mnt, mounted by root with
# allow_other (every open decided by SOURCE as its caller, ACLs included),
# where KEY names the dataset's canonical path. A job attaches with a bind
# mount of it at its own mount point and detaches in its epilog; the daemon
# outlives them. It leaves by itself (idle_exit) once no job has used it for
# NODE_CACHE_IDLE seconds; its directory tier (NODE_CACHE_TIER_ROOT/KEY)
# stays for its next start, which validates it against SOURCE. All node
# caches share NODE_CACHE_RAM_MB and NODE_CACHE_TIER_MB: a cache that needs
# room takes it from caches no job uses, least recently used first.
#
# Contract: the caller has run load_config and load_job; the prolog runs
# these functions in its main shell (node_error and user_error exit).

# The key and canonical path of dataset $1 if the node cache serves it (sets
# NODE_KEY, NODE_SOURCE; returns 1 if not). The path is resolved as the
# job's user (realpath, under STEP_TIMEOUT): never walked by root. Both the
# path given and the path resolved must lie below a root the site listed.
node_cache_for() {
  NODE_KEY=
  NODE_SOURCE=
  [[ $NODE_CACHE == yes ]] || return 1
  below_node_cache_root "$1" || return 1
  local canonical
  canonical=$(timeout -k 2 "$STEP_TIMEOUT" "${AS_JOB_USER[@]}" realpath -e -- "$1" \
    </dev/null 2>/dev/null) || return 1
  below_node_cache_root "$canonical" || {
    log info "$1 resolves to $canonical, outside NODE_CACHE_DATASETS: a mount of the job's own"
    return 1
  }
  NODE_SOURCE=$canonical
  NODE_KEY=$(printf '%s' "$canonical" | sha256sum | cut -c1-16)
}

# 0 if $1, an absolute path with no '.' or '..' component, is one of
# NODE_CACHE_DATASETS or below one (compared as text: nothing resolved).
below_node_cache_root() {
  local path=$1 root roots=()
  [[ $path == /* && /$path/ != */./* && /$path/ != */../* ]] || return 1
  while [[ $path == *//* ]]; do path=${path//\/\//\/}; done
  path=${path%/}
  read -r -a roots <<<"$NODE_CACHE_DATASETS"
  for root in "${roots[@]}"; do
    root=${root%/}
    [[ $path == "$root" || $path == "$root"/* ]] && return 0
  done
  return 1
}

node_dir() { printf '%s/%s' "$NODE_CACHE_ROOT" "$1"; }

# The device (major:minor) of the node cache $1's mount, empty if none.
node_device() {
  local entry
  entry=$(mount_entry "$(node_dir "$1")/mnt")
  [[ -n $entry ]] && awk '{ print $3 }' <<<"$entry"
}

# How many jobs' bind mounts of cache $1 there are (mounts of its device
# beside its own), from mountinfo: never touching a mount.
node_binds() {
  local dev
  dev=$(node_device "$1")
  [[ -n $dev ]] || { echo 0; return 0; }
  awk -v d="$dev" '$3 == d { n++ } END { print (n > 1 ? n - 1 : 0) }' /proc/self/mountinfo
}

# 0 if cache $1's daemon runs (its pid file names a tierfs process whose
# arguments name the cache's mount: a reused pid is not it) and its mount
# is there.
node_alive() {
  local dir pid name
  dir=$(node_dir "$1")
  [[ -f $dir/pid ]] || return 1
  pid=$(<"$dir/pid")
  [[ $pid =~ ^[1-9][0-9]{0,9}$ ]] || return 1
  { read -r name <"/proc/$pid/comm"; } 2>/dev/null || return 1
  [[ $name == tierfs ]] || return 1
  local arg named=0
  while IFS= read -r -d '' arg; do
    if [[ $arg == "$dir/mnt" ]]; then named=1; fi
  done <"/proc/$pid/cmdline" 2>/dev/null || true
  ((named)) && [[ -n $(node_device "$1") ]]
}

node_cgroup() { daemon_cgroup "node_$1"; }

# Stops cache $1's daemon (unmount; then SIGTERM, SIGKILL, each bounded) and
# clears a stale mount. Its directory tier stays. 1 if something survived.
node_stop() {
  local dir pids=() cg
  dir=$(node_dir "$1")
  cg=$(node_cgroup "$1")
  if [[ -n $cg && -r $cg/cgroup.procs ]]; then mapfile -t pids <"$cg/cgroup.procs"; fi
  if [[ -f $dir/pid ]]; then pids+=("$(<"$dir/pid")"); fi
  if is_mounted "$dir/mnt"; then
    timeout -k 2 "$STEP_TIMEOUT" fusermount3 -u "$dir/mnt" 2>/dev/null || true
  fi
  if ((${#pids[@]})) && ! wait_gone "$STEP_TIMEOUT" "${pids[@]}"; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait_gone "$STEP_TIMEOUT" "${pids[@]}" || kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  if is_mounted "$dir/mnt"; then
    abort_connection "$dir/mnt"
    timeout -k 2 "$STEP_TIMEOUT" umount -l -- "$dir/mnt" 2>/dev/null || true
  fi
  rm -f -- "$dir/pid"
  if [[ -n $cg && -d $cg ]]; then rmdir -- "$cg" 2>/dev/null || true; fi
  ! is_mounted "$dir/mnt"
}

# A value the scripts recorded for cache $1 (KiB counts), 0 if none.
node_value() {
  local v=0 file
  file=$(node_dir "$1")/$2
  [[ -f $file ]] && v=$(<"$file")
  [[ $v =~ ^[0-9]{1,15}$ ]] || v=0
  echo "$v"
}

# The caches (keys) other than $1, least recently used first.
node_others_lru() {
  local d
  for d in "$NODE_CACHE_ROOT"/*/; do
    d=${d%/}
    d=${d##*/}
    [[ $d =~ ^[0-9a-f]{16}$ && $d != "$1" ]] || continue
    printf '%s %s\n' "$(stat -c %Y -- "$(node_dir "$d")/used" 2>/dev/null || echo 0)" "$d"
  done | sort -n | awk '{ print $2 }'
}

# RAM and directory tier in use by the caches other than $1: RAM by running
# ones (their budgets), tier space by every one that has a tier directory.
node_others_use() {
  local k ram=0 tier=0
  while read -r k; do
    [[ -n $k ]] || continue
    if node_alive "$k"; then ram=$((ram + $(node_value "$k" ram_kb))); fi
    if [[ -d $NODE_CACHE_TIER_ROOT/$k ]]; then tier=$((tier + $(node_value "$k" tier_kb))); fi
  done < <(node_others_lru "$1")
  echo "$ram $tier"
}

# Scans cache $NODE_KEY's dataset into its saved index (NODE_CACHE_ROOT/KEY/
# index; one that is there is checked, one stat per directory, and only
# changed directories listed again) and records the dataset's size for its
# budgets. The daemon then starts from the index. A failure is the job's or
# the node's (daemon_failed), as the daemon's own scan's would be.
node_scan() {
  local dir status=0 said bytes
  dir=$(node_dir "$NODE_KEY")
  said=$(timeout -k 5 "$MOUNT_TIMEOUT" "$TIERFS_BIN" index "$NODE_SOURCE" "$dir/index" \
    </dev/null 2>&1) || status=$?
  printf '%s\n' "$said" >>"$dir/daemon.log"
  if ((status == 124 || status == 137)); then
    JOB_OPTS=() JOB_RAM_KB=
    daemon_failed timeout "the node cache of $NODE_SOURCE: its scan did not end within" \
      "MOUNT_TIMEOUT=${MOUNT_TIMEOUT}s"
  elif ((status != 0)); then
    JOB_OPTS=() JOB_RAM_KB=
    daemon_failed "$status" "the node cache of $NODE_SOURCE: tierfs index exited with status $status"
  fi
  bytes=$(grep -o '[0-9]* files ([0-9]* bytes)' <<<"$said" | head -n 1 | grep -o '([0-9]*' |
    tr -d '(') || true
  if [[ $bytes =~ ^[0-9]+$ ]]; then echo $(((bytes + 1023) / 1024)) >"$dir/size_kb"; fi
}

# Sets NODE_RAM_KB and NODE_TIER_KB, the budgets of cache $1 (wanted: its
# dataset's size if a start before recorded it, else all there is), after
# taking room from caches no job uses, least recently used first: RAM by
# stopping a daemon, tier space by also removing its directory tier. The
# sum over the node's caches never exceeds NODE_CACHE_RAM_MB and
# NODE_CACHE_TIER_MB.
node_make_room() {
  local key=$1 size ram_total=$((NODE_CACHE_RAM_MB * 1024)) tier_total=$((NODE_CACHE_TIER_MB * 1024))
  local want_ram want_tier used_ram used_tier k
  size=$(node_value "$key" size_kb)
  want_ram=$ram_total want_tier=$tier_total
  if ((size > 0)); then
    ((size < want_ram)) && want_ram=$size
    ((size < want_tier)) && want_tier=$size
  fi
  read -r used_ram used_tier <<<"$(node_others_use "$key")"
  while read -r k; do
    ((used_ram + want_ram > ram_total || used_tier + want_tier > tier_total)) || break
    [[ -n $k ]] && (($(node_binds "$k") == 0)) || continue
    if node_alive "$k" && ((used_ram + want_ram > ram_total || used_tier + want_tier > tier_total)); then
      log info "node cache $k ($(node_dataset "$k")) is used by no job: stopped for room"
      node_stop "$k" || continue
    fi
    if ((used_tier + want_tier > tier_total)) && [[ -d $NODE_CACHE_TIER_ROOT/$k ]]; then
      log info "node cache $k: its directory tier removed for room"
      timeout -k 2 "$((STEP_TIMEOUT * 6))" rm -rf --one-file-system -- "$NODE_CACHE_TIER_ROOT/$k" ||
        true
    fi
    read -r used_ram used_tier <<<"$(node_others_use "$key")"
  done < <(node_others_lru "$key")
  NODE_RAM_KB=$((ram_total - used_ram < want_ram ? ram_total - used_ram : want_ram))
  NODE_TIER_KB=$((tier_total - used_tier < want_tier ? tier_total - used_tier : want_tier))
  ((NODE_RAM_KB >= RAM_MIN_MB * 1024)) || NODE_RAM_KB=0
  ((NODE_TIER_KB >= TIER_MIN_MB * 1024)) || NODE_TIER_KB=0
}

node_dataset() { cat -- "$(node_dir "$1")/dataset" 2>/dev/null || echo '?'; }

# Starts cache $NODE_KEY's daemon on $NODE_SOURCE as root from its saved
# index (node_scan made it), in a memory cgroup of its own (its RAM tier
# plus MEM_OVERHEAD_MB), and waits for its mount. A failure is the job's or
# the node's (daemon_failed). REQUIRES: the node's lock and the cache's
# (NODE_LOCK_FD, NODE_KEY_FD) held.
node_start() {
  local key=$NODE_KEY dir tier opts=() pid status=0 deadline
  dir=$(node_dir "$key")
  node_stop "$key" || node_error "the node cache $key's old mount cannot be cleared"
  mkdir -p -m 700 -- "$dir" "$dir/mnt"
  DAEMON_LOG=$dir/daemon.log
  node_make_room "$key"
  tier=$NODE_CACHE_TIER_ROOT/$key
  opts=(allow_other control_owner=any "idle_exit=$NODE_CACHE_IDLE"
    "stage_share=$NODE_CACHE_USER_SHARE")
  if ((NODE_RAM_KB > 0)); then opts+=("ram=${NODE_RAM_KB}K"); fi
  if ((NODE_TIER_KB > 0)); then
    private_root_dir "$NODE_CACHE_TIER_ROOT" 711 || node_error "no safe place for node cache tiers"
    mkdir -p -m 700 -- "$tier"
    opts+=("tier=${tier//,/\\,}:${NODE_TIER_KB}K")
  fi
  opts+=("index=${dir//,/\\,}/index")
  # The site's options, but for the sizes and places the budget sets.
  local item items=()
  IFS=, read -r -a items <<<"$DEFAULT_OPTIONS"
  for item in "${items[@]}"; do
    case $item in ram=* | tier=* | index=* | idle_exit=* | control_owner=* | stage_share=* | '') ;;
      *) opts+=("$item") ;;
    esac
  done
  NODE_OPTIONS=$(IFS=,; printf '%s' "${opts[*]}")
  local refused
  refused=$(options_refused "$NODE_OPTIONS")
  [[ -z $refused ]] || node_error "tierfs refuses the node cache's options ($NODE_OPTIONS): $refused"
  printf '%s\n' "$NODE_SOURCE" >"$dir/dataset"
  echo "$NODE_RAM_KB" >"$dir/ram_kb"
  echo "$NODE_TIER_KB" >"$dir/tier_kb"
  : >"$dir/used"
  make_daemon_cgroup $(((NODE_RAM_KB + MEM_OVERHEAD_MB * 1024) * 1024)) "node_$key"
  # shellcheck disable=SC2016  # expanded by the inner sh
  setsid sh -c 'if [ -n "$1" ]; then echo $$ >"$1/cgroup.procs" || exit 71; fi; shift; exec "$@"' \
    sh "$CG" "$TIERFS_BIN" -f "$NODE_SOURCE" "$dir/mnt" -o "$NODE_OPTIONS" \
    </dev/null >>"$DAEMON_LOG" 2>&1 {NODE_LOCK_FD}>&- {NODE_KEY_FD}>&- &  # locks: the prolog's
  pid=$!
  echo "$pid" >"$dir/pid"
  deadline=$((SECONDS + MOUNT_TIMEOUT))
  until is_mounted "$dir/mnt"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" || status=$?
      JOB_OPTS=() JOB_RAM_KB=
      daemon_failed "$status" "the node cache of $NODE_SOURCE: tierfs exited with status $status"
    fi
    if ((SECONDS >= deadline)); then
      node_stop "$key" || true
      JOB_OPTS=() JOB_RAM_KB=
      daemon_failed timeout "the node cache of $NODE_SOURCE was not mounted within" \
        "MOUNT_TIMEOUT=${MOUNT_TIMEOUT}s"
    fi
    sleep 0.1
  done
  log info "started the node cache $key of $NODE_SOURCE (tierfs pid $pid, ${CG:-no cgroup of its" \
    "own}, -o $NODE_OPTIONS)"
}

# Attaches the job to the node's cache of its dataset (NODE_KEY), starting
# it if it is not running, or again if SOURCE changed and no job reads it:
# the job's mount point becomes a bind mount of the cache's mount, and
# NODE_ATTACHED is 1. 0 if SOURCE changed while other jobs read the cache:
# the job then gets a mount of its own (the caller's). One prolog at a time
# per node (a lock, waited for at most MOUNT_TIMEOUT + 30 s: the time
# another prolog may take to start one).
NODE_ATTACHED=0
node_cache_attach() {
  local key=$NODE_KEY dir
  dir=$(node_dir "$key")
  private_root_dir "$NODE_CACHE_ROOT" 700 || node_error "NODE_CACHE_ROOT=$NODE_CACHE_ROOT cannot be trusted"
  mkdir -p -m 700 -- "$dir"
  # One job at a time attaches to a dataset's cache; a start's scan (minutes
  # on a large dataset) keeps no other dataset's jobs waiting.
  exec {NODE_KEY_FD}>"$dir/lock"
  if ! flock -w $((MOUNT_TIMEOUT + 30)) "$NODE_KEY_FD"; then
    pfs_failure "the node cache of $NODE_SOURCE was being started by another job for" \
      "$((MOUNT_TIMEOUT + 30))s"
  fi
  if node_alive "$key" && node_changed "$key"; then
    if (($(node_binds "$key") > 0)); then
      exec {NODE_KEY_FD}>&-
      note "$NODE_SOURCE changed on SOURCE while other jobs read this node's cache of it: this" \
        "job reads it through a mount of its own"
      return 0
    fi
    log info "$NODE_SOURCE changed on SOURCE since the node cache $key started: started again"
    node_stop "$key" || node_error "the node cache $key cannot be stopped"
    # A full scan: a file rewritten in place changes no directory.
    rm -f -- "$dir/index"
  fi
  if node_alive "$key"; then
    log info "attaching to the node cache $key of $NODE_SOURCE"
  else
    node_stop "$key" || node_error "the node cache $key's old mount cannot be cleared"
    DAEMON_LOG=$dir/daemon.log
    node_scan
    node_locked_start
  fi
  node_bind "$key"
  echo "$key" >"$STATE_DIR/node-cache"
  touch -- "$dir/used"
  exec {NODE_KEY_FD}>&-
  MOUNTED=1
  NODE_ATTACHED=1
  if ((${#JOB_OPTS[@]})) || [[ -n $JOB_RAM_KB ]]; then
    note "the node's cache of $NODE_SOURCE serves this job with the site's options; the job's" \
      "own (TIERFS_OPTIONS) do not apply"
  fi
  log info "mounted the node cache of $NODE_SOURCE at $MNT"
}

# node_start under the node's lock (budgets are the node's: one start at a
# time decides them), waited for at most MOUNT_TIMEOUT + 30 s. The dataset
# was scanned before (node_scan), outside it.
node_locked_start() {
  exec {NODE_LOCK_FD}>"$NODE_CACHE_ROOT/lock"
  if ! flock -w $((MOUNT_TIMEOUT + 30)) "$NODE_LOCK_FD"; then
    pfs_failure "the node's caches were busy (another start) for $((MOUNT_TIMEOUT + 30))s"
  fi
  node_start
  exec {NODE_LOCK_FD}>&-
}

# Binds cache $1's mount at the job's mount point. A request first (a stat
# of its root) restarts the daemon's idle clock; a daemon that had already
# decided to leave (idle_exit) just before is started again and bound anew.
node_bind() {
  local dir attempt
  dir=$(node_dir "$1")
  for attempt in 1 2; do
    timeout -k 2 "$STEP_TIMEOUT" stat -- "$dir/mnt/" >/dev/null 2>&1 || true
    if ! timeout -k 2 "$STEP_TIMEOUT" mount --bind -- "$dir/mnt" "$MNT"; then
      node_error "cannot bind the node cache's mount $dir/mnt at $MNT"
    fi
    node_alive "$1" && return 0
    log warning "the node cache $1 left as the job attached (attempt $attempt): started again"
    timeout -k 2 "$STEP_TIMEOUT" umount -l -- "$MNT" 2>/dev/null || true
    node_locked_start
  done
  node_error "the node cache $1 left twice as the job attached"
}

# 0 if SOURCE changed since cache $1's daemon took its snapshot (a file's
# size, times or inode, an entry added or removed), or if that cannot be
# told within 6 x STEP_TIMEOUT: the daemon compares (.tierfs/changes).
node_changed() {
  local said n
  if ! said=$(timeout -k 2 $((STEP_TIMEOUT * 6)) cat -- "$(node_dir "$1")/mnt/.tierfs/changes" \
    </dev/null 2>/dev/null) || [[ $said != *'"changed_files":'* ]]; then
    log warning "the node cache $1 cannot tell whether SOURCE changed (${said:-no answer within" \
      "$((STEP_TIMEOUT * 6))s}): taken as changed"
    return 0
  fi
  n=$(grep -o '"\(changed_files\|changed_dirs\|missing\)": *[0-9]*' <<<"$said" |
    awk -F: '{ n += $2 } END { print n + 0 }')
  if ((n > 0)); then log info "the node cache $1: SOURCE changed since it started: $said"; fi
  ((n > 0))
}

# Detaches the job from the node cache (its epilog): its bind mount goes,
# lazily if a process still holds it; the cache's daemon is never touched.
node_cache_detach() {
  local key
  [[ -f $STATE_DIR/node-cache ]] || return 0
  key=$(<"$STATE_DIR/node-cache")
  [[ $key =~ ^[0-9a-f]{16}$ ]] || return 0
  if is_mounted "$MNT" && ! timeout -k 2 "$STEP_TIMEOUT" umount -- "$MNT" 2>/dev/null; then
    timeout -k 2 "$STEP_TIMEOUT" umount -l -- "$MNT" 2>/dev/null || true
    log warning "detached $MNT lazily (still in use)"
  fi
  touch -- "$(node_dir "$key")/used" 2>/dev/null || true
  rm -f -- "$STATE_DIR/node-cache"
}
