"""Stages 5-7: normalization, ensemble scoring and rectification."""
