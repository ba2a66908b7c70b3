"""The nodes of a simulated network: workers (a real ``Session`` each), PBoxes (the PBox
core) and switches (forwarding, and the aggregation of the jobs placed on them)."""
