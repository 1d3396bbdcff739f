/* tierfs_spank: the sbatch, salloc and srun options that ask tierfs-prolog
 * for a dataset mount.
 *
 *   --tierfs=PATH              the dataset (an absolute path)
 *   --tierfs-mount=NAME        mount at MOUNT_ROOT/JOBID/NAME instead
 *   --tierfs-options=LIST      tierfs options, e.g. prefetch=order,ram=64G
 *
 * In the allocator (sbatch, salloc) and local (srun) contexts each given value
 * is checked for its shape here, so a mistake is refused at submit with a
 * message, and set in the job control environment as TIERFS_DATASET,
 * TIERFS_MOUNT and TIERFS_OPTIONS; slurmd hands those to the prolog and
 * epilog as SPANK_TIERFS_DATASET, ... This plugin is a convenience, not a
 * gate: the prolog checks every value again, and the options against the
 * site's allow-list (tools/slurm/README.md).
 *
 * plugstack.conf:  optional /usr/lib/tierfs/slurm/tierfs_spank.so
 * Built against one Slurm release: slurmd and the clients load it only if
 * their major.minor version is the one it was built with. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <slurm/spank.h>
#include <stdlib.h>
#include <string.h>

SPANK_PLUGIN(tierfs, 1);

/* Bounds of what the prolog accepts (tierfs-prolog, check_job_options). */
enum {
  kDatasetMax = 4095, /* PATH_MAX - 1 */
  kMountNameMax = 64,
  kOptionsMax = 1024,
};

enum tierfs_option { kDataset = 1, kMount, kOptions };

/* The values given on this command line ("" if not given). Only this
 * process's option parsing writes them: no lock. */
static char dataset[kDatasetMax + 1];
static char mount_name[kMountNameMax + 1];
static char options[kOptionsMax + 1];

/* Returns the length of s, or -1 if it is longer than max. */
static long bounded_length(const char* s, size_t max) {
  size_t n = strnlen(s, max + 1);
  return n > max ? -1 : (long)n;
}

/* Returns the first byte of s that is a control character (a newline
 * included), or NULL. */
static const char* control_char(const char* s) {
  for (; *s != '\0'; ++s) {
    if ((unsigned char)*s < 0x20 || *s == 0x7f) return s;
  }
  return NULL;
}

static int is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

/* Every check below returns NULL if the value has the shape the prolog
 * takes, else what is wrong with it. */

static const char* dataset_problem(const char* v) {
  if (v[0] != '/') return "is not an absolute path";
  if (bounded_length(v, kDatasetMax) < 0) return "is longer than 4095 bytes";
  if (control_char(v) != NULL) return "contains a control character (a newline?)";
  return NULL;
}

/* The prolog's rule: letters, digits, '.', '_', '-', not starting with '.',
 * at most 64 characters. */
static const char* mount_problem(const char* v) {
  long n = bounded_length(v, kMountNameMax);
  if (n <= 0) return n == 0 ? "is empty" : "is longer than 64 characters";
  if (v[0] == '.') return "starts with '.'";
  for (const char* p = v; *p != '\0'; ++p) {
    if (!is_name_char(*p)) return "is not a name (letters, digits, '.', '_', '-')";
  }
  return NULL;
}

/* A comma list of NAME=VALUE: NAME of letters, digits and '_', VALUE
 * non-empty, with no space, backslash or control character. Which names and
 * values a job may set is the site's choice, checked by the prolog. */
static const char* options_problem(const char* v) {
  if (bounded_length(v, kOptionsMax) < 0) return "is longer than 1024 bytes";
  if (control_char(v) != NULL) return "contains a control character (a newline?)";
  if (v[0] == '\0') return "is empty";
  const char* item = v;
  while (*item != '\0') {
    const char* end = strchr(item, ',');
    if (end == NULL) end = item + strlen(item);
    const char* eq = memchr(item, '=', (size_t)(end - item));
    if (eq == NULL || eq == item) return "has an item that is not NAME=VALUE";
    if (eq + 1 == end) return "has an option with an empty value";
    for (const char* p = item; p < eq; ++p) {
      if (!is_name_char(*p) || *p == '.' || *p == '-')
        return "has an option name that is not a name";
    }
    for (const char* p = eq + 1; p < end; ++p) {
      if (*p == ' ' || *p == '\\') return "has a value with a space or a backslash";
    }
    item = *end == ',' ? end + 1 : end;
  }
  return NULL;
}

