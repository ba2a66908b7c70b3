"""One STF line being parsed: errors that carry its location, and its numbers and names.

Both grammars (strict.py, p4c's; lenient.py, p4lite's extensions) read values
through ``Line``: decimal, ``0x``/``0b``/``0o`` with ``*`` don't-care digits, and
dotted IPv4 addresses (which only the extensions may use).
"""

from __future__ import annotations

import re

from p4lite.stf.commands import Number, StfSyntaxError

NAME_PATTERN = r"[A-Za-z_$][A-Za-z0-9_$.\[\]:]*"  # ":" for sliced keys: h.f[7:4]
_NAME_RE = re.compile(NAME_PATTERN + r"$")
_IPV4_RE = re.compile(r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}")
_RADIX = {"0x": (16, 4), "0b": (2, 1), "0o": (8, 3)}


class Line:
    """One source line being parsed: raises errors that carry its location."""

    def __init__(self, filename: str, number: int) -> None:
        self.filename = filename
        self.number = number

    def error(self, message: str, column: int | None = None) -> StfSyntaxError:
        return StfSyntaxError(self.filename, self.number, message, column)

    def integer(self, text: str, what: str) -> int:
        number = self.number_value(text, what)
        if number.care is not None:
            raise self.error(f"{what} {text!r} may not contain '*' digits")
        return number.value

    def number_value(self, text: str, what: str) -> Number:
        prefix = text[:2].lower()
        if prefix in _RADIX:
            base, bits_per_digit = _RADIX[prefix]
            digits = text[2:].replace("_", "")
            if not digits:
                raise self.error(f"{what} {text!r} has no digits")
            care = None
            if "*" in digits:
                care = int("".join("0" if d == "*" else "1" for d in digits), 2)
                care = _spread_mask(care, len(digits), bits_per_digit)
            try:
                value = int(digits.replace("*", "0"), base)
            except ValueError:
                raise self.error(f"{what} {text!r} is not a valid number") from None
            return Number(text, value, len(digits) * bits_per_digit, care)
        if _IPV4_RE.fullmatch(text):
            octets = [int(o) for o in text.split(".")]
            if max(octets) > 255:
                raise self.error(f"{what} {text!r} is not an IPv4 address")
            return Number(text, int.from_bytes(bytes(octets), "big"), 32)
        if not text.isdigit():
            raise self.error(f"{what} {text!r} is not a number (use decimal, 0x, 0b, 0o or a.b.c.d)")
        return Number(text, int(text))

    def name(self, text: str, what: str) -> str:
        if not _NAME_RE.match(text):
            raise self.error(f"bad {what} name {text!r}")
        return text


def _spread_mask(digit_mask: int, ndigits: int, bits_per_digit: int) -> int:
    """Turn one bit per digit into ``bits_per_digit`` bits per digit."""
    ones = (1 << bits_per_digit) - 1
    result = 0
    for i in range(ndigits):
        if digit_mask >> (ndigits - 1 - i) & 1:
            result |= ones << ((ndigits - 1 - i) * bits_per_digit)
    return result
