"""The compiler's front end: P4_16 text to the syntax tree (``ast.Program``).

``preprocess`` expands ``#include``/``#define``/``#if`` over the ``lexer``'s tokens,
``parser`` (declarations, statements) with ``parser_expr`` (expressions and types)
builds the tree; ``source_text`` keeps the original lines for later messages.
Stages after it (checks, lowering, emitters) import from here, never the reverse.
"""
