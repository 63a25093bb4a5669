"""`lowp xnnpack PATH`: XNNPACK's test YAMLs and ukernel names read, each entry mapped to a lowp kernel or to the
reason it cannot be, and the campaign over tests/xnnpack_tree (lowp's own kernels in XNNPACK's layout and naming:
its README says what each entry must become). Also issue 23 part 5: `--kernel GLOB` and `--no-builtin`."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lowp.conformance.libraries.xnnpack import ISAS, Checkout, NotACheckout, Skip, YamlEntry, parse_name, translate

TREE = Path(__file__).parent / "xnnpack_tree"
YAML = TREE / "test" / "qs8-qc8w-gemm-minmax-fp32.yaml"


def lowp(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "lowp", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


# ---- names and entries ---------------------------------------------------------------------------------------
def test_names_read_as_xnnpack_reads_them():
    n = parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_10x16c4__asm_amd64_avx512vnni")
    assert (n.datatype, n.op, n.requantization, n.mr, n.nr, n.kr, n.sr) == ("qs8-qc8w", "gemm", "fp32", 10, 16, 4, 1)
    assert (n.isa, n.arch, n.assembly) == ("avx512vnni", "amd64", True)
    n = parse_name("xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x8c2s4__neon_mlal")
    assert (n.datatype, n.requantization, n.kr, n.sr, n.isa, n.variant) == ("qd8-f32-qc8w", None, 2, 4, "neon",
                                                                            ("mlal",))
    n = parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x1v__rvv")
    assert (n.nr, n.vector_tile, n.isa) == (1, True, "rvv")
    n = parse_name("xnn_qu8_gemm_minmax_rndnu16_ukernel_4x16__asm_aarch64_neon_mlal_lane_cortex_a53_prfm")
    assert (n.requantization, n.arch, n.isa, n.variant) == ("rndnu16", "aarch64", "neon",
                                                            ("mlal", "lane", "cortex", "a53", "prfm"))
    assert parse_name("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x2__scalar_imagic").isa == "scalar"
    with pytest.raises(ValueError, match="does not read as xnn_<datatype>"):
        parse_name("qs8_gemm_4x4")
    with pytest.raises(ValueError, match="tile '4x4q' does not read"):
        parse_name("xnn_qs8_gemm_minmax_fp32_ukernel_4x4q__avx2")


def _entry(name, init="xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params", pack="xnn_pack_qs8_gemm_goi_w",
           **more) -> YamlEntry:
    return YamlEntry(YAML, 0, {"name": name, "init": init, "pack": pack, "k-block": 8, **more}, "qs8-qc8w", "gemm")


def test_an_avx512vnni_entry_maps_to_xnnpacks_build_and_the_wrapping_stage():
    checkout = Checkout(TREE)
    # translate() needs the source: the 2x8c8 AVX2 source stands in under the VNNI kernel's name
    checkout._definitions(TREE / "src" / "qs8-qc8w-gemm")[
        "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x16c4__avx512vnni"] = TREE / "src/qs8-qc8w-gemm/gen/x.c"
    mapped = translate(_entry("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x16c4__avx512vnni",
                              pack="xnn_pack_qs8_to_qu8_gemm_goi_w"), checkout)
    e = mapped.entry
    assert e["a_shift"] == 128 and e["requires"] == ["vpdpbusd"] and e["overread"] == {"A": 16}
    assert e["model"] == {"accumulate": "lowp.kernels.models:exact_gemm", "output": "xnnpack-fp32-avxvnni-wrap"}
    assert "-mavx512vnni" in e["cflags"] and "-ffp-contract=off" in e["cflags"] and "avx512_vnni" in e["features"]
    assert e["tile"] == {"mr": 4, "nr": 16, "kr": 4} and e["output"] == "xnnpack-fp32"
    assert "XNN_ENABLE_ASSEMBLY=1" in e["defines"]


def test_an_unknown_init_or_pack_is_a_skip_naming_it():
    checkout = Checkout(TREE)
    skip = translate(_entry("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                            init="xnn_init_qs8_qc8w_conv_minmax_fp32_future_params"), checkout)
    assert skip.category == "params layout not supported yet" and skip.message.startswith(
        "init xnn_init_qs8_qc8w_conv_minmax_fp32_future_params: not an init function")
    skip = translate(_entry("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                            pack="xnn_pack_kai_qs8_weights_and_biases"), checkout)
    assert skip == Skip("packing not supported yet", "pack xnn_pack_kai_qs8_weights_and_biases: KleidiAI's own "
                                                     "packed layout (src/reference/packing.cc xnn_pack_kai_*)")
    skip = translate(_entry("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                            pack="xnn_pack_qs8_qc2w_gemm_goi_w"), checkout)     # known now, but packs qc2w only
    assert skip.category == "entry inconsistent" and "does not pack a qs8-qc8w gemm" in skip.message
    skip = translate(_entry("xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf"), checkout)
    assert skip.category == "entry inconsistent" and "does not pack a qs8-qc8w igemm" in skip.message
    assert translate(_entry("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__wasmpshufb"), checkout).category == \
        "ISA wasmpshufb not run"
    assert "no init" in translate(YamlEntry(YAML, 3, {"name": "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_"
                                                              "lrintf", "pack": "p", "k-block": 1},
                                            "qs8-qc8w", "gemm"), checkout).message


def _mapped_as(name, source, **fields):
    """translate() of an entry whose source the tree does not hold: an existing file stands in under its name."""
    checkout = Checkout(TREE)
    parsed = parse_name(name)
    checkout._definitions(TREE / "src" / f"{parsed.datatype}-{parsed.op}")[name] = TREE / source
    return translate(_entry(name, **fields), checkout)


def test_the_abi_as_shipped_maps_with_no_free_text_packing():
    """Issue 23 part 2 through the campaign: fp32_neonv8, qdu8, rndnu16, IGEMM and 4-bit entries become kernel
    entries whose xnnpack table says the packing (no `packing` key), with the datatype's contract and stage."""
    src = "src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-1x4-minmax-fp32-scalar-lrintf.c"
    e = _mapped_as("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c4__neondot", src,
                   init="xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params").entry
    assert (e["xnnpack"]["params"], e["model"]["output"], e["target"]) == ("fp32_neonv8", "xnnpack-fp32-neonv8",
                                                                          "aarch64")
    assert "packing" not in e
    e = YamlEntry(YAML, 0, {"name": "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x16c4__avx512vnni",
                            "init": "xnn_init_f32_minmax_scalar_params", "pack": "xnn_pack_qs8_gemm_goi_w",
                            "k-block": 8, "unsigned-inputs": True}, "qd8-f32-qc8w", "gemm")
    checkout = Checkout(TREE)
    checkout._definitions(TREE / "src" / "qd8-f32-qc8w-gemm")[e.data["name"]] = TREE / src
    e = translate(e, checkout).entry
    assert (e["xnnpack"]["datatype"], e["a_type"], e["output"], e["domain"]["a"]) == ("qdu8-f32-qc8w", "u8",
                                                                                      "qdu8-f32", [0, 255])
    e = _mapped_as("xnn_qu8_gemm_minmax_rndnu16_ukernel_1x4__scalar", src,
                   init="xnn_init_qu8_conv_minmax_rndnu16_scalar_params", pack="xnn_pack_qu8_gemm_goi_w").entry
    assert (e["output"], e["model"]["output"], e["xnnpack"]["params"]) == ("xnnpack-rndnu16", "xnnpack-rndnu16",
                                                                          "rndnu16_scalar")
    e = _mapped_as("xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_4x16c4__avx512vnni", src,
                   pack="xnn_pack_qs8_to_qu8_conv_goki_w").entry
    assert (e["signature"], e["a_shift"]) == ("xnnpack-igemm", 128)
    e = _mapped_as("xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x8c8__avx2", src, init="xnn_init_f32_qc4w_minmax_scalar_"
                   "params", pack="xnn_pack_qs8_qc4w_gemm_goi_w", planes=2).entry
    assert (e["output"], e["model"]["output"], e["domain"]["b"]) == ("qd8-f32-qc4w", "qd8-f32-fma-acc28", [-8, 7])
    skip = _mapped_as("xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x8c8__avx2", src, init="xnn_init_f32_qc4w_minmax_"
                      "scalar_params", pack="xnn_pack_qs8_qc4w_gemm_goi_w", planes=4)
    assert skip == Skip("packing not supported yet", "planes 4: lowp packs qd8-f32-qc4w in 2 plane(s)")


