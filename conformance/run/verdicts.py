"""Verdicts kept across campaigns: a library's CI asks, per pull request, for the verdicts of what the pull request
changed, and a campaign over an unchanged kernel would only reach the same verdict again.

Each PASS or FAIL row a library campaign (`lowp xnnpack`, `lowp ggml`) journals is also written here, beside the
build cache (<cache>/verdicts/), under the SHA-256 of its check id and its producer (lowp.conformance.run.provenance:
lowp's version and a hash of lowp's own code, the kernel's key over its entry, sources, headers and build, the
options that choose the cases: seed, profile, timeout, jobs, the example database, and the backends chosen by
environment). A later campaign, with any --out, finds a check whose producer is the same and journals the kept row
marked `reused: true` instead of running it; anything the producer holds that changed makes another key, so the
check runs. Only PASS and FAIL are kept: a SKIPPED row says what this machine lacked (an emulator installed since
would run it), a CRASH or NOT RUN row what happened to one run. `--fresh` judges everything again.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

KEPT = ("PASS", "FAIL")


def folder() -> Path:
    from lowp.emulator.buildcache import cache_dir
    return cache_dir() / "verdicts"


def _path(check_id: str, producer: dict) -> Path:
    digest = hashlib.sha256(json.dumps([check_id, producer], sort_keys=True).encode()).hexdigest()
    return folder() / digest[:2] / f"{digest}.json"


def lookup(check_id: str, producer: dict | None) -> dict | None:
    """The kept row of this check from this producer, marked reused, or None (none kept, or unreadable)."""
    if producer is None:
        return None
    try:
        row = json.loads(_path(check_id, producer).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(row, dict) or row.get("id") != check_id or row.get("producer") != producer or \
            not isinstance(row.get("kernel"), str):
        return None
    # The kernel is the same (its key is in the producer), but this campaign registered it from its own --out: the
    # row's repro line names the file it is registered from now, not an earlier campaign's, which may be gone.
    from lowp.conformance.report.rows import kernel_origin
    return {**row, "origin": kernel_origin(row["kernel"]), "reused": True}


def keep(row: dict) -> None:
    """Write a fresh PASS or FAIL row that carries its producer (atomically; a cache that cannot be written keeps
    nothing, which costs only a later re-run)."""
    if row.get("verdict") not in KEPT or not isinstance(row.get("producer"), dict) or row.get("reused"):
        return
    from lowp.emulator.buildcache import write_atomic
    try:
        path = _path(row["id"], row["producer"])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(row, sort_keys=True).encode())
    except OSError:
        pass
