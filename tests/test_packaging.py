"""Packaging that cannot miss a folder: every folder with an __init__.py under the component folders is a package
pyproject.toml installs, every other file there is package data its patterns cover, a built wheel holds exactly the
component folders' files, and the lowp under test is the one installed (LOWP_EXPECT_INSTALLED=1: a non-editable
install, not the checkout's lowp/ folder)."""
from __future__ import annotations

import glob
import importlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGES = CONFIG["packages"]
PACKAGE_DIR = CONFIG["package-dir"]
PACKAGE_DATA = CONFIG["package-data"]
NOT_SHIPPED = {"tests", "docs"}          # top-level folders of the checkout that are not part of the package
JUNK_DIRS = {"__pycache__", ".pytest_cache", ".hypothesis", ".benchmarks"}
JUNK_SUFFIXES = {".pyc", ".pyo", ".so", ".o"}


def folder_of(name: str) -> Path:
    """The checkout folder setuptools takes package `name` from: its nearest package-dir entry (itself or a
    parent's) joined with the rest of the name."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        mapped = PACKAGE_DIR.get(".".join(parts[:n]))
        if mapped is not None:
            return ROOT.joinpath(mapped, *parts[n:])
    return ROOT.joinpath(*parts)


def component_roots() -> list[Path]:
    """The folders package-dir maps (and the listed packages' folders) that are no other one's subfolder: lowp/,
    isa_models/, kernels/, ..."""
    folders = {ROOT / f for f in PACKAGE_DIR.values()} | {folder_of(p) for p in PACKAGES}
    return sorted(f for f in folders if not any(g in f.parents for g in folders))


def package_of(folder: Path) -> str:
    """The dotted name package-dir gives `folder` (a package, or a data folder inside one): the name of the nearest
    mapped folder at or above it, then the folders below."""
    mapped = [(name, ROOT / f) for name, f in PACKAGE_DIR.items() if folder == ROOT / f or ROOT / f in folder.parents]
    assert mapped, f"{folder}: no package-dir entry reaches it"
    name, base = max(mapped, key=lambda m: len(m[1].parts))
    return ".".join([name, *folder.relative_to(base).parts])


def shipped_files() -> list[Path]:
    """Every file of the component folders, build and cache litter left out: what a wheel must hold."""
    out = []
    for root in component_roots():
        for path in root.rglob("*"):
            if path.is_file() and not JUNK_DIRS & set(path.relative_to(ROOT).parts) \
                    and path.suffix not in JUNK_SUFFIXES and not path.name.endswith("~"):
                out.append(path)
    return sorted(out)


def wheel_path(path: Path) -> str:
    """Where `path` of the checkout lands in a wheel: its folder's dotted name as folders, then its name (modules
    and package data alike)."""
    return "/".join([*package_of(path.parent).split("."), path.name])


def test_the_component_folders_are_the_mapped_ones():
    roots = {r.relative_to(ROOT).as_posix() for r in component_roots()}
    assert roots == {"lowp", "isa_models", "kernels", "emulator", "conformance"}
    top_level_packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert top_level_packages - NOT_SHIPPED == roots, "a top-level folder with an __init__.py has no package-dir entry"


def test_every_folder_with_an_init_is_an_installed_package():
    found = {package_of(init.parent) for root in component_roots() for init in root.rglob("__init__.py")
             if not JUNK_DIRS & set(init.parts)}
    missing = sorted(found - set(PACKAGES))
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}"
    stale = sorted(p for p in PACKAGES if not (folder_of(p) / "__init__.py").is_file())
    assert not stale, f"listed packages without an __init__.py: {stale}"


def test_package_data_covers_every_other_file():
    """Sources the kernels and executors compile, TOML files, headers, the mutation suite: setuptools ships a
    non-package file only if its package's package-data patterns match it (globbed from the package's folder)."""
    covered = set()
    for package, patterns in PACKAGE_DATA.items():
        base = folder_of(package)
        for pattern in patterns:
            covered |= {(base / m).resolve() for m in glob.glob(pattern, root_dir=base, recursive=True)}
    in_packages = {folder_of(p) for p in PACKAGES}
    data = [f for f in shipped_files() if not (f.suffix == ".py" and f.parent in in_packages)]
    assert not [f for f in data if f.name == "__init__.py"], "a package folder is not listed (see the test above)"
    assert data, "no data files found: the walk is broken"
    missing = [str(f.relative_to(ROOT)) for f in data if f.resolve() not in covered]
    assert not missing, f"no package-data pattern ships {missing}"


def test_a_built_wheel_holds_exactly_the_component_folders(tmp_path):
    """pip builds a wheel from a clean copy of what the build reads (pyproject.toml, README.md, the component
    folders; no stale build/ folder can leak in), and the wheel's lowp/ tree is the checkout's files, mapped."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns(*JUNK_DIRS, *(f"*{s}" for s in JUNK_SUFFIXES))
    for root in component_roots():
        shutil.copytree(root, src / root.relative_to(ROOT), ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, f"pip wheel failed (it fetches setuptools for the build):\n{built.stderr}"
    (wheel,) = (tmp_path / "dist").glob("lowp-*.whl")
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    expected = {wheel_path(f) for f in shipped_files()}
    assert not expected - names, f"the wheel lacks {sorted(expected - names)}"
    assert not names - expected, f"the wheel holds files the checkout does not: {sorted(names - expected)}"


def test_every_package_imports_from_the_lowp_under_test():
    """Each listed package imports, from the same installation as lowp itself; with LOWP_EXPECT_INSTALLED=1 that is
    site-packages (a non-editable install), so the suite cannot pass by importing the checkout's lowp/ folder."""
    import lowp
    modules = {p: importlib.import_module(p) for p in PACKAGES}
    if os.environ.get("LOWP_EXPECT_INSTALLED") == "1":
        site = Path(sysconfig.get_paths()["purelib"]).resolve()
        outside = {p: m.__file__ for p, m in modules.items() if site not in Path(m.__file__).resolve().parents}
        assert not outside, f"imported from outside {site}: {outside}"
        assert ROOT not in Path(lowp.__file__).resolve().parents
    else:
        assert all(Path(m.__file__).is_file() for m in modules.values())