def test_qc2w_entries_map_to_their_contracts_and_float_orders():
    """2-bit weights: qs8-qc2w claims the plain xnnpack-fp32 contract (its int32 sums are not scaled, so no 28-bit
    form), weights in [-2, 1]; the qd8 forms claim the qd8/qdu8 qc2w contracts with the float order of their
    source family: scalar C, x86 with FMA (AVX2, AVX-VNNI), SSSE3 without, AArch64 NEON intrinsics."""
    src = "src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-1x4-minmax-fp32-scalar-lrintf.c"
    e = _mapped_as("xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x8c8__avx2_madd", src, pack="xnn_pack_qs8_to_qu8_qc2w_"
                   "gemm_goi_w", planes=4).entry
    assert (e["output"], e["model"]["output"], e["domain"]["b"], e["a_shift"]) == (
        "xnnpack-fp32", "xnnpack-fp32-avxvnni-wrap", [-2, 1], 128)
    qd8 = {"init": "xnn_init_f32_minmax_scalar_params", "pack": "xnn_pack_qd8_qc2w_gemm_goi_w", "planes": 4}
    for name, unsigned, output, stage in (
            ("2x2__scalar", False, "qd8-f32-qc2w", "qd8-f32-qc2w-scalar"),
            ("1x8c8__avx2_madd", True, "qdu8-f32-qc2w", "qd8-f32-qc2w-fma"),
            ("1x4c8__ssse3_madd", True, "qdu8-f32-qc2w", "qd8-f32-qc2w-unfused"),
            ("1x8c4__neondot", False, "qd8-f32-qc2w", "qd8-f32-qc2w-neon-fmla")):
        e = _mapped_as(f"xnn_qd8_f32_qc2w_gemm_minmax_ukernel_{name}", src, **qd8,
                       **({"unsigned-inputs": True} if unsigned else {})).entry
        assert (e["output"], e["model"]["output"]) == (output, stage), name
    e = _mapped_as("xnn_qd8_f16_qc2w_gemm_minmax_ukernel_1x8c4__neondotfp16arith", src, **{
        **qd8, "init": "xnn_init_f16_minmax_scalar_params"}).entry
    assert (e["output"], e["model"]["output"], e["c_type"]) == ("qd8-f16-qc2w", "qd8-f16-qc2w-neon-fmla", "f16")


def test_the_isa_table_names_features_and_instructions_lowp_knows():
    from lowp.conformance.search.validate import known_mnemonics
    from lowp.kernels.features import known_features
    import fnmatch
    for isa in ISAS.values():
        if isa.target is None:
            assert isa.skip, isa.name
            continue
        assert set(isa.features) <= known_features(isa.target), isa.name
        known = known_mnemonics(isa.target)
        assert all(fnmatch.filter(known, r) for r in isa.requires), (isa.name, isa.requires)


def test_a_path_that_is_not_a_checkout(tmp_path):
    with pytest.raises(NotACheckout, match="no test/\\*gemm\\*.yaml, no src/ folder, no include/xnnpack.h"):
        Checkout(tmp_path)
    result = lowp("xnnpack", tmp_path, "--out", tmp_path / "out")
    assert result.returncode == 2 and "is not an XNNPACK checkout" in result.stderr
    result = lowp("xnnpack", TREE, "--datatype", "qs9", "--out", tmp_path / "out")
    assert result.returncode == 2 and "--datatype qs9: no int8 GEMM YAML" in result.stderr and "qs8-qc8w" in \
        result.stderr
    result = lowp("xnnpack", TREE, "--isa", "avx3", "--out", tmp_path / "out")
    assert result.returncode == 2 and "--isa avx3: not an XNNPACK ISA lowp knows" in result.stderr


