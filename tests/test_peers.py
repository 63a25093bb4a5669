"""lowp's contract models against the real libraries (PyTorch's fbgemm and onednn engines, ONNX Runtime), and the
pieces those models are made of. The `peers` tests run generated problems through every library path in child
processes and compare every output element with lowp's numpy models (never with stored library outputs); they skip,
with the reason, where the optional packages are missing (pip install -e '.[peers]')."""
import numpy as np
import pytest

from lowp.conformance import peers
from lowp.conformance.contracts import int32 as contracts
from lowp.conformance.peers import models, problems


def test_k_blocks_follow_the_onednn_gemm_driver():
    """get_k_padd with the AVX2 s8 blocking (bk 384, bk_traditional 256, uk 1)."""
    assert contracts.onednn_igemm_k_blocks(1) == [0]
    assert contracts.onednn_igemm_k_blocks(256) == [0]
    assert contracts.onednn_igemm_k_blocks(257) == [0, 129]
    assert contracts.onednn_igemm_k_blocks(258) == [0, 129]
    assert contracts.onednn_igemm_k_blocks(269) == [0, 135]
    assert contracts.onednn_igemm_k_blocks(767) == [0, 384]
    assert contracts.onednn_igemm_k_blocks(800) == [0, 384, 768]


def test_k_blocked_pairs_reduce_to_even_pairs_and_differ_at_odd_block_starts():
    rng = np.random.default_rng(0)
    A = rng.integers(200, 256, (3, 257)).astype(np.uint8)
    B = (rng.choice([-1, 1], (257, 4)) * 127).astype(np.int8)
    assert np.array_equal(contracts.pair_saturating_k_blocks(A, B, [0]), contracts.pair_saturating(A, B))
    two = contracts.pair_saturating_k_blocks(A, B, [0, 129])
    by_hand = contracts.pair_saturating(A[:, :129], B[:129]).astype(np.int64) + \
        contracts.pair_saturating(A[:, 129:], B[129:]).astype(np.int64)
    assert np.array_equal(two, contracts._wrap32(by_hand))
    assert not np.array_equal(two, contracts.pair_saturating(A, B))      # the block at k = 129 pairs (129, 130)


def test_the_models_predict_the_seed_002_probe():
    """A = [255, 255], W = [127, 127], scales 1, y_scale 256: 253 exact, 128 pair-saturating, in every model."""
    p = {"A": np.array([[255, 255]], np.uint8), "W": np.array([[127, 127]], np.int8), "x_scale": 1.0, "x_zp": 0,
         "w_scale": np.array([1.0]), "w_zp": np.array([0]), "per_channel": False, "bias": None, "y_scale": 256.0,
         "y_zp": 0, "relu": False}
    assert models.torch_fbgemm_linear(p, isa="exact")[0, 0] == 253
    assert models.torch_fbgemm_linear(p, isa="pair_saturating")[0, 0] == 128
    assert models.torch_onednn_linear(p, isa="exact")[0, 0] == 253
    assert models.torch_onednn_linear(p, isa="pair_saturating_igemm")[0, 0] == 128


def test_generated_problems_are_deterministic_and_make_pairs_saturate():
    a = problems.linear_problems(3, 30)
    b = problems.linear_problems(3, 30)
    assert all(np.array_equal(x["A"], y["A"]) and np.array_equal(x["W"], y["W"]) for x, y in zip(a, b))
    pairs = [p for p in a if p["kind"] == "pairs" and p["A"].shape[1] > 1]
    assert any(not np.array_equal(contracts.exact(p["A"], p["W"].T), contracts.pair_saturating(p["A"], p["W"].T))
               for p in pairs)


VNNI_FLAGS = {"avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni"}


def test_expected_isa_per_path():
    by = {pp.name: peers.expected_isa(pp, VNNI_FLAGS) for pp in peers.PATHS}
    assert by["torch-fbgemm/native"] == "exact" and by["torch-fbgemm/avx2"] == "pair_saturating"
    assert by["torch-onednn/native"] == "exact" and by["torch-onednn/avx2"] == "pair_saturating_igemm"
    assert by["onnxruntime/default"] == by["onnxruntime/x64quantprecision"] == "exact"
    avx2 = {pp.name: peers.expected_isa(pp, {"avx2", "fma"}) for pp in peers.PATHS}
    assert avx2 == {"torch-fbgemm/native": "pair_saturating", "torch-fbgemm/avx2": "pair_saturating",
                    "torch-onednn/native": "pair_saturating_igemm", "torch-onednn/avx2": "pair_saturating_igemm",
                    "onnxruntime/default": "pair_saturating", "onnxruntime/x64quantprecision": "pair_saturating"}


