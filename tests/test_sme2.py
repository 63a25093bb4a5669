"""SME2 on qemu 11 (lowp.emulator.aarch64.qemu_sme2): where lowp finds the qemu that runs SME2 and how it fetches it
(the private apt configuration, idempotence, the reasons it gives), that SME2 kernels go to that qemu while the rest
stay on the default one, and lowp's own SME2 kernel (sme2_sdot_s8_svl512: SDOT into ZA vector groups) judged on it,
with a one-bug version (its packing pads k to 4, not to the vector) that the checks catch.

Without a qemu that runs SME2 (Debian's 7.2 and 10.0.2 raise SIGILL) the kernel tests skip, naming the qemu and the
fetch command; CI fetches qemu 11 first (.ci/run)."""
from __future__ import annotations

import dataclasses
import os
import stat

import numpy as np
import pytest

from lowp.conformance import check_for, run_check
from lowp.emulator.aarch64 import qemu_sme2
from lowp.emulator.targets.aarch64 import QEMU
from lowp.kernels import executor
from lowp.kernels.registry import kernel

pytestmark = pytest.mark.emulated
NAME = "sme2_sdot_s8_svl512"


def fake_qemu(folder, version="11.1.3"):
    """An executable that answers --version as qemu-aarch64 does."""
    path = folder / "qemu-aarch64"
    path.write_text(f"#!/bin/sh\necho 'qemu-aarch64 version {version} (fake)'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ---- finding and fetching the qemu ----------------------------------------------------------------------------
def test_the_environment_variable_then_the_cache_then_none(monkeypatch, tmp_path):
    monkeypatch.delenv(qemu_sme2.ENV, raising=False)
    monkeypatch.setattr(qemu_sme2, "cache_dir", lambda: tmp_path)
    assert qemu_sme2.sme2_qemu() is None and qemu_sme2.qemu_for(("sme", "sme2")) is None
    cached = qemu_sme2.cached_qemu()
    cached.parent.mkdir(parents=True)
    fake_qemu(cached.parent)
    assert qemu_sme2.sme2_qemu() == str(cached) == str(tmp_path / "qemu-user-11.1.3/usr/bin/qemu-aarch64")
    assert qemu_sme2.qemu_for(("asimd", "sme2")) == str(cached) == qemu_sme2.qemu_for(("sme2p1",))
    assert qemu_sme2.qemu_for(("asimd", "sve")) is None and qemu_sme2.qemu_for(("sme",)) is None
    monkeypatch.setenv(qemu_sme2.ENV, "/opt/qemu/bin/qemu-aarch64")
    assert qemu_sme2.sme2_qemu() == "/opt/qemu/bin/qemu-aarch64"


def test_the_target_sends_sme2_kernels_to_that_qemu_and_the_rest_to_the_default(monkeypatch):
    monkeypatch.setenv(qemu_sme2.ENV, "/opt/qemu11/qemu-aarch64")
    assert QEMU.qemu_for(("sme", "sme2")) == "/opt/qemu11/qemu-aarch64"
    assert QEMU.qemu_for(("sme",)) is None and QEMU.qemu_for(("asimd", "i8mm")) is None
    assert QEMU.qemu_for(("sme2",), "/usr/local/bin/qemu-aarch64") == "/usr/local/bin/qemu-aarch64"   # asked for


def test_fetch_is_idempotent_and_private(monkeypatch, tmp_path):
    """Where the unpacked qemu is, fetch does nothing (no apt-get runs); the apt options read only the private
    sources file and keep lists and archives in the work folder."""
    cached = qemu_sme2.cached_qemu(tmp_path)
    cached.parent.mkdir(parents=True)
    fake_qemu(cached.parent)
    monkeypatch.setattr(qemu_sme2, "_step", lambda *a: pytest.fail(f"ran {a}"))
    said = []
    assert qemu_sme2.fetch(tmp_path, log=said.append) == cached and "already there" in said[0]
    options = " ".join(qemu_sme2.apt_options(tmp_path / "work"))
    for expected in (f"Dir::Etc::SourceList={tmp_path / 'work' / 'sources.list'}", "Dir::Etc::SourceParts=/nonexistent",
                     f"Dir::State::Lists={tmp_path / 'work' / 'lists'}", f"Dir::Cache={tmp_path / 'work' / 'cache'}"):
        assert expected in options


def test_fetch_says_why_it_cannot_run(monkeypatch, tmp_path):
    monkeypatch.setattr(qemu_sme2.shutil, "which", lambda tool: None if tool == "dpkg-deb" else f"/usr/bin/{tool}")
    with pytest.raises(qemu_sme2.FetchFailed, match=f"dpkg-deb not found .*{qemu_sme2.ENV}"):
        qemu_sme2.fetch(tmp_path)
    assert not qemu_sme2.cached_qemu(tmp_path).exists()


def test_fetch_unpacks_the_package_and_keeps_qemu_aarch64(monkeypatch, tmp_path):
    """The steps in order (apt-get update, download, dpkg-deb -x) with a stand-in for apt and dpkg: what lands in
    the cache is qemu-aarch64 (checked by its --version) and the copyright file, nothing else of the package."""
    steps = []

    def run(what, command, cwd):
        steps.append(what)
        if command[-2] == "download":
            (cwd / "qemu-user_11.1.3+ds-2~bpo13+1_amd64.deb").write_bytes(b"")
        if command[0] == "dpkg-deb":
            bin_, doc = cwd / "unpacked/usr/bin", cwd / "unpacked/usr/share/doc/qemu-user"
            bin_.mkdir(parents=True), doc.mkdir(parents=True)
            fake_qemu(bin_), fake_qemu(bin_).rename(bin_ / "qemu-arm"), (doc / "copyright").write_text("GPL")
            fake_qemu(bin_)
    monkeypatch.setattr(qemu_sme2, "missing_tools", lambda: None)
    monkeypatch.setattr(qemu_sme2, "_step", run)
    target = qemu_sme2.fetch(tmp_path, log=lambda line: None)
    assert steps == ["apt-get update", "apt-get download", "dpkg-deb -x"]
    kept = sorted(str(p.relative_to(tmp_path / qemu_sme2.FOLDER)) for p in (tmp_path / qemu_sme2.FOLDER).rglob("*")
                  if p.is_file())
    assert kept == ["usr/bin/qemu-aarch64", "usr/share/doc/qemu-user/copyright"] and os.access(target, os.X_OK)
    assert [p.name for p in tmp_path.iterdir()] == [qemu_sme2.FOLDER]          # the work folder is gone


def test_fetch_refuses_a_package_whose_qemu_is_not_11(monkeypatch, tmp_path):
    def run(what, command, cwd):
        if command[-2] == "download":
            (cwd / "qemu-user_10.0.2_amd64.deb").write_bytes(b"")
        if command[0] == "dpkg-deb":
            (cwd / "unpacked/usr/bin").mkdir(parents=True)
            fake_qemu(cwd / "unpacked/usr/bin", "10.0.2")
    monkeypatch.setattr(qemu_sme2, "missing_tools", lambda: None)
    monkeypatch.setattr(qemu_sme2, "_step", run)
    with pytest.raises(qemu_sme2.FetchFailed, match=r"version \(10, 0, 2\), expected \(11, 1, 3\)"):
        qemu_sme2.fetch(tmp_path, log=lambda line: None)
    assert not qemu_sme2.cached_qemu(tmp_path).exists()


# ---- lowp's SME2 kernel on qemu 11 ----------------------------------------------------------------------------
def runnable(k):
    ex = executor(k)
    reason = ex.unavailable()
    if reason:
        assert "sme2" in reason, reason
        pytest.skip(f"{k.name}: {reason}")
    return ex


def test_sme2_kernel_runs_on_a_qemu_with_sme2_and_equals_its_model_and_the_product():
    """SDOT and MOVA execute (capstone 5 cannot name them: lowp's SME2 encodings do), once per row, b-deep k chunk
    and block of 4 columns, and the result is the model's (lowp.isa_models.sme.sdot_za) and the exact product."""
    k = kernel(NAME)
    ex = runnable(k)
    assert "11." in ex.describe() or qemu_sme2.ENV in os.environ
    rng = np.random.default_rng(2)
    for M, N, K in [(1, 1, 1), (2, 5, 64), (3, 70, 65), (2, 9, 300)]:
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        C = ex.run(A, B, mnemonics=True)
        assert np.array_equal(C, k.predict(A, B)) and np.array_equal(C, (A.astype(np.int64) @ B).astype(np.int32))
        blocks, chunks = -(-N // 4), -(-K // 64)
        assert ex.last.mnemonics["sdot"] == M * chunks * blocks and ex.last.mnemonics["mova"] == M * blocks


def test_sme2_kernel_passes_its_claimed_check_and_the_one_bug_version_fails_it():
    k = kernel(NAME)
    runnable(k)
    row = run_check(check_for(k), lambda event: None, examples=20, grid=False)
    assert row["verdict"] == "PASS" and row["executed"] == row["cases"] > 0, row.get("reason")
    bug = dataclasses.replace(k, name=f"{NAME}_pad_k4", defines=("LOWP_BUG_PAD_K4",))
    row = run_check(check_for(bug), lambda event: None, examples=20, grid=False)
    assert row["verdict"] == "FAIL" and "reads workspace it did not write" in row["cause"]
    assert row["counterexample"]["shape"][2] % 64 != 0            # K not a multiple of the 64-byte vector


def test_sme2_kernel_on_a_qemu_without_sme2_is_skipped_naming_it(monkeypatch):
    """Pointed at the default qemu (10.0.2 raises SIGILL on SME2 and says so in HWCAP2), the kernel is not run: the
    reason names that qemu and that it lacks sme2."""
    from lowp.emulator.qemu import cpu_features, qemu_path
    default = qemu_path()
    if default is None:
        pytest.skip("qemu-aarch64 not installed")
    if "sme2" in cpu_features(qemu=default):
        pytest.skip(f"the default qemu ({default}) runs SME2 itself")
    monkeypatch.setenv(qemu_sme2.ENV, default)
    reason = executor(kernel(NAME)).unavailable()
    assert reason and default in reason and reason.endswith("lacks sme2")


# ---- XNNPACK's SME kernels (KleidiAI) ---------------------------------------------------------------------------
def kleidiai_entry(name="xnn_pqs8_qc8w_gemm_minmax_ukernel_32x32c4__neonsme2"):
    from pathlib import Path

    from lowp.conformance.libraries.xnnpack import YamlEntry
    return YamlEntry(Path("test/pqs8-qc8w-gemm-minmax.yaml"), 0,
                     {"name": name, "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params",
                      "pack": "xnn_pack_kai_qs8_qc8w_weights_and_biases_sme", "k-block": 4,
                      "cpp-check": "XNN_ENABLE_KLEIDIAI"}, "pqs8-qc8w", "gemm")


def test_an_sme_kernel_without_kleidiai_is_skipped_naming_the_path_to_give(monkeypatch):
    from pathlib import Path

    from lowp.conformance.libraries.xnnpack import ISAS, KLEIDIAI_ENV, Checkout, translate
    monkeypatch.delenv(KLEIDIAI_ENV, raising=False)
    assert ISAS["neonsme2"].target == "aarch64" and "sme2" in ISAS["neonsme2"].features
    skip = translate(kleidiai_entry(), Checkout(Path(__file__).parent / "xnnpack_tree"))
    assert skip.category == "third-party build" and f"{KLEIDIAI_ENV}=PATH" in skip.message
    assert "ARM-software/kleidiai" in skip.message


def test_with_kleidiai_the_tile_is_asked_of_the_kernel_and_a_missing_wrapper_is_named(monkeypatch, tmp_path):
    from pathlib import Path

    from lowp.conformance.libraries.xnnpack import KLEIDIAI_ENV, Checkout, translate
    (tmp_path / "kai" / "ukernels").mkdir(parents=True)
    monkeypatch.setenv(KLEIDIAI_ENV, str(tmp_path))
    skip = translate(kleidiai_entry(), Checkout(Path(__file__).parent / "xnnpack_tree"))
    assert skip.category == "source not found" and "xnn_pqs8_qc8w_gemm_minmax_ukernel_32x32c4__neonsme2" in skip.message
