"""sciproxy.tti_demo: where the workshop demo's operator used to live; it is in sciproxy.tti now.

Kept so that ``import sciproxy.tti_demo as td`` keeps working: every name is sciproxy.tti's.
"""

from ._tti_demo import TtiDemoRun, ricker, tti_demo, tti_demo_dt_limit, tti_demo_flops  # noqa: F401

__all__ = ["tti_demo", "tti_demo_dt_limit", "tti_demo_flops", "ricker", "TtiDemoRun"]
