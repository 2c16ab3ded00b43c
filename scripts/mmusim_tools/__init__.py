"""Shared code of mmusim's scripts (reproduce, sweep, tracediff, plot).

Python 3 standard library only; matplotlib is imported by mmusim_tools.plotting alone.
"""
