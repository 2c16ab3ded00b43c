"""Sizes with K/M/G/T suffixes, as mmusim reads them."""

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"'{text}' is not a size (bytes, or with a K/M/G/T suffix)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def format_size(n):
    for suffix in ["T", "G", "M", "K"]:
        u = _UNITS[suffix]
        if n >= u and n % u == 0:
            return f"{n // u}{suffix}"
    return str(n)
