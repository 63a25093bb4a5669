// lowp's stand-in for XNNPACK's public header: what the micro-kernels of this tree include from it. Like the real
// one it includes <pthreadpool.h>, a separate project lowp supplies a stub of.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <pthreadpool.h>

/// The number of bytes XNNPACK may read beyond array bounds.
#define XNN_EXTRA_BYTES 16