# ---- the campaign over the tree --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    out = tmp_path_factory.mktemp("xnnpack")
    # --fresh: every verdict judged here, none taken from an earlier session's store (the tests are about judging)
    result = lowp("xnnpack", TREE, "--out", out / "run", "--no-database", "--jobs", "2", "--fresh", "--write-toml",
                  out / "kept.toml")
    report = out / "run" / "report.json"
    rows = {r["id"]: r for r in json.loads(report.read_text())["rows"]} if report.is_file() else {}
    return out, result, rows


def test_the_campaign_counts_and_reasons(campaign):
    out, result, _ = campaign
    assert result.returncode == 1, result.stderr[-2000:]
    doc = json.loads((out / "run" / "campaign.json").read_text())
    # the wasmsdot entry is three rows, one per behaviour of the relaxed dot, each without a source in this tree
    # (tests/test_wasm.py judges wasm kernels on tests/xnnpack_wasm_tree)
    assert doc["totals"] == {"found": 29, "judged": 16, "passed": 10, "failed": 6, "unclaimed": 0,
                             "unclaimed_wrong": 0, "skipped": 13, "not_run": 0}
    status = {k["name"]: (k["status"], k["category"]) for k in doc["kernels"]}
    prefix = "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_"
    assert status[prefix + "2x8c8__avx2"] == ("passed", None)
    assert status[prefix + "1x4__scalar_lrintf"] == ("passed", None)
    assert status[prefix + "2x4__scalar_fmagic"] == ("failed", None)
    assert status[prefix + "1x8c8__avx2"] == ("skipped", "does not build")
    assert status[prefix + "4x4__scalar_imagic"] == ("skipped", "source not found")
    assert status[prefix + "1x8__neon_mlal_lane"] == ("skipped", "output stage not modelled")
    assert status[prefix + "1x4__scalar_fmagic"] == ("skipped", "params layout not supported yet")
    assert {status[prefix + "1x4c16__wasmsdot+" + b] for b in ("sdot", "pmaddubsw", "vpdpbusd")} == {
        ("skipped", "source not found")}
    assert status[prefix + "4x4__bogus"] == ("skipped", "ISA unknown")
    assert status["qs8_gemm_4x4"] == ("skipped", "name unreadable")
    assert status["qu8-gemm-minmax-fp32.yaml"] == ("skipped", "YAML unreadable")
    assert status["xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf"] == ("passed", None)
    assert status["xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4__scalar_lrintf"] == ("skipped", "entry inconsistent")
    assert status["xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf"] == ("passed", None)
    assert status["xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x8c8__neoni8mm"] == ("skipped", "source not found")
    assert status["xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x4__scalar"] == ("passed", None)
    assert status["xnn_qd8_f32_qb4w_gemm_minmax_ukernel_2x4__scalar"] == ("failed", None)
    assert status["xnn_qu8_gemm_minmax_rndnu16_ukernel_1x4__scalar"] == ("skipped", "source not found")
    assert status["xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x4__scalar"] == ("passed", None)
    assert status["xnn_qd8_f16_qc8w_gemm_minmax_ukernel_2x4__scalar"] == ("failed", None)
    assert status["xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x4__scalar"] == ("passed", None)
    assert status["xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x4__scalar"] == ("failed", None)
    assert status["xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf"] == ("passed", None)
    assert status["xnn_qd8_f32_qc2w_gemm_minmax_ukernel_1x4__scalar"] == ("passed", None)
    assert status["xnn_qd8_f32_qc2w_gemm_minmax_ukernel_2x4__scalar"] == ("failed", None)
    assert status["xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x8c4__scalar"] == ("passed", None)
    assert status["xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x8c4__scalar"] == ("failed", None)
    reasons = {k["name"]: k["reason"] for k in doc["kernels"]}
    assert "no output-stage model for params fp32_armsimd32 on neon" in reasons[prefix + "1x8__neon_mlal_lane"]
    assert "lowp_undeclared_zero_point" in reasons[prefix + "1x8c8__avx2"]      # the compiler's error line
    groups = {(g["datatype"], g["op"], g["isa"]): g for g in doc["groups"]}
    assert groups["qu8", "gemm", "?"]["skipped"] == 1          # the unreadable YAML, counted under its file's datatype
    assert doc["source"]["commit"] is None      # the tree sits inside lowp's repository: that commit is not its own
    assert (groups["qs8-qc8w", "gemm", "scalar"]["found"], groups["qs8-qc8w", "gemm", "scalar"]["failed"]) == (4, 1)
    assert doc["seconds"]["wall"] > 0 and doc["per_kernel_seconds"]["kernels"] == 16
    assert doc["settings"]["profile"] == "quick" and doc["settings"]["search"] == "drawn"     # the quick profile's
    text = (out / "run" / "campaign.md").read_text()
    assert "29 kernels found: 16 judged (10 passed, 6 failed), 13 skipped" in text


def test_the_seeded_bug_is_found_with_its_minimal_counterexample(campaign):
    out, _, _ = campaign
    doc = json.loads((out / "run" / "campaign.json").read_text())
    assert {f["check"] for f in doc["failures"]} == {
        "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic:model:full",
        "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic:xnnpack-fp32:claimed",
        "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_2x4__scalar:model:full",
        "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_2x4__scalar:qd8-f16:claimed",
        "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x4__scalar:model:full",
        "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x4__scalar:qd8-f32:claimed",
        "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_2x4__scalar:model:full",
        "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_2x4__scalar:qd8-f32-qb4w:claimed",
        "xnn_qd8_f32_qc2w_gemm_minmax_ukernel_2x4__scalar:model:full",
        "xnn_qd8_f32_qc2w_gemm_minmax_ukernel_2x4__scalar:qd8-f32-qc2w:claimed",
        "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x8c4__scalar:model:full",
        "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x8c4__scalar:qd8-f32-qc4w:claimed"}
    rows = {r["id"]: r for r in json.loads((out / "run" / "report.json").read_text())["rows"]}
    cx = rows["xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic:xnnpack-fp32:claimed"]["counterexample"]
    assert cx["shape"] == [1, 1, 9] and cx["kind"] == "value"       # the 9th k is the one the kernel drops
    assert cx["A"][0][:8] == [0] * 8 and cx["B"][8][0] != 0 and cx["A"][0][8] != 0
    # the accumulation bug is named through the output stage; a 1-column counterexample reads no other column, so
    # "scale read from column n + 1" (the padding's 0, which any bug giving 0 matches) is not named
    assert rows["xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic:xnnpack-fp32:claimed"]["cause"] == \
        "wrong value: the result matches xnnpack-fp32 on an accumulator with the last 1 k value dropped"
    text = (out / "run" / "campaign.md").read_text()
    assert "## xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic:xnnpack-fp32:claimed: minimal counterexample" \
        in text
    repro = next(line for line in text.splitlines() if line.startswith("repro:") and ":xnnpack-fp32:claimed:" in line)
    result = lowp(*__import__("shlex").split(repro.split("`")[1])[1:])      # the line as printed, run
    assert result.returncode == 1 and ": FAIL" in result.stdout


