/*
 * harness.h: helpers shared by the tests.  rh_test_simulate() runs one simulated job in a forked
 * child, because SimGrid runs one job per process; the child's exit status says whether every
 * rank returned 0.  rh_test_cluster() builds a cluster description for tests.
 */
#ifndef REHEARSAL_TEST_HARNESS_H
#define REHEARSAL_TEST_HARNESS_H

#include "internal.h"

/* Cluster of `nodes` nodes with the given slots (NULL: `per_node` GPUs on each). */
rh_cluster rh_test_cluster(int nodes, int per_node, const int *slots);

/* Runs fn on every rank of cl with settings s in a child process; returns the child's exit code
 * (0 when every rank returned 0).  When end_time is non-NULL it receives the job's end time. */
int rh_test_simulate(const rh_cluster *cl, const rh_settings *s, rh_rank_fn fn, void *arg,
                     double *end_time);

/* What a simulated job may add to the cluster: faults, elastic training, a restart policy (any
 * may be NULL). */
typedef struct rh_test_job {
  const rh_fault_plan *faults;
  const rh_elastic_config *elastic;
  const rh_restart_config *restart;
  long *replayed; /* out (may be NULL): collectives the simulator replayed at their price */
} rh_test_job;

/* As rh_test_simulate, with job's additions; the job log's events are copied into events (up to
 * max; shared with the child, may be NULL) and their count returned in *nevents. */
int rh_test_simulate_job(const rh_cluster *cl, const rh_settings *s, const rh_test_job *job,
                         rh_rank_fn fn, void *arg, double *end_time, rh_event *events,
                         int max, int *nevents);
/* A benchmark's BENCH_STEPS from the environment into *steps (left as it is when unset): a whole
 * number from `min` to 100000; anything else is said on stderr, naming `prog`, and gives false. */
bool rh_test_bench_steps(const char *prog, int min, int *steps);
/* bench_scale's cluster (bench_floor measures SimGrid alone on the same): `gpus` / 8 nodes of 8
 * GPUs of RH_TEST_BENCH_FLOPS, 400 GB/s inside a node, 8 x 400 Gb/s NICs, exact network. */
#define RH_TEST_BENCH_FLOPS 100e12
rh_cluster rh_test_bench_cluster(int gpus);
/* Seconds on the monotonic clock, for benchmarks. */
double rh_test_wall(void);
/* Shared memory for a child to write into (zeroed); never freed (test processes are short). */
void *rh_test_shared(size_t bytes);

/* Runs a command line (argv, NULL-terminated) and returns its exit code; its stderr goes to
 * err_path when non-NULL. */
int rh_test_spawn(char *const argv[], const char *out_path, const char *err_path);
/* As rh_test_spawn, with the child's stderr kept in a temporary file: when its exit code is not
 * `expect`, the command line, the code and that stderr are shown (cmocka's print_error), so that
 * a failing assertion on the code says why.  Returns the exit code. */
int rh_test_spawn_expect(char *const argv[], const char *out_path, int expect);
/* As rh_test_spawn, and the child's peak resident memory in KiB into *maxrss_kib. */
int rh_test_spawn_rss(char *const argv[], const char *out_path, const char *err_path,
                      long *maxrss_kib);

/* Whether a_dir/name and b_dir/name hold the same bytes; says which differ (print_error). */
bool rh_test_same_file(const char *a_dir, const char *b_dir, const char *name);

/* The whole content of a file, NUL-terminated (caller frees), or NULL.  Under AddressSanitizer
 * its note on SimGrid's stack switching (not a finding) is left out. */
char *rh_test_slurp(const char *path);

/* A new temporary directory /tmp/rehearsal-NAME-XXXXXX into dir (64 bytes); 0 on success.
 * rh_test_rmdir removes it with everything in it. */
int rh_test_mkdtemp(char *dir, const char *name);
int rh_test_rmdir(const char *dir);

/* The check lines of a run's report ("  PASS  name ...", FAIL, SKIP, ----), less failures_noticed,
 * which is judged from the simulator's job log alone: whole, or (names_only) as "  PASS name"
 * and less commit_interval too, for runs whose figures differ (caller frees). */
char *rh_test_verdicts(const char *text, bool names_only);

/* "dir/name" in one of a few rotating static buffers (valid for the next three calls). */
char *rh_test_path(const char *dir, const char *name);

/* A file that is what it claims: a PNG (its signature, more than 1 KiB), an SVG that parses as XML
 * (xmllint where there is one).  False with a message on stderr. */
bool rh_test_png_ok(const char *path);
bool rh_test_svg_ok(const char *path);

/* Default settings (the environment ignored) with the given timeout in seconds. */
rh_settings rh_test_settings(double timeout);

#endif
