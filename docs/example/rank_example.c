/*
** rank_example.c -- one process per GPU, MPI style (docs/multiprocess.md).
**
** Start one process per rank with the same COLLGEN_ID_FILE and
** COLLGEN_NRANKS, and COLLGEN_RANK = 0, 1, ...:
**   COLLGEN_ID_FILE=/tmp/job.id COLLGEN_NRANKS=2 COLLGEN_RANK=0 ./collgen_rank_example &
**   COLLGEN_ID_FILE=/tmp/job.id COLLGEN_NRANKS=2 COLLGEN_RANK=1 ./collgen_rank_example
** Rank 0 makes the unique id and publishes its text in the file (written to
** a temporary name, then renamed, so a reader never sees half of it); the
** other ranks wait for the file. With MPI, send the id with MPI_Bcast
** instead; with torch.distributed, through its store. Each rank drives
** GPU rank % (visible GPUs) and allreduces one bf16 vector of ones: every
** element of the result must equal nranks.
*/
#include <collgen.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 1000003

static int env_int(const char *name) {
  const char *v = getenv(name);
  char *end = NULL;
  long x = v ? strtol(v, &end, 10) : -1;
  return v && *v && end && *end == 0 && x >= 0 && x <= 8 ? (int)x : -1;
}

/* Rank 0 publishes the id; the others read it (waiting up to 60 s). */
static int share_id(const char *path, int rank, collgen_unique_id_t *id) {
  char text[COLLGEN_UNIQUE_ID_TEXT_LEN + 1];
  if (rank == 0) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (collgen_get_unique_id(id) != COLLGEN_OK ||
        collgen_unique_id_to_text(id, text, sizeof text) != COLLGEN_OK || !f ||
        fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
      return -1;
    return 0;
  }
  for (int tries = 0; tries < 600; ++tries, usleep(100 * 1000)) {
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(text, 1, COLLGEN_UNIQUE_ID_TEXT_LEN, f);
    fclose(f);
    text[n] = 0;
    if (n == COLLGEN_UNIQUE_ID_TEXT_LEN) return collgen_unique_id_from_text(text, id);
  }
  return -1;
}

int main(void) {
  const char *path = getenv("COLLGEN_ID_FILE");
  const int nranks = env_int("COLLGEN_NRANKS"), rank = env_int("COLLGEN_RANK");
  if (!path || nranks < 1 || rank < 0 || rank >= nranks) {
    fprintf(stderr, "set COLLGEN_ID_FILE, COLLGEN_NRANKS (1..8) and COLLGEN_RANK\n");
    return 2;
  }
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    fprintf(stderr, "rank %d: no GPU\n", rank);
    return 1;
  }
  collgen_unique_id_t id;
  if (share_id(path, rank, &id) != 0) {
    fprintf(stderr, "rank %d: could not share the id through %s\n", rank, path);
    return 1;
  }
  const int device = rank % ngpu;
  cudaSetDevice(device);
  collgen_comm_t *comm;
  int rc = collgen_comm_init_rank(&comm, nranks, &id, rank, device, NULL);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, collgen_status_name(rc), collgen_last_error());
    return 1;
  }
  unsigned short *host = malloc(N * sizeof *host), *buf;
  for (int i = 0; i < N; ++i) host[i] = 0x3f80; /* bf16 1.0 */
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaMalloc((void **)&buf, N * sizeof *buf);
  cudaMemcpy(buf, host, N * sizeof *buf, cudaMemcpyHostToDevice);
  int64_t n = N;
  rc = collgen_rank_allreduce_sum(comm, COLLGEN_DTYPE_BF16, 1, &n, buf, buf, 0, stream);
  cudaStreamSynchronize(stream);
  if (rc == COLLGEN_OK) rc = collgen_comm_check(comm);
  cudaMemcpy(host, buf, N * sizeof *buf, cudaMemcpyDeviceToHost);
  int wrong = 0;
  const float want = (float)nranks; /* exact in bf16 for up to 8 ranks */
  for (int i = 0; i < N; ++i) {
    unsigned int bits = (unsigned int)host[i] << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    wrong += v != want;
  }
  printf("rank %d of %d on GPU %d: %s, %d of %d elements wrong\n", rank, nranks, device,
         rc == COLLGEN_OK ? "ok" : collgen_comm_last_error(comm), wrong, N);
  cudaFree(buf);
  cudaStreamDestroy(stream);
  free(host);
  collgen_comm_destroy(comm);
  return rc == COLLGEN_OK && wrong == 0 ? 0 : 1;
}
