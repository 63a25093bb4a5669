"""Hexagon HVX: the integer instruction models (hvx.py) and the Q6_* intrinsics that map to them
(intrinsics.py), registered with lowp.isa_models.registry under arch 'hexagon'."""
from lowp.isa_models.hexagon import hvx, intrinsics  # noqa: F401  (registers the HVX models)
