"""The GPU without the runtime: CUDA-graph capture of a step of static tensors (capture) and the
GPUs as the driver's management interface sees them, without a CUDA context (nvidia)."""