def test_mlas_kernel_follows_the_platform_dispatch_order():
    """MLAS_PLATFORM's constructor: AVX2 (needs FMA too), then AVX-VNNI, AVX-512 core, AVX-512 VNNI, AMX."""
    kernel = peers.mlas_u8s8_kernel
    assert kernel(frozenset({"avx", "sse4_1"})) == "sse"
    assert kernel(frozenset({"avx2"})) == "sse"                             # no FMA: MLAS stays on SSE
    assert kernel(frozenset({"avx2", "fma"})) == "avx2"
    assert kernel(frozenset({"avx2", "fma", "avx_vnni"})) == "avxvnni"
    assert kernel(frozenset({"avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"})) == "avx512core"
    assert kernel(frozenset({"avx2", "fma", "avx512f", "avx512_vnni"})) == "avx2"     # no AVX-512 core: no VNNI
    assert kernel(frozenset(VNNI_FLAGS)) == "avx512vnni"
    assert kernel(frozenset(VNNI_FLAGS | {"amx_tile", "amx_int8"})) == "amx"
    assert [peers.MLAS_U8S8_KERNELS[k][0] for k in ("sse", "avx2", "avxvnni", "avx512core", "avx512vnni", "amx")] \
        == ["exact", "pair_saturating", "exact", "pair_saturating", "exact", "exact"]


def test_x64quantprecision_is_in_force_only_where_mlas_dispatches_differ():
    ort_default, ort_precise = peers.PATHS[4], peers.PATHS[5]
    assert peers.model_options(ort_precise, {"avx2", "fma"}) == {"precision_mode": True}
    assert peers.model_options(ort_precise, VNNI_FLAGS) == {"precision_mode": True}
    assert peers.model_options(ort_precise, {"sse4_1"}) == {"precision_mode": False}
    assert peers.model_options(ort_default, {"avx2", "fma"}) == {"precision_mode": False}
    assert peers.model_options(peers.PATHS[0], VNNI_FLAGS) == {}


def test_an_avx2_host_runs_ort_under_valgrind_and_torch_under_its_isa_caps():
    hosts = {pp.name: peers.avx2_host_path(pp) for pp in peers.PATHS}
    ort = hosts["onnxruntime/default"]
    assert ort.wrapper[0] == "valgrind" and ort.flags == peers.AVX2_HOST_FLAGS and ort.env == {}
    assert hosts["torch-fbgemm/native"].env == {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"} and not hosts[
        "torch-fbgemm/native"].wrapper
    assert hosts["torch-onednn/native"].env == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert {peers.expected_isa(pp) for pp in hosts.values()} == {"pair_saturating", "pair_saturating_igemm"}


# ---------------------------------------------------------------------------------------------------------------
# ONNX Runtime's models: which operand saturates, in which order the zero points enter

def _mm(A, B, a_zp=0, b_zp=0, types=("u8", "s8"), **kw):
    dt = {"u8": np.uint8, "s8": np.int8}
    return {"A": np.array(A, dt[types[0]]), "B": np.array(B, dt[types[1]]), "a_zp": dt[types[0]](a_zp),
            "b_zp": np.asarray(b_zp).astype(dt[types[1]]), "types": types, **kw}


def test_the_ort_models_predict_the_seed_002_probe_per_type_pair():
    """A = [255, 255] x B = [127, 127]: only MLAS's u8 x s8 kernel is VPMADDUBSW; u8 x u8 widens B (exact)."""
    probe = _mm([[255, 255]], [[127], [127]])
    assert models.onnx_matmul_integer(probe, isa="exact")[0, 0] == 64770
    assert models.onnx_matmul_integer(probe, isa="pair_saturating")[0, 0] == 32767
    assert models.onnx_matmul_integer(_mm([[255, 255]], [[127], [127]], types=("u8", "u8")),
                                      isa="pair_saturating")[0, 0] == 64770
    assert models.onnx_matmul_integer(_mm([[127, 127]], [[127], [127]], types=("s8", "s8")),
                                      isa="pair_saturating")[0, 0] == 32258


