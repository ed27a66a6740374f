// Kernels for load_stall_probe.c: `spin` keeps a GPU busy for ns
// nanoseconds; `other` is the kernel whose loading is timed.
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void other(unsigned long long x) {
  if (x == 1) asm volatile("trap;");
}
