"""32-bit Arm (AArch32, ARM state) under qemu-arm: the guest's instruction text and memory accesses for fault
reports (a32.py), its CPU features (features.py), and the intrinsic backend that proves lowp's AArch32 models on
qemu-arm (intrinsics.py). The driver is emulator/qemu_driver_arm.c; the guest is lowp.emulator.qemu.ARM."""
