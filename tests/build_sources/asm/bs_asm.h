// Included by bs_asm.S (preprocessed assembly): the build key follows it through the compiler's -MMD list.
#define BS_C_BYTES 4            // sizeof(int32_t): the step between C elements
#define BS_FRAME 80             // bytes of the entry's stack frame
