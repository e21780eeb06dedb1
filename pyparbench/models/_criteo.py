"""Criteo Kaggle Display Advertising data set: feature counts and table sizes."""

from __future__ import annotations

__all__ = ["DENSE_FEATURES", "KAGGLE_TABLE_ROWS"]

DENSE_FEATURES = 13
# Rows of the 26 categorical features' tables, as the dlrm repository
# (facebookresearch/dlrm) derives them from the Kaggle training data.
KAGGLE_TABLE_ROWS = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
)
