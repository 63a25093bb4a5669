"""Re-export: the fixed-point arithmetic lives in lowp.isa_models.fixedpoint, so that kernels' behaviour models
(lowp.isa_models.requant) can compose MultiplyByQuantizedMultiplier without importing conformance."""
from lowp.isa_models.fixedpoint import *  # noqa: F401,F403
from lowp.isa_models.fixedpoint import _exponent, _first, _mbqm_parts, _rshift_away, _rshift_up  # noqa: F401