def test_mlas_folds_the_zero_points_in_after_the_pairs_saturate():
    """a_zp = 255 makes every shifted activation 0: the exact result and the pairs of the shifted operands are 0, but
    MLAS saturates the raw pair (32767) and then subtracts a_zp * colsum(B) = 255 * 254 = 64770."""
    p = _mm([[255, 255]], [[127], [127]], a_zp=255)
    assert models.onnx_matmul_integer(p, isa="exact")[0, 0] == 0
    assert models.onnx_matmul_integer(p, isa="pair_saturating", zero_points="subtracted")[0, 0] == 0
    assert models.onnx_matmul_integer(p, isa="pair_saturating")[0, 0] == 32767 - 64770
    # a per-column b_zp folds in per column: column 1 has b_zp 127, so its shifted weights are 0 as well
    q = _mm([[255, 255]], [[127, 127], [127, 127]], b_zp=[0, 127])
    assert list(models.onnx_matmul_integer(q, isa="pair_saturating")[0]) == [32767, 32767 - 127 * 510]


def _conv(X, W, types, x_zp=0, w_zp=0):
    dt = {"u8": np.uint8, "s8": np.int8}
    return {"X": np.array(X, dt[types[0]]), "W": np.array(W, dt[types[1]]), "types": types,
            "x_zp": dt[types[0]](x_zp), "w_zp": dt[types[1]](w_zp), "group": 1, "strides": (1, 1),
            "dilations": (1, 1), "pads": (0, 0, 0, 0)}


def test_conv_integer_saturates_a_u8_weight_with_an_s8_input():
    """ORT's ConvInteger hands MLAS the weight as the first (u8 side) operand: two input channels, 1x1 kernel."""
    u8_weight = _conv([[[[127]], [[127]]]], [[[[255]], [[255]]]], ("s8", "u8"))
    s8_weight = _conv([[[[255]], [[255]]]], [[[[127]], [[127]]]], ("u8", "s8"))
    assert models.onnx_conv_integer(u8_weight, isa="pair_saturating")[0, 0, 0, 0] == 32767
    assert models.onnx_conv_integer(s8_weight, isa="pair_saturating")[0, 0, 0, 0] == 64770
    assert models.onnx_conv_integer(u8_weight, isa="exact")[0, 0, 0, 0] == 64770


