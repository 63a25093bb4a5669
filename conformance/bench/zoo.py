"""A whole library campaign estimated from a stratified sample (`lowp bench xnnpack --zoo`).

Judging all of XNNPACK's 3,365 int8 kernels takes most of an hour on two cores; a library's CI wants to know what
that costs on its own runner without paying it. The kernels of one group (the library's group keys: XNNPACK's
datatype, op and ISA) share a template, an output stage and an executor, so they cost about the same to judge. One
kernel of each group (the middle one by name: no tile-size extreme) is judged, and each group counts its sampled
kernel's seconds once per kernel it holds. A group whose sample this machine cannot run counts as skipped, as its
kernels would be. docs/xnnpack-campaign.md compares the estimate with a whole datatype's campaign.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from lowp.conformance.run.campaign import Campaign, map_kernels


@dataclass(frozen=True)
class Stratum:
    """One group of the library's kernels: its key (the group keys' values) and its mapped kernels, by name."""
    key: tuple
    kernels: tuple[str, ...]

    @property
    def pick(self) -> str:
        return self.kernels[len(self.kernels) // 2]


def strata(library, checkout, selection: dict | None = None) -> tuple[list[Stratum], int]:
    """(the groups of the kernels a campaign over `checkout` would judge, how many it would skip at mapping): the
    campaign's own mapping (lowp.conformance.run.campaign.map_kernels) of what `selection` ({group key: [values]},
    empty: all) selects."""
    items, _ = map_kernels(Campaign(library, checkout, Path(), selection=dict(selection or {})))
    groups = defaultdict(list)
    for item in items:
        if item.skip is None:
            groups[tuple(item.group.get(key) for key in library.group_keys)].append(item.name)
    return [Stratum(key, tuple(sorted(names))) for key, names in sorted(groups.items(), key=lambda kv: str(kv[0]))], \
        sum(item.skip is not None for item in items)


def estimate(groups: list[Stratum], kernels: list[dict], rows: list[dict], jobs: int) -> dict:
    """The whole campaign's figures from the sample's campaign.json `kernels` and report.json `rows`: each group's
    kernels cost its sampled kernel's checks and build seconds. Per backend (the sampled kernel's rows'); per kernel
    the median and p90 of checks plus build, each group's sample counted once per kernel of the group."""
    by_name = {k["name"]: k for k in kernels}
    backend = {}
    for row in rows:
        if row.get("verdict") != "SKIPPED":
            backend.setdefault(row["kernel"], row.get("backend") or "?")
    judged, skipped, missing = [], [], []
    for group in groups:
        kernel = by_name.get(group.pick)
        if kernel is None:
            missing.append(group)
        elif kernel["status"] == "skipped":
            skipped.append(group)
        else:
            judged.append((group, kernel))
    per_backend = defaultdict(lambda: {"kernels": 0, "checks": 0.0})
    each = []
    for group, kernel in judged:
        n, checks, build = len(group.kernels), kernel["seconds"], kernel.get("build_seconds") or 0.0
        b = per_backend[backend.get(kernel["name"], "?")]
        b["kernels"] += n
        b["checks"] += n * checks
        each += [checks + build] * n
    checks = sum(b["checks"] for b in per_backend.values())
    builds = sum(len(g.kernels) * (k.get("build_seconds") or 0.0) for g, k in judged)
    return {
        "groups": len(groups), "kernels": sum(len(g.kernels) for g in groups),
        "judged_groups": len(judged), "judged_kernels": len(each),
        "skipped_groups": len(skipped), "skipped_kernels": sum(len(g.kernels) for g in skipped),
        "missing": [g.pick for g in missing],
        "checks_seconds": checks, "build_seconds": builds, "jobs": jobs,
        "checks_minutes": checks / max(1, jobs) / 60,
        "per_kernel": {"median": statistics.median(each) if each else None,
                       "p90": _quantile(each, 0.9), "max": max(each, default=None)},
        "backends": {name: {**b, "mean": b["checks"] / b["kernels"]} for name, b in sorted(per_backend.items())},
    }


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
