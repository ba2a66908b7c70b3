"""The P4Runtime server: gRPC service, pipeline config, codec between P4Runtime and the core."""
