"""The sans-I/O switch core: BMv2 JSON loading, generated code, tables and externs."""
