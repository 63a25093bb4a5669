"""The example database: the counterexamples lowp's searches found, kept so that every later search of the same
check, in any run, worker or machine that shares the database, replays them before it searches anew.

A database is named by one string (`--database`, the pytest plugin's `--lowp-database`, $LOWP_DATABASE):
- a folder (the default: `examples/` in lowp's cache folder, shared by every run of this user on this machine):
  hypothesis.database.DirectoryBasedExampleDatabase, one file a value, safe for concurrent workers; a folder on a
  shared file system serves several machines;
- a Redis URL (`redis://host:6379/0`, `rediss://...`, `unix:///path`): hypothesis.extra.redis.RedisExampleDatabase,
  one database for a cluster of machines without a shared file system (needs the `redis` package: lowp[ray]).

lowp keeps the examples' values (A, B and a requantizing kernel's parameters, as JSON), not hypothesis's choice
sequences: hypothesis keeps no database for a seeded search (`find(random=...)` applies `hypothesis.seed`, which
sets database=None), and lowp's search is seeded so that a run repeats.

A stored counterexample is kept after it stops failing. The bugs campaigns look for are often wrong on one machine
only (a CPU, a compiler): a machine where the example passes must not delete it for the machine where it fails, and
a fixed bug's counterexample stays a regression case. Only a value that no longer parses, or that lies outside what
the check draws from, is dropped; a search replays at most MAX_REPLAYS examples of a check, the smallest first.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path

import numpy as np
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from lowp.kernels import Domain

from lowp.conformance.search import quantized
from lowp.conformance.search.cases import ranges

ENV = "LOWP_DATABASE"
URL_SCHEMES = ("redis://", "rediss://", "unix://")
MAX_REPLAYS = 20
REDIS_PREFIX = b"lowp-examples:"
REDIS_EXPIRY = timedelta(days=90)      # a check not searched for 90 days loses its examples (hypothesis: 8 days)
REDIS_INSTALL = "a Redis example database needs the redis package: pip install 'lowp[ray]' (or pip install redis)"


class DatabaseError(RuntimeError):
    """A database that cannot be used: the redis package missing, or no server answering at the URL."""


def default_location() -> str:
    """$LOWP_DATABASE, else the folder `examples` in lowp's cache folder ($LOWP_CACHE_DIR, ~/.cache/lowp)."""
    from lowp.emulator.buildcache import cache_dir
    return os.environ.get(ENV) or str(cache_dir() / "examples")


def is_url(spec: str) -> bool:
    return spec.startswith(URL_SCHEMES)


def open_database(spec: str) -> ExampleDatabase:
    """The hypothesis example database `spec` names: a Redis URL or a folder."""
    if not is_url(spec):
        return DirectoryBasedExampleDatabase(spec)
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError as e:
        raise DatabaseError(f"{REDIS_INSTALL} ({e})") from None
    return RedisExampleDatabase(redis.Redis.from_url(spec), expire_after=REDIS_EXPIRY, key_prefix=REDIS_PREFIX)


def check_reachable(spec: str) -> None:
    """DatabaseError unless the database can be used now: the redis package installed and the server answering
    (a run would otherwise fail in every check). A folder needs nothing: it is made with the first example."""
    if not is_url(spec):
        return
    db = open_database(spec)
    try:
        db.redis.ping()
    except Exception as e:      # redis.exceptions.ConnectionError, AuthenticationError, a bad URL's ValueError
        raise DatabaseError(f"no Redis server answers at {spec} ({type(e).__name__}: {e})") from None


class ExampleStore:
    """The stored counterexamples of one check. The key is the check's id and what bounds its examples (operand
    types, claimed domain, output stage, pinned parameters): after an edit of those, earlier examples are not
    replayed, and kernels of the same name in two projects with different types do not see each other's."""

    def __init__(self, spec: str, check, kern):
        self.db, self.kern, self.domain = open_database(spec), kern, check.domain
        bounds = repr((kern.signature, kern.a_type, kern.b_type, kern.c_type, kern.domain, kern.output, kern.quant,
                       kern.xnnpack))
        self.key = f"{check.id}:{hashlib.sha256(bounds.encode()).hexdigest()[:16]}".encode()

    def replays(self) -> list[tuple]:
        """(A, B, quant) of the examples kept for this check, the smallest first, at most MAX_REPLAYS."""
        out = []
        for value in list(self.db.fetch(self.key)):
            problem = self._problem(value)
            if problem is None:
                self.db.delete(self.key, value)
            else:
                out.append((problem[0].size + problem[1].size, value, problem))
        return [problem for _, _, problem in sorted(out, key=lambda e: e[:2])[:MAX_REPLAYS]]

    def save(self, A: np.ndarray, B: np.ndarray, quant: dict | None = None) -> None:
        shape = [int(A.shape[0]), int(B.shape[1]), int(A.shape[1])]
        self.db.save(self.key, json.dumps({"shape": shape, "A": A.tolist(), "B": B.tolist(),
                                           "quant": quantized.to_json(quant)}, sort_keys=True).encode())

    def _problem(self, value: bytes):
        """The stored (A, B, quant), or None when it does not parse or lies outside what the check draws from."""
        try:
            A, B, quant = operands_from_json(json.loads(value), self.kern)
        except (ValueError, TypeError, KeyError, OverflowError):
            return None
        a, b = ranges(self.kern, self.domain)
        if not Domain(a, b).contains(A, B) or (quant is None) == bool(self.kern.quantized):
            return None
        m, n = A.shape[0], B.shape[1]
        if quant is not None and self.domain != "outside" and quantized.domain_problems(self.kern, quant, m, n):
            return None
        return A, B, quant


def operands_from_json(call: dict, kern) -> tuple:
    """(A, B, quant) of a call written as JSON, a stored example or a row's counterexample ({"shape": [M, N, K],
    "A", "B", "quant"}), in the kernel's operand types; ValueError, KeyError, TypeError or OverflowError when it
    does not fit them."""
    m, n, k = call["shape"]
    return (np.array(call["A"], kern.a_dtype).reshape(m, k), np.array(call["B"], kern.b_dtype).reshape(k, n),
            quantized.from_json(call.get("quant")))


def describe(spec: str | None) -> str:
    """How a report names the database: the folder's path or the URL without its password."""
    if spec is None:
        return "none"
    if is_url(spec) and "@" in spec:
        scheme, rest = spec.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return spec if is_url(spec) else str(Path(spec))
