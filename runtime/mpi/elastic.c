/*
 * elastic.c: Horovod's elastic reset on real processes.  Open MPI 4.1 has no ULFM, so a world
 * cannot be repaired, but under `mpirun --enable-recovery` a dead or stopped process does not take
 * the job down, and the survivors can make a communicator of their own with
 * MPI_Comm_create_group, which only the group's members call.  The survivors keep their memory
 * (the state they restored from the last commit, the program's own variables), as Horovod's
 * workers do: only the communicators change.
 *
 * Who the survivors are is the elastic driver's call (`rehearsal elastic`, tool/commands/elastic.c),
 * through files in RH_ELASTIC_DIR, as Horovod's rendezvous server does over HTTP:
 *
 *   w<G>-arrived-<P>   process P (its MPI_COMM_WORLD rank) left world G for the rendezvous:
 *                      "<rank in G> <seconds since the job began> <host>\n<what it saw>\n"
 *   w<G+1>.world       the driver's answer: "members P0 P1 ...\n" (the new world's processes in
 *                      rank order), or "end <reason>\n" when fewer than min_np remain
 *   w<G>.broken        the driver saw a process of world G die: "<what>\n"; a rank waiting in a
 *                      collective fails it at once (as a closed connection tells NCCL's peers)
 *   standby-<P>        process P waits on standby, rewritten every second (the driver takes only
 *                      processes whose file is fresh into a world)
 *   hosts.update       host discovery changed the job's hosts: "<stamp> <kind>\n" (seconds since
 *                      the job began, RH_HOSTS_ADDED | RH_HOSTS_REMOVED); rank 0 reads it at each
 *                      commit, and the world re-forms there when the stamp is new
 *
 * With host discovery (RH_ELASTIC_STANDBY set) a process starts on standby: it waits for w0.world
 * and for each world after it, and joins the first whose members name it (its host was added),
 * as a worker Horovod starts on an added host does; one that no world takes leaves when the
 * driver writes "end".
 *
 * The driver waits for every process of world G to arrive, up to the rendezvous timeout; the
 * ones that do not (dead, hung) failed, and so does their host (Horovod blacklists it).
 */
#include "mpi_backend.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes `text` to `path` through a temporary file and a rename: the driver never reads half. */
static rh_status write_file(const char *path, const char *text) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  bool ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) remove(tmp);
  return ok ? RH_OK : RH_ERR_IO;
}

/* The driver's answer for world `gen`, waited for up to `limit` seconds, or until the driver's
 * directory is gone (its driver ended); the caller frees. */
static char *await_world(const char *dir, uint32_t gen, double limit) {
  char path[1024];
  snprintf(path, sizeof path, "%s/w%u.world", dir, gen);
  double since = mpi__wall();
  for (;;) {
    FILE *f = fopen(path, "r");
    if (f) {
      char *text = calloc(1, 1 << 16);
      size_t n = text ? fread(text, 1, (1 << 16) - 1, f) : 0;
      fclose(f);
      if (text && n > 0) return text;
      free(text);
    }
    if (mpi__wall() - since > limit || access(dir, F_OK) != 0) return NULL;
    mpi__pause(since);
  }
}

/* The new world's processes from "members P0 P1 ...": their count, or -1. */
static int parse_members(const char *text, int *members, int most) {
  if (strncmp(text, "members", 7) != 0) return -1;
  const char *p = text + 7;
  int n = 0;
  for (;;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) break;
    if (n == most || v < 0 || v >= most) return -1;
    members[n++] = (int)v;
    p = end;
  }
  return n > 0 ? n : -1;
}

