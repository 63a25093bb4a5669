"""AArch64: the calling convention, decoding helpers and the instruction-model backends on Unicorn and qemu."""
