"""An example of a kernel author's own pytest file (docs/getting-started.md). Run it with
    pytest docs/examples/test_my_kernels.py --lowp-report=report.md
The lowp plugin is installed with lowp: the `lowp_check` fixture and the `lowp` marker need no import."""
from pathlib import Path

import pytest

from lowp.kernels import kernels, load_toml

if "my_maddubs_avx2" not in {k.name for k in kernels()}:     # register once, even if collected twice
    load_toml(Path(__file__).with_name("kernels.toml"))


@pytest.mark.lowp("my_maddubs_avx2", "exact", examples=60)        # its claim: exact on u7 x s8
def test_maddubs_is_exact_on_its_domain():
    pass


def test_maddubs_is_its_model_everywhere(lowp_check):
    lowp_check("my_maddubs_avx2", "model", domain="full", examples=60)


def test_maddubs_is_not_exact_on_full_u8(lowp_check):
    from lowp.conformance import ConformanceFailure
    with pytest.raises(ConformanceFailure, match="pair-saturating"):
        lowp_check("my_maddubs_avx2", "exact", domain="full", examples=60)


def test_sdot_is_exact(lowp_check):
    lowp_check("my_sdot_neon", examples=30)
