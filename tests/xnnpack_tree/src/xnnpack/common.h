// lowp's test tree: the attributes XNNPACK's micro-kernels are declared with.
#pragma once

#define XNN_INTERNAL __attribute__((__visibility__("internal")))
#define XNN_OOB_READS
#define XNN_UNPREDICTABLE(x) (x)