/* Moves this process into the world of `members` (n processes, in rank order). */
static rh_status join_world(rh_ctx *ctx, const int *members, int n, uint32_t gen) {
  mpi_job *job = mpi__job_of(ctx);
  int me = -1;
  for (int r = 0; r < n; r++)
    if (members[r] == job->world_rank) me = r;
  int *host = calloc((size_t)n, sizeof(int)), *seen = calloc((size_t)job->world_size, sizeof(int));
  if (!host || !seen) {
    free(host);
    free(seen);
    return RH_ERR_NOMEM;
  }
  /* the hosts keep their order; renumbered in order of first appearance */
  int hosts = 0;
  for (int h = 0; h < job->world_size; h++) seen[h] = -1;
  for (int r = 0; r < n; r++) {
    int h = job->host_of[members[r]];
    if (seen[h] < 0) seen[h] = hosts++;
    host[r] = seen[h];
  }
  free(seen);
  rh_topology topo;
  rh_status st = rh_topology_init_map(&topo, host, n);
  free(host);
  if (st != RH_OK) return st;
  MPI_Group all, some;
  MPI_Comm comm = MPI_COMM_NULL;
  pthread_mutex_lock(&job->lock);
  MPI_Comm_group(MPI_COMM_WORLD, &all);
  MPI_Group_incl(all, n, members, &some);
  int err = MPI_Comm_create_group(MPI_COMM_WORLD, some, (int)gen, &comm);
  MPI_Group_free(&some);
  MPI_Group_free(&all);
  /* the old world's communicators are left as they are: their operations toward the failed
   * peers never complete */
  if (err == MPI_SUCCESS) mpi__comms_open(&job->comms, comm);
  if (err == MPI_SUCCESS) MPI_Comm_free(&comm);
  pthread_mutex_unlock(&job->lock);
  if (err != MPI_SUCCESS) {
    rh_topology_free(&topo);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "MPI could not make the survivors' communicator (MPI_Comm_create_group)");
    return RH_ERR_BACKEND;
  }
#ifdef RH_MPI_GPU
  rh_nccl_free(job->nccl); /* aborted with the failed collective, or torn down now */
  job->nccl = NULL;
  if (mpi__nccl_open(job, job->comms.coll, me, n, rh_setting(ctx, RH_SETTING_TIMEOUT)) != 0) {
    rh_topology_free(&topo);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "NCCL could not make the survivors' communicator");
    return RH_ERR_BACKEND;
  }
#endif
  rh_topology old = job->topo;
  job->topo = topo;
  memcpy(job->members, members, (size_t)n * sizeof(int));
  rh__ctx_set_world(ctx, me, &job->topo, gen);
  rh_topology_free(&old);
  job->reformed = true;
  return RH_OK;
}

rh_status mpi__standby(rh_ctx *ctx) {
  mpi_job *job = mpi__job_of(ctx);
  /* a host may be added at any time of the job: a standby process waits as long as its driver
   * runs (its directory is there), which ends every wait with a last "end"; meanwhile it says it
   * is alive every second (standby-P), and the driver names in a world only processes that did
   * lately: one whose host died with it is never waited for */
  int *members = calloc((size_t)job->world_size, sizeof(int));
  if (!members) return RH_ERR_NOMEM;
  rh_status st = RH_ERR_TIMEOUT;
  char beat[1100];
  snprintf(beat, sizeof beat, "%s/standby-%d", job->elastic_dir, job->world_rank);
  for (uint32_t gen = 0;; gen++) {
    char *answer = NULL;
    while (!answer && access(job->elastic_dir, F_OK) == 0) {
      write_file(beat, "alive\n");
      answer = await_world(job->elastic_dir, gen, 1.0);
    }
    if (!answer) {
      snprintf(ctx->last_error, sizeof ctx->last_error,
               "the elastic driver is gone (its directory %.900s with it)", job->elastic_dir);
      break;
    }
    if (strncmp(answer, "end", 3) == 0 && gen == 0) { /* no world 0: too few hosts */
      char *reason = answer + 3 + strspn(answer + 3, " ");
      reason[strcspn(reason, "\n")] = 0;
      snprintf(ctx->last_error, sizeof ctx->last_error, "the elastic job ended: %s", reason);
      free(answer);
      st = RH_ERR_TOO_FEW;
      break;
    }
    if (strncmp(answer, "end", 3) == 0) { /* the job ended without this process */
      free(answer);
      st = RH_ERR_EXCLUDED;
      snprintf(ctx->last_error, sizeof ctx->last_error, "no world took this process's host");
      break;
    }
    int n = parse_members(answer, members, job->world_size);
    free(answer);
    bool in = false;
    for (int r = 0; r < n; r++) in = in || members[r] == job->world_rank;
    if (n < 0) {
      snprintf(ctx->last_error, sizeof ctx->last_error, "the elastic driver's answer is damaged");
      st = RH_ERR_IO;
      break;
    }
    if (in) {
      st = join_world(ctx, members, n, gen);
      break;
    }
  }
  free(members);
  if (st != RH_OK) job->left = true;
  return st;
}