def test_an_f16_store_that_truncates_is_named(campaign):
    """The qd8-f16 kernels of the tree: the one storing IEEE halves rounded to nearest even passes its model and
    the qd8-f16 contract; the one truncating fails both, shrunk to one element, named as the truncating store."""
    out, _, rows = campaign
    good, bad = (f"xnn_qd8_f16_qc8w_gemm_minmax_ukernel_{t}__scalar" for t in ("1x4", "2x4"))
    assert rows[f"{good}:model:full"]["verdict"] == rows[f"{good}:qd8-f16:claimed"]["verdict"] == "PASS"
    row = rows[f"{bad}:qd8-f16:claimed"]
    assert row["verdict"] == "FAIL" and row["counterexample"]["shape"] == [1, 1, 1]
    assert "qd8-f16-unfused-trunc" in row["cause"]


def test_unsigned_nibbles_read_as_signed_are_caught(campaign):
    """The qc4uw kernels of the tree (XNNPACK's unsigned 4-bit packing for madd kernels: w + 8, sums not 16x): the
    one subtracting 8 passes its model and the plain qd8-f32 contract; the one reading the nibbles as two's
    complement (a sign error) fails both, shrunk to 1x1x1."""
    out, _, rows = campaign
    good, bad = (f"xnn_qd8_f32_qc4w_gemm_minmax_ukernel_{t}__scalar" for t in ("1x4", "2x4"))
    assert rows[f"{good}:model:full"]["verdict"] == rows[f"{good}:qd8-f32:claimed"]["verdict"] == "PASS"
    row = rows[f"{bad}:qd8-f32:claimed"]
    assert row["verdict"] == "FAIL" and row["counterexample"]["shape"] == [1, 1, 1]


def test_a_qb4w_kernel_scaling_blocks_by_the_wrong_scales_is_caught(campaign):
    """The blockwise (qb4w) kernels of the tree, one bf16 scale per block of 32 k: the one scaling each block's sum
    by its own scales passes its model (qb4w-unfused) and the qd8-f32-qb4w contract; the one scaling every block by
    the first block's scales fails both, shrunk to one element at the smallest depth with two blocks (K = 33, run
    padded with zeros to 64: lowp.kernels.xnnpack.pad_to_blocks), and no known variant explains it."""
    out, _, rows = campaign
    good, bad = (f"xnn_qd8_f32_qb4w_gemm_minmax_ukernel_{t}__scalar" for t in ("1x4", "2x4"))
    assert rows[f"{good}:model:full"]["verdict"] == rows[f"{good}:qd8-f32-qb4w:claimed"]["verdict"] == "PASS"
    row = rows[f"{bad}:qd8-f32-qb4w:claimed"]
    assert row["verdict"] == "FAIL" and row["counterexample"]["shape"] == [1, 1, 33], row["counterexample"]
    assert row["cause"] == "wrong value (no known variant)"


def test_two_bit_crumbs_read_in_the_wrong_order_are_caught(campaign):
    """The qc2w kernels of the tree (XNNPACK's 2-bit weights, planes 4): the signed qs8 one and the qd8 one (crumbs
    w + 2, a float weight zero point per column, the rows' sums passed in, the scalar float order) pass their
    models and contracts; the qd8 one reading each byte's crumbs in the reverse order fails both, shrunk to 1x1x1
    (K = 1 padded to 4 with the row's zero point: the padding's crumb lands on A's one value)."""
    out, _, rows = campaign
    qs8 = "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf"
    assert rows[f"{qs8}:model:full"]["verdict"] == rows[f"{qs8}:xnnpack-fp32:claimed"]["verdict"] == "PASS"
    good, bad = (f"xnn_qd8_f32_qc2w_gemm_minmax_ukernel_{t}__scalar" for t in ("1x4", "2x4"))
    assert rows[f"{good}:model:full"]["verdict"] == rows[f"{good}:qd8-f32-qc2w:claimed"]["verdict"] == "PASS"
    row = rows[f"{bad}:qd8-f32-qc2w:claimed"]
    assert row["verdict"] == "FAIL" and row["counterexample"]["shape"] == [1, 1, 1]


def test_non_planar_nibbles_swapped_are_caught(campaign):
    """The non-planar qd8-f32-qc4w kernels of the tree (XNNPACK's non-planar packing for 16-byte registers: a byte
    pairs columns n and n + 4 at one k, planes 1): the one reading the low nibble as column n passes its model and
    the qd8-f32-qc4w contract; the one swapping the nibbles fails both, shrunk to 1x1x1 (column 0 read from
    column 4's zero padding), and its mapped entry says the packing."""
    out, _, rows = campaign
    good, bad = (f"xnn_qd8_f32_qc4w_gemm_minmax_ukernel_{t}__scalar" for t in ("1x8c4", "2x8c4"))
    assert rows[f"{good}:model:full"]["verdict"] == rows[f"{good}:qd8-f32-qc4w:claimed"]["verdict"] == "PASS"
    row = rows[f"{bad}:qd8-f32-qc4w:claimed"]
    assert row["verdict"] == "FAIL" and row["counterexample"]["shape"] == [1, 1, 1]
    assert "non_planar = 16" in (out / "kept.toml").read_text()


