/*
 * elastic.c: `rehearsal elastic`, Horovod's elastic driver (horovodrun --min-np) for real
 * processes.  It runs the program under `mpirun --enable-recovery`, so that a process that dies
 * or hangs does not take the others down, and forms each new world when the survivors of a
 * failure come to the rendezvous (runtime/mpi/elastic.c has the files they share).  Inside a
 * Slurm allocation mpirun takes the allocation's nodes and starts its daemons there with srun;
 * the program cannot be started by srun itself, because Slurm's PMIx plugin kills the whole step
 * when one process dies (its error handler, src/plugins/mpi/pmix/pmixp_client_v2.c, calls
 * slurm_kill_job_step on any PMIx error, a lost client included):
 *
 *   launch ──> world 0 ──a rank notices a failure──> rendezvous ──> world 1 ──> ... ──> done
 *
 * At a rendezvous it waits for every live process of the world, up to the scenario's rendezvous
 * timeout; those that do not come failed (killed, hung), and their hosts are blacklisted: every
 * process on them leaves.  The rest keep their order (Horovod's host order), up to max_np; below
 * min_np the job ends.  When every process of the last world has finished, processes that hung
 * are killed (mpirun waits for them otherwise), and the driver exits with the last world's rank 0
 * status.  Each process runs under `rehearsal elastic-rank`, which records how it ended.
 *
 * Host discovery (Horovod's --host-discovery-script: a command that prints "host:slots" lines, or
 * else the scenario's `elastic.discovery` changes, played on the job's clock) lets the job grow:
 * a process is started for every slot it may use (-np), and those of hosts not yet discovered
 * wait on standby.  The driver asks for the hosts every discovery_interval_s; a change that
 * alters the world is told to rank 0 (hosts.update), which raises it at the next commit, and the
 * world re-forms there: the hosts that stay keep their order, the added ones come last, a removed
 * one's processes leave.  Hosts that failed stay blacklisted, even when discovery lists them again.
 * On one machine (RH_MPI_GPUS_PER_NODE, or every process on one host) the hosts are the
 * scenario's nodes, "node0" to "nodeN" in a script's lines.
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- elastic-rank: one process, and how it ended ------------------------------------------- */

static volatile pid_t child;

static void kill_child(int sig) {
  (void)sig;
  if (child > 0) kill(child, SIGKILL); /* a process mpirun ends: it failed, or it hung */
}

/* A small file of the rendezvous directory, whole or not at all (rh_write_output). */
static void write_small(const char *dir, const char *name, int proc, const char *text) {
  char file[64];
  snprintf(file, sizeof file, "%s-%d", name, proc);
  rh_write_output(dir, file, text);
}

