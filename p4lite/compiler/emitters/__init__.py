"""The compiler's emitters: the lowered program written out as p4c writes it.

``bmv2_json`` (p4c's double wrapping of expression parameters, p4c's text layout),
``p4info`` (the P4Info message from the control-plane model) and ``ids`` (P4Info ids
and aliases as p4c computes them). The last stage: nothing in the compiler but
the driver imports it.
"""
