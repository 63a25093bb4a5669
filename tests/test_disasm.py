"""Which instructions a native kernel's code contains (lowp.kernels.disasm): small C functions built with the
host's gcc, each a path the walk must find or must not invent, then the built-in kernels. Nothing here executes
the SIMD code, so AVX-VNNI (which this machine lacks) is checked by disassembly alone."""
import platform
import re
import shutil
import subprocess
from collections import Counter

import pytest

from lowp.kernels.disasm import canonical, loaded_from, native_instructions, requires_met

PRELUDE = "#include <immintrin.h>\n#include <stdint.h>\n#include <string.h>\n"
VNNI512 = '__attribute__((target("avx512f,avx512bw,avx512vnni")))'
NOT_INLINED = "__attribute__((noipa))"   # gcc: neither inlined nor cloned, so the call stays in the code


def build(source: str, stem: str):
    """A shared object of `source` through the same build as the native back end (-O2)."""
    from lowp.emulator.x86.native import NativeUnavailable, build_shared_object
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"the host is {platform.machine()}, not x86-64")
    try:
        return build_shared_object(PRELUDE + source, f"test-disasm-{stem}")
    except NativeUnavailable as e:
        pytest.skip(str(e))


def objdump_count(path, mnemonic: str) -> int:
    """How many instructions named `mnemonic` binutils finds in the whole object (an independent decoder)."""
    if not shutil.which("objdump"):
        pytest.skip("binutils' objdump is not installed")
    text = subprocess.run(["objdump", "-d", "-M", "intel", "--no-show-raw-insn", str(path)],
                          capture_output=True, text=True, check=True).stdout
    return len(re.findall(rf"^\s*[0-9a-f]+:\s+(?:\{{\w+\}} )?{mnemonic}\s", text, re.M))


HELPER_VNNI = f"""
{VNNI512} {NOT_INLINED} static __m512i dot_helper(__m512i acc, const void *a, const void *b) {{
    return _mm512_dpbusd_epi32(acc, _mm512_loadu_si512(a), _mm512_loadu_si512(b));
}}
{VNNI512} int32_t entry(const uint8_t *a, const int8_t *b, int n) {{
    __m512i acc = _mm512_setzero_si512();
    for (int i = 0; i < n; i += 64) acc = dot_helper(acc, a + i, b + i);
    return _mm512_reduce_add_epi32(acc);
}}
"""


def test_an_instruction_in_a_static_helper_is_found_through_the_call():
    so = build(HELPER_VNNI, "helper")
    found = native_instructions(so, "entry")
    assert found.functions == ["entry", "dot_helper"]
    assert found["call"] >= 1 and found["vpdpbusd"] == objdump_count(so, "vpdpbusd") == 1
    assert requires_met(found, ["vpdpbusd"]) == (True, "present: vpdpbusd x1")
    alone = native_instructions(so, "dot_helper")
    assert alone.functions == ["dot_helper"] and alone["vpdpbusd"] == 1 and not alone["call"]


TAIL_CALL = f"""
{VNNI512} {NOT_INLINED} static int32_t reduce(const uint8_t *a, const int8_t *b) {{
    __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(a), _mm512_loadu_si512(b));
    return _mm512_reduce_add_epi32(acc);
}}
int32_t entry(const uint8_t *a, const int8_t *b) {{ return reduce(a, b); }}
"""


def test_a_tail_call_is_followed():
    so = build(TAIL_CALL, "tail")
    found = native_instructions(so, "entry")
    assert found["jmp"] >= 1 and not found["call"], "gcc -O2 was expected to emit the call as a jump"
    assert found.functions == ["entry", "reduce"] and found["vpdpbusd"] == 1


MADDUBS_ONLY = """
__attribute__((target("avx2"))) int32_t entry(const uint8_t *a, const int8_t *b, int n) {
    __m256i acc = _mm256_setzero_si256(), ones = _mm256_set1_epi16(1);
    for (int i = 0; i < n; i += 32) {
        __m256i pairs = _mm256_maddubs_epi16(_mm256_loadu_si256((const void *)(a + i)),
                                             _mm256_loadu_si256((const void *)(b + i)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
    }
    return _mm256_extract_epi32(acc, 0);
}
"""


def test_a_maddubs_kernel_does_not_have_vpdpbusd_and_the_message_shows_what_it_has():
    so = build(MADDUBS_ONLY, "maddubs")
    found = native_instructions(so, "entry")
    assert found["vpdpbusd"] == 0 and found["vpmaddubsw"] == objdump_count(so, "vpmaddubsw") >= 1
    met, why = requires_met(found, ["vpdpbusd"])
    assert not met
    assert why.startswith("none of vpdpbusd is present; the code has vpmaddubsw x")
    assert "vpmaddwd x" in why.split(",", 2)[1], "the multiplies come before the moves"
    assert requires_met(found, ["vpdpbusd", "vpmaddubsw"])[0], "any one of the requirements suffices"


AVX_VNNI = """
__attribute__((target("avx2,avxvnni"))) int32_t entry(const uint8_t *a, const int8_t *b, int n) {
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < n; i += 32)
        acc = _mm256_dpbusd_avx_epi32(acc, _mm256_loadu_si256((const void *)(a + i)),
                                      _mm256_loadu_si256((const void *)(b + i)));
    return _mm256_extract_epi32(acc, 0) + n;
}
"""


def test_the_vex_vpdpbusd_capstone_cannot_decode_is_read_through_objdump():
    so = build(AVX_VNNI, "avxvnni")
    found = native_instructions(so, "entry")
    assert found["vpdpbusd"] == objdump_count(so, "vpdpbusd") >= 1
    assert not found.undecoded
    # Decoding resumed after it: the loop's compare and branch and the return that follow are counted.
    assert found["ret"] >= 1 and found["cmp"] >= 1 and found["vzeroupper"] >= 1


