"""WebAssembly (wasm32) kernels on wasmtime: zig builds a WASI reactor module (build.py), every memory access is
bounds-checked by a rewrite of the module (guard.py), and WasmMachine (machine.py) calls its functions with lowp's
guarantees: named out-of-bounds faults, poison between buffers, a fuel budget, named traps. relaxed_dot.h gives
the relaxed dot product one named behaviour in plain SIMD128, for the behaviours no engine mode gives here."""
