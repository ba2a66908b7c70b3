"""p4lite: an embedded P4_16 (v1model) target: compiler to BMv2 JSON + P4Info, and a software switch."""