int rh_cmd_elastic_rank(int argc, char **argv) {
  const char *dir = getenv("RH_ELASTIC_DIR");
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = getenv("PMIX_RANK");
  if (!rank) rank = getenv("SLURM_PROCID");
  if (argc < 1 || !dir || !rank) {
    fprintf(stderr, "rehearsal elastic-rank: runs under `rehearsal elastic` (mpirun sets the rank, "
                    "the driver RH_ELASTIC_DIR)\n");
    return 2;
  }
  int proc = atoi(rank);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  char text[300];
  snprintf(text, sizeof text, "%s\n", host);
  write_small(dir, "host", proc, text);
  struct sigaction sa = {.sa_handler = kill_child};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("rehearsal elastic-rank: fork");
    return 1;
  }
  if (pid == 0) {
    execvp(argv[0], argv);
    fprintf(stderr, "rehearsal elastic-rank: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (WIFEXITED(status)) snprintf(text, sizeof text, "exit %d\n", WEXITSTATUS(status));
  else snprintf(text, sizeof text, "signal %d\n", WTERMSIG(status));
  write_small(dir, "status", proc, text);
  return rc;
}

/* ---- the driver ---------------------------------------------------------------------------- */

typedef struct proc {
  int node;           /* the scenario's node (its slot's), or the host's index (real hosts) */
  char host[256];
  bool ended;         /* its status is in */
  int exit_code;      /* -1: killed by a signal */
  int signal;
  bool arrived;       /* at the open rendezvous */
  double noticed;     /* seconds since the job began, its rank then, and what it saw */
  int rank;
  char what[600];
} proc;

typedef struct driver {
  const char *dir;
  const rh_scenario *sc;
  int nprocs;
  proc *procs;
  int *members, nmembers; /* the current world's processes, in rank order */
  int world;
  bool pretend;           /* one machine: nodes are the scenario's (RH_MPI_GPUS_PER_NODE) */
  double t0;
  double job_t0;          /* world 0 formed: the job's clock starts, as the simulator's does
                           * (the scenario's discovery changes play on it); 0 before */
  int resets;             /* worlds formed again after a failure */
  char short_of[96];      /* why the job ended below min_np ("" when it did not) */
  bool *told;             /* the processes told that the job ended: they end in turn */
  /* host discovery (NULL script and no scenario changes: none) */
  const char *script;
  bool discovering;
  int nnodes;
  int *slots;             /* by node: the slots discovery gives it now (0: not discovered) */
  bool *blacklisted;      /* by node: it failed; never taken again */
  int next_change;        /* the scenario's next discovery change */
  double next_poll;
  double update_stamp;    /* the last change that alters the world (0: none) */
  int update_kind;
} driver;

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_file(const char *dir, const char *name, int p) {
  char path[1100];
  snprintf(path, sizeof path, "%s/%s-%d", dir, name, p);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *text = calloc(1, 4096);
  if (text && fread(text, 1, 4095, f) == 0) {
    free(text);
    text = NULL;
  }
  fclose(f);
  return text;
}

/* The scenario's node of slot `s`. */
static int node_of_slot(const rh_cluster *cl, int s) {
  for (int n = 0; n < cl->nodes + cl->spares; n++) {
    int first = rh_cluster_first_slot(cl, n);
    if (s >= first && s < first + cl->gpus_per_node[n]) return n;
  }
  return -1;
}

/* Picks up the statuses, hosts and arrivals the processes wrote. */
static void look(driver *d) {
  for (int p = 0; p < d->nprocs; p++) {
    proc *q = &d->procs[p];
    if (!q->host[0]) {
      char *t = read_file(d->dir, "host", p);
      if (t) {
        t[strcspn(t, "\n")] = 0;
        snprintf(q->host, sizeof q->host, "%s", t);
        free(t);
      }
    }
    if (!q->ended) {
      char *t = read_file(d->dir, "status", p);
      if (t) {
        q->ended = true;
        q->exit_code = -1;
        if (sscanf(t, "exit %d", &q->exit_code) != 1) sscanf(t, "signal %d", &q->signal);
        free(t);
      }
    }
    if (!q->arrived) {
      char name[32];
      snprintf(name, sizeof name, "w%d-arrived", d->world);
      char *t = read_file(d->dir, name, p);
      if (t) {
        char host[256];
        if (sscanf(t, "%d %lf %255s", &q->rank, &q->noticed, host) == 3) {
          q->arrived = true;
          const char *what = strchr(t, '\n');
          snprintf(q->what, sizeof q->what, "%s", what ? what + 1 : "");
          q->what[strcspn(q->what, "\n")] = 0;
        }
        free(t);
      }
    }
  }
}

static void ranks_list(const driver *d, const bool *pick, char *buf, size_t len) {
  uint8_t *flags = calloc((size_t)d->nmembers + 1, 1);
  for (int r = 0; flags && r < d->nmembers; r++) flags[r] = pick[r];
  if (flags) rh__rank_list(flags, d->nmembers, 1, buf, len);
  else snprintf(buf, len, "?");
  free(flags);
}

/* Writes the driver's answer for world `gen`: its members in rank order, or (why not NULL) that
 * the job ends. */
static bool answer(const driver *d, int gen, const int *members, int n, const char *why) {
  char file[64];
  snprintf(file, sizeof file, "w%d.world", gen);
  size_t len = 16 * ((size_t)n + 1) + (why ? strlen(why) : 0);
  char *text = malloc(len);
  if (!text) return false;
  int off = snprintf(text, len, "%s", why ? "end " : "members");
  for (int r = 0; !why && r < n; r++) off += snprintf(text + off, len - (size_t)off, " %d", members[r]);
  snprintf(text + off, len - (size_t)off, "%s\n", why ? why : "");
  bool ok = rh_write_output(d->dir, file, text) == 0;
  free(text);
  return ok;
}

/* Tells the current world that its rank r died; returns the world. */
static int tell_broken(driver *d, int r) {
  const proc *q = &d->procs[d->members[r]];
  char file[64], text[128];
  snprintf(file, sizeof file, "w%d.broken", d->world);
  if (q->exit_code < 0)
    snprintf(text, sizeof text, "rank %d (node %d) was killed by signal %d\n", r, q->node, q->signal);
  else
    snprintf(text, sizeof text, "rank %d (node %d) exited with %d\n", r, q->node, q->exit_code);
  rh_write_output(d->dir, file, text);
  return d->world;
}

/* ---- host discovery ------------------------------------------------------------------------- */

/* Whether process p may be in a world: its host discovered, not blacklisted, and p among the
 * first `slots` processes of its host. */
static bool taken(const driver *d, int p) {
  int node = d->procs[p].node;
  if (node < 0 || node >= d->nnodes || d->blacklisted[node]) return false;
  int before = 0;
  for (int q = 0; q < p; q++) before += d->procs[q].node == node;
  return before < d->slots[node];
}

/* Whether process p, on standby, said lately that it is alive (its standby-P file is at most 5 s
 * old): one whose host died with it is never named in a world, where the others would wait for
 * it in MPI_Comm_create_group. */
static bool standby_alive(const driver *d, int p) {
  char path[1100];
  snprintf(path, sizeof path, "%s/standby-%d", d->dir, p);
  struct stat st;
  return stat(path, &st) == 0 && difftime(time(NULL), st.st_mtime) <= 5;
}

/* The node a discovered host name stands for: "nodeK" on one machine, else the process host's. */
static int node_named(const driver *d, const char *name) {
  if (d->pretend) {
    char *end;
    long k = strncmp(name, "node", 4) == 0 ? strtol(name + 4, &end, 10) : -1;
    return k >= 0 && k < d->nnodes && name[4] && !*end ? (int)k : -1;
  }
  for (int p = 0; p < d->nprocs; p++)
    if (strcmp(d->procs[p].host, name) == 0) return d->procs[p].node;
  return -1;
}

/* The hosts discovery gives now into slots[] (by node): from the script's "host:slots" lines, or
 * the scenario's changes up to now.  False when the script failed (the last answer stands). */
static bool discover(driver *d, int *slots) {
  const rh_scenario *sc = d->sc;
  if (!d->script) {
    for (int n = 0; n < d->nnodes; n++) slots[n] = d->slots[n];
    /* before world 0 the job has not started: MPI's start-up must not play the changes */
    double t = d->job_t0 > 0 ? now() - d->job_t0 : 0;
    for (; d->next_change < sc->elastic.nchanges && sc->elastic.changes[d->next_change].at_s <= t;
         d->next_change++) {
      const rh_scenario_change *c = &sc->elastic.changes[d->next_change];
      if (c->add >= 0 && c->add < d->nnodes) slots[c->add] = sc->cluster.gpus_per_node[c->add];
      if (c->remove >= 0 && c->remove < d->nnodes) slots[c->remove] = 0;
    }
    return true;
  }
  /* a script that hangs (a slow controller) must not stop the driver: a minute at most */
  char *cmd = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&cmd, &len);
  if (!m) return false;
  fputs("timeout 60 sh -c ", m);
  rh_cli_shell_word(m, d->script);
  if (fclose(m) != 0) {
    free(cmd);
    return false;
  }
  fflush(NULL);
  FILE *f = popen(cmd, "r");
  free(cmd);
  if (!f) return false;
  for (int n = 0; n < d->nnodes; n++) slots[n] = 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    char *colon = strrchr(line, ':');
    long k = 1; /* Horovod: a host without slots has one */
    if (colon) {
      *colon = 0;
      k = strtol(colon + 1, NULL, 10);
    }
    int node = line[0] ? node_named(d, line) : -1;
    if (node >= 0 && k > 0) slots[node] = (int)k;
    else if (line[0])
      fprintf(stderr, "rehearsal elastic: the discovery script names %s, which runs none of the "
                      "job's processes; left out\n", line);
  }
  int rc = pclose(f);
  if (rc != 0) {
    fprintf(stderr, "rehearsal elastic: the discovery script `%s` failed (exit %d); the hosts stay "
                    "as they were\n", d->script, WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    return false;
  }
  return true;
}

