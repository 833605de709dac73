/*
 * kernels_bench.c: `rehearsal-gpu kernels`: measures what the kernel model needs of this GPU
 * (runtime/gpu/microbench.cu) and writes it as a kernel table (scenario/tables.h): cuBLAS GEMMs of
 * square and transformer shapes in fp32, tf32, fp16 and bf16, a 1 GiB device-to-device copy, and
 * the launch of an empty kernel from a stream and from a CUDA graph, under a provenance header.
 * A scenario's cluster.gpu.kernel_table reads it in place of the preset's public figures.  Only
 * the GPU target has it; without a device it says so and exits 77.
 */
#include "cli.h"
#include "commands.h"
#include "gpu.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char usage_text[] =
    "usage: rehearsal-gpu kernels [--out FILE] [--quick]\n"
    "Measures this GPU's kernel rates (cuBLAS GEMMs by shape and precision, a device copy, kernel\n"
    "launches) and writes them as a kernel table, for cluster.gpu.kernel_table (presets/measured/).\n"
    "  --out FILE     where the table goes (default: standard output)\n"
    "  --quick        fewer shapes and repetitions (a check, not a measurement to keep)\n"
    "Exit status: 0 written, 1 a measurement failed, 2 bad input, 77 no GPU.\n";

static const char *const names[] = {"fp32", "tf32", "fp16", "bf16"};
static const int shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
                                {8192, 8192, 8192}, {8192, 4096, 1024}, {8192, 1024, 4096},
                                {16384, 3072, 1024}};

static int gemms(FILE *f, bool quick) {
  int nshapes = quick ? 3 : (int)(sizeof shapes / sizeof shapes[0]);
  fprintf(f, "# gemm PRECISION M N K TFLOPS (cublasGemmEx, fp32 accumulation, random inputs)\n");
  for (int p = 0; p < 4; p++)
    for (int i = 0; i < nshapes; i++) {
      double s;
      const int *d = shapes[i];
      if (rh_gpu_bench_gemm(p, d[0], d[1], d[2], quick ? 3 : 20, &s) != RH_OK) {
        fprintf(stderr, "rehearsal-gpu kernels: the %s GEMM %dx%dx%d failed\n", names[p], d[0], d[1], d[2]);
        return 1;
      }
      fprintf(f, "gemm %s %d %d %d %.4g\n", names[p], d[0], d[1], d[2],
              2.0 * d[0] * d[1] * (double)d[2] / s / 1e12);
    }
  return 0;
}

static int copy_and_launch(FILE *f, bool quick) {
  double copy, stream, graph;
  size_t bytes = (size_t)1 << 30;
  if (rh_gpu_bench_copy(bytes, quick ? 3 : 20, &copy) != RH_OK ||
      rh_gpu_bench_launch(quick ? 1000 : 10000, 0, &stream) != RH_OK ||
      rh_gpu_bench_launch(1000, 1, &graph) != RH_OK) {
    fprintf(stderr, "rehearsal-gpu kernels: the copy or the launches failed\n");
    return 1;
  }
  fprintf(f, "# copy BYTES GBPS (cudaMemcpyAsync device to device, bytes read and written)\n");
  fprintf(f, "copy %zu %.5g\n", bytes, 2.0 * (double)bytes / copy / 1e9);
  fprintf(f, "# launch STREAM_US GRAPH_US (an empty kernel back to back, a kernel's share)\n");
  fprintf(f, "launch %.4g %.4g\n", stream * 1e6, graph * 1e6);
  return 0;
}

typedef struct bench_flags {
  const char *out;
  bool quick;
} bench_flags;

static int bench_option(int c, const char *value, void *arg) {
  bench_flags *fl = arg;
  if (c == 'o') fl->out = value;
  if (c == 'q') fl->quick = true;
  return 0;
}

int rh_cmd_kernels(int argc, char **argv) {
  static const struct option longopts[] = {{"out", required_argument, NULL, 'o'},
                                           {"quick", no_argument, NULL, 'q'},
                                           RH_CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};
  bench_flags fl = {0};
  rh_scenario_opts opts = {0};
  int first;
  int rc = rh_cli_parse("kernels", usage_text, argc, argv, "", longopts, bench_option, &fl, &opts,
                        &first);
  rh_cli_opts_free(&opts);
  if (rc >= 0) return rc;
  if (first != argc) return rh_cli_error("kernels", "takes no arguments");
  const char *out = fl.out;
  bool quick = fl.quick;
  if (rh_gpu_device_count() == 0) {
    fprintf(stderr, "rehearsal-gpu kernels: no CUDA device found: nothing to measure\n");
    return 77;
  }
  if (rh_gpu_open(0) != RH_OK) {
    fprintf(stderr, "rehearsal-gpu kernels: cannot open device 0\n");
    return 1;
  }
  FILE *f = out ? fopen(out, "w") : stdout;
  if (!f) {
    perror(out);
    rh_gpu_close();
    return 2;
  }
  char what[256], when[64];
  rh_gpu_describe(what, sizeof what);
  time_t now = time(NULL);
  strftime(when, sizeof when, "%Y-%m-%d", gmtime(&now));
  fprintf(f, "# rehearsal-gpu kernels: %s; measured %s%s\n", what, when, quick ? " (--quick)" : "");
  rc = gemms(f, quick);
  if (rc == 0) rc = copy_and_launch(f, quick);
  if (f != stdout && fclose(f) != 0) rc = 1;
  rh_gpu_close();
  return rc;
}
