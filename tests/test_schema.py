"""The kernel schema: every malformed kernel entry is refused before anything runs, with the file, the kernel,
the key and the nearest accepted names; `lowp conformance` exits 2 on it. Paths in a TOML resolve against the
file; CPU feature names are the ones Linux's /proc/cpuinfo prints; the built-in kernels all pass."""
from __future__ import annotations

import dataclasses
import json
import pickle
import platform
import struct
from pathlib import Path

import numpy as np
import pytest

from lowp.cli import main
from lowp.conformance.search.validate import select_kernels, validate_kernels
from lowp.kernels import Domain, Kernel, KernelConfigError, Tile, kernels, load_toml, register
from lowp.kernels import features as feat
from lowp.kernels.models import exact_gemm
from lowp.kernels.registry import _KERNELS, _ORIGINS
from lowp.kernels.schema import KernelSpec, resolve_cflags, specs_from_toml, validate_kernel

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
GOOD = {
    "name": "schema_test_k", "target": "x86-64", "features": ["avx2"], "source": "k.c",
    "symbol": "schema_test_k_gemm", "signature": "gemm", "a_type": "u8", "b_type": "s8", "packing": "none",
    "tile": {"mr": 1, "nr": 1, "kr": 2}, "contract": "exact", "domain": {"a": [0, 127], "b": [-128, 127]},
    "model": "lowp.kernels.models:exact_gemm",
}


