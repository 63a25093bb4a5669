"""Where lowp finds a qemu-aarch64 that runs SME2 and SME2.1, and how it fetches one.

Debian 12's qemu-user 7.2 and bookworm-backports' 10.0.2 raise SIGILL on SME2 (SDOT into ZA with a vector group,
ZERO {ZT0}) and SME2.1 (MOVAZ); qemu 11.1.3 runs them (FEAT_SME2p1 on `-cpu max`). Debian ships 11.1.3 in
trixie-backports as qemu-user 1:11.1.3+ds-2~bpo13+1, whose binaries are static with no Depends: unpacked, they run
on bookworm. fetch() downloads that package with a private apt configuration (its own sources file, lists and
archive folders; the system's sources and packages stay untouched) and unpacks it into lowp's cache folder, once
per cache folder; CI runs it (`python -m lowp.emulator.aarch64.qemu_sme2 fetch`, .ci/run).

Which qemu runs SME2 work (sme2_qemu): $LOWP_QEMU_SME2, else the unpacked 11.1.3 in the cache, else None, and then
the default qemu-aarch64 ($LOWP_QEMU_AARCH64 or PATH) serves it if it can; otherwise SME2 work skips naming it and
this module's fetch command. Everything else keeps running on the default qemu.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lowp.emulator.buildcache import cache_dir, ready_folder

ENV = "LOWP_QEMU_SME2"
PACKAGE, VERSION = "qemu-user", "1:11.1.3+ds-2~bpo13+1"
UPSTREAM = (11, 1, 3)             # the qemu version in that package (qemu-aarch64 --version)
SUITE = "trixie-backports"
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
FOLDER = "qemu-user-11.1.3"       # under lowp's cache folder: the package's files as dpkg -x lays them out
FETCH = "python -m lowp.emulator.aarch64.qemu_sme2 fetch"
HOW = f"run `{FETCH}` (Debian/Ubuntu: apt-get, dpkg-deb; a 70 MB download once) or set {ENV} to a qemu-aarch64 >= 11"
SME2_FEATURES = frozenset({"sme2", "sme2p1"})   # the features a kernel names that need this qemu


def cached_qemu(cache: Path | None = None) -> Path:
    """Where fetch() puts qemu-aarch64 11.1.3."""
    return (cache or cache_dir()) / FOLDER / "usr" / "bin" / "qemu-aarch64"


def sme2_qemu() -> str | None:
    """The qemu-aarch64 that runs SME2 work: $LOWP_QEMU_SME2, else the fetched one, else None (the default qemu)."""
    named = os.environ.get(ENV)
    if named:
        return named
    path = cached_qemu()
    return str(path) if os.access(path, os.X_OK) else None


def qemu_for(features) -> str | None:
    """The qemu binary a kernel needing `features` runs on: sme2_qemu() for SME2 and SME2.1 kernels, else None
    (the default qemu)."""
    return sme2_qemu() if SME2_FEATURES & set(features) else None


class FetchFailed(RuntimeError):
    """The package could not be downloaded or unpacked; the message says which step and why."""


def apt_options(work: Path) -> list[str]:
    """apt-get options that read only `work`'s sources file and keep lists and archives in `work`."""
    return ["-o", f"Dir::Etc::SourceList={work / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={work / 'lists'}", "-o", f"Dir::Cache={work / 'cache'}",
            "-o", "Dir::Etc::Preferences=/nonexistent", "-o", "Dir::Etc::PreferencesParts=/nonexistent",
            # root: download as root into `work` (apt's _apt user cannot write there)
            *(["-o", "APT::Sandbox::User=root"] if os.geteuid() == 0 else [])]


