// What the constructor in landlock_linux.c did, for the Go side to report.
extern int otelcol_gpu_landlock_abi;
extern int otelcol_gpu_landlock_errno;
extern const char *otelcol_gpu_landlock_step;
extern char otelcol_gpu_landlock_paths[4096];
