"""The review page: many segmented scans on one self-contained HTML page (``review_page.ReviewPage``)."""
from __future__ import annotations

from .review_page import ReviewPage

__all__ = ["ReviewPage"]