def test_conv_integer_model_is_the_direct_convolution_when_exact():
    """im2col + GEMM against a direct loop, with groups, strides, dilations and padding (padded x = x_zp)."""
    for p in problems.conv_integer_problems(7, 12, peers.ORT_CONV_COMBOS):
        X = p["X"].astype(np.int64) - int(p["x_zp"])
        W = p["W"].astype(np.int64) - int(p["w_zp"])
        (pt, pl, pb, pr), (sh, sw), (dh, dw), g = p["pads"], p["strides"], p["dilations"], p["group"]
        Xp = np.pad(X, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
        N, C, H, Wd = Xp.shape
        O, Cg, KH, KW = W.shape
        OH, OW = (H - dh * (KH - 1) - 1) // sh + 1, (Wd - dw * (KW - 1) - 1) // sw + 1
        want = np.zeros((N, O, OH, OW), np.int64)
        for o in range(O):
            c0 = (o // (O // g)) * Cg
            for i in range(OH):
                for j in range(OW):
                    win = Xp[:, c0:c0 + Cg, i * sh: i * sh + dh * (KH - 1) + 1: dh, j * sw: j * sw + dw * (KW - 1) + 1: dw]
                    want[:, o, i, j] = (win * W[o]).sum(axis=(1, 2, 3))
        assert np.array_equal(models.onnx_conv_integer(p, isa="exact"), want), p["id"]


def test_x64quantprecision_rewrites_matmul_weights_but_not_qlinear_opset_21_nor_conv():
    """Avx2WeightS8ToU8Transformer: constant s8 weights with a value outside [-64, 64] become u8 (exact u8 x u8
    kernel) for MatMulInteger and QLinearMatMul's opset-10 definition; QLinearMatMul at opset 21 and ConvInteger
    keep theirs."""
    big, small = _mm([[255, 255]], [[127], [127]]), _mm([[255, 255]], [[64], [64]])
    assert models.s8_weights_rewritten("MatMulInteger", big) and not models.s8_weights_rewritten("MatMulInteger", small)
    assert models.s8_weights_rewritten("QLinearMatMul", dict(big, opset=20))
    assert not models.s8_weights_rewritten("QLinearMatMul", dict(big, opset=21))
    assert not models.s8_weights_rewritten("ConvInteger", big)
    assert models.onnx_matmul_integer(big, isa="pair_saturating", precision_mode=True)[0, 0] == 64770
    rewritten = models.rewrite_s8_weights(_mm([[255, 255]], [[127], [-128]], b_zp=-3))
    assert rewritten["types"] == ("u8", "u8") and list(rewritten["B"].ravel()) == [255, 0] and rewritten["b_zp"] == 125
    q = dict(big, a_scale=np.float32(1), b_scale=np.float32(1), y_scale=np.float32(256), y_zp=np.uint8(0),
             y_dtype=np.uint8)
    assert models.onnx_qlinear_matmul(dict(q, opset=20), isa="pair_saturating", precision_mode=True)[0, 0] == 253
    assert models.onnx_qlinear_matmul(dict(q, opset=21), isa="pair_saturating", precision_mode=True)[0, 0] == 128


# ---------------------------------------------------------------------------------------------------------------
# The real libraries

COUNT = 800


@pytest.fixture(scope="module")
def peer_rows():
    return peers.run(count=COUNT, seed=1)


@pytest.mark.peers
@pytest.mark.parametrize("pp", peers.PATHS, ids=lambda pp: pp.name)
def test_library_agrees_with_lowp_model_bit_for_bit(pp, peer_rows):
    why = peers.missing(pp)
    if why:
        pytest.skip(why)
    rows = [r for r in peer_rows if r["library"] == pp.library and r["path"] == pp.path]
    assert rows and all(r["verdict"] != "CRASH" for r in rows), rows[0].get("reason")
    unmodelled = []
    for r in rows:
        assert r["cases"] >= COUNT // 2, r
        if r["agree"] != r["cases"] and _amx_path(pp, r):
            unmodelled.append(f"{r['operator']}: {r['agree']} of {r['cases']} agree with {r['model']}")
            continue
        assert r["agree"] == r["cases"] and not r["errors"], (
            f"{pp.name} {r['operator']}: {r['agree']} of {r['cases']} cases agree with {r['model']}; "
            f"first disagreements: {r['disagreements']}")
    if unmodelled:
        pytest.xfail(f"{pp.name}: on this CPU (AMX-INT8) oneDNN's dynamic matmul takes a path whose float epilogue "
                     f"lowp has not calibrated (1-ulp differences): {'; '.join(unmodelled)}")


def _amx_path(pp, row) -> bool:
    """oneDNN's native path on a CPU with AMX-INT8: its dynamic linear (f32 out) rounds differently from the
    VNNI brgemm lowp models, by one ulp on some elements (found 2026-11 on a Sapphire Rapids class machine)."""
    from lowp.kernels.features import host_features
    return (pp.library, pp.path, row["operator"]) == ("torch-onednn", "native", "linear_dynamic") and \
        "amx_int8" in host_features("x86-64")


@pytest.mark.peers
def test_the_paths_really_differ(peer_rows):
    """The native and forced-AVX2 paths are distinguishable: the other accumulation contract fails some cases, so
    agreement above is not vacuous; the probe confirms which arithmetic each child ran, as lowp predicted it from
    this CPU's flags."""
    rows = [r for r in peer_rows if r.get("variants")]
    if not rows:
        pytest.skip("torch and onnxruntime not installed (pip install -e '.[peers]')")
    for r in rows:
        want = "exact" if r["isa"] == "exact" else "saturating"
        assert r["info"]["probe"].startswith(want), (r["library"], r["path"], r["info"]["probe"])
        if _rewrite_makes_every_accumulation_exact(r):
            continue
        other = list(r["variants"].items())[-1]
        assert other[1] < r["cases"], (r["library"], r["operator"], r["path"], other)


def _rewrite_makes_every_accumulation_exact(row) -> bool:
    """MatMulInteger under session.x64quantprecision: the rewrite leaves the u8 x s8 kernel only weights within
    [-64, 64], whose pairs cannot saturate, so the two accumulations agree everywhere: that is the option's point."""
    return row["operator"] == "MatMulInteger" and row.get("options", {}).get("precision_mode")


# ---------------------------------------------------------------------------------------------------------------
# An AVX2-only CPU, emulated: ONNX Runtime under valgrind, whose CPUID offers no AVX-512 and no VNNI, so MLAS takes
# its VPMADDUBSW kernels (a few seconds per ONNX Runtime start; the batch is kept small)

VALGRIND_COUNT = 36
ORT_PATHS = [pp for pp in peers.PATHS if pp.library == "onnxruntime"]


@pytest.fixture(scope="module")
def avx2_rows():
    return peers.run(count=VALGRIND_COUNT, seed=2, libraries=["onnxruntime"], emulate_avx2=True)


@pytest.mark.peers
@pytest.mark.parametrize("pp", ORT_PATHS, ids=lambda pp: pp.name)
def test_ort_on_an_avx2_cpu_agrees_with_the_predicted_path(pp, avx2_rows):
    why = peers.missing(peers.avx2_host_path(pp))
    if why:
        pytest.skip(why)
    rows = [r for r in avx2_rows if r["path"] == pp.path]
    assert rows and all(r["verdict"] != "CRASH" for r in rows), rows[0].get("reason")
    for r in rows:
        assert r["isa"] == "pair_saturating" and r["info"]["probe"] == "saturating (32767)", r["cpu_path"]
        assert r["agree"] == r["cases"] and not r["errors"], (
            f"{pp.name} {r['operator']} on an AVX2 CPU: {r['agree']} of {r['cases']} cases agree with {r['model']}; "
            f"first disagreements: {r['disagreements']}")
        # what the same operator computes on a VNNI CPU (the exact accumulation) is refuted here, but where the
        # x64quantprecision rewrite makes every accumulation exact
        if not _rewrite_makes_every_accumulation_exact(r):
            exact = next(c for n, c in r["variants"].items() if n.startswith("exact"))
            assert exact < r["cases"], (r["operator"], r["variants"])
        # and the zero points are folded in after the pairs saturate, not subtracted before
        if r["operator"] != "MatMulInteger" or not r["options"]["precision_mode"]:
            subtracted = next(c for n, c in r["variants"].items() if "zp_subtracted" in n)
            assert subtracted < r["cases"], (r["operator"], r["variants"])


@pytest.mark.peers
@pytest.mark.slow
@pytest.mark.nightly        # checks the ISA caps, the stand-in that CI's peers tests use for an AVX2 CPU
def test_torch_isa_caps_select_what_an_avx2_cpu_runs():
    """PyTorch's engines under valgrind (CPUID: AVX2) agree with the contracts lowp predicts for an AVX2-only CPU,
    the ones the ISA-capped avx2 paths are judged against: the caps are a faithful, fast stand-in (torch takes about
    16 s to import under valgrind, hence the small batch)."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace
    paths = [replace(pp, wrapper=peers.VALGRIND, flags=peers.AVX2_HOST_FLAGS, emulation="AVX2 host: valgrind")
             for pp in peers.PATHS if pp.library.startswith("torch-") and pp.path == "native"]
    why = peers.missing(paths[0])
    if why:
        pytest.skip(why)
    with ThreadPoolExecutor(len(paths)) as pool:
        rows = [r for rs in pool.map(lambda pp: peers.run_path(pp, 24, 3), paths) for r in rs]
    for r in rows:
        assert r["isa"] in ("pair_saturating", "pair_saturating_igemm") and r["info"]["cpu_capability"] == "AVX2"
        assert r["info"]["probe"] == "saturating (32767)" and not r["info"].get("env"), r["cpu_path"]
        assert r["verdict"] == "PASS", (r["library"], r["operator"], r["agree"], r["cases"], r["disagreements"])
