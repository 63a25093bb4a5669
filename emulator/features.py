"""CPU feature names, as Linux prints them in /proc/cpuinfo: the x86 "flags" line, the AArch64 "Features" line
(HWCAP and HWCAP2 names) and RISC-V's extension letters, with the compilers' other spellings of them and a
did-you-mean for misspelt ones.

Plain tables and string matching, importing nothing of lowp: the emulator needs them (qemu's AT_HWCAP bits,
LOWP_DISABLE_FEATURES) and so does the kernel schema (lowp.kernels.features), which sits above the emulator.
Which names are valid on this host (the tables, lowp's own detection and /proc/cpuinfo) is
lowp.emulator.host.known_features.
"""
from __future__ import annotations

import difflib
import re

# The x86 flags /proc/cpuinfo prints: the quoted names of the X86_FEATURE_* comments (a define without a quoted
# name is not displayed), words 0-21, without the X86_BUG_* names (they go on the "bugs" line).
# Source: ColinIanKing/linux-next, arch/x86/include/asm/cpufeatures.h, commit 1fcadd378b933b7f8336019d76621b24375abfb8
X86_LINUX_FLAGS = (
    # word 0: CPUID 0x00000001 EDX
    "fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sep", "mtrr", "pge", "mca", "cmov",
    "pat", "pse36", "pn", "clflush", "dts", "acpi", "mmx", "fxsr", "sse", "sse2", "ss", "ht", "tm", "ia64", "pbe",
    # word 1: CPUID 0x80000001 EDX
    "syscall", "mp", "nx", "mmxext", "fxsr_opt", "pdpe1gb", "rdtscp", "lm", "3dnowext", "3dnow",
    # word 2: Transmeta
    "recovery", "longrun", "lrti",
    # word 3: Linux-defined
    "cxmmx", "k6_mtrr", "cyrix_arr", "centaur_mcr", "constant_tsc", "up", "art", "arch_perfmon", "pebs", "bts",
    "rep_good", "amd_lbr_v2", "acc_power", "nopl", "xtopology", "tsc_reliable", "nonstop_tsc", "cpuid",
    "extd_apicid", "amd_dcm", "aperfmperf", "rapl", "nonstop_tsc_s3", "tsc_known_freq",
    # word 4: CPUID 0x00000001 ECX
    "pni", "pclmulqdq", "dtes64", "monitor", "ds_cpl", "vmx", "smx", "est", "tm2", "ssse3", "cid", "sdbg", "fma",
    "cx16", "xtpr", "pdcm", "pcid", "dca", "sse4_1", "sse4_2", "x2apic", "movbe", "popcnt", "tsc_deadline_timer",
    "aes", "xsave", "avx", "f16c", "rdrand", "hypervisor",
    # word 5: VIA/Cyrix/Centaur
    "rng", "rng_en", "ace", "ace_en", "ace2", "ace2_en", "phe", "phe_en", "pmm", "pmm_en",
    # word 6: CPUID 0x80000001 ECX
    "lahf_lm", "cmp_legacy", "svm", "extapic", "cr8_legacy", "abm", "sse4a", "misalignsse", "3dnowprefetch", "osvw",
    "ibs", "xop", "skinit", "wdt", "lwp", "fma4", "tce", "nodeid_msr", "tbm", "topoext", "perfctr_core",
    "perfctr_nb", "bpext", "ptsc", "perfctr_llc", "mwaitx",
    # word 7: Linux-defined auxiliary
    "ring3mwait", "cpuid_fault", "cpb", "epb", "cat_l3", "cat_l2", "cdp_l3", "tdx_host_platform", "hw_pstate",
    "proc_feedback", "pti", "intel_ppin", "cdp_l2", "ssbd", "mba", "perfmon_v2", "ibrs", "ibpb", "stibp",
    "ibrs_enhanced",
    # word 8: virtualization
    "tpr_shadow", "flexpriority", "ept", "vpid", "vmmcall", "ept_ad", "tdx_guest",
    # word 9: CPUID 0x00000007:0 EBX
    "fsgsbase", "tsc_adjust", "sgx", "bmi1", "hle", "avx2", "smep", "bmi2", "erms", "invpcid", "rtm", "cqm", "mpx",
    "rdt_a", "avx512f", "avx512dq", "rdseed", "adx", "smap", "avx512ifma", "clflushopt", "clwb", "intel_pt",
    "avx512pf", "avx512er", "avx512cd", "sha_ni", "avx512bw", "avx512vl",
    # word 10: CPUID 0x0000000d:1 EAX
    "xsaveopt", "xsavec", "xgetbv1", "xsaves",
    # word 11: Linux-defined extended auxiliary
    "cqm_llc", "cqm_occup_llc", "cqm_mbm_total", "cqm_mbm_local", "split_lock_detect", "user_shstk",
    # word 12: CPUID 0x00000007:1 EAX
    "avx_vnni", "avx512_bf16", "fred", "lam",
    # word 13: CPUID 0x80000008 EBX
    "clzero", "irperf", "xsaveerptr", "rdpru", "wbnoinvd", "amd_ppin", "virt_ssbd", "cppc", "brs",
    # word 14: CPUID 0x00000006 EAX
    "dtherm", "ida", "arat", "pln", "pts", "hwp", "hwp_notify", "hwp_act_window", "hwp_epp", "hwp_pkg_req", "hfi",
    # word 15: CPUID 0x8000000a EDX
    "npt", "lbrv", "svm_lock", "nrip_save", "tsc_scale", "vmcb_clean", "flushbyasid", "decodeassists",
    "pausefilter", "pfthreshold", "avic", "v_vmsave_vmload", "vgif", "x2avic", "v_spec_ctrl", "vnmi",
    # word 16: CPUID 0x00000007:0 ECX
    "avx512vbmi", "umip", "pku", "ospke", "waitpkg", "avx512_vbmi2", "gfni", "vaes", "vpclmulqdq", "avx512_vnni",
    "avx512_bitalg", "tme", "avx512_vpopcntdq", "la57", "rdpid", "bus_lock_detect", "cldemote", "movdiri",
    "movdir64b", "enqcmd", "sgx_lc",
    # word 17: Linux-defined
    "overflow_recov", "succor", "smca",
    # word 18: CPUID 0x00000007:0 EDX
    "avx512_4vnniw", "avx512_4fmaps", "fsrm", "avx512_vp2intersect", "md_clear", "serialize", "tsxldtrk", "pconfig",
    "arch_lbr", "ibt", "amx_bf16", "avx512_fp16", "amx_tile", "amx_int8", "flush_l1d", "arch_capabilities",
    # word 19: CPUID 0x8000001f EAX
    "sme", "sev", "sev_es", "sev_snp", "debug_swap", "svsm",
    # word 21: Linux-defined extended auxiliary
    "amd_lbr_pmc_freeze",
)

