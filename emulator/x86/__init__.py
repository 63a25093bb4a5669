"""x86-64: the native runner (cffi, guard pages, CPU detection) and Bochs for what this CPU lacks."""