INVALID_BYTE = """
int entry(int x) {
    __asm__ volatile(".byte 0x06");   /* push es: no instruction in 64-bit mode */
    return x * 3 + 1;
}
"""


def test_bytes_no_decoder_knows_are_reported_not_counted():
    so = build(INVALID_BYTE, "invalid")
    found = native_instructions(so, "entry")
    listing = objdump_function(so, "entry")
    bad = [address for address, text in listing if text == "(bad)"]
    assert found.undecoded == bad and len(bad) == 1
    assert found["ret"] == 1, "decoding resumed after the bad byte"
    assert sum(found.values()) == len(listing) - 1, "every other instruction is counted once"


def objdump_function(path, symbol):
    """[(address, instruction text)] of one function, by binutils."""
    if not shutil.which("objdump"):
        pytest.skip("binutils' objdump is not installed")
    text = subprocess.run(["objdump", "-d", "-M", "intel", "--no-show-raw-insn", f"--disassemble={symbol}",
                           str(path)], capture_output=True, text=True, check=True).stdout
    return [(int(m[1], 16), m[2].strip()) for m in re.finditer(r"^\s*([0-9a-f]+):\s+(.*)$", text, re.M)]


EXPORTED_HELPER = f"""
{VNNI512} {NOT_INLINED} int32_t exported_dot(const uint8_t *a, const int8_t *b) {{
    return _mm512_reduce_add_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(a),
                                                       _mm512_loadu_si512(b)));
}}
int32_t entry(uint8_t *scratch, const uint8_t *a, const int8_t *b, size_t n) {{
    memcpy(scratch, a, n);
    return exported_dot(scratch, b) + 1;
}}
"""


def test_a_plt_call_is_followed_into_this_object_only():
    so = build(EXPORTED_HELPER, "plt")
    found = native_instructions(so, "entry")
    assert found.functions == ["entry", "exported_dot"] and found["vpdpbusd"] == 1
    assert found.external == {"memcpy"}


def test_an_unknown_symbol_names_the_close_ones():
    so = build(HELPER_VNNI, "helper")
    with pytest.raises(KeyError, match="did you mean entry"):
        native_instructions(so, "entyr")


@pytest.mark.parametrize("written, name", [
    ("{vex} vpdpbusd ymm0, ymm2, YMMWORD PTR [rsi+rax*1]", "vpdpbusd"),
    ("VPDPBUSD", "vpdpbusd"), ("notrack jmp", "jmp"), ("lock cmpxchg", "cmpxchg"),
    ("vmovdqu32", "vmovdqu"), ("vmovdqu8", "vmovdqu"), ("vmovdqa64", "vmovdqa"),
    ("vpxord", "vpxor"), ("vpandnq", "vpandn"), ("vpandd", "vpand"), ("vpord", "vpor"),
    ("vpdpbusds", "vpdpbusds"), ("vpmaddwd", "vpmaddwd"), ("vpandn", "vpandn")])
def test_canonical_names(written, name):
    assert canonical(written) == name


def test_requirements_are_case_insensitive_patterns():
    present = Counter({"vpdpbusds": 3, "vpdpbusd": 5, "vmovdqu": 9})
    assert requires_met(present, ["VPDPBUSD"]) == (True, "present: vpdpbusd x5")
    assert requires_met(present, ["vpdpbus*"]) == (True, "present: vpdpbusd x5, vpdpbusds x3")
    assert requires_met(present, "vmovdqu64")[0], "an EVEX spelling matches the shared name"
    assert requires_met(present, []) == (True, "no instructions required")
    met, why = requires_met(Counter({"smlal": 40, "ldr": 7}), ["sdot"], seen="executed")
    assert (met, why) == (False, "none of sdot is executed; executed: smlal x40, ldr x7")
    assert requires_met(Counter({"sdot": 2, "udot": 0}), ["udot"])[0] is False, "a zero count is absent"
    assert requires_met(Counter(), ["sdot"]) == (False, "none of sdot is present; no instructions at all")


def test_a_long_summary_is_cut():
    present = Counter({f"op{i}": 1 for i in range(20)})
    why = requires_met(present, ["vpdpbusd"])[1]
    assert why.endswith(", ... (12 more)") and why.count(" x1") == 8


def executor_library(name):
    """The shared object NativeExecutor really loaded for built-in kernel `name`, and its entry symbol."""
    from lowp.kernels import kernel
    from lowp.kernels.executors import NativeExecutor
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"the host is {platform.machine()}, not x86-64")
    k = kernel(name)
    ffi, lib = NativeExecutor(k)._lib
    return loaded_from(int(ffi.cast("uintptr_t", getattr(lib, k.symbol)))), k.symbol


@pytest.mark.parametrize("name, has, lacks", [
    ("u8s8s32_avx512vnni", "vpdpbusd", "vpmaddubsw"),
    ("u8s8s32_avxvnni", "vpdpbusd", "vpmaddubsw"),    # VEX: decoded through the objdump fallback
    ("u8s8s32_avx2", "vpmaddubsw", "vpdpbusd"),
    ("u8s8s32_avx512bw", "vpmaddubsw", "vpdpbusd"),
])
def test_builtin_kernels_contain_their_path(name, has, lacks):
    path, symbol = executor_library(name)
    found = native_instructions(path, symbol)
    assert found[has] >= 1 and found[lacks] == 0, found
    assert not found.undecoded
    assert any("micro" in f for f in found.functions[1:]), "the micro-kernel is a static helper behind a call"
    assert requires_met(found, [lacks]) [0] is False and requires_met(found, [has])[0]