# The AArch64 names /proc/cpuinfo prints on its "Features" line (hwcap_str, HWCAP and HWCAP2 in one table).
# Source: Kingxukai/linux, arch/arm64/kernel/cpuinfo.c, commit 0291023e7330da28f2f7453c87c2ab7082d8360f
AARCH64_HWCAPS = (
    "fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp", "cpuid",
    "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3", "sm4", "asimddp", "sha512", "sve", "asimdfhm",
    "dit", "uscat", "ilrcpc", "flagm", "ssbs", "sb", "paca", "pacg", "gcs", "dcpodp", "sve2", "sveaes", "svepmull",
    "svebitperm", "svesha3", "svesm4", "flagm2", "frint", "svei8mm", "svef32mm", "svef64mm", "svebf16", "i8mm",
    "bf16", "dgh", "rng", "bti", "mte", "ecv", "afp", "rpres", "mte3", "sme", "smei16i64", "smef64f64", "smei8i32",
    "smef16f32", "smeb16f32", "smef32f32", "smefa64", "wfxt", "ebf16", "sveebf16", "cssc", "rprfm", "sve2p1",
    "sme2", "sme2p1", "smei16i32", "smebi32i32", "smeb16b16", "smef16f16", "mops", "hbc", "sveb16b16", "lrcpc3",
    "lse128", "fpmr", "lut", "faminmax", "f8cvt", "f8fma", "f8dp4", "f8dp2", "f8e4m3", "f8e5m2", "smelutv2",
    "smef8f16", "smef8f32", "smesf8fma", "smesf8dp4", "smesf8dp2", "poe", "cmpbr", "fprcvt", "f8mm8", "f8mm4",
    "svef16mm", "sveeltperm", "sveaes2", "svebfscale", "sve2p2", "sme2p2", "smesbitperm", "smeaes", "smesfexpa",
    "smestmop", "smesmop4", "mtefar", "mtestoreonly",
)

# RISC-V 64 (qemu-riscv64): the single-letter extensions Linux's AT_HWCAP carries (arch/riscv/include/uapi/asm/
# hwcap.h: bit i is 'a' + i), V's sub-extensions and the Zvl*b minimum-VLEN names of the RVV 1.0 spec (v-spec.adoc
# sections 18.1-18.3): a kernel that needs VLEN >= 256 lists zvl256b. lowp.emulator.qemu.riscv64_features says
# which a -cpu gives.
RISCV64_EXTENSIONS = ("i", "m", "a", "f", "d", "c", "v", "zve32x", "zve32f", "zve64x", "zve64f", "zve64d",
                      "zvl32b", "zvl64b", "zvl128b", "zvl256b", "zvl512b", "zvl1024b", "zvl2048b", "zvl4096b",
                      # half precision: scalar (Zfh, Zfhmin) and vector (Zvfh, Zvfhmin; Zvfh implies Zvfhmin and
                      # Zfhmin: v-spec.adoc section 18.5); XNNPACK's rvvfp16arith kernels ask for Zvfh
                      "zfh", "zfhmin", "zvfh", "zvfhmin")

