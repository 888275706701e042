"""The numeric contract the RTL (``hdl``) and the golden model (``golden``) share.

A leaf package: it imports the standard library only, so both sides depend on it and
never on each other.
"""