def test_the_kernels_toml_rejudges_the_same_kernels(campaign, tmp_path):
    """--write-toml FILE holds the kernels that reached the checks; `lowp conformance --kernels FILE --no-builtin`
    plans exactly theirs, and --kernel takes a glob (issue 23 part 5)."""
    out, _, _ = campaign
    kept = out / "kept.toml"
    assert "# skipped: xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c8__avx2" in kept.read_text()
    result = lowp("conformance", "--kernels", kept, "--no-builtin", "list")
    kernels = {line.split(":")[0] for line in result.stdout.splitlines()}
    assert result.returncode == 0 and kernels == {"xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x8c8__avx2",
                                                  "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                                                  "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic",
                                                  "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                                                  "xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                                                  "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x4__scalar",
                                                  "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_2x4__scalar",
                                                  "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x4__scalar",
                                                  "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x4__scalar",
                                                  "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x4__scalar",
                                                  "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_2x4__scalar",
                                                  "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                                                  "xnn_qd8_f32_qc2w_gemm_minmax_ukernel_1x4__scalar",
                                                  "xnn_qd8_f32_qc2w_gemm_minmax_ukernel_2x4__scalar",
                                                  "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x8c4__scalar",
                                                  "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x8c4__scalar"}
    result = lowp("conformance", "--kernels", kept, "--no-builtin", "--kernel", "*__scalar_*", "list")
    assert {line.split(":")[0] for line in result.stdout.splitlines()} == {
        "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
        "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic",
        "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
        "xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
        "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf"}
    result = lowp("conformance", "--kernels", kept, "--kernel", "*__neon_*", "list")
    assert result.returncode == 2 and "'*__neon_*': no registered kernel matches this pattern" in result.stderr
    result = lowp("conformance", "--no-builtin", "list")
    assert result.returncode == 2 and "--no-builtin judges only the kernels of --kernels files" in result.stderr


def test_isa_and_kernel_filters_and_resume(campaign, tmp_path):
    import shutil
    first_out, _, first = campaign
    # resumed in a copy: the campaign's own out folder keeps the full run the tests after this one read
    out = tmp_path
    shutil.copytree(first_out / "run", out / "run")
    result = lowp("xnnpack", TREE, "--isa", "scalar", "--kernel", "*lrintf", "--out", out / "run", "--resume",
                  "--no-database", "--jobs", "2")           # the first run's --jobs: part of what a verdict was made by
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads((out / "run" / "campaign.json").read_text())
    # a YAML lowp cannot read may hold kernels of any ISA: it is reported whatever the filters
    assert {k["name"]: k["status"] for k in doc["kernels"]} == {
        "qu8-gemm-minmax-fp32.yaml": "skipped", "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf": "passed",
        "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf": "passed",
        "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4__scalar_lrintf": "skipped",
        "xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf": "passed",
        "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf": "passed"}
    # --resume kept the journal's rows of the first run: its checks did not run again (the same rows, seconds too)
    again = {r["id"]: r for r in json.loads((out / "run" / "report.json").read_text())["rows"]}
    assert set(again) == {i for i in first if "1x4__scalar_lrintf" in i}     # 4 kernels' rows
    assert all(again[i]["seconds"] == first[i]["seconds"] for i in again)


def test_a_reused_verdicts_repro_line_names_this_campaigns_kernels(campaign, tmp_path):
    """A second campaign with another --out takes the first's verdict (nothing it depends on changed), and its
    repro line names the kernels.toml this campaign wrote, not the first one's, whose folder may be gone."""
    first_out, _, _ = campaign
    name = "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic"
    again = tmp_path / "again"
    result = lowp("xnnpack", TREE, "--kernel", name, "--out", again, "--no-database", "--jobs", "2")
    assert result.returncode == 1, result.stderr[-2000:]
    assert [k["reused"] for k in json.loads((again / "campaign.json").read_text())["kernels"] if k["name"] == name] \
        == [True]
    repro = next(line for line in (again / "campaign.md").read_text().splitlines()
                 if line.startswith("repro:") and ":xnnpack-fp32:claimed:" in line)
    assert str(again / "kernels.toml") in repro and str(first_out) not in repro
    replayed = lowp(*__import__("shlex").split(repro.split("`")[1])[1:])
    assert replayed.returncode == 1 and ": FAIL" in replayed.stdout, replayed.stderr


def test_qd8_output_stage_follows_how_each_source_family_rounds():
    """qd8's float output: the AArch64 assembly multiplies then adds (FMUL, FADD), the AArch64 C kernels fuse
    (FMLA), x86 fuses where the ISA has FMA, RVV does not (vfmul, vfadd); a campaign over XNNPACK @75db3c0 found the
    AArch64 assembly's and RVV's model checks 1 ulp off when they were taken as fused."""
    checkout = Checkout(TREE)
    folder = checkout._definitions(TREE / "src" / "qd8-f32-qc8w-gemm")
    stages = {}
    for name in ("xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x8c4__asm_aarch64_neondot_ld64_2",
                 "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x8c4__neondot", "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x8c8__avx2",
                 "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x4c8__sse2_ld64", "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_1x4v__rvv"):
        folder[name] = TREE / "src/qd8-f32-qc8w-gemm/gen/x.c"
        entry = YamlEntry(YAML, 0, {"name": name, "init": "xnn_init_f32_minmax_scalar_params",
                                    "pack": "xnn_pack_qs8_gemm_goi_w", "k-block": 8}, "qd8-f32-qc8w", "gemm")
        stages[name.split("__")[1]] = translate(entry, checkout).entry["model"]["output"]
    assert stages == {"asm_aarch64_neondot_ld64_2": "qd8-f32-unfused", "neondot": "qd8-f32-fma",
                      "avx2": "qd8-f32-fma", "sse2_ld64": "qd8-f32-unfused", "rvv": "qd8-f32-unfused"}