# 32-bit Arm (AArch32): the names /proc/cpuinfo prints for AT_HWCAP bits 0.. and AT_HWCAP2 bits 0.. (hwcap_str and
# hwcap2_str). Source: torvalds/linux arch/arm/kernel/setup.c and arch/arm/include/uapi/asm/hwcap.h (v6.12).
ARM_HWCAPS = ("swp", "half", "thumb", "26bit", "fastmult", "fpa", "vfp", "edsp", "java", "iwmmxt", "crunch", "thumbee",
              "neon", "vfpv3", "vfpv3d16", "tls", "vfpv4", "idiva", "idivt", "vfpd32", "lpae", "evtstrm", "fphp",
              "asimdhp", "asimddp", "asimdfhm", "asimdbf16", "i8mm")
ARM_HWCAPS2 = ("aes", "pmull", "sha1", "sha2", "crc32", "sb", "ssbs")
# No HWCAP bit says the architecture version, which XNNPACK's dispatch asks (cpuinfo_has_arm_v6: the ARMv6 SIMD32
# instructions SMLAD, SXTB16, ...; cpuinfo_has_arm_neon_v8: VCVTN and the other ARMv8 AArch32 NEON instructions);
# Linux prints it as "CPU architecture". lowp names it armv6, armv7, armv8: a CPU of version v has every armvN, N <= v.
ARM_ARCHITECTURES = ("armv5", "armv6", "armv7", "armv8")

# Hexagon (qemu-hexagon): zig's -mcpu feature names of the architecture versions and of HVX (the versions qemu-hexagon
# 10 offers as -cpu, v66..v73; hvx_length128b, the only vector length qemu implements; the HVX float extensions).
# lowp.emulator.qemu.hexagon_features says which a -cpu gives.
HEXAGON_FEATURES = ("v66", "v67", "v68", "v69", "v71", "v73", "hvx", "hvxv66", "hvxv67", "hvxv68", "hvxv69",
                    "hvxv71", "hvxv73", "hvx_length64b", "hvx_length128b", "hvx_qfloat", "hvx_ieee_fp")

# WebAssembly (wasm32, on wasmtime): the proposals a module may use (SIMD128; relaxed SIMD) and the behaviour of
# the relaxed dot product the engine gives (implementation-defined: lowp.isa_models.wasm.RELAXED_DOT names each).
# XNNPACK's dispatch asks the same question of the engine (src/configs/hardware-config.c: use_wasm_sdot,
# use_wasm_usdot); a kernel entry lists the behaviour it is judged under.
WASM32_FEATURES = ("simd128", "relaxed_simd", "relaxed_dot_sdot", "relaxed_dot_pmaddubsw", "relaxed_dot_vpdpbusd")

# The architectures a kernel entry names as its `target`, each with its table above.
TARGETS = ("x86-64", "aarch64", "riscv64", "arm", "hexagon", "wasm32")

# Compiler spellings (GCC/clang -m and -march=+feature names) of features whose /proc/cpuinfo name differs by more
# than separators: a kernel author writes what they pass the compiler; the error then names the flag to list.
COMPILER_NAMES = {
    "x86-64": {"sse3": "pni", "sha": "sha_ni", "bmi": "bmi1", "lzcnt": "abm", "pclmul": "pclmulqdq",
               "avxvnniint8": "avx_vnni_int8"},
    "aarch64": {"neon": "asimd", "simd": "asimd", "dotprod": "asimddp", "rdm": "asimdrdm", "fp16": "asimdhp",
                "fullfp16": "asimdhp", "fp16fml": "asimdfhm", "crypto": "aes", "lse": "atomics", "rcpc": "lrcpc",
                "crc": "crc32", "sha256": "sha2"},
}


def _squash(name: str) -> str:
    return re.sub(r"[-_.]", "", name.lower())


def did_you_mean(name: str, choices, n: int = 3, aliases: dict | None = None) -> list[str]:
    """The closest names to a misspelt one, best first (difflib's ratio, as Python's own suggestions use); a name
    that differs only by case or separators ('avx512vnni', 'sse4.1') or is a known alias comes first."""
    choices = list(choices)
    squashed = {_squash(c): c for c in choices}
    exact = (aliases or {}).get(_squash(name)) or squashed.get(_squash(name))
    close = difflib.get_close_matches(name, choices, n=n, cutoff=0.6)
    return ([exact] if exact else []) + [c for c in close if c != exact][: n - bool(exact)]