/* Asks for the hosts; a change that alters who is in the world is told to rank 0. */
static void poll_hosts(driver *d) {
  int *slots = calloc((size_t)d->nnodes + 1, sizeof(int));
  if (!slots || !discover(d, slots)) {
    free(slots);
    return;
  }
  int kind = 0;
  for (int n = 0; n < d->nnodes; n++) {
    if (slots[n] == d->slots[n]) continue;
    fprintf(stderr, "rehearsal elastic: +%.3f s: host discovery: node %d %s (%d slot%s)%s\n",
            now() - d->t0, n, slots[n] > d->slots[n] ? "added" : "removed", slots[n],
            slots[n] == 1 ? "" : "s", d->blacklisted[n] ? ", blacklisted: not taken" : "");
    if (!d->blacklisted[n]) kind |= slots[n] > d->slots[n] ? RH_HOSTS_ADDED : RH_HOSTS_REMOVED;
  }
  memcpy(d->slots, slots, (size_t)d->nnodes * sizeof(int));
  free(slots);
  /* does the world change?  Horovod tells the workers only then.  The world it would be, as a
   * rendezvous forms it: the members that stay in their order, then the added hosts' processes */
  int most = d->sc->elastic.max_np > 0 ? d->sc->elastic.max_np : d->nprocs, size = 0;
  bool differ = false;
  for (int r = 0; r < d->nmembers; r++) {
    int p = d->members[r];
    if (taken(d, p) && !d->procs[p].ended && size < most) differ = differ || d->members[size++] != p;
  }
  for (int p = 0; p < d->nprocs && size < most; p++) {
    bool member = false;
    for (int r = 0; r < d->nmembers; r++) member = member || d->members[r] == p;
    if (!member && taken(d, p) && !d->procs[p].ended && standby_alive(d, p)) {
      size++;
      differ = true;
    }
  }
  differ = differ || size != d->nmembers;
  if (!kind || !differ) return;
  d->update_stamp = now() - d->t0;
  d->update_kind |= kind;
  char text[64];
  snprintf(text, sizeof text, "%.6f %d\n", d->update_stamp, d->update_kind);
  rh_write_output(d->dir, "hosts.update", text);
}

/* Closes the rendezvous of the current world: blacklists the hosts of the processes that did not
 * come, forms the next world or ends the job.  False when the job ended. */
