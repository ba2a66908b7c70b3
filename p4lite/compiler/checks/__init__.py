"""The compiler's checks: what the syntax tree means, and what p4c's target refuses.

``types`` (semantic types), ``bindings`` (what a name means, scopes),
``program_env`` (the top level resolved: types, constants, errors, externs) and
``target_checks`` (p4c's BMv2 limits and unused-declaration warnings). They import
only the front end; lowering and the emitters build on them.
"""
