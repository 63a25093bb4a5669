"""A compile cache keyed by everything that goes into a build, in the style of ccache's direct mode, shared by the
native (gcc/clang, x86-64) and the AArch64 (zig cc) builders.

Key 1 is the SHA-256 of this format's version, the compiler's identity and version, the full command lines
(compiler, compile flags, link flags), the compile's working directory and every source's and extra input's path
and bytes. Each source is compiled on its own with `-MMD -MF <depfile>`, so the compiler itself lists every header
it read that is not a system header: found next to the source (`""`), through `-I`, `-iquote`, `-include` or any
other flag. That list goes, with each header's SHA-256, into a manifest next to the artifact. A lookup reads the
manifests of key 1, re-hashes the headers each one lists, and reuses an artifact only if all of them still match;
otherwise it builds and writes a new artifact and manifest. Headers that the compile reached from a system
directory (or through `-isystem`) are not listed, as with ccache: the compiler's identity stands for them.
(ccache's direct mode: https://ccache.dev/manual/latest.html#_the_direct_mode)

Each source is compiled as the language its suffix names (LANGUAGES: C, C++, assembly with or without the
preprocessor); the language and the driver that compiles it join key 1, as do per-language flags. C++ sources
compile with the C++ driver (`cxx=`), which then also links, so a C++ runtime the driver adds is linked in; C and
assembly stay with the C driver (a C++ driver would compile a .c file as C++).

The compile runs in the first source's directory, so relative `-I` paths and `-include` files resolve there; the
sources are passed as absolute paths. Artifacts and manifests are written under a temporary name in the cache
directory and moved into place with os.replace, so parallel workers see a whole file or none. A header modified
after the compile started is not trusted: the artifact is returned but no manifest is written (ccache does the
same), so the next lookup builds again.

What the cache holds is loaded and run (dlopen, Unicorn, qemu, Bochs), so it is checked, not trusted:
- the manifest records the SHA-256 of the artifact as built; a lookup re-hashes the artifact and uses it only if
  the digest matches. An artifact that differs (a flipped bit, a truncated file, a file planted under its name) is
  not loaded: a CacheWarning names it, it is removed and built again. An artifact without a manifest is never
  looked up at all: only what lowp built and recorded is reused.
- the cache folder (and the subfolders builds write into) is created 0700 and refused, with a CacheError naming
  it, when it is not a folder, belongs to another user or can be written by other users: whoever can write
  there can put code into every later run. A generated source found in it is used only if its bytes are the text.
- every failure to read or write the cache is a CacheError (an OSError) naming the folder or file and what to do.

This module imports nothing from lowp: both builders depend on it, not the other way round.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Sequence

FORMAT = "lowp-buildcache-4"        # bump when the key, the manifest or the command lines change meaning
MANIFEST_SUFFIX = ".manifest"
KEY_CHARS = 24                      # of key 1 in file names (the manifest holds the whole key)
RESULT_CHARS = 12                   # of the result key (key 1 plus the headers' hashes) in file names
# Source suffix -> language (GCC's and clang's -x names, which both drivers also infer from these suffixes).
LANGUAGES = {".c": "c", ".cc": "c++", ".cpp": "c++", ".cxx": "c++", ".S": "assembler-with-cpp", ".s": "assembler"}

# Counts of this process's lookups: tests assert that an untouched rebuild runs no compiler.
stats = {"hits": 0, "builds": 0, "compiler_runs": 0}


class BuildFailed(RuntimeError):
    """A compile or link failed; the message names the file and carries the compiler's own message. `.source` is
    the file whose compile failed (None when the link failed)."""

    def __init__(self, message: str, source: Path | None = None):
        super().__init__(message)
        self.source = source

    def __reduce__(self):                  # picklable with its source (child processes hand errors back)
        return type(self), (str(self), self.source)


class CacheError(OSError):
    """The cache folder, or a file in it, cannot be used safely or at all; the message names it and says what to
    do (a file where the folder should be, another user's folder, a folder others can write, a write that fails)."""

    def __str__(self):                 # the message alone, without OSError's "[Errno N]"
        return self.strerror or super().__str__()


class CacheWarning(UserWarning):
    """A cached file that is not what lowp wrote (its checksum differs, its manifest does not parse): named, not
    used, and built again."""


@dataclass(frozen=True)
class Toolchain:
    """How to run a compiler driver: its argv prefix, the identity that joins the key, and its environment."""
    command: tuple[str, ...]
    identity: str
    env: Mapping[str, str] | None = None


@lru_cache(maxsize=None)
def cache_dir() -> Path:
    """The one cache folder of every build (native shared objects under native/, AArch64 and RISC-V ELFs at the
    top): $LOWP_CACHE_DIR, else $XDG_CACHE_HOME/lowp, else ~/.cache/lowp."""
    env = os.environ.get("LOWP_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lowp"


# Folders this process has already created or checked (ready_folder): a check per build would be a stat per build.
_READY: set[str] = set()


def ready_folder(directory: str | os.PathLike) -> Path:
    """`directory` made ready for artifacts: every missing folder created 0700, and it (with every folder between
    it and the cache folder) checked: a folder, this user's, writable by no one else. CacheError naming the folder
    otherwise, since what is in it is loaded and run."""
    directory = Path(directory)
    for folder in _folders_to_check(directory):
        if str(folder) in _READY:
            continue
        _create_private(folder)
        _check_private(folder)
        _READY.add(str(folder))
    return directory


def _folders_to_check(directory: Path) -> list[Path]:
    """The cache folder and each folder from it down to `directory`; `directory` alone if it is elsewhere (a
    build(cache=...) of its own)."""
    root = cache_dir()
    try:
        parts = directory.relative_to(root).parts
    except ValueError:
        return [directory]
    return [root, *(root.joinpath(*parts[:i + 1]) for i in range(len(parts)))]


def _create_private(folder: Path) -> None:
    """mkdir -m 0700 of `folder` and of its missing parents (Path.mkdir's mode covers the last one only)."""
    missing = []
    for p in (folder, *folder.parents):
        if p.exists() or p.is_symlink():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:
            pass                # another process made it first: checked below like any folder
        except OSError as e:
            raise CacheError(e.errno, f"cannot create the cache folder {p}: {e.strerror}; set LOWP_CACHE_DIR to a "
                                      "folder you can write") from None


def _check_private(folder: Path) -> None:
    try:
        st = folder.stat()
    except OSError as e:
        raise CacheError(e.errno, f"cannot use the cache folder {folder}: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(errno.ENOTDIR, f"the cache folder {folder} is a file, not a folder: remove it, or set "
                                        "LOWP_CACHE_DIR to a folder")
    if st.st_uid != os.geteuid():
        raise CacheError(errno.EPERM, f"the cache folder {folder} belongs to another user (uid {st.st_uid}): lowp "
                                      "loads and runs what is in it, so it only uses a folder of its own; set "
                                      "LOWP_CACHE_DIR to one")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(errno.EPERM, f"the cache folder {folder} can be written by other users (mode "
                                      f"{stat.S_IMODE(st.st_mode):04o}): lowp loads and runs what is in it; "
                                      f"`chmod go-w {folder}`, or set LOWP_CACHE_DIR to a folder of your own")


def _cache_write_error(path: Path, e: OSError) -> CacheError:
    return CacheError(e.errno, f"cannot write {path} into the cache: {e.strerror}; make {path.parent} writable "
                               "or set LOWP_CACHE_DIR to a folder you can write")


def compiler_identity(command: tuple[str, ...]) -> str:
    """The driver's resolved path, size and mtime, and its `--version` output: an upgrade in place changes it."""
    resolved = shutil.which(command[0]) or command[0]
    real = os.path.realpath(resolved)
    try:
        st = os.stat(real)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = "?"
    try:
        version = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildFailed(f"cannot run the compiler {' '.join(command)}: {e}") from None
    return f"{real} {stamp}\n{version.strip()}"


def compiler_name(identity: str) -> str:
    """'<path>: <first line of --version>' of a compiler identity (compiler_identity, or a plain version string)."""
    first, _, version = identity.partition("\n")
    return f"{first.split(' ')[0]}: {version.splitlines()[0]}" if version else first


def describe(artifact: str | os.PathLike) -> dict | None:
    """How a cached artifact was built: {'compiler', 'compile_flags', 'link_flags'} from its manifest (None without
    one: a build whose headers changed while it compiled keeps no manifest)."""
    path = Path(artifact)
    try:
        entry = json.loads(path.with_name(path.name + MANIFEST_SUFFIX).read_text())
    except (OSError, ValueError):
        return None
    if entry.get("format") != FORMAT:
        return None
    return {key: entry[key] for key in ("compiler", "compile_flags", "link_flags")}


def language(path: str | os.PathLike) -> str:
    """The language of a source file by its suffix (LANGUAGES); ValueError naming the file for any other."""
    suffix = Path(path).suffix
    try:
        return LANGUAGES[suffix]
    except KeyError:
        raise ValueError(f"{path}: unknown source language {suffix or '(no suffix)'!r}; accepted: "
                         f"{', '.join(f'{s} ({lang})' for s, lang in LANGUAGES.items())}") from None


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def source_file(text: str, directory: Path, name: str, suffix: str = ".c") -> Path:
    """Generated source text as a file named by its content under `directory`, so it builds like any source. A
    file of that name whose bytes are not the text (damaged, or put there) is written again, with a CacheWarning."""
    path = ready_folder(directory) / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"
    data = text.encode()
    try:
        if path.read_bytes() == data:
            return path
        warnings.warn(f"{path}: the generated source is not the text it is named after (damaged or replaced): "
                      "writing it again", CacheWarning, stacklevel=2)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise CacheError(e.errno, f"cannot read {path} in the cache: {e.strerror}") from None
    try:
        write_atomic(path, data)
    except OSError as e:
        raise _cache_write_error(path, e) from None
    return path


_DEP_TOKEN = re.compile(r"(?:\\.|\$\$|[^\s\\])+")
_DEP_TARGET = re.compile(r"^(?:\\.|[^:\\])*:(?=\s|$)")


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a Make-syntax dependency file (-MMD's), escapes undone: '\\ ' is a space, '$$' a '$'."""
    text = re.sub(r"\\\r?\n", " ", text)
    deps: list[str] = []
    for line in text.splitlines():
        target = _DEP_TARGET.match(line)
        if not target:
            continue
        for token in _DEP_TOKEN.findall(line[target.end():]):
            deps.append(re.sub(r"\\(.)", r"\1", token).replace("$$", "$"))
    return deps


def _key1(toolchain: Toolchain, compile_flags: Sequence[str], link_flags: Sequence[str], cwd: Path,
          sources: Sequence[Path], inputs: Sequence[Path], cxx: Toolchain | None,
          language_flags: Mapping[str, Sequence[str]]) -> str:
    h = hashlib.sha256()

    def part(tag: str, data: bytes) -> None:
        h.update(f"{tag}:{len(data)}:".encode() + data)

    part("format", FORMAT.encode())
    for tag, chain in (("", toolchain), ("c++ ", cxx if _has_cxx(sources) else None)):
        if chain is not None:
            part(tag + "identity", chain.identity.encode())
            for arg in chain.command:
                part(tag + "command", arg.encode())
    for flag in compile_flags:
        part("cflag", flag.encode())
    for flag in link_flags:
        part("lflag", flag.encode())
    for lang in sorted(language_flags):
        for flag in language_flags[lang]:
            part(f"{lang} flag", flag.encode())
    part("cwd", str(cwd).encode())
    for tag, files in (("source", sources), ("input", inputs)):
        for p in files:
            part(tag, str(p).encode())
            if tag == "source":
                part("language", language(p).encode())
            part("bytes", p.read_bytes())
    return h.hexdigest()


def _has_cxx(sources: Sequence[Path]) -> bool:
    return any(language(s) == "c++" for s in sources)


def _result_key(key1: str, headers: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps([key1, sorted(headers.items())]).encode()).hexdigest()


def _headers_match(headers: Mapping[str, str], seen: dict[str, str | None]) -> bool:
    for path, digest in headers.items():
        if path not in seen:
            try:
                seen[path] = sha256_file(Path(path))
            except OSError:          # deleted or unreadable: this manifest cannot be trusted
                seen[path] = None
        if seen[path] != digest:
            return False
    return True


def lookup(directory: Path, prefix: str, key1: str) -> Path | None:
    """The artifact of a manifest for key 1 whose headers all still hash as recorded and whose own bytes hash as
    the manifest recorded when lowp built it (_intact), newest manifest first."""
    pattern = f"{_glob_escape(prefix)}-*{MANIFEST_SUFFIX}"
    manifests = sorted(directory.glob(pattern), key=_mtime, reverse=True)
    seen: dict[str, str | None] = {}
    for manifest in manifests:
        entry = _read_manifest(manifest)
        if entry is None or entry.get("format") != FORMAT or entry.get("key") != key1:
            continue
        name = entry.get("artifact")
        if not isinstance(name, str) or Path(name).name != name:     # a manifest names a file beside it, no path
            continue
        artifact = directory / name
        if artifact.is_file() and _headers_match(entry.get("headers", {}), seen) and _intact(artifact, entry, manifest):
            return artifact
    return None


def _read_manifest(manifest: Path) -> dict | None:
    """A manifest's entry; None, with a CacheWarning naming it, if it does not parse (it is then ignored, and the
    artifact built again): manifests are written whole (write_atomic), so a broken one was damaged."""
    try:
        entry = json.loads(manifest.read_text())
    except FileNotFoundError:
        return None                 # removed since the glob (another process found it damaged)
    except (OSError, ValueError) as e:
        warnings.warn(f"{manifest}: unreadable build manifest ({e}): ignored, the artifact is built again",
                      CacheWarning, stacklevel=3)
        return None
    return entry if isinstance(entry, dict) else None


def _intact(artifact: Path, entry: dict, manifest: Path) -> bool:
    """Whether the artifact's bytes still hash as recorded when lowp built it. If not, it is not loaded: a
    CacheWarning names it, and it and its manifest are removed so that the caller builds it again."""
    try:
        digest = sha256_file(artifact)
    except OSError as e:
        raise CacheError(e.errno, f"cannot read the cached {artifact}: {e.strerror}") from None
    if digest == entry.get("sha256"):
        return True
    warnings.warn(f"{artifact}: its SHA-256 is not the one {manifest.name} recorded when lowp built it (the file "
                  "was damaged or replaced since): not loaded; building it again", CacheWarning, stacklevel=4)
    for path in (manifest, artifact):
        try:
            path.unlink()
        except OSError:
            pass                   # gone already, or not ours to remove: the rebuild replaces it
    return False


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _run(toolchain: Toolchain, args: list[str], cwd: Path, what: str, source: Path | None = None) -> None:
    cmd = [*toolchain.command, *args]
    env = dict(os.environ, **toolchain.env) if toolchain.env else None
    stats["compiler_runs"] += 1
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    except OSError as e:
        raise BuildFailed(f"{what} failed: cannot run {cmd[0]}: {e}", source) from None
    if proc.returncode != 0:
        message = (proc.stderr.strip() or proc.stdout.strip())[-8000:]
        raise BuildFailed(f"{what} failed (exit status {proc.returncode}):\n{message}\n"
                          f"command (in {cwd}): {' '.join(cmd)}", source)


def _compile_and_link(toolchain: Toolchain, sources: Sequence[Path], compile_flags: Sequence[str],
                      link_flags: Sequence[str], cwd: Path, work: Path, output: Path, cxx: Toolchain | None,
                      language_flags: Mapping[str, Sequence[str]]) -> set[Path]:
    """Compile each source to an object (with a depfile unless it is unpreprocessed .s), C++ with `cxx`, link
    them into `output` (with `cxx` if there is C++), and return the headers the compiler listed (absolute)."""
    objects, headers = [], set()
    for i, src in enumerate(sources):
        lang = language(src)
        obj, dep = work / f"{i}-{src.stem}.o", work / f"{i}-{src.stem}.d"
        depflags = [] if lang == "assembler" else ["-MMD", "-MF", str(dep)]
        _run(cxx if lang == "c++" else toolchain,
             [*compile_flags, *language_flags.get(lang, ()), "-c", str(src), "-o", str(obj), *depflags], cwd,
             f"compiling {src}", src)
        if depflags:
            if not dep.is_file():
                raise BuildFailed(f"compiling {src}: the compiler wrote no dependency file {dep.name} for -MMD -MF",
                                  src)
            headers |= {(cwd / d).resolve() for d in parse_depfile(dep.read_text())}
        objects.append(str(obj))
    names = ", ".join(map(str, sources))
    # libraries (-lname) after the objects, as a static link needs them; the other link flags before
    libraries = [f for f in link_flags if f.startswith("-l")]
    options = [f for f in link_flags if not f.startswith("-l")]
    _run(cxx if _has_cxx(sources) else toolchain, [*compile_flags, *options, *objects, *libraries, "-o", str(output)],
         cwd, f"linking {names}")
    return headers - set(sources)


def build(toolchain: Toolchain, sources: Iterable[str | os.PathLike], *, directory: str | os.PathLike, stem: str,
          suffix: str, compile_flags: Sequence[str] = (), link_flags: Sequence[str] = (),
          inputs: Iterable[str | os.PathLike] = (), cxx: Toolchain | None = None,
          language_flags: Mapping[str, Sequence[str]] | None = None) -> Path:
    """Compile and link `sources` into `directory`/`stem`-<key><suffix>, or return the cached artifact.

    compile_flags go to every compile and to the link (so -target, -O3, -march apply to both); link_flags only
    to the link (-shared, -Wl,...); language_flags[lang] only to the compiles of that language (a LANGUAGES
    value: 'c++' gets -fno-exceptions, ...). cxx: the C++ driver, needed when a source is C++ (it compiles those
    and links). inputs: extra files whose bytes join key 1 (the `depends=` of a builder).
    Raises FileNotFoundError for a missing source, ValueError for a source of an unknown language (or C++ without
    `cxx`) and BuildFailed with the compiler's message.
    """
    sources = [Path(s).resolve() for s in sources]
    if not sources:
        raise ValueError("build() needs at least one source file")
    for s in sources:
        language(s)
    if cxx is None and _has_cxx(sources):
        raise ValueError(f"{next(s for s in sources if language(s) == 'c++')}: a C++ source needs a C++ driver "
                         "(build(..., cxx=Toolchain(...)))")
    language_flags = {lang: tuple(flags) for lang, flags in (language_flags or {}).items()}
    inputs = [Path(p).resolve() for p in inputs]
    for p in [*sources, *inputs]:
        if not p.is_file():
            raise FileNotFoundError(f"{'source' if p in sources else 'input'} {p} does not exist")
    compile_flags, link_flags = tuple(compile_flags), tuple(link_flags)
    directory = ready_folder(directory)
    cwd = sources[0].parent
    key1 = _key1(toolchain, compile_flags, link_flags, cwd, sources, inputs, cxx, language_flags)
    prefix = f"{stem}-{key1[:KEY_CHARS]}"
    hit = lookup(directory, prefix, key1)
    if hit is not None:
        stats["hits"] += 1
        return hit
    stats["builds"] += 1
    started = time.time_ns()
    try:
        work = Path(tempfile.mkdtemp(dir=directory, prefix=".build-"))
    except OSError as e:
        raise _cache_write_error(directory / ".build-*", e) from None
    try:
        output = work / f"out{suffix}"
        headers = _compile_and_link(toolchain, sources, compile_flags, link_flags, cwd, work, output, cxx,
                                    language_flags)
        digests = {str(h): sha256_file(h) for h in sorted(headers)}
        artifact = directory / f"{prefix}-{_result_key(key1, digests)[:RESULT_CHARS]}{suffix}"
        built = sha256_file(output)          # recorded in the manifest: what a lookup checks before reuse
        try:
            os.replace(output, artifact)
        except OSError as e:
            raise _cache_write_error(artifact, e) from None
        # A header written after the compile started may not be what the compiler read: keep no manifest for it.
        if all(h.stat().st_mtime_ns < started for h in headers):
            manifest = {"format": FORMAT, "key": key1, "artifact": artifact.name, "sha256": built, "headers": digests,
                        "sources": [str(s) for s in sources], "inputs": [str(p) for p in inputs],
                        "compiler": compiler_name(toolchain.identity), "compile_flags": list(compile_flags),
                        "link_flags": list(link_flags)}
            path = artifact.with_name(artifact.name + MANIFEST_SUFFIX)
            try:
                write_atomic(path, json.dumps(manifest, indent=1).encode())
            except OSError as e:
                raise _cache_write_error(path, e) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return artifact
