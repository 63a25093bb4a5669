"""Hexagon HVX on qemu-hexagon: the instruction models' backend (HvxQemuBackend, lowp isa verify)."""