void mpi__host_updates(rh_ctx *ctx, double *stamp, int *kind) {
  const mpi_job *job = mpi__job_of(ctx);
  *stamp = 0;
  *kind = 0;
  if (!job->elastic_dir) return;
  char path[1024];
  snprintf(path, sizeof path, "%s/hosts.update", job->elastic_dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (fscanf(f, "%lf %d", stamp, kind) != 2) *stamp = 0, *kind = 0;
  fclose(f);
}

rh_status mpi__news(rh_ctx *ctx, double *look) {
  mpi_job *job = mpi__job_of(ctx);
  double now = mpi__wall();
  if (!job->elastic_dir || now < *look) return RH_OK;
  *look = now + 0.1;
  char path[1024];
  snprintf(path, sizeof path, "%s/w%u.broken", job->elastic_dir, ctx->generation);
  FILE *f = fopen(path, "r");
  if (!f) return RH_OK;
  char what[512] = "";
  if (!fgets(what, sizeof what, f)) what[0] = 0;
  fclose(f);
  what[strcspn(what, "\n")] = 0;
  snprintf(ctx->last_error, sizeof ctx->last_error, "a peer died: %s (the elastic driver saw it)",
           what);
  return RH_ERR_PEER_DEAD;
}

rh_status mpi__rendezvous(rh_ctx *ctx) {
  mpi_job *job = mpi__job_of(ctx);
  if (!job->elastic_dir || !job->elastic) {
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "elastic training on real processes runs under `rehearsal elastic`, which forms the "
             "world of the survivors");
    return RH_ERR_UNSUPPORTED;
  }
  uint32_t gen = ctx->generation;
  char path[1024], host[MPI_MAX_PROCESSOR_NAME] = {0}, text[2048], what[sizeof ctx->last_error];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  snprintf(what, sizeof what, "%s", ctx->last_error);
  for (char *c = what; *c; c++)
    if (*c == '\n') *c = ' ';
  snprintf(text, sizeof text, "%d %.6f %s\n%s\n", ctx->rank, mpi__wall() - job->t0, host, what);
  snprintf(path, sizeof path, "%s/w%u-arrived-%d", job->elastic_dir, gen, job->world_rank);
  if (write_file(path, text) != RH_OK) {
    snprintf(ctx->last_error, sizeof ctx->last_error, "cannot write %.900s: %s", path, strerror(errno));
    return RH_ERR_IO;
  }
  /* the driver answers within its rendezvous timeout; a minute more for the driver itself */
  double limit = job->elastic->rendezvous_timeout + job->elastic->rendezvous + 60;
  char *answer = await_world(job->elastic_dir, gen + 1, limit);
  if (!answer) {
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "the elastic driver formed no world in %g s (is `rehearsal elastic` running?)", limit);
    job->left = true;
    return RH_ERR_TIMEOUT;
  }
  if (strncmp(answer, "end", 3) == 0) {
    char *reason = answer + 3 + strspn(answer + 3, " ");
    reason[strcspn(reason, "\n")] = 0;
    snprintf(ctx->last_error, sizeof ctx->last_error, "the elastic job ended: %s", reason);
    free(answer);
    job->left = true;
    return RH_ERR_TOO_FEW;
  }
  int *members = calloc((size_t)job->world_size, sizeof(int));
  int n = members ? parse_members(answer, members, job->world_size) : -1;
  free(answer);
  bool in = false;
  for (int r = 0; r < n; r++) in = in || members[r] == job->world_rank;
  rh_status st = RH_OK;
  if (n < 0) {
    snprintf(ctx->last_error, sizeof ctx->last_error, "the elastic driver's answer is damaged");
    st = RH_ERR_IO;
  } else if (!in) {
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "this process's host left the job (blacklisted, or it came too late)");
    job->excluded = true;
    st = RH_ERR_EXCLUDED;
  } else {
    st = join_world(ctx, members, n, gen + 1);
  }
  if (st != RH_OK) job->left = true;
  free(members);
  return st;
}
