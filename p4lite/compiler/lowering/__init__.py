"""The compiler's lowering: the checked program to the BMv2 JSON object and the
control-plane model (``cpmodel``) P4Info is built from.

``lower_program`` drives the passes (``lower_parser``, ``lower_control``,
``lower_table``, ``lower_stmt``, ``lower_expr``, ``lower_checksum``, ``externs``)
over the shared ``context.Lowering``; ``assemble`` joins their pieces in p4c's key
order. Imports the front end and the checks, never the emitters.
"""