static bool close_rendezvous(driver *d) {
  const rh_scenario *sc = d->sc;
  int n = d->nmembers;
  bool *failed = calloc((size_t)n + 1, sizeof(bool)), *noticed = calloc((size_t)n + 1, sizeof(bool));
  bool *bad_node = calloc((size_t)d->nprocs + 64, sizeof(bool));
  int *next = calloc((size_t)d->nprocs + 1, sizeof(int));
  if (!failed || !noticed || !bad_node || !next) {
    free(failed);
    free(noticed);
    free(bad_node);
    free(next);
    return false;
  }
  int first = -1;
  for (int r = 0; r < n; r++) {
    proc *q = &d->procs[d->members[r]];
    failed[r] = !q->arrived;
    noticed[r] = q->arrived;
    if (failed[r]) bad_node[q->node] = true;
    if (failed[r] && d->blacklisted) d->blacklisted[q->node] = true;
    if (q->arrived && (first < 0 || q->noticed < d->procs[d->members[first]].noticed)) first = r;
  }
  int k = 0, most = sc->elastic.max_np > 0 ? sc->elastic.max_np : n;
  if (d->discovering) most = sc->elastic.max_np > 0 ? sc->elastic.max_np : d->nprocs;
  for (int r = 0; r < n && k < most; r++) {
    proc *q = &d->procs[d->members[r]];
    if (q->arrived && !bad_node[q->node] && (!d->discovering || taken(d, d->members[r])))
      next[k++] = d->members[r];
  }
  /* host discovery: the processes of added hosts, last, in their order */
  int grown = k;
  for (int p = 0; d->discovering && p < d->nprocs && k < most; p++) {
    bool member = false;
    for (int r = 0; r < n; r++) member = member || d->members[r] == p;
    if (!member && !d->procs[p].ended && taken(d, p) && standby_alive(d, p)) next[k++] = p;
  }
  grown = k - grown;
  char saw[256];
  ranks_list(d, noticed, saw, sizeof saw);
  fprintf(stderr, "rehearsal elastic: +%.3f s: world %d (%d ranks) broke: ", now() - d->t0,
          d->world, n);
  for (int r = 0; r < n; r++) {
    if (!failed[r]) continue;
    proc *q = &d->procs[d->members[r]];
    fprintf(stderr, "rank %d (%s %d) ", r, d->pretend ? "node" : q->host, q->node);
    if (q->ended && q->exit_code < 0) fprintf(stderr, "was killed by signal %d; ", q->signal);
    else if (q->ended) fprintf(stderr, "exited with %d; ", q->exit_code);
    else fprintf(stderr, "did not come to the rendezvous; ");
  }
  if (first >= 0) {
    proc *q = &d->procs[d->members[first]];
    fprintf(stderr, "ranks %s noticed, first rank %d, %.3f s into the job: %s\n", saw, first,
            q->noticed, q->what);
  } else {
    fprintf(stderr, "nobody noticed\n");
  }
  bool going = k >= sc->elastic.min_np && k > 0;
  if (going) {
    bool *stay = noticed; /* reused: the ranks of this world that go on */
    for (int r = 0; r < n; r++) {
      stay[r] = false;
      for (int j = 0; j < k; j++) stay[r] = stay[r] || next[j] == d->members[r];
    }
    char kept[256];
    ranks_list(d, stay, kept, sizeof kept);
    fprintf(stderr, "rehearsal elastic: world %d: %d ranks, ranks %s of world %d in order", d->world + 1,
            k, kept, d->world);
    if (grown > 0) fprintf(stderr, ", then %d from added hosts", grown);
    fprintf(stderr, "\n");
  } else {
    snprintf(d->short_of, sizeof d->short_of, "%d worker%s, min_np is %d", k,
             k == 1 ? " remains" : "s remain", sc->elastic.min_np);
    fprintf(stderr, "rehearsal elastic: the job ends: %s\n", d->short_of);
  }
  bool ok = answer(d, d->world + 1, next, k, going ? NULL : d->short_of);
  for (int r = 0; !going && d->told && r < n; r++)
    d->told[d->members[r]] = d->procs[d->members[r]].arrived;
  if (ok && going) {
    memcpy(d->members, next, (size_t)k * sizeof(int));
    d->nmembers = k;
    d->resets++; /* a reset is a world formed again: a job that ends here formed none */
    /* the new world holds every change seen so far: its rank 0, perhaps a process that never
     * saw the last stamp, must not take it for a new one */
    d->update_kind = 0;
    rh_write_output(d->dir, "hosts.update", "0 0\n");
  }
  d->world++;
  for (int p = 0; p < d->nprocs; p++) d->procs[p].arrived = false;
  free(failed);
  free(noticed);
  free(bad_node);
  free(next);
  return ok && going;
}

/* The driver's last line: the resets that formed a world again, why the job ended short of
 * min_np if it did, and how the last world's rank 0 ended (killed by signal `code`, or exited
 * with it). */
static void ended_line(const driver *d, double seconds, bool killed, int code, char *buf,
                       size_t len) {
  int k = snprintf(buf, len, "the job ended after %d reset%s, in %.3f s", d->resets,
                   d->resets == 1 ? "" : "s", seconds);
  if (d->short_of[0] && k >= 0 && (size_t)k < len)
    k += snprintf(buf + k, len - (size_t)k, ", when no world could form (%s)", d->short_of);
  if (k >= 0 && (size_t)k < len)
    snprintf(buf + k, len - (size_t)k, "; rank 0 of the last world %s %d",
             killed ? "was killed by signal" : "exited with", code);
}

/* mpirun's stderr passes through, less the line Open MPI 4.1's PMIx prints at each process
 * event under --enable-recovery ("PMIX ERROR: BAD-PARAM in file .../pmix_event_notification.c"),
 * which says nothing about the job. */
typedef struct relay {
  int fd;
  char buf[8192];
  size_t n;
} relay;

static void relay_line(const char *line, size_t len) {
  static const char noise[] = "PMIX ERROR: BAD-PARAM in file ../../../src/event/pmix_event_notification.c";
  for (size_t i = 0; i + sizeof noise - 1 <= len; i++)
    if (memcmp(line + i, noise, sizeof noise - 1) == 0) return;
  fwrite(line, 1, len, stderr);
}

