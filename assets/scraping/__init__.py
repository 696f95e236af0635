"""Stages 3-4: fact-check articles and the appearances' media."""