def test_the_campaign_benchmark_times_one_datatype():
    """`lowp bench xnnpack` (issue 23's performance target): the wall time against 60 minutes, the per-kernel
    median and p90 and mean CPU seconds, and the cases checked a second, read from the campaign it runs."""
    result = lowp("bench", "xnnpack", "--checkout", TREE, "--datatype", "qs8-qc4w", "--jobs", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 kernels found, 1 judged (1 passed, 0 failed), 1 skipped" in result.stdout
    assert "within 60 min" in result.stdout and "per judged kernel: p90" in result.stdout
    assert re.search(r"per judged kernel: CPU, mean \| +[0-9.]+", result.stdout), result.stdout
    cases = re.search(r"([0-9,]+) cases checked in [0-9.]+ s of checks .*: ([0-9,]+) cases/s", result.stdout)
    assert cases and int(cases[1].replace(",", "")) > 100 and int(cases[2].replace(",", "")) > 0, result.stdout
    assert lowp("bench", "xnnpack").returncode == 2


def test_the_zoo_estimate_counts_each_groups_sample_once_per_kernel_it_holds():
    from lowp.conformance.bench.zoo import Stratum, estimate
    groups = [Stratum(("a", "gemm", "avx2"), ("k1", "k2", "k3")), Stratum(("b", "gemm", "neon"), ("k4",)),
              Stratum(("c", "gemm", "hvx"), ("k5", "k6")), Stratum(("d", "gemm", "sse2"), ("k7",))]
    kernels = [{"name": "k2", "status": "passed", "seconds": 2.0, "build_seconds": 0.5},
               {"name": "k4", "status": "failed", "seconds": 10.0, "build_seconds": 0.0},
               {"name": "k6", "status": "skipped", "seconds": 0.0}]
    rows = [{"kernel": "k2", "verdict": "PASS", "backend": "native"},
            {"kernel": "k4", "verdict": "SKIPPED", "backend": "qemu"}, {"kernel": "k4", "verdict": "FAIL",
                                                                         "backend": "unicorn"}]
    e = estimate(groups, kernels, rows, jobs=2)
    assert [g.pick for g in groups] == ["k2", "k4", "k6", "k7"]         # the middle kernel by name
    assert e["kernels"] == 7 and e["judged_groups"] == 2 and e["judged_kernels"] == 4
    assert (e["skipped_groups"], e["skipped_kernels"], e["missing"]) == (1, 2, ["k7"])
    assert e["checks_seconds"] == 3 * 2.0 + 10.0 and e["build_seconds"] == 1.5
    assert e["checks_minutes"] == 16.0 / 2 / 60
    assert e["per_kernel"] == {"median": 2.5, "p90": 10.0, "max": 10.0}
    assert e["backends"] == {"native": {"kernels": 3, "checks": 6.0, "mean": 2.0},
                             "unicorn": {"kernels": 1, "checks": 10.0, "mean": 10.0}}


def test_the_zoo_benchmark_judges_one_kernel_of_each_group_and_scales_it():
    """`lowp bench xnnpack --zoo` (issue 36): one kernel of each (datatype, op, ISA) group of the checkout judged,
    the whole campaign's minutes and per-kernel median estimated against the targets."""
    from lowp.conformance.bench.zoo import strata
    from lowp.conformance.libraries.xnnpack import Xnnpack
    groups, _ = strata(Xnnpack(), Checkout(TREE), {"isa": ["avx2"]})
    assert [g.key for g in groups] == [("qs8-qc8w", "gemm", "avx2")] and len(groups[0].kernels) == 2
    result = lowp("bench", "xnnpack", "--checkout", TREE, "--zoo", "--isa", "avx2", "--jobs", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 kernels map" in result.stdout and "in 1 (datatype, op, ISA) groups" in result.stdout, result.stdout
    assert "one kernel of each judged here (1 groups, 2 kernels; 0 groups" in result.stdout, result.stdout
    sample = float(re.search(r"the sample's wall time +\| +([0-9.]+)", result.stdout)[1])
    checks = float(re.search(r"the zoo's checks, estimated \(CPU s\) +\| +([0-9.]+)", result.stdout)[1])
    assert checks > 0 and re.search(r"on 1 jobs, minutes +\| +[0-9.]+ +\| (within|OVER) 30 min", result.stdout)
    assert sample > 0 and re.search(r"\| native +\| +2 \|", result.stdout), result.stdout
    assert lowp("bench", "xnnpack", "--zoo").returncode == 2
    refused = lowp("bench", "xnnpack", "--checkout", TREE, "--zoo", "--datatype", "qs9")
    assert refused.returncode == 2 and "--datatype qs9: no int8 GEMM YAML" in refused.stderr, refused.stderr


def test_an_igemm_mlal_kernels_pairs_restart_at_every_tap():
    """A campaign over XNNPACK @75db3c0 found the neonv8 MLAL IGEMMs' model check off where an int16 pair (k,
    k + 8) straddles two taps (K = 63: 3 taps of 21): the kernel pairs within a tap, so its model does too."""
    import numpy as np

    from lowp.kernels.models.arm import smlal_sadalp_gemm, smlal_sadalp_igemm
    A = np.zeros((1, 63), np.int8)
    B = np.zeros((63, 1), np.int8)
    A[0, [51, 59]] = B[[51, 59], 0] = -128           # one GEMM pair of two 16384 products: wraps in int16
    assert smlal_sadalp_gemm(A, B)[0, 0] == -32768 and smlal_sadalp_igemm(A, B)[0, 0] == 32768
    e = _mapped_as("xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x8c8__neonv8_mlal",
                   "src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-1x4-minmax-fp32-scalar-lrintf.c",
                   init="xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params", pack="xnn_pack_qs8_conv_goki_w").entry
    assert e["model"]["accumulate"] == "lowp.kernels.models.arm:smlal_sadalp_igemm" and e["domain"]["b"] == [-127, 127]


@pytest.mark.parametrize("name,model", [
    ("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c2__neon_mlal_ld4r", "smlal_sadalp_kc2"),
    ("xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x8c2s4__neonv8_mlal", "smlal_sadalp"),
    ("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x8c4__neonv8_mlal_dup", "smlal_sadalp_kc4"),
    ("xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x8c4s2__neon_mlal", "smlal_sadalp"),
    ("xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c8__neonv8_mlal", "smlal_sadalp")])
def test_c2_and_c4_mlal_kernels_pair_k_with_k_plus_8_in_whole_blocks(name, model):
    """Issue 34 item 5: XNNPACK's c2, c2s4, c4 and c4s2 NEON MLAL templates (dup, LD1R/LD2R/LD4R, the shuffles) all
    SMLAL the k 8 on from each SMULL's, in the whole 16-k blocks of kc rounded up to their k-block (MLAL_PAIRS:
    2 for c2 dup, 4 for c4 dup, 8 for the shuffles and c8, whose pairs are c16's): per tap for an IGEMM, and the
    weights XNNPACK's tester draws, [-127, 127] (-128 twice would wrap an int16 lane)."""
    igemm = "_igemm_" in name
    e = _mapped_as(name, "src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-1x4-minmax-fp32-scalar-lrintf.c",
                   init="xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params",
                   pack="xnn_pack_qs8_conv_goki_w" if igemm else "xnn_pack_qs8_gemm_goi_w").entry
    op = "igemm" if igemm else "gemm"
    assert (e["model"]["accumulate"], e["domain"]["b"]) == (f"lowp.kernels.models.arm:{model}_{op}", [-127, 127])


def test_a_neon_kernel_whose_source_calls_vmlal_s8_pairs_products_whatever_its_name():
    """XNNPACK's qd8-f16-qc8w c2s4 neonfp16arith GEMMs are MLA=1 kernels named without the mlal token: the source's
    vmlal_s8 says they pair products in int16 lanes (their campaign model checks failed as int16-pair-wrap while
    they were read as exact); a MULL-only source of the same name is exact."""
    name = "xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x8c2s4__neonfp16arith"
    fields = dict(init="xnn_init_f16_minmax_scalar_params", pack="xnn_pack_qs8_gemm_goi_w")
    paired = _mapped_as(name, "../xnnpack/qs8_qc8w_gemm_2x8c2_fp32_neonv8_mlal.c", **fields).entry
    assert (paired["model"]["accumulate"], paired["domain"]["b"]) == ("lowp.kernels.models.arm:smlal_sadalp_gemm",
                                                                     [-127, 127])
    plain = _mapped_as(name, "../xnnpack/qs8_qc8w_gemm_2x8c4_fp32_neonv8.c", **fields).entry
    assert (plain["model"]["accumulate"], plain["domain"]["b"]) == ("lowp.kernels.models:exact_gemm", [-128, 127])


def test_a_kernel_claiming_nothing_is_judged_apart_and_said_wrong_where_a_check_failed():
    """A wasm relaxed-dot kernel under a behaviour XNNPACK never dispatches it on claims nothing: its checks are
    probes (plan), it is neither passed nor failed but 'unclaimed', and wrong where one of them failed."""
    from lowp.conformance.report.campaign import Item, document, markdown, summarize
    from lowp.conformance.run.checks import plan
    from lowp.kernels.registry import kernel as get_kernel
    from dataclasses import replace
    k = get_kernel("u8s8s32_avx2")
    assert [c.claimed for c in plan([k])][:2] == [True, True]
    assert {c.claimed for c in plan([replace(k, claims=False)])} == {False}
    assert [c.check for c in plan([replace(k, claims=False)])] == [c.check for c in plan([k])]

    def row(kernel, verdict, claimed=False):
        return {"id": f"{kernel}:model:full", "kernel": kernel, "check": "model", "claimed": claimed,
                "verdict": verdict}
    items = summarize([Item(n, {"isa": "wasmsdot"}) for n in ("off", "off_right", "on")],
                      [row("off", "FAIL"), row("off_right", "PASS"), row("on", "PASS", claimed=True)])
    assert [(i.status, i.wrong) for i in items] == [("unclaimed", True), ("unclaimed", False), ("passed", False)]
    doc = document(items, [], library="x", source={}, settings={}, seconds={"wall": 1, "mapping": 0, "build": 0,
                                                                            "checks": 1})
    assert (doc["totals"]["judged"], doc["totals"]["unclaimed"], doc["totals"]["unclaimed_wrong"]) == (3, 2, 1)
    assert "2 claiming nothing, 1 of them wrong somewhere" in markdown(doc, [])


def test_failures_are_grouped_into_findings_by_cause():
    """One finding per cause, numbers aside (issue 34: one wrapping zero-point add showed as 204 failures): the
    kernels it covers, and the smallest counterexample as its example."""
    from lowp.conformance.report.campaign import Item, findings

    def row(kernel, check, cause, shape, nonzero=1, claimed=True, verdict="FAIL"):
        return {"id": f"{kernel}:{check}:claimed", "kernel": kernel, "check": check, "claimed": claimed,
                "verdict": verdict, "cause": cause, "counterexample": {"shape": shape, "nonzero": nonzero}}
    wrap = "wrong value: the result matches xnnpack-fp32 with the zero point added wrapping at {}: lane {}"
    rows = [row("k1", "xnnpack-fp32", wrap.format(127, 3), [2, 8, 16]),
            row("k2", "xnnpack-fp32", wrap.format(-128, 0), [1, 4, 8]),
            row("k2", "model", wrap.format(5, 1), [1, 4, 8], nonzero=9),
            row("k3", "xnnpack-fp32", "out of bounds: read 16 bytes past A", [1, 1, 1]),
            row("k4", "xnnpack-fp32", wrap.format(1, 1), [1, 1, 1], claimed=False),
            row("k5", "xnnpack-fp32", wrap.format(1, 1), [1, 1, 1], verdict="PASS")]
    items = [Item(k, {"isa": "avx2" if k != "k3" else "neondot"}) for k in ("k1", "k2", "k3", "k4", "k5")]
    found = findings(items, rows)
    assert [(f["id"], f["kernels"], f["checks"], f["isas"]) for f in found] == [
        ("F1", ["k1", "k2"], 3, ["avx2"]), ("F2", ["k3"], 1, ["neondot"])]
    assert found[0]["cause"] == "wrong value: the result matches xnnpack-fp32 with the zero point added wrapping at #"
    assert found[0]["example"] == "k2:xnnpack-fp32:claimed"        # 1x4x8 with one nonzero: the smallest


def test_each_finding_has_a_standalone_reproducer_that_fails_until_the_kernel_is_fixed(campaign, tmp_path):
    """The finding's C file calls the checkout's own ukernel on the shrunk counterexample with nothing of lowp:
    built by the line it prints, it exits 1 naming the element while the seeded bug is there, and 0 on the kernel
    with the bug taken out."""
    import subprocess
    out, _, _ = campaign
    doc = json.loads((out / "run" / "campaign.json").read_text())
    assert all(f["reproduced"].startswith("ran here: exit 1: ") for f in doc["findings"]), doc["findings"]
    finding, = [f for f in doc["findings"] if any("2x4__scalar_fmagic" in k for k in f["kernels"])]
    assert Path(finding["reproducer"]).is_file()
    text = Path(finding["reproducer"]).read_text()
    assert "#include \"" not in text and "lowp" not in text.split("*/", 1)[1]    # nothing of lowp or the library
    build = next(line.lstrip(" *") for line in text.splitlines() if line.lstrip(" *").startswith("cc "))
    source = TREE / "src" / "qs8-qc8w-gemm" / "gen" / "qs8-qc8w-gemm-2x4-minmax-fp32-scalar-fmagic.c"
    buggy = subprocess.run(build.replace("repro.c", finding["reproducer"]).replace("./repro", str(tmp_path / "r1"))
                           .replace("-o repro", f"-o {tmp_path / 'r1'}"), shell=True, capture_output=True, text=True)
    assert buggy.returncode == 1 and "C[0][0] = " in buggy.stdout, buggy.stderr
    fixed = tmp_path / "fixed.c"
    fixed.write_text(source.read_text().replace("kc > 8 ? kc - 1 : kc;", "kc;"))
    assert fixed.read_text() != source.read_text()
    healed = subprocess.run(build.replace("repro.c", finding["reproducer"]).replace(str(source), str(fixed))
                            .replace("./repro", str(tmp_path / "r2")).replace("-o repro", f"-o {tmp_path / 'r2'}"),
                            shell=True, capture_output=True, text=True)
    assert healed.returncode == 0 and "0 of 1 elements" in healed.stdout, healed.stderr


def test_the_xngen_qd8_assembly_takes_its_scales_first_order():
    """The 4x16c4 qd8 AArch64 dot-product assembly from xngen templates (ld64, ld128, cortex_a55) is modelled with
    the scales-first order; gemm_compiler's (ld64_2, ld128_2) and the C kernels keep theirs."""
    from lowp.conformance.libraries.xnnpack import _base_stage
    stage = lambda name, layout="minmax_f32": _base_stage(parse_name(name), layout, ISAS[parse_name(name).isa])
    prefix = "xnn_qd8_f32_qc8w_gemm_minmax_ukernel_4x16c4__"
    assert stage(prefix + "asm_aarch64_neondot_ld128") == "qd8-f32-scale-product-unfused"
    assert stage(prefix + "asm_aarch64_neondot_cortex_a55") == "qd8-f32-scale-product-unfused"
    assert stage("xnn_qd8_f16_qc8w_gemm_minmax_ukernel_4x16c4__asm_aarch64_neondotfp16arith_cortex_a55",
                 "minmax_f16") == "qd8-f16-scale-product-unfused"
    assert stage(prefix + "asm_aarch64_neondot_ld128_2") == "qd8-f32-unfused"
    assert stage(prefix + "neondot") == "qd8-f32-fma"


def test_qb4w_stage_and_store_follow_each_kernel_family():
    """Each qb4w family's float order and store (docs/xnnpack-abi.md, the qb4w output contract): scalar and SSE
    unfused, NEON dot and I8MM and AVX-512 VNNI an FMA per block, AArch64 MLAL-lane FMA both steps, AVX2 per
    VPMADDWD lane; bf16 stores by add-and-narrow on NEON dot and by VCVTNEPS2BF16 on AVX-512 (built with
    -mavx512bf16, as XNNPACK's avx512bf16 set is); block size 32 (XNNPACK's tester's) and depths padded."""
    checkout = Checkout(TREE)
    got = {}
    for datatype, init, name in (
            ("qd8-f32-qb4w", "f32", "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x4c8__sse41_ld128"),
            ("qd8-f32-qb4w", "f32", "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x8c8__avx2"),
            ("qd8-f32-qb4w", "f32", "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x16__neon_mlal_lane"),
            ("qd8-f32-qb4w", "f32", "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x8c8__neoni8mm"),
            ("qd8-bf16-qb4w", "bf16", "xnn_qd8_bf16_qb4w_gemm_minmax_ukernel_1x8c4__neondot"),
            ("qd8-bf16-qb4w", "bf16", "xnn_qd8_bf16_qb4w_gemm_minmax_ukernel_1x16c8__avx512vnni")):
        parsed = parse_name(name)
        checkout._definitions(TREE / "src" / f"{parsed.datatype}-{parsed.op}")[name] = TREE / "src/x.c"
        entry = YamlEntry(YAML, 0, {"name": name, "init": f"xnn_init_{init}_qb4w_minmax_scalar_params",
                                    "pack": "xnn_pack_qs8_qb4w_gemm_goi_w", "k-block": 8, "planes": 2,
                                    **({"unsigned-inputs": True} if "avx512" in name else {})}, datatype, "gemm")
        e = translate(entry, checkout).entry
        assert e["xnnpack"]["bl"] == 32 and e["xnnpack"]["depth"] == "padded"
        got[name.split("__")[1]] = (e["output"], e["model"]["output"], "-mavx512bf16" in e["cflags"])
    assert got == {"sse41_ld128": ("qd8-f32-qb4w", "qb4w-unfused", False),
                   "avx2": ("qd8-f32-qb4w", "qb4w-fma-fused-lanes4", False),
                   "neon_mlal_lane": ("qd8-f32-qb4w", "qb4w-fma-fused", False),
                   "neoni8mm": ("qd8-f32-qb4w", "qb4w-fma", False),
                   "neondot": ("qd8-bf16-qb4w", "qb4w-fma:rne-nonan", False),
                   "avx512vnni": ("qdu8-bf16-qb4w", "qb4w-fma:rne-daz", True)}