/* Passes on what mpirun wrote, whole lines (all that is left when `flush`). */
static void relay_pump(relay *r, bool flush) {
  for (;;) {
    ssize_t got = r->fd >= 0 ? read(r->fd, r->buf + r->n, sizeof r->buf - r->n) : 0;
    if (got > 0) r->n += (size_t)got;
    size_t start = 0;
    for (size_t i = 0; i < r->n; i++)
      if (r->buf[i] == '\n') {
        relay_line(r->buf + start, i + 1 - start);
        start = i + 1;
      }
    if (start == 0 && r->n == sizeof r->buf) { /* a line longer than the buffer goes as it is */
      relay_line(r->buf, r->n);
      start = r->n;
    }
    memmove(r->buf, r->buf + start, r->n - start);
    r->n -= start;
    if (got <= 0) break;
  }
  if (flush && r->n) {
    relay_line(r->buf, r->n);
    r->n = 0;
  }
  fflush(stderr);
}

/* Ends mpirun (and with it the processes that hung): SIGTERM, then SIGKILL. */
static int stop_mpirun(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) return status;
  kill(pid, SIGTERM);
  for (double t0 = now(); now() - t0 < 10;) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

/* Removes the driver's own temporary directory (flat: the rendezvous files). */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    remove(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static int usage_to(FILE *to) {
  fprintf(to,
          "usage: rehearsal elastic FILE [-np N] [--dir DIR] [--mpirun PATH] [--mpirun-arg ARG]...\n"
          "                         [--host-discovery-script CMD] -- PROGRAM [ARGS...]\n"
          "  runs PROGRAM under `mpirun --enable-recovery` with FILE's elastic settings (min_np,\n"
          "  max_np, rendezvous_timeout_s) and forms a world of the survivors after each failure;\n"
          "  inside a Slurm allocation mpirun takes the allocation's nodes\n"
          "  -np N             processes to start (default: the scenario's GPUs)\n"
          "  --dir DIR         the rendezvous files (default: a temporary directory)\n"
          "  --mpirun PATH     the launcher (default: mpirun)\n"
          "  --mpirun-arg ARG  one more argument for it (repeatable)\n"
          "  --host-discovery-script CMD\n"
          "                    Horovod's: a command printing the hosts as \"host:slots\" lines,\n"
          "                    asked every discovery_interval_s (without it, the scenario's\n"
          "                    elastic.discovery changes are played); hosts it adds join at the\n"
          "                    next commit.  Every slot the job may use gets a process at the\n"
          "                    start (default -np: the cluster's GPUs, spare nodes included);\n"
          "                    those of hosts not discovered wait.  On one machine the hosts are\n"
          "                    the scenario's nodes: node0, node1, ...\n"
          "  --help, --version\n"
          "Exit status: that of rank 0 of the last world (130 when interrupted); 2 bad input.\n");
  return to == stdout ? 0 : 2;
}

static int usage(void) { return usage_to(stderr); }

/* ---- the command: parse, launch, watch, report ---------------------------------------------- */

/* What the command line asked for.  The strings point into argv (`extra` is owned). */
typedef struct elastic_args {
  int np;
  const char *dir, *mpirun, *script, *file;
  const char **extra;
  int nextra;
  char **prog; /* PROGRAM ARGS..., NULL-terminated (argv's tail) */
  int nprog;
} elastic_args;

/* Whether argv before the "--" asks for help or the version: then answers it into *rc. */
static bool asked_help(int split, char **argv, int *rc) {
  for (int i = 0; i < split; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      *rc = usage_to(stdout);
      return true;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf("rehearsal %s\n", REHEARSAL_VERSION);
      *rc = 0;
      return true;
    }
  }
  return false;
}