/* Option callback: checks `arg` and keeps it. A non-zero return makes
 * sbatch/salloc/srun refuse the option (they exit before submitting). */
static int take_option(int which, const char* arg, int remote) {
  static const char* const flag[] = {"", "--tierfs", "--tierfs-mount", "--tierfs-options"};
  const char* problem;
  char* into;
  if (arg == NULL) arg = "";
  switch (which) {
    case kDataset:
      problem = dataset_problem(arg);
      into = dataset;
      break;
    case kMount:
      problem = mount_problem(arg);
      into = mount_name;
      break;
    case kOptions:
      problem = options_problem(arg);
      into = options;
      break;
    default:
      return -1;
  }
  if (problem != NULL) {
    /* The value may hold a newline or be long: quote at most 200 bytes of its first line. */
    int shown = (int)strcspn(arg, "\n\r");
    if (shown > 200) shown = 200;
    slurm_error("tierfs: %s='%.*s' %s (see /usr/lib/tierfs/slurm/README.md)", flag[which], shown,
                arg, problem);
    return -1;
  }
  (void)remote; /* slurmstepd sees the same values: nothing more to do there */
  memcpy(into, arg, strlen(arg) + 1); /* fits: each check bounds the length */
  return 0;
}

/* Registered by slurm_spank_init: sbatch and salloc ignore an exported
 * spank_options table. */
static struct spank_option tierfs_options[] = {
    {"tierfs", "PATH",
     "Mount the dataset PATH with tierfs on every node of the job, at "
     "MOUNT_ROOT/$SLURM_JOB_ID (site-configured, e.g. /mnt/tierfs/$SLURM_JOB_ID).",
     1, kDataset, take_option},
    {"tierfs-mount", "NAME",
     "With --tierfs: mount at MOUNT_ROOT/$SLURM_JOB_ID/NAME (letters, digits, '.', '_', '-').", 1,
     kMount, take_option},
    {"tierfs-options", "LIST",
     "With --tierfs: tierfs options, e.g. prefetch=order,ram=64G (the site says which are "
     "allowed).",
     1, kOptions, take_option},
};

/* In every context, so that slurmstepd knows the options srun passes on. */
int slurm_spank_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  spank_context_t context = spank_context();
  for (size_t i = 0; i < sizeof tierfs_options / sizeof tierfs_options[0]; ++i) {
    spank_err_t rc = spank_option_register(sp, &tierfs_options[i]);
    if (rc != ESPANK_SUCCESS && (context == S_CTX_ALLOCATOR || context == S_CTX_LOCAL)) {
      slurm_error("tierfs: cannot register --%s: %s", tierfs_options[i].name, spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

static int set_for_prolog(spank_t sp, const char* name, const char* value) {
  if (value[0] == '\0') return 0;
  spank_err_t rc = spank_job_control_setenv(sp, name, value, 1);
  if (rc != ESPANK_SUCCESS) {
    slurm_error("tierfs: cannot pass %s to the prolog: %s", name, spank_strerror(rc));
    return -1;
  }
  return 0;
}

/* After the options are parsed, in sbatch, salloc and srun: hand the values
 * to the prolog. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  spank_context_t context = spank_context();
  if (context != S_CTX_ALLOCATOR && context != S_CTX_LOCAL) return 0;
  /* An srun inside an allocation makes a step, not a job: no prolog runs. */
  if (context == S_CTX_LOCAL && getenv("SLURM_JOB_ID") != NULL &&
      (dataset[0] != '\0' || mount_name[0] != '\0' || options[0] != '\0')) {
    slurm_info(
        "tierfs: the --tierfs options of an srun inside job %s are ignored: the job's "
        "mount was made when it was allocated",
        getenv("SLURM_JOB_ID"));
    return 0;
  }
  if (set_for_prolog(sp, "TIERFS_DATASET", dataset) != 0 ||
      set_for_prolog(sp, "TIERFS_MOUNT", mount_name) != 0 ||
      set_for_prolog(sp, "TIERFS_OPTIONS", options) != 0) {
    return -1;
  }
  return 0;
}
