/*
** demo_processes.h -- the process side of `collgen demo --processes`: makes
** a unique id, forks one process per rank and reports their output in rank
** order. What each rank runs is cmd_demo.c's.
*/
#ifndef COLLGEN_DEMO_PROCESSES_H
#define COLLGEN_DEMO_PROCESSES_H
#include "collgen.h"

/* Runs one rank in a forked process: creates it with
** collgen_comm_init_rank(nranks, id, rank, device), runs the demo, prints
** on stdout; returns 0 when every check passed. */
typedef int (*demo_rank_fn)(int nranks, const collgen_unique_id_t *id, int rank, int device);
/* What the demo does without a GPU (its exit status). */
typedef int (*demo_no_gpu_fn)(const char *why);

/* Forks `nranks` ranks (-1: one per visible GPU, at least 2; at most
** COLLGEN_MAX_DEVICES) mapped round robin onto the visible GPUs, after
** counting them in a short-lived child (this process never initializes
** CUDA, so forking stays safe). Each rank's stdout and stderr are collected
** and printed in rank order; a rank that dies by a signal gets the others
** killed, so nothing waits for it. Returns 0 when every rank exited 0, 1
** otherwise; no_gpu's status when no GPU is visible. */
int demo_processes(int nranks, demo_rank_fn run, demo_no_gpu_fn no_gpu);
#endif
