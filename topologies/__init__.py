"""The emulated network: Mininet racks and leaf-spine fabrics (``rack``), their P4
switch (``p4switch``), link emulation (``linkem``) and management network (``mgmt``)."""