def toml_value(v) -> str:
    """A TOML literal for the values the tests use (JSON's string escapes are TOML's)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(toml_value, v)) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"


def write_toml(folder: Path, *entries: dict) -> Path:
    (folder / "k.c").write_text("/* never compiled: the schema refuses the entry first */\n")
    text = "".join("[[kernel]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in e.items()) + "\n"
                   for e in entries)
    path = folder / "kernels.toml"
    path.write_text(text)
    return path


def entry(**changes) -> dict:
    """GOOD with `changes` (a value of None drops the key); nested keys as 'tile__mr'."""
    e = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        outer, _, inner = key.partition("__")
        target = e[outer] if inner else e
        key = inner or outer
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return e


@pytest.fixture(autouse=True)
def forget_test_kernels():
    """Unregister what a test registered, so tests (and other test files) can reuse names."""
    kernels()                                       # the built-ins first: they stay
    before = set(_KERNELS)
    yield
    for name in set(_KERNELS) - before:
        _KERNELS.pop(name)
        _ORIGINS.pop(name, None)


# (changes to a good entry, the key named, what the message must say)
BAD = {
    "misspelt key": (dict(sorce="k.c"), "sorce", ["did you mean 'source'"]),
    "misspelt tile key": (dict(tile__spil=3), "tile.spil", ["did you mean 'spill'", "mr, nr, kr, spill"]),
    "missing key": (dict(symbol=None), "symbol", ["missing"]),
    "string for int": (dict(tile__mr="4"), "tile.mr", ["integer", "'4'"]),
    "bool for int": (dict(tile__kr=True), "tile.kr", ["integer"]),
    "zero tile": (dict(tile__nr=0), "tile.nr", ["greater than or equal to 1"]),
    "negative spill": (dict(tile__spill=-1), "tile.spill", ["greater than or equal to 0"]),
    "unknown target": (dict(target="x86_64"), "target", ["did you mean 'x86-64'", "x86-64, aarch64"]),
    "unknown a_type": (dict(a_type="u9"), "a_type", ["'u9'", "u8, s8, u16, s16"]),
    "misspelt b_type": (dict(b_type="S8"), "b_type", ["did you mean 's8'"]),
    "unknown signature": (dict(signature="gem"), "signature", ["did you mean 'gemm'", "Accepted: gemm"]),
    "feature typo": (dict(features=["avx3"]), "features", ["'avx3'", "'avx2'", "/proc/cpuinfo"]),
    "feature spelling": (dict(features=["avx512vnni"]), "features", ["did you mean 'avx512_vnni'"]),
    "feature of the other target": (dict(features=["asimddp"]), "features", ["an aarch64 feature"]),
    "aarch64 compiler name": (dict(target="aarch64", features=["dotprod"]), "features", ["did you mean 'asimddp'"]),
    "features not a list": (dict(features="avx2"), "features", ["tuple", "'avx2'"]),
    "domain outside the type": (dict(domain__a=[0, 300]), "domain", ["[0, 300]", "u8", "[0, 255]"]),
    "empty domain": (dict(domain__b=[5, -5]), "domain", ["lo > hi"]),
    "domain of one bound": (dict(domain__a=[0]), "domain.a[1]", ["missing", "[lo, hi]"]),
    "domain of three": (dict(domain__b=[0, 1, 2]), "domain.b", ["at most 2 items"]),
    "float param": (dict(params={"n": 1.5}), "params.n", ["integer", "1.5"]),
    "param not an identifier": (dict(params={"a-b": 1}), "params.a-b", ["'a-b'", "C identifier"]),
    "int cflag": (dict(cflags=["-O3", 3]), "cflags[1]", ["string"]),
    "cflags as one string": (dict(cflags="-O3 -mavx2"), "cflags", ["tuple"]),
    "int in requires": (dict(requires=[3]), "requires[0]", ["string"]),
    "over-read of an unknown buffer": (dict(overread={"a": 16}), "overread.a", ["did you mean 'A'", "A, B, C, work"]),
    "negative over-read": (dict(overread={"work": -1}), "overread.work", ["greater than or equal to 0"]),
    "missing source": (dict(source="nothere.c"), "source", ["no such file", "nothere.c"]),
    "missing header": (dict(depends=["nothere.h"]), "depends", ["no such file", "nothere.h"]),
    "source and sources": (dict(sources=["k.c"]), "source", ["not both", "sources = [...]"]),
    "neither source nor sources": (dict(source=None), "source", ["missing", "sources = ["]),
    "missing one of the sources": (dict(source=None, sources=["k.c", "nothere.cc"]), "sources[1]",
                                   ["no such file", "nothere.cc"]),
    "no sources": (dict(source=None, sources=[]), "sources", ["at least 1 item"]),
    "source of no known language": (dict(source="k.f90"), "source", ["unknown source language '.f90'", ".cc (c++)",
                                                                      ".S (assembler-with-cpp)"]),
    "missing include dir": (dict(include_dirs=["noinc"]), "include_dirs[0]", ["no such directory", "noinc"]),
    "include dir that is a file": (dict(include_dirs=["k.c"]), "include_dirs[0]", ["no such directory", "k.c"]),
    "define not an identifier": (dict(defines=["TILE=4", "1X=2"]), "defines[1]", ["'1X=2'", "NAME or NAME=VALUE"]),
    "define with a blank": (dict(defines=["A B"]), "defines[0]", ["'A B'", "C identifier"]),
    "define not a string": (dict(defines=[3]), "defines[0]", ["string"]),
    "model that does not import": (dict(model="no_such_module:f"), "model", ["cannot import", "no_such_module"]),
    "misspelt model": (dict(model="lowp.kernels.models:exact_gem"), "model", ["did you mean 'exact_gemm'"]),
    "model without a function": (dict(model="lowp.kernels.models"), "model", ["'module:function'"]),
    "name with a colon": (dict(name="a:b"), "name", ["no ':'"]),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_load_toml_refuses_a_bad_entry_naming_file_kernel_key_and_suggestion(case, tmp_path):
    changes, key, says = BAD[case]
    path = write_toml(tmp_path, entry(**changes))
    with pytest.raises(KernelConfigError) as info:
        load_toml(path)
    error = info.value
    name = changes.get("name", GOOD["name"])
    assert (error.path, error.kernel, error.key) == (path, name, key)
    assert len(error.problems) == 1, str(error)
    message = str(error)
    for text in [str(path), repr(name), key, *says]:
        assert text in message, (text, message)
    assert name not in _KERNELS                     # nothing of a refused file is registered


@pytest.mark.parametrize("case", ["misspelt key", "feature typo", "unknown target", "model that does not import",
                                  "domain outside the type"])
def test_conformance_command_exits_2_on_a_bad_entry_before_running_anything(case, tmp_path, capsys):
    changes, key, says = BAD[case]
    path = write_toml(tmp_path, entry(**changes))
    out = tmp_path / "report"
    assert main(["conformance", "--kernels", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    for text in [str(path), GOOD["name"], key, *says]:
        assert text in err, (text, err)
    assert not out.exists()                         # nothing ran, no journal, no report


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    path = write_toml(tmp_path, entry(features=["avx3"], tile__spil=1),
                      entry(name="schema_test_k2", target="arm64", source="nothere.c"), entry())
    with pytest.raises(KernelConfigError) as info:
        load_toml(path)
    got = {(p.kernel, p.key) for p in info.value.problems}
    assert got == {("schema_test_k", "features"), ("schema_test_k", "tile.spil"), ("schema_test_k2", "target"),
                   ("schema_test_k2", "source"), ("schema_test_k", "name")}      # the third entry reuses the name
    assert str(info.value).startswith("5 problems")
    again = pickle.loads(pickle.dumps(info.value))               # as a child process hands it back
    assert again.problems == info.value.problems and str(again) == str(info.value)
    assert "schema_test_k" not in _KERNELS and "schema_test_k2" not in _KERNELS


@pytest.mark.parametrize("text, says", [
    ("[[kernel]\nname = 1\n", "not valid TOML"),
    ("[[kernels]]\nname = 'x'\n", "did you mean 'kernel'"),
    ("[kernel]\nname = 'x'\n", "[[kernel]] table"),
    ("# nothing\n", "no [[kernel]] tables"),
])
def test_a_malformed_file_is_a_config_error(text, says, tmp_path):
    path = tmp_path / "k.toml"
    path.write_text(text)
    with pytest.raises(KernelConfigError, match=r"k\.toml") as info:
        load_toml(path)
    assert says in str(info.value) and info.value.path == path


def test_a_missing_file_is_a_config_error(tmp_path, capsys):
    assert main(["conformance", "--kernels", str(tmp_path / "none.toml"), "--out", str(tmp_path / "r")]) == 2
    assert "none.toml: cannot read the kernels file" in capsys.readouterr().err


def test_unknown_contract_and_unknown_kernel_name_exit_2_with_suggestions(tmp_path, capsys):
    path = write_toml(tmp_path, entry(contract="exakt"))
    status = main(["conformance", "--kernels", str(path), "--kernel", "u8s8s32_avx3", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{path}: kernel 'schema_test_k': contract: unknown contract 'exakt'; did you mean 'exact'?" in err
    assert "kernel 'u8s8s32_avx3': no kernel of this name is registered; did you mean 'u8s8s32_avx2'" in err
    assert not (tmp_path / "r").exists()


def test_validate_kernels_checks_contracts_of_python_kernels():
    good = kernels()[0]
    bad = dataclasses.replace(good, name="schema_test_py", contract="fbgemm_acc16")
    validate_kernels([good])
    with pytest.raises(KernelConfigError, match="did you mean 'fbgemm-acc16'") as info:
        validate_kernels([good, bad])
    assert (info.value.kernel, info.value.key) == ("schema_test_py", "contract")
    with pytest.raises(KernelConfigError, match="did you mean 'sdot_s8_neon'"):
        select_kernels(["sdot_s8_nein"], kernels())
    assert [k.name for k in select_kernels(["sdot_s8_neon"], kernels())] == ["sdot_s8_neon"]


def test_the_example_toml_loads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                     # paths resolve against the file, not the working directory
    specs = {s.name: s.to_kernel() for s in specs_from_toml(EXAMPLES / "kernels.toml")}
    assert set(specs) == {"my_maddubs_avx2", "my_sdot_neon"}
    k = specs["my_maddubs_avx2"]
    assert k.source == EXAMPLES.resolve() / "my_maddubs_avx2.c" and k.source.is_file()
    assert isinstance(k.tile, Tile) and isinstance(k.domain, Domain) and k.domain.a == (0, 127)
    assert k.cflags == ("-O3", "-mavx2") and specs["my_sdot_neon"].cflags == ("-O3",)
    A, B = np.ones((2, 3), np.uint8), np.ones((3, 2), np.int8)
    assert (k.predict(A, B) == 3).all()             # the model string became the function


def test_relative_paths_resolve_against_the_toml_file(tmp_path, monkeypatch):
    folder = tmp_path / "proj"
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "k.h").write_text("#define X 1\n")
    cflags = ["-O3", "-I", "include", "-Iinc2", "-isystem", "sys", "-iquote", "q", "-include", "pre.h",
              "-I/abs/dir", "-I=sysroot/dir", "-include-pch", "x.pch", "-DX=1"]
    (folder / "sub").mkdir()
    (folder / "sub" / "two.S").write_text("")
    path = write_toml(folder, entry(cflags=cflags, depends=["include/k.h"]),
                      entry(name="schema_test_k2", source=None, sources=["k.c", "sub/two.S"],
                            include_dirs=["include", "sub"]))
    monkeypatch.chdir(tmp_path)
    k, k2 = load_toml(Path("proj") / "kernels.toml")
    base = folder.resolve()
    assert k.source == base / "k.c" and k.sources == (k.source,) and k.depends == (base / "include" / "k.h",)
    assert k2.sources == (base / "k.c", base / "sub" / "two.S")
    assert k2.include_dirs == (base / "include", base / "sub")
    assert k.cflags == ("-O3", "-I", str(base / "include"), f"-I{base / 'inc2'}", "-isystem", str(base / "sys"),
                        "-iquote", str(base / "q"), "-include", str(base / "pre.h"), "-I/abs/dir",
                        "-I=sysroot/dir", "-include-pch", "x.pch", "-DX=1")
    assert specs_from_toml(path.resolve())[0].cflags == k.cflags       # the same from an absolute path


def test_resolve_cflags_keeps_what_is_not_an_include_path(tmp_path):
    assert resolve_cflags(["-O2", "-march=native", "-Wall", "-idirafter", "d"], tmp_path) == \
        ["-O2", "-march=native", "-Wall", "-idirafter", str(tmp_path.resolve() / "d")]


# ---- Python registration -------------------------------------------------------------------------------------
def python_kernel(**changes) -> Kernel:
    fields = dict(name="schema_test_py", target="x86-64", features=("avx2",), source=EXAMPLES / "my_maddubs_avx2.c",
                  symbol="my_maddubs_avx2_gemm", signature="gemm", a_type="u8", b_type="s8", tile=Tile(1, 1, 2),
                  packing="none", contract="exact", domain=Domain((0, 127), (-128, 127)), model=exact_gemm)
    return Kernel(**{**fields, **changes})


def test_register_validates_python_kernels_and_names_the_calling_file():
    with pytest.raises(KernelConfigError) as info:
        register(python_kernel(features=("avx3",), tile=Tile(4, 0, 1), domain=Domain((0, 256), (-128, 127)),
                               model="lowp.kernels.models:exact_gemm", overread={"a": 4}))
    error = info.value
    assert error.path == Path(__file__).resolve() and error.kernel == "schema_test_py"
    assert [p.key for p in error.problems] == ["features", "tile.nr", "domain", "model", "overread.a"]
    assert "did you mean 'A'" in str(error) and "a 'module:function' string is for TOML" in str(error)
    with pytest.raises(KernelConfigError, match="must be a lowp.kernels.Tile"):
        register(python_kernel(tile={"mr": 1, "nr": 1, "kr": 1}))
    assert "schema_test_py" not in _KERNELS


def test_register_accepts_numpy_ints_and_refuses_a_second_kernel_of_the_same_name():
    register(python_kernel(tile=Tile(np.int64(4), 2, 4), params={}))
    with pytest.raises(KernelConfigError, match="registered twice") as info:
        register(python_kernel())
    assert isinstance(info.value, ValueError) and info.value.key == "name"


def test_the_builtin_kernels_all_validate():
    builtin = kernels()
    assert len(builtin) >= 10
    for k in builtin:
        validate_kernel(k)
        assert set(k.features) <= feat.known_features(k.target)
    validate_kernels(builtin)


def test_the_schema_covers_every_kernel_field():
    # `source` is the schema's one-file spelling of Kernel.sources (Kernel.source is a property: the first file)
    assert [n for n in KernelSpec.model_fields if n != "source"] == [f.name for f in dataclasses.fields(Kernel)]


def test_source_is_the_one_file_form_of_sources(tmp_path):
    (tmp_path / "b.S").write_text("")
    one = python_kernel()
    assert one.sources == (EXAMPLES / "my_maddubs_avx2.c",) and one.source == one.sources[0]
    two = python_kernel(source=None, sources=[EXAMPLES / "my_maddubs_avx2.c", tmp_path / "b.S"])
    assert two.sources == (EXAMPLES / "my_maddubs_avx2.c", tmp_path / "b.S") and two.source == two.sources[0]
    validate_kernel(two)
    assert dataclasses.replace(two, params={}).sources == two.sources
    with pytest.raises(TypeError, match="not both"):
        python_kernel(sources=(tmp_path / "b.S",))
    flags = python_kernel(cflags=("-O2",), include_dirs=(tmp_path,), defines=("A", "B=x y")).build_flags()
    assert flags == ("-O2", f"-I{tmp_path}", "-DA", "-DB=x y")


# ---- CPU features --------------------------------------------------------------------------------------------
def test_feature_names_accepted_and_rejected():
    x86, arm = feat.known_features("x86-64"), feat.known_features("aarch64")
    assert {"avx2", "fma", "avx512_vnni", "avx_vnni", "pni", "sse4_1", "sha_ni", "amx_int8"} <= x86
    assert {"avx_vnni_int8"} <= x86                  # lowp's own CPUID detection names it; Linux does not print it
    assert not {"avx3", "avx512vnni", "sse3", "sse4.1", "asimd", "syscall32"} & x86
    assert {"fp", "asimd", "asimddp", "asimdrdm", "asimdhp", "i8mm", "sve", "sme2"} <= arm
    assert not {"neon", "dotprod", "avx2", "sve3"} & arm
    assert feat.suggest_feature("avx3", "x86-64")[:2] == ["avx", "avx2"]
    assert feat.suggest_feature("avx512vnni", "x86-64")[0] == "avx512_vnni"
    assert feat.suggest_feature("SSE4.1", "x86-64")[0] == "sse4_1"
    assert feat.suggest_feature("sse3", "x86-64")[0] == "pni"
    assert feat.suggest_feature("neon", "aarch64")[0] == "asimd"
    assert feat.suggest_feature("xyzzy", "aarch64") == []
    assert {"v", "zvl128b", "zvl256b"} <= feat.known_features("riscv64")
    with pytest.raises(ValueError, match="unknown target"):
        feat.known_features("mips64")


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="no /proc/cpuinfo")
def test_every_flag_this_cpu_reports_is_a_known_name():
    host = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "aarch64"}.get(platform.machine().lower())
    flags = feat.proc_cpuinfo_flags()
    if host is None or not flags:
        pytest.skip("no feature line for a known target in /proc/cpuinfo")
    static = set(feat.X86_LINUX_FLAGS if host == "x86-64" else feat.AARCH64_HWCAPS)
    assert flags - static == set(), "a newer kernel prints flags lowp.kernels.features does not list: add them"


def test_proc_cpuinfo_parsing(tmp_path):
    (tmp_path / "x86").write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2\nbugs\t\t: spectre_v1\n\n"
                                  "processor\t: 1\nflags\t\t: fpu\n")
    (tmp_path / "arm").write_text("processor\t: 0\nFeatures\t: fp asimd asimddp\nCPU implementer\t: 0x41\n")
    assert feat.proc_cpuinfo_flags(tmp_path / "x86") == {"fpu", "sse2", "avx2"}
    assert feat.proc_cpuinfo_flags(tmp_path / "arm") == {"fp", "asimd", "asimddp"}
    assert feat.proc_cpuinfo_flags(tmp_path / "missing") == frozenset()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 host only")
def test_host_features_x86_join_lowp_detection_and_proc_cpuinfo_less_disabled(monkeypatch):
    from lowp.emulator.x86.native import host_cpu_features
    monkeypatch.delenv("LOWP_DISABLE_FEATURES", raising=False)
    got = feat.host_features("x86-64")
    assert host_cpu_features() <= got and feat.proc_cpuinfo_flags() <= got
    present = sorted(got & {"avx2", "fma", "sse2"})
    assert present, "an x86-64 CPU without SSE2?"
    monkeypatch.setenv("LOWP_DISABLE_FEATURES", ",".join(present))
    assert not set(present) & feat.host_features("x86-64")


def test_host_features_aarch64_are_what_the_emulator_runs(monkeypatch):
    monkeypatch.delenv("LOWP_DISABLE_FEATURES", raising=False)
    got = feat.host_features("aarch64")
    assert {"fp", "asimd", "asimddp", "asimdrdm", "asimdhp", "i8mm"} <= got
    assert not {"sve", "sve2", "bf16", "pacg", "sme"} & got
    assert got <= set(feat.AARCH64_HWCAPS)
    monkeypatch.setenv("LOWP_DISABLE_FEATURES", "i8mm, asimddp")
    assert not {"i8mm", "asimddp"} & feat.host_features("aarch64")
    with pytest.raises(ValueError, match="unknown target"):
        feat.host_features("mips")


# One instruction per feature that EMULATED_AARCH64 claims (encodings as the LLVM assembler in zig emits them),
# and one of each feature it leaves out on purpose.
RUNS = {
    "fp": 0x1E622820,          # fadd d0, d1, d2
    "asimd": 0x4E228420,       # add v0.16b, v1.16b, v2.16b
    "fphp": 0x1EE22820,        # fadd h0, h1, h2
    "asimdhp": 0x4E421420,     # fadd v0.8h, v1.8h, v2.8h
    "aes": 0x4E284820,         # aese v0.16b, v1.16b
    "pmull": 0x0EE2E020,       # pmull v0.1q, v1.1d, v2.1d
    "sha1": 0x5E280820,        # sha1h s0, s1
    "sha2": 0x5E024020,        # sha256h q0, q1, v2.4s
    "sha512": 0xCE628020,      # sha512h q0, q1, v2.2d
    "sha3": 0xCE020C20,        # eor3 v0.16b, v1.16b, v2.16b, v3.16b
    "sm3": 0xCE420C20,         # sm3ss1 v0.4s, v1.4s, v2.4s, v3.4s
    "sm4": 0xCEC08420,         # sm4e v0.4s, v1.4s
    "crc32": 0x1AC24020,       # crc32b w0, w1, w2
    "atomics": 0xB8200001,     # ldadd w0, w1, [x0]
    "asimdrdm": 0x6E828420,    # sqrdmlah v0.4s, v1.4s, v2.4s
    "asimddp": 0x4E829420,     # sdot v0.4s, v1.16b, v2.16b
    "asimdfhm": 0x4E22EC20,    # fmlal v0.4s, v1.4h, v2.4h
    "jscvt": 0x1E7E0020,       # fjcvtzs w0, d1
    "fcma": 0x6E82C420,        # fcmla v0.4s, v1.4s, v2.4s, #0
    "lrcpc": 0xB8BFC000,       # ldapr w0, [x0]
    "ilrcpc": 0x99400000,      # ldapur w0, [x0]
    "dcpop": 0xD50B7C20,       # dc cvap, x0
    "dcpodp": 0xD50B7D20,      # dc cvadp, x0
    "frint": 0x6E21E820,       # frint32x v0.4s, v1.4s
    "sb": 0xD50330FF,          # sb
    "flagm": 0xD500401F,       # cfinv
    "flagm2": 0xD500405F,      # axflag
    "rng": 0xD53B2400,         # mrs x0, rndr
    "paca": 0xDAC10020,        # pacia x0, x1
    "bti": 0xD503245F,         # bti c
}
RAISES = {"sve": 0x2518E3E0, "pacg": 0x9AC23020, "bf16": 0x6E42FC20, "i8mm": 0x4E82A420}  # ptrue, pacga, bfdot, smmla


def _runs_on_unicorn(word: int) -> bool:
    from unicorn import UC_ARCH_ARM64, UC_MODE_ARM, Uc, UcError
    from unicorn.arm64_const import UC_ARM64_REG_SP, UC_ARM64_REG_X0, UC_CPU_ARM64_MAX
    uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
    uc.ctl_set_cpu_model(UC_CPU_ARM64_MAX)          # as lowp.emulator.Machine sets it up
    uc.mem_map(0x10000, 0x1000)
    uc.mem_map(0x20000, 0x1000)
    uc.mem_write(0x10000, struct.pack("<II", word, 0xD503201F))
    uc.reg_write(UC_ARM64_REG_SP, 0x20800)
    uc.reg_write(UC_ARM64_REG_X0, 0x20800)
    try:
        uc.emu_start(0x10000, 0x10004, count=1)
    except UcError:
        return False
    return True


def test_the_emulated_feature_list_is_what_unicorn_max_runs():
    assert set(RUNS) == set(feat.EMULATED_AARCH64) - {"i8mm"}       # i8mm runs on lowp's models instead
    assert [f for f, word in RUNS.items() if not _runs_on_unicorn(word)] == []
    assert [f for f, word in RAISES.items() if _runs_on_unicorn(word)] == []
    from lowp.emulator.aarch64.i8mm import decode_i8mm
    assert decode_i8mm(RAISES["i8mm"]) is not None                  # the SMMLA Unicorn lacks, lowp decodes


def test_feature_lists_have_no_duplicates_and_cite_their_source():
    for names in (feat.X86_LINUX_FLAGS, feat.AARCH64_HWCAPS, feat.EMULATED_AARCH64):
        assert len(names) == len(set(names))
    source = Path(feat.__file__).read_text()
    assert "arch/x86/include/asm/cpufeatures.h" in source and "arch/arm64/kernel/cpuinfo.c" in source