/* The flags of args[1..n-1] (getopt's shape) into *a; -1 when they are good, else the exit status. */
static int parse_flags(int n, char **args, char **argv, elastic_args *a) {
  static const struct option options[] = {
      {"np", required_argument, NULL, 'n'},         {"dir", required_argument, NULL, 'd'},
      {"mpirun", required_argument, NULL, 'm'},     {"mpirun-arg", required_argument, NULL, 'a'},
      {"host-discovery-script", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  optind = 0; /* glibc: start afresh */
  opterr = 0;
  int c;
  while ((c = getopt_long_only(n, args, "", options, NULL)) != -1) {
    switch (c) {
    case 'n': {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (*optarg == 0 || *end || v < 1 || v > 1 << 24) {
        fprintf(stderr, "rehearsal elastic: -np: expected a number of processes from 1, got \"%s\"\n",
                optarg);
        return 2;
      }
      a->np = (int)v;
      break;
    }
    case 'd': a->dir = optarg; break;
    case 'm': a->mpirun = optarg; break;
    case 's': a->script = optarg; break;
    case 'a': a->extra[a->nextra++] = optarg; break;
    default:
      return c == '?' ? rh_cli_error("elastic", "unknown flag %s", argv[optind - 2]) : usage();
    }
  }
  return -1;
}

/* Stage 1, parse: FILE [flags] -- PROGRAM [ARGS...] into *a (a->extra to free); -1 when the
 * command goes on, else its exit status. */
static int parse_args(int argc, char **argv, elastic_args *a) {
  int split = 0, rc;
  *a = (elastic_args){.mpirun = "mpirun"};
  while (split < argc && strcmp(argv[split], "--") != 0) split++;
  if (asked_help(split, argv, &rc)) return rc; /* with or without a program */
  a->extra = calloc((size_t)argc + 1, sizeof *a->extra);
  char **args = calloc((size_t)split + 2, sizeof *args); /* getopt wants the program name first */
  if (!a->extra || !args) {
    free(args);
    return 1;
  }
  args[0] = "rehearsal elastic";
  memcpy(args + 1, argv, (size_t)split * sizeof *args);
  rc = parse_flags(split + 1, args, argv, a);
  if (rc < 0 && (optind != split || split >= argc - 1))
    rc = rh_cli_error("elastic", "needs FILE, then -- PROGRAM [ARGS...]");
  if (rc < 0) {
    a->file = args[optind];
    a->prog = argv + split + 1;
    a->nprog = argc - split - 1;
  }
  free(args);
  return rc;
}

/* Loads the scenario and settles -np and min_np (Horovod's default: min_np = np); 0, or 2 on
 * bad input (said on stderr). */
static int load_scenario(elastic_args *a, rh_scenario *sc) {
  char err[1024];
  if (rh_scenario_load(a->file, sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  if (!sc->elastic.present) {
    fprintf(stderr, "rehearsal: %s has no elastic: section (a fixed-size job runs under mpirun)\n",
            a->file);
    rh_scenario_free(sc);
    return 2;
  }
  bool discovering = a->script || sc->elastic.nchanges > 0;
  if (a->np <= 0 && discovering) /* a process for every slot discovery may add: the spares' too */
    for (int n = 0; n < sc->cluster.nodes + sc->cluster.spares; n++) a->np += sc->cluster.gpus_per_node[n];
  if (a->np <= 0) a->np = rh_scenario_size(sc);
  if (sc->elastic.min_np <= 0) sc->elastic.min_np = a->np;
  if (a->np < sc->elastic.min_np) {
    fprintf(stderr, "rehearsal elastic: -np %d is fewer than the scenario's min_np %d\n", a->np,
            sc->elastic.min_np);
    rh_scenario_free(sc);
    return 2;
  }
  return 0;
}

/* The rendezvous directory: --dir (made if need be) or a temporary one into tmpdir; NULL on
 * failure (said on stderr). */
static const char *make_dir(const char *dir, char *tmpdir) {
  if (!dir) {
    if (!(dir = mkdtemp(tmpdir))) perror("rehearsal elastic: mkdtemp");
    return dir;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "rehearsal elastic: cannot create %s: %s\n", dir, strerror(errno));
    return NULL;
  }
  return dir;
}

/* mpirun's command line, freed with free_command:
 * mpirun --enable-recovery -np N -x RH_... [extra] SELF elastic-rank PROGRAM ARGS */
typedef struct command {
  char **argv;
  char **names; /* the RH_ variables' names that go along (-x) */
  int named;
  char self[4096], npbuf[16];
} command;

static bool build_command(const elastic_args *a, command *c) {
  if (readlink("/proc/self/exe", c->self, sizeof c->self - 1) < 0)
    snprintf(c->self, sizeof c->self, "rehearsal");
  int nenv = 0;
  for (char **e = environ; *e; e++) nenv += strncmp(*e, "RH_", 3) == 0;
  c->argv = calloc((size_t)(8 + 2 * nenv + a->nextra + a->nprog + 4), sizeof *c->argv);
  c->names = calloc((size_t)nenv + 1, sizeof *c->names);
  if (!c->argv || !c->names) return false;
  snprintf(c->npbuf, sizeof c->npbuf, "%d", a->np);
  int k = 0;
  c->argv[k++] = (char *)a->mpirun;
  c->argv[k++] = "--enable-recovery";
  c->argv[k++] = "-np";
  c->argv[k++] = c->npbuf;
  for (char **e = environ; *e; e++) { /* every RH_ variable goes along */
    if (strncmp(*e, "RH_", 3) != 0 || !(c->names[c->named] = strndup(*e, strcspn(*e, "="))))
      continue;
    c->argv[k++] = "-x";
    c->argv[k++] = c->names[c->named++];
  }
  for (int i = 0; i < a->nextra; i++) c->argv[k++] = (char *)a->extra[i];
  c->argv[k++] = c->self;
  c->argv[k++] = "elastic-rank";
  for (int i = 0; i < a->nprog; i++) c->argv[k++] = a->prog[i];
  c->argv[k] = NULL;
  return true;
}

static void free_command(command *c) {
  for (int i = 0; c->names && i < c->named; i++) free(c->names[i]);
  free(c->names);
  free(c->argv);
}

/* The driver for np processes, world 0 being all of them; false when out of memory. */
static bool driver_init(driver *d, const char *dir, const rh_scenario *sc, const elastic_args *a) {
  int np = a->np;
  *d = (driver){.dir = dir, .sc = sc, .nprocs = np, .t0 = now(),
                .pretend = getenv("RH_MPI_GPUS_PER_NODE") != NULL};
  d->procs = calloc((size_t)np, sizeof *d->procs);
  d->members = calloc((size_t)np, sizeof *d->members);
  d->told = calloc((size_t)np, sizeof *d->told);
  for (int p = 0; d->members && p < np; p++) d->members[p] = p;
  d->nmembers = np;
  d->script = a->script;
  d->discovering = a->script || sc->elastic.nchanges > 0;
  int all = sc->cluster.nodes + sc->cluster.spares;
  d->nnodes = np > all ? np : all;
  d->slots = calloc((size_t)d->nnodes + 1, sizeof *d->slots);
  d->blacklisted = calloc((size_t)d->nnodes + 1, sizeof *d->blacklisted);
  for (int n = 0; d->slots && n < sc->cluster.nodes; n++) d->slots[n] = sc->cluster.gpus_per_node[n];
  return d->procs && d->members && d->told && d->slots && d->blacklisted;
}

static void driver_free(driver *d) {
  free(d->procs);
  free(d->members);
  free(d->told);
  free(d->slots);
  free(d->blacklisted);
}

/* What the watch knows of mpirun and of the rendezvous between two looks. */
typedef struct watch {
  pid_t pid;
  relay out;          /* mpirun's stderr */
  int status;         /* mpirun's, once gone */
  bool formed;        /* world 0 (with discovery: once the hosts are known) */
  bool open;          /* a rendezvous is open */
  bool over, gone, ending, waited;
  int broken;         /* the last world whose death was told */
  double deadline;
} watch;

/* Stage 2, launch: mpirun under a relay of its stderr, with SIGINT and SIGTERM caught; false
 * when it could not start. */
static bool launch(char **cmd, watch *w) {
  struct sigaction sa = {.sa_handler = on_interrupt};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  fflush(NULL);
  int pipefd[2] = {-1, -1};
  if (pipe(pipefd) != 0) pipefd[0] = pipefd[1] = -1;
  w->pid = fork();
  if (w->pid == 0) {
    if (pipefd[1] >= 0) {
      dup2(pipefd[1], STDERR_FILENO);
      close(pipefd[0]);
      close(pipefd[1]);
    }
    execvp(cmd[0], cmd);
    fprintf(stderr, "rehearsal elastic: cannot run %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
  }
  w->out.fd = pipefd[0];
  if (pipefd[1] >= 0) close(pipefd[1]);
  if (w->out.fd >= 0) fcntl(w->out.fd, F_SETFL, fcntl(w->out.fd, F_GETFL) | O_NONBLOCK);
  return w->pid > 0;
}

static void nap(void) {
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
}

/* The processes' nodes: the scenario's on one machine, else the real hosts in order.  Which of
 * the two is known once every process has said where it runs (a minute at most); true then. */
static bool place_procs(driver *d) {
  int np = d->nprocs, said = 0;
  for (int p = 0; p < np; p++) said += d->procs[p].host[0] != 0;
  bool all_said = said == np || now() - d->t0 > 60;
  bool one_host = true;
  for (int p = 1; p < np; p++)
    one_host = one_host && (!d->procs[p].host[0] || strcmp(d->procs[p].host, d->procs[0].host) == 0);
  if (one_host && all_said) d->pretend = true;
  for (int p = 0; p < np; p++) {
    if (d->pretend || one_host) {
      d->procs[p].node = node_of_slot(&d->sc->cluster, p);
      continue;
    }
    d->procs[p].node = p;
    for (int q = 0; q < p; q++)
      if (strcmp(d->procs[q].host, d->procs[p].host) == 0) d->procs[p].node = d->procs[q].node;
  }
  return all_said;
}

/* The job ends: the processes told so (every one when `all`) report, then end; up to 10 s. */
static void end_soon(driver *d, watch *w, bool all) {
  for (int p = 0; all && p < d->nprocs; p++) d->told[p] = true;
  w->ending = true;
  w->deadline = now() + 10;
}

static void next_poll(driver *d) {
  double every = d->sc->elastic.discovery_interval_s;
  d->next_poll = now() + (every > 0 ? every : 1);
}

/* World 0 with discovery: the processes of the hosts discovered first, once their hosts are
 * known and there are min_np of them (Horovod waits timeout_s for them). */
static void form_world0(driver *d, watch *w) {
  const rh_scenario *sc = d->sc;
  int np = d->nprocs;
  int *slots = calloc((size_t)d->nnodes + 1, sizeof(int));
  if (slots && discover(d, slots)) memcpy(d->slots, slots, (size_t)d->nnodes * sizeof(int));
  free(slots);
  next_poll(d);
  int most = sc->elastic.max_np > 0 ? sc->elastic.max_np : np, size = 0, want = 0;
  for (int p = 0; p < np && size < most; p++) {
    want += taken(d, p);
    if (taken(d, p) && standby_alive(d, p)) d->members[size++] = p;
  }
  bool enough = size >= sc->elastic.min_np && size > 0;
  if (size < want && size < most && now() - d->t0 < 30)
    return; /* processes still starting (MPI's start-up): a look again at the next poll */
  if (!enough && now() - d->t0 < sc->elastic.timeout_s) {
    if (!w->waited) fprintf(stderr, "rehearsal elastic: %d slot%s discovered, min_np is %d: "
                                    "waiting up to %g s (timeout_s) for more\n", size,
                            size == 1 ? "" : "s", sc->elastic.min_np, sc->elastic.timeout_s);
    w->waited = true;
    return;
  }
  if (!enough)
    snprintf(d->short_of, sizeof d->short_of, "%d slot%s discovered in %g s, min_np is %d", size,
             size == 1 ? "" : "s", sc->elastic.timeout_s, sc->elastic.min_np);
  d->nmembers = enough ? size : 0;
  d->job_t0 = now();
  if (!answer(d, 0, d->members, size, enough ? NULL : d->short_of)) interrupted = 1;
  if (enough)
    fprintf(stderr, "rehearsal elastic: world 0: %d ranks on the hosts discovered; %d "
                    "process%s on standby\n", size, np - size, np - size == 1 ? "" : "es");
  else
    fprintf(stderr, "rehearsal elastic: the job ends: %s\n", d->short_of);
  w->formed = true;
  if (!enough) end_soon(d, w, true); /* every process hears it and ends */
}

/* The rendezvous: opened by the first arrival, closed when every live member came, at its
 * timeout, or when mpirun is gone; true when it closed now. */
static bool rendezvous(driver *d, watch *w) {
  int arrived = 0, waiting = 0;
  for (int r = 0; r < d->nmembers; r++) {
    proc *q = &d->procs[d->members[r]];
    arrived += q->arrived;
    waiting += !q->arrived && !q->ended;
    if (q->ended && (q->exit_code < 0 || q->exit_code > 1) && w->broken < d->world)
      w->broken = tell_broken(d, r); /* its peers learn it now, not at their timeout */
  }
  if (!w->open && arrived > 0) {
    w->open = true;
    w->deadline = now() + d->sc->elastic.rendezvous_timeout_s;
  }
  if (!w->open || !(waiting == 0 || now() >= w->deadline || w->gone)) return false;
  w->open = false;
  if (!close_rendezvous(d)) { /* the processes told so report, then end: wait for them */
    end_soon(d, w, false);
    for (int p = 0; p < d->nprocs; p++)
      d->told[p] = d->told[p] || (!d->procs[p].ended && d->discovering);
  }
  return true;
}

/* One look at a job that runs; false when the next look should come at once. */
static bool look_again(driver *d, watch *w) {
  if (d->discovering && now() >= d->next_poll) {
    poll_hosts(d);
    next_poll(d);
  }
  if (rendezvous(d, w)) return false;
  if (w->ending) {
    bool ended = true;
    for (int p = 0; p < d->nprocs; p++) ended = ended && (!d->told[p] || d->procs[p].ended);
    w->over = ended || now() >= w->deadline || w->gone || interrupted;
    return true;
  }
  bool all_ended = true;
  for (int r = 0; r < d->nmembers; r++) all_ended = all_ended && d->procs[d->members[r]].ended;
  if (!w->open && all_ended && d->discovering && !w->gone && !interrupted) {
    /* the processes still on standby hear that the job is over, and end */
    answer(d, d->world + 1, NULL, 0, "the job finished");
    for (int p = 0; p < d->nprocs; p++) d->told[p] = !d->procs[p].ended;
    end_soon(d, w, false);
    return false;
  }
  if ((!w->open && all_ended) || w->gone || interrupted) w->over = true;
  return true;
}

/* Stage 3, watch: until the job is over, world after world. */
static void watch_job(driver *d, watch *w) {
  w->formed = !d->discovering;
  w->broken = -1;
  while (!w->over) {
    w->gone = w->gone || waitpid(w->pid, &w->status, WNOHANG) == w->pid;
    relay_pump(&w->out, false);
    look(d);
    bool all_said = place_procs(d);
    if (!w->formed && (d->pretend || all_said) && now() >= d->next_poll) {
      form_world0(d, w);
      if (w->ending) continue;
    }
    if (!w->formed) {
      nap();
      w->over = w->gone = w->gone || interrupted;
      continue;
    }
    if (look_again(d, w)) nap();
  }
}

/* Stage 4, report: mpirun stopped, the driver's last line said; the exit status (that of the
 * last world's rank 0, 130 when interrupted). */
static int report_end(driver *d, watch *w) {
  int status = w->gone ? w->status : stop_mpirun(w->pid);
  relay_pump(&w->out, true);
  look(d);
  proc *first = &d->procs[d->members[0]];
  int rc;
  if (interrupted) rc = 130;
  else if (first->ended && first->exit_code >= 0) rc = first->exit_code;
  else rc = WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
  bool killed = first->ended && first->exit_code < 0;
  char last[160];
  ended_line(d, now() - d->t0, killed, killed ? first->signal : rc, last, sizeof last);
  fprintf(stderr, "rehearsal elastic: %s\n", last);
  return rc;
}

/* Launches, watches and reports the job of scenario sc in directory dir; the exit status. */
static int run_job(const elastic_args *a, const rh_scenario *sc, const char *dir) {
  setenv("RH_ELASTIC_DIR", dir, 1);
  if (a->script || sc->elastic.nchanges > 0)
    setenv("RH_ELASTIC_STANDBY", "1", 1); /* processes wait for a world to take them */
  else unsetenv("RH_ELASTIC_STANDBY");
  command cmd = {0};
  driver d = {0};
  watch w = {.out.fd = -1};
  int rc = 1;
  if (build_command(a, &cmd) && driver_init(&d, dir, sc, a) && launch(cmd.argv, &w)) {
    watch_job(&d, &w);
    rc = report_end(&d, &w);
  }
  if (w.out.fd >= 0) close(w.out.fd);
  free_command(&cmd);
  driver_free(&d);
  return rc;
}

int rh_cmd_elastic(int argc, char **argv) {
  elastic_args a;
  int rc = parse_args(argc, argv, &a);
  rh_scenario sc;
  if (rc < 0 && (rc = load_scenario(&a, &sc)) == 0) {
    char tmpdir[] = "/tmp/rehearsal-elastic-XXXXXX";
    const char *dir = make_dir(a.dir, tmpdir);
    rc = dir ? run_job(&a, &sc, dir) : 1;
    if (dir && !a.dir) remove_dir(dir);
    rh_scenario_free(&sc);
  }
  free(a.extra);
  return rc;
}
