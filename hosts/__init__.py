"""p4hub host side: wire protocol, quantization, the host agent, and the PBox aggregator."""
