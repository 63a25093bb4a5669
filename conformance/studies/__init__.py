"""Studies: the seeds' quantitative claims, reproduced by lowp's own models and kernels (`lowp study NAME`).

Each study is a module with
    compute(small=False, seed=0, **options) -> dict   the numbers (pure: no files), JSON-serialisable
    page(numbers, figures) -> str                     the Markdown page, every number in it taken from `numbers`
    plot(numbers, out_dir) -> list[Path]              the PNG figures (needs matplotlib, the `plots` extra)
and `run(name, out_dir)` writes `<name>.md`, `<name>.json` and `<name>-*.png` into out_dir (docs/studies/ in the
repository). Without matplotlib the page and the tables are written all the same, and the page says that the
figures were skipped. `small=True` is the configuration the tests use: the same code on smaller inputs.
"""
from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from tabulate import tabulate

STUDIES = {
    "seed000": "requantizing to fewer than 8 bits: nearest vs probabilistic rounding as the depth grows (gemmlowp)",
    "seed002": "how often VPMADDUBSW saturates on u8 x s8 inputs drawn as networks draw them; reduce_range, acc16",
    "seed004": "4.6-bit quantization: the (Nx, Nw) pairs, 4-bit vs 4.6-bit error, lowp bench gemm vs Table 1",
}


@dataclass
class StudyResult:
    name: str
    page: Path
    data: Path
    figures: list[Path] = field(default_factory=list)
    plots_skipped: str = ""
    seconds: float = 0.0
    numbers: dict = field(default_factory=dict)


def module(name: str):
    if name not in STUDIES:
        raise KeyError(f"no study named {name!r}; known: {', '.join(STUDIES)}")
    return importlib.import_module(f"{__name__}.{name}")


def pyplot():
    """matplotlib.pyplot on the Agg back end, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "font.size": 10, "axes.grid": True,
                         "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def save(fig, path: Path) -> Path:
    """Write a figure without the metadata that would change its bytes from one run to the next."""
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def md_table(rows, headers, floatfmt="g") -> str:
    return tabulate(rows, headers=headers, tablefmt="github", floatfmt=floatfmt)


def fig_link(figures: list[Path], stem: str, alt: str) -> str:
    """A Markdown image for the figure whose name ends in `stem`, or a note when plots were skipped."""
    for f in figures:
        if f.stem.endswith(stem):
            return f"![{alt}]({f.name})"
    return f"*(figure `{stem}` not drawn: matplotlib is not installed; `pip install 'lowp[plots]'`)*"


def run(name: str, out_dir: Path, *, small: bool = False, plots: bool = True, **options) -> StudyResult:
    """Compute a study, draw its figures (if matplotlib is there and plots=True), write its page and numbers."""
    mod = module(name)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    numbers = mod.compute(small=small, **options)
    figures, skipped = [], ""
    if not plots:
        skipped = "plots not requested (--no-plots)"
    elif pyplot() is None:
        skipped = "matplotlib is not installed (pip install 'lowp[plots]')"
    else:
        figures = mod.plot(numbers, out_dir)
    text = mod.page(numbers, figures)
    if skipped:
        text += f"\n\n*Figures skipped: {skipped}.*\n"
    page = out_dir / f"{name}.md"
    page.write_text(text.rstrip() + "\n")
    data = out_dir / f"{name}.json"
    data.write_text(json.dumps(numbers, indent=1, default=_json_default) + "\n")
    return StudyResult(name, page, data, figures, skipped, time.perf_counter() - start, numbers)


def _json_default(x):
    import numpy as np
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON-serialisable: {type(x).__name__}")
