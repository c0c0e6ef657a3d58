"""gather-harness: property-based correctness checks for distributed all_gather."""


def __getattr__(name: str) -> object:
    """``from harness import check_gather``, imported on first use (PEP 562): rank processes and
    the pytest plugin import this package and must not pull in the search engine."""
    if name == "check_gather":
        from harness.frontends.api import check_gather

        return check_gather
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