def missing_tools() -> str | None:
    """Why fetch() cannot run here, or None."""
    absent = [t for t in ("apt-get", "dpkg-deb") if shutil.which(t) is None]
    if absent:
        return f"{' and '.join(absent)} not found (fetch() uses Debian's tools; set {ENV} to a qemu-aarch64 >= 11)"
    if not os.path.exists(KEYRING):
        return f"{KEYRING} not found (Debian: apt-get install debian-archive-keyring)"
    return None


def fetch(cache: Path | None = None, *, mirror: str = MIRROR, log=print) -> Path:
    """qemu-aarch64 11.1.3 unpacked into the cache folder: nothing to do if it is there already (idempotent);
    FetchFailed naming the step otherwise."""
    target = cached_qemu(cache)
    if os.access(target, os.X_OK):
        log(f"{target}: already there")
        return target
    reason = missing_tools()
    if reason:
        raise FetchFailed(reason)
    root = ready_folder(cache or cache_dir())
    with tempfile.TemporaryDirectory(prefix=f"{FOLDER}.", dir=root) as tmp:
        work = Path(tmp)
        (work / "sources.list").write_text(f"deb [signed-by={KEYRING}] {mirror} {SUITE} main\n")
        for folder in ("lists/partial", "cache/archives/partial"):
            (work / folder).mkdir(parents=True)
        options = apt_options(work)
        log(f"downloading {PACKAGE}={VERSION} from {mirror} {SUITE} (private apt configuration in {work})")
        _step("apt-get update", ["apt-get", *options, "-qq", "update"], work)
        _step("apt-get download", ["apt-get", *options, "-qq", "download", f"{PACKAGE}={VERSION}"], work)
        deb = next(work.glob(f"{PACKAGE}_*.deb"), None)
        if deb is None:
            raise FetchFailed(f"apt-get download left no {PACKAGE}_*.deb in {work}")
        unpacked = work / "unpacked"
        _step("dpkg-deb -x", ["dpkg-deb", "-x", str(deb), str(unpacked)], work)
        kept = _keep_aarch64(unpacked, work / FOLDER)
        version = _version(kept / "usr" / "bin" / "qemu-aarch64")
        if version[:2] != UPSTREAM[:2]:
            raise FetchFailed(f"the unpacked qemu-aarch64 says version {version}, expected {UPSTREAM}")
        try:
            os.replace(kept, target.parents[2])  # whole, or not at all: a later run finds it or fetches again
        except OSError:
            if not os.access(target, os.X_OK):   # else another fetch got there first
                raise
    log(f"{target}: qemu-aarch64 {'.'.join(map(str, version))}")
    return target


def _keep_aarch64(unpacked: Path, kept: Path) -> Path:
    """Of the package's 458 MB (every qemu-user guest), what lowp runs: qemu-aarch64 and the copyright file."""
    for part in ("usr/bin/qemu-aarch64", f"usr/share/doc/{PACKAGE}/copyright"):
        (kept / part).parent.mkdir(parents=True, exist_ok=True)
        if (unpacked / part).exists():
            os.replace(unpacked / part, kept / part)
    return kept


def _step(what: str, command: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FetchFailed(f"{what}: {e}") from None
    if done.returncode != 0:
        raise FetchFailed(f"{what} exited {done.returncode}: {(done.stderr or done.stdout).strip()[-800:]}")


def _version(qemu: Path) -> tuple[int, ...]:
    from lowp.emulator.qemu_batch import identify
    return identify(str(qemu)).version or ()


def main(argv: list[str]) -> int:
    """`fetch`: fetch() and print where; `where`: print the qemu SME2 work runs on, or why there is none."""
    if argv == ["fetch"]:
        try:
            fetch()
        except FetchFailed as e:
            print(f"qemu-user 11 not fetched: {e}", file=sys.stderr)
            return 1
        return 0
    if argv == ["where"]:
        found = sme2_qemu()
        print(found or f"no qemu for SME2 here: {HOW}")
        return 0 if found else 1
    print(f"usage: {FETCH} | python -m lowp.emulator.aarch64.qemu_sme2 where", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
