/* What XNNPACK's ukernel headers need of pthreadpool (a separate project, google/pthreadpool) when lowp builds
 * micro-kernels from a checkout without its third-party dependencies: include/xnnpack.h includes <pthreadpool.h>
 * for the pthreadpool_t of its operator API, which no micro-kernel uses. Written for lowp; only the type. */
#ifndef LOWP_XNNPACK_STUB_PTHREADPOOL_H
#define LOWP_XNNPACK_STUB_PTHREADPOOL_H

typedef struct pthreadpool* pthreadpool_t;

#endif
